"""Whether an attribute may be given a default in its class's ``__init__``
without any reader seeing a difference: the proof behind the default that
cures a ``hasattr`` guard (vllm-ascend cc9fa548: ``running_in_graph`` first
set by the compiled forward and tested with ``hasattr``), shared by the
trace's cure (:mod:`codemods.trace.init_default`) and rule FR020.

The default changes what a reader sees only where it tests the attribute's
presence, so one is written only where every use of the name in the files
given is proven to read the same with the default as it read for the
missing attribute (:func:`default_for`):

- ``hasattr(X, 'a') and X.a`` is False either way with the default False,
  ``hasattr(X, 'a') and not X.a`` with True; ``not hasattr(X, 'a') or X.a``
  is True with True, ``not hasattr(X, 'a') or not X.a`` with False;
  ``hasattr(X, 'a') and X.a is not None`` and ``not hasattr(X, 'a') or X.a
  is None`` with None;
- ``getattr(X, 'a', C)`` with a constant ``C`` asks for the default ``C``;
- a plain read ``X.a`` raised AttributeError when the attribute was missing
  (no handler in its function may catch that); writes stay as they are;
- any other test of presence (``if not hasattr(self, 'a'): self.a = ...``, a
  lazy set-up), a ``del``, the name as a string elsewhere, ``__slots__``,
  ``__getattr__`` or ``__setattr__`` in the class: no default.

The default is the first statement of ``__init__`` (after its docstring and
after ``super().__init__()`` of an ``nn.Module``), so whatever ``__init__``
and the methods it calls set wins, as before."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from .._lazy import cst

from ..findings import Edit
from .params import parameter_names
from .source import statement_target

#: handlers that would catch the AttributeError of a plain read
_CATCHING = {"AttributeError", "Exception", "BaseException"}
#: class members that decide what reading or setting an attribute does
_HOOKS = {"__slots__", "__getattr__", "__getattribute__", "__setattr__", "__delattr__"}


def presence_call(node: ast.AST, attr: str) -> Optional[ast.Call]:
    """``node`` when it is ``hasattr(X, 'attr')`` / ``getattr(X, 'attr', ...)``
    / ``setattr(X, 'attr', ...)``."""
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr", "setattr")
        and len(node.args) >= 2 and not node.keywords and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr
    ):
        return node
    return None


def _read_of(node: ast.AST, obj: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and ast.dump(node.value) == ast.dump(obj)


def _hasattr_value(source, call: ast.Call, attr: str) -> Tuple[Optional[bool], List[ast.AST]]:
    """The default that gives ``hasattr(X, 'attr')``'s expression the value
    it had for the missing attribute (True, False or None), and the reads of
    ``X.attr`` that expression holds; no reads when no default does."""
    obj = call.args[0]
    parent = source.parent(call)
    negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
    test = parent if negated else call
    boolop = source.parent(test)
    if not (isinstance(boolop, ast.BoolOp) and len(boolop.values) == 2 and boolop.values[0] is test):
        return None, []
    # `hasattr and R` is False when missing, `not hasattr or R` True: R must
    # give the same with the default (R is `X.a` or `not X.a`)
    wanted = negated
    if not isinstance(boolop.op, ast.Or if negated else ast.And):
        return None, []
    rest = boolop.values[1]
    if _read_of(rest, obj, attr):
        return wanted, [rest]
    if isinstance(rest, ast.UnaryOp) and isinstance(rest.op, ast.Not) and _read_of(rest.operand, obj, attr):
        return (not wanted), [rest.operand]
    # `hasattr(X, 'a') and X.a is not None`, `not hasattr(X, 'a') or X.a is None`: None
    if (
        isinstance(rest, ast.Compare) and len(rest.ops) == 1 and _read_of(rest.left, obj, attr)
        and isinstance(rest.comparators[0], ast.Constant) and rest.comparators[0].value is None
        and isinstance(rest.ops[0], ast.Is if negated else ast.IsNot)
    ):
        return None, [rest.left]  # the default None (told apart from "no default" by the reads)
    return None, []


def _catches_attribute_error(source, node: ast.AST) -> bool:
    """Is ``node`` in the body of a ``try`` (of its function) whose handlers
    catch AttributeError?"""
    child = node
    for up in source.ancestors(node):
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(up, ast.Try) and any(child is s for s in up.body):
            for handler in up.handlers:
                names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                if handler.type is None or any(isinstance(n, (ast.Name, ast.Attribute)) and ast.unparse(n).split(".")[-1] in _CATCHING for n in names):
                    return True
        child = up
    return False


def default_for(sources: Sequence, attr: str) -> Tuple[Optional[object], str]:
    """The one default value every use of ``.attr`` in ``sources`` (parsed
    files) reads the same with as it read for the missing attribute, or
    (None, why not).  The value is a Python constant (True, False, None, a
    number or a string)."""
    wanted: List[Tuple[object, str]] = []
    for source in sources:
        covered = set()
        for node in source.nodes(ast.Call):
            call = presence_call(node, attr)
            if call is None:
                continue
            where = f"{source.display_path}:{call.lineno}"
            covered.add(id(call.args[1]))
            name = call.func.id
            if name == "hasattr":
                value, reads = _hasattr_value(source, call, attr)
                if not reads:
                    return None, f"`{ast.unparse(source.statement_of(call) or call).splitlines()[0].strip()}` ({where}) decides on the attribute being missing"
                covered.update(id(r) for r in reads)
                wanted.append((value, where))
            elif name == "getattr" and len(call.args) == 3:
                if not isinstance(call.args[2], ast.Constant) or isinstance(call.args[2].value, (bytes, complex, type(...))):
                    return None, f"`{ast.unparse(call)}` ({where}) falls back to a value that is not a constant"
                wanted.append((call.args[2].value, where))
            elif name == "getattr" and _catches_attribute_error(source, call):
                return None, f"`{ast.unparse(call)}` ({where}) catches AttributeError"
        for node in source.nodes(ast.Constant):
            if node.value == attr and isinstance(node.value, str) and id(node) not in covered:
                return None, f"the name `{attr}` is used as a string at {source.display_path}:{node.lineno}"
        for node in source.nodes(ast.Attribute):
            if node.attr != attr or id(node) in covered:
                continue
            if isinstance(node.ctx, ast.Del):
                return None, f"`{ast.unparse(node)}` is deleted at {source.display_path}:{node.lineno}"
            if isinstance(node.ctx, ast.Load) or isinstance(source.parent(node), ast.AugAssign):
                # a plain read raised when it was missing: unless it is caught
                if _catches_attribute_error(source, node):
                    return None, f"a read of `{ast.unparse(node)}` ({source.display_path}:{node.lineno}) catches AttributeError"
    values = {(type(v), v) for v, _ in wanted}
    if not wanted:
        return None, "no reader tests its presence"
    if len(values) != 1:
        return None, "its readers need different defaults (" + "; ".join(f"{v!r} at {w}" for v, w in wanted) + ")"
    return wanted[0][0], ""


def first_statement(init: ast.FunctionDef, module: bool) -> int:
    """Where a first statement goes in ``__init__``'s body (a default): after a docstring, and
    after ``super().__init__()`` of an ``nn.Module`` (``module``: it sets no
    attribute of the class's own)."""
    body = init.body
    at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str) else 0
    if module and at < len(body) and isinstance(body[at], ast.Expr) and isinstance(body[at].value, ast.Call):
        func = body[at].value.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__":
            at += 1
    return at


def _constant(value: object) -> cst.BaseExpression:
    """The node of a constant a reader asked for (True, False, None, a number, a string)."""
    if value is None or isinstance(value, bool):
        return cst.Name(repr(value))
    if isinstance(value, int):
        return cst.Integer(repr(value)) if value >= 0 else cst.UnaryOperation(operator=cst.Minus(), expression=cst.Integer(repr(-value)))
    if isinstance(value, float):
        return cst.Float(repr(value)) if value >= 0 else cst.UnaryOperation(operator=cst.Minus(), expression=cst.Float(repr(-value)))
    return cst.SimpleString(repr(value))


def _defined_names(stmt: ast.stmt) -> List[str]:
    """The names a class-body statement defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


@dataclass
class ClassDefault:
    """What :func:`class_default` made of an attribute of a class: the line
    of the ``__init__`` (or of the class when it has none; 0: nothing), the
    default's source and the edit that writes it, or why not."""

    line: int = 0
    value: str = ""
    edit: Optional[Edit] = None
    why: str = ""


def class_default(source, model, cls: ast.ClassDef, attr: str, others: Iterable = ()) -> ClassDefault:
    """The edit that writes ``self.<attr> = <default>`` first in ``cls``'s
    ``__init__``, where every use of ``attr`` in ``source`` and ``others``
    (the run's other files that mention it, parsed) reads the default as it
    read the missing attribute (:func:`default_for`), or why not.  ``model``:
    the file's compile model (is ``cls`` an ``nn.Module``?)."""
    init = next((s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"), None)
    if not isinstance(init, ast.FunctionDef) or init.decorator_list or not parameter_names(init):
        return ClassDefault(line=cls.lineno, why=f"`{cls.name}` has no plain `__init__` of its own")
    out = ClassDefault(line=init.lineno)
    hooks = [n for s in cls.body for n in _defined_names(s) if n in _HOOKS]
    if hooks:
        out.why = f"`{cls.name}` defines `{hooks[0]}`"
        return out
    if any(attr in _defined_names(s) for s in cls.body):
        out.why = f"`{cls.name}` defines `{attr}` in its body"
        return out
    me = parameter_names(init)[0]
    if any(isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and n.value.id == me for n in ast.walk(init)):
        out.why = f"`{cls.name}.__init__` sets `{attr}` already"
        return out
    value, why = default_for([source, *others], attr)
    if why:
        out.why = why
        return out
    at = first_statement(init, model.is_module_class(cls))
    out.value = repr(value)

    def apply(node: cst.CSTNode):
        assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
        target = cst.AssignTarget(cst.Attribute(value=cst.Name(me), attr=cst.Name(attr)))
        statement = cst.SimpleStatementLine(body=[cst.Assign(targets=[target], value=_constant(value))])
        body = list(node.body.body)
        return node.with_changes(body=node.body.with_changes(body=body[:at] + [statement] + body[at:]))

    out.edit = Edit(statement_target(source, init), apply)
    return out

