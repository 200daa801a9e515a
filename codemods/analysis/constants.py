"""Int constants the source makes visible behind names and attributes.

``range(self.n_layer)`` has a known bound when ``self.n_layer`` is assigned
``config.n_layer`` in ``__init__``, every construction of the class passes a
``config`` bound to ``SimpleNamespace(n_layer=12, ...)`` (or a dataclass call
``GPTConfig(n_layer=12)``, or ``dict(n_layer=12)``-style keywords), or
``args`` from ``parser.parse_args()`` with ``add_argument("--n_layer",
default=12)``.  Every path must agree on one value; anything else (a value
rebound, an argument not visible, a call with ``*args``) is unknown.

Each step is a lookup in the scopes or a walk of one class or of the calls of
one function; the depth is bounded, so the cost stays small and does not grow
with the tree.
"""

from __future__ import annotations

import ast
from typing import List, Optional

from .compile_sites import CompileModel, dotted_name
from .params import argument_for

_MAX_DEPTH = 6
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


#: arithmetic of number literals that stays a number literal
_NUMBER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow)


def number_kind(expr: Optional[ast.AST]) -> Optional[str]:
    """"int" or "float" for a number literal (not a bool), a sign of one, or
    arithmetic of them (``1e-3``, ``-1``, ``3 * 2**10``, ``1 / 3``: a ``/``
    is a float); None for anything else."""
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, float):
            return "float"
        if isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return "int"
        return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return number_kind(expr.operand)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _NUMBER_OPS):
        left, right = number_kind(expr.left), number_kind(expr.right)
        if left is None or right is None:
            return None
        return "float" if isinstance(expr.op, ast.Div) or "float" in (left, right) else "int"
    return None


def int_value(model: CompileModel, expr: ast.AST, depth: int = 0) -> Optional[int]:
    """The one int ``expr`` visibly evaluates to, else None."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Constant):
        return expr.value if type(expr.value) is int else None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        inner = int_value(model, expr.operand, depth + 1)
        return None if inner is None else (-inner if isinstance(expr.op, ast.USub) else inner)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        left, right = int_value(model, expr.left, depth + 1), int_value(model, expr.right, depth + 1)
        if left is None or right is None or (isinstance(expr.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(expr.op, ast.Add):
            return left + right
        if isinstance(expr.op, ast.Sub):
            return left - right
        if isinstance(expr.op, ast.Mult):
            return left * right
        return left // right
    if isinstance(expr, ast.Attribute):
        found: Optional[int] = None
        is_self = isinstance(expr.value, ast.Name) and expr.value.id == "self"
        owners = [expr.value] if is_self else _candidates(model, expr.value, depth + 1)
        if not owners:
            return None
        for owner in owners:
            value = _field(model, owner, expr.attr, expr, depth + 1)
            if value is None or (found is not None and value != found):
                return None
            found = value
        return found
    if isinstance(expr, ast.Name):
        values = _candidates(model, expr, depth + 1)
        if not values or any(v is expr for v in values):
            return None
        return _agreed(model, values, depth)
    return None


def _candidates(model: CompileModel, expr: ast.AST, depth: int) -> Optional[List[ast.AST]]:
    """The expressions ``expr`` may stand for: itself, or for a name its
    assigned values, or for a parameter the arguments of every call."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        # `self.cfg`: what the class assigns to it
        cls = model.source.enclosing(expr, ast.ClassDef)
        if not isinstance(cls, ast.ClassDef) or _changed_elsewhere(model, cls, expr.attr):
            return None
        values = model.self_attr_values(cls, expr.attr)
        if not values:
            return None
        out: List[ast.AST] = []
        for v in values:
            more = _candidates(model, v, depth + 1)
            if more is None:
                return None
            out.extend(more)
        return out
    if not isinstance(expr, ast.Name):
        return [expr]
    bindings = model.scopes.bindings_of(expr)
    if not bindings:
        return None
    if all(b.kind in ("assign", "annassign") and b.value is not None for b in bindings):
        out = []
        for b in bindings:
            more = _candidates(model, b.value, depth + 1)  # type: ignore[arg-type]
            if more is None:
                return None
            out.extend(more)
        return out
    if len(bindings) == 1 and bindings[0].kind == "param":
        args = _arguments_for(model, bindings[0].node, depth + 1)
        if args is None:
            return None
        out = []
        for a in args:
            more = _candidates(model, a, depth + 1)
            if more is None:
                return None
            out.extend(more)
        return out
    return None


def _arguments_for(model: CompileModel, param: ast.AST, depth: int) -> Optional[List[ast.AST]]:
    """What every visible call passes for ``param`` (its default when not
    passed); None when a call cannot be read or no call is seen.  Functions
    called by name, and ``__init__`` through calls of its class."""
    source = model.source
    fn = source.enclosing(param, _FUNCS)
    if fn is None:
        return None
    name = param.arg  # type: ignore[attr-defined]
    holder = source.parent(fn)
    if isinstance(holder, ast.ClassDef):
        if fn.name != "__init__":  # type: ignore[attr-defined]
            return None
        callee, skip = holder.name, 1
        if model.classes.get(callee) is not holder:
            return None
    elif isinstance(holder, ast.Module):
        callee, skip = fn.name, 0  # type: ignore[attr-defined]
        if model.functions.get(callee) is not fn:
            return None
    else:
        return None
    out: List[ast.AST] = []
    for ref in model.scopes.module.references.get(callee, ()):
        call = source.parent(ref)
        if not (isinstance(call, ast.Call) and call.func is ref):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        value = argument_for(call, fn, name, skip == 1)
        if value is None:
            return None
        out.append(value)
    return out or None


def _field(model: CompileModel, owner: ast.AST, attr: str, access: ast.Attribute, depth: int) -> Optional[int]:
    """The int ``owner.attr`` holds: ``self.attr`` set in the class, a keyword
    of the call that built ``owner`` (``SimpleNamespace(n_layer=12)``), a
    class-level default of a config class of this module, or an argparse
    default."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(owner, ast.Name) and owner.id == "self":
        cls = model.source.enclosing(access, ast.ClassDef)
        if not isinstance(cls, ast.ClassDef) or cls.name not in model.classes:
            return None
        values = model.self_attr_values(cls, attr) or _class_level(cls, attr)
        if not values or _changed_elsewhere(model, cls, attr):
            return None
        return _agreed(model, values, depth)
    if not isinstance(owner, ast.Call):
        return None
    func = owner.func
    if isinstance(func, ast.Attribute) and func.attr == "parse_args":
        return _argparse_default(model, attr, depth)
    if any(k.arg is None for k in owner.keywords):
        return None
    for kw in owner.keywords:
        if kw.arg == attr:
            return int_value(model, kw.value, depth + 1)
    qualified = model.qualified_names(func)
    if "types.SimpleNamespace" in qualified or "builtins.dict" in qualified:
        return None  # the field is not there
    cls = model.classes.get(dotted_name(func) or "")
    if cls is not None and not owner.args:
        values = _class_level(cls, attr)
        if len(values) == 1:
            return int_value(model, values[0], depth + 1)
    return None


def _class_level(cls: ast.ClassDef, attr: str) -> List[ast.AST]:
    """``attr = v`` / ``attr: int = v`` in the class body (dataclass fields, class attributes)."""
    out: List[ast.AST] = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
            out.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr and stmt.value is not None:
            out.append(stmt.value)
    return out


def _changed_elsewhere(model: CompileModel, cls: ast.ClassDef, attr: str) -> bool:
    """``self.attr += ...`` or ``setattr`` in the class: not a constant."""
    for node in ast.walk(cls):
        if isinstance(node, ast.AugAssign):
            t = node.target
            if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self":
                return True
    return False


def _arguments(model: CompileModel, attr: str) -> List[ast.Call]:
    """The ``parser.add_argument(...)`` calls of the module whose destination
    (``dest=``, else the first long option, ``--n-layer`` -> ``n_layer``) is ``attr``."""
    found: List[ast.Call] = []
    for call in model.source.nodes(ast.Call):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
            continue
        options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]  # type: ignore[attr-defined]
        dest = next((k.value.value for k in call.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)), None)  # type: ignore[attr-defined]
        if dest is None:
            longs = [o for o in options if o.startswith("--")]
            dest = (longs[0] if longs else (options[0] if options else "")).lstrip("-").replace("-", "_")
        if dest == attr:
            found.append(call)  # type: ignore[arg-type]
    return found


def store_true_flag(model: CompileModel, expr: ast.AST) -> Optional[str]:
    """The option (``--compile_dynamic``) when ``expr`` is ``args.<attr>`` and
    every ``add_argument`` of this module for ``<attr>`` is a flag that is
    False unless passed (``action="store_true"``, no default or
    ``default=False``), and nothing in the module assigns ``<attr>`` of
    anything (``args.compile_dynamic = ...``): the value is True only when
    the user passes the flag.  None otherwise (also when the parser is in
    another module)."""
    if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        return None
    calls = _arguments(model, expr.attr)
    if not calls:
        return None
    for call in calls:
        keywords = {k.arg: k.value for k in call.keywords}
        action = keywords.get("action")
        if not (isinstance(action, ast.Constant) and action.value == "store_true"):
            return None
        default = keywords.get("default", ast.Constant(value=False))
        if not (isinstance(default, ast.Constant) and default.value is False):
            return None
    for node in model.source.nodes(ast.Attribute):
        if node.attr == expr.attr and isinstance(node.ctx, (ast.Store, ast.Del)):  # type: ignore[attr-defined]
            return None
    options = [a.value for a in calls[0].args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return next((o for o in options if o.startswith("--")), options[0] if options else expr.attr)


def _argparse_default(model: CompileModel, attr: str, depth: int) -> Optional[int]:
    found: Optional[int] = None
    for call in _arguments(model, attr):
        default = next((k.value for k in call.keywords if k.arg == "default"), None)  # type: ignore[attr-defined]
        value = int_value(model, default, depth + 1) if default is not None else None
        if value is None or (found is not None and value != found):
            return None
        found = value
    return found


def _agreed(model, values, depth: int) -> Optional[int]:
    """The one int every expression of ``values`` visibly has, or None."""
    found: Optional[int] = None
    for v in values:
        value = int_value(model, v, depth + 1)
        if value is None or (found is not None and value != found):
            return None
        found = value
    return found
