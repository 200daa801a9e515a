"""A fix made from trace evidence: a float kept in a dict attribute of
(sub)modules, changed by eager code between calls, becomes a 0-d tensor at
every write.

The trace shows a compiled module recompiling on a float of a dict attribute
(``self._modules['layers']._modules['0']._modules['q_proj'].scaling['default']
== 1.0``): peft before #2177 kept each LoRA layer's ``scaling[adapter]`` a
Python float and a hot-swap of another ``lora_alpha`` wrote a new one from
eager code.  Its fix, ``prepare_model_for_compiled_hotswap``, turns every
scaling into a 0-d tensor before compiling.  This one does the same where the
values are written: every ``<x>.scaling[<key>] = <value>`` of the run's files
(and the values of a dict literal assigned to ``<x>.scaling``) becomes
``<x>.scaling[<key>] = torch.as_tensor(<value>)``.  The compiled graph then
takes the tensor as an input and guards its dtype and shape, not its value
nor its identity (measured on 2.13: a new tensor written between calls does
not recompile; ``benchmarks/recall/peft_hotswap_scaling_tensor``: 2 -> 1
graphs, same output).

Only when every use of the dict's values is one a 0-d tensor behaves the
same in: an operand of arithmetic or of a comparison, the first argument
of ``isinstance``, ``float``, ``math.*`` or ``torch.tensor``, the receiver
of a method (``.fill_(v)``), read directly or
through a local name (``scaling = self.scaling[a]`` then ``x * scaling``);
the dict itself bound to a local name is followed one hop (its writes are
wrapped, its reads checked).  Any other use (a call argument, a return, a
format), or a write of another form (``.update()``, ``setdefault``, ``|=``)
leaves the file alone and the table's report stands.  Unsafe: the values'
type changes for every reader, also eager code of other files; applied with
``--unsafe-fixes``, and ``run --fix`` keeps it only if the rerun compiles
fewer graphs with the same output and exit code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional, Set, Tuple

from .._lazy import cst

from . import read as tr
from .registry import TENSOR_DICT_VALUES
from ..findings import Edit, FileError
from .cures import _applied_finding, _render_edits
from .match import Guided, Match

RULE_NAME = TENSOR_DICT_VALUES.name


#: torch's constructors of a tensor from a number (a value already a tensor is not wrapped)
_TENSOR_MAKERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.full", "torch.zeros", "torch.ones", "torch.scalar_tensor"})
#: builtins whose first argument may be a 0-d tensor where it was a float
_TAKES_A_TENSOR = frozenset({"builtins.isinstance", "builtins.float", "builtins.int", "builtins.bool", "builtins.abs", "builtins.round"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _is_tensor_call(model, node: ast.AST) -> bool:
    """``torch.tensor(...)``, ``torch.as_tensor(...)``, ``torch.full(...)``, … (by the module's imports)."""
    return isinstance(node, ast.Call) and bool(model.qualified_names(node.func) & _TENSOR_MAKERS)


def _use_is_tensor_safe(source, model, node: ast.AST) -> bool:
    """Does ``node`` (a value read) sit where a 0-d tensor behaves as the float?"""
    parent = source.parent(node)
    if isinstance(parent, (ast.BinOp, ast.Compare)):
        return True
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, (ast.USub, ast.UAdd)):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return isinstance(source.parent(parent), ast.Call)  # a method: `.fill_(v)`, `.item()`
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        # `isinstance(v, float)`, `float(v)`, `math.sqrt(v)`, `torch.tensor(v)`: a 0-d tensor is taken
        names = model.qualified_names(parent.func)
        return bool(names & (_TAKES_A_TENSOR | {"torch.tensor", "torch.as_tensor"})) or any(q.startswith("math.") for q in names)
    return False


@dataclass
class _Plan:
    """The writes to wrap in one file: the value expressions."""

    values: List[ast.expr]


def _local_loads(scope: ast.AST, name: str) -> Tuple[List[ast.Name], int]:
    """(loads of ``name`` in ``scope``, how many times it is bound there)."""
    loads: List[ast.Name] = []
    stores = 0
    for n in ast.walk(scope):
        if isinstance(n, ast.Name) and n.id == name:
            if isinstance(n.ctx, ast.Load):
                loads.append(n)
            else:
                stores += 1
        elif isinstance(n, ast.arg) and n.arg == name:
            stores += 1
    return loads, stores


def plan_file(source, model, attr: str) -> Optional[_Plan]:
    """The values written into the dict attribute ``attr`` in this file
    (``source``, its compile-site ``model``), to wrap; None when a use or a
    write is not one this fix may change (the whole file is then left alone)."""
    tree = source.tree
    values: List[ast.expr] = []
    # the dict expressions: `<x>.attr`, and local names bound once to one
    dicts: List[ast.AST] = [n for n in source.nodes(ast.Attribute) if n.attr == attr]
    seen_locals: Set[Tuple[int, str]] = set()
    todo = list(dicts)
    while todo:
        d = todo.pop()
        parent = source.parent(d)
        if isinstance(d, ast.Attribute) and isinstance(d.ctx, ast.Store):
            # `<x>.attr = {...}` (or a tuple target: `a.r, a.scaling = {}, {}`)
            stmt = parent
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is d:
                value = stmt.value
            elif isinstance(parent, ast.Tuple) and isinstance(source.parent(parent), ast.Assign):
                assign = source.parent(parent)
                if not isinstance(assign.value, ast.Tuple) or len(assign.value.elts) != len(parent.elts):
                    return None
                value = assign.value.elts[parent.elts.index(d)]
            else:
                return None
            if not isinstance(value, ast.Dict) or None in value.keys:
                return None
            values.extend(v for v in value.values if not _is_tensor_call(model, v))
            continue
        if isinstance(d, ast.Attribute) and isinstance(d.ctx, ast.Del):
            return None
        if isinstance(parent, ast.Subscript) and parent.value is d:
            if isinstance(parent.ctx, ast.Store):
                assign = source.parent(parent)
                if not isinstance(assign, ast.Assign) or len(assign.targets) != 1 or assign.targets[0] is not parent:
                    return None  # `d[k] += v`, a tuple target, a for target
                if not _is_tensor_call(model, assign.value):
                    values.append(assign.value)
                continue
            if isinstance(parent.ctx, ast.Del):
                continue
            # a read of one value: directly, or bound to a local name
            holder = source.parent(parent)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name) and holder.value is parent:
                scope = source.enclosing(holder, _FUNCS) or tree
                loads, stores = _local_loads(scope, holder.targets[0].id)
                if stores != 1 or not all(_use_is_tensor_safe(source, model, n) for n in loads):
                    return None
                continue
            if not _use_is_tensor_safe(source, model, parent):
                return None
            continue
        if isinstance(parent, ast.Attribute) and parent.value is d and parent.attr in ("items", "values", "keys", "get"):
            if parent.attr in ("values", "items", "get"):
                call = source.parent(parent)
                if not isinstance(call, ast.Call):
                    return None
                if parent.attr == "get":
                    if not _use_is_tensor_safe(source, model, call):
                        return None
                    continue
                # `for k, v in d.items()`: the loop's value variable is a read
                loop = source.parent(call)
                if not isinstance(loop, (ast.For, ast.comprehension)) or loop.iter is not call:
                    return None
                target = loop.target
                name = target.elts[-1] if parent.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2 else target
                if not isinstance(name, ast.Name):
                    return None
                scope = source.enclosing(loop, _FUNCS) or tree
                loads, _stores = _local_loads(scope, name.id)
                if not all(_use_is_tensor_safe(source, model, n) for n in loads):
                    return None
            continue
        if isinstance(parent, ast.Compare) and any(c is d for c in parent.comparators) and all(isinstance(o, (ast.In, ast.NotIn)) for o in parent.ops):
            continue  # `key in d`
        if isinstance(parent, ast.Assign) and parent.value is d and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            # the dict bound to a local name: followed one hop
            scope = source.enclosing(parent, _FUNCS) or tree
            name = parent.targets[0].id
            loads, stores = _local_loads(scope, name)
            if stores != 1 or (id(scope), name) in seen_locals:
                return None
            seen_locals.add((id(scope), name))
            todo.extend(loads)  # its reads and its subscript writes (`d[k] = v` loads `d`)
            continue
        return None
    unique = {id(v): v for v in values}
    return _Plan(sorted(unique.values(), key=lambda v: (v.lineno, v.col_offset)))


def _as_tensor(torch_name: str):
    def apply(node: cst.CSTNode) -> cst.CSTNode:
        return cst.Call(func=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("as_tensor")), args=[cst.Arg(node)])

    return apply


def wrap_values(data: bytes, attr: str) -> Tuple[Optional[bytes], List[Tuple[int, int, str]], bool]:
    """``data`` with every value written into the dict attribute ``attr``
    made ``torch.as_tensor(value)``, the places changed, and whether a use
    here forbids the fix; (None, [], …) when nothing is written here, a use
    forbids it, or the file has no ``import torch``."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, [], False
    model = model_of(source)
    plan = plan_file(source, model, attr)
    if plan is None or not plan.values:
        return None, [], plan is None
    if model.torch_alias is None:
        return None, [], True
    edits = [Edit(source.target(v, "BaseExpression"), _as_tensor(model.torch_alias)) for v in plan.values]
    sites = []
    for v in plan.values:
        line, column = source.start(v)
        sites.append((line, column + 1, source.segment(v)))
    return _render_edits(source, data, edits), sites, False


def apply_float_state_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """For each dict attribute whose float entries the trace saw recompile a
    code object of a guided file, make every value written into it in the
    guided files a 0-d tensor: one finding (code ``TRACE``, unsafe) per
    write; applied with ``--unsafe-fixes``, reported otherwise.  Nothing when
    a file's uses forbid it."""
    attrs: List[Tuple[str, tr.CodeEntry]] = []
    for entry in trace.entries:
        if tr.is_library_file(entry.filename):
            continue
        for attr in tr.dict_attributes(entry):
            if all(a != attr for a, _ in attrs):
                attrs.append((attr, entry))
    if not attrs:
        return
    for attr, entry in attrs:
        plans = []
        for g in guided.files:
            base = g.new if g.new is not None else g.original
            new, sites, forbidden = wrap_values(base, attr)
            if forbidden:
                plans = []
                break  # one file's use forbids it: none is changed
            if new is not None:
                plans.append((g, new, sites))
        if not plans:
            continue
        sources = ", ".join(f"`{s}`" for s in entry.sources(tr.MODULE_FLOAT_ATTR) if tr.DICT_ENTRY.search(s))
        for g, new, sites in plans:
            if unsafe_fixes:
                g.new = new
            for line, column, value in sites:
                message = (
                    f"`{tr.display_name(entry)}` recompiled on the float {sources} (from the trace): the dict `{attr}`"
                    f" holds Python floats changed between calls, and torch guards each value; write a 0-d tensor"
                    f" (`torch.as_tensor({value})`: a tensor input, guarded on its dtype and shape, not its value;"
                    f" unsafe: every reader of `{attr}` now gets a tensor)"
                )
                finding = _applied_finding(
                    g.display_path, line, column, message, f"write `torch.as_tensor({value})`", RULE_NAME, unsafe_fixes=unsafe_fixes
                )
                g.matches.append(Match(finding, entry, tr.MODULE_FLOAT_ATTR))
