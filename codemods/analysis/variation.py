"""Variation evidence: do the inputs of a compiled callable vary between calls?

Evidence comes from the calls :class:`~codemods.analysis.compile_sites.CompileModel` found:

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
recompile-limit rule uses.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Set, Tuple

from .compile_sites import CompileModel, CompileSite, dotted_name
from .context import DEFAULT_RECOMPILE_LIMIT
from .source import children, walk
from .modules import counted_object_ints
from .params import argument_for

# torch factories whose positional arguments are sizes
_SIZE_FACTORIES = {"ones", "zeros", "randn", "rand", "empty", "eye", "arange", "linspace", "randint", "full", "randperm"}
# tensor methods whose arguments are sizes / lengths
_SIZE_METHODS = {"view", "reshape", "expand", "repeat", "narrow", "new_ones", "new_zeros", "new_empty", "unflatten"}
_SIZE_KEYWORDS = ("size", "steps", "end", "start", "length")
_LOOPS = (ast.For, ast.AsyncFor)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Evidence:
    call: ast.Call
    #: "shape" (a tensor's shape varies) or "value" (a Python number varies)
    kind: str
    #: the loop that makes it vary, if any
    loop: Optional[ast.AST]
    #: how many distinct variants are visible (None: unknown)
    variants: Optional[int]
    detail: str
    #: every iteration of ``loop`` gives a new variant (its count is theirs);
    #: False for a number read out of a tensor, which may repeat
    per_iteration: bool = True


def _preorder(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and its descendants, parents first, children in source order."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        below = list(children(cur))
        if isinstance(cur, ast.Call):  # positional and keyword arguments interleave in the source
            below = [cur.func] + sorted(list(cur.args) + list(cur.keywords), key=lambda n: (n.lineno, n.col_offset))
        stack.extend(reversed(below))


def _names(node: ast.AST) -> Set[str]:
    """The names ``node`` reads (computed once per node)."""
    found = getattr(node, "_fr_names", None)
    if found is None:
        found = frozenset(n.id for n in walk(node) if isinstance(n, ast.Name))
        node._fr_names = found  # type: ignore[attr-defined]
    return found  # type: ignore[return-value]


def loop_names(loop: ast.AST) -> Set[str]:
    return _names(loop.target)  # type: ignore[attr-defined]


def literal_int(node: ast.AST) -> Optional[int]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal_int(node.operand)
        return None if inner is None else -inner
    return None


def loop_variants(loop: ast.AST) -> Optional[int]:
    """How many iterations a loop visibly has: ``range`` with literal bounds,
    a literal list/tuple/set."""
    it = loop.iter  # type: ignore[attr-defined]
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
        return None if any(isinstance(e, ast.Starred) for e in it.elts) else len(it.elts)
    if isinstance(it, ast.Call) and dotted_name(it.func) == "range":
        if it.keywords or not it.args:
            return None
        vals = [literal_int(a) for a in it.args]
        if any(v is None for v in vals):
            return None
        if len(vals) == 1:
            return max(0, vals[0])  # type: ignore[type-var]
        step = vals[2] if len(vals) == 3 else 1
        if step == 0:
            return None
        return max(0, len(range(vals[0], vals[1], step)))  # type: ignore[arg-type]
    return None


def _is_size_factory(model: CompileModel, func: ast.AST) -> bool:
    return any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _SIZE_FACTORIES for q in model.qualified_names(func))


Poly = Dict[Tuple[str, ...], float]


def _poly(expr: Optional[ast.AST], loop: Optional[ast.AST], depth: int = 0) -> Optional[Poly]:
    """``expr`` as a polynomial over its atoms (names, attributes, and any
    other subexpression taken whole), with loop-body names substituted by
    their single assignment; None when it is not a number expression."""
    if expr is None or depth > 8:
        return None
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return {(): float(expr.value)}
    if isinstance(expr, ast.Name) and loop is not None:
        bound = _value_of_loop_name(loop, expr.id)
        if bound is not None and not (isinstance(bound, ast.Name) and bound.id == expr.id):
            inner = _poly(bound, loop, depth + 1)
            if inner is not None:
                return inner
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        inner = _poly(expr.operand, loop, depth + 1)
        if inner is None:
            return None
        return {k: -v for k, v in inner.items()} if isinstance(expr.op, ast.USub) else inner
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _poly(expr.left, loop, depth + 1), _poly(expr.right, loop, depth + 1)
        if left is None or right is None:
            return None
        out: Poly = {}
        if isinstance(expr.op, ast.Mult):
            for ka, va in left.items():
                for kb, vb in right.items():
                    key = tuple(sorted(ka + kb))
                    out[key] = out.get(key, 0.0) + va * vb
        else:
            sign = 1.0 if isinstance(expr.op, ast.Add) else -1.0
            out = dict(left)
            for k, v in right.items():
                out[k] = out.get(k, 0.0) + sign * v
        return {k: v for k, v in out.items() if v != 0.0}
    return {(ast.dump(expr),): 1.0}


def _constant_width(part: ast.Slice, names: Set[str], loop: Optional[ast.AST]) -> bool:
    """Does ``lo:hi`` have the same width on every iteration (``x[i*k:(i+1)*k]``,
    ``x[i:i+n]``)?  Both bounds must be there, and their difference must not
    involve a name that changes with the loop (measured on torch 2.13: such
    slices into a ``dynamic=False`` model compile once)."""
    lower, upper = _poly(part.lower, loop), _poly(part.upper, loop)
    if lower is None or upper is None or part.step is not None:
        return False
    width = dict(upper)
    for k, v in lower.items():
        width[k] = width.get(k, 0.0) - v
    for key, coefficient in width.items():
        if coefficient == 0.0:
            continue
        for atom in key:
            if atom in names or any(f"id='{n}'" in atom for n in names):
                return False
    return True


def _shape_use(model: CompileModel, expr: ast.AST, names: Set[str], loop: Optional[ast.AST] = None) -> Optional[str]:
    """What builds a tensor whose shape depends on ``names`` in ``expr`` (first in source order)."""
    for node in _preorder(expr):
        if isinstance(node, ast.Call):
            is_method = isinstance(node.func, ast.Attribute) and node.func.attr in _SIZE_METHODS
            if is_method or _is_size_factory(model, node.func):
                args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
                args += [kw.value for kw in node.keywords if kw.arg is None or kw.arg in _SIZE_KEYWORDS]
                if any(_names(a) & names for a in args):
                    return dotted_name(node.func) or "tensor factory"
        elif isinstance(node, ast.Slice):
            if any(part is not None and _names(part) & names for part in (node.lower, node.upper)):
                if not _constant_width(node, names, loop):
                    return "slice"
    return None


def _is_number_expr(expr: ast.AST, names: Set[str]) -> bool:
    """A Python number computed from ``names``: ``i``, ``i * 2``, ``0.5 + i``."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.BinOp):
        return _is_number_expr(expr.left, names) or _is_number_expr(expr.right, names)
    if isinstance(expr, ast.UnaryOp):
        return _is_number_expr(expr.operand, names)
    return False


def _literal_shape(model: CompileModel, expr: ast.AST) -> Optional[str]:
    """``torch.ones(3, 4)`` → "ones(3,4)": a signature of literal shape args."""
    if not isinstance(expr, ast.Call) or not _is_size_factory(model, expr.func):
        return None
    if any(kw.arg is None for kw in expr.keywords):
        return None  # `**sizes` may be anything
    sizes: List[Optional[int]] = []
    for arg in expr.args:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if isinstance(arg, ast.Starred):
            return None
        if isinstance(value, (ast.Tuple, ast.List)):
            ints = [literal_int(e) for e in value.elts]
        else:
            ints = [literal_int(value)]
        if any(i is None for i in ints):
            return None
        sizes.extend(ints)
    return f"{dotted_name(expr.func)}{tuple(sizes)}" if sizes else None


def _body_assigns(loop: ast.AST) -> List[ast.Assign]:
    """The assignments of a loop body (not of nested functions), in source
    order (computed once per loop)."""
    found = getattr(loop, "_fr_assigns", None)
    if found is None:
        found = list(_walk_assigns(loop))
        loop._fr_assigns = found  # type: ignore[attr-defined]
    return found


def _walk_assigns(loop: ast.AST) -> Iterator[ast.Assign]:
    stack: List[ast.AST] = list(reversed(loop.body))  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, _FUNCS):
            continue
        if isinstance(node, ast.Assign):
            yield node
        stack.extend(reversed(children(node)))


def loop_assignments(loop: ast.AST, names: Set[str]) -> Set[str]:
    """Names assigned inside the loop body from expressions using ``names`` (to a fixpoint;
    computed once per loop and names)."""
    memo = getattr(loop, "_fr_derived", None)
    if memo is None:
        memo = loop._fr_derived = {}  # type: ignore[attr-defined]
    key = frozenset(names)
    found = memo.get(key)
    if found is None:
        found = memo[key] = frozenset(_loop_assignments(loop, names))
    return set(found)


def _loop_assignments(loop: ast.AST, names: Set[str]) -> Set[str]:
    derived = set(names)
    assigns: List[Tuple[Set[str], ast.AST]] = []
    for node in _body_assigns(loop):
        targets: Set[str] = set()
        for t in node.targets:
            if isinstance(t, (ast.Name, ast.Tuple, ast.List)):
                targets |= _names(t)
        assigns.append((targets, node.value))
    changed = True
    while changed:
        changed = False
        for targets, value in assigns:
            if targets - derived and _names(value) & derived:
                derived |= targets
                changed = True
    return derived


def _value_of_loop_name(loop: ast.AST, name: str) -> Optional[ast.AST]:
    found = [node.value for node in _body_assigns(loop) for t in node.targets if isinstance(t, ast.Name) and t.id == name]
    return found[0] if len(found) == 1 else None


def call_arguments(call: ast.Call) -> List[Tuple[Optional[str], ast.AST]]:
    """``(keyword or None, value)`` of every argument, in source order (``*xs`` gives ``xs``)."""
    items: List[Tuple[Tuple[int, int], Optional[str], ast.AST]] = []
    for arg in call.args:
        items.append(((arg.lineno, arg.col_offset), None, arg.value if isinstance(arg, ast.Starred) else arg))
    for kw in call.keywords:
        items.append(((kw.lineno, kw.col_offset), kw.arg, kw.value))
    items.sort(key=lambda t: t[0])
    return [(k, v) for _, k, v in items]


def evidence_for(model: CompileModel, site: CompileSite) -> List[Evidence]:
    """Every piece of evidence that the inputs of ``site`` vary, in source order."""
    source = model.source
    result: List[Evidence] = []
    literal_shapes: Dict[Tuple, Set[str]] = {}
    for call in site.calls:
        # a loop outside the enclosing function does not drive this call
        loops = [lp for lp in source.loops_around(call) if isinstance(lp, _LOOPS)]
        for index, (keyword, value) in enumerate(call_arguments(call)):
            key = (id(site.def_of(call)), keyword if keyword is not None else index)  # per function a decorator compiles
            sig = _literal_shape(model, value)
            if sig is not None:
                literal_shapes.setdefault(key, set()).add(sig)
            for loop in loops:
                names = loop_assignments(loop, loop_names(loop))
                ev = _arg_evidence(model, call, value, loop, names)
                if ev is not None:
                    result.append(ev)
                    break
    for key, sigs in literal_shapes.items():
        if len(sigs) > 1:
            result.append(Evidence(site.calls[0], "shape", None, len(sigs), f"called with tensors of shapes {', '.join(sorted(sigs))}"))
    anchor = site.calls[0] if site.calls else site.options_call
    if anchor is not None and not result:  # only when nothing else shows the inputs vary
        # an int of a plain object the compiled code reads and counts up (FR016's fact)
        for counted in counted_object_ints(model, site):
            method, write = counted.writes[0]
            result.append(
                Evidence(
                    anchor, "value", None, None,
                    f"the compiled code reads `{counted.owner.name}.{counted.attr}` and counts it up (`{counted.owner.name}.{method}`, line {write.lineno})",
                    per_iteration=False,
                )
            )
    return result


def _arg_evidence(model: CompileModel, call: ast.Call, value: ast.AST, loop: ast.AST, names: Set[str]) -> Optional[Evidence]:
    variants = loop_variants(loop)
    loop_var = ", ".join(sorted(loop_names(loop)))
    hit = _shape_use(model, value, names, loop)
    if hit is None and isinstance(value, ast.Name) and value.id in names:
        bound = _value_of_loop_name(loop, value.id)
        if bound is not None:
            hit = _shape_use(model, bound, names, loop)
    if hit is not None:
        return Evidence(call, "shape", loop, variants, f"the shape of an argument comes from loop variable `{loop_var}` ({hit})")
    if varies_as_number(loop, value, names):
        return Evidence(call, "value", loop, variants, f"a Python number computed from loop variable `{loop_var}` is passed")
    read = _read_out(model, value, loop, names)
    if read is not None:  # how many distinct values it takes is not visible
        return Evidence(call, "value", loop, None, f"a Python number read out of a tensor of each iteration (`{read}`) is passed", per_iteration=False)
    if isinstance(value, ast.Name) and value.id in loop_names(loop) and isinstance(loop.iter, (ast.List, ast.Tuple)):  # type: ignore[attr-defined]
        sigs = {_literal_shape(model, e) for e in loop.iter.elts}  # type: ignore[attr-defined]
        if None not in sigs and len(sigs) > 1:
            return Evidence(call, "shape", loop, len(sigs), f"the loop passes tensors of shapes {', '.join(sorted(sigs))}")  # type: ignore[arg-type]
    return None


#: tensor reductions whose value ``int(...)`` / ``float(...)`` reads out like ``.item()``
_REDUCTIONS = {"max", "min", "sum", "mean", "amax", "amin", "argmax", "argmin", "count_nonzero", "prod", "norm"}
#: torch functions that draw new values on every call, from more values than
#: the recompile limit (``randint`` with a visibly narrow range is checked
#: apart; ``bernoulli``, ``multinomial`` draw from a few values)
_RANDOM = {"rand", "randn", "randint", "randperm", "normal", "rand_like", "randn_like"}


def _read_out(model: CompileModel, value: ast.AST, loop: ast.AST, names: Set[str]) -> Optional[str]:
    """The expression, when ``value`` (or the one loop-body assignment of the
    name it is) reads a Python number out of a tensor that changes every
    iteration: ``lengths.max().item()``, ``int(mask.sum())``, where the tensor
    comes from the loop variable (a batch) or from a random draw in the body
    (quack#150: ``max_seqlen = lengths.max().item()`` passed to a
    ``dynamic=False`` model, a new graph every batch)."""
    if isinstance(value, ast.Name) and value.id in assigned_names(loop):
        bound = _value_of_loop_name(loop, value.id)
        if bound is None or isinstance(bound, ast.Name):
            return None
        value = bound
    return ast.unparse(value) if _reads_out(model, value, loop, names) else None


#: builtins that keep a read-out number a number that varies with it:
#: ``min(max_len, lengths.max().item())``, ``int(x.sum().item())``
_NUMBER_WRAPPERS = {"min", "max", "int", "float", "round", "abs"}


def _reads_out(model: CompileModel, value: ast.AST, loop: ast.AST, names: Set[str]) -> bool:
    """Is ``value`` a read-out (see :func:`_read_out`), or one inside
    ``min``/``max``/``int``/``float``/``round``/``abs``?  A ``min`` with a
    literal cap no larger than the recompile limit keeps to a few values,
    as a narrow ``randint`` does: no evidence."""
    if not isinstance(value, ast.Call) or value.keywords:
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "item" and not value.args:
        tensor = func.value
    elif (
        isinstance(func, ast.Name) and func.id in ("int", "float") and len(value.args) == 1 and model.scopes.is_builtin(func)
        and isinstance(value.args[0], ast.Call) and isinstance(value.args[0].func, ast.Attribute) and value.args[0].func.attr in _REDUCTIONS
    ):
        tensor = value.args[0]
    elif isinstance(func, ast.Name) and func.id in _NUMBER_WRAPPERS and value.args and model.scopes.is_builtin(func):
        caps = [literal_int(a) for a in value.args]
        if func.id == "min" and any(cap is not None and cap <= DEFAULT_RECOMPILE_LIMIT for cap in caps):
            return False
        return any(_reads_out(model, a, loop, names) for a in value.args)
    else:
        return False
    varying = loop_assignments(loop, names | _drawn(model, loop))
    return bool(_names(tensor) & varying) or any(_is_draw(model, n) for n in walk(tensor) if isinstance(n, ast.Call))


def _drawn(model: CompileModel, loop: ast.AST) -> Set[str]:
    """Names the loop body binds to a random draw (``torch.randint(...)``)."""
    out: Set[str] = set()
    for node in _body_assigns(loop):
        value = node.value
        if isinstance(value, ast.Call) and _is_draw(model, value):
            for t in node.targets:
                out |= _names(t)
    return out


def _is_draw(model: CompileModel, call: ast.Call) -> bool:
    """A torch random draw from more values than the recompile limit."""
    return any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _RANDOM for q in model.qualified_names(call.func)) and not _narrow_randint(model, call)


def _narrow_randint(model: CompileModel, call: ast.Call) -> bool:
    """``torch.randint(0, 2, ...)``, ``torch.randint(5, size)``: a draw from a
    visibly small range, no more values than the recompile limit (a few
    graphs at most, measured: 2 with or without dynamic=False)."""
    if not any(q.endswith(".randint") for q in model.qualified_names(call.func)):
        return False
    args = call.args
    # randint(high, size) or randint(low, high, size): the size is a tuple or list
    two_bounds = len(args) >= 3 or (len(args) == 2 and not isinstance(args[1], (ast.Tuple, ast.List)))
    low, high = (literal_int(args[0]), literal_int(args[1])) if two_bounds else (0, literal_int(args[0]) if args else None)
    return low is not None and high is not None and high - low <= DEFAULT_RECOMPILE_LIMIT


def varies_as_number(loop: ast.AST, value: ast.AST, names: Set[str]) -> bool:
    if not isinstance(value, ast.Name):
        return _is_number_expr(value, names)
    if value.id in loop_names(loop):
        return _iter_is_numbers(loop)
    if value.id in names:
        bound = _value_of_loop_name(loop, value.id)
        return bound is not None and not isinstance(bound, ast.Name) and _is_number_expr(bound, names)
    return False


def _iter_is_numbers(loop: ast.AST) -> bool:
    it = loop.iter  # type: ignore[attr-defined]
    if isinstance(it, ast.Call) and dotted_name(it.func) == "range":
        return True
    if isinstance(it, (ast.List, ast.Tuple)):
        return bool(it.elts) and all(isinstance(e, ast.Constant) and type(e.value) in (int, float) for e in it.elts)
    return False


# -- does a number passed to a compiled callable change between calls? ----------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def assigned_names(node: ast.AST) -> Set[str]:
    """Names a loop rebinds on every iteration: its targets and what its body
    assigns (``=``, ``+=``, ``:=``, nested ``for``), not inside nested functions
    (computed once per loop)."""
    found = getattr(node, "_fr_assigned", None)
    if found is None:
        out: Set[str] = set()
        for kind, target in _stores(node):
            if kind == "assign":  # every name of the target, a subscript's base and index too
                out |= {n.id for n in walk(target) if isinstance(n, ast.Name)}
            elif kind != "augassign" or isinstance(target, ast.Name):
                out |= _names(target)
        found = node._fr_assigned = frozenset(out)  # type: ignore[attr-defined]
    return found


def _stores(node: ast.AST) -> List[Tuple[str, ast.AST]]:
    """(kind, target) of what a loop stores on every iteration: its own target
    ("for"), and in its body, not inside nested functions or classes, the
    targets of ``=`` ("assign"), ``+=`` and ``x: T = v`` ("augassign"), nested
    ``for`` ("for") and ``:=`` ("walrus") (computed once per loop)."""
    found = getattr(node, "_fr_stores", None)
    if found is not None:
        return found
    out: List[Tuple[str, ast.AST]] = []
    if isinstance(node, (ast.For, ast.AsyncFor)):
        out.append(("for", node.target))
    stack: List[ast.AST] = list(node.body)  # type: ignore[attr-defined]
    while stack:
        cur = stack.pop()
        if isinstance(cur, _SCOPES) or isinstance(cur, ast.ClassDef):
            continue
        if isinstance(cur, ast.Assign):
            out.extend(("assign", t) for t in cur.targets)
        elif isinstance(cur, (ast.AugAssign, ast.AnnAssign)):
            out.append(("augassign", cur.target))
        elif isinstance(cur, (ast.For, ast.AsyncFor)):
            out.append(("for", cur.target))
        elif isinstance(cur, ast.NamedExpr):
            out.append(("walrus", cur.target))
        stack.extend(children(cur))
    node._fr_stores = out  # type: ignore[attr-defined]
    return out


#: how many functions out a parameter's values are followed to its callers
#: (as far as :data:`codemods.analysis.floats._PARAM_DEPTH` follows its number)
_CALLER_DEPTH = 3


def number_varies(model: CompileModel, call: ast.Call, value: ast.AST, depth: int = 0, calls=None) -> Optional[str]:
    """Evidence that the number ``value`` passed at ``call`` changes between
    calls (None: none visible): it is rebuilt inside a loop around the call
    (``for step in ...: t *= 0.9; f(x, t)``), or it is computed from
    parameters of the function holding the call -- directly or through a
    local assigned once (``w = min(1.0, step / self.warmup)``) -- and that
    function is called with values that change (in a loop, or different
    values at different calls).  ``calls(fn)`` lists the calls of a function
    as (call, whether ``self`` is bound) (:func:`codemods.analysis.floats.calls_of`:
    also ``m(x)`` for ``forward``); without it, calls by name or attribute."""
    source = model.source
    fn = source.enclosing(call, _SCOPES)
    used = _names(value)
    for loop in source.loops_around(call):
        hit = {name for name in used & assigned_names(loop) if not _other_keys_only(loop, name, value)}
        if hit:
            return f"`{sorted(hit)[0]}` changes in the loop on line {loop.lineno}"
    if depth >= _CALLER_DEPTH or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    for param in _params_read(model, fn, value):
        why = _param_varies(model, fn, param, depth, calls)
        if why is not None:
            return why
    return None


def _keys(node: ast.AST, name: str) -> Optional[Set[object]]:
    """The constant keys and attributes through which ``node`` reaches
    ``name`` (``group["eps"]`` -> {"eps"}, ``cfg.lr`` -> {".lr"}); None when
    it reaches ``name`` otherwise (the whole object, a computed key)."""
    found: Set[object] = set()
    bare = 0
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id == name:
            bare += 1
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name:
            if not isinstance(n.slice, ast.Constant):
                return None
            found.add(n.slice.value)
            bare -= 1
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name:
            found.add("." + n.attr)
            bare -= 1
    return found if bare == 0 else None


def _other_keys_only(loop: ast.AST, name: str, value: ast.AST) -> bool:
    """Does the loop only store other keys of ``name`` than those ``value``
    reads?  ``group["step"] = ...`` in the loop leaves ``group["eps"]`` as it
    was (HeavyBall's kernel took `eps=group["eps"]`, constant for the run: a
    survey's false finding); a rebinding of ``name``, a computed key, or a
    store into a key ``value`` reads is a change."""
    read = _keys(value, name)
    if not read:
        return False
    stored: Set[object] = set()
    targets = [target for _, target in _stores(loop)]
    while targets:
        t = targets.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            targets.extend(t.elts)
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
        elif isinstance(t, ast.Name) and t.id == name:
            return False  # rebound
        elif isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name) and t.value.id == name:
            key = _keys(t, name)
            if key is None:
                return False  # a computed key: may be any
            stored |= key
    return not (stored & read)


def _params_read(model: CompileModel, fn: ast.AST, value: ast.AST) -> List[str]:
    """The parameters of ``fn`` that ``value`` is computed from: read in it,
    or in the one assignment of a local it reads (not ``self``)."""
    args = fn.args  # type: ignore[attr-defined]
    first = (list(args.posonlyargs) + list(args.args))[:1]
    is_method = isinstance(model.source.parent(fn), ast.ClassDef)
    out: List[str] = []
    todo: List[Tuple[ast.AST, int]] = [(value, 0)]
    while todo:
        expr, level = todo.pop()
        for name in (n for n in walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            bindings = model.scopes.bindings_of(name)
            if not bindings or bindings[0].scope.node is not fn:
                continue
            if all(b.kind == "param" for b in bindings):
                if name.id not in out and not (is_method and first and first[0].arg == name.id):
                    out.append(name.id)
            elif level == 0 and len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                todo.append((bindings[0].value, level + 1))
    return out


def _param_varies(model: CompileModel, fn: ast.AST, param: str, depth: int, calls) -> Optional[str]:
    """Is ``fn`` called with values of ``param`` that change?"""
    source = model.source
    owner = model.scopes.of_node.get(fn)
    scope = owner.parent if owner is not None else None
    if scope is None:
        return None
    is_method = isinstance(source.parent(fn), ast.ClassDef)
    if calls is not None:
        found = calls(fn)
    else:
        refs = scope.references.get(fn.name, []) if not is_method else [  # type: ignore[attr-defined]
            n for n in source.nodes(ast.Attribute) if n.attr == fn.name and isinstance(source.parent(n), ast.Call) and source.parent(n).func is n  # type: ignore[attr-defined]
        ]
        found = [(source.parent(ref), is_method) for ref in refs if isinstance(source.parent(ref), ast.Call) and source.parent(ref).func is ref]  # type: ignore[union-attr]
    passed: List[Tuple[ast.Call, Optional[ast.AST]]] = []
    for outer, bound_self in found:
        if any(isinstance(a, ast.Starred) for a in outer.args) or any(k.arg is None for k in outer.keywords):
            return None  # forwarded through *args / **kwargs: not seen
        passed.append((outer, argument_for(outer, fn, param, bound_self)))
    for outer, arg in passed:
        if arg is not None:
            why = number_varies(model, outer, arg, depth + 1, calls)
            if why is not None:
                return f"`{fn.name}` is called with `{param}` that changes ({why})"  # type: ignore[attr-defined]
    # different values at different calls: only literals show it (a default
    # `1e-8` and `group["eps"]` may well be equal: HeavyBall's wrapper, a
    # survey's false finding)
    literals = {repr(a.value) for _, a in passed if isinstance(a, ast.Constant)}
    if len(passed) > 1 and len(literals) > 1:
        return f"`{fn.name}` is called with different `{param}` values"  # type: ignore[attr-defined]
    return None
