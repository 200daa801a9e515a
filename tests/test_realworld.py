"""The real-code suite (issue 12): what really recompiles gets a finding, the rest gets none.

``tests/realworld/*.py`` are small programs in the shape of public training
code; each header names the repo and commit (or PR) that shows the pattern and
the graph counts measured with real torch 2.13 (``tests/runtime_probe.py``).
A program is a file, or a folder holding ``main.py`` and the modules it
imports (for cross-module forms; analysed as one project run, the CLI's
way). Directives, read from the programs themselves (header in the file or in
``main.py``; markers in any file):

    # realworld: positive fix=safe graphs=2        first line; fix=safe|unsafe|none
    # realworld: negative graphs=3 [limit]         "limit": the run hits the recompile limit
    # realworld: positive fix=safe graphs=8 target=2.13    analysed for that --target-torch
    ...  # expect: FR003                           a finding of this code is required on this line
    ...  # expect: FR003 [name]                    ... on at least one of the lines marked [name]
    ...  # allow: FR006 (why)                      a finding of this code here is real, not required

Where a finding is expected (today's reporting convention, kept): FR001 on
the `dynamic=False` line, FR003 on the call that passes the float (where the
wrap would go), FR004 on the optimizer's construction and on an lr write that
must become `.fill_()`, FR005 on the compile site, FR006 on the loop that
holds the bound. `fix=none` means: report, and offer no fix, safe or unsafe,
because the analysis can know no rewrite helps (or it breaks the program).

What counts as a *default finding*: every finding ``process_source`` returns
with ``Settings()`` -- no flags -- whatever its fix: safe, unsafe (held back)
or none (report only). All of them are printed by a plain
``fix-recompiles PATH`` and make it exit 1, so each one costs the user a look;
a negative program must get none at all. Only a future opt-in flag (the issue's
"off by default, behind one documented opt-in flag") may add findings there,
and this suite does not test it.

Expectations the tool does not meet yet are ``xfail(strict=True)`` with the
form it does not follow, so they flip (XPASS fails) when the engine improves:
then delete the entry from the table below.

The runtime tests (marker ``runtime``) run real torch in child processes
through tests/runtime_probe.py (tests/golden.py's ``probe`` and
``runtime_report``: forks of a warm torch process, each distinct program run
once per session whichever test asks first): a safe fix the
tool offers on a positive must compile fewer graphs (no recompile-limit hit)
with the same printed output as eager; each program's recorded graph count
(and limit hit) must still hold on the installed torch; and every fix offered
(safe or unsafe) must leave a program that runs and prints the same. The
probe's eager reference runs with dynamo disabled, which `fullgraph=True`
refuses, so `fullgraph=True` appears only where no cure is run
(`pos_fullgraph_temperature_branch`, negatives).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

import pytest

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.findings import Safety
from codemods.pipeline.runner import run
from golden import probe, runtime_report

HERE = os.path.dirname(os.path.abspath(__file__))
REALWORLD = os.path.join(HERE, "realworld")

_HEADER = re.compile(r"^#\s*realworld:\s*(positive|negative)\b(.*)$")
_EXPECT = re.compile(r"#\s*expect:\s*(FR\d{3})(?:\s*\[(\w+)\])?")
_ALLOW = re.compile(r"#\s*allow:\s*(FR\d{3})")


@dataclass
class Program:
    name: str
    #: the file run (the program itself, or main.py of a folder program)
    path: str
    #: folder of a multi-file program, else None
    root: Optional[str]
    kind: str  # "positive" | "negative"
    fix: str  # "safe" | "unsafe" | "none" ("" for negatives)
    graphs: int
    limit: bool
    #: the --target-torch the program is analysed for (``target=2.13``), else
    #: none (the library default: the oldest spellings, the release unknown)
    target: Optional[Tuple[int, int]] = None
    #: (code, group) -> {(file, line)}; a finding of `code` is required on one of them
    expect: Dict[Tuple[str, str], Set[Tuple[str, int]]] = field(default_factory=dict)
    #: (file, code, line) triples that may (not must) get a finding
    allow: Set[Tuple[str, str, int]] = field(default_factory=set)

    def files(self) -> Dict[str, str]:
        """file name relative to the program -> absolute path"""
        if self.root is None:
            return {os.path.basename(self.path): self.path}
        return {n: os.path.join(self.root, n) for n in sorted(os.listdir(self.root)) if n.endswith(".py")}

    def read(self, rel: str) -> bytes:
        with open(self.files()[rel], "rb") as fh:
            return fh.read()

    def expected_triples(self) -> Set[Tuple[str, str, int]]:
        return {(rel, code, line) for (code, _), places in self.expect.items() for rel, line in places}


def load_program(entry: str) -> Program:
    root = entry if os.path.isdir(entry) else None
    path = os.path.join(entry, "main.py") if root else entry
    with open(path, encoding="utf-8") as fh:
        first = fh.readline()
    m = _HEADER.match(first.strip())
    assert m, f"{path}: first line must be `# realworld: positive|negative ...`"
    opts = dict(o.split("=", 1) if "=" in o else (o, "1") for o in m.group(2).split())
    prog = Program(
        name=os.path.basename(entry)[: -len(".py")] if root is None else os.path.basename(entry),
        path=path,
        root=root,
        kind=m.group(1),
        fix=opts.get("fix", ""),
        graphs=int(opts["graphs"]),
        limit="limit" in opts,
        target=tuple(int(v) for v in opts["target"].split(".")[:2]) if "target" in opts else None,  # type: ignore[arg-type]
    )
    for rel, full in prog.files().items():
        with open(full, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        for number, text in enumerate(lines, 1):
            for code, group in _EXPECT.findall(text):
                prog.expect.setdefault((code, group or f"{rel}:{number}"), set()).add((rel, number))
            for code in _ALLOW.findall(text):
                prog.allow.add((rel, code, number))
    if prog.kind == "positive":
        assert prog.expect, f"{path}: a positive needs at least one `# expect: FRxxx`"
        assert prog.fix in ("safe", "unsafe", "none"), f"{path}: fix=safe|unsafe|none"
    else:
        assert not prog.expect, f"{path}: a negative expects nothing"
    return prog


PROGRAMS: List[Program] = [
    load_program(os.path.join(REALWORLD, n))
    for n in sorted(os.listdir(REALWORLD))
    if n.endswith(".py") or os.path.isfile(os.path.join(REALWORLD, n, "main.py"))
]
BY_NAME = {p.name: p for p in PROGRAMS}
POSITIVES = [p for p in PROGRAMS if p.kind == "positive"]
NEGATIVES = [p for p in PROGRAMS if p.kind == "negative"]


# --- what the tool does not follow yet (today's engine); delete an entry when it XPASSes ---

NOT_FOUND = {
}

#: programs that get a default finding they should not get
EXTRA_FINDING: dict = {
    # none left: constant-width slices, intent comments, a raised limit,
    # disable_cache_limit(), tensors already, bounded warm-up and mark_static
    # give no default FR001 finding, `dynamic=<variable>` is --unproven only,
    # and an lr made a tensor by a helper (open_clip's `tensorize_learning_rate`) no FR004
}

#: positives whose expected fix (kind given by `fix=`) is not offered as such
FIX_NOT_OFFERED = {
    name: "no finding yet: " + reason
    for name, reason in NOT_FOUND.items()
}


def _params(programs, table):
    out = []
    for p in programs:
        marks = [pytest.mark.xfail(strict=True, reason=table[p.name])] if p.name in table else []
        out.append(pytest.param(p, id=p.name, marks=marks))
    return out


@dataclass
class Analysis:
    #: (file, finding) for every default finding of the program
    findings: List[Tuple[str, object]]
    #: file -> fixed bytes, for the files a fix changes
    new: Dict[str, bytes]


def analyse(prog: Program, settings: Settings = Settings()) -> Analysis:
    """One file: ``process_source`` in-process. A folder: one run over it, the
    way the CLI runs (project index, so cross-module facts count)."""
    if prog.target is not None:
        settings = dataclasses.replace(settings, target_torch=prog.target)
    if prog.root is None:
        rel = os.path.basename(prog.path)
        data = prog.read(rel)
        result = process_source(prog.path, os.path.relpath(prog.path, HERE), data, settings)
        assert result.error is None, f"{prog.name}: {result.error}"
        return Analysis([(rel, f) for f in result.findings], {rel: result.new} if result.new is not None else {})
    cwd = os.getcwd()
    os.chdir(prog.root)
    try:
        outcome = run(["."], settings)
    finally:
        os.chdir(cwd)
    assert not outcome.errors, f"{prog.name}: {outcome.errors}"
    findings, new = [], {}
    for r in outcome.results:
        assert r.error is None, f"{prog.name}: {r.display_path}: {r.error}"
        rel = r.display_path.replace(os.sep, "/")
        rel = rel[2:] if rel.startswith("./") else rel
        findings.extend((rel, f) for f in r.findings)
        if r.new is not None and r.new != r.original:
            new[rel] = r.new
    return Analysis(findings, new)


def write_fixed(prog: Program, new: Dict[str, bytes], dest: str) -> str:
    """Write the program (with ``new`` files replaced) under ``dest``; return the file to run."""
    os.makedirs(dest, exist_ok=True)
    for rel in prog.files():
        with open(os.path.join(dest, rel), "wb") as fh:
            fh.write(new.get(rel, prog.read(rel)))
    return os.path.join(dest, os.path.basename(prog.path))


def _describe(findings) -> str:
    return "\n".join(f"  {rel}:{f.line}: {f.code} [{f.fix.safety.value if f.fix else 'report only'}] {f.message}" for rel, f in findings) or "  (none)"


def test_suite_is_complete():
    """Every form of issue 12 has at least one program; the directives parse."""
    assert len(POSITIVES) >= 15 and len(NEGATIVES) >= 8
    stale = (set(NOT_FOUND) | set(EXTRA_FINDING) | set(FIX_NOT_OFFERED) | set(UNSAFE_CURE_XFAIL)) - set(BY_NAME)
    assert not stale, f"xfail tables name programs that do not exist: {sorted(stale)}"


@pytest.mark.parametrize("prog", _params(POSITIVES, NOT_FOUND))
def test_positive_expected_findings(prog: Program):
    """The expected rule code at the expected line (one of the lines of a group)."""
    findings = analyse(prog).findings
    missing = [
        f"{code} on " + " or ".join(f"{rel}:{line}" for rel, line in sorted(places))
        for (code, _), places in prog.expect.items()
        if not any(f.code == code and (rel, f.line) in places for rel, f in findings)
    ]
    assert not missing, f"{prog.name}: missing {missing}; found:\n{_describe(findings)}"


@pytest.mark.parametrize("prog", _params(PROGRAMS, EXTRA_FINDING))
def test_no_other_default_finding(prog: Program):
    """Negatives: no default finding at all, files unchanged. Positives: nothing
    besides the expected (or explicitly allowed) findings."""
    result = analyse(prog)
    allowed = prog.expected_triples() | prog.allow
    extra = [(rel, f) for rel, f in result.findings if (rel, f.code, f.line) not in allowed]
    assert not extra, f"{prog.name}: unexpected default findings:\n{_describe(extra)}"
    if prog.kind == "negative":
        assert not result.new


@pytest.mark.parametrize("prog", _params(POSITIVES, FIX_NOT_OFFERED))
def test_positive_fix_offered(prog: Program):
    """fix=safe: a safe fix on an expected finding, applied by plain --fix.
    fix=none: the expected findings are reported with no fix, safe or unsafe
    (an offered fix must never be one the analysis knows cannot help or breaks).
    fix=unsafe: offered, but held back by default."""
    result = analyse(prog)
    expected = [f for rel, f in result.findings if (rel, f.code, f.line) in prog.expected_triples()]
    assert expected, f"{prog.name}: no expected finding; found:\n{_describe(result.findings)}"
    shown = _describe([("", f) for f in expected])
    if prog.fix == "safe":
        assert any(f.fix is not None and f.fix.safety is Safety.SAFE for f in expected), shown
        assert result.new, f"{prog.name}: plain --fix changes nothing"
    elif prog.fix == "none":
        assert all(f.fix is None for f in expected), shown
    else:
        # a finding fixed together with another (one lr write shared) carries no fix of its own
        assert all((f.fixed_by or f).fix is not None and (f.fixed_by or f).fix.safety is Safety.UNSAFE for f in expected), shown


CURE_XFAIL = dict(FIX_NOT_OFFERED)


@pytest.mark.runtime
@pytest.mark.parametrize("prog", _params([p for p in POSITIVES if p.fix == "safe"], CURE_XFAIL))
def test_positive_fix_cures_at_runtime(prog: Program):
    """Plain --fix output, run under real torch: fewer graphs, no recompile-limit
    hit, the same printed output as eager."""
    result = analyse(prog)
    assert result.new, f"{prog.name}: plain --fix changes nothing; findings:\n{_describe(result.findings)}"
    with tempfile.TemporaryDirectory() as tmp:
        before = write_fixed(prog, {}, os.path.join(tmp, "before"))
        after = write_fixed(prog, result.new, os.path.join(tmp, "after"))
        report = runtime_report(before, after)
    eager, b, a = report["eager"], report["before"], report["after"]
    fixed = "\n".join(data.decode() for data in result.new.values())
    assert b["graphs"] == prog.graphs, f"{prog.name}: the unfixed program compiled {b['graphs']} graphs, header says {prog.graphs}"
    assert a["graphs"] < b["graphs"], f"{prog.name}: graphs {b['graphs']} -> {a['graphs']}\n{fixed}"
    assert a["limit_hits"] == 0, f"{prog.name}: the fixed program still hits the recompile limit"
    assert b["stdout"] == eager["stdout"]
    assert a["stdout"] == eager["stdout"], f"{prog.name}: output changed\neager: {eager['stdout']}\nfixed: {a['stdout']}"


def _compiled_run(path: str) -> dict:
    """One compiled run with the probe's counting backend (which runs the
    captured graphs, so a program prints what eager prints), in a fresh fork of
    the warm torch process; a run that fails gives {"error": ...}."""
    try:
        r = probe(path, compiled=True)
    except AssertionError as exc:
        return {"error": str(exc)}
    return {"graphs": r["graphs"], "limit_hits": r["limit_hits"], "stdout": r["stdout"]}


def _run_compiled(scripts: Dict[str, str]) -> Dict[str, dict]:
    """Run each script once, compiled with the probe's counting backend:
    name -> {"graphs", "limit_hits", "stdout"} or {"error": ...}."""
    return {name: _compiled_run(path) for name, path in scripts.items()}


def _program_report(prog: Program, new: Dict[str, bytes]) -> dict:
    """The program, with ``new`` files replaced, copied alone into a fresh folder
    and run compiled. The copy's folder holds what the runtime-cure test writes
    for the same program, so tests/golden.py's ``probe`` runs each distinct
    program once per session, whichever test (or xdist worker) asks first."""
    with tempfile.TemporaryDirectory() as tmp:
        return _compiled_run(write_fixed(prog, new, os.path.join(tmp, prog.name)))


@functools.lru_cache(maxsize=None)
def _original_report(name: str) -> dict:
    return _program_report(BY_NAME[name], {})


@functools.lru_cache(maxsize=None)
def _fixed_report(name: str) -> Optional[dict]:
    """All offered fixes (safe and unsafe) applied; None when none is offered."""
    prog = BY_NAME[name]
    new = analyse(prog, Settings(unsafe_fixes=True)).new
    return _program_report(prog, new) if new else None


def _suite_report() -> Dict[str, dict]:
    """Every program as written (name), and every program with all offered fixes
    applied, safe and unsafe (name + "@fixed"), compiled with the probe's
    counting backend."""
    out: Dict[str, dict] = {}
    for p in PROGRAMS:
        out[p.name] = _original_report(p.name)
        fixed = _fixed_report(p.name)
        if fixed is not None:
            out[p.name + "@fixed"] = fixed
    return out


@pytest.mark.runtime
@pytest.mark.parametrize("prog", _params(PROGRAMS, {}))
def test_recorded_graph_counts_hold(prog: Program):
    """The suite is only a spec if its programs still behave as their headers
    say: positives really recompile (or hit the limit), negatives stay bounded
    and never hit the limit."""
    if prog.kind == "positive":
        assert prog.graphs > 1 or prog.limit, f"{prog.name}: a positive must recompile"
    else:
        assert not prog.limit, f"{prog.name}: a negative must not hit the recompile limit"
    r = _original_report(prog.name)
    assert "error" not in r, r.get("error")
    assert (r["graphs"], r["limit_hits"] > 0) == (prog.graphs, prog.limit), f"measured {r['graphs']} graphs, limit hit {r['limit_hits'] > 0}"


#: positives whose unsafe fix does not cure yet
UNSAFE_CURE_XFAIL: dict = {}


@pytest.mark.runtime
@pytest.mark.parametrize("prog", _params([p for p in POSITIVES if p.fix == "unsafe"], UNSAFE_CURE_XFAIL))
def test_positive_unsafe_fix_cures_at_runtime(prog: Program):
    """fix=unsafe: every offered fix applied (``--unsafe-fixes``), run under
    real torch: fewer graphs (or the limit no longer hit), the same output."""
    fixed = _fixed_report(prog.name)
    assert fixed is not None, f"{prog.name}: --unsafe-fixes changes nothing"
    original = _original_report(prog.name)
    assert "error" not in fixed and "error" not in original, (fixed.get("error"), original.get("error"))
    assert fixed["graphs"] < original["graphs"] or (original["limit_hits"] and not fixed["limit_hits"]), (original["graphs"], fixed["graphs"])
    assert fixed["stdout"] == original["stdout"]


#: programs whose offered fixes (safe or unsafe) break them today
OFFERED_FIX_BREAKS: dict = {
    # none left: a branch on the value under fullgraph=True gets no fix
}


@pytest.mark.runtime
@pytest.mark.parametrize("prog", _params(PROGRAMS, OFFERED_FIX_BREAKS))
def test_offered_fixes_never_crash(prog: Program):
    """Every fix the tool offers, safe or unsafe, applied: the program still
    runs under real torch and prints what the original printed."""
    fixed = _fixed_report(prog.name)
    if fixed is None:
        assert not analyse(prog, Settings(unsafe_fixes=True)).new  # nothing offered: nothing to break
        return
    assert "error" not in fixed, f"fixed program crashed: {fixed['error']}"
    original = _original_report(prog.name)
    assert "error" not in original, f"the program itself crashed: {original['error']}"
    assert fixed["stdout"] == original["stdout"], f"fixed program printed\n{fixed['stdout']}instead of\n{original['stdout']}"
