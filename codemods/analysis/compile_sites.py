"""The compile-site model of one module, on the stdlib ``ast``: which names
alias torch, what is compiled, how the compiled callable is reached and where
it is called.

This is the only place that recognises ``torch.compile``.  Rules ask
:class:`CompileModel`; they never look for ``compile`` themselves.

Recognised compile forms::

    @torch.compile / @torch.compile(...)        decorator, with or without args
    import torch as th; th.compile(...)          any alias of torch
    from torch import compile [as c]; c(...)
    f = torch.compile(g, ...)                    wrap, bound to a name
    self.f = torch.compile(...)                  wrap, bound to an attribute
    opt.step = torch.compile(opt.step)
    torch.compile(g, ...)(args)                  immediately called
    torch.compile(**kw)(fn)                      compile-with-options, then fn
    model = torch.compile(model)
    model.compile(...)                           nn.Module.compile, only when
    self.model.compile(...)                      ``model`` is known to be a Module
                                                 (``self.model = Model()`` in the class)

Not a compile site: ``Model().compile()`` on a fresh instance (Module.compile
compiles in place and returns None, so the instance can never be called).
Names that merely look alike (``re.compile``, builtin ``compile``, a user
function called ``compile``) are resolved through the module's scopes and
never match.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from .scopes import Binding, Scope, Scopes
from .source import Source, children, walk
from .params import is_static

TORCH = "torch"
TORCH_COMPILE = "torch.compile"
_NN_PREFIXES = ("torch.nn.",)
_MODULE_BASE_NAMES = {"torch.nn.Module", "torch.nn.modules.module.Module"}
_OPTIMIZER_BASE_NAMES = {"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BUILTINS = frozenset(dir(builtins))
_NO_NAMES: FrozenSet[str] = frozenset()


def _root_name(node: ast.AST) -> ast.AST:
    """``a`` of ``a.b.c``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _self_attr_name(node: ast.AST) -> Optional[str]:
    """``x`` of a ``self.x`` target, else None."""
    if type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self":  # type: ignore[attr-defined]
        return node.attr  # type: ignore[attr-defined]
    return None


def dotted_name(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a chain of Names/Attributes, else None."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def import_target(alias: ast.alias, stmt: ast.AST) -> Optional[str]:
    """What the name an import binds stands for: ``import a.b as c`` ->
    "a.b", ``import a.b`` -> "a", ``from m import x as y`` -> "m.x";
    relative imports keep their dots: ``from . import k`` -> ".k",
    ``from ..m import k`` -> "..m.k"."""
    if isinstance(stmt, ast.Import):
        return alias.name if alias.asname else alias.name.split(".")[0]
    if isinstance(stmt, ast.ImportFrom):
        return "." * stmt.level + (f"{stmt.module}." if stmt.module else "") + alias.name
    return None


def live_bindings(bindings: List[Binding]) -> List[Binding]:
    """``bindings`` without ``del`` (it binds no value), in source order."""
    found = [b for b in bindings if b.kind != "del"]
    if len(found) > 1:
        found.sort(key=lambda b: (getattr(b.node, "lineno", 0), getattr(b.node, "col_offset", 0)))
    return found


def visible_from(binding: Binding) -> Tuple[int, int]:
    """Where a later load in the binding's own scope starts to see it: the end
    of the assignment, import, ``def`` or ``class`` that binds it (of the
    target for loops, ``with`` items, comprehensions and parameters).  This is
    libcst's order of assignments and accesses within one scope."""
    node: ast.AST = binding.node
    if binding.kind == "except":
        return node.lineno, node.col_offset  # type: ignore[attr-defined]
    if binding.kind not in ("for", "comprehension", "with", "param", "match") and binding.stmt is not None:
        node = binding.stmt
    return node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]


#: a value the source does not spell out (:meth:`CompileModel.literal`)
UNKNOWN = object()


#: decorators that call the function they wrap with its own arguments
_TRANSPARENT_DECORATORS = frozenset((
    "torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.set_grad_enabled",
    "torch.autocast", "torch.amp.autocast", "torch.cpu.amp.autocast", "torch.cuda.amp.autocast",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
))


@dataclass(eq=False)
class CompileSite:
    """One place where something is compiled."""

    #: "decorator" | "wrap" | "method"
    form: str
    #: the node that carries compile options: the ``torch.compile(...)`` Call,
    #: the ``model.compile(...)`` Call, or the bare decorator expression
    node: ast.AST
    #: the call whose keywords are compile options (None for a bare decorator)
    options_call: Optional[ast.Call]
    #: the compiled thing: a FunctionDef (decorator) or the expression passed in
    target: Optional[ast.AST]
    #: the function compiled, when it can be seen in this module
    target_def: Optional[ast.AST]
    #: dotted name the compiled callable is reached through ("f", "self.f", "opt.step")
    binding: Optional[str]
    #: the statement that performs the compile (for inserting code before it)
    statement: Optional[ast.stmt]
    #: calls of the compiled callable found in this module, in source order
    #: (also those reached through the flows :meth:`CompileModel._follow_flows` follows)
    calls: List[ast.Call] = field(default_factory=list)
    #: calls (of ``calls``) that run another function than ``target_def``: the
    #: function a project decorator compiling its argument was applied to
    call_defs: Dict[ast.Call, ast.AST] = field(default_factory=dict)
    #: keyword -> its value as the model read it (:meth:`CompileModel.literal`),
    #: read on first use (a name's value needs the scopes' resolution)
    _literals: Optional[Dict[str, object]] = field(default=None, repr=False)
    #: the model that read this site
    _model: Optional["CompileModel"] = field(default=None, repr=False)

    def def_of(self, call: ast.Call) -> Optional[ast.AST]:
        """The function ``call`` runs compiled, when it can be seen."""
        return self.call_defs.get(call, self.target_def)

    def option(self, name: str) -> Optional[ast.keyword]:
        if self.options_call is None:
            return None
        for kw in self.options_call.keywords:
            if kw.arg == name:
                return kw
        return None

    def option_value(self, name: str) -> object:
        """The value of the compile option ``name=`` as the model read it
        (:meth:`CompileModel.literal`: a literal, or a module-level name bound
        once to one); None when it is not passed, :data:`UNKNOWN` when it
        cannot be read (a variable, ``**opts``)."""
        if self._literals is None:
            self._literals = (
                {kw.arg: self._model.literal(kw.value) for kw in self.options_call.keywords if kw.arg is not None}
                if self.options_call is not None and self._model is not None
                else {}
            )
        if name in self._literals:
            return self._literals[name]
        return UNKNOWN if self.has_star_kwargs else None

    @property
    def dynamic_literal(self) -> Optional[bool]:
        """The compile's ``dynamic=True`` / ``dynamic=False`` (a literal or a
        module constant); None when it passes neither."""
        value = self.option_value("dynamic")
        return value if isinstance(value, bool) else None

    @property
    def static(self) -> bool:
        """Does the compile pass a literal ``dynamic=False``?"""
        return self.dynamic_literal is False

    @property
    def has_star_kwargs(self) -> bool:
        return self.options_call is not None and any(kw.arg is None for kw in self.options_call.keywords)


class CompileModel:
    """Facts about one module, computed once and shared by every rule."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.tree = source.tree
        self.scopes = Scopes(source.tree, declarations=b"global" in source.data or b"nonlocal" in source.data)
        source.adopt_index(self.scopes.parents, self.scopes.by_type)  # the scopes' walk indexed every node
        #: caches of the name queries, by node id (and the query's options)
        self._qnames: Dict[object, FrozenSet[str]] = {}
        self._live: Dict[int, List[Binding]] = {}
        #: (id of a scope's binding list of a name, local) -> what the name stands for
        self._scope_names: Dict[Tuple[int, str], FrozenSet[str]] = {}
        #: the name emitted code uses for torch (module-level ``import torch [as th]``)
        self.torch_alias: Optional[str] = None
        self.classes: Dict[str, ast.ClassDef] = {}
        #: loops whose element class is being resolved (guards `for b in b.layers`)
        self._resolving: Set[ast.AST] = set()
        self.functions: Dict[str, ast.AST] = {}
        self._collect_module_names()
        self.compile_sites: List[CompileSite] = []
        self._collect_compile_sites()
        for site in self.compile_sites:
            site.calls = sorted(set(self._find_calls(site)), key=lambda c: (c.lineno, c.col_offset))
            site._model = self
        #: module-level names bound to a compiled function through a flow (name -> def)
        self._flow_module_names: Dict[str, ast.AST] = {}
        #: each ``def`` a project decorator compiles (``@maybe_compile``,
        #: ``@make(dynamic=None)``) -> (the site in the decorator's body, the
        #: decorator expression in the def's list)
        self.project_decorated: Dict[ast.AST, Tuple[CompileSite, ast.AST]] = {}
        if self.compile_sites:
            self._follow_flows()

    def release(self) -> None:
        """Drop what ties the model to its tree (see :meth:`Scopes.release`)."""
        self.scopes.release()
        self._qnames.clear()
        self._live.clear()
        self._scope_names.clear()
        self.__dict__.pop("_by_attr", None)
        self.compile_sites = []
        self.__dict__.pop("source", None)

    # -- names -----------------------------------------------------------------------
    def qualified_names(self, expr: ast.AST, *, visible: bool = False, local: str = "") -> FrozenSet[str]:
        """What ``expr`` (a name or dotted name) may stand for, by the module's
        imports, one entry per binding of its base name: an import is its
        dotted path (``th.compile`` -> "torch.compile", ``import a.b`` -> "a",
        relative imports keep their dots: ".k", "..m.k"); a name bound
        otherwise is ``local`` + its name; a name nothing binds is
        ``builtins.<name>`` when it is a builtin, else nothing (a star
        import, or unbound).  ``del`` binds nothing.

        ``visible``: a bare name stands for the bindings it sees where it is
        (:meth:`visible_bindings`) instead of every binding of its scope; the
        base of a dotted name always has every binding (as libcst had it).
        ``local``: how a non-import binding is spelled: "" gives the bare
        name (a class or function of the module is found by it); "<local>."
        keeps a variable from passing for ``math``, ``torch`` or a module of
        the run.  Cached per node."""
        visible = visible and type(expr) is ast.Name  # a dotted name's base has every binding
        key = (id(expr), visible, local) if visible or local else id(expr)
        found = self._qnames.get(key)
        if found is None:
            found = self._qnames[key] = self._qualified(expr, visible, local)
        return found

    def torch_path(self, expr: ast.AST) -> Optional[str]:
        """The dotted torch path ``expr`` names by the module's imports
        (``th.nn.functional.relu`` -> "torch.nn.functional.relu", ``F.relu``
        with ``import torch.nn.functional as F``), None when it names no
        torch object or may name another: the one reading of torch names
        (the float analysis's summaries use it too)."""
        found = [q for q in self.qualified_names(expr) if q == "torch" or q.startswith("torch.")]
        return found[0] if len(found) == 1 else None

    def _qualified(self, expr: ast.AST, visible: bool, local: str) -> FrozenSet[str]:
        parts: List[str] = []
        base = expr
        while type(base) is ast.Attribute:
            parts.append(base.attr)  # type: ignore[attr-defined]
            base = base.value  # type: ignore[attr-defined]
        if type(base) is not ast.Name:
            return _NO_NAMES
        scope = self.scopes.resolved.get(base)  # type: ignore[arg-type]
        if scope is None:  # nothing binds it
            if base.id not in _BUILTINS:  # type: ignore[attr-defined]
                return _NO_NAMES
            names: FrozenSet[str] = frozenset((f"builtins.{base.id}",))  # type: ignore[attr-defined]
        else:
            every = scope.bindings[base.id]  # type: ignore[attr-defined]
            if visible and not parts and scope is self.scopes.scope_of(base) and not all(b.kind != "del" and self.sees(b, base) for b in every):  # type: ignore[arg-type]
                return self._names(self.visible_bindings(base), base.id, local)  # type: ignore[arg-type,attr-defined]
            # every binding: the same for every load of the name, cached by the scope's list
            key = (id(every), local)
            names = self._scope_names.get(key)  # type: ignore[assignment]
            if names is None:
                names = self._scope_names[key] = self._names(every, base.id, local)  # type: ignore[attr-defined]
        if not parts:
            return names
        suffix = "." + ".".join(reversed(parts))
        return frozenset([q + suffix for q in names])

    @staticmethod
    def _names(bindings: List[Binding], name: str, local: str) -> FrozenSet[str]:
        out: Set[str] = set()
        live = False
        for binding in bindings:
            if binding.kind == "import":
                q = import_target(binding.node, binding.value)  # type: ignore[arg-type]
                if q is not None:
                    out.add(q)
            elif binding.kind != "del":
                out.add(local + name)
            else:
                continue
            live = True
        if not live and name in _BUILTINS:
            out.add(f"builtins.{name}")
        return frozenset(out)

    def bindings(self, name: ast.Name) -> List[Binding]:
        """The bindings a Name load may refer to, wherever they are in its
        scope, in source order (``del`` excluded).  Cached per node."""
        found = self._live.get(id(name))
        if found is None:
            found = self._live[id(name)] = live_bindings(self.scopes.bindings_of(name))
        return found

    def sees(self, binding: Binding, name: ast.Name) -> bool:
        """Does load ``name`` see ``binding``: it is in another scope, or after
        the binding in the same scope (:func:`visible_from`)."""
        return self.scopes.scope_of(name) is not binding.scope or visible_from(binding) <= (name.lineno, name.col_offset)

    def visible_bindings(self, name: ast.Name) -> List[Binding]:
        """The bindings of the scope ``name`` resolves to that it sees; none
        before it in its own scope: the enclosing scopes' (as libcst resolves
        a name read before its first assignment)."""
        bindings = self.bindings(name)
        if not bindings or bindings[0].scope is not self.scopes.scope_of(name):
            return bindings
        earlier = [b for b in bindings if self.sees(b, name)]
        if earlier:
            return earlier
        parent = bindings[0].scope.parent
        while parent is not None and parent.kind == "class":
            parent = parent.parent
        owner = self.scopes.lookup(parent, name.id) if parent is not None else None
        return live_bindings(owner.bindings.get(name.id, [])) if owner is not None else []

    def is_torch_compile(self, expr: ast.AST) -> bool:
        if type(expr) is ast.Attribute and expr.attr != "compile":  # type: ignore[attr-defined]
            return False  # a dotted name ends as its last attribute does
        base = expr
        while isinstance(base, ast.Attribute):
            base = base.value
        if not isinstance(base, ast.Name):
            return False
        return TORCH_COMPILE in self.qualified_names(expr)

    def torch_name(self) -> str:
        return self.torch_alias or TORCH

    def _collect_module_names(self) -> None:
        for stmt in self.tree.body:
            # a name defined twice at module level: the last definition is the
            # one bound after the module body ran (as the CST analysis had it)
            if isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
            elif isinstance(stmt, _FUNCS):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname is not None:
                        if alias.name == TORCH:
                            self.torch_alias = self.torch_alias or alias.asname
                    elif alias.name == TORCH or alias.name.startswith(TORCH + "."):
                        self.torch_alias = TORCH if self.torch_alias is None else self.torch_alias

    # -- compile sites -------------------------------------------------------------------
    def _collect_compile_sites(self) -> None:
        source = self.source
        for node in source.nodes(ast.FunctionDef) + source.nodes(ast.AsyncFunctionDef):
            for dec in node.decorator_list:  # type: ignore[attr-defined]
                if self.is_torch_compile(dec):
                    self._add_decorated(dec, None, node)
                elif isinstance(dec, ast.Call) and self.is_torch_compile(dec.func):
                    self._add_decorated(dec, dec, node)
        for node in source.nodes(ast.Call):
            self._visit_call(node)  # type: ignore[arg-type]
        self.compile_sites.sort(key=lambda s: (s.node.lineno, s.node.col_offset))  # type: ignore[attr-defined]

    def _add_decorated(self, node: ast.AST, options_call: Optional[ast.Call], fn: ast.AST) -> None:
        cls = self.source.enclosing(fn, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        binding = fn.name  # type: ignore[attr-defined]
        if isinstance(cls, ast.ClassDef):
            binding = f"self.{fn.name}"  # type: ignore[attr-defined]
            if is_static(fn) and self.source.parent(cls) is self.source.tree:
                # a compiled staticmethod of a module-level class is called
                # through the class (compressed-tensors' `FP4_E2M1_DATA.cast_to_fp4(x)`)
                binding = f"{cls.name}.{fn.name}"  # type: ignore[attr-defined]
        # decorators applied before the compile (below it) make what is
        # compiled their wrapper, not ``fn``: its body says nothing of how the
        # arguments are used (a wrapper that branches on a float), unless the
        # wrapper is one of torch's grad/autocast modes
        decorators = fn.decorator_list  # type: ignore[attr-defined]
        at = next((i for i, d in enumerate(decorators) if d is node or d is options_call), len(decorators))
        hidden = any(not self._transparent_decorator(d) for d in decorators[at + 1 :])
        self.compile_sites.append(CompileSite("decorator", node, options_call, fn, None if hidden else fn, binding, fn))  # type: ignore[arg-type]

    def _transparent_decorator(self, expr: ast.AST) -> bool:
        """A decorator that runs the function with the same arguments:
        torch's grad and autocast modes (``@torch.no_grad()``)."""
        target = expr.func if isinstance(expr, ast.Call) else expr
        return any(q in _TRANSPARENT_DECORATORS for q in self.qualified_names(target))

    def _visit_call(self, node: ast.Call) -> None:
        if self.is_torch_compile(node.func):
            parent = self.source.parent(node)  # the parent map is built only where something compiles
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in parent.decorator_list:
                return  # a decorator: collected with its function
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            if positional:
                self._add_wrap(node, node, positional[0])
                return
            # torch.compile(**kw)(fn) / torch.compile(dynamic=False)(fn)
            if isinstance(parent, ast.Call) and parent.func is node:
                outer = [a for a in parent.args if not isinstance(a, ast.Starred)]
                if outer:
                    self._add_wrap(parent, node, outer[0])
            return
        # model.compile(...) on an nn.Module instance, not on a fresh instance
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "compile" and not isinstance(func.value, ast.Call):
            base = dotted_name(func.value)
            if base is None:
                return
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            # the receiver is a variable of this module (not an imported module's attribute)
            if any(b.kind == "import" for b in self.scopes.bindings_of(root)):  # type: ignore[arg-type]
                return
            if self.is_module_instance(func.value):
                self.compile_sites.append(CompileSite("method", node, node, func.value, None, base, self.source.statement_of(node)))

    def _add_wrap(self, wrap_call: ast.Call, options_call: ast.Call, target: ast.AST) -> None:
        parent = self.source.parent(wrap_call)
        if isinstance(parent, ast.IfExp) and wrap_call is not parent.test:
            # `step = torch.compile(f) if compile else f`: the name holds the compiled callable when compiling
            parent = self.source.parent(parent)
        binding: Optional[str] = None
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            binding = dotted_name(parent.targets[0])
        elif isinstance(parent, ast.AnnAssign):
            binding = dotted_name(parent.target)
        elif isinstance(parent, ast.keyword):
            binding = self._stored_field(parent)
        target_def = None
        if isinstance(target, ast.Name):
            target_def = self.resolve_function(target) or self._function_value(target, wrap_call)
        elif isinstance(target, ast.Call) and isinstance(target.func, ast.Name):
            target_def = self._factory_closure(target.func)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = self.source.enclosing(wrap_call, ast.ClassDef)
            if isinstance(cls, ast.ClassDef):
                target_def = self.method(cls, target.attr)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            # a method of a module-level class, compiled once for every
            # instance (``RMSNorm.forward = torch.compile(RMSNorm.forward)``)
            cls = self._class_named(target.value)
            if cls is not None:
                target_def = self.method(cls, target.attr)
        self.compile_sites.append(CompileSite("wrap", wrap_call, options_call, target, target_def, binding, self.source.statement_of(wrap_call)))

    def _stored_field(self, keyword: ast.keyword) -> Optional[str]:
        """``runner.fn`` for ``runner = Runner(fn=torch.compile(...))`` where
        ``Runner`` is a dataclass of this module with a field ``fn``: the
        compiled callable is called as ``runner.fn(...)``."""
        call = self.source.parent(keyword)
        assign = self.source.parent(call) if isinstance(call, ast.Call) else None
        if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name) and keyword.arg):
            return None
        fields = self.dataclass_fields(call) or []  # type: ignore[arg-type]
        return f"{assign.targets[0].id}.{keyword.arg}" if keyword.arg in fields else None

    def dataclass_fields(self, call: ast.Call) -> Optional[List[str]]:
        """The fields, in order, of the class ``call`` constructs when it is
        a ``@dataclass`` of this module; None otherwise."""
        cls = self.classes.get(dotted_name(call.func) or "")
        if not isinstance(cls, ast.ClassDef) or not any("dataclass" in (dotted_name(d.func if isinstance(d, ast.Call) else d) or "") for d in cls.decorator_list):
            return None
        return [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]

    def field_value(self, call: ast.Call, field: str) -> Optional[ast.AST]:
        """What the construction ``call`` of a dataclass of this module
        passes for ``field`` (by keyword, or by position in the fields'
        order); None when it is not passed plainly (a default, ``*``/``**``)."""
        fields = self.dataclass_fields(call)
        if fields is None or field not in fields or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        by_keyword = next((k.value for k in call.keywords if k.arg == field), None)
        if by_keyword is not None:
            return by_keyword
        index = fields.index(field)
        return call.args[index] if index < len(call.args) else None

    def _factory_closure(self, func: ast.Name) -> Optional[ast.AST]:
        """The nested ``def`` a module-level factory returns (``def
        make_step(scale): def step(x): ...; return step``), when every
        ``return`` of the factory returns that one function."""
        factory = self.functions.get(func.id)
        if not isinstance(factory, _FUNCS) or self.resolve_function(func) is not factory:
            return None
        nested = {s.name: s for s in ast.walk(factory) if isinstance(s, _FUNCS) and s is not factory and self.source.enclosing(s, _FUNCS) is factory}
        found: Optional[ast.AST] = None
        for node in ast.walk(factory):
            if isinstance(node, ast.Return) and self.source.enclosing(node, _FUNCS) is factory:
                fn = nested.get(node.value.id) if isinstance(node.value, ast.Name) else None
                if fn is None or (found is not None and fn is not found):
                    return None
                found = fn
        return found

    # -- resolution helpers -----------------------------------------------------------------
    def called_def(self, func: ast.AST) -> Optional[ast.AST]:
        """The ``def`` of this module a call's function names: ``f`` (a
        function in scope) or ``self.m`` (a method of the enclosing class)."""
        if isinstance(func, ast.Name):
            return self.resolve_function(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.source.enclosing(func, ast.ClassDef)
            return self.method(cls, func.attr) if isinstance(cls, ast.ClassDef) else None
        return None

    def resolve_function(self, name: ast.Name) -> Optional[ast.AST]:
        for binding in self.scopes.bindings_of(name):
            if binding.kind == "def":
                return binding.node
        return None

    def _function_value(self, name: ast.Name, compile_call: ast.AST) -> Optional[ast.AST]:
        """The function a plain variable holds when every other binding of it
        binds the same function by name (``step = decode; step = torch.compile(step)``)."""
        found: Optional[ast.AST] = None
        for binding in self.scopes.bindings_of(name):
            if binding.value is compile_call:
                continue
            if binding.kind != "assign" or not isinstance(binding.value, ast.Name):
                return None
            fn = self.resolve_function(binding.value)
            if fn is None or (found is not None and fn is not found):
                return None
            found = fn
        return found

    def constructors(self, func: ast.AST) -> List[ast.AST]:
        """The ``__init__`` a call of ``func`` runs when ``func`` is a class of
        this module (``HeunSolver(denoiser)``), or each class's when it is a
        local name bound once to an entry of a module-level dict whose values
        are classes of this module (physicsnemo's ``solver_cls =
        SOLVERS[solver]; solver_cls(denoiser)``); the class's own ``__init__``
        or the first one up its bases defined here.  Empty otherwise."""
        if not isinstance(func, ast.Name):
            return []
        classes = [self._class_named(func)]
        if classes[0] is None:
            bindings = [b for b in self.scopes.bindings_of(func) if b.kind != "del"]
            value = bindings[0].value if len(bindings) == 1 and bindings[0].kind in ("assign", "annassign") else None
            table = self._class_table(value.value) if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) else None
            classes = table or []
        inits = [self._init_of(cls) for cls in classes if cls is not None]
        return [init for init in inits if init is not None]

    def _class_named(self, name: ast.Name) -> Optional[ast.ClassDef]:
        """The module-level class ``name`` resolves to, if any."""
        for binding in self.scopes.bindings_of(name):
            if binding.kind == "class" and self.classes.get(name.id) is binding.node:
                return binding.node  # type: ignore[return-value]
        return None

    def _class_table(self, name: ast.Name) -> Optional[List[ast.ClassDef]]:
        """The classes a module-level dict display bound once to ``name``
        holds as values, when every value is a class of this module."""
        bindings = [b for b in self.scopes.bindings_of(name) if b.kind != "del"]
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or bindings[0].scope is not self.scopes.module:
            return None
        value = bindings[0].value
        if not isinstance(value, ast.Dict) or not value.values:
            return None
        found = [self.classes.get(v.id) if isinstance(v, ast.Name) else None for v in value.values]
        return found if all(c is not None for c in found) else None  # type: ignore[return-value]

    def _init_of(self, cls: ast.ClassDef, depth: int = 0) -> Optional[ast.AST]:
        init = self.method(cls, "__init__")
        if init is not None or depth > 8:
            return init
        for base in cls.bases:
            parent = self.classes.get(dotted_name(base) or "")
            if parent is not None and parent is not cls:
                return self._init_of(parent, depth + 1)
        return None

    @staticmethod
    def method(cls: ast.ClassDef, name: str) -> Optional[ast.AST]:
        for stmt in cls.body:
            if isinstance(stmt, _FUNCS) and stmt.name == name:
                return stmt
        return None

    def is_module_class(self, cls: ast.ClassDef) -> bool:
        """Does ``cls`` subclass ``torch.nn.Module`` (directly or via classes of this module)?"""
        return self._derives(cls, lambda qn: bool(qn & _MODULE_BASE_NAMES) or any(q.startswith(_NN_PREFIXES) for q in qn), set())

    def is_optimizer_class(self, cls: ast.ClassDef) -> bool:
        """Does ``cls`` subclass ``torch.optim.Optimizer`` (directly or via classes of this module)?"""
        return self._derives(cls, lambda qn: bool(qn & _OPTIMIZER_BASE_NAMES), set())

    def classes_deriving(self, owner: ast.ClassDef) -> List[ast.ClassDef]:
        """``owner`` and every class of this module that derives from it,
        directly or through classes of this module (what ``self`` of a
        method of ``owner``, a mixin, may be), in source order."""
        if self.classes.get(owner.name) is not owner:
            return []  # not a module-level class: nothing here derives from it by name
        out = [c for c in self.classes.values() if c is owner or self._derives(c, lambda qn: owner.name in qn, set())]
        return sorted(out, key=lambda c: c.lineno)

    def _derives(self, cls: ast.ClassDef, test, seen: Set[str]) -> bool:
        """Does a base of ``cls`` (or of a class of this module it derives
        from) have qualified names ``test`` accepts?"""
        for base in cls.bases:
            if test(self.qualified_names(base)):
                return True
            name = dotted_name(base)
            if name in self.classes and name not in seen:
                seen.add(name)  # type: ignore[arg-type]
                if self._derives(self.classes[name], test, seen):  # type: ignore[index]
                    return True
        return False

    def assigned_values(self, name: ast.Name) -> Iterator[ast.AST]:
        """The values assigned to ``name`` (``x = v``, ``x: T = v``, ``(x := v)``) in its scope, in source order."""
        for binding in self.scopes.bindings_of(name):
            if binding.kind in ("assign", "annassign", "walrus") and binding.value is not None:
                yield binding.value

    def instance_class(self, name: ast.Name) -> Optional[ast.ClassDef]:
        """The class defined in this module (an nn.Module or a plain one) that
        ``name``, bound exactly once (``x = Cls(...)``, ``x: T = Cls(...)``),
        is an instance of; None when it is bound otherwise or more than once."""
        bindings = [b for b in self.scopes.bindings_of(name) if b.kind != "del"]
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or not isinstance(bindings[0].value, ast.Call):
            return None
        stmt = bindings[0].stmt
        if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return None
        cls = self.classes.get(dotted_name(bindings[0].value.func) or "")
        return cls if isinstance(cls, ast.ClassDef) else None

    @staticmethod
    def self_attr_values(class_def: ast.ClassDef, attr: str) -> List[ast.AST]:
        """The values assigned to ``self.<attr>`` in the methods of ``class_def``
        (not in nested classes), in source order."""
        table = getattr(class_def, "_fr_self_attrs", None)
        if table is None:  # one walk of the class gives every attribute's values
            table = {}
            stack: List[ast.AST] = list(class_def.body)
            while stack:
                node = stack.pop()
                kind = type(node)
                if kind is ast.ClassDef:
                    continue
                if kind is ast.Assign:
                    for name in dict.fromkeys(_self_attr_name(t) for t in node.targets):  # type: ignore[attr-defined]
                        if name is not None:
                            table.setdefault(name, []).append(node.value)  # type: ignore[attr-defined]
                elif kind is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
                    name = _self_attr_name(node.target)  # type: ignore[attr-defined]
                    if name is not None:
                        table.setdefault(name, []).append(node.value)  # type: ignore[attr-defined]
                stack.extend(children(node))
            for values in table.values():
                values.sort(key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
            class_def._fr_self_attrs = table  # type: ignore[attr-defined]
        return list(table.get(attr, ()))

    def module_class_of(self, expr: ast.AST) -> Optional[ast.ClassDef]:
        """The nn.Module subclass defined here that ``expr`` is an instance of, if visible."""
        if isinstance(expr, ast.Call):
            cls = self.classes.get(dotted_name(expr.func) or "")
            return cls if cls is not None and self.is_module_class(cls) else None
        values: List[ast.AST] = []
        if isinstance(expr, ast.Name):
            looped = self.loop_module_class(expr)
            if looped is not None:
                return looped
            values = list(self.assigned_values(expr))
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = self.source.enclosing(expr, ast.ClassDef)
            if isinstance(cls, ast.ClassDef):
                values = self.self_attr_values(cls, expr.attr)
        if isinstance(expr, ast.Attribute):
            # self.sampler = sampler, `sampler = RBLNSampler(...)` in that method (one step)
            values = [v for value in values for v in ([*self.assigned_values(value)] if isinstance(value, ast.Name) else [value])]
        for value in values:
            # model = torch.compile(Model()) / model = Model().to(device)
            if isinstance(value, ast.Call) and self.is_torch_compile(value.func) and value.args:
                value = value.args[0]
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
                value = value.func.value
            found = self.module_class_of(value) if isinstance(value, ast.Call) else None
            if found is not None:
                return found
        return None

    def factory_module_classes(self, expr: ast.AST) -> List[ast.ClassDef]:
        """The nn.Module classes of this module that ``self.<attr>`` (``expr``)
        may hold when ``__init__`` or another method binds it to what a
        module-level function of this module returns, and that function
        returns an instance of one of several classes (NeMo Automodel's
        ``initialize_rms_norm_module(impl, dim)``: ``Float32RMSNorm(...)`` or
        ``nn.RMSNorm(...)``).  A "may": which one depends on the arguments;
        :meth:`module_class_of` names only a class the value surely has."""
        if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self"):
            return []
        owner = self.source.enclosing(expr, ast.ClassDef)
        if not isinstance(owner, ast.ClassDef):
            return []
        found: List[ast.ClassDef] = []
        for value in self.self_attr_values(owner, expr.attr):
            if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
                continue
            factory = self.resolve_function(value.func)
            if not isinstance(factory, _FUNCS) or self.source.parent(factory) is not self.source.tree:
                continue
            for node in ast.walk(factory):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and self.source.enclosing(node, _FUNCS) is factory:
                    cls = self.module_class_of(node.value)
                    if cls is not None and cls not in found:
                        found.append(cls)
        return found

    # -- values the source spells out ----------------------------------------------------------
    def literal(self, expr: ast.AST) -> object:
        """The value of ``expr`` when it is a literal (``False``, ``0.5``,
        ``-1``, ``None``), or a name of this module bound exactly once, at
        module level, to one (``dynamic = False`` at the top of the file,
        then ``torch.compile(fn, dynamic=dynamic)``); :data:`UNKNOWN`
        otherwise (a name bound twice, in a function, through ``global``,
        to anything else)."""
        if isinstance(expr, ast.Name):
            bindings = self.scopes.bindings_of(expr)
            if len(bindings) != 1:
                return UNKNOWN
            binding = bindings[0]
            if binding.kind not in ("assign", "annassign") or binding.scope is not self.scopes.module or binding.value is None:
                return UNKNOWN
            expr = binding.value
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
            if type(expr.operand.value) in (int, float):
                return -expr.operand.value
        return UNKNOWN

    # -- modules compiled one by one in a loop (regional compilation) -------------------------
    def loop_module_class(self, name: ast.Name) -> Optional[ast.ClassDef]:
        """The nn.Module class of this module that ``name``, a ``for`` target,
        is an instance of: from an ``isinstance(name, C)`` test guarding this
        use (``for m in model.modules(): if isinstance(m, Block): m.compile()``),
        else from what the loop runs over (``for b in model.layers``, ``layers``
        an ``nn.ModuleList([Block(i) for i in ...])``).  The loop's binding
        must be the only one ``name`` sees there (``for i, block in
        enumerate(blocks): block = torch.compile(block)`` reads the loop's)."""
        bindings = self.visible_bindings(name)
        if len(bindings) != 1 or bindings[0].kind != "for" or not isinstance(bindings[0].value, (ast.For, ast.AsyncFor)):
            return None
        loop = bindings[0].value
        if loop in self._resolving:
            return None  # `for b in b.layers`: no answer through itself
        child: ast.AST = name
        for anc in self.source.ancestors(name):
            if anc is loop:
                break
            if isinstance(anc, ast.If) and any(s is child for s in anc.body):
                cls = self._isinstance_class(anc.test, name.id)
                if cls is not None:
                    return cls
            child = anc
        else:
            return None  # not inside its loop
        self._resolving.add(loop)
        try:
            return self.element_class(loop.iter)
        finally:
            self._resolving.discard(loop)

    def loop_imported_classes(self, name: ast.Name) -> List[str]:
        """Qualified names (as imported here) of the classes of other modules
        that an ``isinstance(name, C)`` test guarding this use of a ``for``
        target names (``for m in model.modules(): if isinstance(m, Layer):
        m.compile()``, ``Layer`` imported), in the tests' order; torch's own
        classes left out."""
        bindings = self.scopes.bindings_of(name)
        if len(bindings) != 1 or bindings[0].kind != "for" or not isinstance(bindings[0].value, (ast.For, ast.AsyncFor)):
            return []
        loop = bindings[0].value
        out: List[str] = []
        child: ast.AST = name
        for anc in self.source.ancestors(name):
            if anc is loop:
                return out
            if isinstance(anc, ast.If) and any(s is child for s in anc.body):
                for kind in self._isinstance_kinds(anc.test, name.id):
                    names = self.qualified_names(kind)
                    q = next(iter(names)) if len(names) == 1 else ""
                    if any(b.kind == "import" for b in self.scopes.bindings_of(_root_name(kind))) and not q.startswith((TORCH + ".", "builtins.")) and q not in out:
                        out.append(q)
            child = anc
        return []  # not inside its loop

    def _isinstance_kinds(self, test: ast.AST, name: str) -> List[ast.AST]:
        """The class expressions of ``isinstance(name, C)`` / ``isinstance(name, (C, D))`` tests in ``test`` (an ``or`` of them)."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        out: List[ast.AST] = []
        for part in parts:
            if (
                isinstance(part, ast.Call)
                and isinstance(part.func, ast.Name)
                and part.func.id == "isinstance"
                and self.scopes.is_builtin(part.func)
                and len(part.args) == 2
                and isinstance(part.args[0], ast.Name)
                and part.args[0].id == name
            ):
                out.extend(part.args[1].elts if isinstance(part.args[1], ast.Tuple) else [part.args[1]])
        return out

    def _isinstance_class(self, test: ast.AST, name: str) -> Optional[ast.ClassDef]:
        """The first nn.Module class of this module among the ``isinstance``
        kinds of ``test``, or named by a class-name test (:meth:`_class_name_tests`)."""
        for kind in self._isinstance_kinds(test, name):
            cls = self.classes.get(dotted_name(kind) or "")
            if cls is not None and self.is_module_class(cls):
                return cls
        for class_name in self._class_name_tests(test, name):
            cls = self.classes.get(class_name)
            if cls is not None and self.is_module_class(cls):
                return cls
        return None

    def _class_name_tests(self, test: ast.AST, name: str) -> List[str]:
        """Class names ``test`` matches ``name`` by (``m.__class__.__name__ ==
        "Block"``, ``type(m).__name__ in ("Block", "Layer")``), alone or in an
        ``or``: modules chosen for compiling by class name."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        out: List[str] = []
        for part in parts:
            if not (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], (ast.Eq, ast.In))):
                continue
            left, right = part.left, part.comparators[0]
            if not (isinstance(left, ast.Attribute) and left.attr == "__name__"):
                continue
            of = left.value
            is_class = isinstance(of, ast.Attribute) and of.attr == "__class__" and isinstance(of.value, ast.Name) and of.value.id == name
            is_type = isinstance(of, ast.Call) and isinstance(of.func, ast.Name) and of.func.id == "type" and len(of.args) == 1 and isinstance(of.args[0], ast.Name) and of.args[0].id == name
            if not (is_class or is_type):
                continue
            if isinstance(part.ops[0], ast.In) and not isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                out.extend(self._class_list_names(right))  # diffusers' `in repeated_blocks`
                continue
            values = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and isinstance(part.ops[0], ast.In) else [right]
            out.extend(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        return out

    def _class_list_names(self, expr: ast.AST) -> List[str]:
        """The class names a list of them read from the model names:
        ``self._repeated_blocks``, or a local bound once to it or to
        ``getattr(self, "_repeated_blocks", None)`` (diffusers'
        ``compile_repeated_blocks``): every string list the module's classes
        give that class attribute (the subclass that sets it is the model)."""
        attr: Optional[str] = None
        if isinstance(expr, ast.Name):
            bindings = self.scopes.bindings_of(expr)
            if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
                return []
            expr = bindings[0].value
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            attr = expr.attr
        elif (
            isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr" and len(expr.args) >= 2
            and isinstance(expr.args[0], ast.Name) and expr.args[0].id == "self"
            and isinstance(expr.args[1], ast.Constant) and isinstance(expr.args[1].value, str)
        ):
            attr = expr.args[1].value
        if attr is None:
            return []
        out: List[str] = []
        for cls in self.classes.values():
            for stmt in cls.body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else getattr(stmt, "target", None) if isinstance(stmt, ast.AnnAssign) else None
                value = getattr(stmt, "value", None)
                if isinstance(target, ast.Name) and target.id == attr and isinstance(value, (ast.List, ast.Tuple, ast.Set)):
                    out.extend(v.value for v in value.elts if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value not in out)
        return out

    def element_class(self, expr: ast.AST, depth: int = 0) -> Optional[ast.ClassDef]:
        """The nn.Module class of this module every element of the container
        ``expr`` is an instance of: ``[Block(i) for i in ...]``,
        ``nn.ModuleList(...)``, ``nn.Sequential(...)``, ``(A(), A())``, a name
        or ``self.layers`` / ``model.layers`` bound to one, and
        ``.children()``, ``.named_children()``, ``.values()``, ``.items()``,
        ``reversed()``, ``list()``, ``enumerate()`` of one."""
        if depth > 4:
            return None
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.module_class_of(expr.elt) if isinstance(expr.elt, ast.Call) else None
        if isinstance(expr, ast.DictComp):
            return self.module_class_of(expr.value) if isinstance(expr.value, ast.Call) else None
        if isinstance(expr, (ast.List, ast.Tuple, ast.Dict)):
            elts = expr.values if isinstance(expr, ast.Dict) else expr.elts
            found = {id(c): c for c in (self.module_class_of(e) if isinstance(e, ast.Call) else None for e in elts)}
            return next(iter(found.values())) if len(found) == 1 else None
        if isinstance(expr, ast.Call):
            func = expr.func
            if expr.args and any(q.endswith(".Sequential") and q.startswith(_NN_PREFIXES) for q in self.qualified_names(func)):
                args = [a.value if isinstance(a, ast.Starred) else a for a in expr.args]
                if len(args) == 1 and isinstance(expr.args[0], ast.Starred):
                    return self.element_class(args[0], depth + 1)  # nn.Sequential(*[Block(i) for i in ...])
                return self.element_class(ast.Tuple(elts=args), depth + 1)
            if isinstance(func, ast.Attribute) and func.attr in ("children", "named_children", "values", "items") and not expr.args:
                return self.element_class(func.value, depth + 1)
            if len(expr.args) == 1 and not expr.keywords:
                names = self.qualified_names(func)
                container = {"builtins.reversed", "builtins.list", "builtins.tuple", "builtins.enumerate"}
                if names & container or any(q.endswith((".ModuleList", ".ModuleDict")) and q.startswith(_NN_PREFIXES) for q in names):
                    return self.element_class(expr.args[0], depth + 1)
            return None
        values: List[ast.AST] = []
        if isinstance(expr, ast.Name):
            values = list(self.assigned_values(expr))
        elif isinstance(expr, ast.Attribute):
            owner: Optional[ast.ClassDef] = None
            if isinstance(expr.value, ast.Name) and expr.value.id == "self":
                enclosing = self.source.enclosing(expr, ast.ClassDef)
                owner = enclosing if isinstance(enclosing, ast.ClassDef) else None
            elif isinstance(expr.value, (ast.Name, ast.Attribute)):
                owner = self.module_class_of(expr.value)
            if owner is not None:
                values = self.self_attr_values(owner, expr.attr)
                if values and all(self._empty_module_container(v) for v in values):
                    # `self.blocks = nn.ModuleDict()`, then `self.blocks[str(i)] = Block(...)`
                    # in a loop (torchtitan's and cosmos-rl's layout): the class of what is put in
                    put = self._filled_entries(owner, expr.attr)
                    found = {id(c): c for c in (self.module_class_of(v) if isinstance(v, ast.Call) else None for v in put)}
                    return next(iter(found.values())) if len(found) == 1 and None not in found.values() else None
            else:
                values = self._module_dict_entries(expr) or self._bound_by_module_classes(expr)
        found = {id(c): c for c in (self.element_class(v, depth + 1) for v in values)}
        return next(iter(found.values())) if len(found) == 1 and None not in found.values() else None

    def _empty_module_container(self, value: ast.AST) -> bool:
        """``nn.ModuleList()`` / ``nn.ModuleDict()`` with nothing in it."""
        return (
            isinstance(value, ast.Call) and not value.args and not value.keywords
            and any(q.endswith((".ModuleList", ".ModuleDict")) and q.startswith(_NN_PREFIXES) for q in self.qualified_names(value.func))
        )

    def _filled_entries(self, owner: ast.ClassDef, attr: str) -> List[ast.AST]:
        """What the methods of ``owner`` put into ``self.<attr>``:
        ``self.<attr>[key] = v`` and ``self.<attr>.append(v)``; empty when
        anything else changes it (an ``extend``, an ``update``, a ``+=``)."""
        out: List[ast.AST] = []
        for node in walk(owner):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
                if _self_attr_name(node.targets[0].value) == attr:
                    out.append(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _self_attr_name(node.func.value) == attr:
                if node.func.attr == "append" and len(node.args) == 1 and not node.keywords:
                    out.append(node.args[0])
                elif node.func.attr in ("extend", "update", "insert", "__setitem__", "add_module", "register_module"):
                    return []
            elif isinstance(node, ast.AugAssign) and _self_attr_name(node.target) == attr:
                return []
        return out

    def _bound_by_module_classes(self, expr: ast.Attribute) -> List[ast.AST]:
        """``transformer.transformer_blocks`` where ``transformer`` is a
        parameter of unknown class (musubi-tuner's ``compile_transformer(self,
        args, transformer)``): what the nn.Module classes of this module that
        bind ``self.transformer_blocks`` assign to it; empty when a class that
        is no nn.Module binds it too (the caller then takes the one element
        class they all agree on, or none)."""
        if not (isinstance(expr.value, ast.Name) and expr.value.id != "self"):
            return []
        if any(b.kind != "param" for b in self.scopes.bindings_of(expr.value)):
            return []
        out: List[ast.AST] = []
        for cls in self.classes.values():
            values = self.self_attr_values(cls, expr.attr)
            if values and not self.is_module_class(cls):
                return []
            out.extend(values)
        return out

    def _module_dict_entries(self, expr: ast.Attribute) -> List[ast.AST]:
        """``self.transformer.h`` where the class binds ``self.transformer =
        nn.ModuleDict({"h": ..., ...})`` (or ``nn.ModuleDict(dict(h=...))``):
        the values given under that key (nanoGPT's and nanochat's layout)."""
        holder = expr.value
        if not (isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name) and holder.value.id == "self"):
            return []
        cls = self.source.enclosing(expr, ast.ClassDef)
        if not isinstance(cls, ast.ClassDef):
            return []
        out: List[ast.AST] = []
        for value in self.self_attr_values(cls, holder.attr):
            if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords):
                continue
            if not any(q.endswith(".ModuleDict") and q.startswith(_NN_PREFIXES) for q in self.qualified_names(value.func)):
                continue
            table = value.args[0]
            if isinstance(table, ast.Dict):
                out.extend(v for k, v in zip(table.keys, table.values) if isinstance(k, ast.Constant) and k.value == expr.attr)
            elif isinstance(table, ast.Call) and isinstance(table.func, ast.Name) and table.func.id == "dict" and not table.args:
                out.extend(kw.value for kw in table.keywords if kw.arg == expr.attr)
        return out

    def is_module_instance(self, expr: ast.AST) -> bool:
        if self.module_class_of(expr) is not None:
            return True
        if isinstance(expr, ast.Name) and expr.id == "self":
            cls = self.source.enclosing(expr, ast.ClassDef)
            return isinstance(cls, ast.ClassDef) and self.is_module_class(cls)
        if isinstance(expr, ast.Name):
            for value in self.assigned_values(expr):
                if isinstance(value, ast.Call) and any(q.startswith(_NN_PREFIXES) for q in self.qualified_names(value.func)):
                    return True
            if self.loop_imported_classes(expr):
                return True  # `for m in model.modules(): if isinstance(m, Layer): m.compile()`, Layer imported
        return False

    # -- calls of compiled callables -------------------------------------------------------------
    def _find_calls(self, site: CompileSite) -> Iterator[ast.Call]:
        parents = self.source.parents
        if site.form == "wrap":
            parent = parents.get(site.node)
            if isinstance(parent, ast.Call) and parent.func is site.node:
                yield parent  # torch.compile(g)(x)
                return
        binding = site.binding
        if binding is None:
            return
        if "." not in binding:
            yield from self._calls_of_name(site, binding)
            return
        # attribute bindings: self.f, opt.step -- by dotted name, within the
        # class for `self.` bindings, after the compile for others
        cls = self.source.enclosing(site.node, ast.ClassDef) if binding.startswith("self.") else None
        start = (site.node.lineno, site.node.col_offset)  # type: ignore[attr-defined]
        if site.form == "decorator" and is_static(site.statement):
            start = (0, 0)  # compiled when its class is made: every call through the class runs it
        last = binding.rsplit(".", 1)[1]
        for node in self._method_calls().get(last, ()):
            if dotted_name(node.func) != binding:  # type: ignore[attr-defined]
                continue
            if cls is not None:
                if self.source.enclosing(node, ast.ClassDef) is cls or any(a is cls for a in self.source.ancestors(node)):
                    yield node  # type: ignore[misc]
            elif (node.lineno, node.col_offset) > start:  # type: ignore[attr-defined]
                yield node  # type: ignore[misc]

    def _method_calls(self) -> Dict[str, List[ast.Call]]:
        """The calls of an attribute (``a.b.f(...)``) by the attribute's name,
        in the order of ``source.nodes(ast.Call)`` (built once)."""
        found = self.__dict__.get("_by_attr")
        if found is None:
            found = self._by_attr = {}
            for node in self.source.nodes(ast.Call):
                func = node.func  # type: ignore[attr-defined]
                if type(func) is ast.Attribute:
                    found.setdefault(func.attr, []).append(node)  # type: ignore[arg-type]
        return found

    def _calls_of_name(self, site: CompileSite, name: str) -> Iterator[ast.Call]:
        parents = self.source.parents
        if site.form == "method":
            # model.compile(...): calls of the same binding of `model`, after the compile
            target = site.target
            if not isinstance(target, ast.Name):
                return
            scope = self.scopes.resolved.get(target)
            if scope is None:
                return
            start = (site.node.lineno, site.node.col_offset)  # type: ignore[attr-defined]
            for ref in scope.references.get(name, ()):
                call = parents.get(ref)
                if isinstance(call, ast.Call) and call.func is ref and (call.lineno, call.col_offset) > start:
                    yield call
            return
        if site.form == "decorator":
            fn = site.target_def
            scope = self.scopes.of_node.get(fn)  # type: ignore[arg-type]
            owner = scope.parent if scope is not None else None
        else:
            assign = parents.get(site.node)
            tgt = assign.targets[0] if isinstance(assign, ast.Assign) else getattr(assign, "target", None)
            owner = self._store_scope(tgt) if isinstance(tgt, ast.Name) else None
        if owner is None:
            return
        for ref in owner.references.get(name, ()):
            call = parents.get(ref)
            if isinstance(call, ast.Call) and call.func is ref:
                yield call

    def _store_scope(self, target: ast.Name) -> Optional[Scope]:
        """The scope a stored name binds in (``global``/``nonlocal`` followed)."""
        here = self.scopes.name_scope.get(target)
        return self.scopes.lookup(here, target.id) if here is not None else None

    # -- flows of compiled callables -------------------------------------------------------------
    def _follow_flows(self) -> None:
        """Where compiled callables go besides the name or attribute they are
        first bound to, within this module:

        * returned by a function (``def load(): f = torch.compile(g); return f``),
          then bound by a call (``step = load()``, ``self.step = load()``);
        * passed to a function or method defined here (``run(step, x)``): the
          parameter is a compiled callable inside ``run``;
        * compiled by a project decorator, a function whose body compiles its
          parameter and returns the compiled callable or a closure that calls it
          (``@maybe_compile def f``, ``@make(dynamic=None) def f`` when ``make``
          returns such a decorator, ``g = maybe_compile(f)``): ``f`` is compiled,
          and its calls run ``f``'s body (:attr:`CompileSite.call_defs`).

        Holders (a name in the scope that binds it, or ``self.<attr>`` in a
        class) collect the (site, function) pairs that reach them; the calls of
        every holder join its sites' calls.  A value moves one hop per round,
        over lists of the module's assignments, returns and calls built once."""
        source, scopes = self.source, self.scopes
        wraps: Dict[ast.AST, CompileSite] = {s.node: s for s in self.compile_sites if s.form == "wrap"}
        holders: Dict[Tuple[object, str], Set[Tuple[CompileSite, Optional[ast.AST]]]] = {}
        returns: Dict[ast.AST, Set[Tuple[CompileSite, Optional[ast.AST]]]] = {}
        #: project decorators: def -> (site, index of the parameter it compiles)
        decorators: Dict[ast.AST, Tuple[CompileSite, int]] = {}

        def def_key(fn: ast.AST) -> Optional[Tuple[object, str]]:
            """The holder a ``def`` binds its name to."""
            parent = source.parent(fn)
            if isinstance(parent, ast.ClassDef):
                return (parent, "self." + fn.name)  # type: ignore[attr-defined]
            inner = scopes.of_node.get(fn)
            return (inner.parent, fn.name) if inner is not None and inner.parent is not None else None  # type: ignore[attr-defined]

        def key_of(expr: ast.AST, store: bool) -> Optional[Tuple[object, str]]:
            if isinstance(expr, ast.Name):
                scope = self._store_scope(expr) if store else scopes.resolved.get(expr)
                return (scope, expr.id) if scope is not None else None
            if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
                cls = source.enclosing(expr, ast.ClassDef)
                return (cls, "self." + expr.attr) if cls is not None else None
            return None

        callees: Dict[int, Optional[ast.AST]] = {}  # by id of the function expression: every round asks again

        def callee(func: ast.AST) -> Optional[ast.AST]:
            """The ``def`` of this module a call's function names (``f``, ``self.m``)."""
            key = id(func)
            if key in callees:
                return callees[key]
            found = callees[key] = self.called_def(func)
            return found

        def compiled_by(call: ast.Call) -> Set[Tuple[CompileSite, Optional[ast.AST]]]:
            """What a call of a decorator of this module returns compiled: ``D(f)``."""
            fn = callee(call.func)
            hit = decorators.get(fn) if fn is not None else None
            if hit is None:
                return set()
            site, index = hit
            offset = 1 if isinstance(source.parent(fn), ast.ClassDef) else 0  # type: ignore[arg-type]
            args = call.args[: next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), len(call.args))]
            if index - offset < 0 or index - offset >= len(args):
                return set()
            arg = args[index - offset]
            target = self.resolve_function(arg) if isinstance(arg, ast.Name) else None
            return {(site, target)}

        def may_reach(expr: ast.AST) -> bool:
            """Can :func:`reached` ever find something for ``expr`` (whatever the round)?"""
            if expr in wraps:
                return True
            if isinstance(expr, ast.Call):
                return callee(expr.func) is not None
            return key_of(expr, store=False) is not None

        def reached(expr: ast.AST) -> Set[Tuple[CompileSite, Optional[ast.AST]]]:
            site = wraps.get(expr)
            if site is not None:
                return {(site, site.target_def)}
            if isinstance(expr, ast.Call):
                fn = callee(expr.func)
                out = set(returns.get(fn, ())) if fn is not None else set()
                return out | compiled_by(expr)
            key = key_of(expr, store=False)
            return set(holders.get(key, ())) if key is not None else set()

        # the lists every round reads, built once
        assigns: List[Tuple[Tuple[object, str], ast.AST]] = []
        for node in source.nodes(ast.Assign) + source.nodes(ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            if len(targets) != 1 or not isinstance(value, (ast.Name, ast.Attribute, ast.Call)):
                continue
            key = key_of(targets[0], store=True)
            if key is not None:
                assigns.append((key, value))
        rets: List[Tuple[ast.AST, ast.AST]] = []
        self._returned_defs: Dict[ast.AST, List[ast.AST]] = {}  # def -> the defs nested in it that it returns
        for node in source.nodes(ast.Return):
            if node.value is not None:  # type: ignore[attr-defined]
                fn = source.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
                if isinstance(fn, _FUNCS):
                    rets.append((fn, node.value))  # type: ignore[attr-defined]
                    inner = self.resolve_function(node.value) if isinstance(node.value, ast.Name) else None  # type: ignore[attr-defined]
                    if inner is not None and source.parent(inner) is fn:
                        self._returned_defs.setdefault(fn, []).append(inner)
        passes: List[Tuple[Tuple[object, str], ast.AST]] = []
        for node in source.nodes(ast.Call):
            if not node.args and not node.keywords:  # type: ignore[attr-defined]
                continue
            fn = callee(node.func)  # type: ignore[attr-defined]
            if fn is not None:
                bound = isinstance(source.parent(fn), ast.ClassDef) and isinstance(node.func, ast.Attribute)  # type: ignore[attr-defined]
                targets = [(fn, bound)]
            else:  # Cls(f) / SOLVERS[name](f): the parameters of each class's __init__
                targets = [(init, True) for init in self.constructors(node.func)]  # type: ignore[attr-defined]
            for fn, bound in targets:
                inner = scopes.of_node.get(fn)
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]  # type: ignore[attr-defined]
                if bound:
                    params = params[1:]
                for i, arg in enumerate(node.args):  # type: ignore[attr-defined]
                    if isinstance(arg, ast.Starred) or i >= len(params):
                        break
                    passes.append(((inner, params[i]), arg))
                names = set(params) | {a.arg for a in fn.args.kwonlyargs}  # type: ignore[attr-defined]
                for kw in node.keywords:  # type: ignore[attr-defined]
                    if kw.arg in names:
                        passes.append(((inner, kw.arg), kw.value))
        # decorator candidates: a compile of a parameter of the enclosing function
        candidates: List[Tuple[ast.AST, CompileSite, int]] = []
        for site in wraps.values():
            if not isinstance(site.target, ast.Name):
                continue
            bindings = scopes.bindings_of(site.target)
            if len(bindings) != 1 or bindings[0].kind != "param" or not isinstance(bindings[0].scope.node, _FUNCS):
                continue
            fn = bindings[0].scope.node
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]  # type: ignore[attr-defined]
            if site.target.id in params:
                candidates.append((fn, site, params.index(site.target.id)))
        decorated: List[Tuple[ast.AST, ast.AST]] = [
            (fn, dec) for fn in source.nodes(ast.FunctionDef) + source.nodes(ast.AsyncFunctionDef) for dec in fn.decorator_list  # type: ignore[attr-defined]
        ] if candidates else []
        for site in self.compile_sites:  # the seeds: @torch.compile def f
            if site.form == "decorator" and site.target_def is not None:
                key = def_key(site.target_def)
                if key is not None:
                    holders.setdefault(key, set()).add((site, site.target_def))

        # values that never reach anything leave the rounds (they add nothing)
        rets = [(fn, value) for fn, value in rets if may_reach(value)]
        assigns = [(key, value) for key, value in assigns if may_reach(value)]
        passes = [(key, value) for key, value in passes if may_reach(value)]
        for _ in range(4):
            size = sum(len(v) for v in holders.values()) + sum(len(v) for v in returns.values()) + len(decorators)
            for fn, value in rets:
                found = reached(value)
                if found:
                    returns.setdefault(fn, set()).update(found)
            for fn, site, index in candidates:
                if fn not in decorators and self._returns_compiled(fn, site, returns):
                    decorators[fn] = (site, index)
            for key, value in assigns:
                found = reached(value)
                if found:
                    holders.setdefault(key, set()).update(found)
            for key, value in passes:
                found = reached(value)
                if found:
                    holders.setdefault(key, set()).update(found)
            for fn, dec in decorated:
                deco = self._decorator_def(dec, decorators)
                if deco is not None and decorators[deco][1] == 0:
                    self.project_decorated.setdefault(fn, (decorators[deco][0], dec))
                    key = def_key(fn)
                    if key is not None:
                        holders.setdefault(key, set()).add((decorators[deco][0], fn))
            if size == sum(len(v) for v in holders.values()) + sum(len(v) for v in returns.values()) + len(decorators):
                break
        self._add_holder_calls(holders)

    def _returns_compiled(self, fn: ast.AST, site: CompileSite, returns) -> bool:
        """Does ``fn`` hand out what ``site`` compiles: it returns the compiled
        callable, or a function it defines whose body calls it (a closure)."""
        if any(s is site for s, _ in returns.get(fn, ())):
            return True
        source = self.source
        for inner in self._returned_defs.get(fn, ()):
            if any(a is inner for a in source.ancestors(site.node)) or any(any(a is inner for a in source.ancestors(c)) for c in site.calls):
                return True
        return False

    def _decorator_def(self, dec: ast.AST, decorators) -> Optional[ast.AST]:
        """The project decorator ``dec`` applies: ``@D`` or ``@make(...)`` with
        ``make`` returning ``D``, a function it defines."""
        if isinstance(dec, ast.Name):
            fn = self.resolve_function(dec)
            return fn if fn in decorators else None
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name):
            maker = self.resolve_function(dec.func)
            for inner in self._returned_defs.get(maker, ()) if maker is not None else ():
                if inner in decorators:
                    return inner
        return None

    def _add_holder_calls(self, holders) -> None:
        """Every call of a holder joins the calls of the sites that reach it."""
        source = self.source
        attrs: Dict[str, List[Tuple[ast.ClassDef, str]]] = {}
        for key in holders:
            if isinstance(key[0], ast.ClassDef):
                attrs.setdefault(key[1][len("self."):], []).append(key)  # type: ignore[arg-type]
        #: class -> the holder classes whose `self.<attr>` it sees (itself, the classes it derives from here)
        sees: Dict[ast.ClassDef, List[ast.ClassDef]] = {}
        for keys in attrs.values():
            for owner, _name in keys:
                for sub in self.classes_deriving(owner) or [owner]:
                    sees.setdefault(sub, []).append(owner)
        calls_of: Dict[Tuple[object, str], List[ast.Call]] = {}
        if attrs:
            for node in source.nodes(ast.Call):
                func = node.func  # type: ignore[attr-defined]
                if isinstance(func, ast.Attribute) and func.attr in attrs and isinstance(func.value, ast.Name) and func.value.id == "self":
                    cls = source.enclosing(node, ast.ClassDef)
                    for owner in dict.fromkeys(sees.get(cls, ())):  # type: ignore[arg-type]
                        if (owner, "self." + func.attr) in holders:
                            calls_of.setdefault((owner, "self." + func.attr), []).append(node)  # type: ignore[arg-type]
        parents = source.parents
        changed: Set[CompileSite] = set()
        defs: Dict[Tuple[CompileSite, ast.Call], Set[Optional[ast.AST]]] = {}
        for key, pairs in holders.items():
            scope, name = key
            if isinstance(scope, ast.ClassDef):
                calls = calls_of.get(key, [])
            else:
                calls = []
                for ref in scope.references.get(name, ()):  # type: ignore[attr-defined]
                    call = parents.get(ref)
                    if isinstance(call, ast.Call) and call.func is ref:
                        calls.append(call)
            for site, fn in pairs:
                for call in calls:
                    defs.setdefault((site, call), set()).add(fn)
                    changed.add(site)
        for (site, call), fns in defs.items():
            if call not in site.calls:
                site.calls.append(call)
            fn = next(iter(fns)) if len(fns) == 1 else None  # two functions may reach it: neither is known
            if fn is not site.target_def:
                site.call_defs[call] = fn  # type: ignore[assignment]
        for site in changed:
            site.calls.sort(key=lambda c: (c.lineno, c.col_offset))
        module = self.scopes.module
        for (scope, name), pairs in holders.items():
            fns = {fn for _, fn in pairs}
            if scope is module and len(fns) == 1:
                fn = next(iter(fns))
                if isinstance(fn, _FUNCS) and self.source.parent(fn) is self.tree:
                    self._flow_module_names[name] = fn

    # -- options passed through **kwargs ------------------------------------------------------------
    def star_kwargs_option(self, site: CompileSite, name: str) -> Optional[Tuple[ast.AST, ast.AST]]:
        """``(entry, value)`` when compile option ``name`` reaches ``site`` through
        ``**opts``, ``opts`` a name assigned once in its scope from a dict display
        or ``dict(name=v)`` and only ever used as ``**opts``; ``entry`` is the
        dict key (display) or keyword that sets it.  None when the dict cannot be seen."""
        if site.options_call is None:
            return None
        for kw in site.options_call.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Name):
                found = self._dict_entry(kw.value, name)
                if found is not None:
                    return found
        return None

    def _dict_entry(self, ref: ast.Name, key: str) -> Optional[Tuple[ast.AST, ast.AST]]:
        bindings = self.scopes.bindings_of(ref)
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign"):
            return None
        scope = bindings[0].scope
        parents = self.source.parents
        for access in scope.references.get(ref.id, ()):
            parent = parents.get(access)
            if not (isinstance(parent, ast.keyword) and parent.arg is None and parent.value is access):
                return None
        value = bindings[0].value
        entries: List[Tuple[Optional[str], Optional[ast.AST], Optional[ast.AST]]] = []
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values):
                if k is None:
                    entries.append((None, None, None))  # **other
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    entries.append((k.value, k, v))
                else:
                    return None  # a computed key may be `key`
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            if not self.scopes.is_builtin(value.func):
                return None  # `dict` rebound
            if value.args:
                return None  # dict(pairs) / dict(mapping, ...)
            for kw in value.keywords:
                entries.append((kw.arg, kw if kw.arg is not None else None, kw.value if kw.arg is not None else None))
        else:
            return None
        hit: Optional[Tuple[ast.AST, ast.AST]] = None
        for k, node, v in entries:
            if k == key and v is not None and node is not None:
                hit = (node, v)
            elif k is None and hit is not None:
                hit = None  # a later `**other` may override it
        return hit

    def module_compiled_functions(self) -> Dict[str, ast.AST]:
        """Module-level names bound to a compiled module-level function, as
        another module would import them: ``@torch.compile def f`` and
        ``g = torch.compile(f)`` at module level, ``f`` defined above it, and
        the module-level names the flows reach (``@maybe_compile def f``,
        ``g = load()``) with one function (name -> the compiled FunctionDef)."""
        out: Dict[str, ast.AST] = {}
        tree = self.tree
        for site in self.compile_sites:
            stmt = site.statement
            if stmt is None or self.source.parent(stmt) is not tree:
                continue
            if site.form == "decorator" and isinstance(site.target_def, ast.FunctionDef):
                out.setdefault(site.target_def.name, site.target_def)
            elif (
                site.form == "wrap"
                and isinstance(stmt, ast.Assign)
                and stmt.value is site.node
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(site.target, ast.Name)
            ):
                fn = self._defined_above(site.target.id, stmt)
                if fn is not None:
                    out[stmt.targets[0].id] = fn
        for name, fn in self._flow_module_names.items():  # @project_decorator def f / g = load()
            out.setdefault(name, fn)
        return out

    def _defined_above(self, name: str, stmt: ast.stmt) -> Optional[ast.AST]:
        """The last module-level ``def name`` before ``stmt``."""
        found = None
        for node in self.tree.body:
            if node is stmt:
                break
            if isinstance(node, ast.FunctionDef) and node.name == name:
                found = node
        return found


def model_of(source: Source) -> CompileModel:
    """The compile-site model of ``source``, built once per file."""
    model = getattr(source, "_compile_model", None)
    if model is None:
        model = CompileModel(source)
        source._compile_model = model  # type: ignore[attr-defined]
    return model


def def_first_lines(fn: ast.AST) -> Tuple[int, ...]:
    """The lines a traced code object of ``fn`` can start on (its
    ``co_firstlineno``): on Python 3.11 the first decorator's line, elsewhere
    the ``def`` line; every decorator's line and the ``def``'s are accepted."""
    return tuple(d.lineno for d in fn.decorator_list) + (fn.lineno,)  # type: ignore[attr-defined]


def code_def(source: Source, name: str, firstlineno: int) -> Optional[ast.AST]:
    """The ``def`` of ``source`` a traced code object ``name`` starting on
    ``firstlineno`` (:func:`def_first_lines`) is, anywhere in the file; None
    when there is none."""
    return next(
        (fn for fn in source.nodes(ast.FunctionDef) + source.nodes(ast.AsyncFunctionDef)
         if fn.name == name and firstlineno in def_first_lines(fn)),  # type: ignore[attr-defined]
        None,
    )
