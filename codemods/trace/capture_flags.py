"""Fixes made from trace evidence: the dynamo settings that keep in the
graph what broke it, for code that recompiles after those breaks.

A graph break splits a compiled function into frames resumed after it,
whose guards on the values around the break fail on the next call.  Two
breaks have a setting that lifts them (:data:`codemods.trace.read.CAPTURE_BREAKS`,
read from a compilation's ``restart_reasons``); the trace shows a compile
that broke so in a file whose compiled code recompiled, and this fix sets
``torch._dynamo.config.<setting> = True`` right after the module-level
``import torch`` (and the imports right after it) of the file of the code
that broke (it runs before that code is traced):

- ``capture_scalar_outputs`` for ``Tensor.item()`` ("Unsupported
  Tensor.item() call with capture_scalar_outputs=False").  pytorch/rl
  before #4094: a compiled ``extend_and_sample`` writes a replay storage's
  cursor as ``int(cursor[-1].item())``, the frame resumed after it guards
  ``___stack2 == 0`` (measured on 2.13,
  ``benchmarks/recall/torchrl_storage_revision_counter``: 6 -> 3 graphs,
  same output; the project's fix keeps the cursor a tensor).
- ``capture_dynamic_output_shape_ops`` for an op whose output size depends
  on the data ("Dynamic shape operator": ``torch.where(mask)``, a boolean
  index, ``torch.unique``).  kornia before 7d73de442: the sub-pixel
  refinement of NMS maxima, compiled, breaks at each; every frame resumed
  after one gets tensors of the count the data gave, a new count each
  image, and recompiles on their sizes (and again at the 0/1
  specialisation of an empty octave).  The setting is the first half of
  kornia's fix and torch's own hint (measured on 2.13,
  ``benchmarks/recall/kornia_quadinterp_nms_count``: 15 -> 3 graphs, same
  output; the rest of the fix removes an ``N == 0`` branch and the
  ``unique``: no rewrite makes that).

Unsafe: a global setting, and a value or size kept in the graph is
data-dependent -- compiled code that branches on it graph-breaks there or,
under ``fullgraph=True``, fails to compile (``run --fix`` then sees another
exit code, or no fewer graphs, and restores the file).  Applied with
``--unsafe-fixes``; each setting once per run, in the first file the trace
shows breaking so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .._lazy import cst

from . import read as tr
from .registry import CAPTURE_DYNAMIC_SHAPES, CAPTURE_SCALARS, TraceCure
from ..analysis.placement import config_mentions, torch_expr
from ..analysis.source import statement_target
from ..findings import FileError
from ..cst_edits import insert_after_node
from .cures import _applied_finding, _render_edits, _torch_import
from .match import Guided, Match, _real, entry_file


@dataclass(frozen=True)
class CaptureFlag:
    """One setting: its name in ``torch._dynamo.config``, its cure's
    declaration, what it keeps in the graph and the risk it carries (for
    the finding's message)."""

    flag: str
    cure: TraceCure
    keeps: str
    risk: str


FLAGS: Tuple[CaptureFlag, ...] = (
    CaptureFlag(
        tr.CAPTURE_SCALARS,
        CAPTURE_SCALARS,
        "so `.item()` stays in the graph",
        "compiled code that branches on such a value breaks the graph there, or fails to compile under fullgraph=True",
    ),
    CaptureFlag(
        tr.CAPTURE_DYNAMIC_SHAPES,
        CAPTURE_DYNAMIC_SHAPES,
        "so ops whose output size depends on the data stay in the graph (sizes unbacked)",
        "compiled code that branches on such a size breaks the graph there, or fails to compile under fullgraph=True",
    ),
)


def capture_flag(data: bytes, flag: str = tr.CAPTURE_SCALARS) -> Tuple[Optional[bytes], int]:
    """``data`` with ``torch._dynamo.config.<flag> = True`` after its
    module-level ``import torch`` and the imports that follow it (and the
    line it follows); (None, 0) when the file sets or reads that flag
    already, or imports no torch at module level."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, 0
    model = model_of(source)
    stmt = _torch_import(source)
    if model.torch_alias is None or stmt is None or config_mentions(source, [flag]):
        return None, 0
    setting = cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(torch_expr(model, "_dynamo", "config", flag))], value=cst.Name("True"))]
    )
    return _render_edits(source, data, [insert_after_node(statement_target(source, stmt), setting)]), stmt.lineno


def apply_capture_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """For each setting of :data:`FLAGS`: set it in the first guided file
    whose code broke the graph so and recompiled (one finding, code
    ``TRACE``, unsafe: applied with ``--unsafe-fixes``)."""
    for capture in FLAGS:
        _apply(trace, guided, unsafe_fixes, capture)


def _apply(trace: tr.Trace, guided: Guided, unsafe_fixes: bool, capture: CaptureFlag) -> None:
    by_real = {_real(g.path): g for g in guided.files}
    recompiled = {_real(entry_file(e)) for e in trace.entries if e.recompiles and entry_file(e) and not tr.is_library_file(e.filename)}
    for entry in trace.entries:
        path = entry_file(entry)
        if not entry.capture_breaks.get(capture.flag) or path is None or tr.is_library_file(entry.filename) or _real(path) not in recompiled:
            continue
        g = by_real.get(_real(path))
        if g is None:
            continue
        base = g.new if g.new is not None else g.original
        new, line = capture_flag(base, capture.flag)
        if new is None:
            return
        if unsafe_fixes:
            g.new = new
        mine = [e for e in trace.entries if entry_file(e) and _real(entry_file(e)) == _real(path)]
        broke = [what for e in mine for what in e.capture_breaks.get(capture.flag, ())]
        resumed = sum(e.recompiles for e in mine)
        at = ", ".join(f"`{w}`" for w in dict.fromkeys(broke))
        message = (
            f"`{tr.display_name(entry)}` broke the graph at {at} (in {len(broke)} compile{'s' if len(broke) != 1 else ''},"
            f" from the trace) and this file's compiled code recompiled {resumed} time{'s' if resumed != 1 else ''}:"
            f" set `torch._dynamo.config.{capture.flag} = True` after the imports, {capture.keeps}"
            f" (unsafe: a global setting; {capture.risk})"
        )
        finding = _applied_finding(
            g.display_path, line, 1, message, f"set `torch._dynamo.config.{capture.flag} = True`", capture.cure.name, unsafe_fixes=unsafe_fixes
        )
        # the code object whose recompiles it cures: the file's most
        # recompiled (the code resumed after the break, not the one that broke)
        cured = max(mine, key=lambda e: e.recompiles)
        g.matches.append(Match(finding, cured, cured.causes[0] if cured.causes else tr.RESUME_VALUE))
        return
