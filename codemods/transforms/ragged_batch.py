"""FR007 ragged-last-batch: a ``DataLoader`` without ``drop_last=True`` feeds
a compiled callable; its smaller last batch is a new shape."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..analysis.compile_sites import CompileModel, dotted_name
from ..analysis.constants import int_value
from ..findings import Finding, Safety
from ..analysis.placement import block_of, existing_marks, function_of, insert_before, mark_statement
from ..analysis.source import COMPOUND, walk
from ..analysis.variation import loop_assignments, loop_names
from ..trace.causes import CuresCause, TENSOR_SHAPE
from .base import Example, Rule

_LOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
_DATASETS = {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
#: DataLoader's positional parameters, in order (torch 2.1-2.13)
_POSITIONAL = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn", "pin_memory", "drop_last")
#: tensor methods that return a tensor with the same first dim (a batch moved or cast)
_KEEPS_TENSOR = {"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "long", "int", "bool", "contiguous", "pin_memory", "detach", "clone"}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCS + (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.ClassDef)
_SIZE_FACTORIES = {"ones", "zeros", "randn", "rand", "empty", "randint", "full", "arange"}


@dataclass
class _Loader:
    call: ast.Call
    batch_size: ast.AST
    #: the dataset is a TensorDataset of this module (batches are lists of tensors)
    tensors: bool
    #: samples in the dataset, when visible (TensorDataset of a literal-size tensor, no sampler)
    length: Optional[int]


def _argument(call: ast.Call, name: str) -> Tuple[bool, Optional[ast.AST]]:
    """(is it given, its value) for DataLoader parameter ``name``."""
    for kw in call.keywords:
        if kw.arg == name:
            return True, kw.value
    index = _POSITIONAL.index(name)
    if index < len(call.args):
        return True, call.args[index]
    return False, None


class RaggedBatch(Rule):
    code = "FR007"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(TENSOR_SHAPE),)
    name = "ragged-last-batch"
    summary = "a DataLoader without `drop_last=True` feeds a compiled callable: the smaller last batch is a new shape"
    what_it_does = """
Finds a `torch.utils.data.DataLoader(..., batch_size=B)` without
`drop_last=True` (no `batch_sampler`) that a `for` loop iterates (directly,
through `enumerate(loader)` or a wrapper such as `tqdm(loader)`), where the
loop passes a tensor of the batch (a loop target, or a name the loop body
derives from one: `x = x.to(device)`, `x = batch[0]`) to a compiled callable
whose compile is not `dynamic=True`. Before the statement holding that call it
inserts

    torch._dynamo.maybe_mark_dynamic(x, 0)

for each tensor of the batch passed (the same statement the trace mode inserts
when a trace shows the batch dim changing). The fix is offered only when the
batch is visibly tensors: the loader's dataset is a `TensorDataset` of this
module and the default collate function is used; otherwise the finding comes
without a fix (a dict or a list batch cannot be marked).

A default finding needs evidence that the last batch is smaller: the dataset's
length is visible (`TensorDataset(torch.randn(113, 8), ...)`, no sampler) and
not a multiple of the batch size (an int the module shows). When the length
cannot be seen, which is usual in real code, the finding is reported only
with `--unproven`. A length that is a multiple of the batch size, and
`drop_last=True` (or a `drop_last` that is not the literal `False`), give no
finding.
"""
    why_it_recompiles = """
The first batch compiles a graph specialised to `B` rows. The last batch of
each epoch has `len(dataset) % B` rows: a shape guard fails and torch
recompiles (with the default `dynamic=None` the second graph is dynamic in
that dim; with `dynamic=False`, one graph per size). Measured on torch 2.13
(CPU, counting backend; 113 samples, batch 32, 3 epochs): 2 graphs;
`maybe_mark_dynamic(x, 0)` before the call: 1 graph, same output; under
`dynamic=False` also 2 → 1. A last batch of 1 row still recompiles (torch
specialises sizes 0 and 1; marking does not lift that).
"""
    example = """
    model = torch.compile(model)
    loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)
    for (x,) in loader:
        out = model(x)          # 32, 32, 32, then 17 rows: a second graph

Becomes:

    for (x,) in loader:
        torch._dynamo.maybe_mark_dynamic(x, 0)
        out = model(x)          # one graph, dynamic in the batch dim
"""
    fix_safety = """
Safe: `maybe_mark_dynamic` is a hint that changes no value (a dim that must
stay static is specialised again without an error). The graph is compiled
dynamic in the batch dim from the first batch, which is what automatic
dynamic shapes end up serving after the first ragged batch anyway.
`drop_last=True` would also cure it but changes the data the model sees, so
it is only mentioned.
"""
    valid = (
        # drop_last=True already
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
        "loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32, drop_last=True)\n"
        "for (x,) in loader:\n    model(x)\n",
        # the length is a multiple of the batch size
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
        "loader = DataLoader(TensorDataset(torch.randn(128, 8)), batch_size=32)\n"
        "for (x,) in loader:\n    model(x)\n",
        # dynamic=True handles it
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2), dynamic=True)\n"
        "loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)\n"
        "for (x,) in loader:\n    model(x)\n",
        # the model is not compiled
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.nn.Linear(8, 2)\nf = torch.compile(torch.sin)\n"
        "loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)\n"
        "for (x,) in loader:\n    model(x)\n",
    )
    invalid = (
        Example(
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
            "loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)\n"
            "for (x,) in loader:\n    out = model(x)\n",
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
            "loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)\n"
            "for (x,) in loader:\n    torch._dynamo.maybe_mark_dynamic(x, 0)\n    out = model(x)\n",
        ),
        # the batch moved to a device first; the length is not visible: --unproven only
        Example(
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
            "def train(data, device):\n    loader = DataLoader(TensorDataset(data), batch_size=32, shuffle=True)\n"
            "    for step, (x,) in enumerate(loader):\n        x = x.to(device)\n        model(x)\n",
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nmodel = torch.compile(torch.nn.Linear(8, 2))\n"
            "def train(data, device):\n    loader = DataLoader(TensorDataset(data), batch_size=32, shuffle=True)\n"
            "    for step, (x,) in enumerate(loader):\n        x = x.to(device)\n        torch._dynamo.maybe_mark_dynamic(x, 0)\n        model(x)\n",
            unproven=True,
        ),
    )

    reads = "ast"
    triggers = (b"DataLoader",)

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        if not model.compile_sites:
            return []
        calls: Dict[ast.Call, str] = {}  # compiled call -> the compiled callable's name
        for site in model.compile_sites:
            dyn = site.option_value("dynamic")
            if site.option("dynamic") is not None and not (dyn is None or dyn is False):
                continue  # dynamic=True (or not readable): nothing to mark
            if site.has_star_kwargs:
                continue
            for call in site.calls:
                calls.setdefault(call, site.binding or "the compiled callable")
        if not calls:
            return []
        loaders = self._loaders(model)
        if not loaders:
            return []
        findings: List[Finding] = []
        seen: Set[ast.stmt] = set()
        for loop in source.nodes(ast.For):
            loader = self._iterated_loader(model, loop.iter, loaders)  # type: ignore[attr-defined]
            if loader is None:
                continue
            targets = loop_names(loop)
            derived = loop_assignments(loop, targets)
            fn = function_of(source, loop)
            for call, name in calls.items():
                if not self._runs_in(source, call, loop, fn):
                    continue
                args = [a for a in list(call.args) + [k.value for k in call.keywords] if isinstance(a, ast.Name) and a.id in derived]
                if not args:
                    continue
                stmt = source.statement_of(call)
                if stmt is None or stmt in seen:
                    continue
                seen.add(stmt)
                found = self._finding(ctx, model, loop, loader, call, name, stmt, args)
                if found is not None:
                    findings.append(found)
        return findings

    # -- the finding ----------------------------------------------------------------
    def _finding(self, ctx, model, loop, loader: _Loader, call, name, stmt, args) -> Optional[Finding]:
        source = model.source
        proven = False
        size = int_value(model, loader.batch_size)
        if loader.length is not None and size:
            proven = loader.length % size != 0
        shown = ", ".join(f"`{a.id}`" for a in args)
        if proven:
            why = f"{loader.length} samples in batches of {size}: the last batch has {loader.length % size} rows"  # type: ignore[operator]
        else:
            why = "unless the dataset's length is a multiple of the batch size, the last batch is smaller"
        message = (
            f"`DataLoader` on line {loader.call.lineno} has no `drop_last=True` and feeds {shown} to compiled `{name}` ({why}): "
            "a new shape, a recompile"
        )
        batch = self._batch_tensors(loop, loader)
        tensors = [a for a in args if a.id in batch]
        fixable = (
            model.torch_alias is not None
            and loader.tensors
            and len(tensors) == len(args)
            and not isinstance(stmt, COMPOUND)
            and block_of(source, stmt) is not None
        )
        if fixable:
            have = existing_marks(source, stmt)
            todo = []
            for a in args:
                if (a.id, 0) not in have and a.id not in [t for t in todo]:
                    todo.append(a.id)
            if not todo:
                return None  # marked already
            marks = [mark_statement(model.torch_alias, arg, 0) for arg in todo]
            return self.finding(
                ctx,
                call,
                message + f"; mark the batch dim dynamic before the call (`torch._dynamo.maybe_mark_dynamic({todo[0]}, 0)`)",
                edits=[insert_before(source, stmt, marks)],
                safety=Safety.SAFE,
                title=f"insert torch._dynamo.maybe_mark_dynamic({todo[0]}, 0) before the call",
                proven=proven,
            )
        return self.finding(
            ctx,
            call,
            message + "; call `torch._dynamo.maybe_mark_dynamic(<batch tensor>, 0)` before it, or pass `drop_last=True` (drops samples) "
            "(no automatic fix: the batch is not visibly a tensor here)",
            proven=proven,
        )

    # -- loaders ------------------------------------------------------------------------
    def _loaders(self, model: CompileModel) -> Dict[ast.Call, _Loader]:
        out: Dict[ast.Call, _Loader] = {}
        for node in model.source.nodes(ast.Call):
            if not (model.qualified_names(node.func) & _LOADERS):  # type: ignore[attr-defined]
                continue
            call: ast.Call = node  # type: ignore[assignment]
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords) or len(call.args) > len(_POSITIONAL):
                continue
            given, batch_size = _argument(call, "batch_size")
            if not given or batch_size is None or (isinstance(batch_size, ast.Constant) and batch_size.value in (None, 1)):
                continue  # the default batch size is 1: every batch has one sample
            given, drop = _argument(call, "drop_last")
            if given and not (isinstance(drop, ast.Constant) and drop.value is False):
                continue  # drop_last=True, or a value not visible
            if _argument(call, "batch_sampler")[0]:
                continue
            dataset = _argument(call, "dataset")[1]
            tensors, first = self._tensor_dataset(model, dataset)
            if _argument(call, "collate_fn")[0]:
                tensors = False
            length = None
            if first is not None and not _argument(call, "sampler")[0]:
                length = self._first_dim(model, first)
            if length is not None and (int_value(model, batch_size) or 0) > 0 and length % int_value(model, batch_size) == 0:  # type: ignore[operator]
                continue  # every batch is full
            out[call] = _Loader(call, batch_size, tensors, length)
        return out

    def _tensor_dataset(self, model: CompileModel, expr: Optional[ast.AST]) -> Tuple[bool, Optional[ast.AST]]:
        """(is ``expr`` a TensorDataset, the first tensor given to it)."""
        if isinstance(expr, ast.Name):
            values = list(model.assigned_values(expr))
            if len(values) != 1:
                return False, None
            expr = values[0]
        if isinstance(expr, ast.Call) and model.qualified_names(expr.func) & _DATASETS:
            first = expr.args[0] if expr.args and not isinstance(expr.args[0], ast.Starred) else None
            return True, first
        return False, None

    def _first_dim(self, model: CompileModel, expr: ast.AST) -> Optional[int]:
        if isinstance(expr, ast.Name):
            values = list(model.assigned_values(expr))
            if len(values) != 1:
                return None
            expr = values[0]
        if not isinstance(expr, ast.Call) or not expr.args or any(k.arg is None for k in expr.keywords):
            return None
        names = model.qualified_names(expr.func)
        if not any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _SIZE_FACTORIES for q in names):
            return None
        if names & {"torch.arange"} and len(expr.args) == 1:
            return int_value(model, expr.args[0])
        if names & {"torch.randint", "torch.full", "torch.arange"}:
            return None  # sizes are not the first arguments
        first = expr.args[0]
        if isinstance(first, (ast.Tuple, ast.List)):
            first = first.elts[0] if first.elts else None
        return int_value(model, first) if first is not None and not isinstance(first, ast.Starred) else None

    def _iterated_loader(self, model: CompileModel, it: ast.AST, loaders: Dict[ast.Call, _Loader]) -> Optional[_Loader]:
        """The loader a loop's iterable runs over: the loader, a name bound to
        it, ``enumerate(loader)`` or a wrapper call taking it first (``tqdm(loader)``)."""
        for _ in range(3):
            if isinstance(it, ast.Call) and it in loaders:
                return loaders[it]
            if isinstance(it, ast.Name):
                values = list(model.assigned_values(it))
                bindings = model.scopes.bindings_of(it)
                if len(values) == 1 and len(bindings) == 1 and values[0] in loaders:
                    return loaders[values[0]]  # type: ignore[index]
                return None
            if isinstance(it, ast.Call) and it.args and not isinstance(it.args[0], ast.Starred) and dotted_name(it.func) is not None:
                it = it.args[0]
                continue
            return None
        return None

    @staticmethod
    def _runs_in(source, call: ast.Call, loop: ast.AST, fn) -> bool:
        """Does ``call`` run in the body of ``loop`` itself (not in a nested
        function, class or comprehension, not in its ``else``)?"""
        child: ast.AST = call
        for anc in source.ancestors(call):
            if anc is loop:
                return any(s is child for s in loop.body)  # type: ignore[attr-defined]
            if isinstance(anc, _SCOPES):
                return False
            child = anc
        return False

    @staticmethod
    def _batch_tensors(loop, loader: _Loader) -> Set[str]:
        """Names that are visibly tensors of the batch in ``loop``'s body: a
        name the loop target unpacks into (a TensorDataset batch is a list of
        tensors), or one every assignment in the body binds to such a tensor
        moved or cast (``x = x.to(device)``) or to ``batch[0]``."""
        if not loader.tensors:
            return set()
        target = loop.target
        enumerated = isinstance(loop.iter, ast.Call) and dotted_name(loop.iter.func) == "enumerate"
        if enumerated and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]  # `for step, (x, y) in enumerate(loader)`
        whole = {target.id} if isinstance(target, ast.Name) else set()
        tensors: Set[str] = set()
        stack = [target] if isinstance(target, (ast.Tuple, ast.List)) else []
        while stack:
            t = stack.pop()
            for e in t.elts:
                if isinstance(e, ast.Name):
                    tensors.add(e.id)
                elif isinstance(e, (ast.Tuple, ast.List)):
                    stack.append(e)
        # every binding in the body, by name: a tensor only when all of them keep it one
        bound: Dict[str, List[Optional[ast.AST]]] = {}
        for node in walk(loop):
            if node is loop.target or isinstance(node, _SCOPES):
                continue
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        bound.setdefault(t.id, []).append(node.value)
                    else:
                        for n in walk(t):
                            if isinstance(n, ast.Name):
                                bound.setdefault(n.id, []).append(None)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
                bound.setdefault(node.target.id, []).append(None)
            elif isinstance(node, (ast.For, ast.With, ast.comprehension)) and node is not loop:
                for n in walk(node.target if not isinstance(node, ast.With) else ast.Tuple(elts=[i.optional_vars for i in node.items if i.optional_vars is not None])):
                    if isinstance(n, ast.Name):
                        bound.setdefault(n.id, []).append(None)

        def keeps(value: Optional[ast.AST], known: Set[str]) -> bool:
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _KEEPS_TENSOR:
                value = value.func.value
            if isinstance(value, ast.Name):
                return value.id in known
            return (
                isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Name)
                and value.value.id in whole
                and isinstance(value.slice, ast.Constant)
                and type(value.slice.value) is int
            )

        known = set(tensors)
        changed = True
        while changed:
            changed = False
            for name, values in bound.items():
                if name not in known and all(keeps(v, known) for v in values):
                    known.add(name)
                    changed = True
        # a loop target rebound to something else is no longer known
        return {n for n in known if all(keeps(v, known) for v in bound.get(n, []))}
