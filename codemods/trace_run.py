"""Trace-guided fixing: run a command under ``TORCH_TRACE``, read which compiled
functions recompiled and why, and apply only the findings of the passes at the
sites the trace implicates.

``fix-recompiles run [--diff|--fix] -- CMD...`` and ``fix-recompiles check PATH
--from-trace DIR`` both end in :func:`guide`.  The command runs in its own
process; this module never imports torch.

A finding *matches* a traced code object when it is in the same file and

- it lies on a compile site (the compile call, its options, or a call of the
  compiled callable) whose compiled function -- the decorated or wrapped
  ``def``, or ``forward`` of a compiled ``nn.Module`` -- starts at the code
  object's ``co_firstlineno`` (on Python 3.11 the first decorator's line, or
  the ``def`` line: both are accepted), and
- its rule cures one of the causes observed for that code object
  (:data:`codemods.trace.CURES`).

Optimizer-lr recompiles happen in torch's own ``step``; they are mapped to the
user file whose frame called it, and match every FR004 finding of that file.

A matched unsafe fix whose rule is marked ``upgrade`` for the cause becomes
safe: the trace is the evidence of variation it lacked.  The finding's message
says so.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ._lazy import cst

from . import trace as tr
from .compile_sites import def_first_lines
from .context import Evidence, FileContext, Settings
from .engine import analyze, render, should_apply
from .findings import Edit, FileError, Finding, Fix, Safety
from .project import build_project_index
from .transforms import BY_CODE
from .writer import write_atomic, write_changed


@dataclass
class Match:
    finding: Finding
    entry: tr.CodeEntry
    cause: str
    upgraded: bool = False


@dataclass
class GuidedFile:
    path: str
    display_path: str
    original: bytes
    new: Optional[bytes] = None
    matches: List[Match] = field(default_factory=list)
    #: findings of this file the trace does not implicate (not applied)
    others: List[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.original


@dataclass
class Guided:
    files: List[GuidedFile] = field(default_factory=list)
    errors: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def matches(self) -> List[Match]:
        return [m for f in self.files for m in f.matches]


# -- files the trace names -----------------------------------------------------


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def entry_file(entry: tr.CodeEntry) -> Optional[str]:
    """The user file a code object belongs to (torch-internal code objects: the
    file of the user frame that reached them)."""
    if entry.filename and not tr.is_library_file(entry.filename):
        return entry.filename
    if entry.user_frame is not None:
        return entry.user_frame[0]
    return None


def implicated_files(
    trace: tr.Trace, within: Optional[Sequence[str]] = None
) -> List[str]:
    """Existing user files named by recompiling code objects, in trace order;
    with ``within``, only files under those paths."""
    roots = [_real(p) for p in within] if within else None
    out: List[str] = []
    seen = set()
    for entry in trace.entries:
        if not entry.reasons and not entry.limit_hit:
            continue
        path = entry_file(entry)
        if not path or not os.path.isfile(path):
            continue
        real = _real(path)
        if real in seen:
            continue
        if roots is not None and not any(
            real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots
        ):
            continue
        seen.add(real)
        out.append(path)
    return out


# -- matching ------------------------------------------------------------------


def _forward(cls: ast.ClassDef) -> Optional[ast.AST]:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward":
            return stmt
    return None


def site_first_lines(model, site) -> List[int]:
    """Lines a traced code object of this compile site can start on."""
    lines: List[int] = []
    if site.target_def is not None:
        lines.extend(def_first_lines(site.target_def))
    for fn in {id(f): f for f in site.call_defs.values() if f is not None}.values():  # compiled by a project decorator
        lines.extend(def_first_lines(fn))
    if site.target is not None and not isinstance(site.target, (ast.FunctionDef, ast.AsyncFunctionDef)):
        cls = model.module_class_of(site.target)
        if cls is None and isinstance(site.target, ast.Attribute) and isinstance(site.target.value, ast.Name):
            # model.compile() / torch.compile(model.forward)
            cls = model.module_class_of(site.target.value)
        if cls is not None:
            fwd = _forward(cls)
            if fwd is not None:
                lines.extend(def_first_lines(fwd))
    return lines


def _span(source, node) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    (l1, c1), (l2, c2) = source.start(node), source.end(node)
    return (l1, c1 + 1), (l2, c2 + 1)


def site_spans(source, site) -> List[Tuple[Tuple[int, int], Tuple[int, int]]]:
    nodes = [site.node]
    if site.options_call is not None:
        nodes.append(site.options_call)
    nodes.extend(site.calls)
    return [_span(source, n) for n in nodes]


def _inside(finding: Finding, span) -> bool:
    start, end = span
    return (
        start <= (finding.line, finding.column)
        and (finding.end_line, finding.end_column) <= end
    )


# -- library functions compiled in user code ------------------------------------------
#
# ``torch.compile(F.softmax, dynamic=False)``, ``torch.compile(flex_attention)``:
# dynamo compiles torch's code (for a function its trace rules skip, a
# ``wrap_inline`` wrapper named ``inner`` in torch/_dynamo/external_utils.py),
# and the trace records no user frame for it (measured on 2.13: the
# ``dynamo_start`` stack is that one frame).  The user's compile call of the
# library function is found in the run's files: when exactly one compile call
# of a library function can have compiled that code object, the entry is
# mapped to it (shown there, its findings matched); otherwise it stays torch's.

_WRAPPER = ("inner", "torch/_dynamo/external_utils.py")


def _library_callable(model, site) -> Optional[str]:
    """The dotted name of the library function ``site`` compiles (an imported
    function: ``torch.nn.functional.softmax``), or None for user code."""
    if site.form != "wrap" or site.target_def is not None or site.target is None:
        return None
    if not isinstance(site.target, (ast.Name, ast.Attribute)) or model.module_class_of(site.target) is not None:
        return None
    names = sorted(q for q in model.qualified_names(site.target) if "." in q and not q.startswith("builtins."))
    return names[0] if names else None


def _can_have_compiled(entry: tr.CodeEntry, qualified: str) -> bool:
    if (entry.name, entry.filename.replace("\\", "/").endswith(_WRAPPER[1])) == (_WRAPPER[0], True):
        return True  # torch's wrapper around a function its trace rules skip
    return qualified.rsplit(".", 1)[-1] == entry.name


def map_library_entries(trace: tr.Trace, within: Optional[Sequence[str]], settings: Settings) -> None:
    """Map torch-internal code objects with no user frame that recompiled to
    the one user compile call of a library function (under ``within``) that
    can have compiled them: sets ``library_site`` and ``user_frame``."""
    from .compile_sites import model_of
    from .discovery import discover
    from .engine import parse_ast
    from .prefilter import mentions_compile

    todo = [
        e for e in trace.entries
        if tr.is_library_file(e.filename) and e.user_frame is None and (e.reasons or e.limit_hit)
    ]
    if not todo or not within:
        return
    found: List[Tuple[str, int, str, str]] = []  # (path, line, as written, qualified name)
    for path in discover(within).files:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if not mentions_compile(data):
                continue
            source = parse_ast(path, data)
        except (OSError, FileError):
            continue
        model = model_of(source)
        for site in model.compile_sites:
            qualified = _library_callable(model, site)
            if qualified is not None:
                written = ast.get_source_segment(source.text, site.target) or qualified
                found.append((path, site.node.lineno, written, qualified))
    for entry in todo:
        candidates = [c for c in found if _can_have_compiled(entry, c[3])]
        if len(candidates) == 1:
            path, line, written, _q = candidates[0]
            entry.library_site = (path, line)
            entry.user_frame = (path, line, written)


def _evidence(entry: tr.CodeEntry, cause: str) -> str:
    sources = []
    for r in entry.reasons:
        if r.cause == cause and r.source and r.source not in sources:
            sources.append(r.source)
    what = f"{cause} `{', '.join(sources)}`" if sources else cause
    limit = ", hit the recompile limit" if entry.limit_hit else ""
    return f"`{tr.display_name(entry)}` compiled {entry.graphs} graphs on {what}{limit}"


def upgrade(finding: Finding, evidence: str) -> Finding:
    """A copy of ``finding`` whose unsafe fix is safe, saying why."""
    assert finding.fix is not None
    fix: Fix = dataclasses.replace(finding.fix, safety=Safety.SAFE)
    return dataclasses.replace(
        finding,
        fix=fix,
        message=f"{finding.message} (safe: cures recompiles observed in trace: {evidence})",
        applied=False,
    )


def _match_causes(entry: tr.CodeEntry) -> List[str]:
    """The causes a finding may cure for this code object: those observed,
    and for torch's own optimizer ``step`` that recompiled on anything (torch
    names only the first failing guard: a second optimizer sharing the code
    object shows as object identity `self`, hiding the lr guard behind it),
    the optimizer lr too: FR004's own analysis proves the lr changes."""
    causes = list(entry.causes)
    optimizer_step = "/torch/optim/" in entry.filename.replace("\\", "/") and entry.name == "step"
    if optimizer_step and entry.recompiles and tr.OPTIMIZER_LR not in causes:
        causes.append(tr.OPTIMIZER_LR)
    return causes


def match_file(
    ctx: FileContext, findings: Sequence[Finding], entries: Sequence[tr.CodeEntry]
) -> Tuple[List[Match], List[Finding]]:
    """(matches, findings not implicated) for one file's findings."""
    model = ctx.model
    real = _real(ctx.path)
    sites = [
        (site_first_lines(model, s), site_spans(ctx.source, s))
        for s in model.compile_sites
    ]
    matched: Dict[int, Match] = {}
    for entry in entries:
        path = entry_file(entry)
        if path is None:
            continue
        if _real(path) != real:
            # a function compiled in another module, fed from this file
            if not tr.is_library_file(entry.filename):
                for cause in _match_causes(entry):
                    for cure in tr.rule_cures(entry, cause):
                        for index, f in enumerate(findings):
                            if f.feeds_path and f.code == cure.code and index not in matched and entry.firstlineno in f.feeds and _real(f.feeds_path) == _real(path):
                                matched[index] = Match(f, entry, cause)
            continue
        internal = tr.is_library_file(entry.filename)
        library_spans = [
            (s, site_spans(ctx.source, s))
            for s in model.compile_sites
            if entry.library_site is not None and s.node.lineno == entry.library_site[1] and _library_callable(model, s) is not None
        ]
        for cause in _match_causes(entry):
            for cure in tr.rule_cures(entry, cause):
                for index, f in enumerate(findings):
                    if f.code != cure.code or index in matched:
                        continue
                    if internal and entry.library_site is not None:
                        # a compiled library function: the user's compile call of it
                        ok = any(
                            any(_inside(f, sp) for sp in spans)
                            for site, spans in library_spans
                        )
                    elif internal:
                        # torch's own code compiled for the user's call (an
                        # optimizer's step, nn.Sequential.forward): any FR004
                        # of the file; others on the line of the user's call
                        frame = entry.user_frame
                        ok = cause == tr.OPTIMIZER_LR or (frame is not None and f.line <= frame[1] <= f.end_line)
                    elif f.feeds:  # about a compiled function, placed where its value is passed in
                        ok = entry.firstlineno in f.feeds
                    else:
                        ok = any(
                            entry.firstlineno in lines
                            and any(_inside(f, sp) for sp in spans)
                            for lines, spans in sites
                        )
                    if not ok or not _about_guarded(f, entry, cause):
                        continue
                    if (
                        cure.upgrade
                        and f.fix is not None
                        and f.fix.safety == Safety.UNSAFE
                    ):
                        matched[index] = Match(
                            upgrade(f, _evidence(entry, cause)),
                            entry,
                            cause,
                            upgraded=True,
                        )
                    else:
                        matched[index] = Match(f, entry, cause)
    matches = [matched[i] for i in sorted(matched)]
    others = [f for i, f in enumerate(findings) if i not in matched]
    return matches, others


def _about_guarded(f: Finding, entry: tr.CodeEntry, cause: str) -> bool:
    """May the trace implicate ``f`` for ``cause``?  An unproven finding about
    a float (FR003 with --unproven) only when the trace guarded that float:
    a recompile on `a` does not prove that `b`, which never changes, does.
    Guarded sources the finding cannot be compared with (`args[1]`) allow it."""
    if f.proven or not f.about or cause != tr.FLOAT_ARG:
        return True
    names = set()
    for source in entry.sources(cause):
        argument = tr.argument_of(source)
        if argument is None:
            return True
        names.add(argument[0])
    return bool(names & set(f.about))


class TraceFilter:
    """The ``-i`` session's finding filter for a trace: keep only the findings
    :func:`match_file` matches (upgraded as in ``--fix``).  The session calls it
    again on the accepted code after every accepted fix; the trace's line
    numbers are of the file as it ran, so they are first moved to the accepted
    code (``interactive.line_map`` from the bytes first seen for that file)."""

    def __init__(self, trace: tr.Trace) -> None:
        self.trace = trace
        self._original: Dict[str, bytes] = {}

    def _entries(self, path: str, data: bytes) -> List[tr.CodeEntry]:
        """The trace's entries, those of this file with their lines moved to ``data``."""
        real = _real(path)
        original = self._original.setdefault(real, data)
        entries = self.trace.entries
        if data != original:
            from .interactive import line_map

            moved = line_map(original, data)
            entries = [
                dataclasses.replace(e, firstlineno=moved(e.firstlineno))
                if e.firstlineno and entry_file(e) and _real(entry_file(e)) == real
                else e
                for e in entries
            ]
        return entries

    def evidence(self, path: str, data: bytes) -> Optional[Evidence]:
        """What the trace observed in this file, at the lines of ``data`` (for
        the analysis: :func:`float_evidence`)."""
        return float_evidence(tr.Trace(entries=self._entries(path, data))).get(_real(path))

    def __call__(self, ctx: FileContext, findings: Sequence[Finding]) -> List[Finding]:
        matches, _others = match_file(ctx, findings, self._entries(ctx.path, ctx.source.data))
        return [m.finding for m in matches]


def float_evidence(trace: tr.Trace) -> Dict[str, Evidence]:
    """By user file (real path): the arguments of its compiled functions the
    trace saw guarded on a float's value (``temperature == 0.7``,
    ``sampling_kwargs['temperature'] == 0.7``, ``args[1] == 0.7``), for FR003
    to follow where the source cannot show a float (``ctx.evidence``)."""
    found: Dict[str, Dict[int, Set[str]]] = {}
    for entry in trace.entries:
        if tr.is_library_file(entry.filename) or not entry.firstlineno:
            continue
        # `cfg.lr`: an attribute, not an argument; a value torch guarded as
        # computed from the float (`(1.0 - p) == 0.9`): an op needed a Python
        # number there, which a tensor passed in does not show to cure
        sources = sorted({r.source for r in entry.reasons if r.cause == tr.FLOAT_ARG and r.source and "." not in r.source and not r.specialized})
        if sources:
            found.setdefault(_real(entry.filename), {}).setdefault(entry.firstlineno, set()).update(sources)
    return {path: Evidence({line: frozenset(s) for line, s in lines.items()}) for path, lines in found.items()}


def guide(
    trace: tr.Trace,
    settings: Settings,
    within: Optional[Sequence[str]] = None,
    *,
    fixing: bool,
    evidence: bool = True,
) -> Guided:
    """Analyse the files the trace implicates; compute the new bytes with only
    the matched findings' fixes (safe ones, or all with ``--unsafe-fixes``),
    then (``evidence``) the fixes the trace supports on its own
    (:func:`apply_evidence`)."""
    from .discovery import display_path

    out = Guided()
    # the trace is the evidence the source lacks: unproven findings take part
    # (only those it implicates are applied)
    settings = replace(settings, unproven=True)
    map_library_entries(trace, within, settings)
    files = implicated_files(trace, within)
    # the project model of every file under the folder, not only the
    # implicated ones: an lr writer in scheduler.py proves main.py's FR004 fix
    from .discovery import discover

    indexed = sorted(set(discover(within).files) | set(files)) if within else files
    project = build_project_index(indexed, settings)
    files = files + _feeding_files(project, files, indexed)
    observed = float_evidence(trace)
    #: (module, line of the construction) of optimizers whose FR004 fix is applied
    optimizers: Dict[Tuple[str, int], Match] = {}
    for path in files:
        shown = display_path(path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            ctx, findings = analyze(path, shown, data, settings, project, evidence=observed.get(_real(path)))
        except FileError as exc:
            out.errors.append((exc.path, exc.reason))
            continue
        except OSError as exc:
            out.errors.append((shown, f"cannot read: {exc.strerror or exc}"))
            continue
        guided = GuidedFile(path, shown, data)
        out.files.append(guided)
        if ctx is None:
            continue
        guided.matches, guided.others = match_file(ctx, findings, trace.entries)
        _apply(ctx, guided, data, settings, out)
        optimizers.update(_fixed_optimizers(ctx, project, guided))
    if optimizers:
        apply_lr_writers(out, project, settings, optimizers)
    if evidence:
        apply_flag_evidence(trace, out, settings)
        apply_evidence(trace, out)
    return out


def _feeding_files(project, implicated: Sequence[str], indexed: Sequence[str]) -> List[str]:
    """Files of the run (not implicated themselves) that may call a function
    compiled in an implicated file: a float passed there in is fixed where it
    is passed (FR003 reports it in the caller's file)."""
    from .prefilter import mentions_any

    tokens = project.call_tokens({project.modules[p] for p in implicated if p in project.modules})
    if not tokens:
        return []
    out: List[str] = []
    for path in indexed:
        if path in implicated:
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if mentions_any(data, tokens):
            out.append(path)
    return out


def _apply(ctx: FileContext, guided: GuidedFile, data: bytes, settings: Settings, out: Guided) -> None:
    """Render the matched findings that the settings apply into ``guided.new``."""
    chosen = [m.finding for m in guided.matches if should_apply(m.finding, settings)]
    for f in chosen:
        f.applied = True
    if chosen:
        try:
            guided.new = render(ctx, chosen, data)
        except FileError as exc:
            out.errors.append((exc.path, exc.reason))
            for f in chosen:
                f.applied = False


def _fixed_optimizers(ctx: FileContext, project, guided: GuidedFile) -> Dict[Tuple[str, int], Match]:
    """(module, line of the call) of the optimizer constructions whose FR004
    fix this file applies (the calls that hold an applied FR004 finding)."""
    key = project.modules.get(ctx.path) if project is not None else None
    applied = [m for m in guided.matches if m.finding.code == "FR004" and m.finding.applied]
    if key is None or not applied:
        return {}
    out: Dict[Tuple[str, int], Match] = {}
    for call in ctx.source.nodes(ast.Call):
        for m in applied:
            f = m.finding
            if (call.lineno, call.col_offset + 1) <= (f.line, f.column) and (f.end_line, f.end_column) <= (call.end_lineno, call.end_col_offset + 1):
                out[(key[1], call.lineno)] = m
    return out


def apply_lr_writers(out: Guided, project, settings: Settings, optimizers: Dict[Tuple[str, int], Match]) -> None:
    """FR004's fix of an optimizer whose lr a writer in another module sets (a
    scheduler class, a ``set_lr`` helper) is whole only with that writer's
    ``.fill_`` edits.  A module of proven lr writers (``project.lr_proven``)
    all of whose optimizers had their FR004 fix applied here is analysed and
    its FR004 findings applied with them; otherwise nothing is added (a
    ``.fill_`` on a float lr would crash)."""
    from .discovery import display_path

    done = {_real(g.path) for g in out.files}
    for key, writers in sorted(project.lr_proven.items()):
        path = project.path_of(key)
        callers = sorted({c for cs in writers.values() for c in cs})
        if path is None or _real(path) in done or not callers or any(c not in optimizers for c in callers):
            continue
        shown = display_path(path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            ctx, findings = analyze(path, shown, data, settings, project)
        except (OSError, FileError):
            continue
        if ctx is None:
            continue
        cause = optimizers[callers[0]]
        guided = GuidedFile(path, shown, data)
        guided.matches = [Match(f, cause.entry, tr.OPTIMIZER_LR) for f in findings if f.code == "FR004" and f.fix is not None]
        guided.others = [f for f in findings if not (f.code == "FR004" and f.fix is not None)]
        _apply(ctx, guided, data, settings, out)
        if guided.changed:
            out.files.append(guided)


def write(guided: Guided) -> int:
    """Write the guided fixes atomically; returns how many files were written."""
    return write_changed(guided.files, guided.errors, lambda g: [m.finding for m in g.matches])


def restore(guided: Guided) -> None:
    for g in guided.files:
        if g.changed:
            write_atomic(g.path, g.original, g.display_path)


# -- running the command ---------------------------------------------------------


def run_traced(cmd: Sequence[str], trace_dir: str, stdout=None) -> int:
    """Run ``cmd`` with ``TORCH_TRACE=trace_dir``, its output streaming through
    (its stdout to ``stdout`` when given); its exit code (127 when it cannot
    start)."""
    env = dict(os.environ)
    env["TORCH_TRACE"] = trace_dir
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.call(list(cmd), env=env, stdout=stdout)
    except FileNotFoundError:
        print(f"error: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"error: cannot execute: {cmd[0]}", file=sys.stderr)
        return 126


def traced_run(cmd: Sequence[str]) -> Tuple[int, tr.Trace]:
    folder = tempfile.mkdtemp(prefix="fix-recompiles-trace-")
    try:
        code = run_traced(cmd, folder)
        return code, tr.read_trace(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- reporting -------------------------------------------------------------------


def available_codes(settings: Settings) -> List[str]:
    return [code for code in BY_CODE if settings.selects(code)]


def report_lines(trace: tr.Trace, settings: Settings, guided: Optional["Guided"] = None) -> List[str]:
    """The table; with ``guided`` (the analysis of the implicated files), each
    cure names the rules whose findings match that recompile, and the rules
    of its cause that found nothing there."""
    found: Optional[Dict[Tuple[int, str], Set[str]]] = None
    if guided is not None:
        found = {}
        for m in guided.matches:
            # the flag the trace sets is FR005's fix; its other fixes (mark_dynamic, a wrapped float) are its own
            code = "FR005" if m.finding.code == FLAG_CODE and m.cause == tr.MODULE_INT_ATTR else m.finding.code
            found.setdefault((id(m.entry), m.cause), set()).add(code)
    rows = tr.table_rows(trace, available_codes(settings), relative_to=os.getcwd(), found=found)
    notice = tr.limit_notice(trace)
    if not rows:
        return [
            "No compiled function recompiled (the trace holds no compile of user code)."
            if not trace.entries
            else "No compiled function recompiled."
        ]
    return tr.format_table(rows) + ([notice] if notice else [])


def compare(before: tr.Trace, after: tr.Trace) -> List[Tuple[str, int, int]]:
    """(function, graphs before, graphs after) per code object, keyed by file and
    name (a fix may move the ``def`` line)."""

    def by_name(t: tr.Trace) -> Dict[Tuple[str, str], int]:
        out: Dict[Tuple[str, str], int] = {}
        for e in t.entries:
            # torch's own code (an optimizer's step, a compiled nn.Sequential)
            # is shown at the user's file that reached it
            internal = tr.is_library_file(e.filename) and e.user_frame is not None
            key = (entry_file(e) or e.filename, tr.display_name(e)) if internal else (e.filename, e.name)
            out[key] = out.get(key, 0) + e.graphs
        return out

    b, a = by_name(before), by_name(after)
    keys = list(b) + [k for k in a if k not in b]
    rows = []
    for key in keys:
        nb, na = b.get(key, 0), a.get(key, 0)
        if nb == 0 and na == 0:
            continue
        filename, name = key
        where = (
            os.path.relpath(filename)
            if filename and not os.path.relpath(filename).startswith("..")
            else filename
        )
        rows.append((f"{name} ({where})", nb, na))
    return rows


# -- the two entry points (cli.py) -------------------------------------------------

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _out(line: str = "") -> None:
    print(line, flush=True)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _print_diff(guided: Guided) -> None:
    from .output import unified_diff_bytes

    sys.stdout.flush()
    out = getattr(sys.stdout, "buffer", None)
    for g in guided.files:
        if g.changed:
            patch = unified_diff_bytes(g.display_path, g.original, g.new)  # type: ignore[arg-type]
            if out is not None:
                out.write(patch)
            else:
                sys.stdout.write(patch.decode("utf-8", "replace"))
    if out is not None:
        out.flush()


def _print_matches(guided: Guided, settings: Settings, *, fixing: bool) -> None:
    from .output import format_finding

    for g in guided.files:
        for m in g.matches:
            f = m.finding
            if fixing and f.applied:
                _out(f"fixed: {format_finding(f, show_fix=False)}")
            else:
                _out(format_finding(f))
    n_other = sum(len(g.others) for g in guided.files)
    if n_other:
        _out(
            f"{n_other} other finding{'s' if n_other != 1 else ''} in these files not implicated by the trace (left alone; see `fix-recompiles check`)."
        )
    unsafe_left = [
        m
        for m in guided.matches
        if not m.finding.applied
        and m.finding.fix is not None
        and m.finding.fix.safety == Safety.UNSAFE
    ]
    if unsafe_left and not settings.unsafe_fixes:
        _out(
            f"{len(unsafe_left)} implicated fix{'es stay' if len(unsafe_left) != 1 else ' stays'} unsafe (a trace proves the recompile, not that the rewrite keeps results); apply with --unsafe-fixes."
        )


def report_and_apply(
    trace: tr.Trace,
    settings: Settings,
    within: Optional[Sequence[str]],
    *,
    diff: bool,
    fix: bool,
) -> Tuple[int, Guided, int]:
    """Print the table, the implicated findings, and the diff or the writes.
    (exit code, guided, files written)."""
    map_library_entries(trace, within, settings)
    guided = guide(trace, settings, within, fixing=fix)
    for line in report_lines(trace, settings, guided):
        _out(line)
    for path, reason in guided.errors:
        _err(f"error: {path}: {reason}")
    if not guided.matches:
        _out(
            "No finding of the passes matches a recompile in the trace: nothing to fix."
        )
    else:
        _out("")
        _out("Findings at the sites the trace implicates:")
        _print_matches(guided, settings, fixing=fix)
    written = 0
    if diff:
        _print_diff(guided)
    elif fix:
        written = write(guided)
        for path, reason in guided.errors:
            _err(f"error: {path}: {reason}")
        applied = sum(1 for m in guided.matches if m.finding.applied)
        if applied:
            _out(
                f"Fixed {applied} finding{'s' if applied != 1 else ''} in {written} file{'s' if written != 1 else ''}."
            )
    pending = any(
        m.finding.fix is not None and not (fix and m.finding.applied)
        for m in guided.matches
    )
    code = (
        EXIT_FINDINGS
        if pending or (diff and any(g.changed for g in guided.files))
        else EXIT_CLEAN
    )
    if guided.errors:
        code = EXIT_ERROR
    return code, guided, written


def review(
    trace: tr.Trace, settings: Settings, within: Optional[Sequence[str]]
) -> Tuple[int, List[Tuple[str, str, bytes]]]:
    """``-i``: print the table, then review only the implicated fixes one at a
    time (``codemods.interactive`` with a :class:`TraceFilter`).
    (exit code, files written as (path, display path, bytes before))."""
    from .interactive import review_paths

    map_library_entries(trace, within, settings)
    guided = guide(trace, settings, within, fixing=False, evidence=False)
    for line in report_lines(trace, settings, guided):
        _out(line)
    for path, reason in guided.errors:
        _err(f"error: {path}: {reason}")
    files = [g for g in guided.files if g.matches]
    if not files:
        _out(
            "No finding of the passes matches a recompile in the trace: nothing to fix."
        )
        return (EXIT_ERROR if guided.errors else EXIT_CLEAN), []
    n = len(guided.matches)
    _out("")
    _out(
        f"Reviewing the {n} finding{'s' if n != 1 else ''} the trace implicates"
        f" in {len(files)} file{'s' if len(files) != 1 else ''}:"
    )
    n_other = sum(len(g.others) for g in files)
    if n_other:
        _out(
            f"({n_other} other finding{'s' if n_other != 1 else ''} in these files"
            f" {'are' if n_other != 1 else 'is'} not implicated by the trace and not offered;"
            " see `fix-recompiles check -i`.)"
        )
    sys.stdout.flush()
    code, tally = review_paths(
        [g.path for g in files],
        replace(settings, unproven=True),
        sys.stdin,
        sys.stdout,
        sys.stderr,
        finding_filter=TraceFilter(trace),
        files=[g.path for g in files],
    )
    if guided.errors:
        code = EXIT_ERROR
    return code, list(tally.written)


def from_trace(
    folder: str,
    paths: Sequence[str],
    settings: Settings,
    *,
    diff: bool,
    fix: bool,
    interactive: bool = False,
) -> int:
    """``fix-recompiles check PATH --from-trace DIR [--diff | --fix | -i]``."""
    if not os.path.exists(folder):
        _err(f"error: {folder}: no such trace folder")
        return EXIT_ERROR
    trace = tr.read_trace(folder)
    if not trace.files:
        _err(f"error: {folder}: no trace files (expected TORCH_TRACE output)")
        return EXIT_ERROR
    within = list(paths) or ["."]
    if interactive:
        return review(trace, settings, within)[0]
    code, _guided, _written = report_and_apply(
        trace, settings, within, diff=diff, fix=fix
    )
    return code


def _compare_after(
    cmd: Sequence[str],
    before: tr.Trace,
    code_before: int,
    written: Sequence[Tuple[str, str, bytes]],
    code: int,
) -> int:
    """Run ``cmd`` again on the fixed files and print graphs before -> after;
    restore ``written`` (path, display path, bytes before) if its exit code
    changed, or if the fixes compiled no fewer graphs in total; when the
    first run failed at the recompile limit (``code_before`` != 0), keep them
    only if the command now succeeds."""
    _err(f"fix-recompiles: running {' '.join(cmd)} again with the fixes")
    code_after, after = traced_run(cmd)
    _out("")
    _out("Graphs compiled, before -> after:")
    rows = compare(before, after)
    width = max([len(r[0]) for r in rows] + [5])
    for name, nb, na in rows:
        _out(f"  {name.ljust(width)}  {nb} -> {na}")
    _out(f"  {'total'.ljust(width)}  {before.total_graphs} -> {after.total_graphs}")
    if code_before != 0:  # it failed at the recompile limit: the fixes must end that
        if code_after == 0:
            _out(f"Exit code {code_before} -> 0: the recompile limit is no longer hit.")
            return code
        for path, shown, original in written:
            write_atomic(path, original, shown)
        _err(f"error: the command still fails after the fixes (exit code {code_after}); the files were restored")
        return EXIT_ERROR
    if code_after == code_before:
        _out(f"Exit code unchanged ({code_after}).")
        if written and after.total_graphs >= before.total_graphs:
            # a fix must cure what it claims (issue 15, item 2): none did
            for path, shown, original in written:
                write_atomic(path, original, shown)
            _err(
                f"fix-recompiles: the fixes did not reduce the graphs compiled ({before.total_graphs} -> "
                f"{after.total_graphs}); the files were restored"
            )
            return EXIT_FINDINGS
        return code
    for path, shown, original in written:
        write_atomic(path, original, shown)
    _err(
        f"error: exit code changed {code_before} -> {code_after} after the fixes; the files were restored"
    )
    return EXIT_ERROR


def run(
    cmd: Sequence[str],
    settings: Settings,
    *,
    diff: bool,
    fix: bool,
    interactive: bool = False,
) -> int:
    """``fix-recompiles run [--diff | --fix | -i] -- CMD...``."""
    if not cmd:
        _err(
            "error: no command given: fix-recompiles run [--diff | --fix | -i] -- CMD ARGS..."
        )
        return EXIT_ERROR
    _err(f"fix-recompiles: running {' '.join(cmd)} with TORCH_TRACE")
    code_before, before = traced_run(cmd)
    _out("")
    if code_before != 0 and not before.hard_limit_failures:
        for line in report_lines(before, settings):
            _out(line)
        _err(f"error: the command failed with exit code {code_before}; nothing changed")
        return EXIT_ERROR
    if code_before != 0:
        # fullgraph=True raises at the recompile limit: the failure is the
        # storm itself, and its trace is whole up to there
        _err(
            f"fix-recompiles: the command failed with exit code {code_before} at the recompile limit "
            "(FailOnRecompileLimitHit under fullgraph=True): its trace is the storm to cure"
        )
    if interactive:
        code, written = review(before, settings, [os.getcwd()])
    else:
        code, guided, _n = report_and_apply(
            before, settings, [os.getcwd()], diff=diff, fix=fix
        )
        written = [
            (g.path, g.display_path, g.original) for g in guided.files if g.changed
        ] if fix else []
    if not written:
        # a command that failed at the limit and was not fixed still has its storm
        return max(code, EXIT_FINDINGS) if code_before != 0 else code
    return _compare_after(cmd, before, code_before, written, code)


# -- the CI guard: fix-recompiles run --max-recompiles N -- CMD ---------------------

#: the pseudo rule the guard's annotations are reported under (json, sarif, github)
GUARD_CODE = "RECOMPILES"


class GuardRule:
    """What ``to_sarif`` needs of a rule, for the guard's annotations."""

    code = GUARD_CODE
    name = "max-recompiles"
    summary = "A compiled function recompiled more often than --max-recompiles allows."
    what_it_does = (
        "Runs a command under TORCH_TRACE and reports every compiled code object "
        "that recompiled more than N times (or hit the recompile limit), with the "
        "cause read from torch's recompile reason and its cure."
    )

    @classmethod
    def doc(cls) -> str:
        return f"{cls.code} ({cls.name})\n\n{cls.summary}\n\n{cls.what_it_does}\n"


@dataclass
class _GuardResult:
    """The shape ``formats.to_json``/``to_sarif`` read (one per file)."""

    findings: List[Finding]
    changed: bool = False


def over_limit(trace: tr.Trace, max_recompiles: int) -> List[tr.CodeEntry]:
    """Code objects that recompiled more than ``max_recompiles`` times; one that
    hit the recompile limit wanted more compiles than it got, so it is always
    over."""
    return [
        e for e in trace.entries if e.recompiles > max_recompiles or e.limit_hit
    ]


def guard_findings(
    trace: tr.Trace, max_recompiles: int, settings: Settings
) -> List[Finding]:
    """One finding per cause of every code object over the limit, at the
    user line the table shows."""
    codes = available_codes(settings)
    cwd = os.getcwd()
    out: List[Finding] = []
    for entry in over_limit(trace, max_recompiles):
        where = tr.display_location(entry, relative_to=cwd)
        path, _, line = where.rpartition(":")
        what = (
            f"`{tr.display_name(entry)}` recompiled {entry.recompiles} time"
            f"{'s' if entry.recompiles != 1 else ''} (allowed: {max_recompiles}),"
            f" {entry.graphs} graph{'s' if entry.graphs != 1 else ''}"
            + (", hit the recompile limit" if entry.limit_hit else "")
        )
        causes = entry.causes or ["-"]
        for cause in causes:
            if cause == "-":
                detail = "cause unknown"
            else:
                srcs = entry.sources(cause)
                label = cause if cause != tr.OTHER else f"other: {next(r.text for r in entry.reasons if r.cause == cause)}"
                if srcs and cause != tr.OTHER:
                    label += " " + ", ".join(f"`{s}`" for s in srcs)
                detail = f"cause: {label}; cure: {tr.cure_label(entry, cause, codes)}"
            line_no = int(line) if line.isdigit() else 1
            out.append(
                Finding(
                    code=GUARD_CODE,
                    message=f"{what}: {detail}",
                    path=path,
                    line=line_no,
                    column=1,
                    end_line=line_no,
                    end_column=1,
                    rule_name=GuardRule.name,
                )
            )
    return out


def _guard_output(findings: Sequence[Finding], output_format: str, version: str) -> str:
    from . import formats

    if output_format == "json":
        return formats.to_json([_GuardResult(list(findings))])
    if output_format == "sarif":
        return formats.to_sarif([_GuardResult(list(findings))], [GuardRule], version)
    return formats.to_github(findings)


def guard(
    cmd: Sequence[str],
    settings: Settings,
    max_recompiles: int,
    output_format: str = "text",
    version: str = "0",
) -> int:
    """``fix-recompiles run --max-recompiles N [--format F] -- CMD...``: run CMD
    under the trace; exit 1 when a compiled code object recompiled more than N
    times (also when CMD failed because one hit the limit under
    ``fullgraph=True``), 2 when CMD failed otherwise (its exit code in the
    message), else 0.  With a
    machine format CMD's output goes to stderr, so stdout holds only the
    report."""
    if not cmd:
        _err(
            "error: no command given: fix-recompiles run --max-recompiles N -- CMD ARGS..."
        )
        return EXIT_ERROR
    machine = output_format != "text"
    say = _err if machine else _out
    _err(f"fix-recompiles: running {' '.join(cmd)} with TORCH_TRACE")
    folder = tempfile.mkdtemp(prefix="fix-recompiles-trace-")
    try:
        code = run_traced(cmd, folder, stdout=sys.stderr if machine else None)
        trace = tr.read_trace(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    map_library_entries(trace, [os.getcwd()], settings)
    say("")
    for line in report_lines(trace, settings):
        say(line)
    findings = guard_findings(trace, max_recompiles, settings)
    if machine:
        sys.stdout.write(_guard_output(findings, output_format, version))
        sys.stdout.flush()
    over = over_limit(trace, max_recompiles)
    n_compiled = sum(1 for e in trace.entries if e.graphs or e.recompiles)
    say("")
    if over:
        say(
            f"{len(over)} compiled function{'s' if len(over) != 1 else ''} recompiled"
            f" more than {max_recompiles} time{'s' if max_recompiles != 1 else ''}"
            " (--max-recompiles):"
        )
        for e in over:
            say(
                f"  {tr.display_name(e)} ({tr.display_location(e, os.getcwd())}):"
                f" {e.recompiles} recompile{'s' if e.recompiles != 1 else ''}"
                + (", hit the recompile limit" if e.limit_hit else "")
            )
    else:
        say(
            f"No compiled function recompiled more than {max_recompiles}"
            f" time{'s' if max_recompiles != 1 else ''} ({n_compiled} compiled,"
            f" {trace.total_graphs} graph{'s' if trace.total_graphs != 1 else ''})."
        )
    if code != 0 and trace.hard_limit_failures and over:
        # fullgraph=True raised at the recompile limit: the failure is the storm the check is about
        _err(
            f"fix-recompiles: the command failed with exit code {code} at the recompile limit"
            " (FailOnRecompileLimitHit under fullgraph=True)"
        )
        return EXIT_FINDINGS
    if code != 0:
        _err(
            f"error: the command failed with exit code {code}; the recompile check"
            " is not conclusive"
        )
        return EXIT_ERROR
    return EXIT_FINDINGS if over else EXIT_CLEAN


# -- fixes made from evidence: maybe_mark_dynamic before the call ----------------------
#
# A shape recompile the trace shows (``tensor 'x' size mismatch at index 0``)
# that no static finding cures: before each call of the compiled function in
# the same file that passes a plain name for ``x``, insert
# ``torch._dynamo.maybe_mark_dynamic(<name>, <dim>)`` for every dim seen to vary
# (never the 0/1 specialisation guard, never a dim the trace did not show
# changing).  A hint: it changes no value, so the fix is safe; ``--fix`` then
# runs the command again and compares graphs and exit code as for any fix.

MARK_CODE = "TRACE"


@dataclass
class MarkSite:
    """One inserted mark: before the statement on ``line`` (of the bytes it
    was computed on), ``<torch>._dynamo.maybe_mark_dynamic(arg, dim)``."""

    line: int
    column: int
    function: str
    arg: str
    dim: int
    param: str


# the statement and the marks already there: shared with FR007 (codemods/placement.py)
from .placement import existing_marks as _existing_marks, mark_statement as _mark_statement  # noqa: E402


def _insert_marks(target, marks: List[cst.SimpleStatementLine]) -> Edit:
    """Insert ``marks`` before the statement; the lines above it (comments
    included) go above the marks."""

    def apply(updated: cst.CSTNode):
        first = marks[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([first, *marks[1:], updated.with_changes(leading_lines=())])

    return Edit(target, apply)


def mark_dynamic(data: bytes, function: str, firstlineno: int,
                 dims: Dict[str, Tuple[int, ...]]) -> Tuple[Optional[bytes], List[MarkSite]]:
    """``data`` with ``maybe_mark_dynamic`` inserted before the calls of the
    compiled module-level function ``function`` (its code object starts at
    ``firstlineno``: a decorator or the ``def`` line), for the parameters and
    dims in ``dims``; (None, []) when nothing can be marked.  The compile
    sites and their calls are the compile-site model's
    (:mod:`codemods.compile_sites`): the function itself when a decorator
    compiles it, else a module-level ``name = torch.compile(function, ...)``."""
    from .compile_sites import model_of
    from .engine import parse_ast, render
    from .placement import block_of
    from .source import COMPOUND, statement_target

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, []
    model = model_of(source)
    if model.torch_alias is None:
        return None, []
    tree = source.tree
    sites = [
        site
        for site in model.compile_sites
        if isinstance(site.target_def, ast.FunctionDef)
        and site.target_def.name == function
        and source.parent(site.target_def) is tree
        and firstlineno in def_first_lines(site.target_def)
        and (site.form == "decorator" or (site.form == "wrap" and site.binding and "." not in site.binding and source.parent(site.statement) is tree))
    ]
    if not sites:
        return None, []
    fn = sites[0].target_def
    positional = [a.arg for a in list(fn.args.posonlyargs) + list(fn.args.args)]  # type: ignore[union-attr]
    by_stmt: Dict[ast.stmt, List[MarkSite]] = {}
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    for call in sorted({c for site in sites for c in site.calls}, key=lambda c: (c.lineno, c.col_offset)):
        if not isinstance(call.func, ast.Name):
            continue
        stmt = source.statement_of(call)
        if stmt is None or isinstance(stmt, COMPOUND) or block_of(source, stmt) is None:
            continue  # a call in a compound statement's header, or in a one-line suite
        if any(isinstance(a, scopes) for a in _ancestors_until(source, call, stmt)):
            continue  # runs later (lambda) or binds its own names (comprehension)
        bound: Dict[str, ast.AST] = {}
        starred = False
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                starred = True
                break  # *args: positions unknown from here on
            if i < len(positional):
                bound[positional[i]] = arg
        if not starred:
            for kw in call.keywords:
                if kw.arg is None:
                    break
                bound[kw.arg] = kw.value
        line, column = source.start(call)
        have = by_stmt.setdefault(stmt, [])
        for param, param_dims in dims.items():
            value = bound.get(param)
            if not isinstance(value, ast.Name):
                continue  # an expression: nothing to mark without binding it
            for dim in param_dims:
                if not any((m.arg, m.dim) == (value.id, dim) for m in have):
                    have.append(MarkSite(line, column + 1, function, value.id, dim, param))
    edits: List[Edit] = []
    inserted: List[MarkSite] = []
    for stmt, marks in by_stmt.items():
        existing = _existing_marks(source, stmt)
        todo = [m for m in marks if (m.arg, m.dim) not in existing]
        if todo:
            edits.append(_insert_marks(statement_target(source, stmt), [_mark_statement(model.torch_alias, m.arg, m.dim) for m in todo]))
            inserted.extend(todo)
    if not edits:
        return None, []
    finding = Finding(code=MARK_CODE, message="", path="<trace>", line=1, column=1, end_line=1, end_column=1, fix=Fix(edits=tuple(edits), safety=Safety.SAFE))
    ctx = FileContext("<trace>", "<trace>", Settings(), None, source)
    return render(ctx, [finding], data), inserted


def _ancestors_until(source, node: ast.AST, stop: ast.AST):
    for anc in source.ancestors(node):
        if anc is stop:
            return
        yield anc


def _shape_cured_statically(guided_file: "GuidedFile", entry: tr.CodeEntry) -> bool:
    return any(m.entry is entry and m.cause == tr.TENSOR_SHAPE and m.finding.applied
               for m in guided_file.matches)


def apply_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Add the trace's own fixes (``maybe_mark_dynamic``) to the guided files:
    for every code object of a file with observed shape changes that no
    applied static fix cures.  Each becomes a match whose finding (code
    ``TRACE``, safe) is applied."""
    from .interactive import line_map

    by_real = {_real(g.path): g for g in guided.files}
    for entry in trace.entries:
        dims = tr.varying_dims(entry)
        path = entry_file(entry)
        if not dims or path is None or tr.is_library_file(entry.filename):
            continue
        g = by_real.get(_real(path))
        if g is None or _shape_cured_statically(g, entry):
            continue
        base = g.new if g.new is not None else g.original
        first = line_map(g.original, base)(entry.firstlineno) if base != g.original else entry.firstlineno
        new, sites = mark_dynamic(base, entry.name, first, dims)
        if new is None:
            continue
        g.new = new
        for site in sites:
            evidence = tr.describe_shape_evidence(entry, site.param)
            fix = Fix(edits=(), safety=Safety.SAFE,
                      title=f"insert torch._dynamo.maybe_mark_dynamic({site.arg}, {site.dim}) before the call")
            finding = Finding(
                code=MARK_CODE,
                message=(
                    f"`{site.function}` recompiled on {evidence}: mark dim {site.dim} of"
                    f" `{site.arg}` dynamic before the call"
                    f" (`torch._dynamo.maybe_mark_dynamic({site.arg}, {site.dim})`, from the trace)"
                ),
                path=g.display_path,
                line=site.line,
                column=site.column,
                end_line=site.line,
                end_column=site.column,
                fix=fix,
                rule_name="mark-dynamic-from-trace",
                applied=True,
            )
            g.matches.append(Match(finding, entry, tr.TENSOR_SHAPE))


# -- fixes made from evidence: the unspec flag for module int attributes ----------------
#
# The trace shows a compiled ``nn.Module`` method recompiling on an int
# attribute of ``self`` (``self.calls == 3``, ``self._modules['kv_cache'].size
# == 0``, ``L['self'].layer_idx == 1`` across blocks compiled one by one) that
# no applied FR005 finding cures: set FR005's flag
# (``torch._dynamo.config.allow_unspec_int_on_nn_module = True``, FR005's own
# rendering) before the compile of that class (FR005's placement), or, when the
# compile-site model sees no compile of it in this file, right after the
# module-level ``import torch`` (it then runs before any compile of the class:
# the class is defined below it).  Safe, as FR005's fix: a dynamo config flag
# that changes no value; ``--fix`` re-runs the command and restores the file
# unless fewer graphs compile with the same exit code.

FLAG_CODE = "TRACE"


def _module_int_sources(entry: tr.CodeEntry) -> List[str]:
    """The ``self.…`` int attributes the trace saw guarded (every one must be
    of ``self``: ``cfg.n`` of a plain object is not cured by the flag)."""
    sources = entry.sources(tr.MODULE_INT_ATTR)
    if not sources or not all(s.startswith("self.") for s in sources):
        return []
    return sources


def _method_class(source, model, firstlineno: int) -> Optional[ast.ClassDef]:
    """The nn.Module class of this file one of whose methods is the traced code
    object (starting at ``firstlineno``: a decorator or the ``def`` line)."""
    for cls in model.classes.values():
        if not isinstance(cls, ast.ClassDef) or not model.is_module_class(cls):
            continue
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and firstlineno in def_first_lines(stmt):
                return cls
    return None


def _torch_import(source) -> Optional[ast.stmt]:
    """The first module-level ``import torch`` (the flag goes right after it)."""
    for stmt in source.tree.body:
        if isinstance(stmt, ast.Import) and any(a.name == "torch" for a in stmt.names):
            return stmt
    return None


def _insert_after(target, new_stmt: cst.BaseStatement) -> Edit:
    def apply(updated: cst.CSTNode):
        return cst.FlattenSentinel([updated, new_stmt])

    return Edit(target, apply)


def unspec_flag(data: bytes, firstlinenos: Sequence[int], settings: Settings) -> Tuple[Optional[bytes], int]:
    """``data`` with FR005's flag set before the compile of the nn.Module
    class(es) whose methods start at ``firstlinenos``; (new bytes, line of the
    statement it precedes), or (None, 0) when the flag is set already or no
    place is known.  One class compiled in this file: before its first
    compile (FR005's placement); several, or none seen compiled: after the
    module-level ``import torch``, which runs before every one of them."""
    from .compile_sites import model_of
    from .engine import parse_ast
    from .placement import block_of, config_mentions, insert_before
    from .source import statement_target
    from .transforms.unspec_int_attrs import (
        FLAG,
        UnspecIntAttrs,
        _compile_statement,
        _insertion_statement,
        compiled_module_class,
    )

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, 0
    model = model_of(source)
    if model.torch_alias is None or config_mentions(source, [FLAG]):
        return None, 0
    classes = {id(c): c for c in (_method_class(source, model, line) for line in firstlinenos) if c is not None}
    if not classes:
        return None, 0
    places = [
        _insertion_statement(source, _compile_statement(model, site))
        for site in model.compile_sites
        if site.statement is not None and id(compiled_module_class(model, site)) in classes
    ]
    places = sorted((p for p in places if block_of(source, p) is not None), key=lambda p: (p.lineno, p.col_offset))
    ctx = FileContext("<trace>", "<trace>", settings, None, source)
    flag = UnspecIntAttrs._flag_statement(ctx)
    if len(classes) == 1 and places:
        stmt = places[0]
        edit = insert_before(source, stmt, flag)
    else:
        stmt = _torch_import(source)
        if stmt is None:
            return None, 0
        edit = _insert_after(statement_target(source, stmt), flag)
    finding = Finding(code=FLAG_CODE, message="", path="<trace>", line=1, column=1, end_line=1, end_column=1, fix=Fix(edits=(edit,), safety=Safety.SAFE))
    return render(ctx, [finding], data), stmt.lineno


def apply_flag_evidence(trace: tr.Trace, guided: Guided, settings: Settings) -> None:
    """Add FR005's flag where the trace shows nn.Module methods recompiling on
    int attributes of ``self`` and no applied FR005 finding of that file sets
    it: one flag per file, one finding per code object it cures."""
    from .interactive import line_map
    from .transforms.unspec_int_attrs import FLAG

    by_real = {_real(g.path): g for g in guided.files}
    todo: Dict[str, List[Tuple[tr.CodeEntry, List[str]]]] = {}
    for entry in trace.entries:
        sources = _module_int_sources(entry)
        path = entry_file(entry)
        if not sources or path is None or tr.is_library_file(entry.filename):
            continue
        real = _real(path)
        if real in by_real:
            todo.setdefault(real, []).append((entry, sources))
    for real, entries in todo.items():
        g = by_real[real]
        if any(m.finding.code == "FR005" and (m.finding.applied or m.finding.fix is None) for m in g.matches):
            continue  # FR005 set the flag, or knows it cannot cure this (a list indexed by the int)
        base = g.new if g.new is not None else g.original
        moved = line_map(g.original, base) if base != g.original else (lambda n: n)
        new, line = unspec_flag(base, [moved(e.firstlineno) for e, _ in entries], settings)
        if new is None:
            continue
        g.new = new
        for entry, sources in entries:
            n = sum(1 for r in entry.reasons if r.cause == tr.MODULE_INT_ATTR)
            what = ", ".join(f"`{s}`" for s in sources)
            fix = Fix(edits=(), safety=Safety.SAFE, title=f"set `torch._dynamo.config.{FLAG} = True` before the compile")
            finding = Finding(
                code=FLAG_CODE,
                message=(
                    f"`{entry.name}` (line {entry.firstlineno}) recompiled {n} time{'s' if n != 1 else ''} on module int attribute {what}"
                    f" (from the trace): set `torch._dynamo.config.{FLAG} = True` before the compile (FR005's fix)"
                ),
                path=g.display_path,
                line=line,
                column=1,
                end_line=line,
                end_column=1,
                fix=fix,
                rule_name="unspec-flag-from-trace",
                applied=True,
            )
            g.matches.append(Match(finding, entry, tr.MODULE_INT_ATTR))
