"""Is a function elementwise in its one tensor parameter?

A compiled function called with tensors of several ranks compiles a graph per
rank: dynamic shapes make sizes symbolic, never the number of dims.  When
the function is *elementwise* in its input (every element of the result
depends on the element of the input at the same place, and the result has
the input's shape), an eager wrapper that hands the compiled core
``x.flatten()`` and reshapes what it returns computes the same values with
one rank only (compressed-tensors 55777c4b, ``FP4_E2M1_DATA.cast_to_fp4``).
This module gives that judgement on the stdlib ``ast``, as the reason the
proof fails (``None``: proven).

The body must be straight-line code (no branch, loop, ``with`` or ``try``)
made of:

* ``name = <aligned>``: a value of the input's shape, computed elementwise:
  the parameter, a local bound so, a literal number / bool / string / dtype
  (broadcast), an arithmetic, comparison or bitwise operator of those (never
  ``@``, never a chained comparison), a call of an op of :data:`ELEMENTWISE`
  (``torch.X``, ``torch.nn.functional.X`` or a method of that name) or of
  :data:`CONVERSIONS` (``.float()``, ``.to(torch.bfloat16)``) whose tensor
  arguments are all aligned;
* ``t[mask] = <literal>`` (or ``= u[mask]`` with the same mask), ``t op=
  <aligned>`` and in-place ops (``t.clamp_(...)``) on a local holding a new
  tensor, never on the parameter or a value that may share its memory
  (``.contiguous()``, ``.to(dtype)`` may return the input itself): the caller
  would see the change only for a contiguous input;
* a final ``return`` of a new tensor (not one that may be the input).

Anything else -- an index by another tensor, a reduction, a name of the
module (a tensor of another shape would broadcast), a call of another
function -- is not proven.  Every row of the tables is proven elementwise on
real torch by ``tests/test_elementwise.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Optional, Union

#: torch ops that map elements to elements (``torch.X``, ``torch.nn.functional.X``,
#: ``Tensor.X``); the table test calls each with aligned tensors and literals
ELEMENTWISE = frozenset(
    # one input
    "abs absolute neg negative sign sgn signbit exp exp2 expm1 log log2 log10 log1p sqrt rsqrt square reciprocal "
    "sin cos tan asin acos atan sinh cosh tanh asinh atanh sigmoid erf erfc floor ceil round trunc frac relu "
    "isnan isinf isfinite isposinf isneginf nan_to_num logical_not bitwise_not positive deg2rad rad2deg "
    "relu6 gelu silu softplus leaky_relu elu selu celu mish hardswish hardsigmoid hardtanh logsigmoid softsign "
    "tanhshrink threshold hardshrink softshrink "
    # two or three inputs, each aligned or a literal
    "add sub subtract mul multiply div divide true_divide floor_divide remainder fmod pow maximum minimum fmax fmin "
    "eq ne lt le gt ge greater less greater_equal less_equal not_equal logical_and logical_or logical_xor "
    "bitwise_and bitwise_or bitwise_xor atan2 hypot copysign lerp where clamp clip clamp_min clamp_max "
    "addcmul addcdiv masked_fill zeros_like ones_like full_like".split()
)
#: ops of :data:`ELEMENTWISE` whose result is a boolean mask of the input's shape
MASKS = frozenset(
    "signbit isnan isinf isfinite isposinf isneginf logical_not eq ne lt le gt ge greater less greater_equal "
    "less_equal not_equal logical_and logical_or logical_xor".split()
)
#: tensor methods that convert the dtype (or copy): the same elements; all
#: but ``clone`` may return the input itself
CONVERSIONS = frozenset("float half double bfloat16 int long short bool to contiguous detach clone".split())
#: torch dtypes a literal argument may name (``x.to(torch.float16)``)
_DTYPES = frozenset(
    "float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 uint8 long short bool "
    "float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz complex64 complex128".split()
)
#: math constants a literal may name
_MATH = frozenset({"math.pi", "math.e", "math.inf", "math.nan", "math.tau"})

_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor)
_MASK_OPERATORS = (ast.BitAnd, ast.BitOr, ast.BitXor)
_COMPARES = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class Aligned:
    """A tensor of the input's shape: ``fresh`` when it is a new tensor (never
    the input or a view of it), ``mask`` when it is boolean."""

    fresh: bool
    mask: bool = False


#: a literal: broadcast to any shape
LITERAL = "literal"
_Value = Union[Aligned, str]


def why_not_elementwise(fn: ast.AST, param: str, model) -> Optional[str]:
    """Why ``fn`` is not proven elementwise in its parameter ``param``; None
    when it is.  ``model``: the file's compile-site model
    (:class:`codemods.analysis.compile_sites.CompileModel`), for the names a
    callee resolves to through the imports (``F.relu`` ->
    ``torch.nn.functional.relu``) and the module's number constants."""
    return _Proof(param, model).body(getattr(fn, "body", []))


class _Proof:
    def __init__(self, param: str, model) -> None:
        #: the locals bound so far: a tensor of the input's shape, or LITERAL
        self.names: Dict[str, _Value] = {param: Aligned(fresh=False)}
        self.model = model
        self.qualified_names = model.qualified_names

    def body(self, stmts) -> Optional[str]:
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]  # the docstring
        if not stmts or not isinstance(stmts[-1], ast.Return) or stmts[-1].value is None:
            return "it does not end in a `return` of a value"
        for stmt in stmts[:-1]:
            why = self.statement(stmt)
            if why is not None:
                return why
        value = self.value(stmts[-1].value)
        if isinstance(value, str) and value != LITERAL:
            return value
        if not isinstance(value, Aligned):
            return "it returns a literal, not a tensor of the input's shape"
        if not value.fresh:
            return "it may return its input itself (the wrapper would return a reshaped view)"
        return None

    def statement(self, stmt: ast.stmt) -> Optional[str]:
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                value = self.value(stmt.value)
                if isinstance(value, str) and value != LITERAL:
                    return value
                self.names[target.id] = value  # a tensor of the input's shape, or a number
                return None
            if isinstance(target, ast.Subscript):
                return self.masked_write(target, stmt.value)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, _OPERATORS):
            if self.names.get(stmt.target.id) == LITERAL and self.value(stmt.value) == LITERAL:
                return None  # `n += 1` of a number
            why = self.changed_in_place(stmt.target.id)
            if why is not None:
                return why
            value = self.value(stmt.value)
            return value if isinstance(value, str) and value != LITERAL else None
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
            func = stmt.value.func
            name = func.attr
            if name.endswith("_") and not name.endswith("__") and name[:-1] in ELEMENTWISE | {"fill", "zero"} and isinstance(func.value, ast.Name):
                why = self.changed_in_place(func.value.id)
                if why is not None:
                    return why
                return self.arguments(stmt.value, ast.unparse(func))
        return f"line {stmt.lineno} is not a step of elementwise code (`{ast.unparse(stmt).splitlines()[0]}`)"

    def changed_in_place(self, name: str) -> Optional[str]:
        value = self.names.get(name)
        if not isinstance(value, Aligned):
            return f"`{name}` is not known to have the input's shape"
        if not value.fresh:
            return f"`{name}` is changed in place and may be the input itself"
        return None

    def masked_write(self, target: ast.Subscript, value: ast.AST) -> Optional[str]:
        """``t[mask] = <literal>`` or ``t[mask] = u[mask]``."""
        if not isinstance(target.value, ast.Name):
            return f"`{ast.unparse(target)}` is not an item of a local tensor"
        why = self.changed_in_place(target.value.id)
        if why is not None:
            return why
        index = self.value(target.slice)
        if not (isinstance(index, Aligned) and index.mask):
            return f"`{ast.unparse(target)}` is not indexed by a mask of the input's shape"
        written = self.value(value)
        if written == LITERAL:
            return None
        if isinstance(value, ast.Subscript) and ast.dump(value.slice) == ast.dump(target.slice) and isinstance(self.value(value.value), Aligned):
            return None
        return f"`{ast.unparse(value)}` is written through a mask and is not a literal"

    def value(self, node: ast.AST) -> _Value:
        """:class:`Aligned`, LITERAL, or why the expression is neither."""
        if _literal(node, self.qualified_names) or self.constant(node):
            return LITERAL
        if isinstance(node, ast.Name):
            known = self.names.get(node.id)
            return known if known is not None else f"`{node.id}` is not known to have the input's shape"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            inner = self.value(node.operand)
            if isinstance(inner, Aligned):
                return Aligned(fresh=True, mask=inner.mask and isinstance(node.op, ast.Invert))
            return inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
            # `m1 & m2` of masks is a mask
            return self.combined([node.left, node.right], mask=None if isinstance(node.op, _MASK_OPERATORS) else False)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], _COMPARES):
            return self.combined([node.left, node.comparators[0]], mask=True)
        if isinstance(node, ast.Call):
            return self.call(node)
        return f"`{ast.unparse(node)}` is not an elementwise op"

    def constant(self, node: ast.AST) -> bool:
        """A number the module binds once (``FP4_MAX = 6.0`` at module level,
        ``max = 6.0`` in the body of a module-level class read as
        ``FP4_E2M1_DATA.max``), never a local."""
        if isinstance(node, ast.Name) and node.id not in self.names:
            return _number(self.model.literal(node))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id not in self.names:
            cls = self.model.classes.get(node.value.id)
            if not isinstance(cls, ast.ClassDef) or self.model.source.parent(cls) is not self.model.source.tree:
                return False
            values = [
                s.value for s in cls.body
                if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None
                and any(isinstance(t, ast.Name) and t.id == node.attr for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))
            ]
            # bound once in the class body, and no `<x>.max = ...` anywhere in the file
            stored = any(isinstance(a.ctx, ast.Store) and a.attr == node.attr for a in self.model.source.nodes(ast.Attribute))
            return len(values) == 1 and not stored and _number(self.model.literal(values[0]))
        return False

    def combined(self, operands, *, mask: Optional[bool]) -> _Value:
        """An operator's value; ``mask``: whether it is boolean (None: when
        every tensor operand is)."""
        values = [self.value(o) for o in operands]
        for v in values:
            if isinstance(v, str) and v != LITERAL:
                return v
        aligned = [v for v in values if isinstance(v, Aligned)]
        if not aligned:
            return LITERAL
        return Aligned(fresh=True, mask=all(v.mask for v in aligned) if mask is None else mask)

    def call(self, call: ast.Call) -> _Value:
        func = call.func
        spelled = ast.unparse(func)
        qualified = sorted(q for q in self.qualified_names(func) if q.startswith("torch."))
        if isinstance(func, ast.Attribute) and not qualified:
            # a method of a value: `x.abs()`, `x.to(torch.float16)`
            receiver = self.value(func.value)
            if not isinstance(receiver, Aligned):
                return receiver if receiver != LITERAL else f"`{spelled}` is not a method of a tensor"
            name = func.attr
            if name in CONVERSIONS:
                why = self.arguments(call, spelled)
                if why is not None:
                    return why
                return Aligned(fresh=receiver.fresh or name == "clone", mask=receiver.mask and name in ("bool", "contiguous", "detach", "clone"))
            if name in ELEMENTWISE:
                why = self.arguments(call, spelled)
                return why if why is not None else Aligned(fresh=True, mask=name in MASKS or (name in ("masked_fill", "where") and receiver.mask))
            return f"`{spelled}` is not an elementwise op"
        for q in qualified:
            last = q.rsplit(".", 1)[-1]
            if q in (f"torch.{last}", f"torch.nn.functional.{last}", f"torch.special.{last}") and last in ELEMENTWISE:
                values = [self.value(a) for a in call.args] + [self.value(k.value) for k in call.keywords if k.arg is not None]
                why = self.arguments(call, spelled)
                if why is not None:
                    return why
                if not any(isinstance(v, Aligned) for v in values):
                    return f"`{ast.unparse(call)}` takes no tensor of the input's shape"
                return Aligned(fresh=True, mask=last in MASKS)
        return f"`{spelled}` is not an elementwise op"

    def arguments(self, call: ast.Call, spelled: str) -> Optional[str]:
        """Why an argument of ``call`` is neither aligned nor a literal."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return f"`{spelled}` is called with unpacked arguments"
        for a in [*call.args, *(k.value for k in call.keywords)]:
            v = self.value(a)
            if isinstance(v, str) and v != LITERAL:
                return v
        return None


def _number(value: object) -> bool:
    return type(value) in (int, float, bool)


def _literal(node: ast.AST, qualified_names) -> bool:
    """A number, bool, None or string (``rounding_mode="floor"``), signed;
    ``torch.<dtype>``; ``math.pi``; ``float("inf")``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, bool, str)) or node.value is None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool)
    if isinstance(node, ast.Attribute):
        return any((q.startswith("torch.") and q[6:] in _DTYPES) or q in _MATH for q in qualified_names(node))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and len(node.args) == 1 and not node.keywords:
        arg = node.args[0]
        return isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.strip().lower() in ("inf", "-inf", "nan", "+inf")
    return False
