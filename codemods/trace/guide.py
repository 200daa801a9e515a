"""The plan narrowed by a trace: analyse the files a trace implicates (with
the project index of the whole folder), keep the findings it matches, and
render their fixes plus the fixes the trace supports on its own
(:mod:`codemods.trace.cures`)."""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import replace
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple


from . import read as tr
from ..analysis.context import TraceEvidence, FileContext, Settings
from ..pipeline.engine import analyze, render, should_apply
from ..findings import FileError, Finding
from ..pipeline.index import build_project_index
from ..transforms import PROJECT_FACTS
from ..pipeline.selection import FileSelection
from ..pipeline.writer import write_atomic, write_changed
from .match import Guided, GuidedFile, Match, _real, entry_file, implicated_files, made_class_files, map_library_entries, match_file
from .float_state import apply_float_state_evidence
from .config_cures import apply_config_evidence, apply_dynamic_sources_evidence
from .cures import MARK_CODE, apply_alias_evidence, apply_evidence, apply_field_layout_evidence, apply_flag_evidence, apply_layout_evidence
from .flatten_core import apply_rank_evidence
from .dtype_fields import apply_dtype_evidence
from .global_memo import apply_global_memo_evidence, global_memo_files
from .growth_disable import apply_growth_evidence, growth_files
from .string_disable import apply_string_evidence, string_files
from .init_default import apply_presence_evidence, presence_files
from .partial_reuse import apply_partial_reuse_evidence, remade_partial_files


class TraceFilter:
    """The ``-i`` session's finding filter for a trace: keep only the findings
    :func:`match_file` matches (upgraded as in ``--fix``).  The session calls it
    again on the accepted code after every accepted fix; the trace's line
    numbers are of the file as it ran, so they are first moved to the accepted
    code (``analysis.lines.line_map`` from the bytes first seen for that file)."""

    def __init__(self, trace: tr.Trace) -> None:
        self.trace = trace
        self._original: Dict[str, bytes] = {}

    def _entries(self, path: str, data: bytes) -> List[tr.CodeEntry]:
        """The trace's entries, those of this file with their lines moved to ``data``."""
        real = _real(path)
        original = self._original.setdefault(real, data)
        entries = self.trace.entries
        if data != original:
            from ..analysis.lines import line_map

            moved = line_map(original, data)
            entries = [
                dataclasses.replace(e, firstlineno=moved(e.firstlineno))
                if e.firstlineno and entry_file(e) and _real(entry_file(e)) == real
                else e
                for e in entries
            ]
        return entries

    def evidence(self, path: str, data: bytes) -> Optional[TraceEvidence]:
        """What the trace observed in this file, at the lines of ``data`` (for
        the analysis: :func:`float_evidence`)."""
        return float_evidence(tr.Trace(entries=self._entries(path, data))).get(_real(path))

    def __call__(self, ctx: FileContext, findings: Sequence[Finding]) -> List[Finding]:
        matches, _others = match_file(ctx, findings, self._entries(ctx.path, ctx.source.data))
        return [m.finding for m in matches]


def float_evidence(trace: tr.Trace) -> Dict[str, TraceEvidence]:
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
    return {path: TraceEvidence({line: frozenset(s) for line, s in lines.items()}) for path, lines in found.items()}


def guide(
    trace: tr.Trace,
    settings: Settings,
    within: Optional[Sequence[str]] = None,
    *,
    fixing: bool,
    evidence: bool = True,
    selection: FileSelection = FileSelection(),
    dropped: FrozenSet[Tuple[str, str]] = frozenset(),
) -> Guided:
    """Analyse the files the trace implicates; compute the new bytes with only
    the matched findings' fixes (safe ones, or all with ``--unsafe-fixes``),
    then (``evidence``) the fixes the trace supports on its own
    (:func:`apply_evidence`).  ``selection``: the run's excludes and
    per-file-ignores (a file the configuration excludes is neither analysed
    nor fixed, though the trace names it).  ``dropped``: functions
    (:func:`codemods.trace.command.function_key`) whose fixes a rerun showed
    curing nothing: their code objects implicate nothing."""
    from ..pipeline.discovery import display_path
    from .command import function_key

    if dropped:
        trace = replace(trace, entries=[e for e in trace.entries if function_key(e) not in dropped])
    out = Guided()
    # the trace is the evidence the source lacks: unproven findings take part
    # (only those it implicates are applied)
    settings = replace(settings, unproven=True)
    # the run's files under the folder, not only the implicated ones: an lr
    # writer in scheduler.py proves main.py's FR004 fix; a compile of a
    # library function there names the user's site of a torch-internal entry
    taken = selection.discover(within).files if within else []
    map_library_entries(trace, taken)
    files = _add_files([], implicated_files(trace, within), selection)
    # the files whose functions made the classes type guards name (FR019):
    # analysed, and with the index (they need no compile site of their own)
    made = [path for path in made_class_files(trace, taken) if selection.takes(path)]
    files = _add_files(files, made, selection)
    for finder in _CURE_FILES:
        files = _add_files(files, finder(trace, taken), selection)
    indexed = sorted(set(taken) | set(files)) if within else files
    project = build_project_index(indexed, settings, [fact for _, fact in PROJECT_FACTS])
    if made:
        project.always = tuple(sorted(set(project.always) | set(made)))
    out.project = project
    files = files + _feeding_files(project, files, indexed)
    files = files + [path for path in _ready_writers(project, files) if path not in files and selection.takes(path)]
    observed = float_evidence(trace)
    #: (module, line of the construction) of optimizers whose FR004 fix is applied
    optimizers: Dict[Tuple[str, int], Match] = {}
    for path in files:
        shown = display_path(path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            ctx, findings = analyze(path, shown, data, selection.settings_for(path, settings), project, evidence=observed.get(_real(path)))
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
        guided.ctx = ctx
        _apply(ctx, guided, data, settings, out)
        optimizers.update(_fixed_optimizers(ctx, project, guided))
    if optimizers:
        apply_lr_writers(out, project, settings, optimizers)
    if project.table("lr_factories"):
        apply_lr_factories(out, project, settings)
    if evidence:
        # the trace's own fixes obey --select / --ignore / the configuration:
        # the flag is FR005's cure, the marks are the code TRACE's
        if settings.selects("FR005"):
            apply_flag_evidence(trace, out, settings)
        if settings.selects(MARK_CODE):
            apply_evidence(trace, out, settings.unsafe_fixes)
            apply_layout_evidence(trace, out)
            apply_field_layout_evidence(trace, out)
            apply_rank_evidence(trace, out)
            apply_presence_evidence(trace, out)
            apply_global_memo_evidence(trace, out, settings.unsafe_fixes)
            apply_growth_evidence(trace, out, settings.unsafe_fixes)
            apply_string_evidence(trace, out, settings.unsafe_fixes)
            apply_partial_reuse_evidence(trace, out)
            apply_alias_evidence(trace, out)
        # FR018's finding where it found the dict, TRACE's elsewhere
        apply_float_state_evidence(trace, out, settings.unsafe_fixes, trace_cures=settings.selects(MARK_CODE))
        if settings.selects(MARK_CODE):
            apply_config_evidence(trace, out, settings.unsafe_fixes)
            apply_dynamic_sources_evidence(trace, out, settings.unsafe_fixes)
            apply_dtype_evidence(trace, out, settings.unsafe_fixes)
    return out


#: the files a trace cure edits that the trace need not implicate, each
#: found by its cure's module: the classes whose attribute ``hasattr`` found
#: missing (the default goes into their ``__init__``), the globals a compiled
#: call found None and filled (skipped while compiling there), the installs
#: of a ``functools.partial`` the trace saw freed and made again (made once
#: and reused there), the methods that grow a list whose length compiled
#: code guarded, the functions whose frames recompiled on strings (both run
#: eagerly there)
_CURE_FILES = (presence_files, global_memo_files, remade_partial_files, growth_files, string_files)


def _add_files(files: List[str], found: Sequence[str], selection: FileSelection) -> List[str]:
    """``files`` and those of ``found`` the run's selection takes that are
    not among them yet (compared by real path: a link names the same file)."""
    known = {_real(path) for path in files}
    out = list(files)
    for path in found:
        if _real(path) not in known and selection.takes(path):
            known.add(_real(path))
            out.append(path)
    return out


def _feeding_files(project, implicated: Sequence[str], indexed: Sequence[str]) -> List[str]:
    """Files of the run (not implicated themselves) that may call a function
    compiled in an implicated file: a float passed there in is fixed where it
    is passed (FR003 reports it in the caller's file)."""
    from ..analysis.mentions import mentions_any

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


def _ready_writers(project, implicated: Sequence[str]) -> List[str]:
    """Files of lr writers given, by an implicated file, an optimizer whose
    lr is a tensor already (the index's ``lr_ready``): a recompile of its
    step there is the float the writer writes over it, FR004's to cure in
    the writer's file (its finding there names the caller's file)."""
    modules = {project.modules[p][1] for p in implicated if p in project.modules}
    out: List[str] = []
    for key, writers in sorted(project.table("lr_ready").items()):
        path = project.path_of(key)
        if path is not None and any(module in modules for callers in writers.values() for module, _ in callers):
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
    ``.fill_`` edits.  A module of proven lr writers (the index's ``lr_proven``)
    all of whose optimizers had their FR004 fix applied here is analysed and
    its FR004 findings applied with them; otherwise nothing is added (a
    ``.fill_`` on a float lr would crash)."""
    done = {_real(g.path) for g in out.files}
    ready = project.table("lr_ready")
    for key, writers in sorted(project.table("lr_proven").items()):
        path = project.path_of(key)
        # callers with a tensor lr already need no fix (the writer's own finding matches their step)
        callers = sorted({c for name, cs in writers.items() for c in cs if c not in ready.get(key, {}).get(name, ())})
        if path is None or _real(path) in done or not callers or any(c not in optimizers for c in callers):
            continue
        _apply_fr004_in(out, project, settings, path, optimizers[callers[0]])


def apply_lr_factories(out: Guided, project, settings: Settings) -> None:
    """The ``.fill_`` of an lr whose optimizer a factory of another module
    builds (nanoGPT's ``model.configure_optimizers(...)``) is whole only with
    that factory's tensor lr.  A module of proven factories (the index's
    ``lr_factories``) every user module of which had an FR004 fix applied
    here is analysed and its FR004 findings applied with them."""
    done = {_real(g.path) for g in out.files}
    fixed: Dict[str, Match] = {}
    for g in out.files:
        key = project.modules.get(g.path)
        applied = [m for m in g.matches if m.finding.code == "FR004" and m.finding.applied]
        if key is not None and applied:
            fixed[key[1]] = applied[0]
    for key, factories in sorted(project.table("lr_factories").items()):
        path = project.path_of(key)
        users = sorted({module for methods in factories.values() for callers in methods.values() for module, _ in callers})
        if path is None or _real(path) in done or not users or any(u not in fixed for u in users):
            continue
        _apply_fr004_in(out, project, settings, path, fixed[users[0]])


def _apply_fr004_in(out: Guided, project, settings: Settings, path: str, cause: Match) -> None:
    """Analyse ``path`` (not implicated by the trace) and apply its FR004
    fixes, as curing the trace's optimizer-lr recompiles ``cause`` names."""
    from ..pipeline.discovery import display_path

    shown = display_path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        ctx, findings = analyze(path, shown, data, settings, project)
    except (OSError, FileError):
        return
    if ctx is None:
        return
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
