"""FR019 class-per-call: a function that makes a new ``nn.Module`` subclass
at every call (a ``class`` statement in its body, the class returned), whose
classes are given to module instances that compiled code shares: every
instance has a type of its own, the compiled code guards the type, and each
one compiles again (unslothai/unsloth 186e6cb5c1: ``convrot_linear_class()``,
``module.__class__ = convrot_linear_class()`` for every rotated projection,
blocks compiled one by one by ``compile_repeated_blocks``; cured by
``@lru_cache(maxsize = None)`` on the factory)."""

from __future__ import annotations

import ast
import builtins
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .._lazy import cst
from ..analysis.compile_sites import def_first_lines
from ..analysis.mentions import has_compile
from ..analysis.modules import compiled_class_method, compiled_function
from ..analysis.project import LATER, ProjectFact, ProjectIndex, _read_bytes
from ..analysis.source import statement_target
from ..findings import Edit, Finding, Safety
from ..trace.causes import TYPE, CuresCause
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BUILTINS = frozenset(dir(builtins))


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, not those of functions or classes defined in it."""
    todo = list(fn.body)  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _DEFS):
            todo.extend(ast.iter_child_nodes(node))


def _in_loop(source, node: ast.AST) -> bool:
    """Does ``node`` run in a loop of its own function (or of the module):
    a ``for``/``while``, or a comprehension?"""
    return bool(source.loops_around(node)) or isinstance(source.enclosing(node, _COMPREHENSIONS + _DEFS), _COMPREHENSIONS)


def _creation_names(cls: ast.ClassDef) -> Iterator[ast.Name]:
    """The names read when the ``class`` statement runs: its bases,
    keywords and decorators, its body's statements but the bodies of its
    methods (their decorators and defaults run then too)."""
    roots: List[ast.AST] = [*cls.bases, *(k.value for k in cls.keywords), *cls.decorator_list]
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots += [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
        else:
            roots.append(stmt)
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                yield node


def index_facts(source) -> Optional[dict]:
    """FR019's facts of one file for the project index (JSON-ready; None:
    nothing): ``one_by_one``, the line of a compile that compiles modules
    one by one (0: none); ``factories``, the module-level functions a loop
    here runs that make a module class per call."""
    from ..analysis.context import FileContext, Settings

    ctx = FileContext(source.path, source.display_path, Settings(), None, source)
    rule = ClassPerCall()
    site = rule._one_by_one(ctx) if b"compile" in source.data else None
    factories = [fn.name for fn, _cls, _made, calls in rule._factories(ctx) if rule._repeated(ctx, calls) is not None]  # type: ignore[attr-defined]
    if site is None and not factories:
        return None
    return {"one_by_one": site.lineno if site is not None else 0, "factories": factories}  # type: ignore[attr-defined]


def _valid(facts) -> bool:
    return isinstance(facts, dict) and isinstance(facts.get("one_by_one"), int) and isinstance(facts.get("factories"), list) and all(isinstance(n, str) for n in facts["factories"])


def _later(data: bytes) -> bool:
    """A file the first look does not parse (it can hold no compile site)
    that may give modules a class made per call (an indented ``class``
    statement and a ``__class__`` swap: unsloth's `module.__class__ =
    convrot_linear_class()`) or compile blocks one by one through diffusers
    (``compile_repeated_blocks``, not a compile site of its own)."""
    # cheapest first: the word `compile` was scanned for already (the
    # engine's first look), `"\n    class "` is slow to scan, the line ends
    # being everywhere
    if has_compile(data) and b"compile_repeated_blocks" in data:
        return True
    return b"__class__" in data and (b"__class__ =" in data or b"__class__=" in data) and _nests_class(data)


def _nests_class(data: bytes) -> bool:
    """May the bytes define a module-level function that makes a class (an
    indented ``class`` statement)?"""
    return b"\n    class " in data


def _wanted(found: Dict[str, Optional[object]], key_of) -> set:
    """Every waiting module, when the run compiles modules one by one (a
    module parsed already says so, or a waiting one calls
    ``compile_repeated_blocks``) and some module may make a class per call
    (a parsed one has such a factory, or a waiting one's bytes nest a
    class: :func:`_nests_class`).  The waiting files' bytes are read here:
    the files :func:`_later` takes are few."""
    waiting = [path for path, f in found.items() if f == LATER]
    if not waiting:
        return set()
    data = {path: _read_bytes(path) or b"" for path in waiting}
    parsed = [f for f in found.values() if isinstance(f, dict)]
    if not any(f.get("one_by_one") for f in parsed) and not any(b"compile_repeated_blocks" in d for d in data.values()):
        return set()
    if not any(f.get("factories") for f in parsed) and not any(_nests_class(d) for d in data.values()):
        return set()  # diffusers' own kandinsky6 files: blocks compiled one by one, no class made per call
    return {key_of(path)[1] for path in waiting}


def _prove(index: ProjectIndex, files: Sequence[str], found: Dict[str, Optional[dict]], read=None) -> None:
    """Table ``one_by_one`` ((root, module) -> {"line"}): the modules of the
    run that compile modules one by one, when some module has a factory a
    loop runs; those modules' files are read again with the index
    (``always``)."""
    sites = {index.modules[p]: {"line": f["one_by_one"]} for p, f in sorted(found.items()) if f and f.get("one_by_one") and p in index.modules}
    makers = sorted(p for p, f in found.items() if f and f.get("factories") and p in index.modules)
    if not sites or not makers:
        return
    index.tables["one_by_one"] = sites
    index.always = tuple(sorted(set(index.always) | set(makers)))


def _program(key) -> Tuple[str, str]:
    """The program a module belongs to: (its root, its top-level package,
    "" for a module of no package)."""
    root, dotted = key
    return root, dotted.split(".")[0] if "." in dotted else ""


#: the modules of the run that compile modules one by one, for a factory of
#: another module (unsloth: the factory in diffusion_convrot.py, the blocks
#: compiled in diffusion_speed.py)
ONE_BY_ONE = ProjectFact("one_by_one", gather=index_facts, valid=_valid, prove=_prove, later=_later, wanted=_wanted)


class ClassPerCall(Rule):
    code = "FR019"
    #: the trace's type guard of a submodule (`___check_type_id`) is what a
    #: class made per call fails; the finding's own evidence is the source's
    cures = (CuresCause(TYPE, self_attribute=True),)
    name = "class-per-call"
    #: a module with no compile site is read with the project index when
    #: another module of its program compiles modules one by one
    #: (``always``), or when a trace's type guard names a class its
    #: function made (the default trigger: a scan of its own would cost
    #: every file with a compile a pass over its bytes)
    reads_project = True
    project_facts = (ONE_BY_ONE,)
    summary = "an `nn.Module` class made anew at every call of a function, given to modules compiled code shares"
    what_it_does = """
Finds a module-level function whose body defines an `nn.Module` subclass
(`class ConvRotLinear(nn.Linear): ...`) and returns it, or returns an
instance of it: every call makes a new class. Its classes reach modules
(`module.__class__ = convrot_linear_class()`, `convrot_linear_class()(...)`).

A finding needs evidence that the classes differ where compiled code looks:
the function is called repeatedly (in a loop, or in a function called in a
loop), and the module compiles modules one by one (a compile call in a
loop: `block.compile()` for each repeated block, `torch.compile(layer)` in a
loop, a call of diffusers' `compile_repeated_blocks`), so that compiled code
is shared by modules given different classes. The compile may be in another
module of the run (unsloth's layout: the factory in `diffusion_convrot.py`,
`transformer.compile_repeated_blocks(...)` in `diffusion_speed.py`): the
project index carries it, from a module of the same program only (the same
top-level package, or the same folder of scripts).
Otherwise it is reported only with `--unproven` (a trace that shows the type
guard failing is the evidence: `run --fix`). The factory's file needs no
compile of its own: the type guard names the class it made
(`type=<class 'diffusion_convrot.convrot_linear_class.<locals>.ConvRotLinear'>`),
so `run --fix` analyses and fixes that file wherever the compiled code is,
another module or a library's (unsloth's real layout: the factory in
`diffusion_convrot.py`, the blocks compiled by diffusers'
`compile_repeated_blocks`).

Fixes the class-returning factory that takes no arguments: its classes are
made once, `@functools.lru_cache(maxsize=None)` on the function
(`import functools` added when missing), the project's own cure. An
instance-returning factory, or one with parameters, is reported with the
cure: define the class once, outside the function.
"""
    why_it_recompiles = """
Compiled code guards the type of every module it runs
(`___check_type_id(self.ff.net[0].proj, ...)`). Code objects of a class's
`forward` are shared by its instances (blocks compiled one by one, a
regional compile of repeated blocks), so a block whose projection has
another class than the first block's fails the guard and compiles again:
one graph per block, until the recompile limit (then eager), or
`FailOnRecompileLimitHit` under `fullgraph=True`. Measured on torch 2.13
(CPU, counting backend), unsloth's ConvRot transformer: 6 graphs; with the
factory cached, 3.
"""
    example = """
    def convrot_linear_class():
        class ConvRotLinear(nn.Linear):
            def forward(self, x):
                return F.linear(rotate(x), self.weight, self.bias)
        return ConvRotLinear

    for module in rotated:
        module.__class__ = convrot_linear_class()   # a new class for each
    for block in model.blocks:
        block.compile()

Becomes:

    @functools.lru_cache(maxsize=None)
    def convrot_linear_class():
        ...
"""
    fix_safety = """
Safe when every call can share one class: the function takes no arguments
and has no decorator; its body only imports, defines the class and returns
it; what the `class` statement reads when it runs (bases, class attributes,
decorators, defaults) is an import, a builtin or a module-level name bound
once; and every use of a call's result only sets a module's `__class__` or
builds an instance. Otherwise unsafe or no fix: a class attribute set on one
call's class, an `isinstance` against it, or a global read at creation that
changes would see one class for all. `functools.lru_cache` needs hashable
arguments, so a factory with parameters gets no fix (an unhashable argument
would raise).
"""
    reads = "ast"
    valid = (
        # the class is defined once, at module level
        (
            "import torch\nfrom torch import nn\nclass Rot(nn.Linear):\n    pass\ndef rot_class():\n    return Rot\n"
            "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0].__class__ = rot_class()\n    step = torch.compile(b)\n"
        ),
        # already cached
        (
            "import functools\nimport torch\nfrom torch import nn\n@functools.lru_cache(maxsize=None)\ndef rot_class():\n"
            "    class Rot(nn.Linear):\n        pass\n    return Rot\n"
            "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0].__class__ = rot_class()\n    step = torch.compile(b)\n"
        ),
        # not a module class
        (
            "import torch\ndef make():\n    class Box:\n        pass\n    return Box\nfor i in range(3):\n    make()\n"
            "@torch.compile\ndef f(x):\n    return x\n"
        ),
    )
    invalid = (
        Example(
            "import torch\nfrom torch import nn\ndef rot_class():\n    class Rot(nn.Linear):\n        pass\n    return Rot\n"
            "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0].__class__ = rot_class()\n    step = torch.compile(b)\n",
            "import torch\nfrom torch import nn\nimport functools\n\n@functools.lru_cache(maxsize=None)\ndef rot_class():\n    class Rot(nn.Linear):\n        pass\n    return Rot\n"
            "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0].__class__ = rot_class()\n    step = torch.compile(b)\n",
        ),
        # an instance per call: reported with the cure, no fix
        Example(
            "import torch\nfrom torch import nn\ndef make_proj(n):\n    class Proj(nn.Linear):\n        pass\n    return Proj(n, n)\n"
            "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0] = make_proj(2)\n    step = torch.compile(b)\n"
        ),
        # no evidence the classes reach compiled code shared by modules: --unproven
        Example(
            "import torch\nfrom torch import nn\ndef rot_class():\n    class Rot(nn.Linear):\n        pass\n    return Rot\n"
            "m = nn.Linear(2, 2)\nm.__class__ = rot_class()\ncompiled = torch.compile(m)\n",
            "import torch\nfrom torch import nn\nimport functools\n\n@functools.lru_cache(maxsize=None)\ndef rot_class():\n    class Rot(nn.Linear):\n        pass\n    return Rot\n"
            "m = nn.Linear(2, 2)\nm.__class__ = rot_class()\ncompiled = torch.compile(m)\n",
            unproven=True,
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        return [self._finding(ctx, fn, cls, made, calls) for fn, cls, made, calls in self._factories(ctx)]

    def _factories(self, ctx) -> List[Tuple[ast.AST, ast.ClassDef, str, List[ast.Call]]]:
        """(function, class, "class" or "instance", its calls here) for each
        module-level function not cached that defines a module class and
        returns it or an instance of it, called in this module."""
        source, model = ctx.source, ctx.model
        if b"class " not in source.data or b"return" not in source.data:
            return []
        out = []
        for fn in source.tree.body:  # type: ignore[attr-defined]
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or self._cached(ctx, fn):
                continue
            for cls in (s for s in fn.body if isinstance(s, ast.ClassDef) and model.is_module_class(s)):
                made = self._made(fn, cls)
                calls = self._calls(ctx, fn)
                if made is not None and calls:
                    out.append((fn, cls, made, calls))
        return out

    @staticmethod
    def _cached(ctx, fn: ast.AST) -> bool:
        """Is ``fn`` already cached (``functools.lru_cache``, ``functools.cache``)?"""
        for dec in fn.decorator_list:  # type: ignore[attr-defined]
            target = dec.func if isinstance(dec, ast.Call) else dec
            if ctx.model.qualified_names(target) & {"functools.lru_cache", "functools.cache"}:
                return True
        return False

    @staticmethod
    def _made(fn: ast.AST, cls: ast.ClassDef) -> Optional[str]:
        """"class" when ``fn`` returns ``cls``, "instance" when it returns
        an instance of it (``return cls(...)``), None otherwise."""
        kinds = set()
        for node in _own_nodes(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Name) and value.id == cls.name:
                    kinds.add("class")
                elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == cls.name:
                    kinds.add("instance")
        return "class" if kinds == {"class"} else "instance" if "instance" in kinds else None

    @staticmethod
    def _calls(ctx, fn: ast.AST) -> List[ast.Call]:
        """The calls of the module-level function ``fn`` in this module."""
        out = []
        for call in ctx.source.nodes(ast.Call):
            func = call.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Name) and func.id == fn.name:  # type: ignore[attr-defined]
                bindings = ctx.model.scopes.bindings_of(func)
                if len(bindings) == 1 and bindings[0].node is fn:
                    out.append(call)
        return sorted(out, key=lambda c: (c.lineno, c.col_offset))

    def _repeated(self, ctx, calls: List[ast.Call]) -> Optional[ast.Call]:
        """A call that runs repeatedly: in a loop, or in a module-level
        function that is called in a loop."""
        source = ctx.source
        for call in calls:
            if _in_loop(source, call):
                return call
            owner = source.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
            if owner is not None and isinstance(source.parent(owner), ast.Module):
                if any(_in_loop(source, c) for c in self._calls(ctx, owner)):
                    return call
        return None

    @staticmethod
    def _one_by_one(ctx) -> Optional[ast.AST]:
        """A compile call that runs in a loop (modules compiled one by one),
        or a call of diffusers' ``compile_repeated_blocks`` (it compiles
        each block of the model's ``_repeated_blocks`` classes, one by one)."""
        site = next((site.node for site in ctx.model.compile_sites if _in_loop(ctx.source, site.node)), None)
        if site is None and b"compile_repeated_blocks" in ctx.source.data:
            site = next((c for c in ctx.source.nodes(ast.Call) if isinstance(c.func, ast.Attribute) and c.func.attr == "compile_repeated_blocks"), None)
        return site

    @staticmethod
    def _one_by_one_elsewhere(ctx) -> Optional[Tuple[str, int]]:
        """(module, line) of a compile of another module of the same program
        that compiles modules one by one (project index): the same top-level
        package, or, for modules of no package, the same folder (a script's
        siblings). A module of another program of the run is no evidence."""
        project = ctx.project
        table = project.table("one_by_one") if project is not None else {}
        own = project.modules.get(ctx.path) if table else None
        if own is None:
            return None
        for key, entry in sorted(table.items()):
            if project.path_of(key) != ctx.path and _program(key) == _program(own):
                return key[1], entry["line"]
        return None

    @staticmethod
    def _compiled_lines(ctx) -> Tuple[int, ...]:
        """The first lines of the code objects this module compiles (a
        compiled module's ``forward``, a compiled function): a trace's type
        recompiles there are this finding's."""
        lines: List[int] = []
        for site in ctx.model.compile_sites:
            method = compiled_class_method(ctx.model, site)
            fn = ctx.model.method(method[0], method[1]) if method is not None else compiled_function(ctx.model, site)
            if fn is not None:
                lines += [n for n in def_first_lines(fn) if n not in lines]
        return tuple(lines)

    def _finding(self, ctx, fn: ast.AST, cls: ast.ClassDef, made: str, calls: List[ast.Call]) -> Finding:
        source = ctx.source
        name = fn.name  # type: ignore[attr-defined]
        repeated = self._repeated(ctx, calls)
        shared = self._one_by_one(ctx)
        elsewhere = self._one_by_one_elsewhere(ctx) if shared is None else None
        use = repeated or calls[0]
        message = (
            f"`{name}` makes a new class `{cls.name}` at every call (line {cls.lineno}), and {'each' if made == 'class' else 'each instance'} "
            f"reaches a module (`{source.segment(source.parent(use) if isinstance(source.parent(use), (ast.Assign, ast.Call)) else use).strip()}`, line {use.lineno}): "
            "modules given different classes fail the type guard of compiled code they share, one graph each"
        )
        if repeated is None or (shared is None and elsewhere is None):
            why = "no loop calls it here" if repeated is None else "no compile call of the run runs in a loop (modules compiled one by one)"
            message += f" (nothing here shows compiled code shared by such modules: {why})"
        elif shared is not None:
            message += f" (modules compiled one by one, line {shared.lineno})"  # type: ignore[attr-defined]
        else:
            message += f" (modules compiled one by one in module `{elsewhere[0]}`, line {elsewhere[1]})"  # type: ignore[index]
        proven = repeated is not None and (shared is not None or elsewhere is not None)
        feeds = self._compiled_lines(ctx)
        # how a trace's type guard names the class (`type=<class 'mod.f.<locals>.C'>`)
        about = (f"{name}.<locals>.{cls.name}",)
        if made == "instance":
            return self.finding(ctx, cls, message + "; define the class once, outside the function (no automatic fix: the function returns an instance)", proven=proven, feeds=feeds, about=about)
        blocked = self._not_cacheable(ctx, fn, cls) or self._changed(ctx, fn, calls)
        if blocked:
            return self.finding(ctx, cls, message + f"; define the class once, outside the function (no automatic fix: {blocked})", proven=proven, feeds=feeds, about=about)
        unsafe = self._shared_use(ctx, fn, cls, calls)
        message += "; make the class once: `@functools.lru_cache(maxsize=None)` on `" + name + "`"
        if unsafe:
            message += f"; unsafe: {unsafe}"
        return self.finding(
            ctx, cls, message,
            edits=[Edit(statement_target(source, fn), _cache_decorator)],  # type: ignore[arg-type]
            safety=Safety.UNSAFE if unsafe else Safety.SAFE,
            imports=("functools",),
            title=f"cache `{name}`'s class (`@functools.lru_cache(maxsize=None)`)",
            proven=proven,
            feeds=feeds,
            about=about,
        )

    def _not_cacheable(self, ctx, fn: ast.AST, cls: ast.ClassDef) -> str:
        """Why ``fn`` cannot simply be cached ("" when it can): parameters,
        decorators, a body doing more than defining and returning the class."""
        args = fn.args  # type: ignore[attr-defined]
        if args.posonlyargs or args.args or args.kwonlyargs or args.vararg or args.kwarg:
            return "it takes arguments, which `lru_cache` would need to hash"
        if fn.decorator_list:  # type: ignore[attr-defined]
            return "it is decorated"
        for i, stmt in enumerate(fn.body):  # type: ignore[attr-defined]
            if stmt is cls or isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue  # the docstring
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Name) and stmt.value.id == cls.name:
                continue
            return f"its body does more than define and return the class (line {stmt.lineno})"
        return ""

    @staticmethod
    def _changed(ctx, fn: ast.AST, calls: List[ast.Call]) -> str:
        """Why one class for all calls would be wrong ("" when nothing shows
        it): a name bound to a call's class that gets an attribute set
        (``cls.scale = s``, ``setattr(cls, ...)``): every module would see
        the last value."""
        source, model = ctx.source, ctx.model
        # `type(m).scale = s`, `m.__class__.scale = s`, `setattr(type(m), ...)`:
        # a module's class changed through the module (audit: a scale per
        # block, one class for all would keep the last)
        for node in source.nodes(ast.Attribute) + source.nodes(ast.Call):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                owner = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and node.args:
                owner = node.args[0]
            else:
                continue
            if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "type") or (
                isinstance(owner, ast.Attribute) and owner.attr == "__class__"
            ):
                return f"line {node.lineno} sets an attribute of a module's class (`{source.segment(node).strip()}`), which one class for all calls would share"  # type: ignore[attr-defined]
        for call in calls:
            parent = source.parent(call)
            if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
                continue
            name = parent.targets[0]
            for ref in model.scopes.scope_of(name).references.get(name.id, []):
                up = source.parent(ref)
                if (isinstance(up, ast.Attribute) and isinstance(up.ctx, ast.Store)) or (
                    isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "setattr" and up.args and up.args[0] is ref
                ):
                    return f"line {up.lineno} sets an attribute of the class one call made, which one class for all calls would share"  # type: ignore[attr-defined]
        return ""

    def _shared_use(self, ctx, fn: ast.AST, cls: ast.ClassDef, calls: List[ast.Call]) -> str:
        """Why one class for every call may change what the program does
        ("" when nothing shows it may)."""
        model, source = ctx.model, ctx.source
        local = {n for stmt in fn.body if isinstance(stmt, (ast.Import, ast.ImportFrom)) for n in ((a.asname or a.name).split(".")[0] for a in stmt.names)}  # type: ignore[attr-defined]
        for node in _creation_names(cls):
            if node.id in local or node.id in _BUILTINS:
                continue
            bindings = [b for b in model.scopes.bindings_of(node) if b.kind != "del"]
            if len(bindings) != 1 or bindings[0].scope is not model.scopes.module:
                return f"the class statement reads `{node.id}` (line {node.lineno}), which is not a name bound once at module level: one class for all calls keeps its first value"
        for call in calls:
            parent = source.parent(call)
            if isinstance(parent, ast.Call) and parent.func is call:
                continue  # an instance of it
            if isinstance(parent, ast.Assign) and parent.value is call and all(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in parent.targets):
                continue  # module.__class__ = fn()
            return f"the class `{fn.name}()` returns is used at line {call.lineno} (`{source.segment(parent).strip()}`) for more than giving a module its class: one class for all calls may change what that code sees"  # type: ignore[attr-defined]
        return ""


def _cache_decorator(node: "cst.CSTNode"):
    """``def f():`` -> ``@functools.lru_cache(maxsize=None)`` above it."""
    call = cst.Call(
        func=cst.Attribute(value=cst.Name("functools"), attr=cst.Name("lru_cache")),
        args=[cst.Arg(keyword=cst.Name("maxsize"), value=cst.Name("None"), equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))],
    )
    return node.with_changes(decorators=[cst.Decorator(decorator=call), *node.decorators])  # type: ignore[attr-defined]
