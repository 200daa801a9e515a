"""Fixes made from trace evidence alone, where no static finding cures what
the trace shows: ``maybe_mark_dynamic`` before the call for a shape that
varies (``mark_unbacked`` for a size 0 or 1 compiled first), and FR005's flag
for a module int attribute."""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .._lazy import cst

from . import read as tr
from .registry import CLONE_ALIAS, CODE, CONTIGUOUS, NO_MARK, UNSPEC_FLAG
from .registry import DYNAMIC_TRUE as DYNAMIC_TRUE_CURE
from .registry import MARK_DYNAMIC as MARK_DYNAMIC_CURE, MARK_UNBACKED as MARK_UNBACKED_CURE
from ..analysis.compile_sites import code_def, def_first_lines, dotted_name
from ..analysis.params import changed_in_place, is_static, parameter_defaults, parameter_names, passed_argument
from ..analysis.source import walk
from ..analysis.context import FileContext, Settings
from ..pipeline.engine import render
from ..cst_edits import insert_after_node
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
# 0/1 specialisation, even under ``dynamic=True``: a first batch of 1, then 2),
# or symbolic first and at size 0 or 1 after the guard ``2 <= x.size()[0]``
# failed (a 1-token decode step after the prefill, vLLM #30709;
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

MARK_CODE = CODE
#: what marks a dim; the trace's mark for a size 0 or 1 compiled first
MAYBE_MARK_DYNAMIC = "maybe_mark_dynamic"
MARK_UNBACKED = "mark_unbacked"


@dataclass
class MarkSite:
    """One inserted mark: before the statement on ``line`` (of the bytes it
    was computed on), ``<torch>._dynamo.maybe_mark_dynamic(arg, dim)`` (or,
    ``func`` MARK_UNBACKED, ``<torch>._dynamo.decorators.mark_unbacked(arg, dim)``).
    The tensor is the variable ``name``, its entry ``key`` for a tensor
    passed in a ``**name`` dict, or its attribute ``attrs`` for a tensor an
    object passed in holds; ``arg`` is how it is written (``x``,
    ``inputs["hidden_states"]``, ``seq_ctx.cu_seq_lens_q``).  ``optional``:
    the entry may be absent or hold no tensor (its parameter has a
    default), so the mark goes under ``if isinstance(name.get("key"),
    torch.Tensor):``; or the variable may hold None
    (:func:`codemods.analysis.placement.may_be_none`), so under ``if name
    is not None:``."""

    line: int
    column: int
    function: str
    name: str
    dim: int
    param: str
    func: str = MAYBE_MARK_DYNAMIC
    key: Optional[str] = None
    attrs: Tuple[str, ...] = ()
    optional: bool = False

    @property
    def arg(self) -> str:
        base = self.name if self.key is None else f"{self.name}[{quoted(self.key)}]"
        return "".join((base, *(f".{a}" for a in self.attrs)))


# the statement and the marks already there: shared with FR007 (codemods/placement.py)
from ..analysis.placement import mark_statement as _mark_statement, marks_before, may_be_none, quoted  # noqa: E402
from .match import Guided, GuidedFile, Match, _real, entry_file


def _insert_marks(target, marks: List[cst.BaseStatement], binds: Sequence[Tuple[str, dict]] = ()) -> Edit:
    """Insert ``marks`` before the statement; the lines above it (comments
    included) go above the marks.  With ``binds`` ((name, holder), in the
    order the statement evaluates them), first ``name = <the expression the
    hoist edit took out>`` for each (the holder's ``"expr"``: edits apply
    bottom-up, so the inner ones have run)."""

    def apply(updated: cst.CSTNode):
        statements = list(marks)
        for name, holder in reversed(binds):
            value = holder["expr"]
            bracketed = isinstance(value, (cst.Call, cst.Subscript, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp))
            if "\n" in cst.Module(body=[]).code_for_node(value) and not value.lpar and not bracketed:
                # a statement of its own now: in parentheses, laid out as black does
                # (the expression's own lines keep their indentation inside them)
                value = value.with_changes(
                    lpar=[cst.LeftParen(whitespace_after=cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace("    ")))],
                    rpar=[cst.RightParen(whitespace_before=cst.ParenthesizedWhitespace(indent=True))],
                )
            assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value)
            statements.insert(0, cst.SimpleStatementLine(body=[assign]))
        first = statements[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([first, *statements[1:], updated.with_changes(leading_lines=())])

    return Edit(target, apply)


def _render_edits(source, data: bytes, edits: Sequence[Edit], settings: Settings = Settings(), needs_torch: bool = False) -> bytes:
    """``data`` with the trace's ``edits`` applied (one safe fix, rendered as a
    rule's are; ``needs_torch``: ``import torch`` added where the file has none)."""
    fix = Fix(edits=tuple(edits), safety=Safety.SAFE, needs_torch=needs_torch)
    finding = Finding(code=MARK_CODE, message="", path="<trace>", line=1, column=1, end_line=1, end_column=1, fix=fix)
    return render(FileContext("<trace>", "<trace>", settings, None, source), [finding], data)


def _unfixed(g: GuidedFile, entry: tr.CodeEntry, cause: str, line: int, column: int, message: str, rule_name: str = "") -> None:
    """A ``TRACE`` finding without a fix at ``line``:``column`` of ``g``:
    why the cure the table names is not written (the table's report stands)."""
    g.matches.append(Match(Finding(MARK_CODE, message, g.display_path, line, column, line, column, rule_name=rule_name), entry, cause))


def _applied_finding(path: str, line: int, column: int, message: str, title: str, rule_name: str, *, unsafe_fixes: Optional[bool] = None) -> Finding:
    """A fix the trace made (code ``TRACE``), as the table and the report
    show it: safe and applied; or, with ``unsafe_fixes`` given, unsafe and
    applied only when it is True (the bytes are changed by the caller then)."""
    unsafe = unsafe_fixes is not None
    return Finding(
        code=MARK_CODE,
        message=message,
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        fix=Fix(edits=(), safety=Safety.UNSAFE if unsafe else Safety.SAFE, title=title),
        rule_name=rule_name,
        applied=bool(unsafe_fixes) if unsafe else True,
    )


def _disable_fix(g: GuidedFile, source, base: bytes, model, fn: ast.AST, message: str, rule_name: str, *, unsafe: bool, unsafe_fixes: bool) -> Finding:
    """``@torch.compiler.disable`` on ``fn`` (FR013's edit), written into
    ``g`` when safe or when unsafe fixes are on; the trace's finding for it
    at the function's first line (its decorators included)."""
    from ..transforms.container_growth import disable_edit

    if unsafe_fixes or not unsafe:
        settings = g.ctx.settings if g.ctx is not None else Settings()
        g.new = _render_edits(source, base, [disable_edit(source, model, fn)], settings, needs_torch=True)
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])  # type: ignore[attr-defined]
    return _applied_finding(
        g.display_path, first, fn.col_offset + 1, message, f"`@torch.compiler.disable` on `{fn.name}`",  # type: ignore[attr-defined]
        rule_name, unsafe_fixes=unsafe_fixes if unsafe else None,
    )


def _mark_call_statement(torch_name: str, site: MarkSite) -> cst.SimpleStatementLine:
    """The mark of ``site`` as a statement: its tensor is ``name``,
    ``name["key"]`` or ``name.a.b``."""
    arg: object = site.name
    if site.key is not None:
        arg = cst.Subscript(value=cst.Name(site.name), slice=[cst.SubscriptElement(cst.Index(cst.SimpleString(quoted(site.key))))])
    for attr in site.attrs:
        arg = cst.Attribute(value=cst.Name(arg) if isinstance(arg, str) else arg, attr=cst.Name(attr))
    return _mark_statement(torch_name, arg, site.dim, "decorators." + MARK_UNBACKED if site.func == MARK_UNBACKED else site.func)


def _mark_statements(torch_name: str, sites: Sequence[MarkSite]) -> List[cst.BaseStatement]:
    """The marks of ``sites`` as statements, in order; the marks of an
    optional entry or variable (:attr:`MarkSite.optional`) together under
    one ``if isinstance(name.get("key"), torch.Tensor):`` (``if name is not
    None:``)."""
    out: List[cst.BaseStatement] = []
    guarded: Dict[Tuple[str, Optional[str]], int] = {}  # (name, key) -> where its `if` is in out
    for site in sites:
        mark = _mark_call_statement(torch_name, site)
        at = guarded.get((site.name, site.key)) if site.optional else None
        if not site.optional:
            out.append(mark)
        elif at is None:
            guarded[(site.name, site.key)] = len(out)
            test = _is_tensor_entry(torch_name, site.name, site.key) if site.key is not None else _is_not_none(site.name)
            out.append(cst.If(test=test, body=cst.IndentedBlock(body=[mark])))
        else:
            block = out[at]
            out[at] = block.with_changes(body=block.body.with_changes(body=[*block.body.body, mark]))  # type: ignore[attr-defined]
    return out


def _is_not_none(name: str) -> cst.BaseExpression:
    """``name is not None``."""
    return cst.Comparison(left=cst.Name(name), comparisons=[cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))])


def _is_tensor_entry(torch_name: str, name: str, key: str) -> cst.BaseExpression:
    """``isinstance(name.get("key"), torch.Tensor)``."""
    get = cst.Call(func=cst.Attribute(value=cst.Name(name), attr=cst.Name("get")), args=[cst.Arg(cst.SimpleString(quoted(key)))])
    tensor = cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("Tensor"))
    return cst.Call(func=cst.Name("isinstance"), args=[cst.Arg(get), cst.Arg(tensor)])


@dataclass
class _Compiled:
    """The compiled function a trace entry names, as this file shows it: its
    ``def``, the calls that run it compiled, and whether it is a method
    (its first parameter, ``self``, is not passed at the call)."""

    fn: ast.AST
    calls: List[ast.Call]
    method: bool


def _compiled(source, model, function: str, firstlineno: int, traced: Sequence[Tuple[str, int]],
              callers: Sequence[Tuple[int, str, bool]] = ()) -> Optional[_Compiled]:
    """Where the traced code object ``function`` (starting at ``firstlineno``)
    is called compiled, in the compile-site model's terms
    (:mod:`codemods.analysis.compile_sites`):

    - a module-level function compiled here: by its decorator, or bound at
      module level by ``name = torch.compile(function, ...)``: that binding's calls;
      a compiled ``@staticmethod`` of a module-level class: its calls through the class;
    - the ``forward`` of an nn.Module class an instance of which is compiled
      here (``model = torch.compile(model)``): the calls of that instance;
    - a module-level function the model sees compiled nowhere here, which the
      trace proves compiled (another module rebinds it, as torchtitan's
      ``apply_compile`` rebinds ``moe._run_experts_grouped_mm``): its calls by
      name, also through a local alias bound to it once (``run_experts_fn =
      _run_experts_grouped_mm``), outside code the trace shows compiled
      (``traced``: (name, first line) of this file's code objects), where a
      mark would be traced and refused;
    - a nested ``def`` (a closure a factory returns) compiled where the model
      cannot name what is compiled: the calls of the one such compile that
      reach the frames the trace shows calling it (:func:`_closure_compiled`);
    - else a method the trace shows called as a module from this file: the
      module call at that frame's line (:func:`_module_called`)."""
    from ..analysis.modules import compiled_module_class

    tree = source.tree
    sites = [
        site
        for site in model.compile_sites
        if isinstance(site.target_def, ast.FunctionDef)
        and site.target_def.name == function
        and (source.parent(site.target_def) is tree or (is_static(site.target_def) and site.binding != f"self.{function}"))
        and firstlineno in def_first_lines(site.target_def)
        and (site.form == "decorator" or (site.form == "wrap" and site.binding and "." not in site.binding and source.parent(site.statement) is tree))
    ]
    if sites:
        calls = sorted({c for site in sites for c in site.calls}, key=lambda c: (c.lineno, c.col_offset))
        return _Compiled(sites[0].target_def, calls, False)
    compiled_defs = {id(d) for site in model.compile_sites for d in (site.target_def, *site.call_defs.values()) if d is not None}
    cls = _method_class(source, model, firstlineno)
    if cls is not None:
        fn = next((s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and firstlineno in def_first_lines(s)), None)
        if fn is None or fn.name != "forward":
            return None
        # an instance of `cls` or of a class here deriving from it (its forward inherited)
        kinds = {id(c) for c in model.classes_deriving(cls)} | {id(cls)}
        calls = sorted(
            {c for site in model.compile_sites if id(compiled_module_class(model, site)) in kinds for c in site.calls},
            key=lambda c: (c.lineno, c.col_offset),
        )
        if not calls:
            # compiled out of the model's sight (diffusers' compile_repeated_blocks:
            # `submod.compile()` for the modules whose class name is listed): the
            # calls of its instances, outside compiled code
            outside = _calls_outside_compiled(source, traced, compiled_defs)
            calls = [c for c in outside if model.module_class_of(c.func) is cls]
            if not calls and callers:
                # held on attributes a factory of this file fills with one of
                # several classes (NeMo Automodel's `self.input_layernorm =
                # initialize_rms_norm_module(...)`): the calls of such attributes,
                # when the trace shows one of them calling this forward as a module
                # (it records the frames of compiles only: the other attributes'
                # calls hit the cache, but run the same code)
                lines = {line for line, _name, module in callers if module}
                held = [c for c in outside if cls in model.factory_module_classes(c.func)]
                calls = held if any(c.lineno in lines for c in held) else []
        if not calls:
            # compiled through a callable the model does not follow
            # (transformers' `get_compiled_call`: `torch.compile(self.__call__)`
            # kept on the instance, returned, called as `model_forward(**model_inputs)`):
            # the calls the trace shows reaching it, each of a name or an
            # attribute of `self` that holds such a callable
            found = _module_called(source, function, firstlineno, callers)
            return found if found is not None and all(_calls_a_held_callable(model, c) for c in found.calls) else None
        return _Compiled(fn, calls, True)
    fn = model.functions.get(function)  # the module-level def of that name
    if fn is None or firstlineno not in def_first_lines(fn):
        return _closure_compiled(source, model, function, firstlineno, callers) or _module_called(source, function, firstlineno, callers)
    if any(isinstance(site.target, ast.Name) and site.target.id == function for site in model.compile_sites):
        return None  # compiled here under another name: calls by its own name run eagerly
    return _Compiled(fn, _calls_by_name(source, fn, traced, compiled_defs), False)


def _calls_a_held_callable(model, call: ast.Call) -> bool:
    """Does ``call`` call what a variable or an attribute of ``self`` holds
    (``model_forward(**model_inputs)``, ``self._compiled_call(x)``), not a
    builtin, a function or a class of this file by its name, or a
    module's attribute (``nn.Linear(...)``, ``float(...)``)?"""
    func = call.func
    if isinstance(func, ast.Name):
        return not (func.id in model.functions or func.id in model.classes or hasattr(builtins, func.id))
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"


def _closure_compiled(source, model, function: str, firstlineno: int, callers: Sequence[Tuple[int, str, bool]]) -> Optional[_Compiled]:
    """The calls of a nested ``def`` ``function`` (a closure, as
    physicsnemo's ``get_denoiser`` returns ``ode_denoiser``) that one compile
    of this file reaches without the model knowing what it compiles
    (``compiled = torch.compile(denoiser)``, ``denoiser`` unpacked from a
    helper's result), the compiled callable then handed on
    (``sample(compiled)`` -> ``HeunSolver(denoiser)`` -> ``self.denoiser(x,
    t)``).  The trace ties them: a frame it shows calling the code object
    (``callers``, (line, function)) is the function around one of the
    site's calls, or, since torch's stack leaves out the calling frame
    (:func:`codemods.trace.read._caller_frame`), calls at that line a
    function or method whose name is that of a function around one of them
    (``solver_.step(...)`` -> ``HeunSolver.step``).  None unless exactly one
    such compile is tied."""
    fn = code_def(source, function, firstlineno)
    if fn is None or not isinstance(source.enclosing(fn, _FUNCS), (ast.FunctionDef, ast.AsyncFunctionDef)) or not callers:
        return None

    def called_names(line: int) -> set:
        return {
            c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id
            for c in source.nodes(ast.Call)
            if c.lineno == line and isinstance(c.func, (ast.Attribute, ast.Name))  # type: ignore[attr-defined]
        }

    frames = [(line, name, called_names(line)) for line, name, _module in callers]

    def tied(call: ast.Call) -> bool:
        owner = source.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        if owner is None:
            return False
        return any(
            (owner.name == name and owner.lineno <= line <= owner.end_lineno) or owner.name in called  # type: ignore[attr-defined]
            for line, name, called in frames
        )

    sites = [s for s in model.compile_sites if s.form == "wrap" and s.target_def is None and any(tied(c) for c in s.calls)]
    if len(sites) != 1:
        return None
    return _Compiled(fn, list(sites[0].calls), False)


def _module_called(source, function: str, firstlineno: int, callers: Sequence[Tuple[int, str, bool]]) -> Optional[_Compiled]:
    """The module calls the trace shows reaching the compiled ``function``
    when nothing in the file names what is compiled (xDiT's
    ``transformer.forward = torch.compile(transformer.forward)``, ``transformer``
    fetched by ``getattr``; the code object a decorator's ``wrapper(self,
    *args, **kwargs)`` around ``forward``): at each frame the trace shows
    calling it as a module (only torch's module call between them), the
    outermost call that starts on that line.  None when there is none or a
    line holds several."""
    fn = code_def(source, function, firstlineno)
    if fn is None:
        return None
    calls: List[ast.Call] = []
    for line, _name, module in callers:
        if not module:
            continue
        here = [c for c in source.nodes(ast.Call) if c.lineno == line]  # type: ignore[attr-defined]
        # the outermost call of the line (`self.model(x.float())`: not `x.float()`)
        here = [c for c in here if not any(o is not c and any(a is o for a in source.ancestors(c)) for o in here)]
        if len(here) != 1 or not isinstance(here[0].func, (ast.Name, ast.Attribute)):  # type: ignore[attr-defined]
            return None
        if here[0] not in calls:
            calls.append(here[0])  # type: ignore[arg-type]
    params = parameter_names(fn)
    if not calls or not params or params[0] != "self":
        return None  # a module's method binds `self` at the call
    return _Compiled(fn, calls, True)


def _defines(data: bytes, function: str, firstlineno: int) -> bool:
    """Does the file (``data``) hold the ``def`` of the traced code object?"""
    from ..pipeline.engine import parse_ast

    try:
        return code_def(parse_ast("<trace>", data), function, firstlineno) is not None
    except FileError:
        return False


def _compiled_in(data: bytes, function: str, firstlineno: int, traced: Sequence[Tuple[str, int]],
                 callers: Sequence[Tuple[int, str, bool]] = ()):
    """(source, compile-site model, :class:`_Compiled`) of the traced code
    object ``function`` (first line ``firstlineno``) in the file's bytes
    ``data``; None when they do not parse or show it compiled nowhere: what
    every cure at the calls starts from (``callers``: the frames of this file
    the trace shows calling it, (line, function, called as a module))."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None
    model = model_of(source)
    compiled = _compiled(source, model, function, firstlineno, traced, callers)
    return (source, model, compiled) if compiled is not None else None


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _runs_compiled(owner: Optional[ast.AST], traced_set: set, compiled_defs: set) -> bool:
    """Is the function ``owner`` compiled: seen so by the model (ids in
    ``compiled_defs``) or a code object of the trace ((name, first line))?"""
    if owner is None:
        return False
    return id(owner) in compiled_defs or (
        isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and any((owner.name, line) in traced_set for line in def_first_lines(owner))
    )


def _calls_outside_compiled(source, traced: Sequence[Tuple[str, int]], compiled_defs: set) -> List[ast.Call]:
    """Every call inside a function that does not run compiled, in source order."""
    traced_set = set(traced)
    calls = []
    for call in source.nodes(ast.Call):
        owner = source.enclosing(call, _FUNCS)
        if owner is not None and not _runs_compiled(owner, traced_set, compiled_defs):
            calls.append(call)
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _calls_by_name(source, fn: ast.AST, traced: Sequence[Tuple[str, int]], compiled_defs: set) -> List[ast.Call]:
    """The calls of the module-level function ``fn`` by its name, or by a
    local name bound once, in the same function, to that name; not inside
    ``fn`` itself nor inside a function the trace shows compiled or the
    compile-site model sees compiled (ids in ``compiled_defs``)."""
    name = fn.name  # type: ignore[attr-defined]
    aliases: Dict[Tuple[int, str], int] = {}  # (id of the enclosing function, alias) -> assignments
    for node in source.nodes(ast.Assign):
        if isinstance(node.value, ast.Name) and node.value.id == name and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            owner = source.enclosing(node, _FUNCS)
            if owner is not None:
                key = (id(owner), node.targets[0].id)
                aliases[key] = aliases.get(key, 0) + 1
    stores: Dict[Tuple[int, str], int] = {}
    if aliases:
        for node in source.nodes(ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                owner = source.enclosing(node, _FUNCS)
                key = (id(owner), node.id)
                if key in aliases:
                    stores[key] = stores.get(key, 0) + 1
    traced_set = set(traced)
    calls = []
    for call in source.nodes(ast.Call):
        if not isinstance(call.func, ast.Name):
            continue
        owner = source.enclosing(call, _FUNCS)
        if call.func.id != name:
            key = (id(owner), call.func.id)
            if aliases.get(key) != 1 or stores.get(key) != 1:
                continue
        if owner is None or owner is fn or any(a is fn for a in source.ancestors(owner)):
            continue  # module level (runs at import, once) or inside the function itself
        if _runs_compiled(owner, traced_set, compiled_defs):
            continue  # runs compiled: a mark there is refused
        calls.append(call)
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


#: statements whose one expression a ``**`` dict can be bound out of, before them
_HOISTABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)
#: expressions that evaluate a part of them conditionally, later, or in their own scope
_DEFERRED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.IfExp, ast.BoolOp)


def _hoistable(source, stmt: ast.stmt, expr: ast.AST) -> bool:
    """May ``expr`` (an argument inside ``stmt``: a ``**`` dict, or an
    expression passed for a parameter to mark) be evaluated into a name just
    before ``stmt``?  Only when nothing evaluated before it in the
    statement can have an effect (names, attributes, constants), and it is
    evaluated exactly once, unconditionally."""
    if not isinstance(stmt, _HOISTABLE) or isinstance(expr, ast.Name):
        return False
    if any(isinstance(a, _DEFERRED) for a in _ancestors_until(source, expr, stmt)):
        return False
    start = (expr.lineno, expr.col_offset)  # type: ignore[attr-defined]
    for node in ast.walk(stmt):
        if node is stmt or not hasattr(node, "end_lineno"):
            continue
        if (node.end_lineno, node.end_col_offset) > start:  # type: ignore[attr-defined]
            continue  # evaluated after it, or contains it
        if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Subscript)):
            return False
    return True


def _chooses_a_tensor(source, expr: ast.AST) -> bool:
    """Does ``expr`` only choose an object that exists: an element of a list
    or tuple its function binds once to a display (``attention_masks[0]``),
    or a conditional choice between such or names (``masks[0] if full else
    masks[1]``)?  Not an expression that makes a new tensor at the call (a
    view, a slice, an op: ``weight.view(r, c)`` may be a duck-sized view,
    whose cure is not a mark)."""
    if isinstance(expr, ast.IfExp):
        return all(isinstance(e, ast.Name) or _chooses_a_tensor(source, e) for e in (expr.body, expr.orelse))
    if not (isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, ast.Constant) and type(expr.slice.value) is int):
        return False
    fn = source.enclosing(expr, (ast.FunctionDef, ast.AsyncFunctionDef))
    if fn is None:
        return False
    name = expr.value.id
    if name in parameter_names(fn) or (fn.args.vararg and fn.args.vararg.arg == name) or (fn.args.kwarg and fn.args.kwarg.arg == name):
        return False
    stores = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)]
    if len(stores) != 1 or any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in walk(fn)):
        return False
    binding = source.parent(stores[0])
    return isinstance(binding, ast.Assign) and binding.targets == [stores[0]] and isinstance(binding.value, (ast.List, ast.Tuple))


def _calls_a_submodule(source, expr: ast.AST) -> bool:
    """Is ``expr`` a call of an object its class's ``__init__`` stores on
    ``self`` (``self.q_a_proj(x)``, NeMo Automodel's
    ``self.q_a_layernorm(self.q_a_proj(x))``): a submodule's output, which
    a mark serves as it serves a name (not a method of the class, which may
    return a view of a duck-sized weight, whose cure is no mark)?"""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Name) and expr.func.value.id == "self"):
        return False
    cls = source.enclosing(expr, (ast.ClassDef,))
    if cls is None:
        return False
    attr = expr.func.attr
    if any(isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == attr for d in cls.body):
        return False
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    return init is not None and any(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and t.attr == attr
        for node in walk(init) if isinstance(node, ast.Assign) for t in node.targets
    )


def _fresh_name(source, stem: str = "inputs", taken: Sequence[str] = (), at: Optional[ast.stmt] = None) -> str:
    """A name nothing uses: in the function around the statement ``at``
    (a local bound there changes nothing else), else in the whole file."""
    scope = source.enclosing(at, (ast.FunctionDef, ast.AsyncFunctionDef)) if at is not None else None
    if scope is not None:
        nodes = list(walk(scope))
        used = {n.id for n in nodes if isinstance(n, ast.Name)} | {a.arg for a in nodes if isinstance(a, ast.arg)}
        used |= {name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars", "exec", "eval") for n in nodes):
            used |= {n.id for n in source.nodes(ast.Name)} | {a.arg for a in source.nodes(ast.arg)}
    else:
        used = {n.id for n in source.nodes(ast.Name)} | {a.arg for a in source.nodes(ast.arg)}
    used |= set(taken)
    name, k = stem, 1
    while name in used:
        name, k = f"{stem}_{k}", k + 1
    return name


def _hoist_edit(source, expr: ast.AST, name: str, holder: dict) -> Edit:
    """Replace the argument ``expr`` by ``name``, keeping the expression in
    ``holder`` for the binding statement."""

    def apply(updated: cst.CSTNode):
        holder["expr"] = updated
        return cst.Name(name)

    return Edit(source.target(expr, "BaseExpression"), apply)


def mark_dynamic(data: bytes, function: str, firstlineno: int,
                 dims: Dict[str, Tuple[int, ...]],
                 unbacked: Optional[Dict[str, Tuple[int, ...]]] = None,
                 traced: Sequence[Tuple[str, int]] = (),
                 hidden: Optional[Dict[str, Tuple[int, ...]]] = None,
                 callers: Sequence[Tuple[int, str, bool]] = ()) -> Tuple[Optional[bytes], List[MarkSite], str]:
    """``data`` with ``maybe_mark_dynamic`` inserted before the calls of the
    compiled function ``function`` (its code object starts at ``firstlineno``:
    a decorator or the ``def`` line; where it is called compiled:
    :func:`_compiled`), for the parameters and dims in ``dims``, and
    ``mark_unbacked`` for the graph inputs and dims in ``unbacked`` (keyed as
    the trace names them, ``l_x_``: see :func:`codemods.trace.read.graph_input`;
    such a dim gets no ``maybe_mark_dynamic``); (None, [], why) when nothing
    can be marked.  A parameter passed as a plain name is marked by that name; one
    with no default that only a ``**d`` argument can pass, as ``d["param"]``
    (a ``**`` argument that is not a name is first bound to a fresh name before
    the statement, when that keeps the order of evaluation: :func:`_hoistable`)."""
    from ..analysis.placement import block_of, builtin_shadowed
    from ..analysis.source import COMPOUND, statement_target

    found = _compiled_in(data, function, firstlineno, traced, callers)
    if found is None and not _defines(data, function, firstlineno):
        return None, [], ""  # the traced code object is not this file's
    if found is None or not found[2].calls:
        return None, [], (
            f"this file shows no call from eager code that runs `{function}` compiled, where a mark could go; "
            "a call from inside compiled code refuses a mark, and one through a callable the analysis does not follow is not found"
        )
    if found[1].torch_alias is None:
        return None, [], "the file does not import torch"  # (a mark is written with the file's torch)
    source, model, compiled = found
    fn = compiled.fn
    positional = [a.arg for a in list(fn.args.posonlyargs) + list(fn.args.args)]  # type: ignore[union-attr]
    if compiled.method:
        positional = positional[1:]
    params = positional + [a.arg for a in fn.args.kwonlyargs]  # type: ignore[union-attr]
    keyword_ok = set(params) - {a.arg for a in fn.args.posonlyargs}  # type: ignore[union-attr]
    defaults = set(parameter_defaults(fn))
    # what only `**kwargs` takes, as the trace names it (`kwargs['timestep']`)
    # -> the keyword the calls pass it by (`timestep=unique_timesteps`)
    by_keyword: Dict[str, str] = {}
    star = fn.args.kwarg.arg if fn.args.kwarg is not None else None  # type: ignore[union-attr]
    for call in compiled.calls if star is not None else ():
        for kw in call.keywords:
            if kw.arg is not None and kw.arg not in keyword_ok:
                by_keyword.setdefault(f"{star}['{kw.arg}']", kw.arg)
    params = params + list(by_keyword)
    # (param, dim, func): the dims seen to vary in the trace's order, then the
    # other inputs compiled at size 0 or 1 first, in the signature's order
    unbacked_of = {p: set((unbacked or {}).get(tr.graph_input(p), ())) for p in params}
    # the dims of other parameters the graphs show changing at the same
    # calls (``hidden``, keyed as the graphs name them: behind the guard that
    # failed first, they would fail theirs once it is marked: a mask with its
    # hidden states, 2 -> 2 marking only one)
    dims = dict(dims)
    for p in params:
        if p not in dims and (hidden or {}).get(tr.graph_input(p)):
            dims[p] = (hidden or {})[tr.graph_input(p)]
    wanted: List[Tuple[str, int, str]] = []
    for param, param_dims in dims.items():
        for dim in param_dims:
            wanted.append((param, dim, MARK_UNBACKED if dim in unbacked_of.get(param, ()) else MAYBE_MARK_DYNAMIC))
    for param in params:
        for dim in sorted(unbacked_of[param]):
            if (param, dim, MARK_UNBACKED) not in wanted:
                wanted.append((param, dim, MARK_UNBACKED))
    by_stmt: Dict[ast.stmt, List[MarkSite]] = {}
    #: per statement, the arguments bound to fresh names before it: (expression, name)
    hoisted: Dict[ast.stmt, List[Tuple[ast.AST, str]]] = {}
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    fresh_names: List[str] = []

    def hoist(stmt: ast.stmt, expr: ast.AST, stem: str) -> Optional[str]:
        """The name ``expr`` is bound to before ``stmt`` (bound now if it may be)."""
        held = hoisted.setdefault(stmt, [])
        known = next((name for e, name in held if e is expr), None)
        if known is not None or not _hoistable(source, stmt, expr):
            return known
        name = _fresh_name(source, stem, fresh_names, stmt)
        fresh_names.append(name)
        held.append((expr, name))
        held.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))  # type: ignore[attr-defined]
        return name
    for call in compiled.calls:
        stmt = source.statement_of(call)
        if stmt is None or isinstance(stmt, COMPOUND) or block_of(source, stmt) is None:
            continue  # a call in a compound statement's header, or in a one-line suite
        if any(isinstance(a, scopes) for a in _ancestors_until(source, call, stmt)):
            continue  # runs later (lambda) or binds its own names (comprehension)
        stars = [kw.value for kw in call.keywords if kw.arg is None]
        # one ** dict and no *args: the dict passes what nothing else does (two: which one is unknown)
        double_star = stars[0] if len(stars) == 1 and not any(isinstance(a, ast.Starred) for a in call.args) else None
        line, column = source.start(call)
        have = by_stmt.setdefault(stmt, [])
        for param, dim, func in wanted:
            none_ok = False
            # a tensor an object passed in holds (`seq_ctx.cu_seq_lens_q`, xtuner
            # ea57efb8): the object's parameter, marked through the name passed for it
            held = tr.held_source(param)
            attrs: Tuple[str, ...] = held[1] if held is not None and held[0] in params else ()
            if param in by_keyword:
                value = next((kw.value for kw in call.keywords if kw.arg == by_keyword[param]), None)
            else:
                value = passed_argument(call, fn, held[0] if attrs else param, compiled.method)  # type: ignore[index]
            if attrs:
                if not isinstance(value, ast.Name):
                    continue
                name, key = value.id, None
            elif isinstance(value, ast.Name):
                name, key = value.id, None
                # a variable that may hold None (layer 0's `residual`): the mark under `is not None`
                none_ok = may_be_none(model, value)
            elif value is None and double_star is not None and param in keyword_ok and (param not in defaults or func == MAYBE_MARK_DYNAMIC):
                # only the ** dict can pass it: mark its entry (a parameter
                # with a default may be absent from the dict, or None: the
                # mark goes under a test that the entry is a tensor)
                key = param
                if isinstance(double_star, ast.Name):
                    name = double_star.id
                else:
                    bound = hoist(stmt, double_star, "inputs")
                    if bound is None:
                        continue
                    name = bound
            elif value is not None and func == MAYBE_MARK_DYNAMIC and (_chooses_a_tensor(source, value) or _calls_a_submodule(source, value)):
                # a choice of a tensor that exists (`attention_masks[0] if full
                # else attention_masks[1]`) or a submodule's output
                # (`self.q_a_proj(x)`): bound to a fresh name before the
                # statement, where that keeps the order of evaluation, and
                # marked by it (a hint only: mark_unbacked, which can fail
                # where code needs the size, stays on names)
                bound = hoist(stmt, value, param)
                if bound is None:
                    continue
                name, key = bound, None
            else:
                continue
            optional = (key is not None and param in defaults) or (key is None and not attrs and none_ok)
            if key is not None and optional and builtin_shadowed(model, call, "isinstance"):
                continue
            site = MarkSite(line, column + 1, function, name, dim, param, func, key, attrs, optional=optional)
            if not any((m.arg, m.dim) == (site.arg, dim) for m in have):
                have.append(site)
    edits: List[Edit] = []
    inserted: List[MarkSite] = []
    for stmt, marks in by_stmt.items():
        existing = marks_before(source, stmt)
        todo = [m for m in marks if (m.func, m.arg, m.dim) not in existing]
        if not todo:
            continue
        statements = _mark_statements(model.torch_alias, todo)
        binds: List[Tuple[str, dict]] = []
        for expr, name in hoisted.get(stmt, ()):
            if any(m.name == name for m in todo):
                holder: dict = {}
                edits.append(_hoist_edit(source, expr, name, holder))
                binds.append((name, holder))
        edits.append(_insert_marks(statement_target(source, stmt), statements, binds))
        inserted.extend(todo)
    if not edits:
        if any(by_stmt.values()):
            return None, [], "every mark it needs is already before its calls"
        return None, [], f"no call of `{function}` passes the tensors as names a mark can precede (bind them to a name before the call)"
    return _render_edits(source, data, edits), inserted, ""


# -- fixes made from evidence: dynamic=True where the calls pass sizes as ints ----------
#
# A shape recompile whose calls also pass sizes of the varying tensor as
# Python ints (compressed-tensors before 6bb69c17: ``m, n = weight.shape``,
# ``unpack_fp4_from_uint8(weight, m, n * 2)``): torch specialises an int
# argument at its first value and makes it dynamic only once it changed, so
# marking the tensor's dims leaves one recompile per int (measured on the
# reproduction: 3 -> 3, the marks taken back).  ``dynamic=True`` on the
# compile makes the ints symbolic from the first call (3 -> 1, the project's
# own fix).  Unsafe: every dim of every tensor the function reads becomes
# symbolic from the first call, also those that never change (a global
# lookup table's length), which can be slower; applied with --unsafe-fixes,
# kept only with fewer graphs and the same output.

DYNAMIC_TRUE_RISK = "every dim of every tensor it reads is symbolic from the first call, also those that never change, which can be slower"


def _size_of(node: ast.AST, tensors: set) -> Optional[str]:
    """The tensor of ``tensors`` whose size ``node`` reads: ``t.shape``,
    ``t.shape[i]``, ``t.size()``, ``t.size(i)``, ``len(t)``."""
    if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) and node.value.id in tensors:
        return node.value.id
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "size" and isinstance(f.value, ast.Name) and f.value.id in tensors:
            return f.value.id
        if isinstance(f, ast.Name) and f.id == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in tensors:
            return node.args[0].id
    return None


def _size_names(owner: ast.AST, tensors: set) -> Dict[str, str]:
    """Names the function ``owner`` binds, directly, to sizes of ``tensors``
    (``m, n = weight.shape``, ``b = x.size(0)``): name -> tensor."""
    out: Dict[str, str] = {}
    for node in ast.walk(owner):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        read = next((t for t in (_size_of(n, tensors) for n in ast.walk(value)) if t is not None), None)
        if read is None:
            continue
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        for name in names:
            if isinstance(name, ast.Name):
                out[name.id] = read
    return out


def sizes_passed_as_ints(data: bytes, function: str, firstlineno: int, dims: Dict[str, Tuple[int, ...]],
                         traced: Sequence[Tuple[str, int]] = ()) -> List[Tuple[int, str, str, str]]:
    """(line, parameter, argument as written, tensor) for each argument a call
    of the compiled ``function`` passes that is a size of a tensor it passes
    for a parameter of ``dims`` (those the trace saw vary): an int that pins
    the size the mark would free."""
    seen = _compiled_in(data, function, firstlineno, traced)
    if seen is None:
        return []
    source, _model, compiled = seen
    fn = compiled.fn
    params = parameter_names(fn)
    found: List[Tuple[int, str, str, str]] = []
    for call in compiled.calls:
        tensors = {}
        for param in dims:
            value = passed_argument(call, fn, param, compiled.method)
            if isinstance(value, ast.Name):
                tensors[value.id] = param
        if not tensors:
            continue
        owner = source.enclosing(call, _FUNCS)
        named = _size_names(owner, set(tensors)) if owner is not None else {}
        for param in params:
            if param in dims:
                continue
            value = passed_argument(call, fn, param, compiled.method)
            if value is None:
                continue
            read = next((t for t in (_size_of(n, set(tensors)) or (named.get(n.id) if isinstance(n, ast.Name) else None) for n in ast.walk(value)) if t is not None), None)
            if read is not None:
                found.append((call.lineno, param, source.segment(value), read))
    return found


def dynamic_true(data: bytes, function: str, firstlineno: int, traced: Sequence[Tuple[str, int]] = ()) -> Tuple[Optional[bytes], Optional[ast.AST]]:
    """``data`` with ``dynamic=True`` passed to the one compile of
    ``function`` (a decorator, bare or called, or a ``torch.compile(f, ...)``
    call) and that compile's node; (None, None) when it passes
    ``dynamic=`` already, takes ``**`` options, or is not one compile here."""
    from ..cst_edits import add_keyword_argument

    found = _compiled_in(data, function, firstlineno, traced)
    if found is None:
        return None, None
    source, model, compiled = found
    sites = [site for site in model.compile_sites if site.target_def is compiled.fn and site.form in ("decorator", "wrap")]
    if len(sites) != 1 or sites[0].has_star_kwargs or sites[0].option("dynamic") is not None:
        return None, None
    site = sites[0]
    if site.options_call is not None:
        edit = Edit(source.target(site.options_call, "Call"), functools.partial(add_keyword_argument, "dynamic", lambda: cst.Name("True")))
    else:  # a bare decorator: `@torch.compile` -> `@torch.compile(dynamic=True)`
        edit = Edit(
            source.target(site.node, "BaseExpression"),
            lambda node: add_keyword_argument("dynamic", lambda: cst.Name("True"), cst.Call(func=node)),
        )
    return _render_edits(source, data, [edit]), site.node  # type: ignore[return-value]


def _ancestors_until(source, node: ast.AST, stop: ast.AST):
    for anc in source.ancestors(node):
        if anc is stop:
            return
        yield anc


def _shape_cured_statically(guided_file: "GuidedFile", entry: tr.CodeEntry) -> bool:
    return any(m.entry is entry and m.cause == tr.TENSOR_SHAPE and m.finding.applied
               for m in guided_file.matches)


def apply_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool = False) -> None:
    """Add the trace's own fixes (``maybe_mark_dynamic``; ``mark_unbacked``
    for a size 0 or 1 compiled first) to the guided files: for every code
    object of a file with observed shape changes that no applied static fix
    cures.  Each becomes a match whose finding (code ``TRACE``, safe) is
    applied.  Where the calls also pass sizes of a varying tensor as ints
    (:func:`sizes_passed_as_ints`), ``dynamic=True`` on its compile instead
    (unsafe: applied with ``unsafe_fixes``)."""

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
        base, first, traced, callers = _current(g, trace, entry)
        pinned = sizes_passed_as_ints(base, entry.name, first, dims, traced) if dims and not unbacked else []
        if pinned:
            new, compile_node = dynamic_true(base, entry.name, first, traced)
            if new is not None and compile_node is not None:
                if unsafe_fixes:
                    g.new = new
                ints = ", ".join(dict.fromkeys(f"`{text}` for `{param}`" for _l, param, text, _t in pinned))
                tensors = ", ".join(dict.fromkeys(f"`{t}`" for _l, _p, _t, t in pinned))
                message = (
                    f"`{entry.name}` recompiled on {tr.describe_shape_evidence(entry, next(iter(dims)))}, and its calls"
                    f" pass sizes of {tensors} as ints too ({ints}, line {pinned[0][0]}): each int is specialised"
                    " at its first value, so marking the tensor's dims leaves one recompile per int; pass"
                    f" `dynamic=True` to its compile (unsafe: {DYNAMIC_TRUE_RISK})"
                )
                finding = _applied_finding(
                    g.display_path, compile_node.lineno, compile_node.col_offset + 1, message,  # type: ignore[attr-defined]
                    "pass `dynamic=True`", DYNAMIC_TRUE_CURE.name, unsafe_fixes=unsafe_fixes,
                )
                g.matches.append(Match(finding, entry, tr.TENSOR_SHAPE))
                continue
        new, sites, why = mark_dynamic(base, entry.name, first, dims, unbacked, traced, tr.hidden_varying_dims(entry), callers)
        if new is None and why:
            # the table names the marks; say why none is written
            shown = entry.shown_sources(tr.TENSOR_SHAPE)
            message = f"`{entry.name}` recompiled on tensor shape {shown}; no mark written: {why}"
            line = entry.firstlineno
            _unfixed(g, entry, tr.TENSOR_SHAPE, line, 1, message, NO_MARK)
        if new is None:
            continue
        g.new = new
        for site in sites:
            if site.func == MARK_UNBACKED:
                shown = entry.shown_sources(tr.TENSOR_SHAPE)
                evidence = tr.describe_zero_one_evidence(entry, tr.graph_input(site.param), site.dim)
                call = f"{tr.MARK_UNBACKED}({site.arg}, {site.dim})"
                message = (
                    f"`{site.function}` recompiled on tensor shape {shown}: {evidence} (a size 0 or 1 is"
                    f" specialised even under dynamic shapes, and maybe_mark_dynamic does not lift that):"
                    f" mark dim {site.dim} of `{site.arg}` unbacked before the call (`{call}`, from the trace)"
                )
                rule_name = MARK_UNBACKED_CURE.name
            elif site.param not in dims:
                # a dim behind the guard that failed first (tr.hidden_varying_dims)
                shown = entry.shown_sources(tr.TENSOR_SHAPE)
                call = f"torch._dynamo.maybe_mark_dynamic({site.arg}, {site.dim})"
                message = (
                    f"`{site.function}` recompiled on tensor shape {shown}, and its graphs show dim {site.dim} of `{site.param}`"
                    f" compiled static, then symbolic (it changed at the same calls, behind that guard): mark it dynamic"
                    f" before the call too (`{call}`, from the trace)"
                )
                rule_name = MARK_DYNAMIC_CURE.name
            else:
                evidence = tr.describe_shape_evidence(entry, site.param)
                call = f"torch._dynamo.maybe_mark_dynamic({site.arg}, {site.dim})"
                message = (
                    f"`{site.function}` recompiled on {evidence}: mark dim {site.dim} of"
                    f" `{site.arg}` dynamic before the call (`{call}`, from the trace)"
                )
                rule_name = MARK_DYNAMIC_CURE.name
            if site.optional and site.key is None:
                message += f" where it is not None (`if {site.name} is not None:`: it is bound to None in its scope)"
            elif site.optional:
                message += f" where the entry is a tensor (`if isinstance({site.name}.get({quoted(site.key or '')}), torch.Tensor):`: `{site.param}` has a default, so the dict may lack it or hold None)"
            finding = _applied_finding(g.display_path, site.line, site.column, message, f"insert {call} before the call", rule_name)
            g.matches.append(Match(finding, entry, tr.TENSOR_SHAPE))


# -- fixes made from evidence: one layout for every caller (.contiguous()) ---------------
#
# A stride recompile the trace shows (``tensor 'hidden_states' stride mismatch
# at index 1``): callers of one compiled code object pass tensors of different
# layouts (diffusers' WanAnimate before dd680ee627: ``x.flatten(2).transpose(1,
# 2)`` reaches the first of the blocks compiled one by one, the contiguous
# output of each block the next).  At each call of the compiled function (as
# :func:`_compiled` finds them) that passes the guarded parameter, the argument
# becomes ``arg.contiguous()``: the same values, a copy only where it is not
# contiguous (a no-op, the same tensor, where it is), so every call sees one
# layout.  Not where the compiled function changes that parameter in place
# (the caller would no longer see the change): then nothing.  Safe; ``--fix``
# runs the command again and keeps it only if fewer graphs compile with the
# same output and exit code.

#: expressions ``.contiguous()`` can follow without parentheses
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


def _changed_in_place(fn: ast.AST, param: str) -> bool:
    """Does ``fn`` change its parameter ``param`` in place (``p[i] = v``,
    ``p += v``, ``p.add_(v)``)?"""
    return changed_in_place(fn, param) is not None


def _already_contiguous(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "contiguous" and not node.args


@dataclass
class ContiguousSite:
    """One argument made ``arg.contiguous()`` (``arg.view(arg.shape)`` when
    ``view``), at ``line``:``column``."""

    line: int
    column: int
    function: str
    arg: str
    param: str
    view: bool = False
    #: the whole new value, where it is not ``arg`` with a method added (``torch.zeros_like(d.f, ...)``)
    replaced: Optional[str] = None

    @property
    def written(self) -> str:
        if self.replaced is not None:
            return self.replaced
        return f"{self.arg}.view({self.arg}.shape)" if self.view else f"{self.arg}.contiguous()"


def contiguous_at_calls(data: bytes, function: str, firstlineno: int, params: Sequence[str],
                        traced: Sequence[Tuple[str, int]] = (),
                        callers: Sequence[Tuple[int, str, bool]] = (),
                        views: Sequence[str] = ()) -> Tuple[Optional[bytes], List[ContiguousSite]]:
    """``data`` with ``.contiguous()`` on the arguments passed for ``params``
    at the calls of the compiled ``function`` (starting at ``firstlineno``);
    for the parameters in ``views`` (whose stride guards failed only on
    dims of size 1: :func:`codemods.trace.read.size_one_strides`)
    ``arg.view(arg.shape)`` instead, for an argument that is a name or an
    attribute (read twice); (None, []) when there is none to change."""
    found = _compiled_in(data, function, firstlineno, traced, callers)
    if found is None:
        return None, []
    source, _model, compiled = found
    fn = compiled.fn
    wanted = [p for p in params if not _changed_in_place(fn, p)]
    edits: List[Edit] = []
    sites: List[ContiguousSite] = []
    done: set = set()
    for call in compiled.calls:
        for param in wanted:
            value = passed_argument(call, fn, param, compiled.method)
            view = param in views
            if value is None or not isinstance(value, (ast.Name, ast.Attribute) if view else _ATOMS) or _already_contiguous(value) or id(value) in done:
                continue
            done.add(id(value))
            edits.append(Edit(source.target(value, "BaseExpression"), _view_own_shape if view else _then("contiguous")))
            line, column = source.start(value)
            sites.append(ContiguousSite(line, column + 1, function, source.segment(value), param, view))
    if not edits:
        return None, []
    return _render_edits(source, data, edits), sites


def _view_own_shape(node: cst.CSTNode) -> cst.CSTNode:
    """``x`` -> ``x.view(x.shape)``: the same tensor, its size-1 dims given
    the strides of a fresh tensor of that shape."""
    shape = cst.Attribute(value=node.deep_clone(), attr=cst.Name("shape"))
    return cst.Call(func=cst.Attribute(value=node, attr=cst.Name("view")), args=[cst.Arg(shape)])


def _then(method: str):
    """An edit's apply: ``node`` -> ``node.<method>()`` (``.contiguous()``, ``.clone()``)."""

    def apply(node: cst.CSTNode) -> cst.CSTNode:
        return cst.Call(func=cst.Attribute(value=node, attr=cst.Name(method)))

    return apply


def argument_entries(trace: tr.Trace, guided: Guided, cause: str) -> Iterator[Tuple[tr.CodeEntry, GuidedFile, List[str]]]:
    """(code object, its guided file, the arguments) for each code object of
    a guided user file that recompiled on ``cause`` of arguments it names
    (``x``; not ``kwargs['x']``, not ``args[0]``)."""
    by_real = {_real(g.path): g for g in guided.files}
    for entry in trace.entries:
        path = entry_file(entry)
        if path is None or tr.is_library_file(entry.filename):
            continue
        params = tr.named_arguments(entry, cause)
        g = by_real.get(_real(path))
        if params and g is not None:
            yield entry, g, params


def apply_layout_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Add ``.contiguous()`` at the calls of every code object of a guided
    file that recompiled on a parameter's strides (one finding, code
    ``TRACE``, safe, applied, per argument changed)."""
    for entry, g, params in argument_entries(trace, guided, tr.LAYOUT):
        base, first, traced, callers = _current(g, trace, entry)
        views = [p for p in params if tr.size_one_strides(entry, p)]
        new, sites = contiguous_at_calls(base, entry.name, first, params, traced, callers, views)
        if new is None:
            continue
        g.new = new
        for site in sites:
            how = (
                "the same tensor, a view giving its size-1 dims the strides every call has: `.contiguous()` keeps it"
                " as it is, since a size-1 dim does not count for is_contiguous()"
                if site.view else "the same values, one layout for every call"
            )
            message = (
                f"`{site.function}` recompiled on the strides of `{site.param}` (from the trace): its callers pass"
                f" tensors of different layouts; pass `{site.written}` here ({how})"
            )
            finding = _applied_finding(g.display_path, site.line, site.column, message, f"pass `{site.written}`", CONTIGUOUS.name)
            g.matches.append(Match(finding, entry, tr.LAYOUT))


# A stride recompile on a field of a state object passed in
# (``tensor 'args[1].subtree_com' stride mismatch at index 1``): compiled code
# returns the state with that field written, the caller feeds it back, and
# the value written has another layout than the state first passed
# (mujoco-torch before b8e4fa6: ``com_pos`` writes ``subtree_com =
# torch.where(cond, d.xipos, ...)``, whose layout follows a transposed mask
# under ``torch.vmap``).  Where a function of the file writes that field
# (``d.update_(subtree_com=v)``, ``d.replace(subtree_com=v)``,
# ``dataclasses.replace(d, subtree_com=v)``, ``d.subtree_com = v``; never
# ``self``'s), the value becomes ``v.contiguous()``: the same values, a copy
# only where it is not contiguous, so every call gets one layout (the
# project's own fix).  Not where the function changes the value in place
# afterwards (the field would no longer see the change), nor a field passed
# through (``pos=d.pos``: it keeps the layout it came in with).
#
# A new tensor that depends on no input (``torch.zeros(m.nv, dtype=...,
# device=...)``) is contiguous already; under ``torch.vmap`` it depends on no
# batched input, so vmap returns it broadcast, batch stride 0
# (mujoco-torch before f81eea1: ``.contiguous()`` measured 2 -> 2).  Such a
# factory, written directly or bound to the name written, becomes its
# ``_like`` twin of the field it is written to: ``torch.zeros_like(d.f,
# dtype=..., device=...)``, the same values (the stride guard that failed
# means the sizes matched: the field has the shape written), laid out as
# the state passed in, batched under vmap (the project passed ``d.f``
# through).  Only with ``dtype=`` and ``device=`` given (``_like`` would
# take the field's otherwise), no ``out=``; the state a plain name.  Safe;
# ``--fix`` keeps each only if fewer graphs compile with the same output and
# exit code.

#: the methods that write a state's fields by keyword (tensorclass, dataclass, namedtuple)
_FIELD_WRITERS = frozenset({"update_", "update", "replace", "_replace"})

#: ``torch.<factory>(size..., dtype=, device=)`` -> ``torch.<factory>_like(x, ...)``
_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full"})

#: the ``_like`` twins (``torch.zeros_like``, …)
_LIKES = frozenset(f"{f}_like" for f in _FACTORIES)

#: the keywords a factory and its ``_like`` twin both take
_LIKE_KEYWORDS = frozenset({"dtype", "device", "layout", "requires_grad", "fill_value"})


def _field_writes(fn: ast.AST, field: str) -> Iterator[Tuple[Optional[ast.expr], ast.expr]]:
    """(the state written, the value) for each value ``fn`` writes to
    ``field`` of a state object."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in _FIELD_WRITERS:
                receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                if dotted_name(node.func) == "dataclasses.replace" or isinstance(node.func, ast.Name):
                    receiver = node.args[0] if node.args else None
                for kw in node.keywords:
                    if kw.arg == field:
                        yield receiver, kw.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == field and isinstance(t.value, ast.Name) and t.value.id != "self":
                yield t.value, node.value


def _factory(node: ast.AST) -> bool:
    """Is ``node`` a new tensor of a shape given by size, with its dtype and
    device given, that has a ``_like`` twin (:data:`_FACTORIES`)?"""
    if not isinstance(node, ast.Call) or dotted_name(node.func) not in _FACTORIES:
        return False
    keywords = [kw.arg for kw in node.keywords]
    if None in keywords or not {"dtype", "device"} <= set(keywords) <= _LIKE_KEYWORDS:
        return False
    if any(isinstance(a, ast.Starred) for a in node.args):
        return False
    fill = "fill_value" in keywords
    if dotted_name(node.func) == "torch.full":
        return len(node.args) == (1 if fill else 2)  # full(size, value): one size, one fill value
    return bool(node.args) and not fill


def _like_field(node: ast.AST, field: str) -> bool:
    """Is ``node`` a factory's ``_like`` twin of ``field`` of a state
    (``torch.zeros_like(d.f, ...)``, what :func:`_like` writes)?"""
    return (
        isinstance(node, ast.Call) and dotted_name(node.func) in _LIKES
        and bool(node.args) and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == field
    )


def _factory_bindings(fn: ast.AST, name: str, field: str) -> Tuple[List[ast.Call], bool]:
    """(the factories ``fn`` binds ``name`` to by ``name = torch.zeros(...)``,
    whether every binding of ``name`` in ``fn`` is one or is made like
    ``field`` already)."""
    made: List[ast.Call] = []
    stores = like = 0
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores += 1
        elif isinstance(node, ast.arg) and node.arg == name:
            stores += 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == name and _factory(node.value):
                made.append(node.value)  # type: ignore[arg-type]
            elif node.targets[0].id == name and _like_field(node.value, field):
                like += 1
    return made, stores > 0 and len(made) + like == stores


def _like(state: str, field: str):
    """An edit's apply: ``torch.zeros(n, dtype=t, device=v)`` ->
    ``torch.zeros_like(state.field, dtype=t, device=v)`` (``full`` keeps its
    fill value)."""

    def apply(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        positional = [a for a in node.args if a.keyword is None]
        kept = positional[1:] if node.func.attr.value == "full" else []
        keywords = [a for a in node.args if a.keyword is not None]
        first = cst.Arg(cst.Attribute(value=cst.Name(state), attr=cst.Name(field)))
        args = [first, *kept, *keywords]
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(func=node.func.with_changes(attr=cst.Name(node.func.attr.value + "_like")), args=args)

    return apply


def _like_text(source, node: ast.Call, state: str, field: str) -> str:
    """How :func:`_like` writes ``node`` (for the finding's message)."""
    func = dotted_name(node.func)
    parts = [f"{state}.{field}"]
    if func == "torch.full":
        parts += [source.segment(a) for a in node.args[1:]]
    parts += [f"{kw.arg}={source.segment(kw.value)}" for kw in node.keywords]
    return f"{func}_like({', '.join(parts)})"


def contiguous_at_writes(data: bytes, fields: Sequence[str]) -> Tuple[Optional[bytes], List[ContiguousSite]]:
    """``data`` with ``.contiguous()`` on the values its functions write to
    ``fields`` of a state object, and new tensors written there made like
    the field; (None, []) when there is none to change."""
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, []
    edits: List[Edit] = []
    sites: List[ContiguousSite] = []
    done: set = set()
    likes: set = set()  # the factories made like a field (a name may be written more than once)
    for fn in ast.walk(source.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for field in fields:
            for state, value in _field_writes(fn, field):
                if id(value) in done or not isinstance(value, _ATOMS) or _already_contiguous(value):
                    continue
                if isinstance(value, ast.Attribute) and value.attr == field or _like_field(value, field):
                    continue  # the field passed through (`pos=d.pos`) or made like it: the layout it came in with
                if isinstance(value, ast.Name) and _changed_in_place(fn, value.id):
                    continue
                done.add(id(value))
                made, only = ([value], True) if _factory(value) else (
                    _factory_bindings(fn, value.id, field) if isinstance(value, ast.Name) else ([], False))
                if isinstance(state, ast.Name) and state.id != "self" and made:
                    for factory in made:
                        if id(factory) in likes:
                            continue
                        likes.add(id(factory))
                        edits.append(Edit(source.target(factory, "BaseExpression"), _like(state.id, field)))
                        line, column = source.start(factory)
                        sites.append(ContiguousSite(line, column + 1, fn.name, source.segment(factory), field,
                                                    replaced=_like_text(source, factory, state.id, field)))
                if only:
                    continue
                edits.append(Edit(source.target(value, "BaseExpression"), _then("contiguous")))
                line, column = source.start(value)
                sites.append(ContiguousSite(line, column + 1, fn.name, source.segment(value), field))
    if not edits:
        return None, []
    return _render_edits(source, data, edits), sites


def apply_field_layout_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Add ``.contiguous()`` where the guided files write a field of a state
    object that a code object recompiled on the strides of (one finding,
    code ``TRACE``, safe, applied, per value changed)."""
    fields: Dict[str, tr.CodeEntry] = {}
    for entry in trace.entries:
        if entry_file(entry) is None or tr.is_library_file(entry.filename):
            continue
        for source in entry.sources(tr.LAYOUT):
            field = tr.field_of(source)
            if field is not None:
                fields.setdefault(field, entry)
    if not fields:
        return
    for g in guided.files:
        base = g.new if g.new is not None else g.original
        new, sites = contiguous_at_writes(base, list(fields))
        if new is None:
            continue
        g.new = new
        for site in sites:
            entry = fields[site.param]
            how = (
                "the same values, laid out as the state passed in: a new tensor that depends on no input comes back"
                " from torch.vmap with batch stride 0" if site.replaced is not None
                else "the same values, one layout for every call"
            )
            message = (
                f"`{tr.display_name(entry)}` recompiled on the strides of the field `{site.param}` of a state passed"
                f" in (from the trace): `{site.function}` writes it with another layout than the state first passed;"
                f" write `{site.written}` ({how})"
            )
            finding = _applied_finding(g.display_path, site.line, site.column, message, f"write `{site.written}`", CONTIGUOUS.name)
            g.matches.append(Match(finding, entry, tr.LAYOUT))


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

#: the flag set from a trace is one of the trace's own fixes
FLAG_CODE = MARK_CODE


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
    """Where a flag set after the first module-level ``import torch`` goes:
    the last of the imports that follow it without another statement between
    (the flag then runs before any code of the file, and after its imports:
    no import below a statement)."""
    body = source.tree.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Import) and any(a.name == "torch" for a in stmt.names):
            while i + 1 < len(body) and isinstance(body[i + 1], (ast.Import, ast.ImportFrom)):
                i += 1
            return body[i]
    return None


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
        edit = insert_after_node(statement_target(source, stmt), flag)
    return _render_edits(source, data, [edit], settings), stmt.lineno


def apply_flag_evidence(trace: tr.Trace, guided: Guided, settings: Settings) -> None:
    """Add FR005's flag where the trace shows nn.Module methods recompiling on
    int attributes of ``self`` and no applied FR005 finding of that file sets
    it: one flag per file, one finding per code object it cures."""
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
        base, moved = g.current()
        new, line = unspec_flag(base, [moved(e.firstlineno) for e, _ in entries], settings)
        if new is None:
            continue
        g.new = new
        for entry, sources in entries:
            n = sum(1 for r in entry.reasons if r.cause == tr.MODULE_INT_ATTR)
            what = ", ".join(f"`{s}`" for s in sources)
            message = (
                f"`{entry.name}` (line {entry.firstlineno}) recompiled {n} time{'s' if n != 1 else ''} on module int attribute {what}"
                f" (from the trace): set `torch._dynamo.config.{FLAG} = True` before the compile (FR005's fix)"
            )
            title = f"set `torch._dynamo.config.{FLAG} = True` before the compile"
            finding = _applied_finding(g.display_path, line, 1, message, title, UNSPEC_FLAG.name)
            g.matches.append(Match(finding, entry, tr.MODULE_INT_ATTR))


# -- fixes made from evidence: inputs that alias one tensor (.clone()) ------------------
#
# A duplicate-tensor recompile the trace shows (``Duplicate tensors found:
# ["args[1].qacc", "args[1].qacc_smooth"]``): the first compile saw two
# distinct tensors, a later call one tensor under both names.  mujoco-torch
# before dbf4ed8: ``forward`` ends with ``d.update_(qacc=d.qacc_smooth)`` when
# the model has no constraints, and the returned state is fed back into the
# compiled, vmapped ``step``.  Its fix, and this one: ``.clone()`` where the
# alias is made -- a keyword or an assignment that sets one field from the
# other (``qacc=<x>.qacc_smooth``, ``<x>.qacc = <y>.qacc_smooth``), anywhere in
# the file of the compiled code; for two arguments of the compiled function
# (``f(t, t)``), the second where a call passes the same expression twice.
# Not where the file changes either field in place (``d.qacc.add_(...)``,
# ``d.qacc[i] = ...``): the alias may be meant.  The same values, one copy
# more per alias made; safe as the layout fix is, and ``--fix`` keeps it only
# if the rerun compiles fewer graphs with the same output and exit code.

_LAST_FIELD = re.compile(r"\.(?P<name>[A-Za-z_]\w*)$")


def _changes_field_in_place(tree: ast.AST, fields: set) -> bool:
    """Does the code change ``<x>.<field>`` in place for one of ``fields``
    (``x.f.add_(v)``, ``x.f[i] = v``, ``x.f += v``)?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr in fields and node.func.attr.endswith("_") and not node.func.attr.startswith("_"):
                return True
        targets: List[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(node, ast.AugAssign) and isinstance(t, ast.Attribute) and t.attr in fields:
                return True
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr in fields:
                return True
    return False


def _field_aliases(tree: ast.AST, a: str, b: str) -> List[ast.Attribute]:
    """The values that make field ``a`` the tensor of field ``b`` (or the
    reverse): ``a=<x>.b`` passed by keyword, ``<x>.a = <y>.b`` assigned."""
    pair = {a: b, b: a}
    out: List[ast.Attribute] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in pair:
            value, field = node.value, node.arg
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Attribute) or targets[0].attr not in pair:
                continue
            value, field = node.value, targets[0].attr
        else:
            continue
        if isinstance(value, ast.Attribute) and value.attr == pair[field]:
            out.append(value)
    return out


@dataclass
class CloneSite:
    """One value made ``value.clone()``, at ``line``:``column``: it made
    ``aliased`` (two names) one tensor."""

    line: int
    column: int
    value: str
    aliased: Tuple[str, str]


def clone_aliases(data: bytes, function: str, firstlineno: int, pairs: Sequence[Tuple[str, str]],
                  traced: Sequence[Tuple[str, int]] = ()) -> Tuple[Optional[bytes], List[CloneSite]]:
    """``data`` with ``.clone()`` where each pair of the compiled
    ``function``'s inputs (sources of the duplicate-tensor guard) is made one
    tensor; (None, []) when no such place is found."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, []
    edits: List[Edit] = []
    sites: List[CloneSite] = []
    done: set = set()

    def clone(value: ast.AST, pair: Tuple[str, str]) -> None:
        if id(value) in done or not isinstance(value, _ATOMS):
            return
        done.add(id(value))
        edits.append(Edit(source.target(value, "BaseExpression"), _then("clone")))
        line, column = source.start(value)
        sites.append(CloneSite(line, column + 1, source.segment(value), pair))

    compiled = None
    for a, b in pairs:
        fa, fb = _LAST_FIELD.search(a), _LAST_FIELD.search(b)
        if fa and fb:  # two fields of one input: where one is set from the other
            fields = {fa.group("name"), fb.group("name")}
            if len(fields) == 2 and not _changes_field_in_place(source.tree, fields):
                for value in _field_aliases(source.tree, fa.group("name"), fb.group("name")):
                    clone(value, (a, b))
            continue
        names = [tr.argument_of(s) for s in (a, b)]
        if any(n is None for n in names):
            continue
        # two arguments: the calls that pass one expression for both
        if compiled is None:
            compiled = _compiled(source, model_of(source), function, firstlineno, traced) or False
        if not compiled:
            continue
        pa, pb = names[0][0], names[1][0]  # type: ignore[index]
        if _changed_in_place(compiled.fn, pa) or _changed_in_place(compiled.fn, pb):
            continue
        for call in compiled.calls:
            va, vb = passed_argument(call, compiled.fn, pa, compiled.method), passed_argument(call, compiled.fn, pb, compiled.method)
            if va is not None and vb is not None and va is not vb and ast.dump(va) == ast.dump(vb) and isinstance(vb, ast.Name):
                clone(vb, (a, b))
    if not edits:
        return None, []
    return _render_edits(source, data, edits), sites


def apply_alias_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Add ``.clone()`` where the inputs a code object of a guided file saw
    aliased are made one tensor (one finding, code ``TRACE``, safe, applied,
    per value changed)."""
    by_real = {_real(g.path): g for g in guided.files}
    for entry in trace.entries:
        path = entry_file(entry)
        pairs = tr.aliased_pairs(entry)
        if not pairs or path is None or tr.is_library_file(entry.filename):
            continue
        g = by_real.get(_real(path))
        if g is None:
            continue
        base, first, traced, _callers = _current(g, trace, entry)
        new, sites = clone_aliases(base, entry.name, first, pairs, traced)
        if new is None:
            continue
        g.new = new
        for site in sites:
            a, b = site.aliased
            message = (
                f"`{tr.display_name(entry)}` recompiled because `{a}` and `{b}` arrived as one tensor (from the trace:"
                f" duplicate-tensor guard): this makes them one; pass a copy, `{site.value}.clone()`"
            )
            finding = _applied_finding(g.display_path, site.line, site.column, message, f"`{site.value}.clone()`", CLONE_ALIAS.name)
            g.matches.append(Match(finding, entry, tr.ALIASING))


def no_mark_why(trace: tr.Trace, entry: tr.CodeEntry) -> str:
    """For the CI guard, which changes nothing: why no mark can be written
    for a shape recompile, where the file as it is now shows no call to put
    it before (what ``run --fix`` says); "" when marks can be written or
    the recompile is not one they cure."""
    unbacked = {key: tuple(sorted(d)) for key, d in tr.zero_one_sizes(entry).items()}
    dims = tr.varying_dims(entry)
    path = entry_file(entry)
    if not (dims or unbacked) or path is None or tr.is_library_file(entry.filename):
        return ""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ""
    traced, callers = _frames(trace, entry, path)
    new, _sites, why = mark_dynamic(data, entry.name, entry.firstlineno, dims, unbacked, traced, tr.hidden_varying_dims(entry), callers)
    return why if new is None else ""


def _current(g: GuidedFile, trace: tr.Trace, entry: tr.CodeEntry) -> Tuple[bytes, int, List[Tuple[str, int]], List[Tuple[int, str, bool]]]:
    """The guided file's bytes as the fixes so far left them, the entry's
    first line in them, (name, first line) of the file's traced code
    objects in them, and (line, function, as a module) of the frames of
    this file the trace shows calling the entry
    (:attr:`codemods.trace.read.CodeEntry.callers`, ``module_callers``)."""

    base, moved = g.current()
    traced, callers = _frames(trace, entry, g.path, moved)
    return base, moved(entry.firstlineno), traced, callers


def _frames(trace: tr.Trace, entry: tr.CodeEntry, path: str, moved=lambda n: n) -> Tuple[List[Tuple[str, int]], List[Tuple[int, str, bool]]]:
    """(name, first line) of the traced code objects of the file ``path``,
    and (line, function, as a module) of its frames the trace shows calling
    ``entry``; lines through ``moved`` (the original file's to the current)."""
    real = _real(path)
    traced = [(e.name, moved(e.firstlineno)) for e in trace.entries if entry_file(e) is not None and _real(entry_file(e)) == real]
    callers = [(moved(line), name, False) for file, line, name in entry.callers if _real(file) == real]
    callers += [(moved(line), name, True) for file, line, name in entry.module_callers if _real(file) == real]
    return traced, callers
