"""Shared analysis of one module: which names alias torch, what is compiled, and
where compiled callables are called.

This is the only place that recognises ``torch.compile``.  Passes ask
:class:`ModuleAnalysis`; they never look for ``compile`` themselves.

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
function called ``compile``) are resolved through libcst's qualified names
and never match.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import (
    Assignment,
    MetadataWrapper,
    PositionProvider,
    ScopeProvider,
)

TORCH = "torch"
TORCH_COMPILE = "torch.compile"

# nn.Module constructors in torch.nn whose instances may be `.compile()`d
_NN_PREFIXES = ("torch.nn.",)
_MODULE_BASE_NAMES = {"torch.nn.Module", "torch.nn.modules.module.Module"}


def dotted_name(node: cst.CSTNode) -> Optional[str]:
    """``a.b.c`` for a chain of Names/Attributes, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _parent_map(module: cst.Module, imports: List[cst.CSTNode]) -> Dict[cst.CSTNode, cst.CSTNode]:
    """node -> parent for every node (what ParentNodeProvider gives, ~10x
    cheaper: reads the nodes' dataclass fields instead of a visitor walk);
    appends every Import / ImportFrom to ``imports``."""
    parents: Dict[cst.CSTNode, cst.CSTNode] = {}
    stack: List[cst.CSTNode] = [module]
    node_type = cst.CSTNode
    import_types = (cst.Import, cst.ImportFrom)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in import_types:
            imports.append(node)
        names = _CHILD_FIELDS.get(kind)
        if names is None:
            names = _CHILD_FIELDS[kind] = tuple(f.name for f in dataclasses.fields(node))
        for name in names:
            value = getattr(node, name)
            if isinstance(value, node_type):
                parents[value] = node
                stack.append(value)
            elif type(value) is tuple or type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        parents[item] = node
                        stack.append(item)
    return parents


def _torch_import_names(node: cst.CSTNode) -> List[str]:
    """Local names an ``import`` / ``from … import`` statement binds from torch."""
    out: List[str] = []
    if isinstance(node, cst.Import):
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            if name == TORCH or name.startswith(TORCH + "."):
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    out.append(alias.asname.name.value)
                else:
                    out.append(name.split(".")[0])
    elif isinstance(node, cst.ImportFrom):
        module = dotted_name(node.module) if node.module is not None else None
        if node.relative or module is None or not (module == TORCH or module.startswith(TORCH + ".")):
            return out
        if isinstance(node.names, cst.ImportStar):
            out.append("compile")  # conservative
            return out
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append(alias.asname.name.value)
            elif isinstance(alias.name, cst.Name):
                out.append(alias.name.value)
    return out


def _after(pos, start) -> bool:
    """Is CodePosition ``pos`` after ``start`` (CodePosition has no ordering)?"""
    return (pos.line, pos.column) > (start.line, start.column)


def build_dotted(*parts: str) -> cst.BaseExpression:
    """Build the expression ``parts[0].parts[1]...`` as CST nodes."""
    expr: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


@dataclass
class CompileSite:
    """One place where something is compiled."""

    #: "decorator" | "wrap" | "method"
    form: str
    #: the node that carries compile options: the ``torch.compile(...)`` Call,
    #: the ``model.compile(...)`` Call, or the bare decorator expression
    node: cst.CSTNode
    #: the call whose keyword arguments are compile options (None for a bare decorator)
    options_call: Optional[cst.Call]
    #: the compiled thing: a FunctionDef (decorator) or the expression passed in
    target: Optional[cst.CSTNode]
    #: the FunctionDef compiled, when it can be seen in this module
    target_def: Optional[cst.FunctionDef]
    #: dotted name the compiled callable is reached through ("f", "self.f", "opt.step")
    binding: Optional[str]
    #: the statement that performs the compile (for inserting code before it)
    statement: Optional[cst.BaseStatement]
    #: calls of the compiled callable found in this module
    calls: List[cst.Call] = field(default_factory=list)

    def option(self, name: str) -> Optional[cst.Arg]:
        if self.options_call is None:
            return None
        for arg in self.options_call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None

    @property
    def has_star_kwargs(self) -> bool:
        return self.options_call is not None and any(
            a.star == "**" for a in self.options_call.args
        )


class ModuleAnalysis:
    """Facts about one parsed module, computed once and shared by every pass."""

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.module = wrapper.module
        # metadata is resolved on first use (each provider walks the whole
        # module; most files need positions only for their findings, and scope
        # and qualified names only where a name could be torch.compile)
        self._qnames_map: Dict[cst.CSTNode, frozenset] = {}
        self._scopes_map = None
        self._positions_map = None
        imports: List[cst.CSTNode] = []
        self._parents: Dict[cst.CSTNode, cst.CSTNode] = _parent_map(self.module, imports)
        #: local names an import binds from torch (``torch``, ``th``, ``compile``,
        #: ``nn`` ...) anywhere in the module: the only names (with ``torch``
        #: itself) through which a qualified name ``torch.compile`` can arise
        self._torch_bound: Set[str] = {TORCH}
        for node in imports:
            self._torch_bound.update(_torch_import_names(node))
        self.torch_alias: Optional[str] = None
        self.compile_sites: List[CompileSite] = []
        self.classes: Dict[str, cst.ClassDef] = {}
        self.functions: Dict[str, cst.FunctionDef] = {}
        self._collect_module_names()
        self._collect_compile_sites()
        for site in self.compile_sites:
            # references come from sets: source order keeps every result stable
            site.calls = list(self._find_calls(site))
            if len(site.calls) > 1:
                site.calls.sort(key=lambda c: (self.position(c).start.line, self.position(c).start.column))

    # -- metadata access -------------------------------------------------
    @property
    def _scopes(self):
        if self._scopes_map is None:
            self._scopes_map = self.wrapper.resolve(ScopeProvider)
        return self._scopes_map

    @property
    def _positions(self):
        if self._positions_map is None:
            self._positions_map = self.wrapper.resolve(PositionProvider)
        return self._positions_map

    def qualified_names(self, node: cst.CSTNode) -> Set[str]:
        """What libcst's QualifiedNameProvider gives for ``node``, computed for
        this node only (the provider walks the whole module to attach a lazy
        ``scope.get_qualified_names_for(node)`` to every node)."""
        cached = self._qnames_map.get(node)
        if cached is None:
            scope = self._scopes.get(node)
            cached = frozenset(q.name for q in scope.get_qualified_names_for(node)) if scope else frozenset()
            self._qnames_map[node] = cached
        return set(cached)

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self._parents.get(node)

    def position(self, node: cst.CSTNode):
        return self._positions[node]

    def scope(self, node: cst.CSTNode):
        return self._scopes.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        cur = self._parents.get(node)
        while cur is not None:
            yield cur
            cur = self._parents.get(cur)

    def enclosing(self, node: cst.CSTNode, kinds) -> Optional[cst.CSTNode]:
        for anc in self.ancestors(node):
            if isinstance(anc, kinds):
                return anc
        return None

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.BaseStatement]:
        """The statement (simple line or compound) that contains ``node``."""
        cur: Optional[cst.CSTNode] = node
        while cur is not None:
            if isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return cur
            cur = self._parents.get(cur)
        return None

    def is_torch_compile(self, expr: cst.CSTNode) -> bool:
        # cheap pre-check: a qualified name `torch.compile` needs the chain's
        # first name bound by an import from torch (or to be `torch` itself)
        base = expr
        while isinstance(base, cst.Attribute):
            base = base.value
        if not (isinstance(base, cst.Name) and base.value in self._torch_bound):
            return False
        return TORCH_COMPILE in self.qualified_names(expr)

    def torch_name(self) -> str:
        """The name to emit for ``torch`` (the module's alias, else ``torch``)."""
        return self.torch_alias or TORCH

    def torch_expr(self, *attrs: str) -> cst.BaseExpression:
        return build_dotted(self.torch_name(), *attrs)

    # -- collection -------------------------------------------------------
    def _collect_module_names(self) -> None:
        for stmt in self.module.body:
            if isinstance(stmt, cst.ClassDef):
                self.classes[stmt.name.value] = stmt
            elif isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Import) and not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            name = dotted_name(alias.name)
                            if alias.asname is not None:
                                if name == TORCH and isinstance(alias.asname.name, cst.Name):
                                    self.torch_alias = self.torch_alias or alias.asname.name.value
                            elif name == TORCH or (name or "").startswith(TORCH + "."):
                                # `import torch` and `import torch.nn` both bind `torch`
                                self.torch_alias = TORCH if self.torch_alias is None else self.torch_alias

    def _collect_compile_sites(self) -> None:
        analysis = self

        class Collector(cst.CSTVisitor):
            def visit_Decorator(self, node: cst.Decorator) -> None:
                dec = node.decorator
                if analysis.is_torch_compile(dec):
                    fn = analysis.parent(node)
                    analysis._add_decorated(node, dec, None, fn)

            def visit_Call(self, node: cst.Call) -> None:
                analysis._visit_call(node)

        self.module.visit(Collector())

    def _add_decorated(self, decorator, node, options_call, fn) -> None:
        if not isinstance(fn, cst.FunctionDef):
            return
        cls = self.enclosing(fn, (cst.ClassDef, cst.FunctionDef))
        binding = fn.name.value
        if isinstance(cls, cst.ClassDef):
            binding = f"self.{fn.name.value}"
        self.compile_sites.append(
            CompileSite(
                form="decorator",
                node=node,
                options_call=options_call,
                target=fn,
                target_def=fn,
                binding=binding,
                statement=fn,
            )
        )

    def _visit_call(self, node: cst.Call) -> None:
        parent = self.parent(node)
        if self.is_torch_compile(node.func):
            positional = [a for a in node.args if a.keyword is None and a.star == ""]
            if isinstance(parent, cst.Decorator):
                self._add_decorated(parent, node, node, self.parent(parent))
                return
            if positional:
                self._add_wrap(node, node, positional[0].value)
                return
            # torch.compile(**kw)(fn) / torch.compile(dynamic=False)(fn)
            if isinstance(parent, cst.Call) and parent.func is node:
                outer_pos = [a for a in parent.args if a.keyword is None and a.star == ""]
                if outer_pos:
                    self._add_wrap(parent, node, outer_pos[0].value)
            return
        # model.compile(...) on an nn.Module instance.  Not on a fresh instance
        # (`Model().compile()`): Module.compile compiles in place and returns
        # None, so nothing compiled that way can ever be called
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "compile"
            and not isinstance(func.value, cst.Call)
            # a local name: `m.compile`, or `main.<locals>.m.compile` inside a function
            and all(
                q == f"{dotted_name(func.value)}.compile" or q.endswith(f".<locals>.{dotted_name(func.value)}.compile")
                for q in self.qualified_names(func)
            )
            and self._is_module_instance(func.value)
        ):
            self.compile_sites.append(
                CompileSite(
                    form="method",
                    node=node,
                    options_call=node,
                    target=func.value,
                    target_def=None,
                    binding=dotted_name(func.value),
                    statement=self.statement_of(node),
                )
            )

    def _add_wrap(self, wrap_call: cst.Call, options_call: cst.Call, target: cst.BaseExpression) -> None:
        parent = self.parent(wrap_call)
        binding: Optional[str] = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            binding = dotted_name(parent.targets[0].target)
        elif isinstance(parent, (cst.AnnAssign,)):
            binding = dotted_name(parent.target)
        target_def = None
        if isinstance(target, cst.Name):
            target_def = self._resolve_function(target)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            cls = self.enclosing(wrap_call, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                target_def = self._method(cls, target.attr.value)
        self.compile_sites.append(
            CompileSite(
                form="wrap",
                node=wrap_call,
                options_call=options_call,
                target=target,
                target_def=target_def,
                binding=binding,
                statement=self.statement_of(wrap_call),
            )
        )

    # -- resolution helpers ------------------------------------------------
    def in_source_order(self, assignments) -> List:
        """libcst's assignments of a name (a set: no stable order) as a list in
        source order, so results never depend on set iteration."""
        found = [a for a in assignments if isinstance(a, Assignment)]
        if len(found) > 1:
            found.sort(key=lambda a: (self.position(a.node).start.line, self.position(a.node).start.column))
        return found

    def _resolve_function(self, name: cst.Name) -> Optional[cst.FunctionDef]:
        scope = self.scope(name)
        if scope is None:
            return None
        for assignment in self.in_source_order(scope[name.value]):
            if isinstance(assignment, Assignment) and isinstance(assignment.node, cst.FunctionDef):
                return assignment.node
        return None

    @staticmethod
    def _method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
        return None

    def is_module_class(self, cls: cst.ClassDef, _seen: Optional[Set[str]] = None) -> bool:
        """Does ``cls`` subclass ``torch.nn.Module`` (directly or via classes of this module)?"""
        seen = _seen or set()
        for base in cls.bases:
            qn = self.qualified_names(base.value)
            if qn & _MODULE_BASE_NAMES or any(q.startswith(_NN_PREFIXES) for q in qn):
                return True
            name = dotted_name(base.value)
            if name in self.classes and name not in seen:
                seen.add(name)
                if self.is_module_class(self.classes[name], seen):
                    return True
        return False

    def module_class_of(self, expr: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The nn.Module subclass defined here that ``expr`` is an instance of, if visible.

        ``Model()``, a name assigned from ``Model()`` in the same scope, or
        ``self.model`` assigned from ``Model()`` in a method of the same class.
        """
        if isinstance(expr, cst.Call):
            name = dotted_name(expr.func)
            cls = self.classes.get(name or "")
            if cls is not None and self.is_module_class(cls):
                return cls
            return None
        values: Iterator[cst.BaseExpression] = iter(())
        if isinstance(expr, cst.Name):
            values = self.assigned_values(expr)
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            # self.model, assigned `self.model = Model()` in a method of the same class
            cls = self.enclosing(expr, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                values = self.self_attr_values(cls, expr.attr.value)
        for value in values:
            # model = torch.compile(Model()) / model = Model().to(device)
            if isinstance(value, cst.Call) and self.is_torch_compile(value.func) and value.args:
                value = value.args[0].value
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
                value = value.func.value
            found = self.module_class_of(value) if isinstance(value, cst.Call) else None
            if found is not None:
                return found
        return None

    @staticmethod
    def self_attr_values(class_def: cst.ClassDef, attr: str) -> List[cst.BaseExpression]:
        """The values assigned to ``self.<attr>`` (``=``, annotated ``=``) in the
        methods of ``class_def`` (not in nested classes), in source order."""
        found: List[cst.BaseExpression] = []

        def is_target(node: cst.BaseExpression) -> bool:
            return (
                isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name)
                and node.value.value == "self"
                and node.attr.value == attr
            )

        class V(cst.CSTVisitor):
            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return node is class_def

            def visit_Assign(self, node: cst.Assign) -> None:
                if any(is_target(t.target) for t in node.targets):
                    found.append(node.value)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                if node.value is not None and is_target(node.target):
                    found.append(node.value)

        class_def.visit(V())
        return found

    def assigned_values(self, name: cst.Name) -> Iterator[cst.BaseExpression]:
        """The values assigned to ``name`` (``x = v``, ``x: T = v``, ``(x := v)``) in its scope."""
        scope = self.scope(name)
        if scope is None:
            return
        for assignment in self.in_source_order(scope[name.value]):
            assign = self.parent(assignment.node)
            if isinstance(assign, cst.AssignTarget):
                assign = self.parent(assign)
            if isinstance(assign, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and assign.value is not None:
                yield assign.value

    def _is_module_instance(self, expr: cst.CSTNode) -> bool:
        if self.module_class_of(expr) is not None:
            return True
        if isinstance(expr, cst.Name) and expr.value == "self":
            cls = self.enclosing(expr, cst.ClassDef)
            return isinstance(cls, cst.ClassDef) and self.is_module_class(cls)
        if isinstance(expr, cst.Name):
            # a name bound to a torch.nn constructor call: model = nn.Linear(3, 3)
            for value in self.assigned_values(expr):
                if isinstance(value, cst.Call) and any(q.startswith(_NN_PREFIXES) for q in self.qualified_names(value.func)):
                    return True
        return False

    # -- calls of compiled callables ----------------------------------------
    def _find_calls(self, site: CompileSite) -> Iterator[cst.Call]:
        if site.form == "wrap":
            parent = self.parent(site.node)
            if isinstance(parent, cst.Call) and parent.func is site.node:
                yield parent  # torch.compile(g)(x)
                return
        binding = site.binding
        if binding is None:
            return
        if "." not in binding:
            yield from self._calls_of_name(site, binding)
            return
        # attribute bindings: self.f, opt.step — matched by dotted name, within
        # the class for `self.` bindings, after the compile for others
        cls = self.enclosing(site.node, cst.ClassDef) if binding.startswith("self.") else None
        root = cls if cls is not None else self.module
        start = self.position(site.node).start
        analysis = self

        class Finder(cst.CSTVisitor):
            def __init__(self) -> None:
                self.found: List[cst.Call] = []

            def visit_Call(self, node: cst.Call) -> None:
                if dotted_name(node.func) == binding:
                    if cls is not None or _after(analysis.position(node).start, start):
                        self.found.append(node)

        finder = Finder()
        root.visit(finder)
        yield from finder.found

    def _calls_of_name(self, site: CompileSite, name: str) -> Iterator[cst.Call]:
        anchor: cst.CSTNode
        if site.form == "decorator":
            anchor = site.target_def.name  # type: ignore[union-attr]
        elif site.form == "method":
            # model.compile(...): calls of the same binding of `model`, after the compile
            yield from self._calls_after_method_compile(site)
            return
        else:
            assign = self.parent(site.node)
            anchor = assign.targets[0].target if isinstance(assign, cst.Assign) else assign.target  # type: ignore[union-attr]
        scope = self.scope(anchor)
        if scope is None:
            return
        assignments = [
            a
            for a in scope.assignments[name]
            if isinstance(a, Assignment) and (a.node is anchor or a.node is self.parent(anchor))
        ]
        seen: Set[int] = set()
        for assignment in assignments:
            for access in assignment.references:
                ref = access.node
                call = self.parent(ref)
                if isinstance(call, cst.Call) and call.func is ref and id(call) not in seen:
                    seen.add(id(call))
                    yield call

    def _calls_after_method_compile(self, site: CompileSite) -> Iterator[cst.Call]:
        name = site.target
        scope = self.scope(name) if isinstance(name, cst.Name) else None
        if scope is None:
            return
        start = self.position(site.node).start
        seen: Set[int] = set()
        for access in scope.accesses[name]:
            if access.node is not name:
                continue
            for assignment in access.referents:
                for ref in getattr(assignment, "references", ()):
                    call = self.parent(ref.node)
                    if (
                        isinstance(call, cst.Call)
                        and call.func is ref.node
                        and id(call) not in seen
                        and _after(self.position(call).start, start)
                    ):
                        seen.add(id(call))
                        yield call

    # -- options passed through **kwargs ------------------------------------------
    def star_kwargs_option(self, site: CompileSite, name: str) -> Optional[Tuple[cst.CSTNode, cst.BaseExpression]]:
        """``(entry, value)`` when compile option ``name`` reaches ``site`` through
        ``**opts``, ``opts`` a name assigned once in its scope from a dict display
        (``{"name": v}``) or ``dict(name=v)``, and only ever used as ``**opts``
        (no ``opts["name"] = …``, ``opts.update(…)``); ``entry`` is the
        DictElement / Arg that sets it.  None when the dict cannot be seen."""
        if site.options_call is None:
            return None
        for arg in site.options_call.args:
            if arg.star != "**" or not isinstance(arg.value, cst.Name):
                continue
            found = self._dict_entry(arg.value, name)
            if found is not None:
                return found
        return None

    def _dict_entry(self, ref: cst.Name, key: str) -> Optional[Tuple[cst.CSTNode, cst.BaseExpression]]:
        scope = self.scope(ref)
        if scope is None:
            return None
        assignments = list(scope[ref.value])
        if len(assignments) != 1 or not isinstance(assignments[0], Assignment):
            return None
        # every use of the dict is a `**opts` argument: nothing else can change it
        for access in assignments[0].references:
            parent = self.parent(access.node)
            if not (isinstance(parent, cst.Arg) and parent.star == "**" and parent.value is access.node):
                return None
        values = list(self.assigned_values(ref))
        if len(values) != 1:
            return None
        value = values[0]
        entries: List[Tuple[Optional[str], cst.CSTNode, Optional[cst.BaseExpression]]] = []
        if isinstance(value, cst.Dict):
            for el in value.elements:
                if isinstance(el, cst.DictElement):
                    k = el.key.evaluated_value if isinstance(el.key, cst.SimpleString) else None
                    if k is None:
                        return None  # a computed key may be `key`
                    entries.append((k, el, el.value))
                else:
                    entries.append((None, el, None))  # **other
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            if self.qualified_names(value.func) != {"builtins.dict"}:
                return None  # `dict` rebound
            for a in value.args:
                if a.keyword is not None:
                    entries.append((a.keyword.value, a, a.value))
                elif a.star == "**":
                    entries.append((None, a, None))
                else:
                    return None  # dict(pairs) / dict(mapping, ...)
        else:
            return None
        hit: Optional[Tuple[cst.CSTNode, cst.BaseExpression]] = None
        for k, node, v in entries:
            if k == key and v is not None:
                hit = (node, v)
            elif k is None and hit is not None:
                hit = None  # a later `**other` may override it
        return hit

    def sites_for_call(self, call: cst.Call) -> List[CompileSite]:
        return [s for s in self.compile_sites if any(c is call for c in s.calls)]
