"""FR005 unspec-int-attrs: a compiled nn.Module whose ``forward`` changes an int
attribute gets ``torch._dynamo.config.allow_unspec_int_on_nn_module = True``.

The rule reads the stdlib ``ast`` (``ctx.source``, ``ctx.model``) and places
its statement with :mod:`codemods.analysis.placement`; only the inserted statement is
built with libcst.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .._lazy import cst

from ..analysis import int_chains, placement
from ..analysis.project import ProjectFact
from ..analysis.compile_sites import CompileModel
from ..analysis.compile_sites import CompileSite as AstCompileSite
from ..analysis.compile_sites import dotted_name as ast_dotted_name
from ..findings import Finding, Safety
from ..analysis.source import COMPOUND, Source, walk
from ..analysis.modules import (
    _ClassFacts,
    _DEFS,
    _compile_statement,
    _compiled_one_by_one,
    _facts,
    _in_order,
    _int_changes,
    _is_int_literal,
    _method_calls,
    _method_mutations,
    class_chain,
    compiled_bound_method,
    compiled_module_class,
    imported_loop_classes,
    init_assignments,
    methods_reached,
    self_attr,
    walk_body,
)
from ..trace.causes import CuresCause, MODULE_INT_ATTR
from .base import Example, Rule

FLAG = "allow_unspec_int_on_nn_module"
#: first release that has the flag (AttributeError when set before)
FLAG_SINCE = (2, 7)
#: from this release on, inductor computes ``min(1.0, (step + 1) / warmup)``
#: right once ``step`` is dynamic; 2.9.1 and 2.11.0 give 0.0 (measured on the
#: CPU with a plain compiled function, ``dynamic=True``; 2.13.0, 2.14.1 agree
#: with eager; 2.10 and 2.12 not measured)
DYNAMIC_MIN_DIV_SINCE = (2, 13)
_UNREAD = object()


@dataclass
class IntMutation:
    attr: str
    #: the statement node that changes it (AugAssign / Assign)
    node: ast.stmt
    method: str
    cls_name: str = ""


def int_mutations_in_forward(model: CompileModel, cls: ast.ClassDef, start: str = "forward") -> List[IntMutation]:
    """Int attributes (initialised to an int literal) that ``forward`` (or the
    method ``start``, for a compiled bound method), or a method it calls,
    changes: ``self.n += 1``, ``self.n = self.n + 1``.  The
    methods followed are ``self.method()`` and ``self.sub.method()`` where
    ``self.sub`` is an instance of a class of this module (``self.kv_cache =
    KVCache(...)``; up to three such hops): what a submodule's method changes
    is an int attribute of a module the compiled forward reaches, and guarded
    the same way.  Methods in the order they are reached, mutations in source
    order."""
    found: List[IntMutation] = []
    for owner, name, fn in methods_reached(model, cls, start):
        for attr, node in _method_mutations(_facts(model, owner), fn):
            found.append(IntMutation(attr, node, name, owner.name))
    return found


# -- int attributes that differ per instance (regional compilation) -------------------
@dataclass
class PerInstanceInt:
    attr: str
    #: the construction that passes a value changing per instance (``Block(dim, i)``)
    construction: ast.Call
    #: the first read of ``self.<attr>`` in forward (or a method it calls)
    read: ast.AST
    #: why the flag cannot cure it (None: it can)
    blocker: Optional[str]


_COMPARE_OK = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _init_param_attrs(cls_facts: _ClassFacts) -> Dict[str, Tuple[str, int]]:
    """``self.attr = param`` in ``__init__`` (the whole value a parameter):
    attr -> (param, its position counting ``self``)."""
    init = cls_facts.methods.get("__init__")
    if init is None:
        return {}
    args = init.args  # type: ignore[attr-defined]
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    names = set(positional) | {a.arg for a in args.kwonlyargs}
    out: Dict[str, Tuple[str, int]] = {}
    for target, value in init_assignments(init):
        attr = self_attr(target)
        if attr is not None and isinstance(value, ast.Name) and value.id in names:
            out[attr] = (value.id, positional.index(value.id) if value.id in positional else -1)
    return out


def _per_instance_construction(model: CompileModel, cls: ast.ClassDef, param: str, index: int) -> Optional[ast.Call]:
    """A construction ``Cls(...)`` whose argument for ``param`` is a loop or
    comprehension variable (``[Block(dim, i) for i in range(n)]``,
    ``Block(cfg, layer_idx=i)``): the instances get different values."""
    source = model.source
    for ref in model.scopes.module.references.get(cls.name, ()):
        call = source.parent(ref)
        if not (isinstance(call, ast.Call) and call.func is ref):
            continue
        arg: Optional[ast.AST] = next((k.value for k in call.keywords if k.arg == param), None)
        if arg is None and 0 < index <= len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index]):
            arg = call.args[index - 1]
        if isinstance(arg, ast.Name) and any(b.kind in ("for", "comprehension") for b in model.scopes.bindings_of(arg)):
            return call
    return None


def _tensor_attrs(model: CompileModel, cls: ast.ClassDef) -> Set[str]:
    """Attributes of ``cls`` that hold tensors: ``register_buffer("name", ...)``
    and ``self.name = nn.Parameter(...)`` (indexing them with a dynamic int is fine)."""
    out: Set[str] = set()
    for c in class_chain(model, cls):
        for node in walk(c):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "register_buffer" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    out.add(node.args[0].value)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if any(q.endswith(".Parameter") and q.startswith("torch.") for q in model.qualified_names(node.value.func)):
                    out.update(a for a in (self_attr(t) for t in node.targets) if a is not None)
    return out


def _number_min_max(model: CompileModel, call: Optional[ast.AST], arg: ast.AST) -> bool:
    """``min(1.0, <arg>)`` / ``max(<arg>, 0)``: the builtin (not rebound), its
    other arguments number constants, no keywords: a number like the
    arithmetic around it (measured on 2.13 with the flag: 12 calls of
    ``x * min(1.0, (self.step + 1) / 10)``, 2 graphs)."""
    if not (isinstance(call, ast.Call) and arg is not call.func and not call.keywords and len(call.args) >= 2):
        return False
    if model.qualified_names(call.func) not in (frozenset(("builtins.min",)), frozenset(("builtins.max",))):
        return False
    return all(a is arg or (isinstance(a, ast.Constant) and type(a.value) in (int, float)) for a in call.args)


def _use_blocker(model: CompileModel, source: Source, read: ast.AST, fn: ast.AST, tensors: Set[str], depth: int = 0) -> Optional[str]:
    """Why a read of the int (``self.layer_idx`` or a local computed from it)
    keeps recompiling even when the int is dynamic; None when the flag cures
    it.  Measured on 2.13 (12 blocks, each compiled): arithmetic with tensors,
    indexing a buffer and a comparison in an ``if`` give 2-3 graphs with the
    flag; indexing a Python list or ``range(self.layer_idx)`` still hit the
    limit.  Anything not seen (passed to a call, stored) is a blocker too."""
    node = read
    parent = source.parent(node)
    arithmetic = False
    while isinstance(parent, (ast.BinOp, ast.UnaryOp)) or _number_min_max(model, parent, node):
        arithmetic = True
        node, parent = parent, source.parent(parent)
    if isinstance(parent, ast.Compare):
        ops_ok = all(isinstance(op, _COMPARE_OK) for op in parent.ops)
        others = [e for e in [parent.left] + list(parent.comparators) if e is not node]
        if ops_ok and all(_is_int_literal(e) for e in others):
            return None  # a predicate: one graph per outcome
        return "it is compared with something other than an int constant"
    if isinstance(parent, ast.Subscript) and node is not parent.value:
        container = self_attr(parent.value)
        if container is not None and container in tensors:
            return None
        return f"it indexes `{source.segment(parent.value)}`, a Python container: every index is a different constant"
    if isinstance(parent, ast.Call) and node is not parent.func:
        name = ast_dotted_name(parent.func) or "a function"
        if name == "range":
            return "it sets a `range()` length: every value unrolls a different loop"
        return f"it is passed to `{name}`, which the analysis does not follow"
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) and depth < 2:
        local = parent.targets[0].id
        uses = [n for n in walk_body(fn) if isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Load)]
        for use in uses:
            why = _use_blocker(model, source, use, fn, tensors, depth + 1)
            if why is not None:
                return why
        return None
    if arithmetic:
        return None
    return "its use is not seen"


def _own_methods_reached(facts: _ClassFacts, start: str) -> List[str]:
    """``start`` and the methods of the class it calls as ``self.method()``,
    transitively, in the order they are reached (not ``__init__``)."""
    order = [start]
    i = 0
    while i < len(order):
        for sub, name in _method_calls(facts.methods[order[i]]):
            if sub is None and name in facts.methods and name not in order and name != "__init__":
                order.append(name)
        i += 1
    return order


def per_instance_ints(model: CompileModel, cls: ast.ClassDef) -> List[PerInstanceInt]:
    """Int attributes set from an ``__init__`` parameter that the instances
    get different values for, read in ``forward`` (or a ``self.method()`` it
    calls).  Compiled one instance at a time, the instances share one code
    object, and each value is a new guard."""
    facts = _facts(model, cls)
    if "forward" not in facts.methods:
        return []
    params = _init_param_attrs(facts)
    if not params:
        return []
    order = _own_methods_reached(facts, "forward")
    source = model.source
    found: List[PerInstanceInt] = []
    tensors: Optional[Set[str]] = None
    for attr, (param, index) in params.items():
        construction = _per_instance_construction(model, cls, param, index)
        if construction is None:
            continue
        reads = [
            (n, facts.methods[name])
            for name in order
            for n in walk_body(facts.methods[name])
            if self_attr(n) == attr and isinstance(n.ctx, ast.Load)  # type: ignore[attr-defined]
        ]
        if not reads:
            continue
        if tensors is None:
            tensors = _tensor_attrs(model, cls)
        blocker = None
        for read, fn in reads:
            blocker = _use_blocker(model, source, read, fn, tensors)
            if blocker is not None:
                break
        first = min((r for r, _ in reads), key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
        found.append(PerInstanceInt(attr, construction, first, blocker))
    found.sort(key=lambda p: (p.read.lineno, p.read.col_offset))  # type: ignore[attr-defined]
    return found


#: why the flag alone cures nothing under ``dynamic=False``, and what does
#: (measured on 2.13: a compiled forward doing ``self.n += 1``, 12 calls:
#: 8 graphs with or without the flag; the flag without dynamic=False, 2)
_STATIC_BLOCKER = (
    "the compile passes `dynamic=False`, which keeps int attributes static whatever the flag says (8 graphs either way, measured)",
    "remove `dynamic=False` as well (FR001), then set the flag: 2 graphs",
)


def decorated_method(model: CompileModel, site: AstCompileSite) -> Optional[Tuple[ast.ClassDef, str]]:
    """(class, method) when ``site`` is ``@torch.compile`` on a method of an
    nn.Module subclass of this module (unsloth's compiled norms): every
    instance runs one code object, as blocks compiled one by one do."""
    fn = site.target_def
    if site.form != "decorator" or not isinstance(fn, _DEFS):
        return None
    cls = model.source.parent(fn)
    if not isinstance(cls, ast.ClassDef) or not model.is_module_class(cls):
        return None
    return cls, fn.name  # type: ignore[attr-defined]


@dataclass
class OutsideChange:
    #: the statement outside the class that changes the attribute (in a loop)
    node: ast.stmt
    #: the attribute it changes (``model.step``)
    target: ast.Attribute
    #: the first read of ``self.<attr>`` in the compiled method (or a method it calls)
    read: ast.AST
    method: str
    #: why the flag cannot cure it (None: it can)
    blocker: Optional[str]
    #: the loop that changes it also calls the compiled callable, itself or
    #: through a function of this module (the value seen changing between
    #: calls); False: no call seen in the loop, reported with --unproven only
    proven: bool = True
    #: the call that passes the instance to the function that changes it
    #: (``advance(model)`` in the loop), when the change is made there
    via: Optional[ast.Call] = None


def outside_int_change(model: CompileModel, site: AstCompileSite, cls: ast.ClassDef, start: str) -> Optional[OutsideChange]:
    """An int attribute of the compiled instance that code outside the class
    changes in a loop (``model.step += 1`` in the training loop, on the
    variable the compile was given: ``torch.compile(model)``,
    ``model.compile()``) and that the compiled method (or a ``self.method()``
    it calls) reads: every new value is a new guard.  The variable compiled
    and the one the compile's result is assigned to count (``compiled =
    torch.compile(model)``: ``compiled.step += 1`` reaches the module's
    attribute too, measured on 2.13); the first such change in source order."""
    target = site.target
    if site.form not in ("wrap", "method") or not isinstance(target, (ast.Name, ast.Attribute)):
        return None
    facts = _facts(model, cls)
    if not facts.int_attrs or start not in facts.methods:
        return None
    instances = [_instance_key(model, target)]
    stmt = site.statement
    if isinstance(stmt, ast.Assign) and stmt.value is site.node and len(stmt.targets) == 1:
        instances.append(_instance_key(model, stmt.targets[0]))  # the compiled wrapper
    instances = [i for i in instances if i is not None]
    if not instances:
        return None
    order = _own_methods_reached(facts, start)
    reads: Dict[str, List[Tuple[ast.AST, str]]] = {}
    for name in order:
        for n in walk_body(facts.methods[name]):
            attr = self_attr(n)
            if attr in facts.int_attrs and isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
                reads.setdefault(attr, []).append((n, name))  # type: ignore[arg-type]
    if not reads:
        return None
    source = model.source
    for node in _in_order(source.nodes(ast.AugAssign) + source.nodes(ast.Assign)):
        for t in _int_changes(node):  # `model.step = model.step + 1` counts, `model.step = 0` does not
            if t.attr not in reads:
                continue
            via: Optional[ast.Call] = None
            if _instance_key(model, t.value) in instances:
                loops = source.loops_around(node)
            elif isinstance(t.value, ast.Name):  # `def advance(m): m.step += 1`, called in a loop with the instance
                via, loops = _param_call_loops(model, t.value, instances)
            else:
                continue
            if not loops:
                continue  # changed once: one recompile, not one per call
            # evidence: the loop that changes it calls the compiled callable too
            proven = any(_loop_calls(model, loop, site) for loop in loops)
            tensors = _tensor_attrs(model, cls)
            blocker = None
            for read, name in reads[t.attr]:
                blocker = _use_blocker(model, source, read, facts.methods[name], tensors)
                if blocker is not None:
                    break
            first, name = min(reads[t.attr], key=lambda r: (r[0].lineno, r[0].col_offset))  # type: ignore[attr-defined]
            return OutsideChange(node, t, first, name, blocker, proven, via)  # type: ignore[arg-type]
    return None


def _instance_key(model: CompileModel, expr: ast.AST) -> Optional[tuple]:
    """What identifies the object ``expr`` holds, for telling whether two
    expressions hold the same module: a variable by its bindings in its scope
    (a load or a store), ``self.<attr>`` by its class and attribute (a
    trainer's ``self.model``, in any of the class's methods); None for
    anything else."""
    if isinstance(expr, ast.Name):
        owner = model.scopes.lookup(model.scopes.scope_of(expr), expr.id)
        found = tuple(sorted(id(b) for b in owner.bindings.get(expr.id, []))) if owner is not None else ()
        return ("name",) + found if found else None
    attr = self_attr(expr)
    if attr is not None:
        cls = model.source.enclosing(expr, ast.ClassDef)
        return ("self", id(cls), attr) if cls is not None else None
    return None


def _param_call_loops(model: CompileModel, name: ast.Name, instances: List[tuple]) -> Tuple[Optional[ast.Call], List[ast.AST]]:
    """When ``name`` is a parameter of a function of this module (``def
    advance(m): m.step += 1``): the first call of that function by name that
    passes one of ``instances`` for it from inside a loop, and the loops
    around that call (None, [] otherwise)."""
    bindings = model.scopes.bindings_of(name)
    if len(bindings) != 1 or bindings[0].kind != "param":
        return None, []
    fn = bindings[0].scope.node
    if not isinstance(fn, _DEFS):
        return None, []
    param = bindings[0].node.arg  # type: ignore[attr-defined]
    args = fn.args  # type: ignore[attr-defined]
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    source = model.source
    for call in _in_order(source.nodes(ast.Call)):
        if not (isinstance(call.func, ast.Name) and model.resolve_function(call.func) is fn):  # type: ignore[attr-defined]
            continue
        passed: Optional[ast.AST] = next((k.value for k in call.keywords if k.arg == param), None)  # type: ignore[attr-defined]
        if passed is None and param in positional:
            i = positional.index(param)
            if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: i + 1]):  # type: ignore[attr-defined]
                passed = call.args[i]  # type: ignore[attr-defined]
        if passed is None or _instance_key(model, passed) not in instances:
            continue
        loops = source.loops_around(call)
        if loops:
            return call, loops  # type: ignore[return-value]
    return None, []


def _loop_calls(model: CompileModel, loop: ast.AST, site: AstCompileSite) -> bool:
    """Does ``loop`` call what ``site`` compiled: one of its calls inside the
    loop, or inside a function of this module the loop calls by name
    (``train_step(compiled, x)`` whose body calls ``fn(x)``, a call the
    compile-site model follows)?"""
    source = model.source
    helpers = []
    for call in site.calls:
        if any(a is loop for a in source.ancestors(call)):
            return True
        fn = source.enclosing(call, _DEFS)
        if fn is not None:
            helpers.append(fn)
    if not helpers:
        return False
    for node in walk(loop):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if any(model.resolve_function(node.func) is fn for fn in helpers):
                return True
    return False


def _insertion_statement(source: Source, stmt: ast.stmt) -> ast.stmt:
    """The statement a line can be inserted before to run ahead of ``stmt``:
    ``stmt`` itself, or for a statement of a one-line suite (``if c: m =
    torch.compile(M())``) the compound statement that holds the suite."""
    if isinstance(stmt, COMPOUND):
        return stmt  # never in a one-line suite
    parent = source.parent(stmt)
    if parent is None or isinstance(parent, ast.Module):
        return stmt
    body = next(
        (b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and any(s is stmt for s in b)),
        None,
    )
    if body is None:
        return stmt
    first = body[0]
    line = first.lineno
    prefix = source.lines[line - 1][: source.char_col(line, first.col_offset)]
    # `if c: \` + newline + `stmt` is a one-line suite too
    while not prefix.strip() and line > 1:
        above = source.lines[line - 2].rstrip("\r\n")
        if not above.endswith("\\") or "#" in above:  # no continuation (a comment may end with `\\`)
            break
        line -= 1
        prefix = above
    if not prefix.strip():
        return stmt
    holder = source.enclosing(stmt, ast.stmt)
    return holder if holder is not None else stmt  # type: ignore[return-value]


# -- the rule ---------------------------------------------------------------------
#: what FR005 needs to know of other modules: the classes their files
#: compile one by one, and the calls from those classes' forward to an int
#: attribute's change (:mod:`codemods.analysis.int_chains`)
INT_CHAINS = ProjectFact("ints", gather=int_chains.gather, valid=int_chains.valid, prove=int_chains.prove, read=int_chains.class_facts_of_file)


class UnspecIntAttrs(Rule):
    code = "FR005"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(MODULE_INT_ATTR),)
    name = "unspec-int-attrs"
    summary = "compiled nn.Module whose `forward` changes an int attribute"
    what_it_does = """
Finds an `nn.Module` subclass whose `forward` (or a `self.method()` it calls)
changes an attribute initialised to an int (`self.calls += 1`,
`self.step = self.step + 1`), when an instance of it is compiled in the same
module (`torch.compile(Model())`, `m = Model(); torch.compile(m)`,
`m.compile()`, `self.model = Model(); self.model.compile()`). It inserts,
once before the first such compile (in the same block, so the flag is set
before compiling):

    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True

Methods of submodules are followed too (`self.kv_cache.update(k)` doing
`self.size += n` in a `KVCache` of this module, up to three hops), and
modules compiled one by one in a loop count (`for m in model.modules(): if
isinstance(m, Layer): m.compile()`, `for b in model.layers: b.compile()`):
the flag goes before the loop.

Across modules (a run over the project, through its index): a class
imported from another module of the run and compiled one by one (`for m in
model.modules(): if isinstance(m, TransformerLayer): m.compile()`) is
followed there: its `forward`, `self.method()`, `self.sub.method()` and
`self.sub(...)` (the submodule's forward), through imports and re-exports
(`from .kv_cache import KVCache` in a package's `__init__`), up to four
submodule hops, to the first change of an int attribute (the layer -> its
attention -> `KVCache.update` doing `self.size += seq_len`); the compile's
file gets the flag before the loop. A hop only counts when the submodule is
built from a class the analysis sees (`self.kv_cache = KVCache(...)`); one
held from a parameter annotated with the class (`self.attn = attn`, `attn:
MultiHeadAttention`: a subclass may be passed) is reported with `--unproven`
only; an unannotated parameter or a factory's result is not followed. Run
the tool over the whole project: a class outside the run is not guessed.

It also finds an int attribute that differs per instance rather than per
call: `self.layer_idx = layer_idx` in `__init__`, instances built with a loop
variable (`[Block(cfg, i) for i in range(n)]`), read in `forward`, the
blocks compiled one by one (regional compilation). The blocks share one
forward code object, so every block's index is a new guard. The flag is
written when the index is used in arithmetic, compared with an int constant
or indexes a tensor buffer; when it indexes a Python list, sets a `range()`
length or goes where the analysis cannot follow, it is reported without a
fix (measured on 2.13: the flag leaves those at the recompile limit). A
model compiled whole inlines every block with its index as a constant: no
finding.

A compiled bound method counts like a compiled forward (`update =
torch.compile(metric.update)`, torchmetrics-style, `update` doing
`self._update_count += 1`). And an int attribute the compiled method reads
(a warm-up factor, a schedule) that code outside the class changes in a loop,
on the variable that was compiled or on the compiled wrapper (`model.step +=
1` or `compiled.step += 1` in the training loop, or `m.step += 1` in a
function of this module the loop calls with it: `advance(model)`; a trainer's
`self.model.step += 1` next to `self.compiled(x)`), recompiles on every new
value as well: the flag is written when the read is arithmetic, `min`/`max`
with number constants, a comparison with an int constant or a tensor-buffer
index, and reported without a fix otherwise. The evidence is the loop: it
changes the attribute and calls the compiled callable (itself, or through a
function of this module that calls it: `train_step(compiled, x)`); a loop
with no such call seen (it only fast-forwards the counter) is reported with
`--unproven` only, and a change made once, outside any loop, recompiles once
and is not reported.

The `hasattr` guard keeps the code running on releases before 2.7, which lack
the flag; with `target_torch >= 2.7` the plain assignment is written. Nothing
is reported when the module already sets the flag (assignment, `setattr`,
`config.patch(allow_unspec_int_on_nn_module=...)`). Attributes initialised to
floats, tensors or unknown values are not counted as ints.
"""
    why_it_recompiles = """
torch 2.8+ specialises int attributes of nn.Modules: the value is a constant
of the graph and a guard. A counter that changes on every call fails that
guard every call: a new graph each time, and after the recompile limit (8)
the module runs eager. `allow_unspec_int_on_nn_module` makes such ints
dynamic like int arguments: one recompile, then one graph serves every value
(measured on 2.13: 12 calls, 8 graphs then eager → 2 graphs, same outputs).
Blocks compiled one by one with a per-block index: 12 blocks, 8 graphs then
eager → 2 graphs; an index into a Python list stays at the limit.
"""
    example = """
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    model = torch.compile(Counter())     # 8 graphs, then eager

Becomes:

    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    model = torch.compile(Counter())     # 2 graphs
"""
    fix_safety = """
Safe: the flag only stops torch from specialising the int; values are
unchanged (torch 2.4-2.7 behaved this way by default), and the guard makes
the line a no-op on releases without the flag. The flag is process-wide, as
all dynamo config is.
"""
    valid = (
        # float attribute
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.t = 0.0\n"
        "    def forward(self, x):\n        self.t += 1\n        return x * self.t\nm = torch.compile(M())\n",
        # never compiled
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = M()\n",
        # flag already set
        "import torch\ntorch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M())\n",
        # Module.compile() on a fresh instance returns None: nothing compiled can run
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nM().compile()\n",        # per-block indices, the model compiled whole: one graph, the indices inlined as constants
        "import torch\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
        "    def forward(self, x):\n        return x * (self.i + 1)\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = torch.nn.ModuleList([B(i) for i in range(12)])\n"
        "    def forward(self, x):\n        for b in self.blocks:\n            x = b(x)\n        return x\n"
        "m = torch.compile(M())\n",
    )
    invalid = (
        # compiled with dynamic=False: the flag alone lifts nothing, report only
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M(), dynamic=False)\n"
        ),
        # `@torch.compile` on forward: every instance shares the code, as blocks compiled one by one do
        Example(
            "import torch\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
            "    @torch.compile\n    def forward(self, x):\n        return x * (self.i + 1)\n"
            "blocks = [B(i) for i in range(12)]\n",
            "import torch\nif hasattr(torch._dynamo.config, \"allow_unspec_int_on_nn_module\"):\n    torch._dynamo.config.allow_unspec_int_on_nn_module = True\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
            "    @torch.compile\n    def forward(self, x):\n        return x * (self.i + 1)\n"
            "blocks = [B(i) for i in range(12)]\n",
        ),
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M())\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "    torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "m = torch.compile(M())\n",
        ),
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n = self.n + 1\n        return x * self.n\n"
            "def main():\n    m = M()\n    m.compile()\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n = self.n + 1\n        return x * self.n\n"
            "def main():\n    m = M()\n"
            '    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "        torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "    m.compile()\n",
        ),
        # an instance held by another class: `self.model = M()` then `self.model.compile()`
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            "class Trainer:\n    def __init__(self):\n        self.model = M()\n        self.model.compile()\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            "class Trainer:\n    def __init__(self):\n        self.model = M()\n"
            '        if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "            torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "        self.model.compile()\n",
        ),
    )

    valid = valid + (
        # the counter changes once, outside any loop: one recompile
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        return x * (self.n + 1)\n"
        "m = M()\nc = torch.compile(m)\nc(torch.ones(2))\nm.n += 1\nc(torch.ones(2))\n",
    )
    invalid = invalid + (
        # the training loop advances a counter that forward reads
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        return x * (self.n + 1) / 10\n"
            "m = M()\nc = torch.compile(m)\nfor _ in range(12):\n    c(torch.ones(2))\n    m.n += 1\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        return x * (self.n + 1) / 10\n"
            "m = M()\n"
            'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "    torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "c = torch.compile(m)\nfor _ in range(12):\n    c(torch.ones(2))\n    m.n += 1\n",
        ),
        # a compiled bound method that advances a counter on self
        Example(
            "import torch\nclass Metric(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.count = 0\n"
            "    def update(self, x):\n        self.count += 1\n        return x.sum()\n"
            "metric = Metric()\nupdate = torch.compile(metric.update)\n",
            "import torch\nclass Metric(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.count = 0\n"
            "    def update(self, x):\n        self.count += 1\n        return x.sum()\n"
            "metric = Metric()\n"
            'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "    torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "update = torch.compile(metric.update)\n",
        ),
        # blocks with their own index compiled one by one (regional compilation)
        Example(
            "import torch\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
        "    def forward(self, x):\n        return x * (self.i + 1)\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = torch.nn.ModuleList([B(i) for i in range(12)])\n"
            "m = M()\nfor b in m.blocks:\n    b.compile()\n",
            "import torch\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
        "    def forward(self, x):\n        return x * (self.i + 1)\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = torch.nn.ModuleList([B(i) for i in range(12)])\n"
            "m = M()\n"
            'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "    torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "for b in m.blocks:\n    b.compile()\n",
        ),
        # the index picks an element of a Python list: the flag does not cure it, report only
        Example(
            "import torch\nSCALES = [1.0, 0.5, 0.25]\nclass B(torch.nn.Module):\n    def __init__(self, i):\n        super().__init__()\n        self.i = i\n"
            "    def forward(self, x):\n        return x * SCALES[self.i]\n"
            "blocks = [B(i) for i in range(3)]\nfor b in blocks:\n    b.compile()\n",
        ),
    )

    reads = "ast"
    reads_project = True
    project_facts = (INT_CHAINS,)

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        source = ctx.source
        if not model.compile_sites:
            return []
        # (insertion statement, site, message, (blocker, what to do instead) or
        # None, proven), in source order of the compile
        candidates: List[Tuple[ast.stmt, AstCompileSite, str, Optional[Tuple[str, str]], bool]] = []
        mutations_of: Dict[Tuple[int, str], List[IntMutation]] = {}
        chains = ctx.project.of_file("int_chains", ctx.path) if ctx.project is not None else {}
        for site in model.compile_sites:
            cls = compiled_module_class(model, site)
            start = "forward"
            #: the class's method compiled by a decorator: all instances share its code
            decorated = False
            if cls is None:
                bound = compiled_bound_method(model, site) or decorated_method(model, site)  # torch.compile(metric.update), @torch.compile def forward
                if bound is not None:
                    cls, start = bound
                    decorated = site.form == "decorator"
            if cls is None and chains and site.statement is not None:
                # an imported class compiled one by one: the project index followed its forward
                for q in imported_loop_classes(model, site):
                    if q in chains:
                        owner, method, attr, line, module, proven = chains[q]
                        message = (
                            f"`{q.rpartition('.')[2]}` (compiled one by one) reaches `{owner}.{method}` in `{module}`, which changes "
                            f"int attribute `self.{attr}` (line {line}): torch specialises int attributes of compiled modules, so every new value recompiles"
                        )
                        if not proven:
                            message += " (through a submodule known only from a parameter's annotation: reported with --unproven)"
                        stmt = _insertion_statement(source, _compile_statement(model, site))
                        candidates.append((stmt, site, message, None, proven))
                        break
                continue
            if cls is None or site.statement is None:
                continue
            key = (id(cls), start)
            if key not in mutations_of:
                mutations_of[key] = int_mutations_in_forward(model, cls, start)
            mutations = mutations_of[key]
            # a decorated method compiles at its first call: the flag goes before its class
            stmt = _insertion_statement(source, cls if decorated else _compile_statement(model, site))
            if mutations:
                mutation = mutations[0]
                message = (
                    f"`{mutation.cls_name or cls.name}.{mutation.method}` changes int attribute `self.{mutation.attr}` (line {mutation.node.lineno}): "
                    "torch specialises int attributes of compiled modules, so every new value recompiles"
                )
                candidates.append((stmt, site, message, None, True))
                continue
            outside = outside_int_change(model, site, cls, start)
            if outside is not None:
                where = (
                    f"in `{getattr(source.enclosing(outside.node, _DEFS), 'name', '?')}` (line {outside.node.lineno}), which a loop calls with it (line {outside.via.lineno})"
                    if outside.via is not None
                    else f"in a loop (line {outside.node.lineno})"
                )
                message = (
                    f"`{source.segment(outside.target)}` changes int attribute `{outside.target.attr}` of the compiled `{cls.name}` {where} "
                    f"and `{cls.name}.{outside.method}` reads it (line {outside.read.lineno}): "  # type: ignore[attr-defined]
                    "torch specialises int attributes of compiled modules, so every new value recompiles"
                )
                if not outside.proven:
                    message += " (the loop calls no compiled callable here: reported with --unproven)"
                why = (outside.blocker, "keep the value in a tensor buffer") if outside.blocker is not None else None
                candidates.append((stmt, site, message, why, outside.proven))
                continue
            if start != "forward" or not (decorated or _compiled_one_by_one(model, site)):
                continue
            shared = f"share the `forward` compiled by the decorator (line {site.node.lineno})" if decorated else "are compiled one by one"  # type: ignore[attr-defined]
            for found in per_instance_ints(model, cls):
                message = (
                    f"`{cls.name}` instances get different `self.{found.attr}` values (line {found.construction.lineno}), "
                    f"{shared} and read it in forward (line {found.read.lineno}): "  # type: ignore[attr-defined]
                    "torch specialises int attributes of compiled modules, so every instance recompiles the shared code"
                )
                why = (found.blocker, "keep per-instance values in a tensor buffer") if found.blocker is not None else None
                candidates.append((stmt, site, message, why, True))
                break
        if not candidates or placement.config_mentions(source, [FLAG]):
            return []
        # `dynamic=False` keeps ints static whatever the flag says: the flag alone cures nothing there
        candidates = [
            (stmt, site, message, blocker if blocker is not None or not site.static else _STATIC_BLOCKER, proven)
            for stmt, site, message, blocker, proven in candidates
        ]
        candidates.sort(key=lambda c: placement.start_of(c[0]))
        findings: List[Finding] = []
        chosen: List[ast.stmt] = []
        risky: object = _UNREAD
        for stmt, site, message, blocker, proven in candidates:
            if any(s is stmt or placement.dominates(source, s, stmt) for s in chosen):
                continue  # the flag is already set before this compile runs
            if blocker is not None:
                why, instead = blocker
                findings.append(self.finding(ctx, site.node, message + f"; `{FLAG}` alone does not cure it: {why} (no automatic fix: {instead})", proven=proven))
                continue
            if placement.block_of(source, stmt) is None or (
                not placement.torch_at_least(ctx.settings, FLAG_SINCE) and placement.builtin_shadowed(model, stmt, "hasattr")
            ):
                findings.append(self.finding(ctx, site.node, message + " (no automatic fix here)", proven=proven))
                continue
            if proven:  # an unproven finding is dropped by default: its flag must not hide a later compile's
                chosen.append(stmt)
            if risky is _UNREAD:  # read once per module, for the first flag written
                risky = None if placement.torch_at_least(ctx.settings, DYNAMIC_MIN_DIV_SINCE) else _min_of_division(model)
            because = (
                f"line {risky} takes `min`/`max` of a float and a division involving a module attribute, which inductor before torch 2.13 "
                "computes as 0.0 once the int is dynamic (measured on 2.9.1 and 2.11.0; use --target-torch 2.13 if you only run 2.13+)"
                if risky is not None
                else ""
            )
            findings.append(
                self.finding(
                    ctx,
                    site.node,
                    message + f"; set `{FLAG} = True` before compiling" + (f"; unsafe: {because}" if because else ""),
                    edits=[placement.insert_before(source, stmt, self._flag_statement(ctx))],
                    safety=Safety.UNSAFE if because else Safety.SAFE,
                    needs_torch=True,
                    title=f"set `torch._dynamo.config.{FLAG} = True` before the compile",
                    unsafe_because=because,
                    proven=proven,
                )
            )
        return findings

    @staticmethod
    def _flag_statement(ctx) -> cst.BaseStatement:
        model = ctx.model
        assign = cst.SimpleStatementLine(
            body=[
                cst.Assign(
                    targets=[cst.AssignTarget(placement.torch_expr(model, "_dynamo", "config", FLAG))],
                    value=cst.Name("True"),
                )
            ]
        )
        if placement.torch_at_least(ctx.settings, FLAG_SINCE):
            return assign
        test = cst.Call(
            func=cst.Name("hasattr"),
            args=[
                cst.Arg(placement.torch_expr(model, "_dynamo", "config")),
                cst.Arg(cst.SimpleString(f'"{FLAG}"')),
            ],
        )
        return cst.If(test=test, body=cst.IndentedBlock(body=[assign]))


def _min_of_division(model: CompileModel) -> Optional[int]:
    """The line of the first ``min(...)``/``max(...)`` of a float constant and
    a true division whose operands read a ``self.`` attribute, directly or
    through a local bound to one (``step = self.step_count``, then
    ``min(1.0, (step + 1) / warmup)``): the arithmetic inductor before 2.13
    gets wrong once the int is dynamic (:data:`DYNAMIC_MIN_DIV_SINCE`)."""
    source = model.source
    for call in source.nodes(ast.Call):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, ast.Name) and func.id in ("min", "max") and model.qualified_names(func) == {"builtins." + func.id}):
            continue
        args = call.args  # type: ignore[attr-defined]
        if not any(isinstance(a, ast.Constant) and type(a.value) is float for a in args):
            continue
        fn = source.enclosing(call, _DEFS)
        aliases = {
            t.id
            for node in (walk(fn) if fn is not None else ())
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
            for t in node.targets if isinstance(t, ast.Name)
        }
        for a in args:
            for node in walk(a):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and any(
                    (isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self") or (isinstance(x, ast.Name) and x.id in aliases)
                    for x in walk(node)
                ):
                    return call.lineno  # type: ignore[attr-defined]
    return None
