"""Shared analysis: do the inputs of a compiled callable vary between calls?

Evidence comes from the calls :class:`~codemods.analysis.ModuleAnalysis` found:

* a call inside a ``for`` loop whose argument builds a tensor whose *shape*
  comes from the loop variable (``torch.ones(i)``, ``torch.randn(b, i)``,
  ``x[:i]``, ``x.view(i, -1)``), or passes a number computed from it
  (``f(x, i)``, ``f(x, 0.5 * i)``), or passes the loop variable itself when the
  loop runs over literal tensors of different shapes;
* two calls that pass tensors of different literal shapes
  (``f(torch.ones(3))`` and ``f(torch.ones(4))``).

An index such as ``x[i]`` does not count: the shape of each slice is the same.
Each piece of evidence knows its loop (if any) and, when visible, how many
distinct variants the loop produces (``range(12)`` → 12), which the
recompile-limit pass uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from .analysis import CompileSite, ModuleAnalysis, dotted_name

# torch factories whose positional arguments are sizes
_SIZE_FACTORIES = {"ones", "zeros", "randn", "rand", "empty", "eye", "arange", "linspace", "randint", "full", "randperm"}
# tensor methods whose arguments are sizes / lengths
_SIZE_METHODS = {"view", "reshape", "expand", "repeat", "narrow", "new_ones", "new_zeros", "new_empty", "unflatten"}


@dataclass(frozen=True)
class Evidence:
    call: cst.Call
    #: "shape" (a tensor's shape varies) or "value" (a Python number varies)
    kind: str
    #: the loop that makes it vary, if any
    loop: Optional[cst.For]
    #: how many distinct variants are visible (None: unknown)
    variants: Optional[int]
    detail: str


def _names(node: cst.CSTNode) -> Set[str]:
    found: Set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            # only the root of a.b.c is a variable reference
            n.value.visit(self)
            return False

    node.visit(V())
    return found


def _loop_names(loop: cst.For) -> Set[str]:
    return _names(loop.target)


def _literal_int(node: cst.BaseExpression) -> Optional[int]:
    if isinstance(node, cst.Integer):
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal_int(node.expression)
        return None if inner is None else -inner
    return None


def loop_variants(loop: cst.For) -> Optional[int]:
    """How many iterations a loop visibly has: ``range`` with literal bounds,
    a literal list/tuple/set."""
    it = loop.iter
    if isinstance(it, (cst.List, cst.Tuple, cst.Set)):
        if all(isinstance(e, cst.Element) for e in it.elements):
            return len(it.elements)
        return None
    if isinstance(it, cst.Call) and dotted_name(it.func) == "range":
        vals = [_literal_int(a.value) for a in it.args if a.keyword is None]
        if len(vals) != len(it.args) or any(v is None for v in vals) or not vals:
            return None
        if len(vals) == 1:
            return max(0, vals[0])
        step = vals[2] if len(vals) == 3 else 1
        if step == 0:
            return None
        return max(0, len(range(vals[0], vals[1], step)))
    return None


class _ShapeUse(cst.CSTVisitor):
    """Does an expression build a tensor whose shape depends on ``names``?"""

    def __init__(self, analysis: ModuleAnalysis, names: Set[str]) -> None:
        self.analysis = analysis
        self.names = names
        self.hit: Optional[str] = None

    def visit_Call(self, node: cst.Call) -> None:
        if self.hit:
            return
        qn = self.analysis.qualified_names(node.func)
        is_factory = any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _SIZE_FACTORIES for q in qn)
        is_method = isinstance(node.func, cst.Attribute) and node.func.attr.value in _SIZE_METHODS
        if is_factory or is_method:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value not in ("size", "steps", "end", "start", "length"):
                    continue
                if _names(arg.value) & self.names:
                    self.hit = dotted_name(node.func) or "tensor factory"
                    return

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        if self.hit:
            return
        if isinstance(node.slice, cst.Slice):
            for part in (node.slice.lower, node.slice.upper):
                if part is not None and _names(part) & self.names:
                    self.hit = "slice"
                    return


def _is_number_expr(expr: cst.BaseExpression, names: Set[str]) -> bool:
    """A Python number computed from ``names``: ``i``, ``i * 2``, ``0.5 + i``."""
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.BinaryOperation):
        return _is_number_expr(expr.left, names) or _is_number_expr(expr.right, names)
    if isinstance(expr, cst.UnaryOperation):
        return _is_number_expr(expr.expression, names)
    return False


def _literal_shape(analysis: ModuleAnalysis, expr: cst.BaseExpression) -> Optional[str]:
    """``torch.ones(3, 4)`` → "ones(3,4)": a signature of literal shape args."""
    if not isinstance(expr, cst.Call):
        return None
    qn = analysis.qualified_names(expr.func)
    if not any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _SIZE_FACTORIES for q in qn):
        return None
    sizes = []
    for arg in expr.args:
        if arg.keyword is not None:
            continue
        value = arg.value
        if isinstance(value, (cst.Tuple, cst.List)):
            ints = [_literal_int(e.value) for e in value.elements]
        else:
            ints = [_literal_int(value)]
        if any(i is None for i in ints):
            return None
        sizes.extend(ints)
    return f"{dotted_name(expr.func)}{tuple(sizes)}" if sizes else None


def _loop_assignments(loop: cst.For, names: Set[str]) -> Set[str]:
    """Names assigned inside the loop body from expressions using ``names`` (to a fixpoint)."""
    derived = set(names)
    assigns: List[Tuple[Set[str], cst.BaseExpression]] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            targets: Set[str] = set()
            for t in node.targets:
                targets |= _names(t.target) if isinstance(t.target, (cst.Name, cst.Tuple, cst.List)) else set()
            assigns.append((targets, node.value))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    loop.body.visit(V())
    changed = True
    while changed:
        changed = False
        for targets, value in assigns:
            if targets - derived and _names(value) & derived:
                derived |= targets
                changed = True
    return derived


def _value_of_loop_name(loop: cst.For, name: str) -> Optional[cst.BaseExpression]:
    found: List[cst.BaseExpression] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    found.append(node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    loop.body.visit(V())
    return found[0] if len(found) == 1 else None


def evidence_for(analysis: ModuleAnalysis, site: CompileSite) -> List[Evidence]:
    """Every piece of evidence that the inputs of ``site`` vary, in source order."""
    result: List[Evidence] = []
    literal_shapes: Dict[Tuple, Set[str]] = {}
    for call in site.calls:
        loops = [a for a in analysis.ancestors(call) if isinstance(a, cst.For)]
        # stop at the enclosing function: a loop outside it does not drive this call
        fn = analysis.enclosing(call, cst.FunctionDef)
        if fn is not None:
            loops = [lp for lp in loops if analysis.enclosing(lp, cst.FunctionDef) is fn]
        for index, arg in enumerate(call.args):
            key = (arg.keyword.value if arg.keyword else index,)
            sig = _literal_shape(analysis, arg.value)
            if sig is not None:
                literal_shapes.setdefault(key, set()).add(sig)
            for loop in loops:
                names = _loop_assignments(loop, _loop_names(loop))
                ev = _arg_evidence(analysis, call, arg.value, loop, names)
                if ev is not None:
                    result.append(ev)
                    break
    for key, sigs in literal_shapes.items():
        if len(sigs) > 1:
            call = site.calls[0]
            result.append(Evidence(call, "shape", None, len(sigs), f"called with tensors of shapes {', '.join(sorted(sigs))}"))
    return result


def _arg_evidence(analysis, call, value, loop, names) -> Optional[Evidence]:
    variants = loop_variants(loop)
    loop_var = ", ".join(sorted(_loop_names(loop)))
    shape = _ShapeUse(analysis, names)
    value.visit(shape)
    if shape.hit is None and isinstance(value, cst.Name) and value.value in names:
        bound = _value_of_loop_name(loop, value.value)
        if bound is not None:
            bound.visit(shape)
    if shape.hit is not None:
        return Evidence(call, "shape", loop, variants, f"the shape of an argument comes from loop variable `{loop_var}` ({shape.hit})")
    if _varies_as_number(loop, value, names):
        return Evidence(call, "value", loop, variants, f"a Python number computed from loop variable `{loop_var}` is passed")
    if isinstance(value, cst.Name) and value.value in _loop_names(loop) and isinstance(loop.iter, (cst.List, cst.Tuple)):
        sigs = {_literal_shape(analysis, e.value) for e in loop.iter.elements}
        if None not in sigs and len(sigs) > 1:
            return Evidence(call, "shape", loop, len(sigs), f"the loop passes tensors of shapes {', '.join(sorted(sigs))}")
    return None


def _varies_as_number(loop: cst.For, value: cst.BaseExpression, names: Set[str]) -> bool:
    if not isinstance(value, cst.Name):
        return _is_number_expr(value, names)
    if value.value in _loop_names(loop):
        return _iter_is_numbers(loop)
    if value.value in names:
        bound = _value_of_loop_name(loop, value.value)
        return bound is not None and not isinstance(bound, cst.Name) and _is_number_expr(bound, names)
    return False


def _iter_is_numbers(loop: cst.For) -> bool:
    it = loop.iter
    if isinstance(it, cst.Call) and dotted_name(it.func) == "range":
        return True
    if isinstance(it, (cst.List, cst.Tuple)):
        return bool(it.elements) and all(isinstance(e.value, (cst.Integer, cst.Float)) for e in it.elements)
    return False
