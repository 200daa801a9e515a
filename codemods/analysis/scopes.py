"""Scopes and bindings of one module, on the stdlib ``ast``.

Python's rules, flow-insensitive (as libcst's ScopeProvider): a name bound
anywhere in a function is local to all of it unless declared ``global`` /
``nonlocal``; free names resolve in enclosing function scopes (class scopes
are skipped), then the module, then builtins.  Decorators, defaults,
annotations and base classes evaluate in the enclosing scope; a
comprehension's first iterable too; ``:=`` in a comprehension binds in the
enclosing non-comprehension scope.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from .source import _CHILDREN, _generic_children, _no_children, children


@dataclass(eq=False)
class Scope:
    kind: str  # "module" | "class" | "function" | "comprehension"
    node: ast.AST
    parent: Optional["Scope"]
    bindings: Dict[str, List["Binding"]] = field(default_factory=dict)
    globals: Set[str] = field(default_factory=set)
    nonlocals: Set[str] = field(default_factory=set)
    #: Name loads resolved to this scope, by name
    references: Dict[str, List[ast.Name]] = field(default_factory=dict)

    def __hash__(self) -> int:
        return id(self)


@dataclass(eq=False)
class Binding:
    name: str
    #: the binding node: a Name (Store/Del), an ``arg``, an ``alias``, a
    #: FunctionDef / ClassDef, an ExceptHandler, a match pattern
    node: ast.AST
    #: "assign" | "annassign" | "augassign" | "for" | "with" | "import" |
    #: "def" | "class" | "param" | "walrus" | "except" | "comprehension" |
    #: "unpack" | "match" | "del"
    kind: str
    #: the value bound to the whole name (``x = v``, ``x: T = v``, ``(x := v)``);
    #: for "augassign" the AugAssign; for "for"/"comprehension" the loop node
    value: Optional[ast.AST]
    scope: Scope
    #: the statement that binds (None for parameters and comprehensions)
    stmt: Optional[ast.AST] = None

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 0)


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class Scopes:
    """Every scope of a module, and for every Name load the scope it resolves to."""

    def __init__(self, tree: ast.Module, declarations: bool = True) -> None:
        #: False when the source has no ``global``/``nonlocal`` (the byte test
        #: spares a walk of every function body)
        self._declarations = declarations
        #: the node index this walk builds on the way (what
        #: :meth:`codemods.analysis.source.Source._index` gives, every node once, in
        #: this walk's order): child -> parent, and the nodes by type
        self.parents: Dict[ast.AST, ast.AST] = {}
        self.by_type: Dict[type, List[ast.AST]] = {}
        #: node type -> (its handler or None, its children function or None
        #: when it has none and no handler, the list of its nodes)
        self._dispatch: Dict[type, tuple] = {kind: (handler, fn, []) for kind, (handler, fn) in _DISPATCH.items()}
        self._enter(tree)
        for ignore in getattr(tree, "type_ignores", ()):
            self._enter(ignore)
        self.module = Scope("module", tree, None)
        #: scope-owning node (module, def, lambda, class, comprehension) -> its scope
        self.of_node: Dict[ast.AST, Scope] = {tree: self.module}
        #: every Name node -> the scope it is evaluated in
        self.name_scope: Dict[ast.Name, Scope] = {}
        self._loads: List[ast.Name] = []
        self._visit_body(tree.body, self.module)
        self.by_type = {kind: step[2] for kind, step in self._dispatch.items() if step[2]}
        self._dispatch = {}
        self._move_nonlocal_bindings()
        #: Name load -> the scope that binds it (absent: builtin / unbound)
        self.resolved: Dict[ast.Name, Scope] = {}
        resolved = self.resolved
        name_scope = self.name_scope
        #: (id of the scope a name is read in, the name) -> (the scope binding
        #: it, its references of the name), or None: builtin or unbound
        found: Dict[tuple, Optional[tuple]] = {}
        missing = ()
        for name in self._loads:
            here = name_scope[name]
            ident = name.id
            key = (id(here), ident)
            hit = found.get(key, missing)
            if hit is missing:
                owner = self.lookup(here, ident)
                hit = found[key] = None if owner is None else (owner, owner.references.setdefault(ident, []))
            if hit is not None:
                resolved[name] = hit[0]
                hit[1].append(name)

    def release(self) -> None:
        """Break the scope <-> binding cycles so the tree is freed by reference
        counting when the file is done (the cyclic collector then has little
        to scan: it cost a third of a cold run)."""
        for scope in self.of_node.values():
            scope.bindings.clear()
            scope.references.clear()
            scope.parent = None
        self.of_node.clear()
        self.name_scope.clear()
        self.resolved.clear()
        self._loads.clear()
        self.parents, self.by_type = {}, {}

    # -- queries ---------------------------------------------------------------
    def lookup(self, scope: Scope, name: str) -> Optional[Scope]:
        """The scope where ``name``, used in ``scope``, is bound (None: builtin or unbound)."""
        if name in scope.globals:
            return self.module if name in self.module.bindings else None
        if name in scope.nonlocals:
            cur = scope.parent
            while cur is not None:
                if cur.kind == "function" and name in cur.bindings:
                    return cur
                cur = cur.parent
            return None
        if name in scope.bindings:
            return scope
        cur = scope.parent
        while cur is not None:
            if cur.kind != "class":
                if name in cur.globals:
                    return self.module if name in self.module.bindings else None
                if name in cur.bindings and cur.kind != "module":
                    return cur
            cur = cur.parent
        return self.module if name in self.module.bindings else None

    def bindings_of(self, name: ast.Name) -> List[Binding]:
        """The bindings a Name load may refer to, in source order."""
        scope = self.resolved.get(name)
        return scope.bindings.get(name.id, []) if scope is not None else []

    def scope_of(self, node: ast.AST) -> Scope:
        """The scope a Name node is evaluated in (module scope for other nodes
        whose scope was not recorded)."""
        return self.name_scope.get(node, self.module)  # type: ignore[arg-type]

    def is_builtin(self, name: ast.Name) -> bool:
        """A load of a builtin name that nothing in the module rebinds along its scope chain."""
        return isinstance(name, ast.Name) and name in self.name_scope and name not in self.resolved

    # -- building ------------------------------------------------------------------
    def _enter(self, node: ast.AST) -> None:
        """Index a node the walk handles without :meth:`_visit` (a target, a
        parameter, an import alias, a ``with`` item, a comprehension clause)."""
        step = self._dispatch.get(type(node)) or self._new_kind(type(node))
        step[2].append(node)
        if step[1] is not None:
            parents = self.parents
            for child in step[1](node):
                parents[child] = node

    def _new_kind(self, kind: type) -> tuple:
        """The dispatch entry of a node class made outside the ast module."""
        children_of = _CHILDREN.get(kind) or _generic_children
        step = self._dispatch[kind] = (None, children_of, [])
        return step

    def _move_nonlocal_bindings(self) -> None:
        """A ``nonlocal x`` binding belongs to the enclosing function that binds ``x``."""
        for scope in list(self.of_node.values()):
            for name in scope.nonlocals:
                moved = scope.bindings.pop(name, [])
                owner = scope.parent
                while owner is not None and not (owner.kind == "function" and name in owner.bindings):
                    owner = owner.parent
                if owner is None:
                    continue
                for binding in moved:
                    binding.scope = owner
                    owner.bindings[name].append(binding)
                owner.bindings[name].sort(key=lambda b: (getattr(b.node, "lineno", 0), getattr(b.node, "col_offset", 0)))

    def _bind(self, scope: Scope, name: str, node: ast.AST, kind: str, value: Optional[ast.AST] = None, stmt: Optional[ast.AST] = None) -> None:
        if name in scope.globals and scope is not self.module:
            scope = self.module
        scope.bindings.setdefault(name, []).append(Binding(name, node, kind, value, scope, stmt))

    def _visit_body(self, body, scope: Scope) -> None:
        for stmt in body:
            self._visit(stmt, scope)

    def _target(self, target: ast.AST, scope: Scope, kind: str, value: Optional[ast.AST], stmt: Optional[ast.AST]) -> None:
        if isinstance(target, ast.Name):
            self._enter(target)
            self.name_scope[target] = scope
            self._bind(scope, target.id, target, kind, value, stmt)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._enter(target)
            for elt in target.elts:
                self._target(elt, scope, "unpack" if kind in ("assign", "annassign") else kind, value if kind in ("for", "comprehension", "with") else None, stmt)
        elif isinstance(target, ast.Starred):
            self._enter(target)
            self._target(target.value, scope, kind if kind in ("for", "comprehension") else "unpack", None, stmt)
        else:  # attribute / subscript targets: their parts are loads
            self._visit(target, scope)

    def _visit(self, node: ast.AST, scope: Scope) -> None:
        """Visit ``node`` and what it contains, evaluated in ``scope``: parents
        before children, children in field order.  Nodes that bind, open a
        scope or evaluate parts elsewhere go to their handler (``_HANDLERS``);
        the others are walked here with an explicit stack."""
        dispatch = self._dispatch
        name_scope = self.name_scope
        load = self._loads.append
        add_name = dispatch[_Name][2].append
        parents = self.parents
        stack: List[ast.AST] = [node]
        pop, push = stack.pop, stack.extend
        while stack:
            cur = pop()
            kind = type(cur)
            if kind is _Name:
                add_name(cur)
                name_scope[cur] = scope  # type: ignore[index]
                ctx = type(cur.ctx)  # type: ignore[attr-defined]
                if ctx is _Load:
                    load(cur)  # type: ignore[arg-type]
                elif ctx is _Del:
                    self._bind(scope, cur.id, cur, "del")  # type: ignore[attr-defined]
                else:
                    self._bind(scope, cur.id, cur, "unpack")  # type: ignore[attr-defined]
                continue
            handler, children_of, same = dispatch.get(kind) or self._new_kind(kind)
            same.append(cur)
            if handler is not None:
                for child in children_of(cur):
                    parents[child] = cur
                handler(self, cur, scope)
            elif children_of is not None:
                below = children_of(cur)
                if below:
                    for child in below:
                        parents[child] = cur
                    below.reverse()  # a fresh list: popped in field order
                    push(below)

    def _visit_assign(self, node: ast.Assign, scope: Scope) -> None:
        self._visit(node.value, scope)
        for target in node.targets:
            self._target(target, scope, "assign", node.value, node)

    def _visit_annassign(self, node: ast.AnnAssign, scope: Scope) -> None:
        if node.value is not None:
            self._visit(node.value, scope)
        self._visit(node.annotation, scope)
        if node.value is not None or not isinstance(node.target, ast.Name):
            self._target(node.target, scope, "annassign", node.value, node)
        else:  # `x: int` declares without binding a value; still local
            self._enter(node.target)
            self.name_scope[node.target] = scope
            self._bind(scope, node.target.id, node.target, "annassign", None, node)

    def _visit_augassign(self, node: ast.AugAssign, scope: Scope) -> None:
        self._visit(node.value, scope)
        target = node.target
        if isinstance(target, ast.Name):
            self._enter(target)
            self.name_scope[target] = scope
            self._loads.append(target)  # `x += 1` reads x too
            self._bind(scope, target.id, target, "augassign", node, node)
        else:
            self._visit(target, scope)

    def _visit_for(self, node, scope: Scope) -> None:
        self._visit(node.iter, scope)
        self._target(node.target, scope, "for", node, node)
        self._visit_body(node.body, scope)
        self._visit_body(node.orelse, scope)

    def _visit_with(self, node, scope: Scope) -> None:
        for item in node.items:
            self._enter(item)
            self._visit(item.context_expr, scope)
            if item.optional_vars is not None:
                self._target(item.optional_vars, scope, "with", item.context_expr, node)
        self._visit_body(node.body, scope)

    def _visit_def(self, node, scope: Scope) -> None:
        for dec in node.decorator_list:
            self._visit(dec, scope)
        self._visit_arguments_outer(node.args, scope)
        if node.returns is not None:
            self._visit(node.returns, scope)
        self._bind(scope, node.name, node, "def", node, node)
        inner = Scope("function", node, scope)
        self.of_node[node] = inner
        self._declare(node.body, inner)
        self._bind_params(node.args, inner)
        self._visit_body(node.body, inner)

    def _visit_lambda(self, node: ast.Lambda, scope: Scope) -> None:
        self._visit_arguments_outer(node.args, scope, annotations=False)
        inner = Scope("function", node, scope)
        self.of_node[node] = inner
        self._bind_params(node.args, inner)
        self._visit(node.body, inner)

    def _visit_class(self, node: ast.ClassDef, scope: Scope) -> None:
        for dec in node.decorator_list:
            self._visit(dec, scope)
        for base in node.bases:
            self._visit(base, scope)
        for kw in node.keywords:
            self._enter(kw)
            self._visit(kw.value, scope)
        self._bind(scope, node.name, node, "class", node, node)
        inner = Scope("class", node, scope)
        self.of_node[node] = inner
        self._declare(node.body, inner)
        self._visit_body(node.body, inner)

    def _visit_comprehension(self, node, scope: Scope) -> None:
        gens = node.generators
        self._visit(gens[0].iter, scope)
        inner = Scope("comprehension", node, scope)
        self.of_node[node] = inner
        for i, gen in enumerate(gens):
            self._enter(gen)
            if i:
                self._visit(gen.iter, inner)
            self._target(gen.target, inner, "comprehension", node, None)
            for cond in gen.ifs:
                self._visit(cond, inner)
        if type(node) is ast.DictComp:
            self._visit(node.key, inner)
            self._visit(node.value, inner)
        else:
            self._visit(node.elt, inner)

    def _visit_walrus(self, node: ast.NamedExpr, scope: Scope) -> None:
        self._visit(node.value, scope)
        owner = scope
        while owner.kind == "comprehension" and owner.parent is not None:
            owner = owner.parent
        target = node.target
        self._enter(target)
        self.name_scope[target] = owner
        self._bind(owner, target.id, target, "walrus", node.value, node)

    def _visit_import(self, node, scope: Scope) -> None:
        for alias in node.names:
            self._enter(alias)
            if alias.name == "*":
                continue
            local = alias.asname or alias.name.split(".")[0]
            self._bind(scope, local, alias, "import", node, node)

    def _visit_declaration(self, node, scope: Scope) -> None:
        return  # collected up front by _declare

    def _visit_except(self, node: ast.ExceptHandler, scope: Scope) -> None:
        if node.type is not None:
            self._visit(node.type, scope)
        if node.name:
            self._bind(scope, node.name, node, "except", None, node)
        self._visit_body(node.body, scope)

    def _visit_match_binder(self, node, scope: Scope) -> None:
        name = getattr(node, "name", None) or getattr(node, "rest", None)
        if name:
            self._bind(scope, name, node, "match", None, None)
        for child in children(node):
            self._visit(child, scope)

    def _visit_arguments_outer(self, args: ast.arguments, scope: Scope, annotations: bool = True) -> None:
        for default in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self._visit(default, scope)
        if annotations:
            for arg in _all_args(args):
                if arg.annotation is not None:
                    self._visit(arg.annotation, scope)

    def _bind_params(self, args: ast.arguments, scope: Scope) -> None:
        self._enter(args)
        for arg in _all_args(args):
            self._enter(arg)
            self._bind(scope, arg.arg, arg, "param", None, None)

    def _declare(self, body, scope: Scope) -> None:
        """``global`` / ``nonlocal`` declarations of a function or class body
        (not of nested functions or classes)."""
        if not self._declarations:
            return
        stack = list(body)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Global:
                scope.globals.update(node.names)  # type: ignore[attr-defined]
            elif kind is ast.Nonlocal:
                scope.nonlocals.update(node.names)  # type: ignore[attr-defined]
            else:  # the statements nested in a compound statement's blocks (not
                # in an except clause or a match case, as before; not in a def or class)
                for name in _BLOCKS.get(kind, ()):
                    stack.extend(getattr(node, name))


def _all_args(args: ast.arguments) -> List[ast.arg]:
    out = list(args.posonlyargs) + list(args.args)
    if args.vararg is not None:
        out.append(args.vararg)
    out.extend(args.kwonlyargs)
    if args.kwarg is not None:
        out.append(args.kwarg)
    return out


_MATCH_BINDERS = tuple(getattr(ast, n) for n in ("MatchAs", "MatchStar", "MatchMapping") if hasattr(ast, n))


#: node type -> its handler in :meth:`Scopes._visit` (every other node: its children are visited)
_HANDLERS = {
    ast.Assign: Scopes._visit_assign,
    ast.AnnAssign: Scopes._visit_annassign,
    ast.AugAssign: Scopes._visit_augassign,
    ast.For: Scopes._visit_for,
    ast.AsyncFor: Scopes._visit_for,
    ast.With: Scopes._visit_with,
    ast.AsyncWith: Scopes._visit_with,
    ast.FunctionDef: Scopes._visit_def,
    ast.AsyncFunctionDef: Scopes._visit_def,
    ast.Lambda: Scopes._visit_lambda,
    ast.ClassDef: Scopes._visit_class,
    ast.NamedExpr: Scopes._visit_walrus,
    ast.Import: Scopes._visit_import,
    ast.ImportFrom: Scopes._visit_import,
    ast.Global: Scopes._visit_declaration,
    ast.Nonlocal: Scopes._visit_declaration,
    ast.ExceptHandler: Scopes._visit_except,
}
_HANDLERS.update({kind: Scopes._visit_comprehension for kind in _COMPS})
_HANDLERS.update({kind: Scopes._visit_match_binder for kind in _MATCH_BINDERS})
_Name, _Load, _Del = ast.Name, ast.Load, ast.Del
#: node type -> (its handler or None, its children function): one lookup per
#: node in :meth:`Scopes._visit`
_DISPATCH = {kind: (None, None if fn is _no_children else fn) for kind, fn in _CHILDREN.items()}
_DISPATCH.update({kind: (handler, _CHILDREN[kind]) for kind, handler in _HANDLERS.items()})


def _statement_blocks(kind: type) -> tuple:
    """The fields of a statement type that hold statements (``body``,
    ``orelse``, ``finalbody``), by its ASDL signature."""
    doc = ((kind.__doc__ or "").strip().splitlines() or [""])[0]
    inside = doc[doc.find("(") + 1 : doc.rfind(")")] if "(" in doc else ""
    fields = [f.split() for f in inside.split(",") if f.strip()]
    return tuple(f[1] for f in fields if len(f) == 2 and f[0] == "stmt*")


#: statement type -> its fields holding statements; none for a def or class
#: (:meth:`Scopes._declare` stops there)
_BLOCKS = {
    kind: _statement_blocks(kind)
    for kind in (getattr(ast, n) for n in dir(ast))
    if isinstance(kind, type) and issubclass(kind, ast.stmt) and kind not in (ast.stmt, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
}
