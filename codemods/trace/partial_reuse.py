"""A fix made from trace evidence: a ``functools.partial`` installed anew
between compiled calls is made once per argument and reused.

OneTrainer before 3fced711 (PR #1563): a fused-qkv LoRA group hooks each
q/k/v layer with ``leaf.forward = functools.partial(self._leaf_forward,
leaf_index)`` in ``hook_to_module``, which every training step with a prior
prediction runs again (adapters off, then on).  torch guards the
compiled block on that partial's identity; when the old one is freed the
cache line is thrown away (``Cache line invalidated because
…['to_q'].forward got deallocated``) and the block compiles again, at every
re-hook.  The project's fix installs bound methods of fixed functions.  The
fix here keeps one partial per argument on the object and reuses it::

    self._leaf_forward_partials = {}  # first in __init__
    ...
    leaf.forward = self._leaf_forward_partials.setdefault(
        leaf_index, functools.partial(self._leaf_forward, leaf_index)
    )

Only where the partial binds a method of the class to the object itself
(``self.<method>``, a ``def`` of the class that nothing rebinds) and its
arguments are int or str literals or the index of an enclosing ``for``
(``enumerate``'s first name, a ``range`` variable), in a method other than
``__init__`` of a class with a plain ``__init__``; otherwise the run says why
and changes nothing.  Safe: the reused partial calls the same method of the
same object with equal arguments; only its identity stays the same, which
is what torch guards.  ``run --fix`` keeps it only if the rerun compiles
fewer graphs with the same output and exit code
(``benchmarks/recall/onetrainer_fused_leaf_partial_forward``: 7 -> 3, the
project's count)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .._lazy import cst
from . import read as tr
from .registry import PARTIAL_REUSE
from ..analysis.compile_sites import model_of
from ..analysis.presence import first_statement
from ..analysis.source import statement_target
from ..findings import Edit, FileError
from ..cst_edits import LINE_LENGTH
from ..pipeline.engine import parse_ast
from .cures import _applied_finding, _render_edits, _unfixed
from .match import Guided, Match

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class RemadePartial:
    """One ``<x>.<attr> = functools.partial(self.<method>, ...)`` the fix
    rewrites, or why not (``why``)."""

    line: int
    cls: str = ""
    #: the method that installs it
    fn: str = ""
    method: str = ""
    memo: str = ""
    #: the class's ``__init__``, where the memo dict is set first
    init: Optional[ast.FunctionDef] = None
    edits: Tuple[Edit, ...] = ()
    why: str = ""


def _partial_call(model, value: ast.AST) -> Optional[ast.Call]:
    if isinstance(value, ast.Call) and any(q == "functools.partial" for q in model.qualified_names(value.func)):
        return value
    return None


def _loop_index(source, node: ast.Name) -> bool:
    """Is ``node`` the index an enclosing ``for`` binds: ``for i, x in
    enumerate(...)``'s ``i``, ``for i in range(...)``'s ``i``?"""
    for loop in source.loops_around(node):
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call) or not isinstance(loop.iter.func, ast.Name):
            continue
        target, func = loop.target, loop.iter.func.id
        if func == "enumerate" and isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
            if target.elts[0].id == node.id:
                return True
        if func == "range" and isinstance(target, ast.Name) and target.id == node.id:
            return True
    return False


def _plan_one(source, model, stmt: ast.Assign, call: ast.Call) -> RemadePartial:
    out = RemadePartial(line=stmt.lineno)
    fn = source.enclosing(stmt, _DEFS)
    cls = source.parent(fn) if fn is not None else None
    if not isinstance(cls, ast.ClassDef) or not isinstance(fn, ast.FunctionDef) or not fn.args.args:
        out.why = "it is not made in a method of a class"
        return out
    me = fn.args.args[0].arg
    out.cls, out.fn = cls.name, fn.name
    if fn.name == "__init__":
        out.why = "it is made in `__init__`"
        return out
    func = call.args[0] if call.args else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me):
        out.why = f"the partial does not bind a method of `{me}`"
        return out
    method = func.attr
    out.method = method
    if not any(isinstance(s, _DEFS) and s.name == method for s in cls.body):
        out.why = f"`{method}` is not a method `{cls.name}` defines"
        return out
    if any(isinstance(n, ast.Attribute) and n.attr == method and isinstance(n.ctx, (ast.Store, ast.Del)) for n in source.nodes(ast.Attribute)):
        out.why = f"something assigns `.{method}`: the method the partial binds may change"
        return out
    args = call.args[1:]
    if call.keywords or not args:
        out.why = "the partial takes keywords or no argument"
        return out
    for a in args:
        if not ((isinstance(a, ast.Constant) and type(a.value) in (int, str)) or (isinstance(a, ast.Name) and _loop_index(source, a))):
            out.why = f"`{ast.unparse(a)}` is not an int or str literal or a loop index (equal at every re-make)"
            return out
    init = next((s for s in cls.body if isinstance(s, _DEFS) and s.name == "__init__"), None)
    if not isinstance(init, ast.FunctionDef) or init.decorator_list or not init.args.args:
        out.why = f"`{cls.name}` has no plain `__init__` of its own"
        return out
    memo = f"_{method.lstrip('_')}_partials"
    if any(isinstance(n, ast.Attribute) and n.attr == memo for n in source.nodes(ast.Attribute)):
        out.why = f"`{memo}` is taken"
        return out
    out.memo = memo
    out.init = init
    out.edits = (Edit(source.target(call, "Call"), functools.partial(_reuse, me, memo, call.col_offset)),)
    return out


def _reuse(me: str, memo: str, column: int, node: "cst.CSTNode"):
    """``functools.partial(f, a, b)`` (at ``column``) ->
    ``self.<memo>.setdefault((a, b), functools.partial(f, a, b))`` (the key:
    the partial's arguments after the function, one alone), its arguments on
    a line of their own when the call would pass black's line length."""
    assert isinstance(node, cst.Call)
    values = [a.value for a in node.args[1:]]
    key = values[0] if len(values) == 1 else cst.Tuple([cst.Element(v) for v in values])
    setdefault = cst.Attribute(value=cst.Attribute(value=cst.Name(me), attr=cst.Name(memo)), attr=cst.Name("setdefault"))
    call = cst.Call(func=setdefault, args=[cst.Arg(key), cst.Arg(node)])
    code = cst.Module(body=[]).code_for_node(call)
    if "\n" in code or column + len(code) <= LINE_LENGTH:
        return call
    return call.with_changes(
        whitespace_before_args=cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace("    ")),
        args=[cst.Arg(key), cst.Arg(node, whitespace_after_arg=cst.ParenthesizedWhitespace(indent=True))],
    )


def plan(data: bytes, attrs: Sequence[str]) -> Tuple[Optional[bytes], List[Tuple[str, RemadePartial]]]:
    """The file's bytes with every ``<x>.<attr> = functools.partial(...)``
    (``attr`` of ``attrs``) made once per argument and reused, or None when
    none is; and each such assignment, (attribute, plan: its edit or why
    not)."""
    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, []
    model = model_of(source)
    found: List[Tuple[str, RemadePartial]] = []
    for node in source.nodes(ast.Assign):
        target = node.targets[0] if len(node.targets) == 1 else None  # type: ignore[attr-defined]
        if not (isinstance(target, ast.Attribute) and target.attr in attrs):
            continue
        call = _partial_call(model, node.value)  # type: ignore[attr-defined]
        if call is not None:
            found.append((target.attr, _plan_one(source, model, node, call)))  # type: ignore[arg-type]
    made = [p for _a, p in found if p.edits]
    if not made:
        return None, found
    edits: List[Edit] = [e for p in made for e in p.edits]
    # each class's memo dicts, set first in its __init__ (one edit per __init__)
    inits = {}
    for p in made:
        entry = inits.setdefault(id(p.init), (p.init, []))
        if p.memo not in entry[1]:
            entry[1].append(p.memo)
    for init, memos in inits.values():
        cls = source.parent(init)
        edits.append(Edit(statement_target(source, init), functools.partial(_add_memos, init.args.args[0].arg, memos, first_statement(init, model.is_module_class(cls)))))
    return _render_edits(source, data, edits), found


def _add_memos(me: str, memos: Sequence[str], at: int, node: "cst.CSTNode"):
    """``self.<memo> = {}`` for each memo, first in ``__init__``'s body (at ``at``)."""
    assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
    statements = [
        cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Attribute(value=cst.Name(me), attr=cst.Name(m)))], value=cst.Dict([]))])
        for m in memos
    ]
    body = list(node.body.body)
    return node.with_changes(body=node.body.with_changes(body=body[:at] + statements + body[at:]))


def _attributes(entry: tr.CodeEntry) -> List[str]:
    """The attribute names of the callables the trace saw freed and made again."""
    return list(dict.fromkeys(src.rsplit(".", 1)[-1] for src in tr.remade_sources(entry) if "." in src))


def remade_partial_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` that assign a ``functools.partial`` to an
    attribute of the name the trace saw freed between calls."""
    names = {a for e in trace.entries for a in _attributes(e)}
    out: List[str] = []
    for path in paths if names else ():
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if b"partial" in data and any(f".{n} = ".encode() in data for n in names):
            out.append(path)
    return out


def apply_partial_reuse_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Make once and reuse every ``functools.partial`` a guided file assigns
    to an attribute the trace saw freed and made again between calls (one
    finding each, code ``TRACE``, safe, applied); where the form is not the
    one the fix proves, a finding without a fix says why."""
    attrs: dict = {}  # attribute -> the first code object that recompiled on it
    for entry in trace.entries:
        if not tr.is_library_file(entry.filename):
            for attr in _attributes(entry):
                attrs.setdefault(attr, entry)
    if not attrs:
        return
    for g in guided.files:
        base = g.new if g.new is not None else g.original
        new, found = plan(base, list(attrs))
        for attr, p in found:
            entry = attrs[attr]
            count = entry.count(tr.INVALIDATED)
            seen = f"from the trace: {tr.recompiles(count)}, the compiled code thrown away when the old one was freed"
            if not p.edits:
                message = f"a `functools.partial` is installed as `.{attr}` anew at each call ({seen}); no fix: {p.why}"
                _unfixed(g, entry, tr.INVALIDATED, p.line, 1, message)
                continue
            message = (
                f"`functools.partial(self.{p.method}, ...)` is installed as `.{attr}` anew at each call of `{p.cls}.{p.fn}` ({seen}): "
                f"one per argument, kept in `self.{p.memo}` (set first in `__init__`) and reused, so the compiled code sees the same object"
            )
            finding = _applied_finding(g.display_path, p.line, 1, message, f"reuse the partial installed as `.{attr}`", PARTIAL_REUSE.name)
            g.matches.append(Match(finding, entry, tr.INVALIDATED))
        if new is not None:
            g.new = new
