"""A fix made from trace evidence: a method that compiled code reaches and
that grows a list attribute runs eagerly (``@torch.compiler.disable``).

torchrec before eb2d656b (PR #4361): the compiled metric update reaches
``AUCMetricComputation.update``, which appends each batch to the window
lists ``self.predictions`` / ``labels`` / ``weights`` and trims them to the
window.  Every call is guarded on the lists' lengths (``len(ref.
_metrics_computations[0].labels) == 7  # w_labels.append(labels)``), so
every call compiles again, until the recompile limit.  The project put
``@torch.compiler.disable`` on ``update``: the lists stay out of the graph,
the rest of the compiled call is compiled once.

The trace names the guard's line; where that line grows a list (``.append``,
``.extend``, ``.insert``) through an attribute (not a list passed in) in a
function of a file of the run that is not the compiled function itself
(FR013 names that form: the list kept outside the compiled code), that
function gets the decorator (the edit is FR013's, :func:`codemods.transforms.
container_growth.disable_edit`; where FR013 found the growth from the
source, its fix, made safe by the trace, is the one applied).  Safe where the code object hit the recompile
limit: it ran eagerly from then on anyway, the method now does and the rest
compiles; unsafe otherwise (a method compiled so far runs eagerly at every
call, which can be slower), applied with ``--unsafe-fixes``.  ``run --fix``
keeps it only if the rerun compiles fewer graphs with the same output and
exit code (a ``fullgraph=True`` compile fails at the break and is restored):
``tests/trace_scripts/window_list_update.py`` 8 -> 1,
``benchmarks/recall/torchrec_auc_window_list_update`` 8 -> 1, the project's
count."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from . import read as tr
from .registry import GROWTH_DISABLE
from ..analysis.compile_sites import model_of
from ..findings import FileError
from ..pipeline.engine import parse_ast
from ..transforms.container_growth import GROW_METHODS, disable_refused
from .cures import _disable_fix, _unfixed
from .match import Guided, Match, _real

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Growth:
    """A length guard of a recompiling code object whose line grows a list
    attribute: the file and line the guard names, the guarded source."""

    file: str
    line: int
    source: str


def growths(entry: tr.CodeEntry) -> List[Growth]:
    """The length guards of ``entry`` on a list reached through an attribute
    (``ref.window.labels``, not a list passed in) whose line torch named, in
    a user file, one per line."""
    out: List[Growth] = []
    for r in entry.reasons:
        if r.cause != tr.LENGTH or not r.line or not r.file or tr.is_library_file(r.file):
            continue
        if "." not in r.source or any(g.line == r.line and _real(g.file) == _real(r.file) for g in out):
            continue
        out.append(Growth(r.file, r.line, r.source))
    return out


def growth_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` holding a line a length guard names (the
    method that grows the list may be in another file than the compiled code)."""
    by_real = {_real(p): p for p in paths}
    out: List[str] = []
    for entry in trace.entries:
        for g in growths(entry):
            path = by_real.get(_real(g.file))
            if path is not None and path not in out:
                out.append(path)
    return out


def growing_function(source, model, line: int, entry: tr.CodeEntry, path: str) -> Tuple[Optional[ast.AST], str]:
    """The function whose statement at ``line`` grows a list through an
    attribute or a name (``w_labels.append(labels)``), or None and why not
    ("" where the line grows no list in a function: not this form)."""
    grow = None
    for node in source.nodes(ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in GROW_METHODS and node.lineno <= line <= node.end_lineno:
            grow = node
            break
    fn = source.enclosing(grow, _DEFS + (ast.Lambda, ast.ClassDef)) if grow is not None else None
    if not isinstance(fn, _DEFS):
        return None, ""  # no growth in a function there: the table's report stands
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    if _real(path) == _real(entry.filename) and entry.firstlineno in (fn.lineno, first):
        return None, f"`{fn.name}` is the compiled function itself: keep the list outside it (rule FR013)"
    refused = disable_refused(source, model, fn)
    return (None, refused) if refused else (fn, "")


def apply_growth_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """``@torch.compiler.disable`` on each function of a guided file whose
    line a length guard of a recompiling code object names, growing a list
    attribute (one finding each, code ``TRACE``): safe where that code object
    hit the recompile limit, unsafe otherwise; where the form is not this
    one, a finding without a fix says why."""

    by_real = {_real(g.path): g for g in guided.files}
    done = set()
    for entry in trace.entries:
        for growth in growths(entry):
            g = by_real.get(_real(growth.file))
            if g is None or (g.path, growth.line) in done:
                continue
            if any(m.entry is entry and m.finding.code == "FR013" and m.finding.applied for m in g.matches):
                continue  # FR013 found the growth from the source: its applied fix writes the same decorator
            done.add((g.path, growth.line))
            base, mover = g.current()
            moved = mover(growth.line)
            try:
                source = parse_ast(g.path, base)
            except FileError:
                continue
            model = model_of(source)
            seen = f"from the trace: {tr.recompiles(entry.count(tr.LENGTH))} on `len({growth.source})`"
            fn, why = growing_function(source, model, moved, entry, g.path)
            if fn is None:
                # FR013's finding names the growth in the compiled function itself
                if why and not any(m.entry is entry and m.finding.code == "FR013" for m in g.matches):
                    _unfixed(g, entry, tr.LENGTH, moved, 1, f"`{growth.source}` grows at every call ({seen}); no fix: {why}")
                continue
            unsafe = not entry.limit_hit
            lead = (
                f"`{fn.name}` grows `{growth.source}` inside compiled code (line {moved}), a new length at every call ({seen}):"
                f" run it eagerly, `@torch.compiler.disable`, so the list stays out of the graph and the rest compiles once"
            )
            if unsafe:
                message = f"{lead}; unsafe: `{tr.display_name(entry)}` did not hit the recompile limit, and `{fn.name}` then runs eagerly at every call, which can be slower"
            else:
                message = f"{lead}; safe: `{tr.display_name(entry)}` hit the recompile limit and ran eagerly from then on"
            finding = _disable_fix(g, source, base, model, fn, message, GROWTH_DISABLE.name, unsafe=unsafe, unsafe_fixes=unsafe_fixes)
            g.matches.append(Match(finding, entry, tr.LENGTH))


def growth_cure(entry: tr.CodeEntry, report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object
    that recompiled on a list's length, read from the files as they are now
    (the fix ``run --fix`` would write, and whether it is safe), or
    ``report`` (the table's label) with why there is none."""
    found = growths(entry)
    if not found:
        return report
    growth = found[0]
    try:
        with open(growth.file, "rb") as fh:
            source = parse_ast(growth.file, fh.read())
    except (OSError, FileError):
        return report
    fn, why = growing_function(source, model_of(source), growth.line, entry, growth.file)
    if fn is None:
        return f"{report}; no fix runs it eagerly: {why}" if why else report
    how = f"`@torch.compiler.disable` on `{fn.name}`, which grows `{growth.source}` (`run --fix"
    if entry.limit_hit:
        return how + "` writes it; safe: the code hit the recompile limit and ran eagerly from then on)"
    return how + " --unsafe-fixes` writes it; unsafe: the method then runs eagerly at every call)"

