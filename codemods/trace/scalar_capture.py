"""A fix made from trace evidence: ``capture_scalar_outputs`` for code that
recompiles after graph breaks at ``Tensor.item()``.

The trace shows a compile that broke the graph at ``Tensor.item()``
(``restart_reasons``: "Unsupported Tensor.item() call with
capture_scalar_outputs=False") in a file whose compiled code recompiled:
each break splits the function into frames resumed after it, whose guards
on the values around the break (``___stack2 == 0``, an int attribute the
eager part changed) fail on the next call.  pytorch/rl before #4094: a
compiled ``extend_and_sample`` writes a replay storage's cursor as
``int(cursor[-1].item())``; its fix keeps the cursor a tensor (6 -> 3
graphs on 2.13).  Torch's own hint, and this fix: set
``torch._dynamo.config.capture_scalar_outputs = True`` right after the
module-level ``import torch`` (and the imports right after it) of the file
of the code that broke (it runs
before that code is traced), so ``.item()`` stays in the graph (measured on
2.13, ``benchmarks/recall/torchrl_storage_revision_counter``: 6 -> 3 graphs,
same output).

Unsafe: a global setting, and an ``.item()`` value kept in the graph is
data-dependent -- compiled code that branches on it graph-breaks there or,
under ``fullgraph=True``, fails to compile (``run --fix`` then sees another
exit code, or no fewer graphs, and restores the file).  Applied with
``--unsafe-fixes``; one flag per run, in the first file the trace shows
breaking so.
"""

from __future__ import annotations

from typing import Optional, Tuple

from .._lazy import cst

from . import read as tr
from .registry import CAPTURE_SCALARS
from ..analysis.placement import config_mentions, torch_expr
from ..analysis.source import statement_target
from ..findings import FileError
from ..cst_edits import insert_after_node
from .cures import _applied_finding, _render_edits, _torch_import
from .match import Guided, Match, _real, entry_file

FLAG = "capture_scalar_outputs"
RULE_NAME = CAPTURE_SCALARS.name


def capture_flag(data: bytes) -> Tuple[Optional[bytes], int]:
    """``data`` with ``torch._dynamo.config.capture_scalar_outputs = True``
    after its module-level ``import torch`` and the imports that follow it
    (and the line it follows); (None, 0) when the file
    sets or reads that flag already, or imports no torch at module level."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, 0
    model = model_of(source)
    stmt = _torch_import(source)
    if model.torch_alias is None or stmt is None or config_mentions(source, [FLAG]):
        return None, 0
    flag = cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(torch_expr(model, "_dynamo", "config", FLAG))], value=cst.Name("True"))]
    )
    return _render_edits(source, data, [insert_after_node(statement_target(source, stmt), flag)]), stmt.lineno


def apply_scalar_capture_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """Set ``capture_scalar_outputs`` in the first guided file whose code
    broke the graph at ``.item()`` and recompiled (one finding, code
    ``TRACE``, unsafe: applied with ``--unsafe-fixes``)."""
    by_real = {_real(g.path): g for g in guided.files}
    recompiled = {_real(entry_file(e)) for e in trace.entries if e.recompiles and entry_file(e) and not tr.is_library_file(e.filename)}
    for entry in trace.entries:
        path = entry_file(entry)
        if not entry.item_breaks or path is None or tr.is_library_file(entry.filename) or _real(path) not in recompiled:
            continue
        g = by_real.get(_real(path))
        if g is None:
            continue
        base = g.new if g.new is not None else g.original
        new, line = capture_flag(base)
        if new is None:
            return
        if unsafe_fixes:
            g.new = new
        mine = [e for e in trace.entries if entry_file(e) and _real(entry_file(e)) == _real(path)]
        breaks, resumed = sum(e.item_breaks for e in mine), sum(e.recompiles for e in mine)
        message = (
            f"`{tr.display_name(entry)}` broke the graph at `Tensor.item()` (in {breaks} compile{'s' if breaks != 1 else ''},"
            f" from the trace) and this file's compiled code recompiled {resumed} time{'s' if resumed != 1 else ''}:"
            f" set `torch._dynamo.config.{FLAG} = True` after the imports, so `.item()` stays in the graph"
            " (unsafe: a global setting; compiled code that branches on such a value breaks the graph there,"
            " or fails to compile under fullgraph=True)"
        )
        finding = _applied_finding(
            g.display_path, line, 1, message, f"set `torch._dynamo.config.{FLAG} = True`", RULE_NAME, unsafe_fixes=unsafe_fixes
        )
        # the code object whose recompiles it cures: the file's most
        # recompiled (the code resumed after the break, not the one that broke)
        cured = max(mine, key=lambda e: e.recompiles)
        g.matches.append(Match(finding, cured, cured.causes[0] if cured.causes else tr.RESUME_VALUE))
        return
