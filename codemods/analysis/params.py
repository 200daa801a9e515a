"""Parameters and the arguments a call binds to them: one reading of a
``def``'s defaults and one binding of a call's arguments, for every rule
and the trace's cures (issue 26: it was written in six places)."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional


def parameter_defaults(fn: ast.AST) -> Dict[str, ast.expr]:
    """By name, the default of each parameter of ``fn`` that has one
    (positional ones align with the end of the positional list)."""
    args = fn.args  # type: ignore[attr-defined]
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    out: Dict[str, ast.expr] = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    out.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return out


def parameter_names(fn: ast.AST) -> List[str]:
    """The names of ``fn``'s parameters a call can pass one by one
    (positional-only, positional, keyword-only; not ``*args``/``**kwargs``)."""
    args = fn.args  # type: ignore[attr-defined]
    return [a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)]


def is_static(fn: ast.AST) -> bool:
    """Is ``fn`` decorated ``@staticmethod`` (its calls pass every parameter)?"""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", ()))


def binds_self(source, fn: ast.AST) -> bool:
    """Do calls of ``fn`` through an instance or ``self`` bind its first
    parameter implicitly: a ``def`` in a class body, not a ``@staticmethod``."""
    return isinstance(source.parent(fn), ast.ClassDef) and not is_static(fn)


def argument_for(call: ast.Call, fn: ast.AST, param: str, bound_self: bool) -> Optional[ast.AST]:
    """What ``call`` passes for parameter ``param`` of ``fn`` (its default when
    nothing; ``bound_self``: the first parameter is bound implicitly), None
    when unknown (``*args``/``**kwargs`` at the call)."""
    args = fn.args  # type: ignore[attr-defined]
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    if bound_self:
        positional = positional[1:]
    plain = next((k for k, a in enumerate(call.args) if isinstance(a, ast.Starred)), len(call.args))
    if param in positional and positional.index(param) < plain:
        return call.args[positional.index(param)]
    if plain < len(call.args) or any(kw.arg is None for kw in call.keywords):
        return None  # may come through *args / **kwargs
    return parameter_defaults(fn).get(param)


def passed_argument(call: ast.Call, fn: ast.AST, param: str, bound_self: bool) -> Optional[ast.AST]:
    """The expression ``call`` itself passes for ``param`` of ``fn``
    (:func:`argument_for`, without the default): None when it passes none
    (the default applies) or it cannot be known."""
    value = argument_for(call, fn, param, bound_self)
    passed = list(call.args) + [kw.value for kw in call.keywords]
    return value if value is not None and any(value is a for a in passed) else None


def argument_at(call: ast.Call, index: int, param: str) -> Optional[ast.AST]:
    """What ``call`` passes for a parameter known by its position among the
    call's arguments (``index``; -1: keyword-only) and its name, as an entry
    of the project index records a callable of another module: the argument
    at that position when no ``*args`` comes before it, else the keyword of
    that name; None when it passes neither plainly."""
    if 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return next((kw.value for kw in call.keywords if kw.arg == param), None)


def changed_in_place(fn: ast.AST, name: str, methods=frozenset()) -> Optional[ast.AST]:
    """A place in ``fn`` that changes the value of the name ``name`` in place
    (``name[i] = v``, ``del name[i]``, ``name += v``, ``name.add_(v)``, or a
    call of one of ``methods``: ``name.append(v)``), or None."""
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name for t in targets):
                return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            method = node.func.attr
            if method in methods or (method.endswith("_") and not method.startswith("_")):
                return node
    return None
