"""Shared analysis: what is a Python float, and can a float parameter become a tensor?

Two halves, usable by any pass:

* **call side** (libcst, on the module being processed):
  :func:`float_reason` says why an argument expression is a Python float (a
  float literal, arithmetic with one or with true division, a float-returning
  call such as ``float()``, ``math.cos()``, ``random.random()`` or ``max`` of
  floats, a name bound in the enclosing scope to such a value -- also rebuilt
  from itself, ``t = t * 0.95`` -- a parameter or variable annotated
  ``float``); :func:`tensor_width` says whether an expression is visibly a
  floating tensor (``torch.randn(...)``, ``x.float()``, a name bound to one).

* **callee side** (stdlib :mod:`ast`, so the cheap project index can use it
  too): :func:`summarize_function` tells, per parameter, whether every use of
  it inside the body is tensor arithmetic that gives the same result when the
  parameter is a 0-d ``float64`` tensor instead of a Python float.

The dtype choice (measured on torch 2.13, see ``tests/test_float_args.py::
test_dtype_choice``): a 0-d float64 tensor gives bit-identical results to a
Python float for ``x + c``, ``c + x``, ``x - c``, ``c - x``, ``x * c``,
``x / c``, comparisons and ``clamp(min=/max=)`` when ``x`` is a float16,
bfloat16, float32 or float64 tensor (0-d tensors do not promote within a
category).  ``c * x`` differs in the last bit for float16/bfloat16 tensors,
``c / x`` for every dtype and ``x ** c`` for float32.  With an *integer*
tensor the result would be float64 instead of float32, so a use is only
accepted when the other operand is visibly a floating tensor.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import Assignment

from .analysis import ModuleAnalysis, dotted_name

# --------------------------------------------------------------------------
# vocabulary shared by both halves

#: torch factories that return a floating tensor of the default dtype (float32)
FLOAT_FACTORIES = frozenset({"randn", "rand", "linspace", "logspace", "ones", "zeros", "empty", "full", "randn_like", "rand_like", "normal"})
#: ``*_like`` factories follow their input's dtype
LIKE_FACTORIES = frozenset({"ones_like", "zeros_like", "empty_like", "full_like", "randn_like", "rand_like"})
#: torch functions / tensor methods whose result is floating (they either reject
#: integer inputs or return the default float dtype for them)
FLOAT_OPS = frozenset(
    {
        "softmax", "log_softmax", "sigmoid", "tanh", "exp", "log", "log1p", "expm1", "sin", "cos", "tan",
        "sqrt", "rsqrt", "erf", "gelu", "silu", "softplus", "elu", "selu", "mish", "logsigmoid",
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_similarity",
        "layer_norm", "normalize", "mean", "std", "var", "linear", "conv1d", "conv2d", "dropout",
        "matmul", "mm", "bmm", "lerp", "norm",
    }
)
#: ops whose result keeps the dtype of their first tensor argument
SAME_DTYPE_OPS = frozenset({"abs", "neg", "relu", "clamp", "clip", "sum", "flatten", "reshape", "view", "contiguous", "clone", "detach", "squeeze", "unsqueeze", "t", "transpose", "permute", "cumsum"})
#: torch ops that accept a 0-d tensor where the float went, with identical results
#: (keyword or positional index after the tensor)
TENSOR_OK_ARGS = {"clamp": ("min", "max"), "clip": ("min", "max"), "clamp_min": ("min",), "clamp_max": ("max",)}
FULL_DTYPES = frozenset({"float32", "float64", "float", "double"})
HALF_DTYPES = frozenset({"float16", "bfloat16", "half"})
#: math functions that return an int or a bool, not a float
_MATH_NOT_FLOAT = frozenset({"floor", "ceil", "trunc", "factorial", "gcd", "lcm", "isqrt", "comb", "perm", "isnan", "isinf", "isfinite", "isclose", "prod"})

#: ``random`` functions that return a float
_RANDOM_FLOAT = frozenset({"random", "uniform", "gauss", "normalvariate", "lognormvariate", "expovariate", "betavariate", "gammavariate", "triangular", "vonmisesvariate", "paretovariate", "weibullvariate"})
#: "the value of a name being resolved further up" (see :meth:`_CallSide.number`)
_CYCLE = "cycle"

Width = Optional[str]  # None (not visibly floating), "float" (floating, width unknown), "full" (float32/float64)


def _join(a: Width, b: Width) -> Width:
    if a == "full" or b == "full":
        return "full"
    if a == "float" or b == "float":
        return "float"
    return None


# --------------------------------------------------------------------------
# call side (libcst)


def _assign_value(analysis: ModuleAnalysis, assignment) -> Tuple[str, Optional[cst.CSTNode]]:
    """(kind, node) for an Assignment: kind is "assign", "aug", "ann", "param", "for" or "other"."""
    node = assignment.node
    if isinstance(node, cst.Param):
        return "param", node
    parent = analysis.parent(node)
    if isinstance(parent, cst.AssignTarget):
        assign = analysis.parent(parent)
        if isinstance(assign, cst.Assign) and parent.target is node:
            return "assign", assign.value
    if isinstance(parent, cst.AnnAssign) and parent.target is node:
        return "ann", parent
    if isinstance(parent, cst.AugAssign) and parent.target is node:
        return "aug", parent
    if isinstance(parent, cst.For) and parent.target is node:
        return "for", parent
    return "other", None


def _annotation_is(annotation: Optional[cst.Annotation], name: str) -> bool:
    return annotation is not None and dotted_name(annotation.annotation) in (name, f"builtins.{name}")


def _assignments(analysis: ModuleAnalysis, name: cst.Name) -> List:
    scope = analysis.scope(name)
    if scope is None:
        return []
    found = [a for a in scope[name.value] if isinstance(a, Assignment)]
    found.sort(key=lambda a: (analysis.position(a.node).start.line, analysis.position(a.node).start.column))
    return found


class _CallSide:
    """Python-number and floating-tensor reasoning at one module, with a depth
    limit against self-referential bindings (``t = t * 0.9``)."""

    def __init__(self, analysis: ModuleAnalysis) -> None:
        self.analysis = analysis
        #: steps left for :meth:`number` (bounds pathological chains of names)
        self.budget = 5000

    def _torch_last(self, func: cst.BaseExpression) -> Optional[str]:
        for q in sorted(self.analysis.qualified_names(func)):
            if q.startswith("torch."):
                return q.rsplit(".", 1)[-1]
        return None

    # -- Python numbers ---------------------------------------------------
    #
    # ``number`` returns "float", "int", None (not visibly a Python number) or
    # ``_CYCLE``: the value of a name already being resolved further up, as in
    # ``t = t * 0.95``.  A cycle adds no kind of its own -- the name's other
    # bindings decide (a least fixpoint): ``t = 1.0`` then ``t = t * 0.95`` is a
    # float, ``t = x`` then ``t = t * 0.95`` is unknown because ``x`` is.
    def number(self, expr: cst.BaseExpression, seen: Set) -> Optional[str]:
        """"float", "int", ``_CYCLE`` or None (not visibly a Python number)."""
        self.budget -= 1
        if self.budget < 0:
            return None
        if isinstance(expr, cst.Float):
            return "float"
        if isinstance(expr, cst.Integer):
            return "int"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            return self.number(expr.expression, seen)
        if isinstance(expr, cst.BinaryOperation):
            if not isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power, cst.FloorDivide, cst.Modulo)):
                return None
            left, right = self.number(expr.left, seen), self.number(expr.right, seen)
            if left is None or right is None:
                return None
            if isinstance(expr.operator, cst.Divide) or "float" in (left, right):
                return "float"
            return _CYCLE if _CYCLE in (left, right) else "int"
        if isinstance(expr, cst.Call):
            return self._call_number(expr, seen)
        if isinstance(expr, cst.Name):
            scope = self.analysis.scope(expr)
            key = (id(scope), expr.value)
            if key in seen:
                return _CYCLE
            return self._name_number(expr, seen | {key})
        return None

    def _call_number(self, expr: cst.Call, seen: Set) -> Optional[str]:
        name = dotted_name(expr.func)
        qn = self.analysis.qualified_names(expr.func)
        if any(q.startswith("torch") for q in qn):
            return None
        builtin = name is not None and "." not in name and f"builtins.{name}" in qn  # not a shadowing def
        plain = all(a.keyword is None and not a.star for a in expr.args)
        if builtin and name == "float":
            return "float"
        if builtin and name in ("int", "len") and len(expr.args) == 1:
            return "int"
        if builtin and name == "round" and plain and len(expr.args) in (1, 2):
            if len(expr.args) == 1:
                return "int"
            kind = self.number(expr.args[0].value, seen)  # round(x, n) keeps x's type
            return kind if self.number(expr.args[1].value, seen) == "int" else None
        if builtin and name == "abs" and plain and len(expr.args) == 1:
            return self.number(expr.args[0].value, seen)
        if builtin and name in ("max", "min") and plain and len(expr.args) >= 2:
            # the result is one of the arguments: a float only when every argument is
            kinds = [self.number(a.value, seen) for a in expr.args]
            if None in kinds:
                return None
            known = [k for k in kinds if k != _CYCLE]
            if not known:
                return _CYCLE
            if any(k != known[0] for k in known) or (_CYCLE in kinds and known[0] != "float"):
                return None  # ints with the name itself: a float if the name is one, so mixed
            return known[0]
        for q in sorted(qn):
            if q.startswith("math.") and q.count(".") == 1:
                return "int" if q.split(".")[1] in _MATH_NOT_FLOAT else "float"
            if q.startswith("random.") and q.count(".") == 1:
                fn = q.split(".")[1]
                if fn in _RANDOM_FLOAT:
                    return "float"
                if fn in ("randint", "randrange", "getrandbits"):
                    return "int"
        return None

    def _name_number(self, name: cst.Name, seen: Set) -> Optional[str]:
        kinds: List[Optional[str]] = []
        for assignment in _assignments(self.analysis, name):
            kind, node = _assign_value(self.analysis, assignment)
            if kind == "param":
                if _annotation_is(node.annotation, "float"):
                    kinds.append("float")
                elif _annotation_is(node.annotation, "int"):
                    kinds.append("int")
                else:
                    kinds.append(None)
            elif kind == "assign":
                kinds.append(self.number(node, seen))
            elif kind == "ann":
                if _annotation_is(node.annotation, "float"):
                    kinds.append("float")
                elif node.value is not None:
                    kinds.append(self.number(node.value, seen))
                else:
                    kinds.append(None)
            elif kind == "aug":
                if not isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign, cst.PowerAssign, cst.FloorDivideAssign, cst.ModuloAssign)):
                    kinds.append(None)
                    continue
                value = self.number(node.value, seen)
                if value is None:
                    kinds.append(None)
                elif value == "float" or isinstance(node.operator, cst.DivideAssign):
                    kinds.append("float")
                else:  # ``t *= 2`` keeps t's own kind, which t's other bindings give
                    kinds.append(_CYCLE if value == _CYCLE else "int")
            elif kind == "for":
                kinds.append(self._loop_number(node))
            else:
                kinds.append(None)
        if not kinds or any(k is None for k in kinds):
            return None
        known = [k for k in kinds if k != _CYCLE]
        if not known:
            return _CYCLE
        return "float" if "float" in known else "int"

    def _loop_number(self, loop: cst.For) -> Optional[str]:
        it = loop.iter
        if isinstance(it, cst.Call) and dotted_name(it.func) == "range" and "builtins.range" in self.analysis.qualified_names(it.func):
            return "int"
        if isinstance(it, (cst.List, cst.Tuple)) and it.elements:
            kinds = [self.number(e.value, set()) for e in it.elements if isinstance(e, cst.Element)]
            if len(kinds) == len(it.elements) and all(kinds):
                return "float" if "float" in kinds else "int"
        return None

    # -- floating tensors -------------------------------------------------
    def width(self, expr: cst.BaseExpression, seen: Set[int]) -> Width:
        if isinstance(expr, cst.Call):
            func = expr.func
            last = self._torch_last(func) if dotted_name(func) is not None else None
            if last is not None:
                dtype = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "dtype"), None)
                if dtype is not None:
                    d = dotted_name(dtype) or ""
                    d = d.rsplit(".", 1)[-1]
                    return "full" if d in FULL_DTYPES else "float" if d in HALF_DTYPES else None
                if last in LIKE_FACTORIES and expr.args:
                    return self.width(expr.args[0].value, seen)
                if last in FLOAT_FACTORIES:
                    return "full"
                if last == "tensor" and expr.args:
                    return "full" if self._float_literal_data(expr.args[0].value) else None
                if last in FLOAT_OPS:
                    return _join(self.width(expr.args[0].value, seen), "float") if expr.args else "float"
                return None
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method in ("float", "double"):
                    return "full"
                if method in ("half", "bfloat16"):
                    return "float"
                if method in FLOAT_OPS:
                    return _join(self.width(func.value, seen), "float")
                if method in SAME_DTYPE_OPS or method == "to" and not expr.args:
                    return self.width(func.value, seen)
            return None
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.width(expr.left, seen), self.width(expr.right, seen)
            return _join(left, right)
        if isinstance(expr, cst.Subscript):
            return self.width(expr.value, seen)
        if isinstance(expr, cst.Name):
            if id(expr) in seen:
                return None
            seen = seen | {id(expr)}
            widths: List[Width] = []
            for assignment in _assignments(self.analysis, expr):
                kind, node = _assign_value(self.analysis, assignment)
                widths.append(self.width(node, seen) if kind == "assign" else None)
            if not widths or any(w is None for w in widths):
                return None
            return "float" if "float" in widths else "full"
        return None

    def _float_literal_data(self, data: cst.BaseExpression) -> bool:
        if isinstance(data, (cst.List, cst.Tuple)):
            return any(self._float_literal_data(e.value) for e in data.elements if isinstance(e, cst.Element))
        return self.number(data, set()) == "float"


def float_reason(analysis: ModuleAnalysis, expr: cst.BaseExpression) -> Optional[str]:
    """Why ``expr`` is a Python float, or None when it is not visibly one."""
    side = _CallSide(analysis)
    if side.number(expr, set()) != "float":
        return None
    if isinstance(expr, cst.Float):
        return "a float literal"
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return "a float expression"
    if isinstance(expr, cst.Name):
        for assignment in _assignments(analysis, expr):
            kind, node = _assign_value(analysis, assignment)
            if kind == "param" and _annotation_is(node.annotation, "float"):
                return f"`{expr.value}` is annotated `float`"
            if kind == "ann" and _annotation_is(node.annotation, "float"):
                return f"`{expr.value}` is annotated `float`"
        loop = analysis.enclosing(expr, (cst.For, cst.While))
        if loop is not None and any(analysis.enclosing(a.node, (cst.For, cst.While)) is loop for a in _assignments(analysis, expr)):
            return f"`{expr.value}` is a float recomputed in the loop"
        return f"`{expr.value}` is bound to a float"
    return "a float"


def tensor_width(analysis: ModuleAnalysis, expr: cst.BaseExpression) -> Width:
    """Is ``expr`` visibly a floating tensor: "full" (float32/float64), "float"
    (floating, maybe half precision) or None."""
    return _CallSide(analysis).width(expr, set())


# --------------------------------------------------------------------------
# callee side (stdlib ast)


@dataclass(frozen=True)
class ParamUse:
    """How one parameter is used inside a function body."""

    #: every use accepts a 0-d float64 tensor with identical results
    safe: bool
    #: why not (empty when safe)
    reason: str = ""
    #: other parameters that must receive floating tensors: (name, "float"|"full")
    needs: Tuple[Tuple[str, str], ...] = ()


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    line: int
    #: positional parameters in order (``self`` included for methods)
    positional: Tuple[str, ...]
    kwonly: Tuple[str, ...]
    has_varargs: bool
    uses: Dict[str, ParamUse] = field(default_factory=dict)

    def param_for(self, index: Optional[int], keyword: Optional[str], skip_self: bool) -> Optional[str]:
        """The parameter an argument lands in (positional ``index`` or ``keyword``)."""
        if keyword is not None:
            return keyword if keyword in self.positional or keyword in self.kwonly else None
        params = self.positional[1:] if skip_self else self.positional
        if index is not None and index < len(params):
            return params[index]
        return None


#: statement fields that hold statements (or ``ExceptHandler``/``match_case``
#: nodes, which hold statements); expressions never contain statements
_STMT_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")


def torch_aliases(tree: ast.Module) -> Dict[str, str]:
    """Local name -> dotted torch path for the imports of a module (``th`` -> ``torch``,
    ``F`` -> ``torch.nn.functional``, ``compile`` -> ``torch.compile``).

    Imports are statements, so only statements are visited (several times
    faster than ``ast.walk``), in ``ast.walk``'s breadth-first order
    (``ExceptHandler`` and ``match_case`` count as levels), so a name imported
    twice ends with the same value."""
    out: Dict[str, str] = {}
    level: List[ast.AST] = [tree]
    while level:
        following: List[ast.AST] = []
        for node in level:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "torch" or alias.name.startswith("torch."):
                        if alias.asname:
                            out[alias.asname] = alias.name
                        else:
                            out["torch"] = "torch"
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module and (node.module == "torch" or node.module.startswith("torch.")):
                    for alias in node.names:
                        out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            else:
                for name in _STMT_FIELDS:
                    children = getattr(node, name, None)
                    if children:
                        following.extend(children)
        level = following
    return out


def resolve_ast(expr: ast.AST, aliases: Dict[str, str]) -> Optional[str]:
    """The dotted torch path of ``expr`` (``th.nn.functional.relu`` -> ``torch.nn.functional.relu``)."""
    parts: List[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name) and expr.id in aliases:
        return ".".join([aliases[expr.id]] + list(reversed(parts)))
    return None


_PYTHON_USERS = {
    "round": "`round()` needs a Python number",
    "int": "`int()` turns it into a Python int",
    "float": "`float()` would force a graph break",
    "str": "`str()` formats it",
    "repr": "`repr()` formats it",
    "format": "`format()` formats it",
    "isinstance": "`isinstance(..., float)` is False for a tensor",
    "range": "`range()` needs a Python int",
    "max": "`max()` compares it as a Python number",
    "min": "`min()` compares it as a Python number",
    "abs": "`abs()` would return a tensor",
    "print": "`print()` would show a tensor",
    "len": "`len()` needs a sequence",
}

_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


class _Callee:
    def __init__(self, fn: ast.FunctionDef, aliases: Dict[str, str]) -> None:
        self.fn = fn
        self.aliases = aliases
        self.parents: Dict[int, ast.AST] = {}
        for node in ast.walk(fn):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        args = fn.args
        self.params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        if args.vararg:
            self.params.append(args.vararg.arg)
        if args.kwarg:
            self.params.append(args.kwarg.arg)
        # local single assignments: name -> value (for floating-tensor evidence)
        self.locals: Dict[str, Optional[ast.AST]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.locals[t.id] = node.value if t.id not in self.locals else None
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                self.locals[node.target.id] = None

    # -- floating tensor evidence inside the callee -------------------------
    def width(self, expr: ast.AST, exclude: Set[str] = frozenset(), depth: int = 0) -> Tuple[Width, Tuple[str, ...]]:
        """(width, params): the value is floating of at least ``width`` and, when
        ``params`` is not empty, as wide as those parameters' arguments (it is
        visibly floating only if they are).  Names in ``exclude`` (the float
        parameter itself and values derived from it) are 0-d tensors, ignored."""
        if depth > 20:
            return None, ()
        if isinstance(expr, ast.Name):
            if expr.id in exclude:
                return None, ()
            if expr.id in self.params:
                return None, (expr.id,)
            value = self.locals.get(expr.id)
            return self.width(value, exclude, depth + 1) if value is not None else (None, ())
        if isinstance(expr, ast.Call):
            path = resolve_ast(expr.func, self.aliases)
            if path is not None:
                last = path.rsplit(".", 1)[-1]
                for kw in expr.keywords:
                    if kw.arg == "dtype":
                        d = (resolve_ast(kw.value, self.aliases) or "").rsplit(".", 1)[-1]
                        return ("full" if d in FULL_DTYPES else "float" if d in HALF_DTYPES else None), ()
                if last in LIKE_FACTORIES and expr.args:
                    return self.width(expr.args[0], exclude, depth + 1)
                if last in FLOAT_FACTORIES:
                    return "full", ()
                if last in FLOAT_OPS:
                    inner = self._join_all(expr.args, exclude, depth)
                    return _join(inner[0], "float"), inner[1]
                if last in SAME_DTYPE_OPS and expr.args:
                    return self.width(expr.args[0], exclude, depth + 1)
                if last == "where" and len(expr.args) == 3:
                    return self._join_all(expr.args[1:], exclude, depth)
                return None, ()
            if isinstance(expr.func, ast.Attribute):
                method = expr.func.attr
                if method in ("float", "double"):
                    return "full", ()
                if method in ("half", "bfloat16"):
                    return "float", ()
                if method in FLOAT_OPS:
                    inner = self.width(expr.func.value, exclude, depth + 1)
                    return _join(inner[0], "float"), inner[1]
                if method in SAME_DTYPE_OPS:
                    return self.width(expr.func.value, exclude, depth + 1)
            return None, ()
        if isinstance(expr, ast.BinOp):
            return self._join_all([expr.left, expr.right], exclude, depth)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self.width(expr.operand, exclude, depth + 1)
        if isinstance(expr, ast.Subscript):
            return self.width(expr.value, exclude, depth + 1)
        if isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT", "data"):
            return self.width(expr.value, exclude, depth + 1)
        return None, ()

    def _join_all(self, exprs, exclude: Set[str], depth: int) -> Tuple[Width, Tuple[str, ...]]:
        """Type promotion over tensor operands: floating if any operand is."""
        width: Width = None
        params: List[str] = []
        for e in exprs:
            w, p = self.width(e, exclude, depth + 1)
            width = _join(width, w)
            params.extend(x for x in p if x not in params)
        if width == "full":
            return "full", ()
        return width, tuple(params)

    # -- uses of a parameter ---------------------------------------------------
    def summarize(self, name: str) -> ParamUse:
        needs: List[Tuple[str, str]] = []
        derived = {name}
        todo = [name]
        visited: Set[str] = set()
        while todo:
            current = todo.pop(0)
            if current in visited:
                continue
            visited.add(current)
            for node in ast.walk(self.fn):
                if isinstance(node, ast.Name) and node.id == current and isinstance(node.ctx, ast.Load):
                    problem = self._use(node, derived, todo, needs)
                    if problem:
                        return ParamUse(False, f"{problem} (line {node.lineno})")
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not self.fn:
                    if any(isinstance(n, ast.Name) and n.id == current for n in ast.walk(node)):
                        return ParamUse(False, f"`{current}` is used in a nested function (line {node.lineno})")
        dedup: List[Tuple[str, str]] = []
        for need in needs:
            if need[0] == name or need in dedup:
                continue
            dedup.append(need)
        return ParamUse(True, "", tuple(dedup))

    def _numberish(self, expr: ast.AST, derived: Set[str]) -> bool:
        """A Python number or a value derived from the parameter (stays a 0-d tensor)."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)):
            return True
        if isinstance(expr, ast.Name):
            return expr.id in derived
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self._numberish(expr.operand, derived)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _SAFE_BINOPS):
            return self._numberish(expr.left, derived) and self._numberish(expr.right, derived)
        return False

    def _tensor_operand(self, other: ast.AST, derived: Set[str], needs: List[Tuple[str, str]], required: str, what: str) -> Optional[str]:
        width, params = self.width(other, derived)
        if width == "full" or (width == "float" and required == "float"):
            return None
        if params:
            needs.extend((p, required) for p in params)
            return None
        kind = "a float32/float64 tensor" if required == "full" else "a floating tensor"
        return f"the other operand of {what} is not visibly {kind} (an integer tensor would turn float64, a Python number stays a Python number)"

    def _use(self, node: ast.AST, derived: Set[str], todo: List[str], needs: List[Tuple[str, str]]) -> Optional[str]:
        """None when this use is fine, else why not."""
        value = node
        while True:
            parent = self.parents.get(id(value))
            if parent is None:
                return "used outside any expression"
            if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, (ast.USub, ast.UAdd)):
                value = parent
                continue
            if isinstance(parent, ast.BinOp):
                left = parent.left is value
                other = parent.right if left else parent.left
                if not isinstance(parent.op, _SAFE_BINOPS):
                    op = {ast.Pow: "**", ast.MatMult: "@", ast.Mod: "%", ast.FloorDiv: "//"}.get(type(parent.op), "an operator")
                    return f"`{op}` gives different results with a tensor"
                if self._numberish(other, derived):
                    value = parent  # still a number / 0-d tensor: follow it
                    continue
                if isinstance(parent.op, ast.Div) and left:
                    return "`c / x` rounds differently when `c` is a tensor"
                required = "full" if isinstance(parent.op, ast.Mult) and left else "float"
                return self._tensor_operand(other, derived, needs, required, f"`{ast.unparse(parent)}`")
            if isinstance(parent, ast.Compare):
                holder = self.parents.get(id(parent))
                if isinstance(holder, (ast.If, ast.While, ast.IfExp, ast.Assert, ast.BoolOp)) or (isinstance(holder, ast.UnaryOp) and isinstance(holder.op, ast.Not)):
                    return "compared as a Python number in a condition"
                others = [parent.left] + list(parent.comparators)
                others = [o for o in others if o is not value]
                for o in others:
                    problem = self._tensor_operand(o, derived, needs, "float", f"`{ast.unparse(parent)}`")
                    if problem:
                        return problem
                return None
            if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert, ast.BoolOp)) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
                return "used as a Python bool in a condition"
            if isinstance(parent, ast.Call):
                return self._call_use(parent, value, derived, needs)
            if isinstance(parent, ast.keyword):
                call = self.parents.get(id(parent))
                return self._call_use(call, value, derived, needs, keyword=parent.arg) if isinstance(call, ast.Call) else "used as a keyword"
            if isinstance(parent, (ast.FormattedValue, ast.JoinedStr)):
                return "formatted in an f-string"
            if isinstance(parent, ast.Subscript):
                return "used as an index or key"
            if isinstance(parent, ast.Dict):
                return "used in a dict"
            if isinstance(parent, (ast.Return, ast.Yield, ast.YieldFrom)):
                return "returned to the caller, who would get a tensor instead of a float"
            if isinstance(parent, ast.Assign):
                if len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
                    target = parent.targets[0].id
                    if self.locals.get(target) is None and target not in derived:
                        return f"assigned to `{target}`, which is reassigned"
                    derived.add(target)
                    todo.append(target)
                    return None
                return f"stored in `{ast.unparse(parent.targets[0])}`"
            if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
                return "put in a container"
            return f"used in `{ast.unparse(parent)[:40]}`"

    def _call_use(self, call: ast.Call, value: ast.AST, derived: Set[str], needs, keyword: Optional[str] = None) -> Optional[str]:
        func = call.func
        if isinstance(func, ast.Name) and func.id in _PYTHON_USERS and func.id not in self.aliases:
            return _PYTHON_USERS[func.id]
        path = resolve_ast(func, self.aliases)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math":
            return f"`math.{func.attr}()` needs a Python number"
        last = path.rsplit(".", 1)[-1] if path else (func.attr if isinstance(func, ast.Attribute) else None)
        allowed = TENSOR_OK_ARGS.get(last or "")
        if allowed is not None:
            if path is not None:  # torch.clamp(x, min, max)
                tensor = call.args[0] if call.args and call.args[0] is not value else None
                positions = list(call.args[1:])
            else:  # x.clamp(min, max)
                tensor = func.value
                positions = list(call.args)
            in_place = keyword in allowed or any(a is value for a in positions[: len(allowed)])
            if in_place and tensor is not None:
                return self._tensor_operand(tensor, derived, needs, "float", f"`{last}()`")
        name = path or (ast.unparse(func) if not isinstance(func, ast.Lambda) else "a lambda")
        return f"passed to `{name}()`, not known to accept a 0-d tensor with the same result"


def summarize_function(fn: ast.FunctionDef, aliases: Dict[str, str]) -> FunctionSummary:
    callee = _Callee(fn, aliases)
    args = fn.args
    positional = tuple(a.arg for a in args.posonlyargs + args.args)
    kwonly = tuple(a.arg for a in args.kwonlyargs)
    uses = {name: callee.summarize(name) for name in positional + kwonly}
    return FunctionSummary(
        name=fn.name,
        line=fn.lineno,
        positional=positional,
        kwonly=kwonly,
        has_varargs=args.vararg is not None or args.kwarg is not None,
        uses=uses,
    )


def functions_by_line(tree: ast.Module) -> Dict[int, ast.FunctionDef]:
    """Every (async) function definition of a module, keyed by the line of ``def``."""
    return {n.lineno: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
