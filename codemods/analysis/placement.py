"""Where a statement can go: blocks, dominance and the config a module already
sets, on the stdlib ``ast`` (shared by the rules that insert a statement:
FR005, FR006)."""

from __future__ import annotations

import ast
from typing import List, Optional, Sequence, Tuple

from .._lazy import cst

from .compile_sites import CompileModel
from ..findings import Edit
from .source import Source, statement_target

_BLOCK_FIELDS = ("body", "orelse", "finalbody")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)

Block = Tuple[ast.AST, str]


def block_of(source: Source, stmt: ast.stmt) -> Optional[Block]:
    """(owner, field) of the indented block (or module body) whose statements
    include ``stmt`` and where a statement can be inserted before it; None for
    an ``elif`` and for statements of a one-line suite (``for x in y: f(x)``)."""
    parent = source.parent(stmt)
    if parent is None:
        return None
    for name in _BLOCK_FIELDS:
        body = getattr(parent, name, None)
        if isinstance(body, list) and any(s is stmt for s in body):
            if isinstance(stmt, ast.If) and name == "orelse" and source.lines[stmt.lineno - 1][source.char_col(stmt.lineno, stmt.col_offset):].startswith("elif"):
                return None
            first = next(s for s in body if s.lineno == stmt.lineno)
            if source.lines[first.lineno - 1][: source.char_col(first.lineno, first.col_offset)].strip():
                return None  # a one-line suite after a colon
            return parent, name
    return None


def function_of(source: Source, node: ast.AST) -> Optional[ast.AST]:
    """The function (or lambda) whose body runs ``node``; None at module level."""
    return source.enclosing(node, _FUNCS)


def start_of(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _block_holds(source: Source, stmt: ast.stmt, other: ast.AST) -> bool:
    """Does the block of ``stmt`` hold ``other`` (directly or nested)?"""
    block = block_of(source, stmt)
    if block is None:
        return False
    owner, name = block
    statements = getattr(owner, name)
    cur: Optional[ast.AST] = other
    while cur is not None:
        if source.parent(cur) is owner and any(s is cur for s in statements):
            return True
        cur = source.parent(cur)
    return False


def dominates(source: Source, earlier: ast.stmt, later: ast.stmt) -> bool:
    """Does statement ``earlier`` always run before statement ``later``?  True
    when both run in the same function, ``earlier`` comes first, and the block
    of ``earlier`` holds ``later`` (directly or nested)."""
    if function_of(source, earlier) is not function_of(source, later) or start_of(earlier) >= start_of(later):
        return False
    return _block_holds(source, earlier, later)


def always_follows(source: Source, later: ast.stmt, earlier: ast.stmt) -> bool:
    """Does statement ``later`` run whenever ``earlier`` has run?  True
    when both run in the same function, ``later`` comes after, and the block
    of ``later`` holds ``earlier`` (directly or nested): no test or loop
    that ``earlier`` is outside of decides whether ``later`` runs."""
    if function_of(source, earlier) is not function_of(source, later) or start_of(earlier) >= start_of(later):
        return False
    return _block_holds(source, later, earlier)


def insert_before(source: Source, stmt: ast.stmt, new_stmt) -> Edit:
    """An edit inserting ``new_stmt`` (a statement or a list of them) before
    the libcst statement of ``stmt``."""
    from ..cst_edits import insert_before_node

    return insert_before_node(statement_target(source, stmt), new_stmt)


def builtin_shadowed(model: CompileModel, node: ast.AST, name: str) -> bool:
    """Is the builtin ``name`` bound in a scope visible from ``node``?"""
    owner = model.source.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))
    scope = model.scopes.of_node.get(owner) if owner is not None else model.scopes.module  # type: ignore[arg-type]
    while scope is not None:
        if name in scope.bindings:
            return True
        scope = scope.parent
    return False


def _none_valued(value: Optional[ast.AST]) -> bool:
    """``None``, or a conditional expression one of whose branches is."""
    if isinstance(value, ast.Constant):
        return value.value is None
    if isinstance(value, ast.IfExp):
        return _none_valued(value.body) or _none_valued(value.orelse)
    return False


def may_be_none(model: CompileModel, name: ast.Name) -> bool:
    """Can the variable ``name`` loads hold None there: a binding of it in
    its scope is ``None`` (``residual = None`` before a loop of layers that
    return it, ``x = None if ... else ...``) or a parameter defaulting to
    None.  (A mark of None raises: the mark goes under ``is not None``.)"""
    from .params import parameter_defaults

    for binding in model.scopes.bindings_of(name):
        if binding.kind in ("assign", "annassign", "walrus") and _none_valued(binding.value):
            return True
        if binding.kind == "param" and isinstance(binding.scope.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if _none_valued(parameter_defaults(binding.scope.node).get(name.id)):
                return True
    return False


def config_mentions(source: Source, names: Sequence[str]) -> List[ast.AST]:
    """Nodes that set one of the config ``names``: an assignment to ``….name``,
    a keyword ``name=`` (``config.patch(name=…)``, ``torch.compile(name=…)``),
    or the string ``"name"`` passed to a call (``setattr``, ``config.patch("name", …)``)."""
    wanted = set(names)
    found: List[ast.AST] = []

    def target_hits(target: ast.AST) -> bool:
        if isinstance(target, ast.Attribute):
            return target.attr in wanted
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(target_hits(e.value if isinstance(e, ast.Starred) else e) for e in target.elts)
        return False

    if not any(name.encode() in source.data for name in wanted):
        return found
    candidates = source.nodes(ast.Assign) + source.nodes(ast.AugAssign) + source.nodes(ast.AnnAssign) + source.nodes(ast.Call)
    for node in sorted(candidates, key=lambda n: (n.lineno, n.col_offset)):  # type: ignore[attr-defined]
        if isinstance(node, ast.Assign):
            if any(target_hits(t) for t in node.targets):
                found.append(node)
        elif isinstance(node, ast.AugAssign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
            if target_hits(node.target):
                found.append(node)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in wanted or (isinstance(kw.value, ast.Constant) and kw.value.value in wanted):
                    found.append(kw)
            for arg in node.args:
                value = arg.value if isinstance(arg, ast.Starred) else arg
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in wanted:
                    found.append(arg)
    return found


def torch_at_least(settings, version: Tuple[int, int]) -> bool:
    return settings.target_torch is not None and tuple(settings.target_torch) >= version


def torch_expr(model: CompileModel, *attrs: str) -> cst.BaseExpression:
    """``torch.<attrs>`` with the module's name for torch, as CST."""
    expr: cst.BaseExpression = cst.Name(model.torch_name())
    for part in attrs:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def mark_statement(torch_name: str, arg, dim: int, func: str = "maybe_mark_dynamic") -> cst.SimpleStatementLine:
    """``<torch>._dynamo.<func>(arg, dim)`` as a statement (the trace mode's
    fix and FR007's): ``arg`` a name or a libcst expression, ``func`` a name
    under ``torch._dynamo`` (``"decorators.mark_unbacked"``: 2.13 has no
    ``torch._dynamo.mark_unbacked``)."""
    target = cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("_dynamo"))
    for part in func.split("."):
        target = cst.Attribute(value=target, attr=cst.Name(part))
    value = cst.Name(arg) if isinstance(arg, str) else arg
    call = cst.Call(func=target, args=[cst.Arg(value), cst.Arg(cst.Integer(str(dim)))])
    return cst.SimpleStatementLine(body=[cst.Expr(call)])


#: the ``torch._dynamo`` hints a statement before a call can mark a tensor's dim with
MARKS = ("maybe_mark_dynamic", "mark_unbacked", "mark_dynamic")


def mark_arg(node: ast.AST) -> Optional[str]:
    """How a mark's tensor argument is named: ``x``, ``d["key"]`` for an
    entry of a dict passed as ``**d``, ``ctx.a.b`` for a tensor an object
    passed in holds; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return f"{node.value.id}[{quoted(node.slice.value)}]"
    if isinstance(node, ast.Attribute):
        base = mark_arg(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        return f"{base}.{node.attr}" if base is not None else None
    return None


def quoted(key: str) -> str:
    """``key`` as a double-quoted Python string literal."""
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _mark_of(stmt: ast.stmt) -> Optional[Tuple[str, Optional[str], object]]:
    """(func, arg, dim) of a ``…maybe_mark_dynamic(arg, dim)`` /
    ``…mark_unbacked(arg, dim)`` / ``…mark_dynamic(arg, dim)`` statement
    (arg None when it is written otherwise than :func:`mark_arg` names);
    None for any other statement."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in MARKS and len(call.args) == 2):
        return None
    arg, dim = call.args
    return call.func.attr, mark_arg(arg), (dim.value if isinstance(dim, ast.Constant) else None)


def _entry_test(test: ast.AST) -> Optional[str]:
    """``d["key"]`` for the test ``isinstance(d.get("key"), <torch>.Tensor)``
    that guards the marks of an optional ``**`` entry, ``x`` for ``x is not
    None`` that guards those of a variable that may hold None; None
    otherwise."""
    if (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot) and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
    ):
        return test.left.id
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords):
        return None
    got, kind = test.args
    if not (isinstance(kind, ast.Attribute) and kind.attr == "Tensor" and isinstance(got, ast.Call) and isinstance(got.func, ast.Attribute) and got.func.attr == "get"):
        return None
    if not (isinstance(got.func.value, ast.Name) and len(got.args) == 1 and isinstance(got.args[0], ast.Constant) and isinstance(got.args[0].value, str)):
        return None
    return f"{got.func.value.id}[{quoted(got.args[0].value)}]"


def marks_before(source: Source, stmt: ast.stmt) -> set:
    """(func, arg, dim) of the ``…maybe_mark_dynamic(arg, dim)`` /
    ``…mark_unbacked(arg, dim)`` / ``…mark_dynamic(arg, dim)`` statements
    right before ``stmt``, of any mix, and of the marks of an optional
    ``**`` entry under ``if isinstance(d.get("key"), torch.Tensor):`` or of
    a variable under ``if x is not None:`` (a second run finds its own
    marks)."""
    parent = source.parent(stmt)
    body = next((getattr(parent, f) for f in _BLOCK_FIELDS if any(x is stmt for x in getattr(parent, f, None) or [])), [])
    found = set()
    k = next((i for i, x in enumerate(body) if x is stmt), 0) - 1
    while k >= 0:
        prev = body[k]
        entry = _entry_test(prev.test) if isinstance(prev, ast.If) and not prev.orelse else None
        marks = [_mark_of(s) for s in prev.body] if entry is not None else [_mark_of(prev)]
        if not marks or any(m is None for m in marks):
            break
        for func, shown, dim in marks:  # type: ignore[misc]
            if shown is not None and dim is not None and (entry is None or shown == entry):
                found.add((func, shown, dim))
        k -= 1
    return found


def existing_marks(source: Source, stmt: ast.stmt, func: str = "maybe_mark_dynamic") -> set:
    """(arg, dim) of the ``func`` marks among :func:`marks_before`."""
    return {(arg, dim) for kind, arg, dim in marks_before(source, stmt) if kind == func}
