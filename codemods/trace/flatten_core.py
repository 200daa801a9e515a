"""A fix made from trace evidence: a compiled elementwise function that
recompiled on its input's rank gets an eager wrapper that hands the compiled
core ``x.flatten()`` and gives the result the input's shape again.

Dynamo guards a tensor input's number of dims, and dynamic shapes never make
it symbolic: a compiled function called with ranks 1 to 5 compiles five graphs
(compressed-tensors before 55777c4b: ``FP4_E2M1_DATA.cast_to_fp4``, reached
with weights of rank 3 and activations of rank 4, hit the recompile limit,
issue #734).  The project's fix keeps the body compiled under a new name and
makes the public function an eager wrapper::

    @staticmethod
    def cast_to_fp4(x):
        return FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)

    @staticmethod
    @torch.compile
    def _cast_to_fp4(x):
        ...  # the body as it was

This module makes that rewrite where the trace shows a recompile on the rank
of the function's parameter (``tensor 'x' rank mismatch``), the function is
compiled by its decorator (at module level, or a ``@staticmethod`` or method
of a module-level class) or bound at module level by ``name =
torch.compile(fn, ...)`` (:func:`_plan_wrap`), takes that one tensor (and
``self``), has no other decorator than ``@staticmethod``, and its body is proven elementwise
(:mod:`codemods.analysis.elementwise`): every element of the result is
computed from the element of the input at the same place, so the flattened
computation gives the same values in the same order.  Safe: the same values
(bit-identical for a contiguous input, of which ``flatten()`` is a view; a
non-contiguous input is copied once, and ops with vectorised kernels may then
differ in the last bit, as eager does between layouts); the result is
contiguous (it followed the input's layout).  ``run --fix`` keeps it
only if the rerun compiles fewer graphs with the same output and exit code
(measured on 2.13: ``benchmarks/recall/compressed_tensors_fp4_rank`` 6 -> 2,
the project's own count; a flattened *view* of a tensor of another rank is
guarded on its base, so a caller passing views may still recompile: the rerun
then restores the file)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import List, Optional

from .._lazy import cst

from . import read as tr
from .registry import FLATTEN_CORE
from ..analysis.compile_sites import code_def, model_of
from ..analysis.elementwise import why_not_elementwise
from ..analysis.params import is_static, parameter_names
from ..analysis.source import statement_target
from ..findings import Edit, FileError
from ..cst_edits import is_docstring
from ..pipeline.engine import parse_ast
from .cures import _applied_finding, _current, _render_edits, _unfixed, argument_entries
from .match import Guided, Match


def _taken(source, name: str) -> bool:
    """Is ``name`` used anywhere in the file (a def, a name, an attribute)?"""
    if any(d.name == name for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) for d in source.nodes(kind)):
        return True
    return any(n.id == name for n in source.nodes(ast.Name)) or any(a.attr == name for a in source.nodes(ast.Attribute))


def _core_name(source, name: str) -> str:
    core = f"_{name}" if not name.startswith("_") else f"{name}_core"
    n = 1
    while _taken(source, core):
        n += 1
        core = f"_{name}_{n}"
    return core


@dataclass
class Split:
    """What :func:`plan` made of a traced function: the place of its ``def``
    (line 0: not found), the new bytes and the core's name, or why not."""

    line: int = 0
    column: int = 0
    new: Optional[bytes] = None
    core: str = ""
    why: str = ""


def plan(data: bytes, function: str, firstlineno: int, param: str) -> Split:
    """``data`` with the compiled ``function`` (first line ``firstlineno``)
    split into an eager wrapper that flattens ``param`` and a compiled core,
    or why the function is not one this fix may split."""
    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return Split(why="the file does not parse")
    fn = code_def(source, function, firstlineno)
    if not isinstance(fn, ast.FunctionDef):
        return Split(why="it is not a plain function of the file")
    at = Split(line=fn.lineno, column=fn.col_offset + 1)
    model = model_of(source)
    sites = [s for s in model.compile_sites if s.form == "decorator" and s.target_def is fn]
    if not sites:
        return _plan_wrap(source, model, data, fn, param, at)
    if len(sites) != 1:
        return replace(at, why="it is not compiled by its decorator")
    compile_index = next(i for i, d in enumerate(fn.decorator_list) if d is sites[0].node)
    others = [d for i, d in enumerate(fn.decorator_list) if i != compile_index and not (isinstance(d, ast.Name) and d.id == "staticmethod")]
    if others:
        return replace(at, why=f"it has another decorator (`@{ast.unparse(others[0])}`)")
    owner = source.parent(fn)
    static = is_static(fn)
    names = parameter_names(fn)
    if owner is source.tree:
        receiver: Optional[str] = None
        expected = [param]
    elif isinstance(owner, ast.ClassDef) and source.parent(owner) is source.tree:
        receiver = owner.name if static else (names[0] if names else None)
        expected = [param] if static else [names[0] if names else "self", param]
    else:
        return replace(at, why="it is not a module-level function or a method of a module-level class")
    args = fn.args
    if names != expected or args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        return replace(at, why=f"it takes more than the tensor `{param}`")
    why = why_not_elementwise(fn, param, model)
    if why is not None:
        return replace(at, why=f"it is not proven elementwise in `{param}`: {why}")
    core = _core_name(source, function)
    gap = [cst.EmptyLine(indent=False)] * (1 if owner is not source.tree else 2)

    def apply(node: cst.CSTNode):
        assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
        kept = [d for i, d in enumerate(node.decorators) if i != compile_index]
        statements: List[cst.BaseStatement] = []
        first = node.body.body[0]
        if is_docstring(first):
            statements.append(first.with_changes(leading_lines=()))  # the docstring stays with the public name
        statements.append(_flattened_call(receiver, core, param))
        wrapper = node.with_changes(decorators=kept, body=node.body.with_changes(body=statements))
        renamed = node.with_changes(name=cst.Name(core), leading_lines=gap)
        return cst.FlattenSentinel([wrapper, renamed])

    new = _render_edits(source, data, [Edit(statement_target(source, fn), apply)])
    return replace(at, new=new, core=core)


def _plan_wrap(source, model, data: bytes, fn: ast.FunctionDef, param: str, at: Split) -> Split:
    """The wrap form: ``cast = torch.compile(cast_impl, ...)`` at module level
    becomes ``_cast = torch.compile(cast_impl, ...)`` and ``def cast(x):
    return _cast(x.flatten()).reshape(x.shape)``."""
    sites = [
        s for s in model.compile_sites
        if s.form == "wrap" and s.target_def is fn and s.binding and "." not in s.binding
        and isinstance(s.statement, ast.Assign) and source.parent(s.statement) is source.tree
        and s.statement.value is s.node and len(s.statement.targets) == 1
        and isinstance(s.statement.targets[0], ast.Name) and s.statement.targets[0].id == s.binding
    ]
    if len(sites) != 1:
        return replace(at, why="it is not compiled by its decorator or by one `name = torch.compile(...)` at module level")
    if source.parent(fn) is not source.tree:
        return replace(at, why="it is not a module-level function")
    if sites[0].calls and all(_flattened(c) for c in sites[0].calls):
        return replace(at, why="its calls pass a flattened tensor already")
    args = fn.args
    if parameter_names(fn) != [param] or args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        return replace(at, why=f"it takes more than the tensor `{param}`")
    why = why_not_elementwise(fn, param, model)
    if why is not None:
        return replace(at, why=f"it is not proven elementwise in `{param}`: {why}")
    statement, binding = sites[0].statement, sites[0].binding
    core = _core_name(source, binding)

    def apply(node: cst.CSTNode):
        assert isinstance(node, cst.SimpleStatementLine)
        compiled = node.with_changes(body=[node.body[0].with_changes(targets=[cst.AssignTarget(cst.Name(core))])])
        wrapper = cst.FunctionDef(
            name=cst.Name(binding),
            params=cst.Parameters(params=[cst.Param(cst.Name(param))]),
            body=cst.IndentedBlock(body=[_flattened_call(None, core, param)]),
            leading_lines=[cst.EmptyLine(indent=False)] * 2,
        )
        return cst.FlattenSentinel([compiled, wrapper])

    edits = [Edit(statement_target(source, statement), apply)]
    body = source.tree.body
    following = next((body[i + 1] for i, stmt in enumerate(body) if stmt is statement and i + 1 < len(body)), None)
    if following is not None:
        edits.append(Edit(statement_target(source, following), _two_blank_lines))  # after the new def, as black writes it
    new = _render_edits(source, data, edits)
    return Split(line=statement.lineno, column=statement.col_offset + 1, new=new, core=core)


def _flattened(call: ast.Call) -> bool:
    """``core(x.flatten())``: the wrapper's call."""
    return (
        len(call.args) == 1 and isinstance(call.args[0], ast.Call) and isinstance(call.args[0].func, ast.Attribute)
        and call.args[0].func.attr == "flatten" and not call.args[0].args
    )


def _two_blank_lines(node: cst.CSTNode) -> cst.CSTNode:
    """``node`` with at least two blank lines above it (and its comments)."""
    lines = list(node.leading_lines)
    blank = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
    return node.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * max(0, 2 - blank) + lines)



def _flattened_call(receiver: Optional[str], core: str, param: str) -> cst.SimpleStatementLine:
    """``return <receiver>.<core>(<param>.flatten()).reshape(<param>.shape)``."""
    func: cst.BaseExpression = cst.Name(core) if receiver is None else cst.Attribute(value=cst.Name(receiver), attr=cst.Name(core))
    flat = cst.Call(func=cst.Attribute(value=cst.Name(param), attr=cst.Name("flatten")))
    shape = cst.Attribute(value=cst.Name(param), attr=cst.Name("shape"))
    value = cst.Call(func=cst.Attribute(value=cst.Call(func=func, args=[cst.Arg(flat)]), attr=cst.Name("reshape")), args=[cst.Arg(shape)])
    return cst.SimpleStatementLine(body=[cst.Return(value=value)])


def apply_rank_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Split every compiled function of a guided file that recompiled on the
    rank of a parameter into an eager flattening wrapper and a compiled core
    (one finding, code ``TRACE``, safe, applied)."""
    for entry, g, params in argument_entries(trace, guided, tr.RANK):
        if len(params) != 1:
            continue
        base, first, _, _ = _current(g, trace, entry)
        split = plan(base, entry.name, first, params[0])
        line, column, core = split.line, split.column, split.core
        if split.new is None:
            if line:
                # the table's report stands; the finding says why no wrapper
                message = (
                    f"`{entry.name}` recompiled on the rank of `{params[0]}` (from the trace: {tr.recompiles(entry.count(tr.RANK))}); "
                    f"no flattening wrapper: {split.why}"
                )
                _unfixed(g, entry, tr.RANK, line, column, message)
            continue
        g.new = split.new
        message = (
            f"`{entry.name}` recompiled on the rank of `{params[0]}` (from the trace: {tr.recompiles(entry.count(tr.RANK))}, "
            "dynamic shapes never make the rank symbolic); its body is elementwise in it: an eager wrapper hands the "
            f"compiled core `{core}` `{params[0]}.flatten()` and reshapes the result (the same values, one rank)"
        )
        finding = _applied_finding(g.display_path, line, column, message, f"compile the elementwise core `{core}` on flattened input", FLATTEN_CORE.name)
        g.matches.append(Match(finding, entry, tr.RANK))


def rank_cure(entry: tr.CodeEntry, report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object that
    recompiled on a parameter's rank, read from its file as it is now: the
    wrapper ``run --fix`` would write, or ``report`` (the table's label) with
    why there is none; ``report`` alone when there is no such file or
    argument."""
    from .match import entry_file

    params = tr.named_arguments(entry, tr.RANK)
    path = entry_file(entry)
    if len(params) != 1 or path is None or tr.is_library_file(entry.filename) or not entry.firstlineno:
        return report
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return report
    split = plan(data, entry.name, entry.firstlineno, params[0])
    if split.new is not None:
        return f"an eager wrapper can flatten `{params[0]}` for the elementwise compiled core `{split.core}` (`run --fix` writes it)"
    return f"{report}; no flattening wrapper: {split.why}" if split.line else report
