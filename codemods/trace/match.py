"""Matching a trace to the findings: which files and compile sites a
``TORCH_TRACE`` implicates, and which findings there cure the recompiles it
observed.

A finding *matches* a traced code object when it is in the same file and

- it lies on a compile site (the compile call, its options, or a call of the
  compiled callable) whose compiled function -- the decorated or wrapped
  ``def``, or ``forward`` of a compiled ``nn.Module`` -- starts at the code
  object's ``co_firstlineno`` (on Python 3.11 the first decorator's line, or
  the ``def`` line: both are accepted), and
- its rule cures one of the causes observed for that code object (the rule's
  ``cures``, read by :func:`codemods.trace.read.rule_cures`).

Optimizer-lr recompiles happen in torch's own ``step``; they are mapped to the
user file whose frame called it, and match every FR004 finding of that file.

A matched unsafe fix whose rule is marked ``upgrade`` for the cause becomes
safe: the trace is the evidence of variation it lacked.  The finding's message
says so.  This module never imports torch.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple


from . import read as tr
from ..analysis.compile_sites import def_first_lines
from ..analysis.context import FileContext
from ..findings import FileError, Finding, Fix, Safety



@dataclass
class Match:
    finding: Finding
    entry: tr.CodeEntry
    cause: str
    upgraded: bool = False
    #: other code objects whose recompiles of this cause the finding cures
    #: (blocks of two classes given one class per call: FR019)
    also: Tuple[tr.CodeEntry, ...] = ()


@dataclass
class GuidedFile:
    path: str
    display_path: str
    original: bytes
    new: Optional[bytes] = None
    matches: List[Match] = field(default_factory=list)
    #: findings of this file the trace does not implicate (not applied)
    others: List[Finding] = field(default_factory=list)
    #: the analysis the matches come from (a review starts from it)
    ctx: Optional[FileContext] = None

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.original

    def current(self) -> Tuple[bytes, Callable[[int], int]]:
        """The file as the fixes made so far leave it (``new``, else the
        original), and where a line of the original (the one the trace
        names) is in it now."""
        from ..analysis.lines import line_map

        base = self.new if self.new is not None else self.original
        return base, (line_map(self.original, base) if base != self.original else (lambda n: n))


@dataclass
class Guided:
    files: List[GuidedFile] = field(default_factory=list)
    errors: List[Tuple[str, str]] = field(default_factory=list)
    #: the project index the files were analysed with (built once per run)
    project: object = None

    @property
    def matches(self) -> List[Match]:
        return [m for f in self.files for m in f.matches]


# -- files the trace names -----------------------------------------------------


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def entry_file(entry: tr.CodeEntry) -> Optional[str]:
    """The user file a code object belongs to (torch-internal code objects: the
    file of the user frame that reached them)."""
    if entry.filename and not tr.is_library_file(entry.filename):
        return entry.filename
    if entry.user_frame is not None:
        return entry.user_frame[0]
    return None


def implicated_files(
    trace: tr.Trace, within: Optional[Sequence[str]] = None
) -> List[str]:
    """Existing user files named by recompiling code objects, in trace order;
    with ``within``, only files under those paths."""
    roots = [_real(p) for p in within] if within else None
    out: List[str] = []
    seen = set()
    for entry in trace.entries:
        if not entry.reasons and not entry.limit_hit:
            continue
        path = entry_file(entry)
        if not path or not os.path.isfile(path):
            continue
        real = _real(path)
        if real in seen:
            continue
        if roots is not None and not any(
            real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots
        ):
            continue
        seen.add(real)
        out.append(path)
    return out


def module_file(module: str, paths: Sequence[str]) -> Optional[str]:
    """The file of ``paths`` that is the module ``module`` (dotted) of a run
    from the folder above it: ``a/b.py`` or ``a/b/__init__.py``; None when
    none is (``__main__``, a library)."""
    if not module or module == "__main__":
        return None
    tail = os.sep + module.replace(".", os.sep)
    for path in paths:
        stem = _real(path)[: -len(".py")] if path.endswith(".py") else None
        if stem is not None and (stem.endswith(tail) or stem.endswith(tail + os.sep + "__init__")):
            return path
    return None


def made_class_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """Files of ``paths`` whose functions made the classes that type guards
    of recompiling code name (:func:`codemods.trace.read.made_classes`):
    the compiled code may be in another file, or a library's."""
    out: List[str] = []
    for entry in trace.entries:
        for module, _ in tr.made_classes(entry):
            path = module_file(module, paths)
            if path is not None and path not in out:
                out.append(path)
    return out


# -- matching ------------------------------------------------------------------


def _forward(cls: ast.ClassDef) -> Optional[ast.AST]:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward":
            return stmt
    return None


def site_first_lines(model, site) -> List[int]:
    """Lines a traced code object of this compile site can start on."""
    lines: List[int] = []
    if site.target_def is not None:
        lines.extend(def_first_lines(site.target_def))
    for fn in {id(f): f for f in site.call_defs.values() if f is not None}.values():  # compiled by a project decorator
        lines.extend(def_first_lines(fn))
    if site.target is not None and not isinstance(site.target, (ast.FunctionDef, ast.AsyncFunctionDef)):
        cls = model.module_class_of(site.target)
        if cls is None and isinstance(site.target, ast.Attribute) and isinstance(site.target.value, ast.Name):
            # model.compile() / torch.compile(model.forward)
            cls = model.module_class_of(site.target.value)
        if cls is None:
            # `submodule.forward = torch.compile(submodule.forward)` with `submodule:
            # NodeSubmodule` a parameter (mstar's engine): any module class here
            # deriving from the annotated one may be what is passed
            holder = site.target.value if isinstance(site.target, ast.Attribute) else site.target
            for sub in _annotated_module_classes(model, holder):
                fwd = _forward(sub)
                if fwd is not None:
                    lines.extend(def_first_lines(fwd))
        if cls is not None:
            fwd = _forward(cls)
            if fwd is not None:
                lines.extend(def_first_lines(fwd))
        elif isinstance(site.target, ast.Attribute) and isinstance(site.target.value, ast.Name) and site.target.value.id == "self" and site.target.attr in ("__call__", "forward"):
            # `torch.compile(self.__call__)` in a method of a mixin
            # (transformers' GenerationMixin.get_compiled_call): the forward
            # of each module class here that derives from it
            owner = model.source.enclosing(site.node, ast.ClassDef)
            for sub in model.classes_deriving(owner) if isinstance(owner, ast.ClassDef) else ():
                fwd = _forward(sub) if model.is_module_class(sub) else None
                if fwd is not None:
                    lines.extend(def_first_lines(fwd))
    return lines


def _annotated_module_classes(model, expr: ast.AST) -> List[ast.ClassDef]:
    """The nn.Module class of this module a parameter is annotated with
    (``submodule: NodeSubmodule``) and every class here deriving from it;
    empty for anything else."""
    if not isinstance(expr, ast.Name):
        return []
    bindings = model.scopes.bindings_of(expr)
    if len(bindings) != 1 or bindings[0].kind != "param":
        return []
    annotation = getattr(bindings[0].node, "annotation", None)
    cls = model.classes.get(annotation.id) if isinstance(annotation, ast.Name) else None
    if cls is None or not model.is_module_class(cls):
        return []
    return model.classes_deriving(cls)


def _span(source, node) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    (l1, c1), (l2, c2) = source.start(node), source.end(node)
    return (l1, c1 + 1), (l2, c2 + 1)


def site_spans(source, site) -> List[Tuple[Tuple[int, int], Tuple[int, int]]]:
    nodes = [site.node]
    if site.options_call is not None:
        nodes.append(site.options_call)
    nodes.extend(site.calls)
    return [_span(source, n) for n in nodes]


def _inside(finding: Finding, span) -> bool:
    start, end = span
    return (
        start <= (finding.line, finding.column)
        and (finding.end_line, finding.end_column) <= end
    )


# -- library functions compiled in user code ------------------------------------------
#
# ``torch.compile(F.softmax, dynamic=False)``, ``torch.compile(flex_attention)``:
# dynamo compiles torch's code (for a function its trace rules skip, a
# ``wrap_inline`` wrapper named ``inner`` in torch/_dynamo/external_utils.py),
# and the trace records no user frame for it (measured on 2.13: the
# ``dynamo_start`` stack is that one frame).  The user's compile call of the
# library function is found in the run's files: when exactly one compile call
# of a library function can have compiled that code object, the entry is
# mapped to it (shown there, its findings matched); otherwise it stays torch's.

_WRAPPER = ("inner", "torch/_dynamo/external_utils.py")


def _library_callable(model, site) -> Optional[str]:
    """The dotted name of the library function ``site`` compiles (an imported
    function: ``torch.nn.functional.softmax``), or None for user code."""
    if site.form != "wrap" or site.target_def is not None or site.target is None:
        return None
    if not isinstance(site.target, (ast.Name, ast.Attribute)) or model.module_class_of(site.target) is not None:
        return None
    names = sorted(q for q in model.qualified_names(site.target) if "." in q and not q.startswith("builtins."))
    return names[0] if names else None


def _can_have_compiled(entry: tr.CodeEntry, qualified: str) -> bool:
    if (entry.name, entry.filename.replace("\\", "/").endswith(_WRAPPER[1])) == (_WRAPPER[0], True):
        return True  # torch's wrapper around a function its trace rules skip
    return qualified.rsplit(".", 1)[-1] == entry.name


def _vmapped_function(model, site) -> Optional[ast.AST]:
    """The user's ``def`` a ``torch.compile(torch.vmap(fn, ...))`` site
    compiles through torch's vmap wrapper, or None."""
    from ..analysis.modules import compiled_function

    target = site.target
    if site.target_def is not None or not isinstance(target, ast.Call):
        return None
    fn = compiled_function(model, site)
    return fn if fn is not None and fn is not target else None


def map_library_entries(trace: tr.Trace, files: Sequence[str]) -> None:
    """Map torch-internal code objects with no user frame that recompiled to
    the user code that compiled them (in the run's ``files``):

    - the one user compile call of a library function that can have
      compiled them: sets ``library_site`` and ``user_frame``;
    - torch's vmap wrapper (``wrapped`` in torch/_functorch/apis.py, what
      ``torch.compile(torch.vmap(step))`` compiles: its guards are on the
      wrapper's ``args``, which are ``step``'s) when exactly one such compile
      of a user function is found: the entry becomes that function's
      (``through`` says how it was reached), so its findings match as a
      directly compiled function's (mujoco-torch's vmapped ``step``); of
      several, the one in the file the entry's guards point into."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast
    from ..analysis.mentions import mentions_compile

    todo = [
        e for e in trace.entries
        if tr.is_library_file(e.filename) and e.user_frame is None and (e.reasons or e.limit_hit)
    ]
    if not todo or not files:
        return
    found: List[Tuple[str, int, str, str]] = []  # (path, line, as written, qualified name)
    vmapped: List[Tuple[str, ast.AST]] = []  # (path, def)
    for path in files:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if not mentions_compile(data):
                continue
            source = parse_ast(path, data)
        except (OSError, FileError):
            continue
        model = model_of(source)
        for site in model.compile_sites:
            qualified = _library_callable(model, site)
            if qualified is not None:
                written = ast.get_source_segment(source.text, site.target) or qualified
                found.append((path, site.node.lineno, written, qualified))
            fn = _vmapped_function(model, site)
            if fn is not None and not any(p == path and f is fn for p, f in vmapped):
                vmapped.append((path, fn))
    for entry in todo:
        if _is_vmap_wrapper(entry):
            # the files its guards point into (a reason's user line) decide between several
            named = {_real(r.file) for r in entry.reasons if r.file}
            pool = [v for v in vmapped if _real(v[0]) in named] or vmapped
            if len(pool) == 1:
                path, fn = pool[0]
                entry.wrapper = (entry.filename, entry.firstlineno, entry.name)
                entry.filename, entry.firstlineno, entry.name = path, def_first_lines(fn)[0], fn.name  # type: ignore[attr-defined]
                entry.through = "torch.vmap"
            continue
        candidates = [c for c in found if _can_have_compiled(entry, c[3])]
        if len(candidates) == 1:
            path, line, written, _q = candidates[0]
            entry.library_site = (path, line)
            entry.user_frame = (path, line, written)


def map_as(trace: tr.Trace, mapped: tr.Trace) -> None:
    """Map ``trace``'s torch-internal code objects to the user's code as the
    same code objects of ``mapped`` were (the second run of ``run --fix``:
    the first run's mapping, not a new guess from the fixed files)."""
    known: Dict[Tuple[str, int, str], tr.CodeEntry] = {}
    for e in mapped.entries:
        if e.wrapper is not None:
            known[e.wrapper] = e
        elif e.library_site is not None:
            known[(e.filename, e.firstlineno, e.name)] = e
    for entry in trace.entries:
        found = known.get((entry.filename, entry.firstlineno, entry.name))
        if found is None or entry.user_frame is not None:
            continue
        if found.wrapper is not None:
            entry.wrapper = found.wrapper
            entry.filename, entry.firstlineno, entry.name, entry.through = found.filename, found.firstlineno, found.name, found.through
        else:
            entry.library_site, entry.user_frame = found.library_site, found.user_frame


#: what ``torch.compile(torch.vmap(fn))`` compiles: torch's wrapper of ``fn``
_VMAP_WRAPPER = ("wrapped", "torch/_functorch/apis.py")


def _is_vmap_wrapper(entry: tr.CodeEntry) -> bool:
    return entry.name == _VMAP_WRAPPER[0] and entry.filename.replace("\\", "/").endswith(_VMAP_WRAPPER[1])


def _evidence(entry: tr.CodeEntry, cause: str) -> str:
    sources = []
    for r in entry.reasons:
        if r.cause == cause and r.source and r.source not in sources:
            sources.append(r.source)
    what = f"{cause} `{', '.join(sources)}`" if sources else cause
    limit = ", hit the recompile limit" if entry.limit_hit else ""
    return f"`{tr.display_name(entry)}` compiled {entry.graphs} graphs on {what}{limit}"


def upgrade(finding: Finding, evidence: str) -> Finding:
    """A copy of ``finding`` whose unsafe fix is safe, saying why."""
    assert finding.fix is not None
    fix: Fix = dataclasses.replace(finding.fix, safety=Safety.SAFE, unsafe_because="")
    message = finding.message
    because = finding.fix.unsafe_because
    if because and message.endswith(because):
        message = message[: len(message) - len(because)]  # not "unsafe as it may be deliberate" and "safe" on one line
    return dataclasses.replace(
        finding,
        fix=fix,
        message=f"{message} (safe: cures recompiles observed in trace: {evidence})",
        applied=False,
    )


def _match_causes(entry: tr.CodeEntry) -> List[str]:
    """The causes a finding may cure for this code object: those observed,
    and for torch's own optimizer ``step`` that recompiled on anything (torch
    names only the first failing guard: a second optimizer sharing the code
    object shows as object identity `self`, hiding the lr guard behind it),
    the optimizer lr too: FR004's own analysis proves the lr changes."""
    causes = list(entry.causes)
    optimizer_step = "/torch/optim/" in entry.filename.replace("\\", "/") and entry.name == "step"
    if optimizer_step and entry.recompiles and tr.OPTIMIZER_LR not in causes:
        causes.append(tr.OPTIMIZER_LR)
    return causes


def match_file(
    ctx: FileContext, findings: Sequence[Finding], entries: Sequence[tr.CodeEntry]
) -> Tuple[List[Match], List[Finding]]:
    """(matches, findings not implicated) for one file's findings."""
    model = ctx.model
    real = _real(ctx.path)
    sites = [
        (site_first_lines(model, s), site_spans(ctx.source, s))
        for s in model.compile_sites
    ]
    matched: Dict[int, Match] = {}
    for entry in entries:
        # a class made per call by a function of this file, guarded by type
        # in compiled code anywhere (another file, a library's): the
        # finding about that class (its `about`), wherever the code is; a
        # class of the script run as `__main__`: the finding of this file
        # about that very function and class, if there is one
        made = {local for module, local in tr.made_classes(entry) if module == "__main__" or module_file(module, [ctx.path])}
        if made:
            codes = {c.code for c in tr.rule_cures(entry, tr.TYPE)}
            for index, f in enumerate(findings):
                if f.code not in codes or not made & set(f.about):
                    continue
                if index not in matched:
                    matched[index] = Match(f, entry, tr.TYPE)
                elif matched[index].cause == tr.TYPE:
                    matched[index] = dataclasses.replace(matched[index], also=matched[index].also + (entry,))
        # a tensor made under another mode than the others (inference or
        # not): which code made it the trace cannot tell; a finding of a
        # rule declared for that (FR021: a mode decorator on a coroutine)
        # anywhere in this file
        for cure in tr.rule_cures(entry, tr.DISPATCH) if tr.DISPATCH in entry.causes else ():
            if cure.inference_only:
                for index, f in enumerate(findings):
                    if f.code == cure.code and index not in matched:
                        matched[index] = Match(f, entry, tr.DISPATCH)
        path = entry_file(entry)
        if path is None:
            continue
        if _real(path) != real:
            # a function compiled in another module, fed from this file; or
            # torch's own optimizer step called there (an optimizer built
            # here and stepped by that module's compiled code)
            internal = tr.is_library_file(entry.filename)
            for cause in _match_causes(entry):
                if internal and cause != tr.OPTIMIZER_LR:
                    continue
                for cure in tr.rule_cures(entry, cause):
                    for index, f in enumerate(findings):
                        if (
                            f.feeds_path and f.code == cure.code and index not in matched and (internal or entry.firstlineno in f.feeds)
                            and _real(f.feeds_path) == _real(path) and _about_source(cure, f, entry, cause)
                        ):
                            matched[index] = Match(f, entry, cause)
            continue
        internal = tr.is_library_file(entry.filename)
        library_spans = [
            (s, site_spans(ctx.source, s))
            for s in model.compile_sites
            if entry.library_site is not None and s.node.lineno == entry.library_site[1] and _library_callable(model, s) is not None
        ]
        if internal and entry.library_site is None and entry.user_frame is not None:
            # a library function compiled here and called from this file's
            # code (unsloth's `torch.compile(flex_attention, dynamic=False)`,
            # called in `flex_shared_prefix_attention`): its one compile here
            # that can have compiled the entry's code
            mine = [s for s in model.compile_sites if _can_have_compiled(entry, _library_callable(model, s) or "")]
            if len(mine) == 1:
                library_spans = [(mine[0], site_spans(ctx.source, mine[0]))]
        for cause in _match_causes(entry):
            for cure in tr.rule_cures(entry, cause):
                for index, f in enumerate(findings):
                    if f.code != cure.code or index in matched:
                        continue
                    if internal and (entry.library_site is not None or library_spans):
                        # a compiled library function: the user's compile call
                        # of it; for an optimizer's step compiled itself
                        # (`opt.step = torch.compile(opt.step)`), any FR004 of
                        # the file, as below (its analysis proves the lr changes)
                        ok = cause == tr.OPTIMIZER_LR or any(
                            any(_inside(f, sp) for sp in spans)
                            for site, spans in library_spans
                        )
                    elif internal:
                        # torch's own code compiled for the user's call (an
                        # optimizer's step, nn.Sequential.forward): any FR004
                        # of the file; others on the line of the user's call
                        frame = entry.user_frame
                        ok = cause == tr.OPTIMIZER_LR or (frame is not None and f.line <= frame[1] <= f.end_line)
                    elif f.feeds:  # about a compiled function, placed where its value is passed in
                        ok = entry.firstlineno in f.feeds
                    else:
                        ok = any(
                            entry.firstlineno in lines
                            and any(_inside(f, sp) for sp in spans)
                            for lines, spans in sites
                        )
                    if not ok or not _about_guarded(f, entry, cause) or not _about_source(cure, f, entry, cause):
                        continue
                    if (
                        cure.upgrade
                        and f.fix is not None
                        and f.fix.safety == Safety.UNSAFE
                    ):
                        matched[index] = Match(
                            upgrade(f, _evidence(entry, cause)),
                            entry,
                            cause,
                            upgraded=True,
                        )
                    else:
                        matched[index] = Match(f, entry, cause)
    matches = [matched[i] for i in sorted(matched)]
    others = [f for i, f in enumerate(findings) if i not in matched]
    return matches, others


def _about_source(cure: tr.Cure, f: Finding, entry: tr.CodeEntry, cause: str) -> bool:
    """A cure declared only for the source a finding is about (``about``:
    FR017 for the length of the dict it found looked up, ``self.state``; an
    entry that starts with a dot, FR014's ``.labels``, for any source that
    ends with it, ``self.loss.labels``): does the trace guard that source
    for ``cause``?  Any other cure: True."""
    if not cure.about:
        return True
    sources = entry.sources(cause)
    return any(s == a or (a.startswith(".") and s.endswith(a)) for a in f.about for s in sources)


def _about_guarded(f: Finding, entry: tr.CodeEntry, cause: str) -> bool:
    """May the trace implicate ``f`` for ``cause``?  An unproven finding about
    a float (FR003 with --unproven) only when the trace guarded that float:
    a recompile on `a` does not prove that `b`, which never changes, does.
    Guarded sources the finding cannot be compared with (`args[1]`) allow it."""
    if f.proven or not f.about or cause != tr.FLOAT_ARG:
        return True
    names = set()
    for source in entry.sources(cause):
        argument = tr.argument_of(source)
        if argument is None:
            return True
        names.add(argument[0])
    return bool(names & set(f.about))
