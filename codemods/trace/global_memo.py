"""A fix made from trace evidence: a module global filled on first use inside
compiled code is skipped while compiling.

vllm-gaudi before 86bb66e7 (PR #1715): the attention function the
regionally compiled layers call (through transformers'
``ALL_ATTENTION_FUNCTIONS``, a reach no static analysis sees) does
``global _CACHED_FSDPA_OP; if _CACHED_FSDPA_OP is None: _CACHED_FSDPA_OP =
ModuleFusedSDPA(kernels.fsdpa())``.  The first compiled call is guarded on
``G['_CACHED_FSDPA_OP'] is None`` and fills it, so the next call compiles
again.  The trace names the guard's line; where that line is the memo's
check, a local stands in for the global: None while compiling (the global is
then not read, so not guarded), the global itself outside compiled code, and
the value is written back only outside (FR014's judgement of the form and of
its purity, :func:`codemods.transforms.compiled_memo.global_memo`).

Safe where the value is proven a pure function of nothing (the compiled call
computes what the global would hold); unsafe otherwise (the message says
why), applied with ``--unsafe-fixes``.  ``run --fix`` keeps it only if the
rerun compiles fewer graphs with the same output and exit code
(``tests/trace_scripts/global_memo_filled.py``: 2 -> 1;
``benchmarks/recall/vllm_gaudi_fsdpa_op_lazy_global``: 2 -> 1, the
project's count)."""

from __future__ import annotations

from typing import List, Sequence

from . import read as tr
from .registry import GLOBAL_MEMO
from ..analysis.compile_sites import model_of
from ..analysis.context import Settings
from ..findings import FileError
from ..pipeline.engine import parse_ast
from ..transforms.compiled_memo import global_memo, global_memo_edits, global_memo_impure
from .cures import _applied_finding, _render_edits, _unfixed
from .match import Guided, Match, _real


def global_memo_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` where a recompiling code object's global None
    check is (the memo's function may be in another file than the compiled
    code)."""
    by_real = {_real(p): p for p in paths}
    out: List[str] = []
    for entry in trace.entries:
        for file, _line, _name in tr.global_none_checks(entry):
            path = by_real.get(_real(file))
            if path is not None and path not in out:
                out.append(path)
    return out


def apply_global_memo_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """Skip, while compiling, every module global a guided file's function
    fills on first use and compiled code found None (one finding, code
    ``TRACE``: safe and applied where the value is proven pure, unsafe and
    applied with ``unsafe_fixes`` otherwise); where the form is not the one
    the fix proves, a finding without a fix says why."""

    by_real = {_real(g.path): g for g in guided.files}
    done = set()
    for entry in trace.entries:
        if tr.is_library_file(entry.filename):
            continue
        for file, line, name in tr.global_none_checks(entry):
            g = by_real.get(_real(file))
            if g is None or (g.path, name) in done:
                continue
            if any(m.entry is entry and m.cause == tr.NONE_CHECK and m.finding.code == "FR014" for m in g.matches):
                continue  # FR014 found the memo where the source shows the reach: its finding cures it
            done.add((g.path, name))
            base, mover = g.current()
            moved = mover(line)
            count = entry.count(tr.NONE_CHECK)
            seen = f"from the trace: {tr.recompiles(count)} on `{name} is None`"
            try:
                source = parse_ast(g.path, base)
            except FileError:
                continue
            model = model_of(source)
            memo, why = global_memo(source, model, moved, name)
            if memo is None:
                message = f"`{name}` is None at the first compiled call and filled by it ({seen}); no fix: {why}"
                _unfixed(g, entry, tr.NONE_CHECK, moved, 1, message)
                continue
            settings = g.ctx.settings if g.ctx is not None else Settings()
            impure = global_memo_impure(source, model, memo)
            if impure is None or unsafe_fixes:
                g.new = _render_edits(source, base, global_memo_edits(source, model, settings, memo), settings)
            how = f"`{memo.local}` stands in for it, None while compiling, written back only outside compiled code"
            fn = getattr(memo.fn, "name", "?")
            lead = f"`{name}` is filled on first use in `{fn}`, inside compiled code ({seen}): skip it while compiling ({how}"
            if impure is None:
                message = f"{lead}; safe: its value is a pure function of nothing, computed in the graph at every compiled call)"
                finding = _applied_finding(g.display_path, memo.check.lineno, memo.check.col_offset + 1, message, f"skip `{name}` while compiling", GLOBAL_MEMO.name)
            else:
                message = (
                    f"{lead}; unsafe: the value is then computed in the graph at every compiled call, the same only if "
                    f"it does not change between calls; not proven: {impure})"
                )
                finding = _applied_finding(
                    g.display_path, memo.check.lineno, memo.check.col_offset + 1, message, f"skip `{name}` while compiling",
                    GLOBAL_MEMO.name, unsafe_fixes=unsafe_fixes,
                )
            g.matches.append(Match(finding, entry, tr.NONE_CHECK))


def global_memo_cure(entry: tr.CodeEntry, report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object that
    recompiled on a global's None check, read from the file as it is now
    (the fix ``run --fix`` would write, and whether it is safe), or
    ``report`` (the table's label) with why there is none."""
    found = [(f, line, n) for f, line, n in tr.global_none_checks(entry) if not tr.is_library_file(f)]
    if not found:
        return report
    file, line, name = found[0]
    try:
        with open(file, "rb") as fh:
            source = parse_ast(file, fh.read())
    except (OSError, FileError):
        return report
    model = model_of(source)
    memo, why = global_memo(source, model, line, name)
    if memo is None:
        return f"{report}; no fix skips it while compiling: {why}"
    impure = global_memo_impure(source, model, memo)
    how = f"skip `{name}` while compiling, `{memo.local}` standing in for it (`run --fix"
    if impure is None:
        return how + "` writes it; safe: its value is a pure function of nothing)"
    return how + f" --unsafe-fixes` writes it; unsafe: not proven the same at every call: {impure})"
