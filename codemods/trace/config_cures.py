"""Fixes made from trace evidence: a torch setting, for the compiled
function that needs it or once after the imports of the file whose compiled
code recompiled, where the trace shows what the setting lifts.  Two keep in
the graph what broke it (below); one stops duck sizing (at the end).

A graph break splits a compiled function into frames resumed after it,
whose guards on the values around the break fail on the next call.  Two
breaks have a setting that lifts them (:data:`codemods.trace.read.CAPTURE_BREAKS`,
read from a compilation's ``restart_reasons``); the trace shows a compile
that broke so in a file whose compiled code recompiled, and this fix sets
the setting for that compiled function (a ``torch._dynamo.config.patch``
wrapper, below) or, where the file does not show how it is compiled,
``torch._dynamo.config.<setting> = True`` right after the module-level
``import torch`` (and the imports right after it) of the file of the code
that broke (it runs before that code is traced):

- ``capture_scalar_outputs`` for ``Tensor.item()`` ("Unsupported
  Tensor.item() call with capture_scalar_outputs=False").  pytorch/rl
  before #4094: a compiled ``extend_and_sample`` writes a replay storage's
  cursor as ``int(cursor[-1].item())``, the frame resumed after it guards
  ``___stack2 == 0`` (measured on 2.13,
  ``benchmarks/recall/torchrl_storage_revision_counter``: 6 -> 3 graphs,
  same output; the project's fix keeps the cursor a tensor).
- ``capture_dynamic_output_shape_ops`` for an op whose output size depends
  on the data ("Dynamic shape operator": ``torch.where(mask)``, a boolean
  index, ``torch.unique``).  kornia before 7d73de442: the sub-pixel
  refinement of NMS maxima, compiled, breaks at each; every frame resumed
  after one gets tensors of the count the data gave, a new count each
  image, and recompiles on their sizes (and again at the 0/1
  specialisation of an empty octave).  The setting is the first half of
  kornia's fix and torch's own hint (measured on 2.13,
  ``benchmarks/recall/kornia_quadinterp_nms_count``: 15 -> 3 graphs, same
  output; the rest of the fix removes an ``N == 0`` branch and the
  ``unique``: no rewrite makes that).

Both are set for the compiled function that broke only where it can be
(:func:`_apply_scoped`: a ``torch._dynamo.config.patch`` wrapper, safe);
elsewhere globally, unsafe: every compiled function of the process gets
it, and a value or size kept in the graph is data-dependent -- compiled
code that branches on it graph-breaks there or, under ``fullgraph=True``,
fails to compile (``run --fix`` then sees another exit code, or no fewer
graphs, and restores the file).  Applied with ``--unsafe-fixes``; each
setting once per run, in the first file the trace shows breaking so.

Duck sizing: a compile under dynamic shapes gives two inputs' sizes that
happen to be equal one symbol, and guards their equality; the next call
where they differ recompiles (torch 2.13 comments the guard "duck sizing
added this equality ... set torch.fx.experimental._config.use_duck_shape =
False").  llm-compressor before aa5f4b0: the MSE observer's compiled chunk
gets a view whose base's width equals another input's length (64), the next
layer's does not (measured on 2.13,
``benchmarks/recall/llmcompressor_mse_observer_unbacked``: 3 -> 2 graphs with
the setting, the project's own fix, a clone, also 2).  Safe: a setting that
changes no value (each size gets its own symbol); ``run --fix`` keeps it only
if fewer graphs compile with the same output and exit code.  Not where a
mark before the call (``maybe_mark_dynamic`` of the data's dim, which duck
sizing leaves alone: measured, 2 -> 1) cures the code object already.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .._lazy import cst

from . import read as tr
from .registry import CAPTURE_DYNAMIC_SHAPES, CAPTURE_SCALARS, DYNAMIC_SOURCES, NO_DUCK_SHAPE, PARAMETER_SHAPES, TraceCure
from ..analysis.params import parameter_names
from ..analysis.placement import config_mentions, torch_expr
from ..analysis.source import statement_target
from ..findings import Edit, FileError
from ..cst_edits import LINE_LENGTH, insert_after_node
from .cures import _applied_finding, _current, _render_edits, _torch_import
from .match import Guided, Match, _real, entry_file


@dataclass(frozen=True)
class ConfigCure:
    """One setting: where it lives under ``torch`` (``_dynamo.config``), its
    name and the value set, its cure's declaration, what the trace shows of
    it in one code object (:attr:`shows`: the breaks it lifts, the guards it
    stops; empty: nothing), how the message says that, what the setting
    keeps, and the risk that makes it unsafe ("" for a safe one)."""

    module: Tuple[str, ...]
    flag: str
    value: bool
    cure: TraceCure
    shows: Callable[[tr.CodeEntry], List[str]]
    showed: Callable[[List[str]], str]
    keeps: str
    risk: str = ""
    #: not for a code object whose shapes a local fix (a mark before the
    #: call) cures already: the mark does as well without a global setting
    local_first: bool = False
    #: set for the compiled functions that show it only (:func:`_apply_scoped`),
    #: where they can be seen, before falling back to the global setting
    scoped: bool = False
    #: why the scoped setting is safe, as the finding says it
    scoped_safe: str = ""
    #: the scoped setting may go on a compile with fullgraph=True (it keeps
    #: nothing in the graph that could fail to compile there)
    fullgraph_ok: bool = False
    #: the causes the fix cures in the table, the first the cured code object
    #: shows (else its first cause)
    causes: Tuple[str, ...] = ()
    #: the scoped setting may go on the ``def`` of a module's forward the
    #: trace shows called as a module, where dynamo meets the patch inside
    #: the compiled frame: it breaks the graph there (an error under
    #: fullgraph=True), so only for a setting that cures a graph break anyway
    on_def: bool = True

    @property
    def setting(self) -> str:
        return f"torch.{'.'.join(self.module)}.{self.flag} = {self.value}"


def _broke_at(flag: str) -> Callable[[tr.CodeEntry], List[str]]:
    return lambda entry: list(entry.capture_breaks.get(flag, ()))


def _break_phrase(broke: List[str]) -> str:
    at = ", ".join(f"`{w}`" for w in dict.fromkeys(broke))
    return f"broke the graph at {at} (in {len(broke)} compile{'s' if len(broke) != 1 else ''}, from the trace)"


#: why a capture setting for the compiled function that broke is safe
_BREAKS_SAFE = (
    "(the breaks show no fullgraph=True, so a branch on such a value breaks the graph there;"
    " other compiled code keeps the setting it had)"
)


CONFIG_CURES: Tuple[ConfigCure, ...] = (
    ConfigCure(
        ("_dynamo", "config"),
        tr.CAPTURE_SCALARS,
        True,
        CAPTURE_SCALARS,
        _broke_at(tr.CAPTURE_SCALARS),
        _break_phrase,
        "so `.item()` stays in the graph",
        "compiled code that branches on such a value breaks the graph there, or fails to compile under fullgraph=True",
        scoped=True,
        scoped_safe=_BREAKS_SAFE,
    ),
    ConfigCure(
        ("_dynamo", "config"),
        tr.CAPTURE_DYNAMIC_SHAPES,
        True,
        CAPTURE_DYNAMIC_SHAPES,
        _broke_at(tr.CAPTURE_DYNAMIC_SHAPES),
        _break_phrase,
        "so ops whose output size depends on the data stay in the graph (sizes unbacked)",
        "compiled code that branches on such a size breaks the graph there, or fails to compile under fullgraph=True",
        scoped=True,
        scoped_safe=_BREAKS_SAFE,
    ),
    ConfigCure(
        ("_dynamo", "config"),
        "force_parameter_static_shapes",
        False,
        PARAMETER_SHAPES,
        tr.parameter_sized,
        lambda guards: "recompiled on the size of an nn.Parameter or a size tied to one (" + "; ".join(guards) + ", from the trace)",
        "so a parameter whose size differs between calls gets a dynamic size, as other tensors do",
        "every compiled function's parameters get dynamic sizes, which can make its kernels slower",
        scoped=True,
        scoped_safe="(a value-neutral setting; other compiled code keeps static parameter sizes)",
        fullgraph_ok=True,
        causes=(tr.PARAMETER_SHAPE, tr.TENSOR_SHAPE),
        on_def=False,
    ),
    ConfigCure(
        ("fx", "experimental", "_config"),
        "use_duck_shape",
        False,
        NO_DUCK_SHAPE,
        tr.duck_sized,
        lambda guards: "recompiled on an equality duck sizing added (" + ", ".join(f"`{g}`" for g in guards) + ", from the trace)",
        "so sizes that happen to be equal once get their own symbols",
        local_first=True,
    ),
)


def _set_after_imports(data: bytes, name: str, statement: Callable[[object], "cst.BaseSmallStatement"]) -> Tuple[Optional[bytes], int]:
    """``data`` with ``statement(model)`` (a setting of the config ``name``)
    after its module-level ``import torch`` and the imports that follow it,
    and the line it follows; (None, 0) when the file sets or reads that
    config already, or imports no torch at module level."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, 0
    model = model_of(source)
    stmt = _torch_import(source)
    if model.torch_alias is None or stmt is None or config_mentions(source, [name]):
        return None, 0
    setting = cst.SimpleStatementLine(body=[statement(model)])
    return _render_edits(source, data, [insert_after_node(statement_target(source, stmt), setting)]), stmt.lineno


def config_flag(data: bytes, cure: ConfigCure) -> Tuple[Optional[bytes], int]:
    """``data`` with ``cure``'s setting after the imports (:func:`_set_after_imports`)."""
    return _set_after_imports(
        data, cure.flag,
        lambda model: cst.Assign(targets=[cst.AssignTarget(torch_expr(model, *cure.module, cure.flag))], value=cst.Name(str(cure.value))),
    )


def capture_flag(data: bytes, flag: str = tr.CAPTURE_SCALARS) -> Tuple[Optional[bytes], int]:
    """:func:`config_flag` for the capture setting named ``flag``."""
    return config_flag(data, next(c for c in CONFIG_CURES if c.flag == flag))


def apply_config_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """For each setting of :data:`CONFIG_CURES`: set it in the first guided
    file whose code the trace shows needing it and recompiled (one finding,
    code ``TRACE``; an unsafe one applied with ``--unsafe-fixes``)."""
    for cure in CONFIG_CURES:
        _apply(trace, guided, unsafe_fixes, cure)


def _cured_entry(mine: List[tr.CodeEntry], cure: ConfigCure) -> tr.CodeEntry:
    """The code object of a file whose recompiles the setting cures (``run
    --fix`` judges the fix by its graphs): the most recompiled of the frames
    resumed after the break it lifts (the setting leaves none), else of
    those that show it, else of the file's."""
    showing = (
        [e for e in mine if e.resumed_after.get(cure.flag) and e.recompiles]
        or [e for e in mine if cure.shows(e) and e.recompiles]
        or mine
    )
    return max(showing, key=lambda e: e.recompiles)


def _cured_cause(entry: tr.CodeEntry, cure: ConfigCure) -> str:
    """The cause of ``entry``'s row the setting cures."""
    return next((c for c in cure.causes if c in entry.causes), entry.causes[0] if entry.causes else tr.RESUME_VALUE)


def _apply(trace: tr.Trace, guided: Guided, unsafe_fixes: bool, cure: ConfigCure) -> None:
    by_real = {_real(g.path): g for g in guided.files}
    recompiled = {_real(entry_file(e)) for e in trace.entries if e.recompiles and entry_file(e) and not tr.is_library_file(e.filename)}
    if cure.scoped and _apply_scoped(trace, guided, cure, recompiled):
        return
    for entry in trace.entries:
        path = entry_file(entry)
        if not cure.shows(entry) or path is None or tr.is_library_file(entry.filename) or _real(path) not in recompiled:
            continue
        g = by_real.get(_real(path))
        if g is None:
            continue
        if cure.local_first and any(m.entry is entry and m.cause == tr.TENSOR_SHAPE and m.finding.applied for m in g.matches):
            continue
        base = g.new if g.new is not None else g.original
        new, line = config_flag(base, cure)
        if new is None:
            return
        unsafe = bool(cure.risk)
        if unsafe_fixes or not unsafe:
            g.new = new
        mine = [e for e in trace.entries if entry_file(e) and _real(entry_file(e)) == _real(path)]
        shown = [what for e in mine for what in cure.shows(e)]
        resumed = sum(e.recompiles for e in mine)
        risk = f" (unsafe: a global setting; {cure.risk})" if unsafe else ""
        message = (
            f"`{tr.display_name(entry)}` {cure.showed(shown)} and this file's compiled code recompiled"
            f" {resumed} time{'s' if resumed != 1 else ''}: set `{cure.setting}` after the imports, {cure.keeps}{risk}"
        )
        title = f"set `{cure.setting}`"
        if unsafe:
            finding = _applied_finding(g.display_path, line, 1, message, title, cure.cure.name, unsafe_fixes=unsafe_fixes)
        else:
            finding = _applied_finding(g.display_path, line, 1, message, title, cure.cure.name)
        cured = _cured_entry(mine, cure)
        g.matches.append(Match(finding, cured, _cured_cause(cured, cure)))
        return


# -- the capture settings for the compiled functions that broke only ---------------------
#
# The setting is read when dynamo traces, so ``torch._dynamo.config.patch(
# <setting>=True)`` around a compiled callable sets it for the frames its
# calls compile (the function and what it calls; the patch is a context
# variable, re-entrant, and dynamo honours it when the callable is called
# from other compiled code: measured on 2.13) and for nothing else.  Liger
# before ef420c3d (``compiled_compute_loss = torch.compile(compute_loss)``,
# the SAPO masks): 6 -> 1 graphs; speculators before dbd631b1 (the Eagle3
# ``forward`` under ``@conditional_torch_compile``): 17 -> 11; pytorch/rl
# before #4094 (``@torch.compile def extend_and_sample``): 6 -> 3; the same
# counts as the global setting, with the same output.
#
# Safe where it applies: a compiled function the trace shows breaking so is
# not compiled with ``fullgraph=True`` (its break would have been an error),
# so a branch on such a value or size breaks the graph there (measured: the
# same values) rather than failing, and the setting reaches no other
# compiled code; ``run --fix`` keeps it only with fewer graphs, the same
# output and exit code.  It applies to a function of a guided file whose own
# code object broke so and which that file compiles as a function:
# ``@torch.compile`` on it, a project decorator that compiles its argument
# (``@conditional_torch_compile``), or ``torch.compile(f)`` /
# ``torch.compile(functools.partial(f, ...))`` (the call is wrapped); or a
# ``def`` the trace shows called as a module (a module's ``forward``, or a
# function installed as one: the patch on the ``def``, which dynamo traces).
# Anything else (a function compiled in another file, a forward of a class
# defined elsewhere) gets the global setting, unsafe, as before.


def _partial_of(model, value: ast.AST) -> Optional[ast.AST]:
    """The function ``functools.partial(f, ...)`` binds, when it is a ``def``
    of this module (``f``, ``Cls.method``)."""
    if not (isinstance(value, ast.Call) and value.args and "functools.partial" in model.qualified_names(value.func)):
        return None
    fn = value.args[0]
    if isinstance(fn, ast.Name):
        return model.resolve_function(fn)
    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name):
        cls = model._class_named(fn.value)
        return model.method(cls, fn.attr) if cls is not None else None
    return None


@dataclass(frozen=True)
class _Scope:
    """Where the patch goes for one compiled function: ``decorator`` (into
    ``node``'s decorator list at ``index``; its length: right above the
    ``def``) or ``wrap`` (around the compile call ``node``)."""

    how: str
    node: ast.AST
    index: int = 0

    @property
    def line(self) -> int:
        decorators = getattr(self.node, "decorator_list", [])
        return decorators[self.index].lineno if self.how == "decorator" and self.index < len(decorators) else self.node.lineno  # type: ignore[attr-defined]

    def edit(self, source, model, cure: ConfigCure) -> Edit:
        if self.how == "decorator":
            return Edit(statement_target(source, self.node), functools.partial(_patch_decorator, model, cure, self.index))  # type: ignore[arg-type]
        wrapped = len(source.lines[self.node.lineno - 1]) + len(f"{_patch_text(cure)}()") > LINE_LENGTH  # type: ignore[attr-defined]
        return Edit(source.target(self.node, "Call"), functools.partial(_patch_wrap, model, cure, wrapped))


def _patch_text(cure: ConfigCure) -> str:
    return f"torch._dynamo.config.patch({cure.flag}={cure.value})"


def _compiled_as_function(model, fn: ast.AST, fullgraph_ok: bool = False) -> Optional[_Scope]:
    """How this module compiles the function ``fn`` so that a wrapper of it
    can carry the setting: the decorator that compiles it (the patch right
    above it) or the compile call (wrapped); None when it is not compiled so
    here (or with fullgraph=True)."""
    def above(dec: ast.AST) -> _Scope:
        return _Scope("decorator", fn, next(i for i, d in enumerate(fn.decorator_list) if d is dec))  # type: ignore[attr-defined]

    wraps = []
    for site in model.compile_sites:
        if site.option_value("fullgraph") is True and not fullgraph_ok:
            continue
        if site.form == "decorator" and site.target is fn:
            return above(site.options_call if site.options_call is not None else site.node)
        if site.form == "wrap":
            wraps.append(site)
    project = model.project_decorated.get(fn)
    if project is not None and (fullgraph_ok or project[0].option_value("fullgraph") is not True):
        return above(project[1])  # a project decorator whose body compiles its argument
    for site in wraps:
        target = site.target
        held = list(model.assigned_values(target)) if isinstance(target, ast.Name) else []
        if site.target_def is fn or _partial_of(model, target) is fn or (held and all(_partial_of(model, v) is fn for v in held)):
            return _Scope("wrap", site.node)
    return None


def _broken_def(source, entry: tr.CodeEntry, line: int) -> Optional[ast.AST]:
    """The ``def`` of a code object that broke: its own, or, for a frame
    resumed after a break (``torch_dynamo_resume_in_f_at_13``), the ``f``
    whose body holds that line."""
    from ..analysis.compile_sites import code_def

    function = tr.resumed_function(entry.name)
    if function is None:
        return code_def(source, entry.name, line)
    return next(
        (fn for fn in source.nodes(ast.FunctionDef) + source.nodes(ast.AsyncFunctionDef)
         if fn.name == function and fn.lineno <= line <= fn.end_lineno),  # type: ignore[attr-defined]
        None,
    )


def _patch_call(model, cure: ConfigCure) -> "cst.Call":
    """``torch._dynamo.config.patch(<flag>=<value>)``."""
    no_space = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return cst.Call(func=torch_expr(model, "_dynamo", "config", "patch"), args=[cst.Arg(keyword=cst.Name(cure.flag), value=cst.Name(str(cure.value)), equal=no_space)])


def _patch_decorator(model, cure: ConfigCure, index: int, node: "cst.FunctionDef") -> "cst.FunctionDef":
    decorators = list(node.decorators)
    decorators.insert(index, cst.Decorator(decorator=_patch_call(model, cure)))
    return node.with_changes(decorators=decorators)


def _patch_wrap(model, cure: ConfigCure, wrapped: bool, node: "cst.Call") -> "cst.Call":
    """``patch(...)(<node>)``; with ``wrapped``, laid out as black does::

        compiled_loss = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)(
            torch.compile(loss_fn, backend="eager")
        ) if compiled else loss_fn
    """
    if not wrapped:
        return cst.Call(func=_patch_call(model, cure), args=[cst.Arg(value=node)])
    return cst.Call(
        func=_patch_call(model, cure),
        whitespace_before_args=cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace("    ")),
        args=[cst.Arg(value=node, whitespace_after_arg=cst.ParenthesizedWhitespace(indent=True))],
    )


@dataclass
class _ScopedFile:
    """A guided file the scoped setting edits: its bytes as the fixes so far
    left them, read once, and the functions that get the patch (by the node
    edited: one patch each) with their names."""

    g: object
    source: object
    model: object
    base: bytes
    moved: Callable[[int], int]
    scopes: Dict[ast.AST, _Scope]
    names: List[str]

    def add(self, scope: _Scope, fn: ast.AST) -> None:
        """The patch for ``fn`` at ``scope`` (once per place)."""
        if scope.node not in self.scopes:
            self.scopes[scope.node] = scope
            self.names.append(fn.name)  # type: ignore[attr-defined]


def _apply_scoped(trace: tr.Trace, guided: Guided, cure: ConfigCure, recompiled: set) -> bool:
    """The setting for the compiled functions whose code objects broke so
    (or were resumed after such a break), in guided files whose compiled
    code recompiled, each through a ``config.patch`` wrapper
    (:func:`_compiled_as_function`; else on a ``def`` the trace shows called
    as a module); one safe finding per file.  A function that broke but is
    not compiled itself (one a compiled function called) is reached through
    the compiled one; ``run --fix``'s rerun shows whether it was.  False,
    with nothing changed, when no function that broke is compiled so, or a
    file sets the setting already (the global setting is offered then, or
    nothing)."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    by_real = {_real(g.path): g for g in guided.files}
    broke = [
        e for e in trace.entries
        if cure.shows(e) and entry_file(e) and not tr.is_library_file(e.filename) and _real(entry_file(e)) in recompiled
    ]
    files: Dict[str, _ScopedFile] = {}
    module_roots: List[Tuple[_ScopedFile, ast.AST, tr.CodeEntry]] = []
    for entry in broke:
        g = by_real.get(_real(entry_file(entry)))
        if g is None:
            continue
        f = files.get(g.path)
        if f is None:
            base, moved = g.current()
            try:
                source = parse_ast("<trace>", base)
            except FileError:
                return False
            if config_mentions(source, [cure.flag]):
                return False
            f = files[g.path] = _ScopedFile(g, source, model_of(source), base, moved, {}, [])
        fn = _broken_def(f.source, entry, f.moved(entry.firstlineno))
        scope = _compiled_as_function(f.model, fn, cure.fullgraph_ok) if fn is not None else None
        if scope is not None:
            f.add(scope, fn)
        elif fn is not None and entry.module_callers and cure.on_def:
            module_roots.append((f, fn, entry))
    if not any(f.scopes for f in files.values()):
        # none compiled as a function: a `def` the trace shows called as a
        # module (a module's `forward`, or a function installed as one) gets
        # the patch on itself (a wrapper of `torch.compile(model)` would
        # replace the module), which dynamo traces with the body (kornia
        # before 7d73de442's `torch.compile(mod)`: 15 -> 3 graphs, as with the
        # global setting; trl before 00d6209d's `model.forward =
        # _chunked_ce_forward`: 12 -> 10).  The first such code object of a
        # module call only: the frames compiled after it for the same call
        # are functions it called (2.13's stack leaves their caller out, so
        # they look called by the module too; a patch on one of them is
        # traced where it is called and breaks nothing, but cures less:
        # measured, torchrl 6 -> 5 instead of 6 -> 3)
        seen: set = set()
        for f, fn, entry in module_roots:
            if not seen.intersection(entry.module_callers):
                seen.update(entry.module_callers)
                f.add(_Scope("decorator", fn, len(fn.decorator_list)), fn)  # type: ignore[attr-defined]
    files = {path: f for path, f in files.items() if f.scopes}
    for f in files.values():
        g = f.g
        g.new = _render_edits(f.source, f.base, [s.edit(f.source, f.model, cure) for s in f.scopes.values()])  # type: ignore[attr-defined]
        mine = [e for e in trace.entries if entry_file(e) and _real(entry_file(e)) == _real(g.path)]  # type: ignore[attr-defined]
        shown = [what for e in mine for what in cure.shows(e)]
        resumed = sum(e.recompiles for e in mine)
        which = ", ".join(f"`{n}`" for n in f.names)
        patch = _patch_text(cure)
        message = (
            f"{which} {cure.showed(shown)} and this file's compiled code recompiled {resumed} time{'s' if resumed != 1 else ''}:"
            f" set `{cure.flag}` for {'it' if len(f.names) == 1 else 'them'} only, `{patch}`,"
            f" {cure.keeps} {cure.scoped_safe}"
        )
        line = min(s.line for s in f.scopes.values())
        finding = _applied_finding(g.display_path, line, 1, message, f"`{patch}` on {which}", cure.cure.name)  # type: ignore[attr-defined]
        cured = _cured_entry(mine, cure)
        g.matches.append(Match(finding, cured, _cured_cause(cured, cure)))  # type: ignore[attr-defined]
    return bool(files)


# -- dynamic_sources: int arguments automatic dynamic made symbolic ------------------------
#
# An int argument that changes (a per-batch maximum length for varlen
# attention, a document count) costs one recompile before automatic dynamic
# makes it symbolic; a tensor whose size changed at the same call recompiles
# again once that is cured (the trace shows only the first failing guard; the
# graphs show the tensor's dim compiled static, then symbolic:
# :func:`codemods.trace.read.hidden_varying_dims`).  OLMo-core 23a3af57 named
# both in ``torch.compiler.config.dynamic_sources`` (measured on 2.13,
# ``benchmarks/recall/olmo_core_doc_lens_dynamic``: 3 -> 2 graphs; the int
# alone: 3 -> 3).  The setting matches sources by name in every compiled
# function: safe when no other code object of the run has an input of that
# name, unsafe otherwise.


def _hidden_sources(fn, hidden: Dict[str, Tuple[int, ...]]) -> List[str]:
    """``L['x']:0`` entries for the hidden dims whose graph input is a
    parameter of ``fn`` or an entry of its ``**kwargs``."""
    params = parameter_names(fn)
    kw = fn.args.kwarg.arg if fn.args.kwarg is not None else None
    out: List[str] = []
    for key, dims in hidden.items():
        source = next((p for p in params if tr.graph_input(p) == key), None)
        if source is None and kw is not None and key.startswith(tr.graph_input(kw)):
            rest = key[len(tr.graph_input(kw)) : -1]
            candidate = f"{kw}['{rest}']"
            source = candidate if tr.graph_input(candidate) == key else None
        raw = tr.raw_source(source) if source is not None else None
        if raw is not None:
            out.extend(f"{raw}:{dim}" for dim in dims)
    return out


def _def_at(data: bytes, name: str, firstlineno: int):
    """The ``def`` of the traced code object ``name`` starting at ``firstlineno``
    (its decorator or ``def`` line) in ``data``; None when not there."""
    from ..analysis.compile_sites import code_def
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None
    return code_def(source, name, firstlineno)


def _sources_text(sources: Sequence[str]) -> str:
    """The string appended to ``dynamic_sources``: each source, then a comma."""
    return "".join(f"{s}," for s in sources)


def dynamic_sources_setting(data: bytes, sources: Sequence[str]) -> Tuple[Optional[bytes], int]:
    """``data`` with ``torch.compiler.config.dynamic_sources += "<sources>,"``
    after the imports (:func:`_set_after_imports`)."""
    return _set_after_imports(
        data, "dynamic_sources",
        lambda model: cst.AugAssign(target=torch_expr(model, "compiler", "config", "dynamic_sources"), operator=cst.AddAssign(), value=cst.SimpleString(f'"{_sources_text(sources)}"')),
    )


def _inputs_named(entry: tr.CodeEntry) -> set:
    """The graph inputs (``l_x_``) and guarded argument sources of a code object."""
    names = {key for sizes in entry.graph_sizes for key in sizes}
    return names | {tr.graph_input(r.source) for r in entry.reasons if r.source}


def apply_dynamic_sources_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """For each code object of a guided file that recompiled on int
    arguments automatic dynamic made symbolic (and no applied finding cures
    that already), or on int attributes of ``self`` that decide a test
    (:func:`codemods.trace.read.tested_attributes`): their sources and the
    hidden sizes of its inputs in ``dynamic_sources``, one statement per
    file (code ``TRACE``)."""
    by_real = {_real(g.path): g for g in guided.files}
    for entry in trace.entries:
        ints = tr.dynamic_sources_named(entry)
        attrs = tr.tested_attributes(entry)
        path = entry_file(entry)
        if not (ints or attrs) or path is None:
            continue
        g = by_real.get(_real(path))
        if g is None:
            continue
        if any(m.entry is entry and m.cause == tr.INT_ARG and m.finding.applied for m in g.matches):
            ints = []
        if not (ints or attrs):
            continue
        # torch's own code compiled by this file (`torch.compile(optimizer.step)`):
        # the setting goes in the file that reached it, which ran before the compile
        library = tr.is_library_file(entry.filename)
        base, first, _traced, _callers = _current(g, trace, entry)
        fn = None if library or not ints else _def_at(base, entry.name, first)
        hidden_dims = {} if library or not ints else tr.hidden_varying_dims(entry)
        hidden = _hidden_sources(fn, hidden_dims) if fn is not None else []
        sources = [tr.raw_source(i) for i in ints + attrs] + hidden
        new, line = dynamic_sources_setting(base, sources)  # type: ignore[arg-type]
        if new is None:
            continue
        names = {tr.graph_input(i) for i in ints + attrs} | set(hidden_dims)
        shared = sorted({tr.display_name(e) for e in trace.entries if e is not entry and names & _inputs_named(e)})
        unsafe = bool(shared)
        if unsafe_fixes or not unsafe:
            g.new = new
        setting = f'torch.compiler.config.dynamic_sources += "{_sources_text(sources)}"'
        what = []
        if ints:
            failed = tr.dynamic_int_arguments(entry)
            behind = [i for i in ints if i not in failed]
            also = f", and its graphs show {', '.join(f'`{h}`' for h in hidden)} compiled static, then symbolic (changed at the same call)" if hidden else ""
            if behind:
                also += f"; the recompile also made {', '.join(f'`{b}`' for b in behind)} symbolic (changed at the same call, behind the guard that failed first)"
            what.append(f"int argument{'s' if len(failed) > 1 else ''} {', '.join(f'`{i}`' for i in failed)} (automatic dynamic then made {'them' if len(failed) > 1 else 'it'} symbolic){also}")
        if attrs:
            tests = ", ".join(dict.fromkeys(f"`{r.text}`" for r in tr.int_tests(entry, tr.MODULE_INT_ATTR) if r.source in attrs))
            what.append(
                f"int attribute{'s' if len(attrs) > 1 else ''} {', '.join(f'`{a}`' for a in attrs)}, compiled at {'their' if len(attrs) > 1 else 'its'} first value and then"
                f" symbolic, deciding a test ({tests}: each outcome stays a graph, the one for the first value goes)"
            )
        risk = f" (unsafe: {', '.join(f'`{n}`' for n in shared)} also compile{'s' if len(shared) == 1 else ''} an input of that name, which the setting makes dynamic there too)" if unsafe else ""
        message = (
            f"`{tr.display_name(entry)}` recompiled on {'; and on '.join(what)}: make {'them' if len(sources) > 1 else 'it'} dynamic from the first compile,"
            f" `{setting}` after the imports{risk}"
        )
        title = "append to `torch.compiler.config.dynamic_sources`"
        finding = _applied_finding(g.display_path, line, 1, message, title, DYNAMIC_SOURCES.name, unsafe_fixes=unsafe_fixes if unsafe else None)
        g.matches.append(Match(finding, entry, tr.INT_ARG if ints else tr.MODULE_INT_ATTR))
