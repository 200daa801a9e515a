"""The trace-guided modes: ``fix-recompiles run [--diff | --fix | -i] -- CMD``
and ``fix-recompiles check PATH --from-trace DIR``: print the trace's table
and the implicated findings, then diff, write or review the guided plan;
``run --fix`` re-runs the command and keeps the fixes only if they cure."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple


from ..trace import read as tr
from ..analysis.context import Settings
from ..analysis.project import _read_bytes
from ..findings import Safety
from ..pipeline.selection import FileSelection
from ..pipeline.writer import write_atomic
from ..trace.match import Guided, map_as
from ..trace.guide import TraceFilter, guide, write
from ..trace.command import compare, function_key, graphs_by_function, output_change, traced_run
from ..transforms.dynamic_shapes import DynamicShapes
from ..pipeline.engine import FileResult
from .interactive import review_plan
from .output import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, err_line, out_line, report_lines


# -- the two entry points (cli.py) -------------------------------------------------

#: how many times ``run --fix`` fixes and runs the command again: a rerun's
#: trace can show a cause the first run's failed guards hid
ROUNDS = 3
#: the graphs automatic dynamic shapes promise a function once
#: `dynamic=False` is removed: static first, then one dynamic graph
SETTLED = 2

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


def _distinct(matches) -> list:
    """``matches`` with one per finding (a finding matched to several code
    objects, the frames of one function, counts once)."""
    seen = set()
    out = []
    for m in matches:
        if id(m.finding) not in seen:
            seen.add(id(m.finding))
            out.append(m)
    return out


def _print_matches(guided: Guided, settings: Settings, *, fixing: bool) -> None:
    from .output import format_finding

    shown = set()  # a finding matched to several code objects (a function's frames) is shown once
    for g in guided.files:
        for m in g.matches:
            f = m.finding
            if id(f) in shown:
                continue
            shown.add(id(f))
            if fixing and f.applied:
                out_line(f"fixed: {format_finding(f, show_fix=False)}")
            else:
                out_line(format_finding(f))
    n_other = sum(len(g.others) for g in guided.files)
    if n_other:
        out_line(
            f"{n_other} other finding{'s' if n_other != 1 else ''} in these files not implicated by the trace (left alone; see `fix-recompiles check`)."
        )
    unsafe_left = _distinct(
        m
        for m in guided.matches
        if not m.finding.applied
        and m.finding.fix is not None
        and m.finding.fix.safety == Safety.UNSAFE
    )
    if unsafe_left and not settings.unsafe_fixes:
        out_line(
            f"{len(unsafe_left)} implicated fix{'es stay' if len(unsafe_left) != 1 else ' stays'} unsafe (a trace proves the recompile, not that the rewrite keeps results); apply with --unsafe-fixes."
        )


def report_and_apply(
    trace: tr.Trace,
    settings: Settings,
    within: Optional[Sequence[str]],
    *,
    diff: bool,
    fix: bool,
    selection: FileSelection = FileSelection(),
    guided: Optional[Guided] = None,
) -> Tuple[int, Guided, int]:
    """Print the table, the implicated findings, and the diff or the writes
    (of ``guided``, when the caller has guided the trace already).
    (exit code, guided, files written)."""
    if guided is None:
        guided = guide(trace, settings, within, fixing=fix, selection=selection)
    for line in report_lines(trace, settings, guided):
        out_line(line)
    for path, reason in guided.errors:
        err_line(f"error: {path}: {reason}")
    if not guided.matches:
        out_line(
            "No finding of the rules matches a recompile in the trace: nothing to fix."
        )
    else:
        out_line("")
        out_line("Findings at the sites the trace implicates:")
        _print_matches(guided, settings, fixing=fix)
    written = 0
    if diff:
        _print_diff(guided)
    elif fix:
        written = write(guided)
        for path, reason in guided.errors:
            err_line(f"error: {path}: {reason}")
        applied = len(_distinct(m for m in guided.matches if m.finding.applied))
        if applied:
            out_line(
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
    trace: tr.Trace, settings: Settings, within: Optional[Sequence[str]], selection: FileSelection = FileSelection()
) -> Tuple[int, List[Tuple[str, str, bytes]]]:
    """``-i``: print the table, then review only the implicated fixes one at a
    time (``codemods.modes.interactive`` with a :class:`TraceFilter`).
    (exit code, files written as (path, display path, bytes before))."""
    guided = guide(trace, settings, within, fixing=False, evidence=False, selection=selection)
    for line in report_lines(trace, settings, guided):
        out_line(line)
    for path, reason in guided.errors:
        err_line(f"error: {path}: {reason}")
    files = [g for g in guided.files if g.matches]
    if not files:
        out_line(
            "No finding of the rules matches a recompile in the trace: nothing to fix."
        )
        return (EXIT_ERROR if guided.errors else EXIT_CLEAN), []
    n = len(guided.matches)
    out_line("")
    out_line(
        f"Reviewing the {n} finding{'s' if n != 1 else ''} the trace implicates"
        f" in {len(files)} file{'s' if len(files) != 1 else ''}:"
    )
    n_other = sum(len(g.others) for g in files)
    if n_other:
        out_line(
            f"({n_other} other finding{'s' if n_other != 1 else ''} in these files"
            f" {'are' if n_other != 1 else 'is'} not implicated by the trace and not offered;"
            " see `fix-recompiles check -i`.)"
        )
    sys.stdout.flush()
    # the review starts from the analysis the trace was matched against (no
    # second run, no second index); after each accepted fix the filter
    # matches the trace again on the accepted code
    plan = [FileResult(path=g.path, display_path=g.display_path, original=g.original, findings=[m.finding for m in g.matches]) for g in files]
    code, tally = review_plan(
        plan,
        replace(settings, unproven=True),
        sys.stdin,
        sys.stdout,
        sys.stderr,
        project=guided.project,
        finding_filter=TraceFilter(trace),
        selection=selection,
        prepared={g.path: (g.ctx, [m.finding for m in g.matches]) for g in files},
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
    selection: FileSelection = FileSelection(),
) -> int:
    """``fix-recompiles check PATH --from-trace DIR [--diff | --fix | -i]``."""
    if not os.path.exists(folder):
        err_line(f"error: {folder}: no such trace folder")
        return EXIT_ERROR
    trace = tr.read_trace(folder)
    if not trace.files:
        err_line(f"error: {folder}: no trace files (expected TORCH_TRACE output)")
        return EXIT_ERROR
    within = list(paths) or ["."]
    if interactive:
        return review(trace, settings, within, selection)[0]
    code, _guided, _written = report_and_apply(
        trace, settings, within, diff=diff, fix=fix, selection=selection
    )
    return code


def _restore(written: Sequence[Tuple[str, str, bytes]], fixed: Dict[str, Optional[bytes]]) -> None:
    """Put back the bytes each written file had before the fixes, but only
    where the file still holds what the fixes wrote: one saved by the user
    while the command ran again (minutes, for a training run) keeps the
    user's edit, and says so."""
    for path, shown, original in written:
        now = _read_bytes(path)
        if now is not None and now == fixed.get(path):
            write_atomic(path, original, shown)
        elif now != original:
            err_line(f"warning: {shown}: changed while the command ran again; not restored (the fix is still in it unless you removed it)")


def _compare_after(
    cmd: Sequence[str],
    before: tr.Trace,
    code_before: int,
    written: Sequence[Tuple[str, str, bytes]],
    code: int,
    output_before: bytes = b"",
) -> Tuple[int, Optional[tr.Trace]]:
    """Run ``cmd`` again on the fixed files and print graphs before -> after;
    restore ``written`` (path, display path, bytes before) if its exit code
    changed, if it printed other results than ``output_before``
    (:func:`codemods.trace.command.output_change`), or if the fixes compiled
    no fewer graphs in total; when the first run failed at the recompile
    limit (``code_before`` != 0), keep them only if the command now succeeds.
    A file edited while the command ran again is not restored (:func:`_restore`).
    Torch's code objects of the second trace are mapped to the user's as the
    first trace's were (:func:`codemods.trace.match.map_as`).  (exit code,
    the second trace when the fixes were kept, else None)."""
    fixed = {path: _read_bytes(path) for path, _shown, _original in written}
    err_line(f"fix-recompiles: running {' '.join(cmd)} again with the fixes")
    code_after, after, output_after = traced_run(cmd)
    map_as(after, before)
    out_line("")
    out_line("Graphs compiled, before -> after:")
    rows = compare(before, after)
    width = max([len(r[0]) for r in rows] + [5])
    for name, nb, na in rows:
        out_line(f"  {name.ljust(width)}  {nb} -> {na}")
    out_line(f"  {'total'.ljust(width)}  {before.total_graphs} -> {after.total_graphs}")
    changed = output_change(output_before, output_after, prefix=code_before != 0)
    if changed is not None and (code_after == code_before or code_after == 0):
        # a fix must keep the program's results, whatever the graphs say
        _restore(written, fixed)
        err_line(f"error: the command's output changed after the fixes ({changed}); the files were restored")
        return EXIT_ERROR, None
    if code_before != 0:  # it failed at the recompile limit: the fixes must end that
        if code_after == 0:
            out_line(f"Exit code {code_before} -> 0: the recompile limit is no longer hit.")
            return code, after
        _restore(written, fixed)
        err_line(f"error: the command still fails after the fixes (exit code {code_after}); the files were restored")
        return EXIT_ERROR, None
    if code_after == code_before:
        out_line(f"Exit code unchanged ({code_after}).")
        if written and after.total_graphs >= before.total_graphs:
            # a fix must cure what it claims (issue 15, item 2): none did
            _restore(written, fixed)
            err_line(
                f"fix-recompiles: the fixes did not reduce the graphs compiled ({before.total_graphs} -> "
                f"{after.total_graphs}); the files were restored"
            )
            return EXIT_FINDINGS, None
        return code, after
    _restore(written, fixed)
    err_line(
        f"error: exit code changed {code_before} -> {code_after} after the fixes; the files were restored"
    )
    return EXIT_ERROR, None


def run(
    cmd: Sequence[str],
    settings: Settings,
    *,
    diff: bool,
    fix: bool,
    interactive: bool = False,
    selection: FileSelection = FileSelection(),
) -> int:
    """``fix-recompiles run [--diff | --fix | -i] -- CMD...``."""
    if not cmd:
        err_line(
            "error: no command given: fix-recompiles run [--diff | --fix | -i] -- CMD ARGS..."
        )
        return EXIT_ERROR
    err_line(f"fix-recompiles: running {' '.join(cmd)} with TORCH_TRACE")
    code_before, before, output_before = traced_run(cmd)
    out_line("")
    if code_before != 0 and not before.hard_limit_failures:
        for line in report_lines(before, settings):
            out_line(line)
        err_line(f"error: the command failed with exit code {code_before}; nothing changed")
        return EXIT_ERROR
    if code_before != 0:
        # fullgraph=True raises at the recompile limit: the failure is the
        # storm itself, and its trace is whole up to there
        err_line(
            f"fix-recompiles: the command failed with exit code {code_before} at the recompile limit "
            "(FailOnRecompileLimitHit under fullgraph=True): its trace is the storm to cure"
        )
    guided: Optional[Guided] = None
    if interactive:
        code, written = review(before, settings, [os.getcwd()], selection)
    else:
        code, guided, _n = report_and_apply(
            before, settings, [os.getcwd()], diff=diff, fix=fix, selection=selection
        )
        written = [
            (g.path, g.display_path, g.original) for g in guided.files if g.changed
        ] if fix else []
    if not written:
        # a command that failed at the limit and was not fixed still has its storm
        return max(code, EXIT_FINDINGS) if code_before != 0 else code
    result, after, dropped = _keep_or_restore(cmd, before, code_before, output_before, guided, written, code, settings, selection)
    rounds = 1
    if guided is not None and code_before == 0:
        # FR001's other form, where removing `dynamic=False` did not settle a function
        tried = _dynamic_true(cmd, before, output_before, guided, after, dropped, code, settings, selection, rounds + 1)
        if tried is not None:
            rounds += 1
            result, after, dropped = tried
    if after is None or guided is None or code_before != 0:
        return result
    # the rerun's trace shows what the first guard failures hid (a second
    # int behind the first, a size that stayed static once dynamic=False
    # went): cure that too, each round kept only if it compiles fewer
    # graphs again with the same output
    while rounds < ROUNDS:
        # (not the functions whose fixes an earlier round took back: they cured nothing)
        follow = guide(after, settings, [os.getcwd()], fixing=True, selection=selection, dropped=dropped)
        if not any(g.changed for g in follow.files):
            break
        rounds += 1
        out_line("")
        out_line(f"Round {rounds}: the rerun still recompiles where a fix applies; fixing what its trace shows")
        code, follow, _n = report_and_apply(after, settings, [os.getcwd()], diff=False, fix=True, selection=selection, guided=follow)
        written = [(g.path, g.display_path, g.original) for g in follow.files if g.changed]
        if not written:
            break
        _round_result, later, more = _keep_or_restore(cmd, after, 0, output_before, follow, written, code, settings, selection, dropped)
        if later is None:
            err_line(f"fix-recompiles: round {rounds} was taken back; the fixes of the round{'s' if rounds > 2 else ''} before it stay")
            rounds -= 1
            break
        result, after, dropped = _round_result, later, dropped | more
    if rounds > 1:
        out_line("")
        out_line(f"Over {rounds} rounds: {before.total_graphs} -> {after.total_graphs} graphs.")
    return result


def _keep_or_restore(
    cmd: Sequence[str],
    before: tr.Trace,
    code_before: int,
    output_before: bytes,
    guided: Optional[Guided],
    written: Sequence[Tuple[str, str, bytes]],
    code: int,
    settings: Settings,
    selection: FileSelection,
    dropped: FrozenSet[Tuple[str, str]] = frozenset(),
) -> Tuple[int, Optional[tr.Trace], FrozenSet[Tuple[str, str]]]:
    """Run the command again on the fixes written (:func:`_compare_after`);
    then take back the fixes of each function whose graphs they did not
    reduce, keep the others and run it again (``dropped``: the functions
    an earlier round took back).  (exit code, the trace of the last run
    when fixes were kept, else None, the functions taken back)."""
    result, after = _compare_after(cmd, before, code_before, written, code, output_before)
    if after is None or guided is None or code_before != 0:
        # (a first run stopped at the limit ran less code: its per-function counts are not comparable)
        return result, after, frozenset()
    # each function's fixes must cure that function: the run's total falling
    # does not keep a fix that left its own function's graphs as they were
    idle = _idle_functions(guided, before, after)
    if not idle:
        return result, after, frozenset()
    for (path, name), what in idle:
        where = os.path.relpath(path) if path and not os.path.relpath(path).startswith("..") else path
        err_line(f"fix-recompiles: the fixes for `{name}` ({where}) did not reduce {what}; taking them back")
    fixed = {path: _read_bytes(path) for path, _shown, _original in written}
    _restore(written, fixed)
    taken = frozenset(key for key, _what in idle)
    again = guide(before, settings, [os.getcwd()], fixing=True, selection=selection, dropped=dropped | taken)
    kept = _distinct(m for m in again.matches if m.finding.applied)
    if not kept or not any(g.changed for g in again.files):
        err_line("fix-recompiles: no fix is left; the files were restored")
        return EXIT_FINDINGS, None, taken
    from .output import format_finding

    write(again)
    for m in kept:
        out_line(f"kept: {format_finding(m.finding, show_fix=False)}")
    rewritten = [(g.path, g.display_path, g.original) for g in again.files if g.changed]
    return (*_compare_after(cmd, before, code_before, rewritten, code, output_before), taken)


def _dynamic_true(
    cmd: Sequence[str],
    before: tr.Trace,
    output_before: bytes,
    guided: Guided,
    after: Optional[tr.Trace],
    dropped: FrozenSet[Tuple[str, str]],
    code: int,
    settings: Settings,
    selection: FileSelection,
    round_no: int,
) -> Optional[Tuple[int, tr.Trace, FrozenSet[Tuple[str, str]]]]:
    """FR001 cures `dynamic=False` by removing it: automatic dynamic shapes
    compile static first and, at the first change, once more with the sizes
    that changed made dynamic.  When the rerun shows that this did not
    settle a function (it compiled more than those two graphs: its sizes
    changed one after another, as ai-toolkit's decode step's did; or no
    fewer than before), write `dynamic=True` in its place instead, from the
    files as they were: the first round again in FR001's other form, kept
    only if it compiles fewer graphs than the round it replaces (or than the
    first run when that round was taken back), with the same output and
    exit code; else the files go back to that round's.  (exit code, trace,
    functions taken back) when kept, else None."""
    if settings.dynamic_fix != "remove":
        return None
    removed = {function_key(m.entry) for m in guided.matches if m.finding.applied and m.finding.code == DynamicShapes.code}
    if not removed:
        return None
    graphs = graphs_by_function(after) if after is not None else {}
    unsettled = sorted(key for key in removed if after is None or key in dropped or graphs.get(key, 0) > SETTLED)
    if not unsettled:
        return None
    now = {g.path: _read_bytes(g.path) for g in guided.files}
    for g in guided.files:
        if now[g.path] != g.original:
            write_atomic(g.path, g.original, g.display_path)
    variant = guide(
        before, replace(settings, dynamic_fix="true"), [os.getcwd()], fixing=True, selection=selection, dropped=dropped - frozenset(unsettled)
    )
    if all((g.new if g.changed else g.original) == now.get(g.path, g.original) for g in variant.files):
        # (a store_true flag's `or None` has no other form)
        _restore([(g.path, g.display_path, now[g.path]) for g in guided.files if now[g.path] is not None], {g.path: g.original for g in guided.files})
        return None
    out_line("")
    names = ", ".join(f"`{name}`" for _path, name in unsettled)
    seen = "was taken back" if after is None else "left " + ", ".join(f"`{name}` compiling {graphs.get((path, name), 0)} graphs" for path, name in unsettled)
    out_line(f"Round {round_no}: removing `dynamic=False` {seen}; trying `dynamic=True` for {names} instead")
    write(variant)
    written = [(g.path, g.display_path, now[g.path]) for g in guided.files if now[g.path] is not None and _read_bytes(g.path) != now[g.path]]
    result, later = _compare_after(cmd, after if after is not None else before, 0, written, code, output_before)
    if later is None:
        kept = "`dynamic=False` stays removed" if after is not None else "the files are as they were"
        err_line(f"fix-recompiles: round {round_no} was taken back; {kept}")
        return None
    return result, later, dropped - frozenset(unsettled)


def _idle_functions(guided: Guided, before: tr.Trace, after: tr.Trace) -> List[Tuple[Tuple[str, str], str]]:
    """(function key, what did not drop: "its graphs (3 -> 3)") of the
    functions with an applied fix whose graphs the fixes did not reduce; for
    a code object that compiled no graph (its frame broke at once and
    recompiled, dia's ``_prepare_text_input`` on each prompt), its compiles."""
    b, a = graphs_by_function(before), graphs_by_function(after)
    cb, ca = _compiles_by_function(before), _compiles_by_function(after)
    out: List[Tuple[Tuple[str, str], str]] = []
    for m in guided.matches:
        if not m.finding.applied:
            continue
        key = function_key(m.entry)
        if key not in b or any(k == key for k, _ in out):
            continue
        if b[key] == 0 and cb.get(key, 0) > ca.get(key, 0):
            continue
        if a.get(key, 0) >= b[key]:
            what = f"its graphs ({b[key]} -> {a.get(key, 0)})" if b[key] else f"its compiles ({cb.get(key, 0)} -> {ca.get(key, 0)}; no graphs)"
            out.append((key, what))
    return out


def _compiles_by_function(trace: tr.Trace) -> Dict[Tuple[str, str], int]:
    """Compiles per :func:`function_key` (also those that made no graph)."""
    out: Dict[Tuple[str, str], int] = {}
    for e in trace.entries:
        key = function_key(e)
        out[key] = out.get(key, 0) + e.compiles
    return out
