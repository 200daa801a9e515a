"""A fix made from trace evidence: a field of a state passed in again and
again (a simulator's carried ``Data``) made with another dtype than the one
the first call had gets that dtype where it is made.

mujoco-torch before a0eaa36 (PR #68): ``make_data`` builds the contact
fields ``geom1``/``geom2``/``geom`` as int64, but a model without contacts
has ``Contact.zero()`` write int32 ones over them at every step; the state
the compiled ``step`` returns is fed back, and the next call fails the
dtype guard (``tensor 'args[1].contact.geom' dtype mismatch. expected Long,
actual Int``) and compiles again.  The project's fix makes them int64 in
``Contact.zero``.  This one does the same: where a file of the run passes
that field by keyword to a call (``geom=torch.zeros(shape,
dtype=torch.int32)``) whose ``dtype=`` is the dtype the guard found
(``actual``), the dtype becomes the one the first call had (``expected``),
only where another construction of the run passes the field with that
dtype (the state is made with both).

Unsafe: the tensor made there has another dtype for every reader, eager
code of other files too (an int32 a kernel expects, a float's precision);
applied with ``--unsafe-fixes``, and ``run --fix`` keeps it only if the
rerun compiles fewer graphs with the same output and exit code
(``benchmarks/recall/mujoco_torch_contact_zero_geom_dtype``: 2 -> 1)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .._lazy import cst
from . import read as tr
from .registry import FIELD_DTYPE
from ..analysis.compile_sites import dotted_name, model_of
from ..findings import Edit, FileError
from ..pipeline.engine import parse_ast
from .cures import _applied_finding, _render_edits
from .match import Guided, Match, entry_file


@dataclass
class _Made:
    """The constructions of the fields in one file: (field, dtype) -> the
    ``dtype=`` keywords' values that make it so."""

    source: object
    model: object
    by_dtype: Dict[Tuple[str, str], List[ast.AST]] = field(default_factory=dict)
    #: the ``dtype=`` value -> (field, dtype, the call whose keyword it is)
    of_node: Dict[ast.AST, Tuple[str, str, ast.Call]] = field(default_factory=dict)

    def siblings(self, node: ast.AST) -> List[Tuple[str, str, ast.AST]]:
        """(field, dtype, ``dtype=`` value) of every field the call that
        makes ``node``'s field makes too (``Contact(geom1=..., geom=...)``)."""
        call = self.of_node[node][2]
        return [(name, dtype, n) for n, (name, dtype, c) in self.of_node.items() if c is call]


def _made(data: bytes) -> Optional[_Made]:
    """Every ``<field>=<call>(..., dtype=torch.<dtype>)`` keyword of the file."""
    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None
    model = model_of(source)
    if model.torch_alias is None:
        return None
    out = _Made(source, model)
    for call in source.nodes(ast.Call):
        for kw in call.keywords:  # type: ignore[attr-defined]
            if kw.arg is None or not isinstance(kw.value, ast.Call):
                continue
            dtype = next((k.value for k in kw.value.keywords if k.arg == "dtype"), None)
            name = dotted_name(dtype) if dtype is not None else None
            if name is not None and name.startswith(f"{model.torch_alias}."):
                made = name.split(".", 1)[1]
                out.by_dtype.setdefault((kw.arg, made), []).append(dtype)
                out.of_node[dtype] = (kw.arg, made, call)  # type: ignore[assignment]
    return out


def _retype(torch_name: str, dtype: str, node: "cst.CSTNode"):
    """``torch.<old>`` -> ``torch.<dtype>``."""
    return cst.Attribute(value=cst.Name(torch_name), attr=cst.Name(dtype))


def apply_dtype_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """For each field of a state passed in whose dtype a compiled function
    recompiled on (``expected`` first, ``actual`` then): the ``dtype=`` of
    its constructions with ``actual`` becomes ``expected``, where the run's
    files also make it with ``expected`` (one unsafe finding per
    construction, code ``TRACE``)."""
    changes: Dict[str, Tuple[str, str, tr.CodeEntry]] = {}
    for entry in trace.entries:
        if entry_file(entry) is None or tr.is_library_file(entry.filename):
            continue
        for name, expected, actual in tr.field_dtypes(entry):
            changes.setdefault(name, (expected, actual, entry))
    if not changes:
        return
    made = {g.path: _made(g.new if g.new is not None else g.original) for g in guided.files}
    for g in guided.files:
        m = made.get(g.path)
        if m is None:
            continue
        edits: List[Edit] = []
        done: set = set()

        def elsewhere(name: str, dtype: str) -> bool:
            return any(other is not None and (name, dtype) in other.by_dtype for other in made.values())

        for name, (expected, actual, entry) in changes.items():
            if not elsewhere(name, expected):
                continue  # no construction of the run makes it with the first call's dtype
            # the fields the same call makes with that dtype too, which the
            # run's other construction makes with the first call's: their
            # guards come after the one that failed first (the trace shows one)
            nodes = [
                (other, n) for node in m.by_dtype.get((name, actual), [])
                for other, dtype, n in m.siblings(node) if dtype == actual and elsewhere(other, expected)
            ]
            for made_field, node in nodes:
                if node in done:
                    continue
                done.add(node)
                edits.append(Edit(m.source.target(node, "Attribute"), functools.partial(_retype, m.model.torch_alias, expected)))  # type: ignore[attr-defined]
                which = f"the field `{name}`" if made_field == name else f"the field `{name}` (and `{made_field}`, made by the same call, behind that guard)"
                message = (
                    f"`{tr.display_name(entry)}` recompiled on the dtype of {which} of a state passed in"
                    f" (from the trace: torch.{expected} at the first call, torch.{actual} later): `{made_field}` is made here with"
                    f" `dtype=torch.{actual}`, and elsewhere with torch.{expected}; make it `dtype=torch.{expected}`"
                    f" (unsafe: every reader of the tensor made here gets torch.{expected})"
                )
                finding = _applied_finding(
                    g.display_path, node.lineno, node.col_offset + 1, message,  # type: ignore[attr-defined]
                    f"`dtype=torch.{expected}` for `{made_field}`", FIELD_DTYPE.name, unsafe_fixes=unsafe_fixes,
                )
                g.matches.append(Match(finding, entry, tr.DTYPE))
        if edits and unsafe_fixes:
            g.new = _render_edits(m.source, g.new if g.new is not None else g.original, edits)
