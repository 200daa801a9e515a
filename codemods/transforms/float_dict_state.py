"""FR018 float-dict-state: a Python float kept in a dict attribute of an
``nn.Module`` (an adapter's scaling per name), read by its ``forward``, and
rewritten by eager code between calls of the compiled model: torch guards
each float by value, so the next call recompiles (huggingface/peft #2177: a
LoRA hot-swap with another ``lora_alpha`` writes a new
``lora_module.scaling[adapter_name]``; its fix,
``prepare_model_for_compiled_hotswap``, makes every scaling a 0-d tensor that
the hot-swap then ``.fill_()``\\ s).

The fix writes ``torch.as_tensor(value)`` at every write into the dict
(:func:`tensor_value_edits`, also the trace's own cure of a guarded dict
float: :mod:`codemods.trace.float_state`), when every use of the dict's
values in the file is one a 0-d tensor behaves the same in."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .._lazy import cst
from ..analysis.modules import methods_reached
from ..analysis.tensor_ops_table import TENSOR_MAKERS
from ..findings import Edit, Finding, Safety
from .base import Example, Rule

#: builtins whose first argument may be a 0-d tensor where it was a float
_TAKES_A_TENSOR = frozenset({"builtins.isinstance", "builtins.float", "builtins.int", "builtins.bool", "builtins.abs", "builtins.round"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: how many calls deep a loop's eager code is followed to a write of the dict
_MAX_DEPTH = 4


# -- the fix: which writes to wrap, and may they be --------------------------------------------


def _is_tensor_call(model, node: ast.AST) -> bool:
    """``torch.tensor(...)``, ``torch.as_tensor(...)``, ``torch.full(...)``, … (by the module's imports)."""
    return isinstance(node, ast.Call) and bool(model.qualified_names(node.func) & TENSOR_MAKERS)


def _compiled_code(source, model) -> Set[int]:
    """The functions the module's compiled code runs: those compiled, and the
    methods a module class's ``forward`` reaches."""
    out = {id(site.target_def) for site in model.compile_sites if site.target_def is not None}
    for cls in source.nodes(ast.ClassDef):
        if model.is_module_class(cls):
            out.update(id(fn) for _, _, fn in methods_reached(model, cls, "forward"))
    return out


def _branch_test(source, node: ast.AST) -> bool:
    """Is ``node`` (a comparison) what an ``if``, ``while``, conditional
    expression or ``assert`` branches on (also inside ``and``/``or``/``not``)?"""
    child, parent = node, source.parent(node)
    while isinstance(parent, ast.BoolOp) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
        child, parent = parent, source.parent(parent)
    return isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is child


def _use_is_tensor_safe(source, model, node: ast.AST, compiled: Set[int] = frozenset()) -> bool:
    """Does ``node`` (a value read) sit where a 0-d tensor behaves as the
    float?  Not a comparison that compiled code (``compiled``: the functions'
    ids) branches on: with a tensor that is a data-dependent branch, a graph
    break, and under ``fullgraph=True`` a failed compile."""
    parent = source.parent(node)
    if isinstance(parent, ast.Compare):
        return not (_branch_test(source, parent) and id(source.enclosing(parent, _FUNCS)) in compiled)
    if isinstance(parent, ast.BinOp):
        return True
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, (ast.USub, ast.UAdd)):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return isinstance(source.parent(parent), ast.Call)  # a method: `.fill_(v)`, `.item()`
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        # `float(v)`, `math.sqrt(v)`, `torch.tensor(v)`: a 0-d tensor is taken
        names = model.qualified_names(parent.func)
        if "builtins.isinstance" in names:
            # the answer changes with the type: only a check that expects a tensor
            return _checks_tensor(model, parent) or _after_tensor_check(source, model, parent)
        return bool(names & (_TAKES_A_TENSOR | {"torch.tensor", "torch.as_tensor"})) or any(q.startswith("math.") for q in names)
    return False


def _checks_tensor(model, call: ast.Call) -> bool:
    """Is ``call`` ``isinstance(v, <...torch.Tensor...>)``?"""
    if len(call.args) != 2:
        return False
    kinds = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
    return any("torch.Tensor" in model.qualified_names(k) for k in kinds)


def _after_tensor_check(source, model, call: ast.Call) -> bool:
    """Is ``call`` (``isinstance(v, (float, int))``) the test of an ``if`` or
    ``elif`` of a chain that also checks for a tensor (peft's
    ``_update_scaling``: ``if isinstance(v, torch.Tensor): ... elif
    isinstance(v, (float, int)): ...``; ``_convert_scalings_to_tensor``: ``if
    isinstance(v, float): ... elif not isinstance(v, torch.Tensor): raise``),
    or of an ``if`` whose body only writes tensors (a conversion, needless for
    a tensor)?  The code handles a tensor there."""
    branch = source.parent(call)
    if not (isinstance(branch, ast.If) and branch.test is call):
        return False
    writes = [n for st in branch.body for n in ast.walk(st) if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets)]
    if writes and all(_is_tensor_call(model, w.value) for w in writes):
        return True  # `if isinstance(v, float): d[k] = torch.tensor(v)`: a value already a tensor needs no conversion
    top = branch
    while isinstance(source.parent(top), ast.If) and source.parent(top).orelse == [top]:
        top = source.parent(top)
    tests = []
    while isinstance(top, ast.If):
        tests.append(top.test.operand if isinstance(top.test, ast.UnaryOp) and isinstance(top.test.op, ast.Not) else top.test)
        top = top.orelse[0] if len(top.orelse) == 1 and isinstance(top.orelse[0], ast.If) else None
    return any(isinstance(t, ast.Call) and "builtins.isinstance" in model.qualified_names(t.func) and _checks_tensor(model, t) for t in tests)


def _local_loads(scope: ast.AST, name: str) -> Tuple[List[ast.Name], int]:
    """(loads of ``name`` in ``scope``, how many times it is bound there)."""
    loads: List[ast.Name] = []
    stores = 0
    for n in ast.walk(scope):
        if isinstance(n, ast.Name) and n.id == name:
            if isinstance(n.ctx, ast.Load):
                loads.append(n)
            else:
                stores += 1
        elif isinstance(n, ast.arg) and n.arg == name:
            stores += 1
    return loads, stores


#: values a 0-d tensor cannot be made of, or not the same one: None, a string, a container
_NOT_A_NUMBER = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda)


def _may_be_number(value: ast.AST) -> bool:
    """Could ``value`` be a number (a literal number, or an expression the source does not show the type of)?"""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    return not isinstance(value, _NOT_A_NUMBER)


def values_written(source, model, attr: str) -> Optional[List[ast.expr]]:
    """The values written into the dict attribute ``attr`` in this file (not
    those already a tensor), in source order; None when a use or a write is
    not one a 0-d tensor may stand in for (the whole file is then left
    alone): every value read must enter arithmetic, a comparison, a method
    call, ``float``/``math.*``/``torch.tensor`` or an ``isinstance`` that expects a tensor, read
    directly or through a local name; the dict itself bound to a local name
    is followed one hop; a write must be ``d[k] = v`` or a dict literal
    assigned to the attribute, and no value written may be a literal other
    than a number (``None``, a string, a container)."""
    tree = source.tree
    compiled = _compiled_code(source, model)
    values: List[ast.expr] = []
    # the dict expressions: `<x>.attr`, and local names bound once to one
    dicts: List[ast.AST] = [n for n in source.nodes(ast.Attribute) if n.attr == attr]
    seen_locals: Set[Tuple[int, str]] = set()
    todo = list(dicts)
    while todo:
        d = todo.pop()
        parent = source.parent(d)
        if isinstance(d, ast.Attribute) and isinstance(d.ctx, ast.Store):
            # `<x>.attr = {...}` (or a tuple target: `a.r, a.scaling = {}, {}`)
            stmt = parent
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is d:
                value = stmt.value
            elif isinstance(parent, ast.Tuple) and isinstance(source.parent(parent), ast.Assign):
                assign = source.parent(parent)
                if not isinstance(assign.value, ast.Tuple) or len(assign.value.elts) != len(parent.elts):
                    return None
                value = assign.value.elts[parent.elts.index(d)]
            else:
                return None
            if not isinstance(value, ast.Dict) or None in value.keys:
                return None
            values.extend(v for v in value.values if not _is_tensor_call(model, v))
            continue
        if isinstance(d, ast.Attribute) and isinstance(d.ctx, ast.Del):
            return None
        if isinstance(parent, ast.Subscript) and parent.value is d:
            if isinstance(parent.ctx, ast.Store):
                assign = source.parent(parent)
                if not isinstance(assign, ast.Assign) or len(assign.targets) != 1 or assign.targets[0] is not parent:
                    return None  # `d[k] += v`, a tuple target, a for target
                if not _is_tensor_call(model, assign.value):
                    values.append(assign.value)
                continue
            if isinstance(parent.ctx, ast.Del):
                continue
            # a read of one value: directly, or bound to a local name
            holder = source.parent(parent)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name) and holder.value is parent:
                scope = source.enclosing(holder, _FUNCS) or tree
                loads, stores = _local_loads(scope, holder.targets[0].id)
                if stores != 1 or not all(_use_is_tensor_safe(source, model, n, compiled) for n in loads):
                    return None
                continue
            if not _use_is_tensor_safe(source, model, parent, compiled):
                return None
            continue
        if isinstance(parent, ast.Attribute) and parent.value is d and parent.attr in ("items", "values", "keys", "get"):
            if parent.attr in ("values", "items", "get"):
                call = source.parent(parent)
                if not isinstance(call, ast.Call):
                    return None
                if parent.attr == "get":
                    if not _use_is_tensor_safe(source, model, call, compiled):
                        return None
                    continue
                # `for k, v in d.items()`: the loop's value variable is a read
                loop = source.parent(call)
                if not isinstance(loop, (ast.For, ast.comprehension)) or loop.iter is not call:
                    return None
                target = loop.target
                name = target.elts[-1] if parent.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2 else target
                if not isinstance(name, ast.Name):
                    return None
                scope = source.enclosing(loop, _FUNCS) or tree
                loads, _stores = _local_loads(scope, name.id)
                if not all(_use_is_tensor_safe(source, model, n, compiled) for n in loads):
                    return None
            continue
        if isinstance(parent, ast.Compare) and any(c is d for c in parent.comparators) and all(isinstance(o, (ast.In, ast.NotIn)) for o in parent.ops):
            continue  # `key in d`
        if isinstance(parent, ast.Assign) and parent.value is d and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            # the dict bound to a local name: followed one hop
            scope = source.enclosing(parent, _FUNCS) or tree
            name = parent.targets[0].id
            loads, stores = _local_loads(scope, name)
            if stores != 1 or (id(scope), name) in seen_locals:
                return None
            seen_locals.add((id(scope), name))
            todo.extend(loads)  # its reads and its subscript writes (`d[k] = v` loads `d`)
            continue
        return None
    if not all(_may_be_number(v) for v in values):
        return None  # `torch.as_tensor(None)` fails; a list would become a 1-d tensor
    unique = {id(v): v for v in values}
    return sorted(unique.values(), key=lambda v: (v.lineno, v.col_offset))


def _as_tensor(torch_name: str, node: "cst.CSTNode") -> "cst.CSTNode":
    return cst.Call(func=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("as_tensor")), args=[cst.Arg(node)])


def tensor_value_edits(source, model, attr: str) -> Optional[List[Tuple[ast.expr, Edit]]]:
    """(value, its edit) for every value written into the dict attribute
    ``attr`` in this file, made ``torch.as_tensor(value)``; None when a use
    or a write forbids it (:func:`values_written`)."""
    values = values_written(source, model, attr)
    if values is None:
        return None
    make = functools.partial(_as_tensor, model.torch_name())
    return [(v, Edit(source.target(v, "BaseExpression"), make)) for v in values]


# -- the finding: a float of the dict read by forward, rewritten between calls ------------------


@dataclass
class _DictRead:
    """``self.<attr>[key]`` read by a method a module's ``forward`` runs, its value entering arithmetic."""

    cls: ast.ClassDef
    method: str
    node: ast.Subscript


def _enters_arithmetic(source, read: ast.Subscript) -> bool:
    """Is the value read an operand of arithmetic, directly or through a local name bound once?"""
    parent = source.parent(read)
    if isinstance(parent, ast.BinOp):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) and parent.value is read:
        scope = source.enclosing(parent, _FUNCS)
        if scope is None:
            return False
        loads, stores = _local_loads(scope, parent.targets[0].id)
        return stores == 1 and any(isinstance(source.parent(n), ast.BinOp) for n in loads)
    return False


def _forward_reads(model, source, attrs: Set[str]) -> Dict[str, _DictRead]:
    """By attribute (of ``attrs``): the first ``self.<attr>[key]`` a module
    class's ``forward`` (or a method it reaches) reads and computes with."""
    out: Dict[str, _DictRead] = {}
    for cls in source.nodes(ast.ClassDef):
        if not model.is_module_class(cls):
            continue
        for owner, method, fn in methods_reached(model, cls, "forward"):
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Attribute)
                    and isinstance(node.value.value, ast.Name)
                    and node.value.value.id == "self"
                    and node.value.attr in attrs
                    and node.value.attr not in out
                    and _enters_arithmetic(source, node)
                ):
                    out[node.value.attr] = _DictRead(owner, method, node)
    return out


def _is_float(node: ast.AST) -> bool:
    """A float the source shows: a float literal, a true division, ``float(...)``
    (either branch of a conditional)."""
    if isinstance(node, ast.IfExp):
        return _is_float(node.body) or _is_float(node.orelse)
    if isinstance(node, ast.Constant):
        return type(node.value) is float
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div) or _is_float(node.left) or _is_float(node.right)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float"


def _writes(source, attr: Optional[str]) -> List[ast.Assign]:
    """Every ``<x>.<attr>[key] = value`` of the file (of any attribute when
    ``attr`` is None), in source order."""
    out = []
    for node in source.nodes(ast.Assign):
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) and attr in (None, target.value.attr):
            out.append(node)
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _on_self(write: ast.Assign) -> bool:
    receiver = write.targets[0].value.value  # type: ignore[attr-defined]
    return isinstance(receiver, ast.Name) and receiver.id == "self"


def _tensor_writes(source, model, attr: str) -> List[ast.Assign]:
    """Writes of a tensor into the dict: ``<x>.<attr>[key] = torch.tensor(...)``,
    or through a local name bound to ``<x>.<attr>`` (peft's
    ``_convert_scalings_to_tensor``: ``scaling = module.scaling`` then
    ``scaling[key] = torch.tensor(val, ...)``)."""
    out = []
    for node in source.nodes(ast.Assign):
        target = node.targets[0] if len(node.targets) == 1 else None
        if not isinstance(target, ast.Subscript) or not _is_tensor_call(model, node.value):
            continue
        d = target.value
        if isinstance(d, ast.Name):
            scope = source.enclosing(node, _FUNCS) or source.tree
            bound = [
                n.value
                for n in ast.walk(scope)
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == d.id
            ]
            d = bound[0] if len(bound) == 1 else d
        if isinstance(d, ast.Attribute) and d.attr == attr:
            out.append(node)
    return out


def _dead_branch(model, source, node: ast.AST) -> bool:
    """Is ``node`` under an ``if`` whose test the model reads as a constant
    that skips it (``PREPARE = False`` ... ``if PREPARE:``)?"""
    child, parent = node, source.parent(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child is not parent.test:
            value = model.literal(parent.test)
            if isinstance(value, bool) and value is not (child in parent.body):
                return True
        child, parent = parent, source.parent(parent)
    return False


def _runs(model, source, node: ast.AST, seen: Set[int]) -> bool:
    """May ``node`` run?  Not when it is in a branch a constant skips, nor in
    a module-level function every call of which (by name, in this file) is
    itself in such a branch or in such a function.  A function the file
    never calls by name may be called from elsewhere: it runs."""
    if _dead_branch(model, source, node):
        return False
    fn = source.enclosing(node, _FUNCS)
    if fn is None or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or source.parent(fn) is not source.tree:
        return True
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    calls = [c for c in source.nodes(ast.Call) if isinstance(c.func, ast.Name) and c.func.id == fn.name]
    return not calls or any(_runs(model, source, c, seen) for c in calls)


def _reaches(model, source, nodes: Iterable[ast.AST], targets: Set[int]) -> bool:
    """Does code of ``nodes``, or a module-level function it calls by name
    (a few calls deep), hold a node of ``targets``?"""
    todo: List[Tuple[ast.AST, int]] = [(n, 0) for n in nodes]
    seen: Set[int] = set()
    while todo:
        node, depth = todo.pop()
        for sub in ast.walk(node):
            if id(sub) in targets:
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and depth < _MAX_DEPTH:
                fn = model.resolve_function(sub.func)
                if fn is not None and source.parent(fn) is source.tree and id(fn) not in seen:
                    seen.add(id(fn))
                    todo.append((fn, depth + 1))
    return False


def _between_calls(model, source, writes: List[ast.Assign]) -> Optional[Tuple[ast.AST, ast.Call]]:
    """(loop, compiled call) when a loop of the file calls compiled code and,
    in the same loop, runs eager code that writes one of ``writes``: the
    dict's value changes between calls of the compiled code."""
    targets = {id(w) for w in writes}
    for site in model.compile_sites:
        for call in site.calls:
            loop = source.enclosing(call, _LOOPS)
            if loop is None or source.enclosing(loop, _FUNCS) is not source.enclosing(call, _FUNCS):
                continue
            if _reaches(model, source, loop.body, targets):
                return loop, call
    return None


class FloatDictState(Rule):
    code = "FR018"
    #: no trace cause of its own: the trace's float of a dict attribute is
    #: cured by the code TRACE's `tensor-dict-values-from-trace`, which makes
    #: this rule's edits (:func:`tensor_value_edits`) in every file of the run
    cures = ()
    name = "float-dict-state"
    summary = "a float in a dict attribute of an nn.Module, read by forward and rewritten by eager code"
    what_it_does = """
Finds a dict attribute of an `nn.Module` class whose values are Python floats
(`self.scaling[adapter] = lora_alpha / r`), read by its `forward` (or a
method it reaches) into arithmetic (`... * self.scaling[adapter]`), and
written from eager code through another name than `self`
(`lora_module.scaling[adapter_name] = scaling`: a hot-swap, a schedule).
A default finding when a loop of the file calls compiled code and, in the
same loop, runs that write (directly or through the functions it calls), and
no write that may run makes the values tensors (a conversion such as peft's
`_convert_scalings_to_tensor`; one under a constant-false `if` does not
count); otherwise with `--unproven`. The fix writes `torch.as_tensor(value)` at every
write into the dict in the file.
"""
    why_it_recompiles = """
dynamo reads each float of the dict while tracing and guards its value
(`self._modules['layers']._modules['0']._modules['q_proj'].scaling['default']
== 1.0`); eager code that writes another float makes the next call fail the
guard. By default the float turns dynamic after that one recompile; under
`dynamic=False`, `error_on_recompile=True` or a CUDA graph, every change costs
a compile (peft's GPU tests fail on the one). A 0-d tensor is a graph input,
guarded on its dtype and shape, not its value. Measured on torch 2.13 (CPU,
counting backend): peft's hot-swap of #2177 without
`prepare_model_for_compiled_hotswap`, 2 graphs over ten calls; with the
scalings 0-d tensors, 1, the same output.
"""
    example = """
    class Linear(nn.Module):
        def update_layer(self, adapter_name, r, lora_alpha):
            self.scaling[adapter_name] = lora_alpha / r      # torch.as_tensor(lora_alpha / r)
        def forward(self, x):
            scaling = self.scaling[self.active_adapter]
            return self.base_layer(x) + self.lora_B(self.lora_A(x)) * scaling

    def _update_scaling(lora_module, adapter_name, scaling):
        lora_module.scaling[adapter_name] = scaling          # torch.as_tensor(scaling)

    model = torch.compile(model)
    for alpha in alphas:
        hotswap(model_inner, alpha)                          # calls _update_scaling
        model(x)
"""
    fix_safety = """
Unsafe: every reader of the dict, in this file and others, now gets a 0-d
tensor (float32, torch's default dtype, where the float was a double);
arithmetic and comparisons behave the same, but a format, a `json.dump` or
an identity check does not. The fix is offered only when every use of the
dict's values in the file is arithmetic, a comparison (not one compiled
code branches on, `if scaling == 0:`: with a tensor a data-dependent branch,
a failed compile under `fullgraph=True`), a method call (`.fill_(v)`),
`float`/`math.*`/`torch.tensor`, or an `isinstance` that
expects a tensor (its classes name `torch.Tensor`, an `if`/`elif` of its
chain does, or its branch only converts to a tensor: `isinstance(v, float)`
guarding an update would flip); every write is `d[k] = v` or a dict
literal; and no value written is a literal other than a number (`None`:
`torch.as_tensor(None)` fails); otherwise the finding is a report.
"""
    reads = "ast"
    triggers = (b"] =", b"]=")
    valid = (
        # the dict's floats are written only in __init__ (never between calls)
        "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': 0.5}\n"
        "    def forward(self, x):\n        return x * self.scaling['a']\nm = torch.compile(L())\nfor _ in range(3):\n    m(torch.ones(2))\n",
        # written from outside, but the values are tensors already
        "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': torch.tensor(0.5)}\n"
        "    def forward(self, x):\n        return x * self.scaling['a']\n"
        "def swap(m, s):\n    m.scaling['a'] = torch.tensor(s)\n"
        "l = L()\nm = torch.compile(l)\nfor s in (0.5, 2.0):\n    swap(l, s)\n    m(torch.ones(2))\n",
        # the dict is not read by forward
        "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.meta = {'a': 0.5}\n"
        "    def forward(self, x):\n        return x * 2\n"
        "def swap(m, s):\n    m.meta['a'] = s / 2\n"
        "l = L()\nm = torch.compile(l)\nfor s in (0.5, 2.0):\n    swap(l, s)\n    m(torch.ones(2))\n",
    )
    invalid = (
        # peft #2177's hot-swap, without prepare_model_for_compiled_hotswap
        Example(
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self, alpha, r):\n        super().__init__()\n        self.scaling = {}\n"
            "        self.scaling['default'] = alpha / r\n"
            "    def forward(self, x):\n        scaling = self.scaling['default']\n        return x * scaling\n"
            "def _update_scaling(module, adapter_name, scaling):\n    module.scaling[adapter_name] = scaling\n"
            "l = L(8, 8)\nm = torch.compile(l)\nfor alpha in (16, 4, 32):\n    _update_scaling(l, 'default', alpha / 8)\n    m(torch.ones(2))\n",
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self, alpha, r):\n        super().__init__()\n        self.scaling = {}\n"
            "        self.scaling['default'] = torch.as_tensor(alpha / r)\n"
            "    def forward(self, x):\n        scaling = self.scaling['default']\n        return x * scaling\n"
            "def _update_scaling(module, adapter_name, scaling):\n    module.scaling[adapter_name] = torch.as_tensor(scaling)\n"
            "l = L(8, 8)\nm = torch.compile(l)\nfor alpha in (16, 4, 32):\n    _update_scaling(l, 'default', alpha / 8)\n    m(torch.ones(2))\n",
            unsafe=True,
        ),
        # a value written is None: `torch.as_tensor(None)` would fail, so the finding has no fix
        Example(
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': 0.5}\n"
            "    def forward(self, x):\n        s = self.scaling['a']\n        return x * s if s is not None else x\n"
            "def swap(m, v):\n    m.scaling['a'] = v / 2\ndef disable(m):\n    m.scaling['a'] = None\n"
            "l = L()\nm = torch.compile(l)\nfor v in (1.0, 2.0):\n    swap(l, v)\n    m(torch.ones(2))\n"
        ),
        # the writer updates only a float (`isinstance(v, (float, int))`, no tensor branch): with the values
        # tensors it would raise, so the finding has no fix
        Example(
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': 0.5}\n"
            "    def forward(self, x):\n        return x * self.scaling['a']\n"
            "def swap(m, v):\n    if isinstance(m.scaling['a'], (float, int)):\n        m.scaling['a'] = v / 2\n    else:\n        raise TypeError('not a float')\n"
            "l = L()\nm = torch.compile(l)\nfor v in (1.0, 2.0):\n    swap(l, v)\n    m(torch.ones(2))\n"
        ),
        # the compiled forward branches on the value (`if scaling == 0`): with a tensor a data-dependent
        # branch (a failed compile under fullgraph=True), so the finding has no fix
        Example(
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': 0.5}\n"
            "    def forward(self, x):\n        scaling = self.scaling['a']\n        if scaling == 0:\n            return x\n        return x * scaling\n"
            "def swap(m, v):\n    m.scaling['a'] = v / 2\n"
            "l = L()\nm = torch.compile(l, fullgraph=True)\nfor v in (1.0, 2.0):\n    swap(l, v)\n    m(torch.ones(2))\n"
        ),
        # the writer exists, but no loop shows it between calls: --unproven
        Example(
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': 0.5}\n"
            "    def forward(self, x):\n        return x * self.scaling['a']\n"
            "def swap(m, s):\n    m.scaling['a'] = s\n"
            "m = torch.compile(L())\n",
            "import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scaling = {'a': torch.as_tensor(0.5)}\n"
            "    def forward(self, x):\n        return x * self.scaling['a']\n"
            "def swap(m, s):\n    m.scaling['a'] = torch.as_tensor(s)\n"
            "m = torch.compile(L())\n",
            unsafe=True,
            unproven=True,
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        if not model.compile_sites:
            return []
        findings: List[Finding] = []
        # the dicts written through another name than self (cheap: the file's
        # assignments), before the walk of what each module's forward runs
        written = {w.targets[0].value.attr for w in _writes(source, None) if not _on_self(w)}  # type: ignore[attr-defined]
        if not written:
            return []
        for attr, read in _forward_reads(model, source, written).items():
            writes = _writes(source, attr)
            eager = [w for w in writes if not _on_self(w) and not self._compiled(model, source, w)]
            if not eager or not self._holds_floats(source, model, attr, writes):
                continue
            # a write that makes the values tensors (and may run): they may be tensors at the calls
            converted = any(_runs(model, source, w, set()) for w in _tensor_writes(source, model, attr))
            between = None if converted else _between_calls(model, source, eager)
            findings.append(self._finding(ctx, attr, read, eager, between))
        return sorted(findings, key=lambda f: (f.line, f.column))

    @staticmethod
    def _compiled(model, source, write: ast.Assign) -> bool:
        """Is the write inside a function the file compiles (not eager code)?"""
        fn = source.enclosing(write, _FUNCS)
        return fn is not None and any(site.target_def is fn for site in model.compile_sites)

    @staticmethod
    def _holds_floats(source, model, attr: str, writes: List[ast.Assign]) -> bool:
        """Does the source show a float among the dict's values (a write, or a dict literal assigned to it)?"""
        if any(_is_float(w.value) for w in writes):
            return True
        for node in source.nodes(ast.Attribute):
            if node.attr == attr and isinstance(node.ctx, ast.Store):
                stmt = source.parent(node)
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict) and any(_is_float(v) for v in stmt.value.values):
                    return True
        return False

    def _finding(self, ctx, attr: str, read: _DictRead, eager: List[ast.Assign], between) -> Finding:
        source = ctx.source
        write = eager[0]
        writer = source.enclosing(write, _FUNCS)
        where = f"`{writer.name}`" if isinstance(writer, (ast.FunctionDef, ast.AsyncFunctionDef)) else "module-level code"
        shown = f"`{source.segment(write.targets[0])} = {source.segment(write.value)}`"
        if between is not None:
            loop, call = between
            evidence = f"; the loop on line {loop.lineno} runs it between calls of the compiled code (line {call.lineno})"
        else:
            evidence = ""
        message = (
            f"`{read.cls.name}.{read.method}` computes with the float `self.{attr}[...]` (line {read.node.lineno}) and eager code "
            f"writes a new one ({shown} in {where}){evidence}: torch guards each float of the dict by value, so the next call "
            f"recompiles (once, then the float turns dynamic; at every change under `dynamic=False`)"
        )
        planned = tensor_value_edits(source, ctx.model, attr)
        if not planned:
            message += f"; keep the values 0-d tensors written with `.fill_()` (no automatic fix: a use of `{attr}`'s values here is not one a tensor may stand in for)"
            return self.finding(ctx, write, message, proven=between is not None, about=(attr,))
        message += (
            f"; write `torch.as_tensor(...)` at its {len(planned)} write(s) in this file "
            f"(unsafe: every reader of `{attr}` gets a 0-d tensor)"
        )
        return self.finding(
            ctx,
            write,
            message,
            edits=[edit for _, edit in planned],
            safety=Safety.UNSAFE,
            needs_torch=True,
            title=f"make the values of `{attr}` 0-d tensors",
            proven=between is not None,
            about=(attr,),
        )
