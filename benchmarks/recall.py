"""Recall of fix-recompiles on real recompile fixes from other projects.

Every folder of benchmarks/recall/ is a small, self-contained reproduction of
a recompile that a real project fixed (NOTES.md: repo@sha, PR, cause, fix):
`before.py` is the code before the fix, `after.py` the project's own fix (or,
for a fix in a project's own layout of several modules, folders `before/`
and `after/`, each run as `python main.py` inside it), and each prints `GRAPHS <n>` (graphs compiled, counted by its backend) and
`OUT <value>` (a checksum, the same in both). For every case the tool of
*this* checkout (`python ROOT/__main__.py` with PYTHONPATH=ROOT and
FIX_RECOMPILES_NO_CACHE=1, default settings) works on a fresh copy of
before.py in a temporary folder, the way a user runs it:

    check .                            any finding? (codes)
    check --unproven .
    check --fix .                      then run the file: GRAPHS / OUT
    check --fix --unsafe-fixes .
    run --fix -- python before.py      then run the resulting file
    run --fix --unsafe-fixes -- ...    only when `run --fix` did not cure

A mode *cures* when the file it leaves compiles fewer graphs than before.py
with the same OUT; it *breaks* when that file crashes or prints another OUT.
The script prints one markdown table and a totals line.

    python benchmarks/recall.py [--cases a,b] [CASE ...]

Not a test (torch runs 4-8 times per case: about a minute each); nothing is
written into the repository (temporary folders only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = os.path.join(HERE, "recall")
TIMEOUT = 900
GRAPHS = re.compile(r"^GRAPHS (\d+)\s*$", re.MULTILINE)
OUT = re.compile(r"^OUT (\S+)\s*$", re.MULTILINE)
TOTAL = re.compile(r"^\s+total\s+(\d+) -> (\d+)$", re.MULTILINE)


@dataclass
class Program:
    """What running a file printed."""

    rc: int
    graphs: Optional[int]
    out: Optional[str]
    tail: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.graphs is not None and self.out is not None


@dataclass
class Outcome:
    """What one fixing mode left behind."""

    verdict: str  # "cured" | "broken" | "unchanged" | "not cured" | "error"
    text: str  # the table cell


@dataclass
class Case:
    name: str
    before: Program
    after: Program
    check: str = ""
    unproven: str = ""
    fixes: List[Tuple[str, Outcome]] = field(default_factory=list)  # (mode, outcome), in order
    found: bool = False


def tool_env() -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT, FIX_RECOMPILES_NO_CACHE="1")
    env.pop("TORCH_TRACE", None)
    env.pop("TORCH_LOGS", None)
    return env


def tool(args: List[str], cwd: str, merge: bool = True) -> subprocess.CompletedProcess:
    """The CLI of this checkout, as a user runs it (default settings)."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "__main__.py"), *args],
        cwd=cwd, env=tool_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True, timeout=TIMEOUT,
    )


def run_file(path: str) -> Program:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the program must not see the checkout
    env.pop("TORCH_TRACE", None)
    env.pop("TORCH_LOGS", None)
    try:
        proc = subprocess.run(
            [sys.executable, os.path.basename(path)], cwd=os.path.dirname(path), env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return Program(-1, None, None, "timeout")
    g, o = GRAPHS.findall(proc.stdout), OUT.findall(proc.stdout)
    tail = (proc.stderr.strip().splitlines() or [""])[-1]
    return Program(proc.returncode, int(g[-1]) if g else None, o[-1] if o else None, tail)


def same_out(a: Optional[str], b: Optional[str]) -> bool:
    if a is None or b is None:
        return False
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= 1e-4 * max(1.0, abs(x), abs(y))


def layout(case: str, which: str) -> Tuple[str, str]:
    """(what to copy, the file to run) of a case's ``which`` ("before" or
    "after"): ``before.py`` itself, or the folder ``before/`` and its ``main.py``."""
    folder = os.path.join(CASES, case, which)
    if os.path.isdir(folder):
        return folder, "main.py"
    return folder + ".py", which + ".py"


def is_case(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "before.py")) or os.path.isfile(os.path.join(folder, "before", "main.py"))


def fresh(tmp: str, case: str, mode: str, which: str = "before") -> str:
    """A fresh folder holding only a copy of before.py (or of the folder
    before/); returns the path of the file to run."""
    folder = os.path.join(tmp, case, mode)
    source, entry = layout(case, which)
    if os.path.isdir(source):
        shutil.copytree(source, folder)
    else:
        os.makedirs(folder)
        shutil.copy(source, folder)
    return os.path.join(folder, entry)


def read(path: str) -> str:
    """The text of the program whose entry file is ``path``: every .py file
    of its folder (a multi-file case), in a stable order."""
    folder = os.path.dirname(path)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".py")) if os.path.basename(path) == "main.py" else [os.path.basename(path)]
    parts = []
    for name in names:
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            parts.append(f"# {name}\n{fh.read()}")
    return "\n".join(parts)


def findings(tmp: str, case: str, mode: str, extra: List[str]) -> Tuple[str, bool]:
    """`check [extra] --format json .`: the cell (codes, or 'no') and whether anything was found."""
    path = fresh(tmp, case, mode)
    proc = tool(["check", *extra, "--format", "json", "."], os.path.dirname(path), merge=False)
    if proc.returncode not in (0, 1):
        return f"error (rc {proc.returncode})", False
    try:
        items = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return "error (output is not JSON)", False
    if not items:
        return "no", False
    codes = sorted({f"{f['code']}" + ("" if f.get("fix") else " (no fix)") for f in items})
    return ", ".join(codes), True


def judge(original: Program, before_text: str, path: str, note: str = "") -> Outcome:
    """Run the file a mode left behind and compare with the untouched before.py."""
    if read(path) == before_text:
        return Outcome("unchanged", "unchanged" + (f" ({note})" if note else ""))
    got = run_file(path)
    if not got.ok:
        why = got.tail[:80].replace("|", "\\|") or f"rc {got.rc}"
        return Outcome("broken", f"BROKEN: crash ({why})")
    if not same_out(original.out, got.out):
        return Outcome("broken", f"BROKEN: OUT {original.out} -> {got.out}")
    graphs = f"{original.graphs} -> {got.graphs}"
    if got.graphs < original.graphs:
        return Outcome("cured", f"cured {graphs}")
    return Outcome("not cured", f"applied, {graphs}")


def check_fix(tmp: str, case: str, mode: str, extra: List[str], original: Program, before_text: str) -> Outcome:
    path = fresh(tmp, case, mode)
    proc = tool(["check", "--fix", *extra, "."], os.path.dirname(path))
    if proc.returncode not in (0, 1):
        return Outcome("error", f"error (rc {proc.returncode})")
    return judge(original, before_text, path)


def run_fix(tmp: str, case: str, mode: str, extra: List[str], original: Program, before_text: str) -> Outcome:
    path = fresh(tmp, case, mode)
    try:
        proc = tool(["run", "--fix", *extra, "--", sys.executable, os.path.basename(path)], os.path.dirname(path))
    except subprocess.TimeoutExpired:
        return Outcome("error", "error (timeout)")
    out = proc.stdout
    applied = out.count("\nfixed: ") + out.startswith("fixed: ")
    if "the files were restored" in out:
        m = TOTAL.search(out)
        note = f"applied {applied}, {m.group(1)} -> {m.group(2)}, restored" if m else f"applied {applied}, restored"
    elif applied:
        note = f"applied {applied}"
    elif "nothing to fix" in out:
        note = "nothing to fix"
    elif proc.returncode not in (0, 1):
        note = f"rc {proc.returncode}"
    else:
        note = "nothing applied"
    return judge(original, before_text, path, note)


def measure(tmp: str, case: str) -> Case:
    entry = fresh(tmp, case, "original")
    before_text = read(entry)
    original = run_file(entry)
    after = run_file(fresh(tmp, case, "real-fix", "after"))
    c = Case(case, original, after)
    if not original.ok:
        c.check = f"before.py fails: {original.tail[:80]}"
        return c
    c.check, c.found = findings(tmp, case, "check", [])
    c.unproven, _ = findings(tmp, case, "unproven", ["--unproven"])
    c.fixes.append(("--fix", check_fix(tmp, case, "fix", [], original, before_text)))
    c.fixes.append(("--fix --unsafe-fixes", check_fix(tmp, case, "fix-unsafe", ["--unsafe-fixes"], original, before_text)))
    first = run_fix(tmp, case, "run-fix", [], original, before_text)
    c.fixes.append(("run --fix", first))
    if first.verdict != "cured":
        c.fixes.append(("run --fix --unsafe-fixes", run_fix(tmp, case, "run-fix-unsafe", ["--unsafe-fixes"], original, before_text)))
    return c


def cell(c: Case, *modes: str) -> str:
    got = [o.text for m, o in c.fixes if m in modes]
    if len(got) > 1 and len(set(got)) == 1:
        return got[0] + " (both)"
    return " / ".join(got) or "-"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="case folders of benchmarks/recall/ (default: all)")
    ap.add_argument("--cases", default="", help="comma-separated case folders (default: all)")
    args = ap.parse_args(argv)
    wanted = [n for n in args.cases.split(",") if n] + list(args.names)
    cases = sorted(d for d in os.listdir(CASES) if is_case(os.path.join(CASES, d)))
    unknown = [n for n in wanted if n not in cases]
    if unknown:
        print(f"error: no such case: {', '.join(unknown)} (have: {', '.join(cases)})", file=sys.stderr)
        return 2
    if wanted:
        cases = [c for c in cases if c in wanted]

    start = time.monotonic()
    results: List[Case] = []
    with tempfile.TemporaryDirectory(prefix="fix-recompiles-recall-") as tmp:
        for name in cases:
            t = time.monotonic()
            results.append(measure(tmp, name))
            print(f"{name}: {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)

    print("| case | graphs before -> real fix | check | --unproven | --fix | --fix --unsafe-fixes | run --fix / --unsafe-fixes | broken |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in results:
        real = f"{c.before.graphs} -> {c.after.graphs}"
        if not c.after.ok or not same_out(c.before.out, c.after.out):
            real += f" (after.py: rc {c.after.rc}, OUT {c.after.out} vs {c.before.out})"
        broken = [m for m, o in c.fixes if o.verdict == "broken"]
        print(
            f"| {c.name} | {real} | {c.check} | {c.unproven} | {cell(c, '--fix')} | {cell(c, '--fix --unsafe-fixes')} "
            f"| {cell(c, 'run --fix', 'run --fix --unsafe-fixes')} | {', '.join(broken) or 'no'} |"
        )

    def cured(*modes: str) -> int:
        return sum(any(m in modes and o.verdict == "cured" for m, o in c.fixes) for c in results)

    m = len(results)
    print(
        f"\nfound by default check: {sum(c.found for c in results)} of {m}; "
        f"cured by check --fix: {cured('--fix')} ({cured('--fix', '--fix --unsafe-fixes')} with --unsafe-fixes); "
        f"cured by run --fix: {cured('run --fix')} ({cured('run --fix', 'run --fix --unsafe-fixes')} with --unsafe-fixes); "
        f"broken: {sum(any(o.verdict == 'broken' for _, o in c.fixes) for c in results)} of {m}"
    )
    print(f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
