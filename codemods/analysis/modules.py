"""The model of ``nn.Module`` classes the analysis shares: which class a
compile site compiles (a module, a bound method), the class chain, what
``__init__`` assigns, the methods a compiled method reaches (also through
submodules), the int attributes they change, and the per-module facts the
project index keeps for other modules (:func:`index_facts`,
:func:`class_facts`).  Read by FR005, FR013, the project index and the
trace's cures."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .compile_sites import CompileModel
from .compile_sites import CompileSite as AstCompileSite
from .compile_sites import dotted_name as ast_dotted_name
from .compile_sites import def_first_lines, import_target
from .params import binds_self, parameter_names, passed_argument
from .source import Source, children, walk


# -- int attributes changed in forward -------------------------------------------
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _is_int_literal(node: Optional[ast.AST]) -> bool:
    """``3``, ``-1``, ``+2``, ``int(...)`` (``True`` is not an int literal)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_int_literal(node.operand)
    if isinstance(node, ast.Call) and ast_dotted_name(node.func) == "int":
        return True
    return False


def self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _has_float_or_div(node: ast.AST) -> bool:
    """A float literal or a true division ``/`` anywhere in ``node``."""
    for sub in walk(node):
        if isinstance(sub, ast.Constant) and type(sub.value) is float:
            return True
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div):
            return True
    return False


def _int_changes(node: ast.AST) -> List[ast.Attribute]:
    """The attribute targets ``node`` changes as an int counter: ``x.n += 1``
    (an int operator), ``x.n = x.n + 1`` (the same ``x.n`` in the value); no
    float literal or true division in the value.  ``x`` is ``self`` in a
    method, the module's variable outside the class."""
    if isinstance(node, ast.AugAssign):
        if isinstance(node.target, ast.Attribute) and isinstance(node.op, _INT_OPS) and not _has_float_or_div(node.value):
            return [node.target]
        return []
    if not isinstance(node, ast.Assign) or _has_float_or_div(node.value):
        return []
    out = []
    for target in node.targets:
        if isinstance(target, ast.Attribute):
            base = ast_dotted_name(target.value)
            if base is not None and any(
                isinstance(sub, ast.Attribute) and sub.attr == target.attr and ast_dotted_name(sub.value) == base for sub in walk(node.value)
            ):
                out.append(target)
    return out


def walk_body(fn: ast.AST) -> Iterator[ast.AST]:
    """Every node of the statements of ``fn``'s body (nested defs included;
    not its decorators, parameters or annotations)."""
    for stmt in fn.body:  # type: ignore[attr-defined]
        yield from walk(stmt)


def _in_order(nodes: List[ast.AST]) -> List[ast.AST]:
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


@dataclass
class _ClassFacts:
    int_attrs: Set[str] = field(default_factory=set)
    non_int_attrs: Set[str] = field(default_factory=set)
    methods: Dict[str, ast.AST] = field(default_factory=dict)


def class_chain(model: CompileModel, cls: ast.ClassDef) -> List[ast.ClassDef]:
    """``cls`` and its base classes defined in this module, nearest first."""
    chain: List[ast.ClassDef] = []
    todo = [cls]
    while todo:
        cur = todo.pop(0)
        if any(c is cur for c in chain):
            continue
        chain.append(cur)
        for base in cur.bases:
            name = ast_dotted_name(base)
            if name in model.classes:
                todo.append(model.classes[name])  # type: ignore[index]
    return chain


def init_assignments(init: ast.AST) -> Iterator[Tuple[ast.AST, ast.AST]]:
    """(target, value) of the ``=`` and annotated ``=`` statements of
    ``__init__``, not those of functions nested in it."""
    stack: List[ast.AST] = list(init.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield target, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield node.target, node.value
        stack.extend(children(node))


def _facts(model: CompileModel, cls: ast.ClassDef) -> _ClassFacts:
    """The class's methods and int attributes, with those of its bases in this
    module (computed once per class: the rule, the outside changes and the
    index ask for the same class several times)."""
    facts = getattr(cls, "_fr005_facts", None)
    if facts is None:
        facts = cls._fr005_facts = _class_facts(model, cls)  # type: ignore[attr-defined]
    return facts


def _class_facts(model: CompileModel, cls: ast.ClassDef) -> _ClassFacts:
    facts = _ClassFacts()
    # attributes are recorded from the farthest base first so nearer classes win
    for c in reversed(class_chain(model, cls)):
        init = None
        for stmt in c.body:
            if isinstance(stmt, _DEFS):
                facts.methods[stmt.name] = stmt
                if init is None and stmt.name == "__init__":
                    init = stmt
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                _record(facts, stmt.targets[0].id, stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                _record(facts, stmt.target.id, stmt.value)
        if init is None:
            continue
        for target, value in init_assignments(init):
            name = self_attr(target)
            if name is not None:
                _record(facts, name, value)
    return facts


def _record(facts: _ClassFacts, name: str, value: ast.AST) -> None:
    # the outcome does not depend on the order values are recorded in: an
    # attribute is an int when every value recorded for it is an int literal
    if _is_int_literal(value) and name not in facts.non_int_attrs:
        facts.int_attrs.add(name)
    else:
        # any non-int initial value (float, tensor, unknown) rules the attribute out
        facts.int_attrs.discard(name)
        facts.non_int_attrs.add(name)


#: how many submodule hops (``self.kv_cache.update()`` → ``KVCache.update``) are followed
_MAX_HOPS = 3


def methods_reached(model: CompileModel, cls: ast.ClassDef, start: str = "forward") -> List[Tuple[ast.ClassDef, str, ast.AST]]:
    """(class, method name, def) of ``start`` and every method it reaches
    through ``self.<method>()`` and ``self.<sub>.<method>()`` where
    ``self.sub`` is an instance of a class of this module (up to three such
    hops), in the order they are reached: the code a compiled forward (or a
    compiled bound method) runs, whose attributes torch guards."""
    if start not in _facts(model, cls).methods:
        return []
    # (class, method name, hops)
    order: List[Tuple[ast.ClassDef, str, int]] = [(cls, start, 0)]
    seen = {(id(cls), start)}
    i = 0
    while i < len(order):
        owner, method, hops = order[i]
        i += 1
        for sub, name in _method_calls(_facts(model, owner).methods[method]):
            target, next_hops = owner, hops
            if sub is not None:
                if hops >= _MAX_HOPS:
                    continue
                target = _submodule_class(model, owner, sub)
                next_hops = hops + 1
                if target is None:
                    continue
            if name in _facts(model, target).methods and (id(target), name) not in seen:
                seen.add((id(target), name))
                order.append((target, name, next_hops))
    return [(owner, name, _facts(model, owner).methods[name]) for owner, name, _ in order]


#: how many submodule calls (``self.rope(...)`` -> the rope's forward) are followed
_MAX_SUB_HOPS = 3


def _method_names(model: CompileModel, cls: ast.ClassDef) -> Set[str]:
    return {stmt.name for c in class_chain(model, cls) for stmt in c.body if isinstance(stmt, _DEFS)}


def methods_reached_through_submodules(model: CompileModel, cls: ast.ClassDef, start: str) -> List[Tuple[ast.ClassDef, str, ast.AST]]:
    """:func:`methods_reached` from ``start``, and also through calls of a
    submodule (``self.rope(...)``: the submodule class's ``forward``), up to
    three such hops: the rope module of a compiled transformer (FR014,
    FR016; computed once per class and method)."""
    memo = model.__dict__.setdefault("_fr_reached_subs", {})
    key = (id(cls), start)
    if key not in memo:
        memo[key] = _reached_through_submodules(model, cls, start)
    return memo[key]


def _reached_through_submodules(model: CompileModel, cls: ast.ClassDef, start: str) -> List[Tuple[ast.ClassDef, str, ast.AST]]:
    out: List[Tuple[ast.ClassDef, str, ast.AST]] = []
    seen: Set[Tuple[int, str]] = set()
    todo: List[Tuple[ast.ClassDef, str, int]] = [(cls, start, 0)]
    while todo:
        owner, method, hops = todo.pop(0)
        for c, name, fn in methods_reached(model, owner, method):
            if (id(c), name) in seen:
                continue
            seen.add((id(c), name))
            out.append((c, name, fn))
            if hops >= _MAX_SUB_HOPS:
                continue
            names = _method_names(model, c)
            for held, method in _held_calls(model, c, fn):
                todo.append((held, method, hops + 1))
            for node in walk_body(fn):
                if isinstance(node, ast.Call):
                    sub = self_attr(node.func)
                    target = None
                    if sub is not None and sub not in names:
                        target = _submodule_class(model, c, sub)
                    elif isinstance(node.func, ast.Name) and node.func.id != "self":
                        # a block of a loop over an nn.ModuleList: `for block in self.h: x = block(x)`
                        target = model.loop_module_class(node.func)
                    if target is not None and "forward" in _method_names(model, target):
                        todo.append((target, "forward", hops + 1))
    return out


def held_class(model: CompileModel, owner: ast.ClassDef, attr: str) -> Optional[ast.ClassDef]:
    """The class of this module (an nn.Module or a plain one) whose instance
    ``self.<attr>`` of ``owner`` holds: a construction assigned to it, or a
    parameter of ``__init__`` assigned to it (``self.impl = impl``) given a
    construction wherever the module builds an ``owner`` (vLLM's
    ``Attention(impl)``, ``impl = AscendMLATorchairImpl(...)``); None when
    any value is something else or two classes are seen."""
    found: Optional[ast.ClassDef] = None

    def take(value: Optional[ast.AST]) -> bool:
        nonlocal found
        value = _unwrap_module_call(value)
        if isinstance(value, ast.Name):
            values = list(model.assigned_values(value))
            if len(values) != 1:
                return False
            value = _unwrap_module_call(values[0])
        cls = model.classes.get(ast_dotted_name(value.func) or "") if isinstance(value, ast.Call) else None
        if not isinstance(cls, ast.ClassDef) or (found is not None and cls is not found):
            return False
        found = cls
        return True

    init = _facts(model, owner).methods.get("__init__")
    for value in model.self_attr_values(owner, attr):
        if isinstance(value, ast.Name) and init is not None and value.id in parameter_names(init)[1:]:
            if any(c is not owner for c in model.classes_deriving(owner)):
                return None  # a subclass may hand its own object to `super().__init__`
            bindings = model.scopes.bindings_of(value)
            if len(bindings) != 1 or bindings[0].kind != "param":
                return None
            builds = [c for c in model.source.nodes(ast.Call) if ast_dotted_name(c.func) == owner.name]
            if not builds or not all(take(passed_argument(c, init, value.id, True)) for c in builds):
                return None
        elif not take(value):
            return None
    return found


def _held_calls(model: CompileModel, owner: ast.ClassDef, fn: ast.AST) -> List[Tuple[ast.ClassDef, str]]:
    """(class, method) for each ``self.<sub>.<held>.<method>(...)`` in ``fn``
    where ``self.<sub>`` is a submodule of a class of this module and its
    ``<held>`` an object of one (:func:`held_class`): vLLM's layers call
    ``self.mla_attn.impl.forward(...)``."""
    out: List[Tuple[ast.ClassDef, str]] = []
    for node in walk_body(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Attribute)):
            continue
        sub = self_attr(node.func.value.value)
        if sub is None:
            continue
        holder = _submodule_class(model, owner, sub)
        held = held_class(model, holder, node.func.value.attr) if holder is not None else None
        if held is not None and node.func.attr in _facts(model, held).methods and (held, node.func.attr) not in out:
            out.append((held, node.func.attr))
    return out


def _method_calls(fn: ast.AST) -> List[Tuple[Optional[str], str]]:
    """``self.<name>(...)`` → (None, name) and ``self.<sub>.<name>(...)`` →
    (sub, name) calls in ``fn``'s body, in source order."""
    calls: List[Tuple[Optional[str], str]] = []
    for call in _in_order([n for n in walk_body(fn) if isinstance(n, ast.Call)]):
        func = call.func  # type: ignore[attr-defined]
        if not isinstance(func, ast.Attribute):
            continue
        key: Optional[Tuple[Optional[str], str]] = None
        if self_attr(func) is not None:
            key = (None, func.attr)
        elif self_attr(func.value) is not None:
            key = (self_attr(func.value), func.attr)
        if key is not None and key not in calls:
            calls.append(key)
    return calls


def _submodule_class(model: CompileModel, owner: ast.ClassDef, attr: str) -> Optional[ast.ClassDef]:
    """The class of this module that ``self.<attr>`` of ``owner`` holds an
    instance of, when every instance assigned to it is of that one class."""
    found: Optional[ast.ClassDef] = None
    for c in class_chain(model, owner):
        init = model.method(c, "__init__")
        params = {a.arg for a in init.args.args + init.args.kwonlyargs} if init is not None else set()  # type: ignore[attr-defined]
        values: List[ast.AST] = []
        for value in model.self_attr_values(c, attr):
            values += [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]  # `loss if loss is not None else ClipLoss()`
        for value in values:
            value = _unwrap_module_call(value)  # type: ignore[assignment]
            if isinstance(value, ast.Constant) and value.value is None:
                continue  # `self.kv_cache = None` until caches are set up
            if isinstance(value, ast.Name) and value.id in params and model.source.enclosing(value, _DEFS) is init:
                # `self.loss = loss if given, else ClipLoss(...)` (open_clip's
                # CLIPTask): a caller's object, or this class's when defaulted
                continue
            cls = model.module_class_of(value) if isinstance(value, ast.Call) else None
            if cls is None or (found is not None and cls is not found):
                return None
            found = cls
    return found


def _compiled_one_by_one(model: CompileModel, site: AstCompileSite) -> bool:
    """``site`` compiles each element of a loop (``for b in model.layers:
    b.compile()``, ``torch.compile(b)``): many instances, one code object."""
    return _compile_statement(model, site) is not site.statement


def _unwrap_module_call(expr: Optional[ast.AST]) -> Optional[ast.AST]:
    """``Model().to(device).eval()`` → ``Model()``."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Call):
        expr = expr.func.value
    return expr


def compiled_module_class(model: CompileModel, site: AstCompileSite) -> Optional[ast.ClassDef]:
    """The nn.Module subclass of this module an instance of which ``site`` compiles."""
    if site.form not in ("wrap", "method") or site.target is None:
        return None
    return model.module_class_of(_unwrap_module_call(site.target))  # type: ignore[arg-type]


def compiled_bound_method(model: CompileModel, site: AstCompileSite) -> Optional[Tuple[ast.ClassDef, str]]:
    """(class, method) when ``site`` compiles a bound method of an instance of
    an nn.Module subclass of this module (``torch.compile(metric.update)``):
    torch treats ``self`` as a module there too, and specialises its int
    attributes as in a compiled forward."""
    target = site.target
    if site.form != "wrap" or not isinstance(target, ast.Attribute):
        return None
    if isinstance(target.value, ast.Name) and target.value.id == "self":
        # `torch.compile(self.training_forward)` in a method of the class
        cls = model.source.enclosing(site.node, ast.ClassDef)
        cls = cls if isinstance(cls, ast.ClassDef) and model.is_module_class(cls) else None
    else:
        cls = model.module_class_of(_unwrap_module_call(target.value))  # type: ignore[arg-type]
    if cls is None or target.attr not in _facts(model, cls).methods:
        return None
    return cls, target.attr


def _compile_statement(model: CompileModel, site: AstCompileSite) -> ast.stmt:
    """The statement the flag must precede: the compile's own, or for modules
    compiled one by one in a loop (``for b in model.layers: b.compile()``) the
    loop, so the flag is set once, before the first of them."""
    target = site.target
    if isinstance(target, ast.Name):
        bindings = model.scopes.bindings_of(target)
        if len(bindings) == 1 and bindings[0].kind == "for" and isinstance(bindings[0].value, (ast.For, ast.AsyncFor)):
            loop = bindings[0].value
            if any(a is loop for a in model.source.ancestors(site.node)):
                return loop
    return site.statement  # type: ignore[return-value]


# -- across modules (the project index) -------------------------------------------------
#: how many hops a chain may take across classes of other modules (the
#: compiled layer -> its attention -> its cache)
MAX_PROJECT_HOPS = 4


def imported_loop_classes(model: CompileModel, site: AstCompileSite) -> List[str]:
    """Qualified names of the imported classes an ``isinstance`` guard names
    for a module compiled one by one in a loop (``for m in model.modules():
    if isinstance(m, TransformerLayer): m.compile()``, the class imported from
    another module of the project); [] when the compiled class is one of this
    module or not named by such a guard."""
    if site.form not in ("wrap", "method") or not isinstance(site.target, ast.Name) or not _compiled_one_by_one(model, site):
        return []
    if compiled_module_class(model, site) is not None:
        return []
    return model.loop_imported_classes(site.target)


def index_facts(source: Source) -> Optional[dict]:
    """FR005's facts of a file for the project index (JSON-ready), or None:
    the imported classes it compiles one by one, as (qualified name as seen
    here, line of the compile)."""
    from ..analysis.compile_sites import model_of

    model = model_of(source)
    compiled: List[list] = []
    for site in model.compile_sites:
        for q in imported_loop_classes(model, site):
            compiled.append([q, site.node.lineno])  # type: ignore[attr-defined]
    return {"compiled": compiled} if compiled else None


def _annotated_class(model: CompileModel, annotation: Optional[ast.AST]) -> Optional[str]:
    """The class a parameter annotation names (``MultiHeadAttention``,
    ``Optional[KVCache]``, ``KVCache | None``): a module class of this file
    (its name) or an imported one (its qualified name); None otherwise."""
    if isinstance(annotation, ast.Subscript) and any(q in ("typing.Optional", "Optional") for q in model.qualified_names(annotation.value)):
        annotation = annotation.slice
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [annotation.left, annotation.right]
        rest = [x for x in sides if not (isinstance(x, ast.Constant) and x.value is None)]
        annotation = rest[0] if len(rest) == 1 else None
    if not isinstance(annotation, (ast.Name, ast.Attribute)):
        return None
    name = ast_dotted_name(annotation) or ""
    if name in model.classes:
        return name if model.is_module_class(model.classes[name]) else None
    names = model.qualified_names(annotation)
    q = next(iter(names)) if len(names) == 1 else ""
    return q if "." in q and not q.startswith(("torch.", "builtins.", "typing.")) else None


def _submodule_ref(model: CompileModel, owner: ast.ClassDef, attr: str) -> Optional[Tuple[str, bool]]:
    """What class ``self.<attr>`` of ``owner`` holds an instance of, when every
    instance assigned to it is of one class: a class of this module (its
    name) or an imported one (its qualified name as seen here), and whether
    that is seen (every value a construction) or only hinted (a value is a
    parameter annotated with the class: ``self.attn = attn``, ``attn:
    MultiHeadAttention``; a subclass may be passed).  None for anything else
    (an unannotated parameter, a factory's result, two classes)."""
    found: Optional[str] = None
    hinted = False
    for c in class_chain(model, owner):
        for value in model.self_attr_values(c, attr):
            value = _unwrap_module_call(value)  # type: ignore[assignment]
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            ref: Optional[str] = None
            if isinstance(value, ast.Name):
                bindings = model.scopes.bindings_of(value)
                if len(bindings) == 1 and bindings[0].kind == "param" and isinstance(bindings[0].node, ast.arg):
                    ref = _annotated_class(model, bindings[0].node.annotation)
                    hinted = True
            elif isinstance(value, ast.Call):
                local = model.module_class_of(value)
                if local is not None:
                    ref = local.name
                else:
                    names = model.qualified_names(value.func)
                    q = next(iter(names)) if len(names) == 1 else ""
                    ref = q if "." in q and not q.startswith(("torch.", "builtins.")) else None
            if ref is None or (found is not None and ref != found):
                return None
            found = ref
    return (found, hinted) if found is not None else None


def _method_mutations(owner_facts: _ClassFacts, fn: ast.AST) -> List[Tuple[str, ast.stmt]]:
    """(attribute, statement) for each change of an int attribute of the
    class in ``fn`` (``self.n += 1``, ``self.n = self.n + 1``), in source order."""
    out: List[Tuple[str, ast.stmt]] = []
    if not owner_facts.int_attrs:
        return out
    for node in _in_order([n for n in walk_body(fn) if isinstance(n, (ast.AugAssign, ast.Assign))]):
        for target in _int_changes(node):
            attr = self_attr(target)
            if attr in owner_facts.int_attrs:
                out.append((attr, node))  # type: ignore[arg-type]
    return out


def class_facts(source: Source) -> dict:
    """What a chain through this module's classes needs (JSON-ready): per
    class, per method, the calls it makes on ``self`` (``[sub, method]``;
    ``self.attn(x)`` on a submodule is ``["attn", "forward"]``, sub None for
    ``self.method()``) and the int attributes it changes (``[attr, line]``);
    the class each called submodule attribute holds (:func:`_submodule_ref`;
    ``hinted``: those known only from a parameter's annotation);
    and the names the module re-exports (``from .kv_cache import KVCache``)."""
    from ..analysis.compile_sites import model_of

    model = model_of(source)
    classes: Dict[str, dict] = {}
    for name, cls in model.classes.items():
        if not model.is_module_class(cls):
            continue
        facts = _facts(model, cls)
        methods: Dict[str, dict] = {}
        subs: Dict[str, Optional[str]] = {}
        for mname, fn in facts.methods.items():
            if mname == "__init__":
                continue
            calls: List[list] = []
            for sub, called in _method_calls(fn):
                if sub is None and called not in facts.methods:
                    sub, called = called, "forward"  # `self.attn(h)`: the submodule's forward
                if sub is not None and sub not in subs:
                    subs[sub] = _submodule_ref(model, cls, sub)
                if sub is not None and subs[sub] is None:
                    continue
                calls.append([sub, called])
            muts = [[attr, node.lineno] for attr, node in _method_mutations(facts, fn)]
            methods[mname] = {"calls": calls, "muts": muts}
        classes[name] = {
            "methods": methods,
            "subs": {k: v[0] for k, v in subs.items() if v is not None},
            "hinted": sorted(k for k, v in subs.items() if v is not None and v[1]),
        }
    reexports: Dict[str, str] = {}
    for stmt in source.tree.body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name != "*":
                    reexports[alias.asname or alias.name] = import_target(alias, stmt)  # type: ignore[assignment]
    return {"classes": classes, "reexports": reexports}


def compiled_class_method(model: CompileModel, site: AstCompileSite) -> Optional[Tuple[ast.ClassDef, str]]:
    """The ``nn.Module`` class and the method a compile site compiles: the
    class's ``forward`` for a compiled module, else the bound method's."""
    cls = compiled_module_class(model, site)
    if cls is not None:
        return cls, "forward"
    return compiled_bound_method(model, site)


# -- what a compiled function reaches: functions it calls, methods of module-level objects --

_MAX_CALL_DEPTH = 6


def compiled_function(model: CompileModel, site: AstCompileSite) -> Optional[ast.AST]:
    """The module-level function ``site`` compiles: its ``def`` (a decorator,
    ``torch.compile(fn)``), also through ``torch.vmap(fn, ...)`` /
    ``torch.func.vmap`` (``torch.compile(torch.vmap(step, in_dims=...))``)."""
    if isinstance(site.target_def, _DEFS):
        return site.target_def
    target = site.target
    if isinstance(target, ast.Call) and target.args and _is_vmap(model, target.func):
        target = target.args[0]
    if isinstance(target, ast.Name):
        fn = model.functions.get(target.id)
        if isinstance(fn, _DEFS) and len(list(model.assigned_values(target))) <= 1:
            return fn
    return None


def _module_level(model: CompileModel, name: ast.Name) -> bool:
    """Is ``name`` bound at module level (a global the function reads)?"""
    bindings = model.scopes.bindings_of(name)
    return bool(bindings) and all(b.scope is model.scopes.module for b in bindings)


def instance_methods_reached(model: CompileModel, fn: ast.AST) -> List[Tuple[ast.ClassDef, str, ast.AST]]:
    """(class, method, def) of the methods of module-level objects that the
    compiled function ``fn`` calls, directly or through the module-level
    functions it calls (``_TRI_ID.get(...)`` in a helper of a compiled
    ``step``; also a function passed to ``torch.vmap``), to a bounded depth."""
    out: List[Tuple[ast.ClassDef, str, ast.AST]] = []
    seen_fns: Set[int] = {id(fn)}
    todo: List[Tuple[ast.AST, int]] = [(fn, 0)]
    while todo:
        cur, depth = todo.pop(0)
        for node in walk_body(cur):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            callees: List[ast.AST] = []
            if isinstance(func, ast.Name) and func.id in model.functions:
                callees.append(model.functions[func.id])
            if _is_vmap(model, func) and node.args and isinstance(node.args[0], ast.Name):
                if node.args[0].id in model.functions:
                    callees.append(model.functions[node.args[0].id])
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                # a module-level object of a plain class (FR005's and FR014's
                # module model covers nn.Modules): `_TRI_ID.get(...)`, `_TRI_ID = _CachedConst([...])`
                cls = model.instance_class(func.value)
                if cls is not None and not model.is_module_class(cls) and _module_level(model, func.value):
                    method = _facts(model, cls).methods.get(func.attr)  # its own or a base's
                    if method is not None and not any(m is method for _c, _n, m in out):
                        out.append((cls, func.attr, method))
            for callee in callees:
                if isinstance(callee, _DEFS) and id(callee) not in seen_fns and depth < _MAX_CALL_DEPTH:
                    seen_fns.add(id(callee))
                    todo.append((callee, depth + 1))
    return out


@dataclass(frozen=True)
class CompiledReach:
    """What the code a compile site compiles runs: the compiled module's
    class and method, or None and the compiled function's name (``start``);
    (class, method, def) of the methods run compiled (``@torch.compiler.disable``
    ones left out); and the first lines of the compiled def (a finding's
    ``feeds``)."""

    cls: Optional[ast.ClassDef]
    start: str
    reached: Tuple[Tuple[ast.ClassDef, str, ast.AST], ...]
    feeds: Tuple[int, ...]


def compiled_reach(model: CompileModel, site: AstCompileSite, functions: bool = True) -> Optional[CompiledReach]:
    """The methods ``site``'s compiled code runs: a compiled module's
    ``forward`` (or bound method) and what it reaches through ``self``, its
    submodules and the objects they hold (:func:`methods_reached_through_submodules`);
    or, for a compiled function (also through ``torch.vmap``), the methods of
    module-level objects it calls (:func:`instance_methods_reached`; only
    with ``functions``).  None when there is nothing of either."""
    compiled = compiled_class_method(model, site)
    if compiled is not None:
        cls, start = compiled
        reached = [r for r in methods_reached_through_submodules(model, cls, start) if not runs_eager(model, r[2])]
        feeds = list(def_first_lines(reached[0][2])) if reached else []
        for sub, fn in _overrides_of_self_method(model, site, cls, start):
            # `torch.compile(self.training_forward)` in a base class: `self`
            # may be a subclass whose own method runs (open_clip's CLIPTask)
            feeds += def_first_lines(fn)
            seen = {id(r[2]) for r in reached}
            reached += [r for r in methods_reached_through_submodules(model, sub, start) if id(r[2]) not in seen and not runs_eager(model, r[2])]
        return CompiledReach(cls, start, tuple(reached), tuple(feeds))
    fn = compiled_function(model, site) if functions else None
    if fn is None:
        return None
    reached = tuple(r for r in instance_methods_reached(model, fn) if not runs_eager(model, r[2]))
    return CompiledReach(None, fn.name, reached, tuple(def_first_lines(fn)))  # type: ignore[attr-defined]


def _overrides_of_self_method(model: CompileModel, site: AstCompileSite, cls: ast.ClassDef, method: str) -> List[Tuple[ast.ClassDef, ast.AST]]:
    """(subclass, def) of each class of this module deriving from ``cls``
    that defines ``method`` itself, when ``site`` compiles ``self.<method>``
    in a method of ``cls`` (the bound method of whatever class ``self`` is)."""
    target = site.target
    if site.form != "wrap" or not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return []
    out: List[Tuple[ast.ClassDef, ast.AST]] = []
    for sub in model.classes_deriving(cls):
        fn = model.method(sub, method) if sub is not cls else None
        if fn is not None:
            out.append((sub, fn))
    return out


def functions_reached(model: CompileModel, fns: Sequence[ast.AST], depth: int = 3) -> List[ast.AST]:
    """The module-level functions of this module that ``fns`` call by their
    name (``attend(x)``), and those call, up to ``depth`` calls deep, in the
    order first called; none that runs eagerly (``@torch.compiler.disable``)."""
    out: List[ast.AST] = []
    seen = {id(f) for f in fns}
    frontier = list(fns)
    for _ in range(depth):
        later: List[ast.AST] = []
        for fn in frontier:
            for node in walk_body(fn):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                target = model.functions.get(node.func.id)
                if target is None or id(target) in seen or runs_eager(model, target):
                    continue
                seen.add(id(target))
                out.append(target)
                later.append(target)
        frontier = later
    return out


def runs_eager(model: CompileModel, fn: ast.AST) -> bool:
    """Is ``fn`` decorated ``@torch.compiler.disable`` / ``@torch._dynamo.disable``
    (it runs eagerly even when compiled code calls it)?"""
    for dec in getattr(fn, "decorator_list", ()):
        func = dec.func if isinstance(dec, ast.Call) else dec
        if any(q.endswith(".disable") and q.startswith("torch.") for q in model.qualified_names(func)):
            return True
    return False


def int_attributes(model: CompileModel, cls: ast.ClassDef) -> Set[str]:
    """The attributes of ``cls`` (its own or a base's of this module) every
    value given to which in ``__init__`` or the class body is an int literal."""
    return set(_facts(model, cls).int_attrs)


#: method names of dicts, lists, sets, strings and tensors: a call of one of
#: them on an unknown object is not taken for a call of a class of the module
_COMMON_METHODS = frozenset(
    "get update items keys values pop popitem setdefault append extend insert remove add discard clear copy index count "
    "format join split strip replace startswith endswith encode decode "
    "to cpu cuda size view item tolist numel dim sum mean max min add_ mul_ copy_ fill_ zero_ clone detach "
    "step reset forward".split()
)


def plain_methods_called(model: CompileModel, fn: ast.AST) -> List[Tuple[ast.ClassDef, str, ast.AST, str]]:
    """(class, method, def, parameter) for each ``obj.method(...)`` in ``fn``'s body where
    ``obj`` is a parameter of ``fn`` (a KV cache handed to a compiled
    forward: ``kv_cache.get_pos()``) and ``method`` is defined by exactly one
    plain (not ``nn.Module``) class of this module, one the module
    instantiates; not a method name a dict, list, string or tensor has."""
    args = fn.args  # type: ignore[attr-defined]
    params = {a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)} - {"self", "cls"}
    if not params:
        return []
    out: List[Tuple[ast.ClassDef, str, ast.AST, str]] = []
    for node in walk_body(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)):
            continue
        if node.func.value.id not in params or node.func.attr in _COMMON_METHODS or node.func.attr.startswith("__"):
            continue
        bindings = model.scopes.bindings_of(node.func.value)
        if not bindings or any(b.kind != "param" for b in bindings):
            continue
        owners = [c for c in _plain_classes(model) if node.func.attr in _facts(model, c).methods]
        if len(owners) == 1:
            method = _facts(model, owners[0]).methods[node.func.attr]
            if not any(m is method for _c, _n, m, _p in out):
                out.append((owners[0], node.func.attr, method, node.func.value.id))
    return out


def _counting_classes(model: CompileModel) -> List[ast.ClassDef]:
    """The plain classes the module instantiates that count one of their int
    attributes up in a method (computed once per module: most have none,
    and then nothing else is looked at)."""
    found = getattr(model, "_fr_counting_classes", None)
    if found is None:
        found = []
        for cls in _plain_classes(model):
            ints = int_attributes(model, cls)
            if ints and any(_counted(fn, attr) for name, fn in _facts(model, cls).methods.items() if name != "__init__" for attr in ints):
                found.append(cls)
        model._fr_counting_classes = found  # type: ignore[attr-defined]
    return found


def _plain_calls(model: CompileModel) -> bool:
    """Does the module call a method of one of its plain classes on something
    other than ``self`` (computed once per module)?"""
    found = getattr(model, "_fr_plain_calls", None)
    if found is None:
        names = {m for c in _plain_classes(model) for m in _facts(model, c).methods}
        found = False
        for n in model.source.nodes(ast.Call):
            func = n.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Attribute) and func.attr in names and isinstance(func.value, ast.Name) and func.value.id != "self":
                bindings = model.scopes.bindings_of(func.value)
                # a parameter (an object handed in) or a module-level object
                if bindings and (all(b.kind == "param" for b in bindings) or all(b.scope is model.scopes.module for b in bindings)):
                    found = True
                    break
        model._fr_plain_calls = found  # type: ignore[attr-defined]
    return found


def _plain_classes(model: CompileModel) -> List[ast.ClassDef]:
    """The plain (not ``nn.Module``) classes of the module that it instantiates
    (``KVCache(...)`` somewhere), computed once per module."""
    found = getattr(model, "_fr_plain_classes", None)
    if found is None:
        called = {n.func.id for n in model.source.nodes(ast.Call) if isinstance(n.func, ast.Name)}  # type: ignore[attr-defined]
        found = [c for name, c in model.classes.items() if isinstance(c, ast.ClassDef) and name in called and not model.is_module_class(c)]
        model._fr_plain_classes = found  # type: ignore[attr-defined]
    return found


# -- ints of plain objects the compiled code reads and counts up (FR016, FR001's evidence) --


@dataclass(frozen=True)
class CountedInt:
    """An int attribute of a plain class that the code a compile site runs
    both reads and counts up (nanochat's ``KVCache.pos``)."""

    owner: ast.ClassDef
    attr: str
    #: (method name, ``self.<attr>`` read)
    reads: Tuple[Tuple[str, ast.AST], ...]
    #: (method name, statement counting it up), in the order reached
    writes: Tuple[Tuple[str, ast.stmt], ...]
    #: how the compiled entry is named in messages (```GPT.forward```)
    start: str
    #: the first lines of the compiled entry's code object (trace matching)
    feeds: Tuple[int, ...]


def _reads_attr(expr: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and self_attr(n) == attr for n in ast.walk(expr))


def _counted(fn: ast.AST, attr: str) -> List[ast.stmt]:
    """The statements of ``fn`` that set ``self.<attr>`` from its own value:
    ``self.pos += n``, ``self.pos = self.pos + n``, or through a local
    assigned once from it (``t1 = self.pos + T``; ``self.pos = t1``)."""
    derived: Dict[str, int] = {}
    for node in walk_body(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _reads_attr(node.value, attr):
            derived[node.targets[0].id] = derived.get(node.targets[0].id, 0) + 1
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple) and len(node.targets) == 1:
            for t, v in zip(node.targets[0].elts, node.value.elts):  # `t0, t1 = self.pos, self.pos + T_add`
                if isinstance(t, ast.Name) and _reads_attr(v, attr):
                    derived[t.id] = derived.get(t.id, 0) + 1
    out: List[ast.stmt] = []
    for node in walk_body(fn):
        if isinstance(node, ast.AugAssign) and self_attr(node.target) == attr and isinstance(node.op, (ast.Add, ast.Sub)):
            out.append(node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and self_attr(node.targets[0]) == attr:
            value = node.value
            if _reads_attr(value, attr) or any(isinstance(n, ast.Name) and derived.get(n.id) == 1 for n in ast.walk(value)):
                out.append(node)
    return out


def _given(value: Optional[ast.AST]) -> bool:
    """Is ``value`` an argument other than ``None``?"""
    return value is not None and not (isinstance(value, ast.Constant) and value.value is None)


def _handed(model, site, entry: ast.AST, param: str) -> bool:
    """Is an object given to the compiled code as ``param``: a call of the
    compiled callable passes it (by keyword, or at the entry's position of a
    parameter of that name), or the compiled callable is handed on (``Engine(model,
    tokenizer)``) and some call of the module passes ``param=`` (nanochat's
    ``self.model.forward(ids, kv_cache=...)``)?  A parameter the compiled
    code may receive but is never given (the training calls ``model(x, y)``)
    is no evidence."""
    bound_self = binds_self(model.source, entry)  # a compiled module's forward, a bound method (not a staticmethod)
    if any(_given(passed_argument(call, entry, param, bound_self)) for call in site.calls):
        return True
    binding = site.binding
    if not binding or "." in binding:
        return False
    escapes = False
    for n in model.source.nodes(ast.Name):
        parent = model.source.parent(n)
        if n.id == binding and isinstance(parent, ast.Call) and parent.func is not n and parent is not site.node and parent is not site.options_call:  # type: ignore[attr-defined]
            escapes = True  # handed to a call other than its own compile
            break
    return escapes and any(kw.arg == param and _given(kw.value) for call in model.source.nodes(ast.Call) for kw in call.keywords)  # type: ignore[attr-defined]


def counted_object_ints(model: CompileModel, site: AstCompileSite) -> List[CountedInt]:
    """The int attributes of plain objects that the code ``site`` compiles
    reads and counts up: methods called on an object the compiled code is
    given (:func:`plain_methods_called`, with :func:`_handed` evidence) or
    on a module-level object, and the methods those run (computed once per
    site)."""
    if not _counting_classes(model):
        return []  # no plain class here counts an int attribute up
    if not _plain_calls(model):
        return []  # no method of one called on another object (`kv_cache.get_pos()`, `steps.next()`)
    cache = model.__dict__.setdefault("_fr_counted_ints", {})
    key = id(site)
    if key in cache:
        return cache[key]
    compiled = compiled_class_method(model, site)
    objects: List[Tuple[ast.ClassDef, str, ast.AST]] = []
    if compiled is not None:
        entry = [fn for _c, _n, fn in methods_reached_through_submodules(model, compiled[0], compiled[1])]
        start = f"`{compiled[0].name}.{compiled[1]}`"
    else:
        fn = compiled_function(model, site)
        entry = [fn] if fn is not None else []
        start = f"`{fn.name}`" if fn is not None else ""  # type: ignore[attr-defined]
        objects = list(instance_methods_reached(model, fn)) if fn is not None else []
    entry = [fn for fn in entry if not runs_eager(model, fn)]
    for fn in entry:
        objects += [(c, n, f) for c, n, f, param in plain_methods_called(model, fn) if _handed(model, site, entry[0], param)]
    plain: List[Tuple[ast.ClassDef, str, ast.AST]] = []
    for cls, name, _fn in objects:
        for c, n, f in methods_reached(model, cls, name):
            if not model.is_module_class(c) and not runs_eager(model, f) and not any(f is g for _a, _b, g in plain):
                plain.append((c, n, f))
    by_class: Dict[int, List[Tuple[ast.ClassDef, str, ast.AST]]] = {}
    for cls, name, fn in plain:
        by_class.setdefault(id(cls), []).append((cls, name, fn))
    found: List[CountedInt] = []
    feeds = def_first_lines(entry[0]) if entry else ()
    for methods in by_class.values():
        cls = methods[0][0]
        for attr in sorted(int_attributes(model, cls)):
            reads = tuple((name, n) for _c, name, fn in methods for n in walk_body(fn) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and self_attr(n) == attr)
            writes = tuple((name, w) for _c, name, fn in methods for w in _counted(fn, attr))
            if reads and writes:
                found.append(CountedInt(cls, attr, reads, writes, start, feeds))
    cache[key] = found
    return found


def _is_vmap(model: CompileModel, func: ast.AST) -> bool:
    """``torch.vmap`` / ``torch.func.vmap``."""
    return any(q.endswith(".vmap") and q.startswith("torch.") for q in model.qualified_names(func))
