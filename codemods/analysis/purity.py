"""Is a stretch of a method a pure function of a memo's key?

FR014 may skip a memo while compiling without asking only when the value the
memo holds is what the compiled call would compute anyway: the code that
computes it (the *region*) reads nothing the key does not pin down, calls
nothing that draws random numbers, writes state or prints, and reads only
attributes of ``self`` that nothing changes after ``__init__``.  This module
gives that judgement, on the stdlib ``ast``, as the reason the proof fails
(``None``: proven).  It knows nothing of memos: the rule hands it the
region, the key expressions and the statement that stores the value.

What counts as pure, and why:

* calls of ``torch.*`` except those that draw random numbers, allocate
  uninitialised memory, change a tensor in place (a trailing ``_``) or talk
  to a device, a process group or a file; ``math.*``, ``operator.*`` and a
  short list of builtins (``len``, ``range``, ``tuple``, ``sum``...);
* functions of the module and methods of the class whose bodies are pure
  by the same rules (a few levels deep);
* a method call on a value (``t.to(device)``, ``x.split(...)``) unless it
  changes the value in place (``append``, ``copy_``), which is allowed only
  on a local the region itself bound (``freqs_list.append(f)``);
* ``self.X`` for an ``X`` that only ``__init__`` or the class body assigns
  (or rebinds as ``self.X = self.X.to(...)``, which keeps its values), that
  nothing in the file changes in place and that is not a parameter, a
  buffer or a submodule (an optimizer changes those).
"""

from __future__ import annotations

import ast
import builtins
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)

#: builtins whose result depends on their arguments only
_PURE_BUILTINS = frozenset(
    "abs all any bool dict divmod enumerate float frozenset int isinstance len list map max min pow range repr reversed round set slice sorted str sum tuple zip".split()
)
#: torch functions (and tensor methods) that draw random numbers or allocate uninitialised memory
_RANDOM = frozenset(
    "rand rand_like randn randn_like randint randint_like randperm normal bernoulli multinomial poisson dropout alpha_dropout feature_dropout "
    "empty empty_like empty_strided manual_seed seed initial_seed get_rng_state set_rng_state exponential geometric log_normal cauchy "
    "rsample gumbel_softmax rrelu".split()
)


def _random(name: str) -> bool:
    """Does a function or method of this name draw random numbers (or
    allocate uninitialised memory)?  Any dropout, any ``rand*``."""
    return name in _RANDOM or name.startswith("rand") or "dropout" in name


#: torch namespaces that talk to a device, a process group or a file
_IMPURE_NAMESPACES = ("torch.cuda.", "torch.distributed.", "torch.random.", "torch.save", "torch.load", "torch.backends.", "torch._dynamo.", "torch.compiler.")
#: method names that change a container in place
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "pop", "popitem", "clear", "remove", "sort", "reverse"})
#: method names with effects beyond their result (a value's methods are
#: otherwise taken as pure: the values a memo's key is made of are tensors,
#: devices, dtypes, numbers and strings)
_EFFECTS = frozenset(
    "backward register_buffer register_parameter add_module register_forward_hook register_forward_pre_hook write record_stream set_ "
    "put send emit flush close open acquire release wait seek read readline info debug warning warn error log "
    "random uniform choice shuffle sample".split()
)
#: how deep functions called from the region are followed
_DEPTH = 3


def key_names(fn: ast.AST, keys: Iterable[ast.AST]) -> FrozenSet[str]:
    """Names of ``fn`` whose values ``keys`` pin down: a name bound once in
    ``fn`` (a parameter never rebound, a local assigned once) and what such a
    local was computed from, the items of a tuple, what ``str()``,
    ``tuple()``, ``repr()`` or an f-string spells out, the ``X`` of
    ``tuple(tuple(s) for s in X)``.  ``device.type`` pins nothing of
    ``device``; a name rebound anywhere in ``fn`` pins nothing (the key may
    hold another of its values than the code computing the memo reads)."""
    once, values = _single_bindings(fn)

    def covers(node: ast.AST, seen: FrozenSet[str], scoped: FrozenSet[str] = frozenset()) -> Set[str]:
        # scoped: the targets of the comprehensions around ``node``
        if isinstance(node, ast.Name):
            if node.id in scoped:
                return {node.id}
            if node.id not in once:
                return set()
            value = values.get(node.id)
            inner = covers(value, seen | {node.id}) if value is not None and node.id not in seen else set()
            return {node.id} | inner
        if isinstance(node, (ast.Tuple, ast.List)):
            return set().union(*(covers(e, seen, scoped) for e in node.elts))
        if isinstance(node, ast.JoinedStr):
            return set().union(*(covers(p.value, seen, scoped) for p in node.values if isinstance(p, ast.FormattedValue)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "tuple", "repr", "frozenset") and len(node.args) == 1 and not node.keywords:
            return covers(node.args[0], seen, scoped)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            # every item spelled out whole: the iterable is pinned
            if not gen.ifs and isinstance(gen.target, ast.Name) and gen.target.id in covers(node.elt, seen, scoped | {gen.target.id}):
                return covers(gen.iter, seen, scoped)
        return set()

    return frozenset(set().union(*(covers(k, frozenset()) for k in keys)))


def _single_bindings(fn: ast.AST) -> Tuple[Set[str], Dict[str, ast.AST]]:
    """(names ``fn`` binds exactly once: parameters never rebound, locals
    stored once, comprehension targets; of those bound by a plain ``name =
    value``, the value)."""
    count: Dict[str, int] = {}
    value: Dict[str, ast.AST] = {}
    args = getattr(fn, "args", None)
    if args is not None:
        for a in ast.walk(args):
            if isinstance(a, ast.arg):
                count[a.arg] = count.get(a.arg, 0) + 1
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            count[node.id] = count.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value[node.targets[0].id] = node.value
    once = {name for name, n in count.items() if n == 1}
    return once, {name: v for name, v in value.items() if name in once}


def _new_containers(stmts: Iterable[ast.stmt]) -> Set[str]:
    """Locals every binding of which in ``stmts`` is a new Python container
    (``[]``, ``{}``, a comprehension, ``list()``): the only values the code
    may change in place (``freqs_list.append(f)``).  A tensor bound to a
    local may be a view of an attribute (``t = self.table.view(-1)``), so
    an in-place op on it is not allowed."""
    new: Set[str] = set()
    other: Set[str] = set()
    for node in (n for s in stmts for n in ast.walk(s)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _new_container(node.value):
            new.add(node.targets[0].id)
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if target is not None and isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension, ast.NamedExpr)):
                other.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return new - other


def _new_container(value: ast.AST) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("list", "dict", "set") and not value.args and not value.keywords


def _stored_names(nodes: Iterable[ast.AST]) -> Set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class Purity:
    """The purity judgement for one class (or none) of one module."""

    def __init__(self, model, source, chain: List[ast.ClassDef]) -> None:
        self.model, self.source, self.chain = model, source, chain
        self._init_only: Dict[str, Optional[str]] = {}
        self._fn_checked: Dict[int, Optional[str]] = {}

    # -- the region -----------------------------------------------------------------

    def region(self, fn: ast.AST, stmts: List[ast.stmt], keys: Iterable[ast.AST], value_store: ast.stmt, memo_global: str = "") -> Optional[str]:
        """Why ``stmts`` (a stretch of ``fn`` ending with ``value_store``,
        which stores the memo and is not judged) is not a pure function of
        ``keys``; None when it is.  ``memo_global``: the module global that
        is the memo (``fn`` may declare that one ``global``)."""
        for n in ast.walk(fn):
            if isinstance(n, ast.Nonlocal) or (isinstance(n, ast.Global) and n.names != [memo_global]):
                return "the method declares a global"
        covered = key_names(fn, keys)
        body = [s for s in stmts if s is not value_store]
        bound = _stored_names(stmts)
        if bound & covered:
            return f"the key's `{sorted(bound & covered)[0]}` is rebound while the value is computed"
        inside = {id(n) for s in stmts for n in ast.walk(s)}
        elsewhere = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in inside}
        elsewhere |= {a.arg for a in ast.walk(getattr(fn, "args", ast.arguments())) if isinstance(a, ast.arg)}
        first_store: Dict[str, int] = {}
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                for name in _stored_names([stmt]):
                    first_store.setdefault(name, i)
        for i, stmt in enumerate(stmts):
            for node in _loads(stmt):
                name = node.id
                if name in covered or name == "self":
                    continue
                if name in bound and (name not in elsewhere or first_store.get(name, len(stmts)) < i):
                    continue  # a local the region binds (before this statement, when bound outside too)
                if name in elsewhere or name in bound:
                    return f"it reads `{name}`, which the key does not cover"
                why = self._module_name(name, 0)
                if why is not None:
                    return why
        containers = _new_containers(stmts)
        for stmt in body:
            why = self._statement(stmt, containers, 0, fn)
            if why is not None:
                return why
        parts = [getattr(value_store, "value", None)]
        for target in getattr(value_store, "targets", []):
            if isinstance(target, ast.Subscript):
                parts.append(target.slice)
        for part in parts:
            why = self._expressions(part, containers, 0, fn) if part is not None else "the memo's store has no value"
            if why is not None:
                return why
        return None

    # -- statements and expressions -------------------------------------------------------

    def _statement(self, stmt: ast.stmt, containers: Set[str], depth: int, fn: ast.AST) -> Optional[str]:
        if isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try, ast.Delete, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"line {stmt.lineno} has a `{type(stmt).__name__.lower()}` statement"
        return self._expressions(stmt, containers, depth, fn)

    def _expressions(self, stmt: ast.AST, containers: Set[str], depth: int, fn: ast.AST) -> Optional[str]:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
                return f"line {node.lineno} awaits or yields"
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                base = node.value
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if isinstance(node, ast.Attribute) or not (isinstance(base, ast.Name) and base.id in containers):
                    return f"line {node.lineno} changes `{ast.unparse(node)}`"
            if isinstance(node, ast.Call):
                why = self._call(node, containers, depth, fn)
                if why is not None:
                    return why
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Load):
                why = self._self_attribute(node)
                if why is not None:
                    return why
            if isinstance(node, ast.Name) and node.id == "self" and not isinstance(self.source.parent(node), ast.Attribute):
                return f"line {node.lineno} hands `self` on"
        return None

    def _call(self, call: ast.Call, containers: Set[str], depth: int, fn: ast.AST) -> Optional[str]:
        func = call.func
        spelled = ast.unparse(func)
        qnames = self.model.qualified_names(func)
        for q in qnames:
            if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional."):
                return f"`{spelled}` builds a module or parameter"
            if q.startswith("torch.") or q == "torch":
                last = q.rsplit(".", 1)[-1]
                if _random(last) or (last.endswith("_") and not last.endswith("__")) or q.startswith(_IMPURE_NAMESPACES):
                    return f"`{spelled}` is not a pure function of its arguments"
                return None
            if q.startswith(("math.", "operator.", "cmath.")):
                return None
            if q.startswith("builtins."):
                return None if q[9:] in _PURE_BUILTINS or _builtin_exception(q[9:]) else f"`{spelled}` is not known to be pure"
        if isinstance(func, ast.Name):
            target = self.model.functions.get(func.id)
            if isinstance(target, _DEFS) and self.source.enclosing(target, _DEFS + (ast.ClassDef,)) is None:
                return self._function(target, depth)
            return f"`{spelled}` is not known to be pure"
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                method = self._method(func.attr)
                if method is None:
                    return f"`{spelled}` is not a method of the class (a submodule or a stored callable)"
                return self._function(method, depth)
            name = func.attr
            if _random(name) or name in _EFFECTS:
                return f"`{spelled}` is not a pure function of its arguments"
            if name in MUTATORS or (name.endswith("_") and not name.endswith("__")):
                base = func.value
                if not (isinstance(base, ast.Name) and base.id in containers):
                    return f"`{spelled}` changes a value in place"
            root = func.value
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value  # a call's result is a fresh value, its call judged on its own
            if isinstance(root, ast.Name) and root.id != "self" and root.id not in _locals(fn):
                # a function of another module (`importlib.import_module`,
                # `os.remove`, `random.random`) or a method of a module-level object
                return f"`{spelled}` is not known to be pure"
            return None
        return f"`{spelled}` is not known to be pure"

    def _function(self, fn: ast.AST, depth: int) -> Optional[str]:
        """Why a called function or method is not pure (its body by the same rules)."""
        if depth >= _DEPTH:
            return f"`{getattr(fn, 'name', '?')}` calls too deep to follow"
        if id(fn) in self._fn_checked:
            return self._fn_checked[id(fn)]
        self._fn_checked[id(fn)] = None  # a recursive call is judged by the rest of the body
        why: Optional[str] = None
        if getattr(fn, "decorator_list", None):
            why = f"`{fn.name}` is decorated"  # type: ignore[attr-defined]
        elif any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
            why = f"`{fn.name}` declares a global"  # type: ignore[attr-defined]
        else:
            params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore[attr-defined]
            local = _stored_names(fn.body) - params  # type: ignore[attr-defined]
            containers = _new_containers(fn.body) - params  # type: ignore[attr-defined]
            for stmt in fn.body:  # type: ignore[attr-defined]
                why = self._statement(stmt, containers, depth + 1, fn)
                if why is None:
                    for node in _loads(stmt):
                        if node.id not in params and node.id not in local and node.id != "self":
                            why = self._module_name(node.id, depth + 1)
                            if why is not None:
                                break
                if why is not None:
                    break
        self._fn_checked[id(fn)] = why
        return why

    def _module_name(self, name: str, depth: int) -> Optional[str]:
        """Why a free name read by the region is not a constant: an import,
        a function of the module, a module-level constant bound once."""
        tree = self.model.tree
        bindings = [n for n in self.source.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Store)]  # type: ignore[attr-defined]
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == name for a in stmt.names):
                return None
            if isinstance(stmt, _DEFS) and stmt.name == name:
                return None  # judged where it is called
        if len(bindings) == 1 and self.source.enclosing(bindings[0], _DEFS + (ast.ClassDef, ast.Lambda)) is None:
            stmt = self.source.statement_of(bindings[0])
            if isinstance(stmt, ast.Assign) and _literal(stmt.value):
                return None
        if name in _PURE_BUILTINS or name in ("None", "True", "False") or _builtin_exception(name):
            return None
        return f"it reads `{name}`, which is not a constant of the module"

    # -- self -------------------------------------------------------------------------

    def _method(self, name: str) -> Optional[ast.AST]:
        for cls in self.chain:
            for stmt in cls.body:
                if isinstance(stmt, _DEFS) and stmt.name == name:
                    return stmt
        return None

    def _self_attribute(self, node: ast.Attribute) -> Optional[str]:
        parent = self.source.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return None  # judged as a call
        if self._method(node.attr) is not None:
            return f"`self.{node.attr}` is a method handed on"
        if node.attr not in self._init_only:
            self._init_only[node.attr] = self._why_changes(node.attr)
        why = self._init_only[node.attr]
        if why is None and isinstance(parent, ast.Attribute) and not (isinstance(self.source.parent(parent), ast.Call) and self.source.parent(parent).func is parent):
            return f"it reads `self.{node.attr}.{parent.attr}`, an attribute of an attribute"
        return why

    def _why_changes(self, attr: str) -> Optional[str]:
        """Why ``self.<attr>`` may hold other values at other calls: stored
        outside ``__init__`` and the class body, changed in place anywhere
        in the file, a parameter, buffer or submodule; None when not."""
        inits = {id(stmt) for cls in self.chain for stmt in cls.body if isinstance(stmt, _DEFS) and stmt.name == "__init__"}
        assigned = False
        for cls in self.chain:
            for stmt in cls.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(isinstance(t, ast.Name) and t.id == attr for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
                    assigned = True
        for node in self.source.nodes(ast.Attribute):
            if node.attr != attr:  # type: ignore[attr-defined]
                continue
            parent = self.source.parent(node)
            in_init = any(id(a) in inits for a in self.source.ancestors(node))
            if isinstance(node.ctx, (ast.Store, ast.Del)):  # type: ignore[attr-defined]
                stmt = self.source.statement_of(node)
                if in_init:
                    assigned = True
                    value = getattr(stmt, "value", None)
                    if isinstance(value, ast.Call) and self._is_module_value(value):
                        return f"`self.{attr}` is a parameter or a submodule"
                    continue
                value = getattr(stmt, "value", None)
                if isinstance(stmt, ast.Assign) and _moved_copy(value, attr):
                    continue  # `self.pos_freqs = self.pos_freqs.to(device)`: the same values
                return f"`self.{attr}` is assigned on line {node.lineno} too"  # type: ignore[attr-defined]
            if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, (ast.Store, ast.Del)):
                return f"`self.{attr}` is changed in place on line {node.lineno}"  # type: ignore[attr-defined]
            if isinstance(parent, ast.Subscript) and isinstance(self.source.parent(parent), ast.AugAssign):
                return f"`self.{attr}` is changed in place on line {node.lineno}"  # type: ignore[attr-defined]
            if isinstance(parent, ast.AugAssign) and parent.target is node:
                return f"`self.{attr}` is changed on line {node.lineno}"  # type: ignore[attr-defined]
            if isinstance(parent, ast.Attribute) and (parent.attr in MUTATORS or (parent.attr.endswith("_") and not parent.attr.endswith("__"))):
                return f"`self.{attr}` is changed in place on line {node.lineno}"  # type: ignore[attr-defined]
        for call in self.source.nodes(ast.Call):
            func = call.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Attribute) and func.attr in ("register_buffer", "register_parameter", "add_module", "setattr") or (isinstance(func, ast.Name) and func.id == "setattr"):
                if any(isinstance(a, ast.Constant) and a.value == attr for a in call.args):  # type: ignore[attr-defined]
                    return f"`self.{attr}` is registered or set by name"
        return None if assigned else f"`self.{attr}` is not assigned in `__init__`"

    def _is_module_value(self, value: ast.Call) -> bool:
        """Is ``value`` an ``nn.Parameter``, an ``nn.*`` module or a module class of the file?"""
        for q in self.model.qualified_names(value.func):
            if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional."):
                return True
        cls = self.model.classes.get(value.func.id) if isinstance(value.func, ast.Name) else None
        return isinstance(cls, ast.ClassDef) and self.model.is_module_class(cls)


def _moved_copy(value: Optional[ast.AST], attr: str) -> bool:
    """``self.<attr>.to(...)``: the attribute moved (device or dtype), its values kept."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "to"
        and isinstance(value.func.value, ast.Attribute)
        and value.func.value.attr == attr
        and isinstance(value.func.value.value, ast.Name)
        and value.func.value.value.id == "self"
    )


def _builtin_exception(name: str) -> bool:
    """``ValueError``, ``KeyError``...: raising one is the same in eager and compiled code."""
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def _locals(fn: ast.AST) -> Set[str]:
    """The names ``fn`` binds: its parameters and every name it stores."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    args = getattr(fn, "args", None)
    return names | ({a.arg for a in ast.walk(args) if isinstance(a, ast.arg)} if args is not None else set())


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return False


def _loads(stmt: ast.AST) -> List[ast.Name]:
    """Names ``stmt`` reads that no comprehension or lambda inside it binds."""
    bound: Set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            bound |= _stored_names(g.target for g in node.generators)
        elif isinstance(node, ast.Lambda):
            bound |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound]
