"""A fix made from trace evidence: an attribute the compiled code reads
through ``hasattr`` while it is missing, and then creates, gets a default at
the start of its class's ``__init__``.

vllm-ascend before cc9fa548 (PR #2532): ``AscendMLATorchairImpl`` (a plain
object held by the attention layers) gets ``self.running_in_graph`` only in
its ``forward``, run by the compiled decode step, and a method of the same
step tests ``if hasattr(self, "running_in_graph") and not
self.running_in_graph``.  The first graph is guarded on ``not hasattr(impl,
'running_in_graph')``; the call itself makes that false, so the next call
compiles again.  The project's fix is one line in ``__init__``:
``self.running_in_graph = False``.

The default changes what a reader sees only where it tests the attribute's
presence, so this module writes one only where every reader in the run's
files is proven to give the same value with the default as it gave for the
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
and the methods it calls set wins, as before.  ``run --fix`` keeps it only if
the rerun compiles fewer graphs with the same output and exit code
(``tests/trace_scripts/attr_set_in_forward.py``: 2 -> 1;
``benchmarks/recall/vllm_ascend_running_in_graph_hasattr``: 2 -> 1, the
project's count)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from .._lazy import cst

from . import read as tr
from .registry import INIT_DEFAULT
from ..analysis.params import is_static, parameter_names
from ..analysis.source import statement_target
from ..findings import Edit, FileError, Finding
from ..pipeline.engine import parse_ast
from .cures import MARK_CODE, _applied_finding, _render_edits
from .match import Guided, Match, _real

#: handlers that would catch the AttributeError of a plain read
_CATCHING = {"AttributeError", "Exception", "BaseException"}
#: class members that decide what reading or setting an attribute does
_HOOKS = {"__slots__", "__getattr__", "__getattribute__", "__setattr__", "__delattr__"}


@dataclass
class Default:
    """What :func:`plan` made of a presence guard: the class and its
    ``__init__`` line (0: none found), the default's source, the new bytes,
    or why not."""

    cls: str = ""
    line: int = 0
    value: str = ""
    new: Optional[bytes] = None
    why: str = ""


def _presence_call(node: ast.AST, attr: str) -> Optional[ast.Call]:
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
            call = _presence_call(node, attr)
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


def _guard_call(source, line: int, attr: str) -> Optional[Tuple[ast.Call, ast.FunctionDef, ast.ClassDef]]:
    """The ``hasattr(self, 'attr')`` at ``line`` in a method of a class, the
    method and the class."""
    for node in source.nodes(ast.Call):
        call = _presence_call(node, attr)
        if call is None or call.func.id != "hasattr" or not (call.lineno <= line <= call.end_lineno):
            continue
        fn = source.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        cls = source.parent(fn) if fn is not None else None
        if not isinstance(fn, ast.FunctionDef) or not isinstance(cls, ast.ClassDef) or is_static(fn):
            continue
        names = parameter_names(fn)
        if names and isinstance(call.args[0], ast.Name) and call.args[0].id == names[0]:
            return call, fn, cls
    return None


def _first_statement(init: ast.FunctionDef, cls: ast.ClassDef) -> int:
    """Where the default goes in ``__init__``'s body: after a docstring, and
    after ``super().__init__()`` of an ``nn.Module`` (which sets no attribute
    of the class's own)."""
    body = init.body
    at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str) else 0
    module = any(ast.unparse(b) in ("torch.nn.Module", "nn.Module", "Module") for b in cls.bases)
    if module and at < len(body) and isinstance(body[at], ast.Expr) and isinstance(body[at].value, ast.Call):
        func = body[at].value.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__":
            at += 1
    return at


def plan(data: bytes, line: int, attr: str, others: Iterable = ()) -> Default:
    """``data`` with ``self.<attr> = <default>`` first in the ``__init__`` of
    the class whose method tests ``hasattr(self, '<attr>')`` at ``line``, or
    why not; ``others``: the run's other files that mention ``attr`` (parsed),
    whose readers must agree too."""
    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return Default(why="the file does not parse")
    found = _guard_call(source, line, attr)
    if found is None:
        return Default(why=f"no `hasattr(self, '{attr}')` in a method at line {line}")
    call, _fn, cls = found
    init = next((s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"), None)
    if not isinstance(init, ast.FunctionDef) or init.decorator_list or not parameter_names(init):
        return Default(cls=cls.name, line=cls.lineno, why=f"`{cls.name}` has no plain `__init__` of its own")
    out = Default(cls=cls.name, line=init.lineno)
    hooks = [n for s in cls.body for n in _defined_names(s) if n in _HOOKS]
    if hooks:
        out.why = f"`{cls.name}` defines `{hooks[0]}`"
        return out
    if any(attr in _defined_names(s) for s in cls.body):
        out.why = f"`{cls.name}` defines `{attr}` in its body"
        return out
    value, why = default_for([source, *others], attr)
    if why:
        out.why = why
        return out
    me = parameter_names(init)[0]
    at = _first_statement(init, cls)
    out.value = repr(value)

    def apply(node: cst.CSTNode):
        assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
        target = cst.AssignTarget(cst.Attribute(value=cst.Name(me), attr=cst.Name(attr)))
        statement = cst.SimpleStatementLine(body=[cst.Assign(targets=[target], value=_constant(value))])
        body = list(node.body.body)
        return node.with_changes(body=node.body.with_changes(body=body[:at] + [statement] + body[at:]))

    out.new = _render_edits(source, data, [Edit(statement_target(source, init), apply)])
    return out


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


def _presence_reasons(entry: tr.CodeEntry) -> List[Tuple[str, int, str]]:
    """(file, line, attribute) of each ``hasattr`` guard of ``entry`` the
    trace saw fail on program state."""
    out: List[Tuple[str, int, str]] = []
    for r in entry.reasons:
        if r.cause != tr.KEYS or r.stale or not r.file or not r.line:
            continue
        attr = tr.presence_attribute(r.text)
        if attr and (r.file, r.line, attr) not in out:
            out.append((r.file, r.line, attr))
    return out


def presence_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` whose methods test an attribute ``hasattr``
    found missing in a recompiling code object: the class to give the
    default may be in another file than the compiled code (an attention
    impl held by the compiled model's layers)."""
    by_real = {_real(p): p for p in paths}
    out: List[str] = []
    for entry in trace.entries:
        for file, _line, _attr in _presence_reasons(entry):
            path = by_real.get(_real(file))
            if path is not None and path not in out:
                out.append(path)
    return out


def _others(guided: Guided, path: str, attr: str) -> List:
    """The run's other files that mention ``attr``, parsed (a file that does
    not parse is skipped: its readers cannot be checked, so it refuses)."""
    project = guided.project
    paths = sorted(getattr(project, "modules", {}) or {}) if project is not None else []
    paths += [g.path for g in guided.files if g.path not in paths]
    out = []
    needle = attr.encode()
    for other in paths:
        if _real(other) == _real(path):
            continue
        g = next((g for g in guided.files if _real(g.path) == _real(other)), None)
        try:
            data = (g.new or g.original) if g is not None else open(other, "rb").read()
        except OSError:
            continue
        if needle in data:
            out.append(parse_ast(other, data))
    return out


def apply_presence_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Give every attribute a guided file's compiled code read through
    ``hasattr`` while it was missing (``not hasattr(self.impl, 'a')`` failed)
    a default in its class's ``__init__`` where every reader is proven to
    read the same (one finding, code ``TRACE``, safe, applied); where not, a
    finding without a fix says why."""
    from ..analysis.lines import line_map

    by_real = {_real(g.path): g for g in guided.files}
    done = set()
    for entry in trace.entries:
        if tr.is_library_file(entry.filename):
            continue
        for file, line, attr in _presence_reasons(entry):
            g = by_real.get(_real(file))
            if g is None or (g.path, line, attr) in done:
                continue
            done.add((g.path, line, attr))
            base = g.new if g.new is not None else g.original
            moved = line_map(g.original, base)(line) if base != g.original else line
            try:
                others = _others(guided, g.path, attr)
            except FileError as exc:
                why = f"{exc.path} does not parse"
                d = Default(why=why)
            else:
                d = plan(base, moved, attr, others)
            count = entry.count(tr.KEYS)
            if d.new is None:
                if d.line:
                    message = (
                        f"`{d.cls}.{attr}` is missing at the first compiled call and set by it (from the trace: {count} "
                        f"recompile{'s' if count != 1 else ''} on `hasattr`); no default in `__init__`: {d.why}"
                    )
                    g.matches.append(Match(Finding(MARK_CODE, message, g.display_path, d.line, 1, d.line, 1), entry, tr.KEYS))
                continue
            g.new = d.new
            message = (
                f"`{d.cls}.{attr}` is missing at the first compiled call and set by it (from the trace: {count} "
                f"recompile{'s' if count != 1 else ''} on `hasattr`): `self.{attr} = {d.value}` first in `__init__`, "
                "which every reader reads as it read the missing attribute"
            )
            finding = _applied_finding(g.display_path, d.line, 1, message, f"default `{attr}` in `{d.cls}.__init__`", INIT_DEFAULT.name)
            g.matches.append(Match(finding, entry, tr.KEYS))


def presence_cure(entry: tr.CodeEntry, report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object that
    recompiled on an attribute ``hasattr`` found missing, read from the files
    as they are now (the default ``run --fix`` would write, with the readers
    of the files under the current folder checked), or ``report`` (the
    table's label) with why there is none."""
    import os

    from ..pipeline.selection import FileSelection

    found = [(f, line, a) for f, line, a in _presence_reasons(entry) if not tr.is_library_file(f)]
    if not found:
        return report
    file, line, attr = found[0]
    try:
        with open(file, "rb") as fh:
            data = fh.read()
        others = []
        needle = attr.encode()
        for path in FileSelection().discover([os.getcwd()]).files:
            if _real(path) != _real(file):
                with open(path, "rb") as fh:
                    other = fh.read()
                if needle in other:
                    others.append(parse_ast(path, other))
    except (OSError, FileError):
        return report
    d = plan(data, line, attr, others)
    if d.new is not None:
        return f"a default `self.{attr} = {d.value}` first in `{d.cls}.__init__`, read by every reader as the missing attribute (`run --fix` writes it)"
    return f"{report}; no default in `__init__`: {d.why}"
