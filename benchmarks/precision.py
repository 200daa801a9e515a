"""Precision of fix-recompiles' default findings on the pinned training repos.

    python benchmarks/precision.py [PARENT] [--repos a,b] [--json OUT]

PARENT holds one folder per repo of /work/shared/REALREPOS.md (nanochat,
modded-nanogpt, torchtune, ao, torchtitan, litgpt, gpt-fast), exported at
the pinned commits (default: benchmarks/training if it exists, else
/tmp/realrepos). For each repo the tool of *this* checkout is run the way a
user runs it, with default settings:

    fix-recompiles --no-cache --format json REPO

Every finding it reports is a default finding (safe, unsafe or report-only:
all are printed and make the run exit 1). Each one is matched with the
judgement table of benchmarks/PRECISION.md, keyed by repo + path + code + the
stripped text of the finding's line (so that line shifts keep their judgement;
identical lines of one file share one judgement). The script prints every
finding with its verdict, the unjudged ones, the judgements that matched
nothing (stale), and precision = real / judged.

Exit code: 0 when every finding is judged, 1 when some are not (judge them in
PRECISION.md), 2 on an error running the tool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TABLE = os.path.join(HERE, "PRECISION.md")
REPOS = ["nanochat", "modded-nanogpt", "torchtune", "ao", "torchtitan", "litgpt", "gpt-fast"]

Key = Tuple[str, str, str, str]  # repo, path in repo, code, stripped line text


@dataclass
class Judgement:
    verdict: str  # "real" | "false"
    reason: str
    used: int = 0


@dataclass
class Finding:
    repo: str
    path: str
    line: int
    code: str
    message: str
    text: str

    @property
    def key(self) -> Key:
        return (self.repo, self.path, self.code, self.text)


def default_parent() -> str:
    local = os.path.join(HERE, "training")
    return local if os.path.isdir(local) else "/tmp/realrepos"


def run_tool(parent: str, repo: str) -> List[dict]:
    """The CLI of this checkout (not whatever is installed), default settings."""
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from cli import main; sys.exit(main())"
    env = dict(os.environ, FIX_RECOMPILES_NO_CACHE="1")
    proc = subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--format", "json", repo],
        cwd=parent,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"error: fix-recompiles on {repo} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout or "[]")


def line_text(parent: str, path: str, line: int) -> str:
    try:
        with open(os.path.join(parent, path), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
        return lines[line - 1].strip()
    except (OSError, IndexError):
        return ""


def collect(parent: str, repos: List[str]) -> List[Finding]:
    out: List[Finding] = []
    for repo in repos:
        if not os.path.isdir(os.path.join(parent, repo)):
            print(f"warning: {repo} not found under {parent}; skipped", file=sys.stderr)
            continue
        for f in run_tool(parent, repo):
            path = f["path"].replace(os.sep, "/")
            rel = path[len(repo) + 1 :] if path.startswith(repo + "/") else path
            out.append(Finding(repo, rel, f["line"], f["code"], f["message"], line_text(parent, path, f["line"])))
    return out


# --- the judgement table -------------------------------------------------------

_ROW = re.compile(r"^\|(.*)\|\s*$")


def _cells(row: str) -> List[str]:
    # split on | not escaped as \|
    parts = re.split(r"(?<!\\)\|", row.strip()[1:-1])
    return [p.strip().replace("\\|", "|") for p in parts]


def _untick(cell: str) -> str:
    cell = cell.strip()
    if cell.startswith("`") and cell.endswith("`") and len(cell) >= 2:
        return cell[1:-1]
    return cell


def load_table(path: str = TABLE) -> Dict[Key, Judgement]:
    """Rows of the table under the '## Judged findings' heading:
    | repo | path | code | line text | verdict | reason |"""
    table: Dict[Key, Judgement] = {}
    if not os.path.exists(path):
        return table
    in_section = False
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            if raw.startswith("## "):
                in_section = raw.strip().lower().startswith("## judged findings")
                continue
            if not in_section or not _ROW.match(raw):
                continue
            cells = _cells(raw)
            if len(cells) != 6 or cells[0] in ("repo", "") or set(cells[0]) <= {"-", ":", " "}:
                continue
            repo, fpath, code, text, verdict, reason = cells
            verdict = verdict.lower()
            if verdict not in ("real", "false"):
                raise SystemExit(f"error: {path}: verdict must be real or false: {raw.strip()}")
            table[(repo, _untick(fpath), code, _untick(text))] = Judgement(verdict, reason)
    return table


def format_row(f: Finding, verdict: str = "?", reason: str = "") -> str:
    text = f.text.replace("|", "\\|")
    return f"| {f.repo} | `{f.path}` | {f.code} | `{text}` | {verdict} | {reason} |"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parent", nargs="?", default=None, help="folder holding one folder per repo")
    ap.add_argument("--repos", default=",".join(REPOS), help="comma-separated repo folder names")
    ap.add_argument("--json", dest="json_out", help="also write the findings with verdicts as JSON")
    args = ap.parse_args(argv)
    parent = os.path.abspath(args.parent or default_parent())
    repos = [r for r in args.repos.split(",") if r]

    findings = collect(parent, repos)
    table = load_table()
    unjudged: List[Finding] = []
    verdicts = Counter()
    rows = []
    for f in findings:
        j = table.get(f.key)
        if j is None:
            unjudged.append(f)
            verdict, reason = "UNJUDGED", ""
        else:
            j.used += 1
            verdict, reason = j.verdict, j.reason
            verdicts[verdict] += 1
        rows.append((f, verdict, reason))
        print(f"{f.repo}/{f.path}:{f.line}: {f.code} [{verdict}] {f.message}" + (f"\n    -> {reason}" if reason else ""))

    per_repo = Counter(f.repo for f in findings)
    print()
    print("findings per repo: " + ", ".join(f"{r} {per_repo.get(r, 0)}" for r in repos))
    judged = verdicts["real"] + verdicts["false"]
    print(f"default findings: {len(findings)}; judged {judged}: real {verdicts['real']}, false {verdicts['false']}; unjudged {len(unjudged)}")
    if judged:
        print(f"precision: {verdicts['real']}/{judged} = {100.0 * verdicts['real'] / judged:.1f} %")
    else:
        print("precision: n/a (no judged finding)")
    stale = [k for k, j in table.items() if j.used == 0 and k[0] in repos]
    if stale:
        print(f"\n{len(stale)} judgement(s) match no current finding (fixed, or the line changed):")
        for repo, path, code, text in stale:
            print(f"  {repo}/{path}: {code} `{text}` [{table[(repo, path, code, text)].verdict}]")
    if unjudged:
        print(f"\n{len(unjudged)} finding(s) to judge -- add these rows to benchmarks/PRECISION.md:")
        seen = set()
        for f in unjudged:
            if f.key not in seen:
                seen.add(f.key)
                print(format_row(f))
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(
                [dict(repo=f.repo, path=f.path, line=f.line, code=f.code, message=f.message, text=f.text, verdict=v, reason=r) for f, v, r in rows],
                fh,
                indent=1,
            )
    return 1 if unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
