"""Fixes made from trace evidence alone, where no static finding cures what
the trace shows: ``maybe_mark_dynamic`` before the call for a shape that
varies (``mark_unbacked`` for a size 0 or 1 compiled first), and FR005's flag
for a module int attribute."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .._lazy import cst

from . import read as tr
from ..analysis.compile_sites import def_first_lines
from ..analysis.context import FileContext, Settings
from ..pipeline.engine import render
from ..findings import Edit, FileError, Finding, Fix, Safety


# -- fixes made from evidence: maybe_mark_dynamic before the call ----------------------
#
# A shape recompile the trace shows (``tensor 'x' size mismatch at index 0``)
# that no static finding cures: before each call of the compiled function in
# the same file that passes a plain name for ``x``, insert
# ``torch._dynamo.maybe_mark_dynamic(<name>, <dim>)`` for every dim seen to vary
# (never the 0/1 specialisation guard, never a dim the trace did not show
# changing).  A hint: it changes no value, so the fix is safe; ``--fix`` then
# runs the command again and compares graphs and exit code as for any fix.
#
# A dim the graphs show compiled at size 0 or 1 first and symbolic later (the
# 0/1 specialisation, even under ``dynamic=True``: a first batch of 1, then 2;
# :func:`codemods.trace.read.zero_one_sizes`) gets
# ``torch._dynamo.decorators.mark_unbacked(<name>, <dim>)`` instead, on every
# argument the graphs show so (vLLM's fix in PR #38933): ``maybe_mark_dynamic``
# does not lift it (measured on 2.13, tests/trace_scripts/batch_one_first.py:
# 2 -> 2 graphs; mark_unbacked on both inputs: 2 -> 1, same output).  Not
# a pure hint: the size becomes data-dependent, and compiled code that
# branches on it (``if x.shape[0] > 1``) graph-breaks there (measured: 2 -> 3
# graphs) or, under ``fullgraph=True``, fails to compile (a data-dependent
# guard error: the command fails); ``--fix`` restores the file in both cases
# (no fewer graphs; another exit code).  Ops that only compute with the size
# (views, ``arange``, slicing, ``int()``) compile (1 graph, same output).

MARK_CODE = "TRACE"
#: what marks a dim; the trace's mark for a size 0 or 1 compiled first
MAYBE_MARK_DYNAMIC = "maybe_mark_dynamic"
MARK_UNBACKED = "mark_unbacked"


@dataclass
class MarkSite:
    """One inserted mark: before the statement on ``line`` (of the bytes it
    was computed on), ``<torch>._dynamo.maybe_mark_dynamic(arg, dim)`` (or,
    ``func`` MARK_UNBACKED, ``<torch>._dynamo.decorators.mark_unbacked(arg, dim)``)."""

    line: int
    column: int
    function: str
    arg: str
    dim: int
    param: str
    func: str = MAYBE_MARK_DYNAMIC


# the statement and the marks already there: shared with FR007 (codemods/placement.py)
from ..analysis.placement import mark_statement as _mark_statement, marks_before  # noqa: E402
from .match import Guided, GuidedFile, Match, _real, entry_file


def _insert_marks(target, marks: List[cst.SimpleStatementLine]) -> Edit:
    """Insert ``marks`` before the statement; the lines above it (comments
    included) go above the marks."""

    def apply(updated: cst.CSTNode):
        first = marks[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([first, *marks[1:], updated.with_changes(leading_lines=())])

    return Edit(target, apply)


def _unbacked_statement(torch_name: str, arg: str, dim: int) -> cst.SimpleStatementLine:
    """``<torch>._dynamo.decorators.mark_unbacked(arg, dim)`` as a statement
    (2.13 has no ``torch._dynamo.mark_unbacked``)."""
    target = cst.Attribute(
        value=cst.Attribute(value=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("_dynamo")), attr=cst.Name("decorators")),
        attr=cst.Name(MARK_UNBACKED),
    )
    call = cst.Call(func=target, args=[cst.Arg(cst.Name(arg)), cst.Arg(cst.Integer(str(dim)))])
    return cst.SimpleStatementLine(body=[cst.Expr(call)])


def mark_dynamic(data: bytes, function: str, firstlineno: int,
                 dims: Dict[str, Tuple[int, ...]],
                 unbacked: Optional[Dict[str, Tuple[int, ...]]] = None) -> Tuple[Optional[bytes], List[MarkSite]]:
    """``data`` with ``maybe_mark_dynamic`` inserted before the calls of the
    compiled module-level function ``function`` (its code object starts at
    ``firstlineno``: a decorator or the ``def`` line), for the parameters and
    dims in ``dims``, and ``mark_unbacked`` for the graph inputs and dims in
    ``unbacked`` (keyed as the trace names them, ``l_x_``: see
    :func:`codemods.trace.read.graph_input`; such a dim gets no
    ``maybe_mark_dynamic``); (None, []) when nothing can be marked.  The compile
    sites and their calls are the compile-site model's
    (:mod:`codemods.analysis.compile_sites`): the function itself when a decorator
    compiles it, else a module-level ``name = torch.compile(function, ...)``."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast, render
    from ..analysis.placement import block_of
    from ..analysis.source import COMPOUND, statement_target

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, []
    model = model_of(source)
    if model.torch_alias is None:
        return None, []
    tree = source.tree
    sites = [
        site
        for site in model.compile_sites
        if isinstance(site.target_def, ast.FunctionDef)
        and site.target_def.name == function
        and source.parent(site.target_def) is tree
        and firstlineno in def_first_lines(site.target_def)
        and (site.form == "decorator" or (site.form == "wrap" and site.binding and "." not in site.binding and source.parent(site.statement) is tree))
    ]
    if not sites:
        return None, []
    fn = sites[0].target_def
    positional = [a.arg for a in list(fn.args.posonlyargs) + list(fn.args.args)]  # type: ignore[union-attr]
    params = positional + [a.arg for a in fn.args.kwonlyargs]  # type: ignore[union-attr]
    # (param, dim, func): the dims seen to vary in the trace's order, then the
    # other inputs compiled at size 0 or 1 first, in the signature's order
    unbacked_of = {p: set((unbacked or {}).get(tr.graph_input(p), ())) for p in params}
    wanted: List[Tuple[str, int, str]] = []
    for param, param_dims in dims.items():
        for dim in param_dims:
            wanted.append((param, dim, MARK_UNBACKED if dim in unbacked_of.get(param, ()) else MAYBE_MARK_DYNAMIC))
    for param in params:
        for dim in sorted(unbacked_of[param]):
            if (param, dim, MARK_UNBACKED) not in wanted:
                wanted.append((param, dim, MARK_UNBACKED))
    by_stmt: Dict[ast.stmt, List[MarkSite]] = {}
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    for call in sorted({c for site in sites for c in site.calls}, key=lambda c: (c.lineno, c.col_offset)):
        if not isinstance(call.func, ast.Name):
            continue
        stmt = source.statement_of(call)
        if stmt is None or isinstance(stmt, COMPOUND) or block_of(source, stmt) is None:
            continue  # a call in a compound statement's header, or in a one-line suite
        if any(isinstance(a, scopes) for a in _ancestors_until(source, call, stmt)):
            continue  # runs later (lambda) or binds its own names (comprehension)
        bound: Dict[str, ast.AST] = {}
        starred = False
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                starred = True
                break  # *args: positions unknown from here on
            if i < len(positional):
                bound[positional[i]] = arg
        if not starred:
            for kw in call.keywords:
                if kw.arg is None:
                    break
                bound[kw.arg] = kw.value
        line, column = source.start(call)
        have = by_stmt.setdefault(stmt, [])
        for param, dim, func in wanted:
            value = bound.get(param)
            if not isinstance(value, ast.Name):
                continue  # an expression: nothing to mark without binding it
            if not any((m.arg, m.dim) == (value.id, dim) for m in have):
                have.append(MarkSite(line, column + 1, function, value.id, dim, param, func))
    edits: List[Edit] = []
    inserted: List[MarkSite] = []
    for stmt, marks in by_stmt.items():
        existing = marks_before(source, stmt)
        todo = [m for m in marks if (m.func, m.arg, m.dim) not in existing]
        if todo:
            statements = [
                _unbacked_statement(model.torch_alias, m.arg, m.dim) if m.func == MARK_UNBACKED else _mark_statement(model.torch_alias, m.arg, m.dim)
                for m in todo
            ]
            edits.append(_insert_marks(statement_target(source, stmt), statements))
            inserted.extend(todo)
    if not edits:
        return None, []
    finding = Finding(code=MARK_CODE, message="", path="<trace>", line=1, column=1, end_line=1, end_column=1, fix=Fix(edits=tuple(edits), safety=Safety.SAFE))
    ctx = FileContext("<trace>", "<trace>", Settings(), None, source)
    return render(ctx, [finding], data), inserted


def _ancestors_until(source, node: ast.AST, stop: ast.AST):
    for anc in source.ancestors(node):
        if anc is stop:
            return
        yield anc


def _shape_cured_statically(guided_file: "GuidedFile", entry: tr.CodeEntry) -> bool:
    return any(m.entry is entry and m.cause == tr.TENSOR_SHAPE and m.finding.applied
               for m in guided_file.matches)


def apply_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Add the trace's own fixes (``maybe_mark_dynamic``; ``mark_unbacked``
    for a size 0 or 1 compiled first) to the guided files: for every code
    object of a file with observed shape changes that no applied static fix
    cures.  Each becomes a match whose finding (code ``TRACE``, safe) is
    applied."""
    from ..analysis.lines import line_map

    by_real = {_real(g.path): g for g in guided.files}
    for entry in trace.entries:
        dims = tr.varying_dims(entry)
        unbacked = {key: tuple(sorted(d)) for key, d in tr.zero_one_sizes(entry).items()}
        path = entry_file(entry)
        if not (dims or unbacked) or path is None or tr.is_library_file(entry.filename):
            continue
        g = by_real.get(_real(path))
        if g is None or _shape_cured_statically(g, entry):
            continue
        base = g.new if g.new is not None else g.original
        first = line_map(g.original, base)(entry.firstlineno) if base != g.original else entry.firstlineno
        new, sites = mark_dynamic(base, entry.name, first, dims, unbacked)
        if new is None:
            continue
        g.new = new
        for site in sites:
            if site.func == MARK_UNBACKED:
                shown = ", ".join(f"`{s}`" for s in entry.sources(tr.TENSOR_SHAPE))
                evidence = tr.describe_zero_one_evidence(entry, tr.graph_input(site.param), site.dim)
                call = f"{tr.MARK_UNBACKED}({site.arg}, {site.dim})"
                message = (
                    f"`{site.function}` recompiled on tensor shape {shown}: {evidence} (a size 0 or 1 is"
                    f" specialised even under dynamic shapes, and maybe_mark_dynamic does not lift that):"
                    f" mark dim {site.dim} of `{site.arg}` unbacked before the call (`{call}`, from the trace)"
                )
                rule_name = "mark-unbacked-from-trace"
            else:
                evidence = tr.describe_shape_evidence(entry, site.param)
                call = f"torch._dynamo.maybe_mark_dynamic({site.arg}, {site.dim})"
                message = (
                    f"`{site.function}` recompiled on {evidence}: mark dim {site.dim} of"
                    f" `{site.arg}` dynamic before the call (`{call}`, from the trace)"
                )
                rule_name = "mark-dynamic-from-trace"
            fix = Fix(edits=(), safety=Safety.SAFE, title=f"insert {call} before the call")
            finding = Finding(
                code=MARK_CODE,
                message=message,
                path=g.display_path,
                line=site.line,
                column=site.column,
                end_line=site.line,
                end_column=site.column,
                fix=fix,
                rule_name=rule_name,
                applied=True,
            )
            g.matches.append(Match(finding, entry, tr.TENSOR_SHAPE))


# -- fixes made from evidence: the unspec flag for module int attributes ----------------
#
# The trace shows a compiled ``nn.Module`` method recompiling on an int
# attribute of ``self`` (``self.calls == 3``, ``self._modules['kv_cache'].size
# == 0``, ``L['self'].layer_idx == 1`` across blocks compiled one by one) that
# no applied FR005 finding cures: set FR005's flag
# (``torch._dynamo.config.allow_unspec_int_on_nn_module = True``, FR005's own
# rendering) before the compile of that class (FR005's placement), or, when the
# compile-site model sees no compile of it in this file, right after the
# module-level ``import torch`` (it then runs before any compile of the class:
# the class is defined below it).  Safe, as FR005's fix: a dynamo config flag
# that changes no value; ``--fix`` re-runs the command and restores the file
# unless fewer graphs compile with the same exit code.

FLAG_CODE = "TRACE"


def _module_int_sources(entry: tr.CodeEntry) -> List[str]:
    """The ``self.…`` int attributes the trace saw guarded (every one must be
    of ``self``: ``cfg.n`` of a plain object is not cured by the flag)."""
    sources = entry.sources(tr.MODULE_INT_ATTR)
    if not sources or not all(s.startswith("self.") for s in sources):
        return []
    return sources


def _method_class(source, model, firstlineno: int) -> Optional[ast.ClassDef]:
    """The nn.Module class of this file one of whose methods is the traced code
    object (starting at ``firstlineno``: a decorator or the ``def`` line)."""
    for cls in model.classes.values():
        if not isinstance(cls, ast.ClassDef) or not model.is_module_class(cls):
            continue
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and firstlineno in def_first_lines(stmt):
                return cls
    return None


def _torch_import(source) -> Optional[ast.stmt]:
    """The first module-level ``import torch`` (the flag goes right after it)."""
    for stmt in source.tree.body:
        if isinstance(stmt, ast.Import) and any(a.name == "torch" for a in stmt.names):
            return stmt
    return None


def _insert_after(target, new_stmt: cst.BaseStatement) -> Edit:
    def apply(updated: cst.CSTNode):
        return cst.FlattenSentinel([updated, new_stmt])

    return Edit(target, apply)


def unspec_flag(data: bytes, firstlinenos: Sequence[int], settings: Settings) -> Tuple[Optional[bytes], int]:
    """``data`` with FR005's flag set before the compile of the nn.Module
    class(es) whose methods start at ``firstlinenos``; (new bytes, line of the
    statement it precedes), or (None, 0) when the flag is set already or no
    place is known.  One class compiled in this file: before its first
    compile (FR005's placement); several, or none seen compiled: after the
    module-level ``import torch``, which runs before every one of them."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast
    from ..analysis.placement import block_of, config_mentions, insert_before
    from ..analysis.source import statement_target
    from ..analysis.modules import _compile_statement, compiled_module_class
    from ..transforms.unspec_int_attrs import FLAG, UnspecIntAttrs, _insertion_statement

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, 0
    model = model_of(source)
    if model.torch_alias is None or config_mentions(source, [FLAG]):
        return None, 0
    classes = {id(c): c for c in (_method_class(source, model, line) for line in firstlinenos) if c is not None}
    if not classes:
        return None, 0
    places = [
        _insertion_statement(source, _compile_statement(model, site))
        for site in model.compile_sites
        if site.statement is not None and id(compiled_module_class(model, site)) in classes
    ]
    places = sorted((p for p in places if block_of(source, p) is not None), key=lambda p: (p.lineno, p.col_offset))
    ctx = FileContext("<trace>", "<trace>", settings, None, source)
    flag = UnspecIntAttrs._flag_statement(ctx)
    if len(classes) == 1 and places:
        stmt = places[0]
        edit = insert_before(source, stmt, flag)
    else:
        stmt = _torch_import(source)
        if stmt is None:
            return None, 0
        edit = _insert_after(statement_target(source, stmt), flag)
    finding = Finding(code=FLAG_CODE, message="", path="<trace>", line=1, column=1, end_line=1, end_column=1, fix=Fix(edits=(edit,), safety=Safety.SAFE))
    return render(ctx, [finding], data), stmt.lineno


def apply_flag_evidence(trace: tr.Trace, guided: Guided, settings: Settings) -> None:
    """Add FR005's flag where the trace shows nn.Module methods recompiling on
    int attributes of ``self`` and no applied FR005 finding of that file sets
    it: one flag per file, one finding per code object it cures."""
    from ..analysis.lines import line_map
    from ..transforms.unspec_int_attrs import FLAG

    by_real = {_real(g.path): g for g in guided.files}
    todo: Dict[str, List[Tuple[tr.CodeEntry, List[str]]]] = {}
    for entry in trace.entries:
        sources = _module_int_sources(entry)
        path = entry_file(entry)
        if not sources or path is None or tr.is_library_file(entry.filename):
            continue
        real = _real(path)
        if real in by_real:
            todo.setdefault(real, []).append((entry, sources))
    for real, entries in todo.items():
        g = by_real[real]
        if any(m.finding.code == "FR005" and (m.finding.applied or m.finding.fix is None) for m in g.matches):
            continue  # FR005 set the flag, or knows it cannot cure this (a list indexed by the int)
        base = g.new if g.new is not None else g.original
        moved = line_map(g.original, base) if base != g.original else (lambda n: n)
        new, line = unspec_flag(base, [moved(e.firstlineno) for e, _ in entries], settings)
        if new is None:
            continue
        g.new = new
        for entry, sources in entries:
            n = sum(1 for r in entry.reasons if r.cause == tr.MODULE_INT_ATTR)
            what = ", ".join(f"`{s}`" for s in sources)
            fix = Fix(edits=(), safety=Safety.SAFE, title=f"set `torch._dynamo.config.{FLAG} = True` before the compile")
            finding = Finding(
                code=FLAG_CODE,
                message=(
                    f"`{entry.name}` (line {entry.firstlineno}) recompiled {n} time{'s' if n != 1 else ''} on module int attribute {what}"
                    f" (from the trace): set `torch._dynamo.config.{FLAG} = True` before the compile (FR005's fix)"
                ),
                path=g.display_path,
                line=line,
                column=1,
                end_line=line,
                end_column=1,
                fix=fix,
                rule_name="unspec-flag-from-trace",
                applied=True,
            )
            g.matches.append(Match(finding, entry, tr.MODULE_INT_ATTR))
