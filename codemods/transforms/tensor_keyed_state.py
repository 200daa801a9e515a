"""FR017 tensor-keyed-state: a dict keyed by a tensor the compiled code is
given, looked up inside it (an optimizer's ``self.state[p]`` in a compiled
per-parameter update): torch resolves the key once while tracing, so one
counter in the entry costs a graph per parameter, and a call with another
tensor of a shape already compiled can reuse a graph that reads and writes
the first tensor's entry (Koratahiu/Advanced_Optimizers ``Prodigy_adv``,
PR #6 877bc8b, fixed in V2.0 5a1a7fa by passing the state in)."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Set

from ..analysis.compile_sites import def_first_lines
from ..analysis.params import passed_argument
from ..analysis.source import walk
from ..findings import Finding
from ..trace.causes import KEYED_ENTRY, CuresCause
from .base import Example, Rule

#: attributes only a tensor has among the values a dict is keyed by
_TENSOR_ATTRS = frozenset(("grad", "data", "shape", "dtype", "device", "numel", "dim", "ndim", "size", "requires_grad"))
#: annotations that make a parameter a tensor
_TENSOR_TYPES = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"))


class TensorKeyedState(Rule):
    code = "FR017"
    #: the trace's guard on the entry reached by its key's place (report only)
    cures = (CuresCause(KEYED_ENTRY),)
    name = "tensor-keyed-state"
    summary = "a dict keyed by a tensor argument looked up inside compiled code"
    what_it_does = """
Finds, inside a compiled function or method, a lookup of a dict by one of
its tensor parameters: `state = self.state[p]` in a compiled per-parameter
optimizer update, `cache[x]` with `x` a tensor argument. The key is a tensor
when the parameter is annotated `torch.Tensor` or `nn.Parameter`, or the
function reads a tensor attribute of it (`p.grad`, `p.data`, `p.shape`).
Reported by default for an optimizer's own `self.state` (a method of a
`torch.optim.Optimizer` subclass: the state holds an entry per parameter,
so the compiled code is called with several keys) and for any dict when a
call of the compiled code passes a loop's variable as the key (`for p in
params: step(p)`); otherwise only with `--unproven`. Report only.
"""
    why_it_recompiles = """
dynamo resolves `self.state[p]` while tracing to the entry of the tensor it
was given, and guards the entry by its place among the dict's keys
(`self.state[list(dict.keys(self.state))[1]]['step'] == 0`). An int in the
entry (`state['step'] += 1`) is guarded per key: every parameter is a new
graph, until the recompile limit (a `FailOnRecompileLimitHit` under
`fullgraph=True`). Worse, the guards do not check that the tensor passed is
that key: a later call with another tensor of a shape already compiled
reuses the graph and reads and writes the first tensor's entry. Measured
(CPU, counting backend and inductor): a compiled `f(p)` returning
`state[p]["buf"]` for three tensors gives the first one's buffer three times
on torch 2.9.1, 2.13.0 and 2.14.1; Advanced_Optimizers' `Prodigy_adv` with
the lookup and the counter inside the compiled update: 8 graphs and the
limit over 3 steps of 8 parameters of one shape (the entry passed in: 1).
"""
    example = """
    class Prodigy_adv(torch.optim.Optimizer):
        def __step_parameter(self, p, group):
            state = self.state[p]            # the key resolved while tracing
            ...
            state['step'] += 1               # an int guarded per key

        def compile(self, *args, **kwargs):
            self._compiled_step_parameter = torch.compile(self.__step_parameter, *args, **kwargs)

Cured by hand (Advanced_Optimizers V2.0): look the entry up in the eager
caller, pass it in, and count the step there:

        def step_parameter(self, p, group):
            state = self.state[p]
            self._compiled_step_parameter(p, p.grad, state, group)
            state['step'] += 1
"""
    fix_safety = """
No automatic fix: the lookup moves to every caller of the compiled code, the
compiled function gains a parameter, and what else of the entry the caller
must prepare (an int read inside, values derived from the step) is the
user's to check.
"""
    report_only = True
    reads = "ast"
    triggers = (b"[",)
    valid = (
        # the entry passed in (Advanced_Optimizers V2.0)
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def _update(self, p: torch.Tensor, state: dict):\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n"
        "    def compile(self):\n        self._compiled = torch.compile(self._update)\n"
        "    def step(self):\n        for g in self.param_groups:\n            for p in g['params']:\n                self._compiled(p, self.state[p])\n",
        # keyed by a string argument, not a tensor
        "import torch\nbuffers = {}\n@torch.compile\ndef f(x, name: str):\n    return x + buffers[name]\n",
        # the lookup runs eagerly
        "import torch\n@torch.compile\ndef upd(p, buf):\n    return buf.mul_(0.9).add_(p.grad)\nclass Opt(torch.optim.Optimizer):\n"
        "    def step(self):\n        for g in self.param_groups:\n            for p in g['params']:\n                upd(p, self.state[p]['buf'])\n",
    )
    invalid = (
        # Advanced_Optimizers Prodigy_adv, PR #6
        Example(
            "import torch\nclass Prodigy_adv(torch.optim.Optimizer):\n    def __step_parameter(self, p: torch.Tensor, group: dict):\n"
            "        state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n        state['step'] += 1\n"
            "    def compile(self, *args, **kwargs):\n        self._compiled_step_parameter = torch.compile(self.__step_parameter, *args, **kwargs)\n"
        ),
        # a decorated per-parameter update of an Optimizer subclass
        Example(
            "import torch\nclass Lion(torch.optim.Optimizer):\n    @torch.compile\n    def _update(self, p, lr):\n"
            "        buf = self.state[p]['exp_avg']\n        p.data.add_(buf.sign(), alpha=-lr)\n"
        ),
        # a module-level dict keyed by a tensor argument: no proof it holds several keys
        Example("import torch\ncache = {}\n@torch.compile\ndef f(x: torch.Tensor):\n    return cache[x] * 2\n", unproven=True),
        # a module-level dict, the compiled function called with each tensor of a loop
        Example(
            "import torch\nbufs = {}\n@torch.compile\ndef step(p: torch.Tensor):\n    bufs[p].mul_(0.9).add_(p.grad)\n"
            "def train(params):\n    for p in params:\n        step(p)\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        findings: List[Finding] = []
        done: Set[int] = set()
        for site in model.compile_sites:
            fn = site.target_def
            if fn is None or id(fn) in done or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            done.add(id(fn))
            findings.extend(self._lookups(ctx, site, fn))
        return sorted(findings, key=lambda f: (f.line, f.column))

    def _lookups(self, ctx, site, fn) -> List[Finding]:
        args = fn.args
        params = {a.arg: a for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        cls = ctx.source.enclosing(fn, ast.ClassDef)
        if cls is not None and [*args.posonlyargs, *args.args][:1]:
            params.pop([*args.posonlyargs, *args.args][0].arg, None)  # self
        # one walk: the lookups keyed by a parameter, and the tensor
        # attributes read of a name (only those keys are judged tensors)
        keyed: List[ast.Subscript] = []
        tensor_reads: Set[str] = set()
        for node in walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Name) and node.slice.id in params:
                keyed.append(node)
            elif isinstance(node, ast.Attribute) and node.attr in _TENSOR_ATTRS and isinstance(node.value, ast.Name):
                tensor_reads.add(node.value.id)
        if not keyed:
            return []
        tensors = {name for name in {n.slice.id for n in keyed} if name in tensor_reads or self._annotated_tensor(ctx, params[name])}  # type: ignore[attr-defined]
        out: List[Finding] = []
        for node in keyed:
            if node.slice.id not in tensors:  # type: ignore[attr-defined]
                continue
            if ctx.source.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) is not fn:
                continue  # a nested function's own parameter may shadow it
            holder = node.value
            optimizer_state = (
                isinstance(holder, ast.Attribute) and holder.attr == "state" and isinstance(holder.value, ast.Name) and holder.value.id == "self"
                and cls is not None and ctx.model.is_optimizer_class(cls)
            )
            if not optimizer_state and not self._outer_dict(ctx, fn, holder):
                continue
            proven = optimizer_state or self._loop_keys(ctx, site, fn, node.slice.id, cls is not None)  # type: ignore[attr-defined]
            out.append(self._finding(ctx, site, fn, node, proven))
        return out

    @staticmethod
    def _annotated_tensor(ctx, param: ast.arg) -> bool:
        """Is ``param`` annotated ``torch.Tensor`` or ``nn.Parameter``?  (A
        parameter read through a tensor attribute, ``p.grad``, is a tensor too.)"""
        return param.annotation is not None and bool(ctx.model.qualified_names(param.annotation) & _TENSOR_TYPES)

    @staticmethod
    def _loop_keys(ctx, site, fn, param: str, bound_self: bool) -> bool:
        """Does a call of the compiled callable pass, for ``param``, the
        variable of a loop (``for p in params: step(p)``): several keys, the
        evidence a default finding needs?"""
        for call in site.calls:
            value = passed_argument(call, fn, param, bound_self)
            if isinstance(value, ast.Name) and any(b.kind in ("for", "comprehension") for b in ctx.model.bindings(value)):
                return True
        return False

    @staticmethod
    def _outer_dict(ctx, fn, holder: ast.AST) -> bool:
        """Is ``holder`` a name bound outside ``fn`` (a module-level or
        enclosing dict), or ``self.<attr>``?"""
        if isinstance(holder, ast.Attribute):
            return isinstance(holder.value, ast.Name) and holder.value.id == "self"
        if not isinstance(holder, ast.Name):
            return False
        bindings = ctx.model.bindings(holder)
        return bool(bindings) and all(ctx.source.enclosing(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not fn and b.node is not fn for b in bindings)

    def _finding(self, ctx, site, fn, node: ast.Subscript, proven: bool) -> Finding:
        key = node.slice.id  # type: ignore[attr-defined]
        shown = ctx.source.segment(node)
        counter = self._counter(ctx, fn, node)
        also = f"; `{counter}` counts an int of the entry up inside, guarded per key: a graph for every `{key}` it is called with, until the recompile limit" if counter else ""
        message = (
            f"`{shown}` looks a dict up by the tensor `{key}` inside the compiled `{fn.name}` (compiled on line {site.node.lineno}): "
            "torch resolves the key while tracing and guards the entry by its place among the keys, not by the tensor passed, "
            f"so a call with another tensor of a shape already compiled can read and write the first one's entry (silently wrong values){also}; "
            "look the entry up in the eager caller and pass it in (no automatic fix)"
        )
        # the trace matches it by the compiled function's first lines
        return self.finding(ctx, node, message, proven=proven, feeds=def_first_lines(fn))

    @staticmethod
    def _counter(ctx, fn, lookup: ast.Subscript) -> Optional[str]:
        """``state['step'] += 1`` of the entry ``state = <lookup>`` binds, as written."""
        parent = ctx.source.parent(lookup)
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
            return None
        name = parent.targets[0].id
        for node in walk(fn):
            if (
                isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Subscript)
                and isinstance(node.target.value, ast.Name) and node.target.value.id == name
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int
            ):
                return ctx.source.segment(node).strip()
        return None
