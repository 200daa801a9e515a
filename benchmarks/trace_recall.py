"""How `fix-recompiles run --fix` does on the realworld programs.

For every positive program in tests/realworld/ (a file, or a folder run by
its main.py; the header says
`fix=safe|unsafe|none` and how many graphs it compiles), copy it to a scratch
folder, run `fix-recompiles run --fix -- python PROGRAM` (the checkout this
script lives in), and print one row: the fix the header expects, whether the
trace matched and fixed anything, and the graphs before -> after. A `fix=safe`
program should end with fewer graphs; `fix=none` / `fix=unsafe` ones should
be reported and left unchanged (plain --fix).

    python benchmarks/trace_recall.py [NAME ...]

Not a test (it runs torch once or twice per program: minutes); the numbers go
into the session notes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REALWORLD = os.path.join(ROOT, "tests", "realworld")
HEADER = re.compile(r"^# realworld: positive fix=(?P<fix>\w+) graphs=(?P<graphs>\d+)")
TOTAL = re.compile(r"^\s+total\s+(\d+) -> (\d+)$", re.MULTILINE)
#: `run --fix` in rounds: the last line says what the rounds kept in all
OVER = re.compile(r"^Over \d+ rounds: (\d+) -> (\d+) graphs\.$", re.MULTILINE)
ROUND = re.compile(r"^Round \d+: ", re.MULTILINE)


def main(names) -> int:
    programs = sorted(
        f for f in os.listdir(REALWORLD)
        if f.startswith("pos_") and (f.endswith(".py") or os.path.isfile(os.path.join(REALWORLD, f, "main.py")))
    )
    if names:
        programs = [p for p in programs if p.removesuffix(".py") in names]
    env = dict(os.environ, PYTHONPATH=ROOT)
    rows, cured, safe = [], 0, 0
    for name in programs:
        folder = not name.endswith(".py")  # a multi-file program: run its main.py
        main = os.path.join(REALWORLD, name, "main.py") if folder else os.path.join(REALWORLD, name)
        with open(main, encoding="utf-8") as fh:
            m = HEADER.match(fh.readline())
        if m is None:
            continue
        with tempfile.TemporaryDirectory(prefix="trace-recall-") as tmp:
            if folder:
                tmp = os.path.join(tmp, name)
                shutil.copytree(os.path.join(REALWORLD, name), tmp)
            else:
                shutil.copy(main, tmp)
            proc = subprocess.run(
                [sys.executable, "-m", "cli", "run", "--fix", "--", sys.executable, os.path.basename(main)],
                cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
            )
        out = proc.stdout
        fixed = out.count("\nfixed: ") + out.startswith("fixed: ")
        # a later round taken back leaves the rounds before it: what counts is
        # the rounds' total when one was kept, else the first round's result
        total = OVER.search(out) or TOTAL.search(out)
        graphs = f"{total.group(1)} -> {total.group(2)}" if total else f"{m.group('graphs')} (unchanged)"
        first_round = ROUND.split(out, maxsplit=1)[0]
        restored = "restored" if "the files were restored" in first_round and not OVER.search(out) else ""
        ok = total is not None and int(total.group(2)) < int(total.group(1)) and not restored
        if m.group("fix") == "safe":
            safe += 1
            cured += ok
        rows.append((name.removesuffix(".py"), m.group("fix"), str(fixed), graphs, restored))
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"{'program'.ljust(width)}  expected  fixed  graphs           note")
    for r in rows:
        print(f"{r[0].ljust(width)}  {r[1].ljust(8)}  {r[2].ljust(5)}  {r[3].ljust(15)}  {r[4]}")
    print(f"\nfix=safe programs cured by `run --fix`: {cured} of {safe}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
