"""The CI guard: ``fix-recompiles run --max-recompiles N -- CMD`` reports
every compiled function that recompiled more than N times (text, json, sarif
or github) and changes nothing."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import List, Optional, Sequence


from ..trace import read as tr
from ..analysis.context import Settings
from ..findings import Finding
from .output import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, err_line, out_line, available_codes, report_lines
from ..pipeline.selection import FileSelection
from ..trace.match import map_library_entries
from ..trace.command import run_traced


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


def cause_details(entry: tr.CodeEntry, codes, trace: Optional[tr.Trace] = None) -> List[str]:
    """``cause: <cause> `<sources>`; cure: <cure or why there is none>``, one
    per cause of ``entry`` (the table's cure column, :func:`codemods.trace.read.cure_label`);
    with the ``trace``, a shape cure also says why no mark can be written."""
    if not entry.causes:
        return ["cause unknown"]
    out = []
    for cause in entry.causes:
        srcs = entry.sources(cause)
        label = cause if cause != tr.OTHER else f"other: {next(r.text for r in entry.reasons if r.cause == cause)}"
        if srcs and cause != tr.OTHER:
            label += " " + ", ".join(f"`{s}`" for s in srcs)
        cure = tr.cure_label(entry, cause, codes)
        if cause == tr.RANK:
            # whether this function can be split is read from its source
            # (codemods/trace/flatten_core.py), as `run --fix` would
            from ..trace.flatten_core import rank_cure

            cure = rank_cure(entry, cure)
        elif cause == tr.KEYS:
            # whether a default in `__init__` reads the same (codemods/trace/init_default.py)
            from ..trace.init_default import presence_cure

            cure = presence_cure(entry, cure)
        elif cause == tr.TENSOR_SHAPE and trace is not None:
            # whether a call of the file can take the marks (codemods/trace/cures.py)
            from ..trace.cures import no_mark_why
            from ..trace.registry import NO_MARK

            why = no_mark_why(trace, entry)
            if why:
                cure = tr.cure_label(entry, cause, codes, trace_cures=[NO_MARK]) + f" ({why})"
        elif cause == tr.NONE_CHECK:
            # whether a global's memo can be skipped while compiling (codemods/trace/global_memo.py)
            from ..trace.global_memo import global_memo_cure

            cure = global_memo_cure(entry, cure)
        elif cause == tr.LENGTH:
            # whether the function that grows the list can run eagerly (codemods/trace/growth_disable.py)
            from ..trace.growth_disable import growth_cure

            cure = growth_cure(entry, cure)
        elif cause in (tr.CONSTANT, tr.RESUME_VALUE):
            # whether the function that reads the string can run eagerly (codemods/trace/string_disable.py)
            from ..trace.string_disable import string_cure

            cure = string_cure(entry, trace, cure)
        out.append(f"cause: {label}; cure: {cure}")
    return out


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
        for detail in cause_details(entry, codes, trace):
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
    selection: FileSelection = FileSelection(),
) -> int:
    """``fix-recompiles run --max-recompiles N [--format F] -- CMD...``: run CMD
    under the trace; exit 1 when a compiled code object recompiled more than N
    times (also when CMD failed because one hit the limit under
    ``fullgraph=True``), 2 when CMD failed otherwise (its exit code in the
    message), else 0.  With a
    machine format CMD's output goes to stderr, so stdout holds only the
    report."""
    if not cmd:
        err_line(
            "error: no command given: fix-recompiles run --max-recompiles N -- CMD ARGS..."
        )
        return EXIT_ERROR
    machine = output_format != "text"
    say = err_line if machine else out_line
    err_line(f"fix-recompiles: running {' '.join(cmd)} with TORCH_TRACE")
    folder = tempfile.mkdtemp(prefix="fix-recompiles-trace-")
    try:
        code = run_traced(cmd, folder, stdout=sys.stderr if machine else None)
        trace = tr.read_trace(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    map_library_entries(trace, selection.discover([os.getcwd()]).files)
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
        codes = available_codes(settings)
        for e in over:
            say(
                f"  {tr.display_name(e)} ({tr.display_location(e, os.getcwd())}):"
                f" {tr.recompiles(e.recompiles)}"
                + (", hit the recompile limit" if e.limit_hit else "")
            )
            for detail in cause_details(e, codes, trace):
                say(f"    {detail}")
    else:
        say(
            f"No compiled function recompiled more than {max_recompiles}"
            f" time{'s' if max_recompiles != 1 else ''} ({n_compiled} compiled,"
            f" {trace.total_graphs} graph{'s' if trace.total_graphs != 1 else ''})."
        )
    if code != 0 and trace.hard_limit_failures and over:
        # fullgraph=True raised at the recompile limit: the failure is the storm the check is about
        err_line(
            f"fix-recompiles: the command failed with exit code {code} at the recompile limit"
            " (FailOnRecompileLimitHit under fullgraph=True)"
        )
        return EXIT_FINDINGS
    if code != 0:
        err_line(
            f"error: the command failed with exit code {code}; the recompile check"
            " is not conclusive"
        )
        return EXIT_ERROR
    return EXIT_FINDINGS if over else EXIT_CLEAN
