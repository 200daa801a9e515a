"""Shared analysis: what is a Python float, and can a float parameter become a tensor?

Two halves, usable by any pass, both on the stdlib :mod:`ast`:

* **call side** (the module being processed, through its scopes:
  :class:`NameResolver`): :func:`float_reason` says why an argument expression is a Python float (a
  float literal, arithmetic with one or with true division, a float-returning
  call such as ``float()``, ``math.cos()``, ``random.random()`` or ``max`` of
  floats, a name bound in the enclosing scope to such a value -- also rebuilt
  from itself, ``t = t * 0.95`` -- a parameter or variable annotated
  ``float`` or with a float default, an element of a list, comprehension or
  ``zip`` of floats, a param group's lr, ``getattr(p, "lr_mul", 1.0)``);
  :func:`float_flow` also tells what it flows from (param-group lrs, whose
  variation evidence is :meth:`NameResolver.group_lr_facts`);
  :func:`tensor_width` says whether an expression is visibly a floating
  tensor (``torch.randn(...)``, ``x.float()``, ``p.grad``, a name,
  ``self.attr``, dict entry or parameter bound or passed one).

* **callee side** (a function body alone, so the cheap project index can
  use it too): :func:`summarize_function` tells, per parameter, whether every use of
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
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from .compile_sites import CompileModel, dotted_name
from .params import argument_for, parameter_defaults
from .optim_table import SCHED_PREFIX
from .scopes import Binding
from .tensor_ops_table import BUILTIN_NUMBER_ONLY, DROPOUT_CURE, NUMBER_CURE, arithmetic_method, number_only_row, tensor_row
from .source import children, walk

# --------------------------------------------------------------------------
# vocabulary shared by both halves

#: torch factories that return a floating tensor of the default dtype (float32)
FLOAT_FACTORIES = frozenset({"randn", "rand", "linspace", "logspace", "ones", "zeros", "empty", "randn_like", "rand_like", "normal"})


def _float_fill(fill: Optional[ast.AST]) -> bool:
    """Is ``torch.full``'s fill value a float literal?  Its dtype follows the
    fill: ``torch.full((n,), 1)`` is int64 (audit: a float64 0-d tensor
    times it gives float64, a Python float float32)."""
    if isinstance(fill, ast.UnaryOp) and isinstance(fill.op, (ast.USub, ast.UAdd)):
        fill = fill.operand
    return isinstance(fill, ast.Constant) and isinstance(fill.value, float)
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
FULL_DTYPES = frozenset({"float32", "float64", "float", "double"})
HALF_DTYPES = frozenset({"float16", "bfloat16", "half"})
#: math functions that return an int or a bool, not a float
_MATH_NOT_FLOAT = frozenset({"floor", "ceil", "trunc", "factorial", "gcd", "lcm", "isqrt", "comb", "perm", "isnan", "isinf", "isfinite", "isclose", "prod"})

#: ``random`` functions that return a float
_RANDOM_FLOAT = frozenset({"random", "uniform", "gauss", "normalvariate", "lognormvariate", "expovariate", "betavariate", "gammavariate", "triangular", "vonmisesvariate", "paretovariate", "weibullvariate"})
#: "the value of a name being resolved further up" (see :meth:`_CallSide.number`)
_CYCLE = "cycle"
#: how many functions out a parameter's number is followed to its callers
_PARAM_DEPTH = 3

Width = Optional[str]  # None (not visibly floating), "float" (floating, width unknown), "full" (float32/float64)


def _join(a: Width, b: Width) -> Width:
    if a == "full" or b == "full":
        return "full"
    if a == "float" or b == "float":
        return "float"
    return None


# --------------------------------------------------------------------------
# call side (stdlib ast, on the module being processed)

#: the arithmetic a Python number goes through and stays a number
_NUMBER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class NameResolver:
    """What the call side reads of one module: its scopes, and what a name or
    dotted name stands for.

    Its names are the compile-site model's (:meth:`CompileModel.qualified_names`):
    a name is what the bindings it sees make it, a variable is marked local
    (``<local>.<name>``), at module level too, so it never passes for
    ``math``, ``random``, ``torch`` or a module of the run."""

    def __init__(self, model: CompileModel) -> None:
        self.model = model
        self.source = model.source
        self.scopes = model.scopes
        self._group_facts: Optional[Tuple[Optional[str], Optional[str]]] = None
        self._by_attr: Optional[Dict[str, List[ast.Attribute]]] = None
        self._stores: Optional[Dict[Tuple[str, str], List[ast.Subscript]]] = None
        self._instance_calls: Optional[Dict[int, List[ast.Call]]] = None
        self._self_stores: Dict[Tuple[int, str], List[Optional[ast.AST]]] = {}

    def attributes(self, attr: str) -> List[ast.Attribute]:
        """Every ``x.<attr>`` of the module (indexed once)."""
        if self._by_attr is None:
            self._by_attr = {}
            for node in self.source.nodes(ast.Attribute):
                self._by_attr.setdefault(node.attr, []).append(node)  # type: ignore[attr-defined]
        return self._by_attr.get(attr, [])

    def key_stores(self, name: str, key: str) -> List[ast.Subscript]:
        """Every ``name["key"] = ...`` target of the module (indexed once)."""
        if self._stores is None:
            self._stores = {}
            for node in self.source.nodes(ast.Subscript):
                if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):  # type: ignore[attr-defined]
                    self._stores.setdefault((node.value.id, node.slice.value), []).append(node)  # type: ignore[attr-defined]
        return self._stores.get((name, key), [])

    def instance_calls(self, cls: ast.ClassDef) -> List[ast.Call]:
        """Every ``m(...)`` of the module with ``m`` visibly an instance of the
        nn.Module class ``cls`` (a name bound to ``cls(...)``, ``self.m``
        assigned one in its class): nn.Module ``__call__`` runs ``forward``.
        Indexed once per module."""
        if self._instance_calls is None:
            self._instance_calls = {}
            model = self.model
            if any(model.is_module_class(c) for c in model.classes.values()):
                for node in self.source.nodes(ast.Call):
                    func = node.func  # type: ignore[attr-defined]
                    if not (isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self")):
                        continue
                    found = model.module_class_of(func)
                    if found is not None:
                        self._instance_calls.setdefault(id(found), []).append(node)  # type: ignore[arg-type]
        return self._instance_calls.get(id(cls), [])

    def self_stores(self, cls: ast.ClassDef, attr: str) -> List[Optional[ast.AST]]:
        """What the class ``cls`` binds ``self.<attr>`` (or the class attribute
        ``<attr>``) to, in its own body and methods (not nested classes): the
        value of ``self.attr = v``, the AugAssign of ``self.attr += v``, None
        for a form not followed (unpacking, a method or property of that
        name).  From the module's attribute index, cached per class and name."""
        key = (id(cls), attr)
        found = self._self_stores.get(key)
        if found is not None:
            return found
        found = []
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
                found.append(stmt.value if len(stmt.targets) == 1 else None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr and stmt.value is not None:
                found.append(stmt.value)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
                found.append(None)
        source = self.source
        for node in self.attributes(attr):
            if not (isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == "self"):
                continue
            if source.enclosing(node, ast.ClassDef) is not cls:
                continue
            parent = source.parent(node)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is node:
                found.append(parent.value)
            elif isinstance(parent, ast.AnnAssign) and parent.target is node and parent.value is not None:
                found.append(parent.value)
            elif isinstance(parent, ast.AugAssign) and parent.target is node:
                found.append(parent)
            else:
                found.append(None)
        self._self_stores[key] = found
        return found

    def qualified_names(self, expr: ast.AST) -> FrozenSet[str]:
        """What ``expr`` stands for where it is, variables spelled ``<local>.x``."""
        return self.model.qualified_names(expr, visible=True, local="<local>.")

    def bindings(self, name: ast.Name) -> List[Binding]:
        return self.model.bindings(name)

    def sees(self, binding: Binding, name: ast.Name) -> bool:
        return self.model.sees(binding, name)

    def referents(self, name: ast.Name) -> List[Binding]:
        return self.model.visible_bindings(name)

    # -- param-group learning rates -------------------------------------------
    def is_group_lr(self, expr: ast.AST) -> bool:
        """``group["lr"]`` of a param group: ``group`` runs over
        ``X.param_groups`` (a loop or comprehension) or is bound to
        ``X.param_groups[i]``, or the subscript is ``X.param_groups[i]["lr"]``."""
        if not (isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and expr.slice.value == "lr"):
            return False
        holder = expr.value
        if _is_param_groups_item(holder):
            return True
        if not isinstance(holder, ast.Name):
            return False
        bindings = self.bindings(holder)
        if not bindings:
            return False
        for binding in bindings:
            if binding.kind in ("for", "comprehension"):
                loop = binding.value
                gens = loop.generators if isinstance(loop, _COMPREHENSIONS) else [loop]  # type: ignore[union-attr]
                if not any(getattr(g, "target", None) is binding.node and _is_param_groups(g.iter) for g in gens):
                    return False
            elif binding.kind == "assign":
                if not _is_param_groups_item(binding.value):
                    return False
            else:
                return False
        return True

    def group_lr_facts(self) -> Tuple[Optional[str], Optional[str]]:
        """(why the module's param-group lrs are tensors, why they change
        between steps), computed once per module.

        Tensors: an lr written as a torch call (``group["lr"] =
        torch.tensor(...)``), an lr used through a tensor method
        (``group["lr"].fill_(v)``) or tested with ``isinstance``, an ``lr=``
        keyword given a torch call.  Changing: a param group's lr written in
        a loop or a function (``group["lr"] = base * factor(step)``), or an LR
        scheduler of ``torch.optim.lr_scheduler`` built in the module."""
        if self._group_facts is not None:
            return self._group_facts
        tensor: Optional[str] = None
        varies: Optional[str] = None
        source = self.source
        for node in source.nodes(ast.Subscript):
            if not (isinstance(node.slice, ast.Constant) and node.slice.value == "lr"):  # type: ignore[attr-defined]
                continue
            parent = source.parent(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                tensor = tensor or f"line {node.lineno} uses an lr as a tensor (`.{parent.attr}`)"  # type: ignore[attr-defined]
            elif isinstance(parent, ast.Call) and dotted_name(parent.func) == "isinstance":
                tensor = tensor or f"line {node.lineno} tests the type of an lr"  # type: ignore[attr-defined]
            elif isinstance(parent, (ast.Assign, ast.AugAssign)) and isinstance(node.ctx, ast.Store) and self.is_group_lr(node):  # type: ignore[attr-defined]
                if isinstance(parent.value, ast.Call) and any(q.startswith("torch.") for q in self.qualified_names(parent.value.func)):
                    tensor = tensor or f"line {node.lineno} writes a tensor lr"  # type: ignore[attr-defined]
                elif varies is None and self._repeated(node):
                    varies = f"line {node.lineno} writes the param group's lr"  # type: ignore[attr-defined]
        for kw in source.nodes(ast.keyword):
            if kw.arg == "lr" and isinstance(kw.value, ast.Call) and any(q.startswith("torch.") for q in self.qualified_names(kw.value.func)):  # type: ignore[attr-defined]
                tensor = tensor or f"line {kw.value.lineno} passes a tensor lr"  # type: ignore[attr-defined]
        if varies is None:
            for call in source.nodes(ast.Call):
                if any(q.startswith(SCHED_PREFIX) for q in self.qualified_names(call.func)):  # type: ignore[attr-defined]
                    varies = f"an LR scheduler is built on line {call.lineno}"  # type: ignore[attr-defined]
                    break
        self._group_facts = (tensor, varies)
        return self._group_facts

    def _repeated(self, node: ast.AST) -> bool:
        """Does ``node`` run again and again: inside a loop (other than one
        over the param groups themselves) or a function other than ``__init__``."""
        for anc in self.source.ancestors(node):
            if isinstance(anc, ast.While) or (isinstance(anc, (ast.For, ast.AsyncFor)) and not _is_param_groups(anc.iter)):
                return True
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return anc.name != "__init__"
        return False

    def code(self, call: ast.Call, arg: ast.AST) -> str:
        """The source of positional argument ``arg`` of ``call`` with the
        parentheses around it (``f(x, (1 - t))`` -> ``(1 - t)``), as libcst's
        ``code_for_node`` gives it."""
        source = self.source
        lines = source.lines
        start_line, start_col = source.start(arg)
        # the text between the previous argument (or the callee) and ``arg``:
        # only commas, parentheses, whitespace and comments can be there
        prev: Optional[ast.AST] = None
        for other in call.args:
            if other is arg:
                break
            prev = other
        first = prev is None
        boundary = source.end(prev) if prev is not None else source.end(call.func)
        gap: List[Tuple[int, int]] = []  # positions of "(" after the last "," / ")"
        line, col = boundary
        while (line, col) < (start_line, start_col):
            text = lines[line - 1]
            stop = start_col if line == start_line else len(text)
            while col < stop:
                ch = text[col]
                if ch == "#":
                    break
                if ch in ",)":
                    gap = []
                elif ch == "(":
                    gap.append((line, col))
                elif not (ch.isspace() or ch == "\\"):
                    return source.segment(arg)  # not the text expected here
                col += 1
            line, col = line + 1, 0
        if first:
            gap = gap[1:]  # the call's own parenthesis
        if not gap:
            return source.segment(arg)
        # as many ")" after ``arg``
        line, col = source.end(arg)
        needed = len(gap)
        while needed and line <= len(lines):
            text = lines[line - 1]
            while col < len(text) and needed:
                ch = text[col]
                if ch == "#":
                    break
                if ch == ")":
                    needed -= 1
                elif not (ch.isspace() or ch == "\\"):
                    return source.segment(arg)
                col += 1
            if needed:
                line, col = line + 1, 0
        if needed:
            return source.segment(arg)
        (l1, c1), (l2, c2) = gap[0], (line, col)
        if l1 == l2:
            return lines[l1 - 1][c1:c2]
        return lines[l1 - 1][c1:] + "".join(lines[l1 : l2 - 1]) + lines[l2 - 1][:c2]


def _is_param_groups(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Attribute) and expr.attr == "param_groups"


def _is_param_groups_item(expr: Optional[ast.AST]) -> bool:
    return isinstance(expr, ast.Subscript) and _is_param_groups(expr.value)


def call_args(call: ast.Call) -> List[Tuple[Optional[str], str, ast.AST]]:
    """(keyword, star, value) of every argument of ``call`` in source order
    (star: "", "*" or "**"), as libcst lists them."""
    out: List[Tuple[Tuple[int, int], Optional[str], str, ast.AST]] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            out.append(((arg.lineno, arg.col_offset), None, "*", arg.value))
        else:
            out.append(((arg.lineno, arg.col_offset), None, "", arg))
    for kw in call.keywords:
        out.append(((kw.lineno, kw.col_offset), kw.arg, "**" if kw.arg is None else "", kw.value))
    if call.keywords and len(out) > 1:
        out.sort(key=lambda t: t[0])
    return [(k, s, v) for _, k, s, v in out]


def _binding_value(binding: Binding) -> Tuple[str, Optional[ast.AST]]:
    """(kind, node) for a binding: "assign" (the value), "ann" (the AnnAssign),
    "aug" (the AugAssign), "param" (the ``arg``), "for" (the loop) or "other"."""
    kind = binding.kind
    if kind == "param":
        return "param", binding.node
    if kind == "assign":
        return "assign", binding.value
    if kind == "annassign" and isinstance(binding.stmt, ast.AnnAssign) and binding.stmt.target is binding.node:
        return "ann", binding.stmt
    if kind == "augassign":
        return "aug", binding.value
    if kind == "for" and isinstance(binding.value, (ast.For, ast.AsyncFor)) and binding.value.target is binding.node:
        return "for", binding.value
    return "other", None


def _annotation_is(annotation: Optional[ast.AST], name: str) -> bool:
    return annotation is not None and dotted_name(annotation) in (name, f"builtins.{name}")


def _unpacked_annotation(site: "NameResolver", binding: Binding) -> Optional[Tuple[ast.AST, str]]:
    """(the function, "float" or "int") for a name unpacked from a call of a
    function or method of this module whose return annotation is a tuple
    with that type at the name's place (Distributed Shampoo's ``train, eval
    = self._get_train_and_eval_interp_coeffs(...)`` with ``-> tuple[float,
    float]``); None otherwise."""
    stmt = binding.stmt
    if binding.kind != "unpack" or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    target, value = stmt.targets[0], stmt.value
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, ast.Call):
        return None
    if any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    index = next((i for i, e in enumerate(target.elts) if e is binding.node), None)
    fn = site.model.called_def(value.func)
    returns = getattr(fn, "returns", None)
    if index is None or not isinstance(returns, ast.Subscript) or dotted_name(returns.value) not in ("tuple", "Tuple", "typing.Tuple"):
        return None
    elts = returns.slice.elts if isinstance(returns.slice, ast.Tuple) else [returns.slice]
    if len(elts) != len(target.elts):
        return None
    for kind in ("float", "int"):
        if _annotation_is(elts[index], kind):
            return fn, kind  # type: ignore[return-value]
    return None


def _number_literal(expr: ast.AST) -> Optional[str]:
    if isinstance(expr, ast.Constant):
        kind = type(expr.value)
        if kind is float:
            return "float"
        if kind is int:
            return "int"
    return None


def _all_floating(widths: List[Width]) -> Width:
    """The width of a value that is one of ``widths``: floating only if every one is."""
    if not widths or any(w is None for w in widths):
        return None
    return "float" if "float" in widths else "full"


def calls_of(site: "NameResolver", fn: ast.AST) -> List[Tuple[ast.Call, bool]]:
    """(call, whether ``self`` is bound) of every call of ``fn`` in the
    module: by name for a function, ``x.name(...)`` for a method (not static
    or class methods)."""
    model = site.model
    source = model.source
    owner = model.scopes.of_node.get(fn)
    scope = owner.parent if owner is not None else None
    if scope is None:
        return []
    name = fn.name  # type: ignore[attr-defined]
    out: List[Tuple[ast.Call, bool]] = []
    if scope.kind == "class":
        if any(dotted_name(d) in ("staticmethod", "classmethod") for d in fn.decorator_list):  # type: ignore[attr-defined]
            return []
        for node in site.attributes(name):
            parent = source.parent(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                out.append((parent, True))
        cls = scope.node
        if name == "forward" and isinstance(cls, ast.ClassDef):
            out.extend((call, True) for call in site.instance_calls(cls))  # `m(x)` runs `m.forward(x)`
        elif name == "__init__" and isinstance(cls, ast.ClassDef) and scope.parent is not None:
            for ref in scope.parent.references.get(cls.name, []):  # `C(...)` runs `C.__init__`
                parent = source.parent(ref)
                if isinstance(parent, ast.Call) and parent.func is ref:
                    out.append((parent, True))
        return out
    for ref in scope.references.get(name, []):
        parent = source.parent(ref)
        if isinstance(parent, ast.Call) and parent.func is ref:
            out.append((parent, False))
    return out


def _join_kinds(kinds: List[Optional[str]]) -> Optional[str]:
    """The kind of a value that is one of ``kinds``: None if any is unknown,
    "float" if any is a float, ``_CYCLE`` if nothing else is known."""
    if not kinds or any(k is None for k in kinds):
        return None
    known = [k for k in kinds if k != _CYCLE]
    if not known:
        return _CYCLE
    return "float" if "float" in known else "int"


def _element_path(target: ast.AST, node: ast.AST) -> Optional[Tuple[int, ...]]:
    """Where ``node`` sits in an unpacking target: ``()`` for the target
    itself, ``(1,)`` for ``lr`` in ``p, lr``."""
    if target is node:
        return ()
    if isinstance(target, (ast.Tuple, ast.List)):
        for index, elt in enumerate(target.elts):
            if isinstance(elt, ast.Starred):
                return None
            inner = _element_path(elt, node)
            if inner is not None:
                return (index,) + inner
    return None


def param_default(binding: Binding) -> Optional[ast.AST]:
    """The default value of a parameter binding, if it has one."""
    fn = binding.scope.node
    arg = binding.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or not isinstance(arg, ast.arg):
        return None
    return parameter_defaults(fn).get(arg.arg)


def _is_shape(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Attribute) and expr.attr == "shape"


def _is_size_call(expr: ast.AST, nargs: int) -> bool:
    """``x.size(k)`` (nargs 1) or ``x.size()`` (nargs 0): a tensor's sizes are ints."""
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "size"
        and not expr.keywords
        and len(expr.args) == nargs
        and not any(isinstance(a, ast.Starred) for a in expr.args)
    )


class _CallSide:
    """Python-number and floating-tensor reasoning at one module, with a depth
    limit against self-referential bindings (``t = t * 0.9``)."""

    def __init__(self, site: NameResolver) -> None:
        self.site = site
        #: steps left for :meth:`number` (bounds pathological chains of names)
        self.budget = 5000
        #: the param-group lrs (``group["lr"]``) a float was found to come from
        self.group_lrs: List[ast.AST] = []
        #: parameters whose default told that they are floats
        self.defaults: List[Binding] = []
        #: names known as numbers only by the return annotation of the call they are unpacked from
        self.unpacked: List[Binding] = []

    def _torch_last(self, func: ast.AST) -> Optional[str]:
        for q in sorted(self.site.qualified_names(func)):
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
    def number(self, expr: ast.AST, seen: Set) -> Optional[str]:
        """"float", "int", ``_CYCLE`` or None (not visibly a Python number)."""
        self.budget -= 1
        if self.budget < 0:
            return None
        if isinstance(expr, ast.Constant):
            return _number_literal(expr)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self.number(expr.operand, seen)
        if isinstance(expr, ast.BinOp):
            if not isinstance(expr.op, _NUMBER_OPS):
                return None
            left, right = self.number(expr.left, seen), self.number(expr.right, seen)
            if left is None or right is None:
                return None
            if isinstance(expr.op, ast.Div) or "float" in (left, right):
                return "float"
            return _CYCLE if _CYCLE in (left, right) else "int"
        if isinstance(expr, ast.Call):
            return self._call_number(expr, seen)
        if isinstance(expr, ast.Name):
            key = (id(self.site.scopes.scope_of(expr)), expr.id)
            if key in seen:
                return _CYCLE
            return self._name_number(expr, seen | {key})
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return self._attr_number(expr, seen)
        if isinstance(expr, ast.Subscript):
            if self.site.is_group_lr(expr):
                if self.site.group_lr_facts()[0] is not None:
                    return None  # the module keeps its lrs as tensors
                self.group_lrs.append(expr)
                return "float"
            if _is_shape(expr.value) or _is_size_call(expr.value, 0):
                return "int"  # x.shape[k], x.size()[k]
        return None

    def _call_number(self, expr: ast.Call, seen: Set) -> Optional[str]:
        name = dotted_name(expr.func)
        qn = self.site.qualified_names(expr.func)
        if any(q.startswith("torch") for q in qn):
            return None
        builtin = name is not None and "." not in name and f"builtins.{name}" in qn  # not a shadowing def
        args = call_args(expr)
        plain = all(keyword is None and not star for keyword, star, _ in args)
        if builtin and name == "float":
            return "float"
        if builtin and name in ("int", "len") and len(args) == 1:
            return "int"
        if builtin and name == "getattr" and plain and len(args) == 3:
            return self._getattr_number(args[1][2], args[2][2], seen)
        if _is_size_call(expr, 1) or (isinstance(expr.func, ast.Attribute) and expr.func.attr in ("dim", "numel") and not args):
            return "int"  # x.size(k), x.dim(), x.numel()
        if builtin and name == "round" and plain and len(args) in (1, 2):
            if len(args) == 1:
                return "int"
            kind = self.number(args[0][2], seen)  # round(x, n) keeps x's type
            return kind if self.number(args[1][2], seen) == "int" else None
        if builtin and name == "abs" and plain and len(args) == 1:
            return self.number(args[0][2], seen)
        if builtin and name in ("max", "min") and plain and len(args) >= 2:
            # the result is one of the arguments: a float only when every argument is
            kinds = [self.number(value, seen) for _, _, value in args]
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

    def _name_number(self, name: ast.Name, seen: Set) -> Optional[str]:
        kinds: List[Optional[str]] = []
        for binding in self.site.bindings(name):
            kind, node = _binding_value(binding)
            if kind == "param":
                if _annotation_is(node.annotation, "float"):  # type: ignore[union-attr]
                    kinds.append("float")
                elif _annotation_is(node.annotation, "int"):  # type: ignore[union-attr]
                    kinds.append("int")
                elif node.annotation is None:  # type: ignore[union-attr]
                    # known only by its default (`T=0.7`): callers may pass
                    # other numbers, and variation evidence looks at them
                    default = param_default(binding)
                    if default is None:
                        kinds.append(self._passed_number(binding, seen))
                        continue
                    found = self.number(default, seen)
                    if found == "float":
                        self.defaults.append(binding)
                    kinds.append(found)
                else:
                    kinds.append(None)
            elif kind == "assign":
                kinds.append(self.number(node, seen))  # type: ignore[arg-type]
            elif kind == "ann":
                if _annotation_is(node.annotation, "float"):  # type: ignore[union-attr]
                    kinds.append("float")
                elif node.value is not None:  # type: ignore[union-attr]
                    kinds.append(self.number(node.value, seen))  # type: ignore[union-attr]
                else:
                    kinds.append(None)
            elif kind == "aug":
                if not isinstance(node.op, _NUMBER_OPS):  # type: ignore[union-attr]
                    kinds.append(None)
                    continue
                value = self.number(node.value, seen)  # type: ignore[union-attr]
                if value is None:
                    kinds.append(None)
                elif value == "float" or isinstance(node.op, ast.Div):  # type: ignore[union-attr]
                    kinds.append("float")
                else:  # ``t *= 2`` keeps t's own kind, which t's other bindings give
                    kinds.append(_CYCLE if value == _CYCLE else "int")
            elif binding.kind in ("for", "comprehension"):
                kinds.append(self._target_number(binding, seen))
            else:
                unpacked = _unpacked_annotation(self.site, binding)
                if unpacked is not None:
                    self.unpacked.append(binding)
                kinds.append(unpacked[1] if unpacked is not None else None)
        return _join_kinds(kinds)

    def _passed_number(self, binding: Binding, seen: Set) -> Optional[str]:
        """A parameter with neither annotation nor default: the number every
        call of its function in the module passes for it (at least one call;
        the function referenced other than called, decorated, or a call
        through ``*args`` / ``**kwargs`` hides it), followed at most
        ``_PARAM_DEPTH`` functions out."""
        fn = binding.scope.node
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.decorator_list and not all(dotted_name(d) == "staticmethod" for d in fn.decorator_list):
            return None
        key = ("param", id(fn), binding.name)
        if key in seen:
            return _CYCLE
        if sum(1 for k in seen if k[0] == "param") >= _PARAM_DEPTH:
            return None
        owner = self.site.scopes.of_node.get(fn)
        scope = owner.parent if owner is not None else None
        if scope is None:
            return None
        if scope.kind != "class":
            for ref in scope.references.get(fn.name, []):
                parent = self.site.source.parent(ref)
                if not (isinstance(parent, ast.Call) and parent.func is ref):
                    return None  # passed around: its other callers are not seen
        calls = calls_of(self.site, fn)
        if not calls:
            return None
        self.budget -= 10
        seen = seen | {key}
        kinds: List[Optional[str]] = []
        for call, bound_self in calls:
            passed = argument_for(call, fn, binding.name, bound_self)
            kind = self.number(passed, seen) if passed is not None else None
            if kind is None:
                return None
            kinds.append(kind)
        return _join_kinds(kinds)

    def _attr_number(self, expr: ast.Attribute, seen: Set) -> Optional[str]:
        """``self.attr`` in a method: every value its class gives it
        (``self.warmup = warmup``, ``self.t *= 0.9``, a class attribute), and
        every ``obj.attr = v`` elsewhere in the module, is a Python number."""
        cls = self.site.source.enclosing(expr, ast.ClassDef)
        if not isinstance(cls, ast.ClassDef):
            return None
        key = ("attr", id(cls), expr.attr)
        if key in seen:
            return _CYCLE
        seen = seen | {key}
        values = self.site.self_stores(cls, expr.attr)
        if not values:
            return None
        kinds: List[Optional[str]] = []
        for value in values:
            if value is None:
                return None
            if isinstance(value, ast.AugAssign):
                if not isinstance(value.op, _NUMBER_OPS):
                    return None
                inner = self.number(value.value, seen)
                if inner is None:
                    return None
                kinds.append("float" if inner == "float" or isinstance(value.op, ast.Div) else _CYCLE if inner == _CYCLE else "int")
            else:
                kinds.append(self.number(value, seen))
            if kinds[-1] is None:
                return None
        for node in self.site.attributes(expr.attr):
            if not isinstance(node.ctx, ast.Store) or (isinstance(node.value, ast.Name) and node.value.id == "self"):
                continue
            parent = self.site.source.parent(node)  # `model.warmup = v` from outside
            if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is node):
                return None
            kinds.append(self.number(parent.value, seen))
        return _join_kinds(kinds)

    # -- elements of what a loop runs over ----------------------------------
    def _target_number(self, binding: Binding, seen: Set) -> Optional[str]:
        """The number a loop or comprehension target takes (``for p, lr in
        zip(ps, lrs)``, ``[m * lr for m in self.mults]``): an element of what
        it runs over."""
        holder = binding.value
        gens = holder.generators if isinstance(holder, _COMPREHENSIONS) else [holder] if isinstance(holder, (ast.For, ast.AsyncFor)) else []
        for gen in gens:
            path = _element_path(gen.target, binding.node)  # type: ignore[attr-defined]
            if path is not None:
                return self._element(gen.iter, path, seen, 0)  # type: ignore[attr-defined]
        return None

    def _element(self, expr: ast.AST, path: Tuple[int, ...], seen: Set, depth: int) -> Optional[str]:
        """The kind of an element of ``expr`` (then of its parts along ``path``):
        a literal list or tuple, a comprehension, ``range``, ``zip``,
        ``enumerate``, ``list()``/``tuple()``/``sorted()``/``reversed()``, a
        name or ``self.attr`` bound to one of those, a parameter's default."""
        self.budget -= 1
        if depth > 8 or self.budget < 0:
            return None
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            if not expr.elts or any(isinstance(e, ast.Starred) for e in expr.elts):
                return None
            return _join_kinds([self._part(e, path, seen, depth) for e in expr.elts])
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._part(expr.elt, path, seen, depth)
        if isinstance(expr, ast.Call):
            name = dotted_name(expr.func)
            if name is None or "." in name or f"builtins.{name}" not in self.site.qualified_names(expr.func):
                return None
            if expr.keywords or any(isinstance(a, ast.Starred) for a in expr.args):
                return None
            if name == "range":
                return "int" if not path else None
            if name == "zip" and path and path[0] < len(expr.args):
                return self._element(expr.args[path[0]], path[1:], seen, depth + 1)
            if name == "enumerate" and len(expr.args) == 1 and path:
                return ("int" if len(path) == 1 else None) if path[0] == 0 else self._element(expr.args[0], path[1:], seen, depth + 1) if path[0] == 1 else None
            if name in ("list", "tuple", "sorted", "reversed") and len(expr.args) == 1:
                return self._element(expr.args[0], path, seen, depth + 1)
            return None
        values: List[Optional[ast.AST]] = []
        if isinstance(expr, ast.Name):
            for binding in self.site.bindings(expr):
                if binding.kind == "assign":
                    values.append(binding.value)
                elif binding.kind == "param" and getattr(binding.node, "annotation", None) is None:
                    values.append(param_default(binding))
                else:
                    values.append(None)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = self.site.source.enclosing(expr, ast.ClassDef)
            if isinstance(cls, ast.ClassDef):
                values = list(self.site.model.self_attr_values(cls, expr.attr))  # type: ignore[arg-type]
        if not values or any(v is None for v in values):
            return None
        return _join_kinds([self._element(v, path, seen, depth + 1) for v in values])  # type: ignore[arg-type]

    def _part(self, expr: ast.AST, path: Tuple[int, ...], seen: Set, depth: int) -> Optional[str]:
        if not path:
            return self.number(expr, seen)
        if isinstance(expr, (ast.Tuple, ast.List)) and path[0] < len(expr.elts):
            return self._part(expr.elts[path[0]], path[1:], seen, depth)
        return None

    def _getattr_number(self, attr: ast.AST, default: ast.AST, seen: Set) -> Optional[str]:
        """``getattr(obj, "lr_mul", 1.0)``: a number when the default is one
        and every ``x.lr_mul = v`` of the module assigns a number."""
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            return None
        kinds = [self.number(default, seen)]
        for node in self.site.attributes(attr.value):
            if not isinstance(node.ctx, ast.Store):
                continue
            parent = self.site.source.parent(node)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.targets[0] is node:
                kinds.append(self.number(parent.value, seen))
            else:
                kinds.append(None)  # unpacked, augmented, annotated: not followed
        return _join_kinds(kinds)

    # -- floating tensors -------------------------------------------------
    def width(self, expr: ast.AST, seen: Set[int]) -> Width:
        if isinstance(expr, ast.Call):
            func = expr.func
            last = self._torch_last(func) if dotted_name(func) is not None else None
            args = call_args(expr)
            if last is not None:
                dtype = next((value for keyword, _, value in args if keyword == "dtype"), None)
                if dtype is not None:
                    d = dotted_name(dtype) or ""
                    d = d.rsplit(".", 1)[-1]
                    return "full" if d in FULL_DTYPES else "float" if d in HALF_DTYPES else None
                if last in LIKE_FACTORIES and args:
                    return self.width(args[0][2], seen)
                if last in FLOAT_FACTORIES:
                    return "full"
                if last == "full":
                    fill = next((value for keyword, _, value in args if keyword == "fill_value"), args[1][2] if len(args) > 1 and args[1][0] is None else None)
                    return "full" if _float_fill(fill) else None
                if last == "tensor" and args:
                    return "full" if self._float_literal_data(args[0][2]) else None
                if last in FLOAT_OPS:
                    return _join(self.width(args[0][2], seen), "float") if args else "float"
                return None
            if isinstance(func, ast.Attribute):
                method = func.attr
                if method in ("float", "double"):
                    return "full"
                if method in ("half", "bfloat16"):
                    return "float"
                if method in FLOAT_OPS:
                    return _join(self.width(func.value, seen), "float")
                if method in SAME_DTYPE_OPS or method == "to" and not args:
                    return self.width(func.value, seen)
            return None
        if isinstance(expr, ast.BinOp):
            left, right = self.width(expr.left, seen), self.width(expr.right, seen)
            return _join(left, right)
        if isinstance(expr, ast.Subscript):
            inner = self.width(expr.value, seen)
            if inner is None and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
                return self._stored_width(expr, seen)
            return inner
        if isinstance(expr, ast.Attribute):
            if expr.attr == "grad":
                return "float"  # only floating tensors have gradients
            if isinstance(expr.value, ast.Name) and expr.value.id == "self" and id(expr) not in seen:
                cls = self.site.source.enclosing(expr, ast.ClassDef)
                if isinstance(cls, ast.ClassDef):
                    return _all_floating([self.width(v, seen | {id(expr)}) for v in self.site.model.self_attr_values(cls, expr.attr)])
            return None
        if isinstance(expr, ast.Name):
            if id(expr) in seen:
                return None
            seen = seen | {id(expr)}
            widths: List[Width] = []
            for binding in self.site.bindings(expr):
                kind, node = _binding_value(binding)
                if kind == "assign":
                    widths.append(self.width(node, seen))  # type: ignore[arg-type]
                elif binding.kind == "param":
                    widths.append(self._param_width(binding, seen))
                elif binding.kind in ("for", "comprehension"):
                    widths.append(self._target_width(binding))
                else:
                    widths.append(None)
            return _all_floating(widths)
        return None

    # -- floating tensors through the program's flow --------------------------
    def _param_width(self, binding: Binding, seen: Set[int]) -> Width:
        """A parameter is as floating as what every call of its function in
        the module passes for it (at least one call; a call through ``*args``
        or ``**kwargs`` hides it)."""
        fn = binding.scope.node
        self.budget -= 50
        if self.budget < 0 or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or id(fn) in seen:
            return None
        seen = seen | {id(fn)}
        widths: List[Width] = []
        for call, bound_self in calls_of(self.site, fn):
            passed = argument_for(call, fn, binding.name, bound_self)
            widths.append(self.width(passed, seen) if passed is not None else None)
        return _all_floating(widths)

    def _target_width(self, binding: Binding) -> Width:
        """``for p in group["params"]`` / ``model.parameters()``: parameters
        an optimizer steps are floating tensors (maybe half precision)."""
        holder = binding.value
        gens = holder.generators if isinstance(holder, _COMPREHENSIONS) else [holder] if isinstance(holder, (ast.For, ast.AsyncFor)) else []
        for gen in gens:
            if getattr(gen, "target", None) is binding.node:
                it = gen.iter  # type: ignore[attr-defined]
                if isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Constant) and it.slice.value == "params":
                    return "float"
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters" and not it.args:
                    return "float"
        return None

    def _stored_width(self, expr: ast.Subscript, seen: Set[int]) -> Width:
        """``state["buf"]``: what the function holding it stores under that
        key in a dict of the same name (``state["buf"] = torch.zeros_like(p)``)."""
        holder = expr.value
        fn = self.site.source.enclosing(expr, (ast.FunctionDef, ast.AsyncFunctionDef))
        if not isinstance(holder, ast.Name) or fn is None or id(expr) in seen:
            return None
        key = expr.slice.value  # type: ignore[attr-defined]
        seen = seen | {id(expr)}
        widths: List[Width] = []
        for node in self.site.key_stores(holder.id, key):
            if self.site.source.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not fn:
                continue
            parent = self.site.source.parent(node)
            ok = isinstance(parent, ast.Assign) and len(parent.targets) == 1
            widths.append(self.width(parent.value, seen) if ok else None)  # type: ignore[union-attr]
        return _all_floating(widths)

    def _float_literal_data(self, data: ast.AST) -> bool:
        if isinstance(data, (ast.List, ast.Tuple)):
            return any(self._float_literal_data(e) for e in data.elts if not isinstance(e, ast.Starred))
        return self.number(data, set()) == "float"


@dataclass(frozen=True)
class FloatFlow:
    """Why an expression is a Python float, and where that float comes from."""

    reason: str
    #: the param-group lrs (``group["lr"]``) it is computed from: such a float
    #: changes only when something changes the lr (:meth:`NameResolver.group_lr_facts`)
    group_lrs: Tuple[ast.AST, ...] = ()
    #: parameters known to be floats only by their default (``T=0.7``)
    defaults: Tuple[Binding, ...] = ()
    #: names known as floats only by the return annotation of the call they
    #: are unpacked from: what the call returns may be the same every time,
    #: so its being unpacked again in a loop is no evidence of a change
    unpacked: Tuple[Binding, ...] = ()


def float_flow(site: NameResolver, expr: ast.AST) -> Optional[FloatFlow]:
    """Why ``expr`` is a Python float and what it flows from, or None when
    it is not visibly one."""
    side = _CallSide(site)
    if side.number(expr, set()) != "float":
        return None
    reason = _reason(site, expr)
    if side.group_lrs and not (isinstance(expr, ast.Subscript) and site.is_group_lr(expr)):
        reason += ", computed from a param group's lr"
    return FloatFlow(reason, tuple(side.group_lrs), tuple(side.defaults), tuple(side.unpacked))


def counted_int(site: NameResolver, expr: ast.AST) -> Optional[str]:
    """Why ``expr`` is a Python int counted up between calls, or None: a
    step counter kept in per-parameter state (``state["step"]``: every store
    of that key in the function holding ``expr`` an int, one of them ``+=``),
    an int attribute of ``self`` (``self.step``, likewise in its class), or a
    local int name incremented in a loop around ``expr``.  Only a counter
    changes each time the floats beside it do (an optimizer step: lr and step
    together); an int that may change at other times is not claimed."""
    side = _CallSide(site)
    source = site.source
    fn = source.enclosing(expr, (ast.FunctionDef, ast.AsyncFunctionDef))
    stores: List[ast.AST] = []
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        for node in site.key_stores(expr.value.id, expr.slice.value):
            if source.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) is fn:
                stores.append(source.parent(node))
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        cls = source.enclosing(expr, ast.ClassDef)
        if not isinstance(cls, ast.ClassDef) or side.number(expr, set()) != "int":
            return None
        stores = [v for v in site.self_stores(cls, expr.attr) if isinstance(v, ast.AugAssign)]
        if not stores:
            return None
        return f"an int counted up on line {stores[0].lineno}"  # type: ignore[attr-defined]
    elif isinstance(expr, ast.Name):
        if side.number(expr, set()) != "int":
            return None
        for loop in source.loops_around(expr):
            for node in ast.walk(loop):
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == expr.id and isinstance(node.op, ast.Add):
                    return f"an int counted up in the loop on line {loop.lineno}"  # type: ignore[attr-defined]
        return None
    else:
        return None
    counted = None
    for stmt in stores:
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)) and side.number(stmt.value, set()) == "int":
            counted = counted or stmt
        elif not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and side.number(stmt.value, set()) == "int"):
            return None
    if counted is None:
        return None
    return f"an int counted up on line {counted.lineno}"  # type: ignore[attr-defined]


def float_reason(site: NameResolver, expr: ast.AST) -> Optional[str]:
    """Why ``expr`` is a Python float, or None when it is not visibly one."""
    flow = float_flow(site, expr)
    return flow.reason if flow is not None else None


def _reason(site: NameResolver, expr: ast.AST) -> str:
    if isinstance(expr, ast.Constant):
        return "a float literal"
    if isinstance(expr, (ast.BinOp, ast.UnaryOp)):
        return "a float expression"
    if isinstance(expr, ast.Name):
        bindings = site.bindings(expr)
        for binding in bindings:
            kind, node = _binding_value(binding)
            if kind == "param" and _annotation_is(node.annotation, "float"):  # type: ignore[union-attr]
                return f"`{expr.id}` is annotated `float`"
            if kind == "ann" and _annotation_is(node.annotation, "float"):  # type: ignore[union-attr]
                return f"`{expr.id}` is annotated `float`"
            unpacked = _unpacked_annotation(site, binding)
            if unpacked is not None and unpacked[1] == "float":
                return f"`{expr.id}` is unpacked from `{getattr(unpacked[0], 'name', '?')}()`, annotated to return a float there"
        if bindings and all(b.kind == "param" for b in bindings):
            if any(param_default(b) is not None for b in bindings):
                return f"`{expr.id}` has a float default"
            fn = bindings[0].scope.node
            return f"every call of `{getattr(fn, 'name', '?')}` passes a float for `{expr.id}`"
        source = site.source
        loop = source.enclosing(expr, _LOOPS)
        if loop is not None and any(source.enclosing(b.node, _LOOPS) is loop for b in bindings):
            return f"`{expr.id}` is a float recomputed in the loop"
        return f"`{expr.id}` is bound to a float"
    if isinstance(expr, ast.Subscript) and site.is_group_lr(expr):
        return "a param group's lr"
    if isinstance(expr, ast.Attribute):
        return f"`{ast.unparse(expr)}` is assigned floats"
    return "a float"


def tensor_width(site: NameResolver, expr: ast.AST) -> Width:
    """Is ``expr`` visibly a floating tensor: "full" (float32/float64), "float"
    (floating, maybe half precision) or None."""
    return _CallSide(site).width(expr, set())


# --------------------------------------------------------------------------
# callee side


@dataclass(frozen=True)
class ParamUse:
    """How one parameter is used inside a function body."""

    #: every use accepts a 0-d float64 tensor with identical results
    safe: bool
    #: why not (empty when safe)
    reason: str = ""
    #: other parameters that must receive floating tensors: (names, "float"|"full"):
    #: one of ``names`` (the operands of one use: the result is as wide as the
    #: widest of them) must get a floating tensor of that width
    needs: Tuple[Tuple[Tuple[str, ...], str], ...] = ()
    #: how a use that is not safe is judged: "" (a wrap may work: unsafe fix),
    #: "branch" (Python control flow on the value: a 0-d tensor makes it
    #: data-dependent; the compile site's options decide) or "nofix" (the value
    #: must stay a Python number: a wrap crashes or cannot cure the recompiles)
    kind: str = ""
    #: what to do instead, for "nofix" and "branch"
    cure: str = ""


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    line: int
    #: positional parameters in order (``self`` included for methods)
    positional: Tuple[str, ...]
    kwonly: Tuple[str, ...]
    has_varargs: bool
    uses: Dict[str, ParamUse] = field(default_factory=dict)
    #: the first line of its code object (its first decorator's, or the ``def``'s)
    first_line: int = 0

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


#: what names a torch object where an expression is
#: (:meth:`codemods.analysis.compile_sites.CompileModel.torch_path`)
TorchPath = Callable[[ast.AST], Optional[str]]


#: builtins that take the value as a Python number and keep working on a 0-d
#: tensor, but change what the code does (``round``, ``int``, ``float``,
#: ``range`` and ``math.*`` are in :data:`codemods.analysis.tensor_ops_table.BUILTIN_NUMBER_ONLY`:
#: there a tensor crashes or cannot cure the recompiles)
_PYTHON_USERS = {
    "str": "`str()` formats it",
    "repr": "`repr()` formats it",
    "format": "`format()` formats it",
    "isinstance": "`isinstance(..., float)` is False for a tensor",
    "max": "`max()` compares it as a Python number",
    "min": "`min()` compares it as a Python number",
    "abs": "`abs()` would return a tensor",
    "print": "`print()` would show a tensor",
    "len": "`len()` needs a sequence",
}

_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)

#: how bad a use is for the wrap: a worse one decides the parameter's verdict
_RANK = {"": 1, "branch": 2, "nofix": 3}

_BRANCH_CURE = "keep it a Python number, or write the branch as tensor code (`torch.where(...)`)"

_TENSOR_EFFECT = {
    "graph break": "with a 0-d tensor dynamo cannot put the op in the graph (a graph break at the call; fullgraph=True raises)",
    "recompiles": "a 0-d tensor there still compiles once per value",
}


@dataclass(frozen=True)
class _Problem:
    """A use the wrap does not keep as it is: ``kind`` as in :attr:`ParamUse.kind`."""

    kind: str
    reason: str
    cure: str = ""
    #: the reason names its line already
    located: bool = False


class SummaryContext:
    """What the summaries of one module's functions share: the module's
    top-level functions (helpers a compiled function calls), their callee
    views and per-parameter verdicts, and the helpers being summarized (a
    recursive helper is not followed)."""

    def __init__(self, torch_path: TorchPath, helpers: Optional[Dict[str, ast.AST]]) -> None:
        self.torch_path = torch_path
        self.helpers = helpers or {}
        self.callees: Dict[int, "_Callee"] = {}
        self.verdicts: Dict[Tuple[int, str], ParamUse] = {}
        self.active: Set[Tuple[int, str]] = set()

    def callee(self, fn: ast.AST) -> "_Callee":
        found = self.callees.get(id(fn))
        if found is None:
            found = self.callees[id(fn)] = _Callee(fn, self.torch_path, self)  # type: ignore[arg-type]
        return found

    def verdict(self, fn: ast.AST, param: str) -> Optional[ParamUse]:
        """The helper's verdict on ``param`` (None: the helper is being summarized, a cycle)."""
        key = (id(fn), param)
        if key in self.verdicts:
            return self.verdicts[key]
        if key in self.active or len(self.active) > 8:
            return None
        self.active.add(key)
        try:
            use = self.callee(fn).summarize(param)
        finally:
            self.active.discard(key)
        self.verdicts[key] = use
        return use


class _Callee:
    def __init__(self, fn: ast.FunctionDef, torch_path: TorchPath, shared: Optional[SummaryContext] = None) -> None:
        self.fn = fn
        self.torch_path = torch_path
        self.shared = shared if shared is not None else SummaryContext(torch_path, None)
        self.parents: Dict[int, ast.AST] = {}
        for node in walk(fn):
            for child in children(node):
                self.parents[id(child)] = node
        args = fn.args
        self.params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        if args.vararg:
            self.params.append(args.vararg.arg)
        if args.kwarg:
            self.params.append(args.kwarg.arg)
        # local single assignments: name -> value (for floating-tensor evidence)
        self.locals: Dict[str, Optional[ast.AST]] = {}
        #: every name the body binds (a helper of that name is not the module's)
        self.bound: Set[str] = set(self.params)
        #: names the body imports: local name -> module
        self.imported: Dict[str, str] = {}
        for node in walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.locals[t.id] = node.value if t.id not in self.locals else None
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                self.locals[node.target.id] = None
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
                self.bound.add(node.name)
            elif isinstance(node, ast.alias):
                local = (node.asname or node.name).split(".")[0]
                self.bound.add(local)
                self.imported[local] = node.name if node.asname else local
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.bound.update(node.names)

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
            path = self.torch_path(expr.func)
            if path is not None:
                last = path.rsplit(".", 1)[-1]
                for kw in expr.keywords:
                    if kw.arg == "dtype":
                        d = (self.torch_path(kw.value) or "").rsplit(".", 1)[-1]
                        return ("full" if d in FULL_DTYPES else "float" if d in HALF_DTYPES else None), ()
                if last in LIKE_FACTORIES and expr.args:
                    return self.width(expr.args[0], exclude, depth + 1)
                if last in FLOAT_FACTORIES:
                    return "full", ()
                if last == "full":
                    fill = next((kw.value for kw in expr.keywords if kw.arg == "fill_value"), expr.args[1] if len(expr.args) > 1 else None)
                    return ("full" if _float_fill(fill) else None), ()
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
                if arithmetic_method(method) and len(expr.args) == 1 and not isinstance(expr.args[0], ast.Starred) and not any(kw.arg in (None, "out") for kw in expr.keywords):
                    # `x.mul(y)` is `x * y` (the tensor-ops table's arithmetic rows;
                    # `alpha=` / `rounding_mode=` keep the promoted dtype)
                    return self._join_all([expr.func.value, expr.args[0]], exclude, depth)
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
        needs: List[Tuple[Tuple[str, ...], str]] = []
        derived = {name}
        todo = [name]
        visited: Set[str] = set()
        worst: Optional[Tuple[_Problem, int]] = None
        while todo and (worst is None or worst[0].kind != "nofix"):
            current = todo.pop(0)
            if current in visited:
                continue
            visited.add(current)
            for node in walk(self.fn):
                problem = None
                if isinstance(node, ast.Name) and node.id == current and isinstance(node.ctx, ast.Load):
                    problem = self._use(node, derived, todo, needs)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not self.fn:
                    if any(isinstance(n, ast.Name) and n.id == current for n in walk(node)):
                        problem = f"`{current}` is used in a nested function"
                if not problem:
                    continue
                if isinstance(problem, str):
                    problem = _Problem("", problem)
                if worst is None or _RANK[problem.kind] > _RANK[worst[0].kind]:
                    worst = (problem, node.lineno)  # type: ignore[attr-defined]
                    if problem.kind == "nofix":
                        break
        if worst is not None:
            problem, line = worst
            reason = problem.reason if problem.located else f"{problem.reason} (line {line})"
            return ParamUse(False, reason, kind=problem.kind, cure=problem.cure)
        dedup: List[Tuple[Tuple[str, ...], str]] = []
        for names, required in needs:
            group = (tuple(n for n in names if n != name), required)
            if group[0] and group not in dedup:
                dedup.append(group)
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

    def _tensor_operand(self, others: List[ast.AST], derived: Set[str], needs: List[Tuple[Tuple[str, ...], str]], required: str, what: str) -> Optional[str]:
        """None when the tensor operands of a use (the result is as wide as
        the widest) are visibly floating of the ``required`` width, or will be
        if one of the parameters they come from gets such a tensor (a need)."""
        width, params = self._join_all(others, derived, -1) if len(others) > 1 else self.width(others[0], derived)
        if width == "full" or (width == "float" and required == "float"):
            return None
        if params:
            needs.append((tuple(params), required))
            return None
        kind = "a float32/float64 tensor" if required == "full" else "a floating tensor"
        return f"the other operand of {what} is not visibly {kind} (an integer tensor would turn float64, a Python number stays a Python number)"

    def _use(self, node: ast.AST, derived: Set[str], todo: List[str], needs: List[Tuple[Tuple[str, ...], str]]):
        """None when this use is fine, else why not (a string: a wrap may still
        work, unsafe; or a :class:`_Problem`)."""
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
                return self._tensor_operand([other], derived, needs, required, f"`{ast.unparse(parent)}`")
            if isinstance(parent, ast.Compare):
                holder = self.parents.get(id(parent))
                if isinstance(holder, (ast.If, ast.While, ast.IfExp, ast.Assert, ast.BoolOp)) or (isinstance(holder, ast.UnaryOp) and isinstance(holder.op, ast.Not)):
                    return _Problem("branch", f"compared as a Python number in a condition (`{ast.unparse(parent)[:40]}`)", _BRANCH_CURE)
                others = [parent.left] + list(parent.comparators)
                others = [o for o in others if o is not value]
                for o in others:
                    problem = self._tensor_operand([o], derived, needs, "float", f"`{ast.unparse(parent)}`")
                    if problem:
                        return problem
                return None
            if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert, ast.BoolOp)) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
                return _Problem("branch", "used as a Python bool in a condition", _BRANCH_CURE)
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

    def _call_use(self, call: ast.Call, value: ast.AST, derived: Set[str], needs, keyword: Optional[str] = None):
        func = call.func
        if isinstance(func, ast.Name) and self.torch_path(func) is None and func.id not in self.bound:
            if func.id in BUILTIN_NUMBER_ONLY and func.id != "math":
                return _Problem("nofix", f"passed to `{func.id}()`: {BUILTIN_NUMBER_ONLY[func.id]}", NUMBER_CURE)
            if func.id in _PYTHON_USERS:
                return _PYTHON_USERS[func.id]
            helper = self.shared.helpers.get(func.id)
            if helper is not None and helper is not self.fn:
                return self._helper_use(helper, call, value, derived, needs, keyword)
        path = self.torch_path(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math" and ("math" not in self.bound or self.imported.get("math") == "math"):
            return _Problem("nofix", f"passed to `math.{func.attr}()`: " + BUILTIN_NUMBER_ONLY["math"].format(fn=func.attr), NUMBER_CURE)
        method = func.attr if path is None and isinstance(func, ast.Attribute) else None
        # the call's arguments in the function form: the tensor input first
        args: List[ast.AST] = list(call.args) if path is not None else ([func.value] + list(call.args) if method else [])
        starred = any(isinstance(a, ast.Starred) for a in args) or any(kw.arg is None for kw in call.keywords)
        number_only = number_only_row(path)
        if number_only is not None and not starred:
            slot = self._slot(args, value, keyword, number_only.slots)
            if slot is not None:
                why = f"passed to `{path}()` as `{slot}`, which needs a Python number: {_TENSOR_EFFECT[number_only.tensor_effect]}"
                return _Problem("nofix", why, DROPOUT_CURE.format(p=slot))
        row = tensor_row(path, method)
        if row is not None and not starred:
            known = set(row.slots) | set(row.operands) | set(row.keywords)
            if all(kw.arg in known for kw in call.keywords) and self._slot(args, value, keyword, row.slots) is not None:
                operands = [args[i] for i in row.operands.values() if i < len(args) and args[i] is not value]
                operands += [kw.value for kw in call.keywords if kw.arg in row.operands]
                if operands:
                    return self._tensor_operand(operands, derived, needs, row.width, f"`{path or method}()`")
        name = path or (ast.unparse(func) if not isinstance(func, ast.Lambda) else "a lambda")
        return f"passed to `{name}()`, not known to accept a 0-d tensor with the same result"

    @staticmethod
    def _slot(args: List[ast.AST], value: ast.AST, keyword: Optional[str], slots: Dict[str, Optional[int]]) -> Optional[str]:
        """The slot of ``slots`` the value is passed in (by keyword or position), or None."""
        if keyword is not None:
            return keyword if keyword in slots else None
        for slot, index in slots.items():
            if index is not None and index < len(args) and args[index] is value:
                return slot
        return None

    def _helper_use(self, helper: ast.AST, call: ast.Call, value: ast.AST, derived: Set[str], needs, keyword: Optional[str]):
        """The value passed to a function of the same module: that function's
        verdict on the parameter it lands in (its needs mapped back to this
        call's arguments)."""
        name = helper.name  # type: ignore[attr-defined]
        hargs = helper.args  # type: ignore[attr-defined]
        positional = [a.arg for a in hargs.posonlyargs + hargs.args]
        kwonly = [a.arg for a in hargs.kwonlyargs]
        passed: Dict[str, ast.AST] = {}
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(positional):
                passed[positional[i]] = arg
        for kw in call.keywords:
            if kw.arg is not None:
                passed[kw.arg] = kw.value
        param = next((p for p, arg in passed.items() if arg is value), None)
        if param is None or (param not in positional and param not in kwonly):
            return f"passed to `{name}()` where it does not land in a named parameter"
        use = self.shared.verdict(helper, param)
        if use is None:
            return f"passed to `{name}()`, which calls back into itself or too deep to follow"
        if not use.safe:
            return _Problem(use.kind, f"passed to `{name}()` (line {call.lineno}), where `{param}` is {use.reason}", use.cure, located=True)
        for names, required in use.needs:
            operands = [passed[n] for n in names if n in passed]
            problem = self._tensor_operand(operands, derived, needs, required, f"`{name}()`") if operands else f"`{name}()` needs a floating tensor that is not passed"
            if problem:
                return problem
        return None


def callee_width(fn: ast.AST, torch_path: TorchPath, exprs: List[ast.AST], context: Optional[SummaryContext] = None) -> Tuple[Width, Tuple[str, ...]]:
    """(width, params) of the operands ``exprs`` of one use inside ``fn``, as
    :func:`summarize_function` sees them (the result is as wide as the widest):
    floating of at least ``width``, or as floating as the arguments of
    ``params`` (``context``: the module's shared summary state)."""
    callee = context.callee(fn) if context is not None else _Callee(fn, torch_path)  # type: ignore[arg-type]
    return callee._join_all(exprs, set(), -1) if len(exprs) > 1 else callee.width(exprs[0])


def _autocast_in(fn: ast.AST) -> Optional[int]:
    """The line of a ``with ...autocast(...)`` in ``fn``'s body (nested
    functions too), or None."""
    for node in ast.walk(fn):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                target = call.func if isinstance(call, ast.Call) else call
                if (dotted_name(target) or "").rsplit(".", 1)[-1] == "autocast":
                    return node.lineno
    return None


def summarize_function(fn: ast.FunctionDef, torch_path: TorchPath, helpers: Optional[Dict[str, ast.AST]] = None, context: Optional[SummaryContext] = None) -> FunctionSummary:
    """Per-parameter verdicts of ``fn``.  ``helpers``: the module's top-level
    functions by name, followed when ``fn`` passes a value to one of them
    (``context``: the state shared by the summaries of one module, instead)."""
    shared = context if context is not None else SummaryContext(torch_path, helpers)
    callee = shared.callee(fn)
    args = fn.args
    positional = tuple(a.arg for a in args.posonlyargs + args.args)
    kwonly = tuple(a.arg for a in args.kwonlyargs)
    uses = {}
    autocast = _autocast_in(fn)
    for name in positional + kwonly:
        use = shared.verdict(fn, name)
        use = use if use is not None else callee.summarize(name)
        if use.safe and autocast is not None:
            # under autocast the tensors a float meets are bf16/fp16 whatever
            # their source says, and a 0-d float64 tensor times a bf16 tensor
            # is computed otherwise than a Python float times it (audit:
            # CLIP's loss 21.719 -> 21.673)
            use = ParamUse(False, f"`{fn.name}` runs an autocast region (line {autocast}), where the tensors `{name}` meets may be half precision")
        uses[name] = use
    return FunctionSummary(
        name=fn.name,
        line=fn.lineno,
        positional=positional,
        kwonly=kwonly,
        has_varargs=args.vararg is not None or args.kwarg is not None,
        uses=uses,
        first_line=min([d.lineno for d in fn.decorator_list] + [fn.lineno]),
    )
