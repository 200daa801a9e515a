"""FR017 tensor-keyed-state: a dict keyed by a tensor the compiled code is
given, looked up inside it (an optimizer's ``self.state[p]`` in a compiled
per-parameter update): torch resolves the key once while tracing, so one
counter in the entry costs a graph per parameter, and a call with another
tensor of a shape already compiled can reuse a graph that reads and writes
the first tensor's entry (Koratahiu/Advanced_Optimizers ``Prodigy_adv``,
PR #6 877bc8b, fixed in V2.0 5a1a7fa by passing the state in)."""

from __future__ import annotations

import ast
import functools
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .._lazy import cst
from ..analysis.compile_sites import def_first_lines
from ..analysis.params import passed_argument
from ..analysis.source import statement_target, walk
from ..cst_edits import add_keyword_argument, add_keyword_only_param, guard_statement, name_node
from ..findings import Edit, Finding, Safety
from ..trace.causes import KEYED_ENTRY, LENGTH, TRUTH, CuresCause
from .base import Example, Rule

#: attributes only a tensor has among the values a dict is keyed by
_TENSOR_ATTRS = frozenset(("grad", "data", "shape", "dtype", "device", "numel", "dim", "ndim", "size", "requires_grad"))
#: annotations that make a parameter a tensor
_TENSOR_TYPES = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"))


class TensorKeyedState(Rule):
    code = "FR017"
    #: the trace's guard on the entry reached by its key's place
    cures = (
        CuresCause(KEYED_ENTRY),
        # a defaultdict the lookup fills inside the compiled code (an entry per
        # new key): torch guards its length and truth, named as the dict looked up
        CuresCause(LENGTH, loop_iterator=False, about=True),
        CuresCause(TRUTH, about=True),
    )
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
params: step(p)`); otherwise only with `--unproven`. The fix passes the entry
in: the function takes `*, state=None` and looks the entry up only when none
is passed (`if state is None: state = self.state[p]`), and every call of it
in the module that passes the key as a name passes `state=self.state[p]`
(through the call's receiver), or, when the function returns early before
its lookup, `state=None if p.grad is None else self.state[p]`: the entry is
looked up exactly when the function would reach its lookup.
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
When the entry is made inside (an optimizer's state made lazily, `if
len(state) == 0:`), the lookup fills the `defaultdict` in the compiled code
and torch also guards its length and truth (`len(self.state) == 3`): a graph
per new entry; `run --fix` reads those guards as this rule's when they name
the dict it found (measured: 6 graphs -> 2 for 5 parameters).
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
Safe when nothing before the lookup has an effect (the statements before it
are early returns on tests of the parameters, `if p.grad is None: return`,
read through attributes, `is`, `not`, `and`, `or`; names bound to a
parameter's attributes or constant keys, `grad = p.grad`, `beta1, beta2 =
group['betas']`), the lookup is a statement of its own line, every call the
fix edits mirrors those returns' tests with the names it passes, and nothing
can put another callable where the callers now pass the entry: the function
is a module-level function or a name-mangled method (Prodigy_adv's
`__step_parameter`), called by its own name or through a name-mangled
attribute (`self.__compiled`).

Unsafe otherwise: the callers look the entry up before the function's first
statements run, so a statement with an effect now runs after the lookup, and
a return a call cannot mirror no longer skips it (an optimizer's
`self.state`, a `defaultdict`, gains an empty entry for a parameter it
skips; for any other dict such a call is left as it is); a subclass's
override of the method, or a callable a subclass stores in the attribute
called (`self._compiled_step_parameter`, Prodigy_adv's own form), is called
with the new keyword (a TypeError). A caller the fix does not reach (in
another module, through an alias, or passing the key as an expression)
passes nothing and looks the entry up inside, as before. An int counted up
in the entry (`state['step'] += 1`) stays inside: torch guards the int of
the dict passed in, one recompile more, then it is dynamic
(Advanced_Optimizers' case: 8 graphs and the limit -> 3; V2.0, which also
counts the step in the caller and passes the float `d` as a tensor: 1). Not
offered when the entry is not bound to a name by a statement of the
function's own body, a statement before it uses the dict or calls code that
may (a method of `self`, a function of the module that names the dict: it
may create or replace the entry), or no call passes the key as a name; a
call through a name or attribute the module also binds to another callable
(an uncompiled default, a parameter), or of a compiled method stored on
another object than its own (`runner.step = torch.compile(self._update)`),
is left as it is.
"""
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
        # a module-level dict: a call inside a function whose enclosing function rebinds the name is left alone
        # (it looks the entry up inside, as before); safe: nothing runs before the lookup, no subclass overrides it
        Example(
            "import torch\nbufs = {}\n@torch.compile\ndef step(p: torch.Tensor):\n    buf = bufs[p]\n    buf.mul_(0.9).add_(p.grad)\n"
            "def outer(params):\n    bufs = {p: torch.zeros_like(p) for p in params}\n    def inner():\n        for p in params:\n            step(p)\n    inner()\n"
            "def train(params):\n    for p in params:\n        step(p)\n",
            "import torch\nbufs = {}\n@torch.compile\ndef step(p: torch.Tensor, *, buf=None):\n    if buf is None:\n        buf = bufs[p]\n    buf.mul_(0.9).add_(p.grad)\n"
            "def outer(params):\n    bufs = {p: torch.zeros_like(p) for p in params}\n    def inner():\n        for p in params:\n            step(p)\n    inner()\n"
            "def train(params):\n    for p in params:\n        step(p, buf=bufs[p])\n",
        ),
        # black's layout (one parameter a line, a trailing comma): the new parameter follows it
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def _update(\n        self,\n        p: torch.Tensor,\n    ):\n"
            "        state = self.state[p]\n        state['buf'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self):\n        self._compiled = torch.compile(self._update)\n"
            "    def step(self):\n        for p in self.param_groups[0]['params']:\n            self._compiled(p)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def _update(\n        self,\n        p: torch.Tensor,\n        *,\n        state=None,\n    ):\n"
            "        if state is None:\n            state = self.state[p]\n        state['buf'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self):\n        self._compiled = torch.compile(self._update)\n"
            "    def step(self):\n        for p in self.param_groups[0]['params']:\n            self._compiled(p, state=self.state[p])\n",
            unsafe=True,
        ),
        # the compiled method stored on another object: a call's receiver is not the optimizer, no fix
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def _update(self, p: torch.Tensor):\n        state = self.state[p]\n        state['buf'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self, runner):\n        runner.step = torch.compile(self._update)\n"
            "    def step(self, runner):\n        for p in self.param_groups[0]['params']:\n            runner.step(p)\n"
        ),
        # a method called before the lookup may create or replace the entry (`self.state[p] = {...}` when
        # `p not in self.state`): the caller's lookup would make an empty entry first, no fix
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def _init_state(self, p):\n        if p not in self.state:\n"
            "            self.state[p] = {'exp_avg': torch.zeros_like(p)}\n"
            "    def _update(self, p: torch.Tensor, group):\n        self._init_state(p)\n        state = self.state[p]\n"
            "        state['exp_avg'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self):\n        self._compiled = torch.compile(self._update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled(p, group)\n"
        ),
        # the attribute called holds another function too (the uncompiled default): no fix, the call
        # would pass `state=` to `_plain_update` (a TypeError)
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __init__(self, params, compiled=False):\n        super().__init__(params, {})\n"
            "        self._step_fn = self._plain_update\n        if compiled:\n            self._step_fn = torch.compile(self._update)\n"
            "    def _plain_update(self, p, group):\n        p.add_(p.grad, alpha=-group['lr'])\n"
            "    def _update(self, p: torch.Tensor, group):\n        state = self.state[p]\n        state['buf'].mul_(0.9).add_(p.grad)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._step_fn(p, group)\n"
        ),
        # the compiled per-parameter update and its eager caller (Prodigy_adv's flow): the entry passed in
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group):\n        if p.grad is None:\n            return\n"
            "        state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n        state['step'] += 1\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled_update(p, group)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group, *, state=None):\n        if p.grad is None:\n            return\n"
            "        if state is None:\n            state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n        state['step'] += 1\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n"
            "                self._compiled_update(p, group, state=None if p.grad is None else self.state[p])\n",
            unsafe=True,  # a subclass may bind `self._compiled_update` to a function without `state=`
        ),
        # the early returns' tests read `self` and two parameters: each mirrored through the call's names; the compiled
        # method in a name-mangled attribute (no subclass binds another callable there): safe
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group):\n        \"\"\"One parameter.\"\"\"\n"
            "        if p.grad is None or not p.requires_grad:\n            return\n        if self.frozen is not None and group is self.frozen:\n            return\n"
            "        grad = p.grad\n        state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(grad)\n"
            "    def compile(self):\n        self.__compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for g in self.param_groups:\n            for q in g['params']:\n                self.__compiled_update(q, g)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group, *, state=None):\n        \"\"\"One parameter.\"\"\"\n"
            "        if p.grad is None or not p.requires_grad:\n            return\n        if self.frozen is not None and group is self.frozen:\n            return\n"
            "        grad = p.grad\n        if state is None:\n            state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(grad)\n"
            "    def compile(self):\n        self.__compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for g in self.param_groups:\n            for q in g['params']:\n"
            "                self.__compiled_update(q, g, state=None if (q.grad is None or not q.requires_grad) or (self.frozen is not None and g is self.frozen) else self.state[q])\n",
        ),
        # a call before the lookup (an effect the caller's lookup would now precede): unsafe, the lookup unconditional
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group):\n        if p.grad is None:\n            return\n"
            "        grad = p.grad.float()\n        state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(grad)\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled_update(p, group)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group, *, state=None):\n        if p.grad is None:\n            return\n"
            "        grad = p.grad.float()\n        if state is None:\n            state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(grad)\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled_update(p, group, state=self.state[p])\n",
            unsafe=True,
        ),
        # the key passed as an expression a test cannot be mirrored with: that call looks the entry up before
        # the early return (unsafe), the other mirrors it
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, flag):\n        if flag is None:\n            return\n"
            "        state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled_update(p, group.get('flag'))\n"
            "                self._compiled_update(p, group)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, flag, *, state=None):\n        if flag is None:\n            return\n"
            "        if state is None:\n            state = self.state[p]\n        state['exp_avg'].mul_(0.9).add_(p.grad)\n"
            "    def compile(self):\n        self._compiled_update = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self._compiled_update(p, group.get('flag'), state=self.state[p])\n"
            "                self._compiled_update(p, group, state=None if group is None else self.state[p])\n",
            unsafe=True,
        ),
        # the lookup shares its line with another statement: no fix (wrapping the line would skip the other)
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group):\n"
            "        state = self.state[p]; mom = group['momentum']\n        state['exp_avg'].mul_(mom).add_(p.grad)\n"
            "    def compile(self):\n        self.__compiled = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self.__compiled(p, group)\n"
        ),
        # reads of the group before the lookup (`beta1, beta2 = group['betas']`) have no effect: safe
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group):\n"
            "        beta1, beta2 = group['betas']\n        lr = group['lr']\n        state = self.state[p]\n"
            "        state['exp_avg'].mul_(beta1).add_(p.grad, alpha=lr * (1 - beta2))\n"
            "    def compile(self):\n        self.__compiled = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self.__compiled(p, group)\n",
            "import torch\nclass Opt(torch.optim.Optimizer):\n    def __update(self, p: torch.Tensor, group, *, state=None):\n"
            "        beta1, beta2 = group['betas']\n        lr = group['lr']\n        if state is None:\n            state = self.state[p]\n"
            "        state['exp_avg'].mul_(beta1).add_(p.grad, alpha=lr * (1 - beta2))\n"
            "    def compile(self):\n        self.__compiled = torch.compile(self.__update)\n"
            "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n                self.__compiled(p, group, state=self.state[p])\n",
        ),
        # a parameter that shadows the compiled function's name is not a call of it: left as it is
        Example(
            "import torch\nbufs = {}\n@torch.compile\ndef update(p: torch.Tensor, lr):\n    buf = bufs[p]\n    p.data.add_(buf, alpha=-lr)\n"
            "def apply_updates(params, lr, update=update):\n    for p in params:\n        update(p, lr)\n"
            "def train(params, lr):\n    for p in params:\n        update(p, lr)\n",
            "import torch\nbufs = {}\n@torch.compile\ndef update(p: torch.Tensor, lr, *, buf=None):\n    if buf is None:\n        buf = bufs[p]\n    p.data.add_(buf, alpha=-lr)\n"
            "def apply_updates(params, lr, update=update):\n    for p in params:\n        update(p, lr)\n"
            "def train(params, lr):\n    for p in params:\n        update(p, lr, buf=bufs[p])\n",
        ),
        # a module-level function, a module dict, an early return: the test mirrored, safe (no subclass can override it)
        Example(
            "import torch\nbufs = {}\n@torch.compile\ndef step(p: torch.Tensor):\n    if p.grad is None:\n        return\n    buf = bufs[p]\n    buf.mul_(0.9).add_(p.grad)\n"
            "def train(params):\n    for p in params:\n        step(p)\n",
            "import torch\nbufs = {}\n@torch.compile\ndef step(p: torch.Tensor, *, buf=None):\n    if p.grad is None:\n        return\n    if buf is None:\n        buf = bufs[p]\n    buf.mul_(0.9).add_(p.grad)\n"
            "def train(params):\n    for p in params:\n        step(p, buf=None if p.grad is None else bufs[p])\n",
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
            if self._fallback(ctx, node, params):
                continue  # this rule's fix: the callers pass the entry in
            holder = node.value
            optimizer_state = (
                isinstance(holder, ast.Attribute) and holder.attr == "state" and isinstance(holder.value, ast.Name) and holder.value.id == "self"
                and cls is not None and ctx.model.is_optimizer_class(cls)
            )
            if not optimizer_state and not self._outer_dict(ctx, fn, holder):
                continue
            proven = optimizer_state or self._loop_keys(ctx, site, fn, node.slice.id, cls is not None)  # type: ignore[attr-defined]
            out.append(self._finding(ctx, site, fn, node, proven, self._entry_passed_in(ctx, fn, node, cls, optimizer_state)))
        return out

    @staticmethod
    def _fallback(ctx, lookup: ast.Subscript, params) -> bool:
        """Is the lookup ``if state is None: state = <d>[p]``, ``state`` a
        parameter (the form this rule's fix writes: the callers pass it)?"""
        stmt = ctx.source.parent(lookup)
        guard = ctx.source.parent(stmt)
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and isinstance(guard, ast.If)):
            return False
        test, name = guard.test, stmt.targets[0].id
        return (
            name in params and stmt in guard.body and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
        )

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

    def _finding(self, ctx, site, fn, node: ast.Subscript, proven: bool, fix: "Tuple[List[Edit], str]") -> Finding:
        key = node.slice.id  # type: ignore[attr-defined]
        shown = ctx.source.segment(node)
        counter = self._counter(ctx, fn, node)
        also = f"; `{counter}` counts an int of the entry up inside, guarded per key: a graph for every `{key}` it is called with, until the recompile limit" if counter else ""
        message = (
            f"`{shown}` looks a dict up by the tensor `{key}` inside the compiled `{fn.name}` (compiled on line {site.node.lineno}): "
            "torch resolves the key while tracing and guards the entry by its place among the keys, not by the tensor passed, "
            f"so a call with another tensor of a shape already compiled can read and write the first one's entry (silently wrong values){also}; "
        )
        edits, why = fix
        held = ctx.source.segment(node.value)  # the dict, as the trace names its length or truth (`self.state`)
        # the trace matches it by the compiled function's first lines
        if not edits:
            return self.finding(ctx, node, message + f"look the entry up in the eager caller and pass it in (no automatic fix: {why})", proven=proven, feeds=def_first_lines(fn), about=(held,))
        name = ctx.source.parent(node).targets[0].id  # type: ignore[union-attr]
        kept = f" (`{counter}` stays inside: torch guards the int of the entry passed in, one recompile more, then it is dynamic)" if counter else ""
        return self.finding(
            ctx,
            node,
            message + f"pass the entry in: the callers look it up (`{name}=...`), the function takes `{name}=None`{kept}" + (f" (unsafe: {why})" if why else ""),
            edits=edits,
            safety=Safety.UNSAFE if why else Safety.SAFE,
            title=f"pass `{name}` in, looked up by the callers",
            proven=proven,
            feeds=def_first_lines(fn),
            about=(held,),
        )

    def _entry_passed_in(self, ctx, fn, lookup: ast.Subscript, cls: Optional[ast.ClassDef], optimizer_state: bool) -> "Tuple[List[Edit], str]":
        """The fix (Advanced_Optimizers V2.0's cure, the counter left in place):
        ``state = self.state[p]`` of the compiled function's own body becomes
        ``if state is None: state = self.state[p]``, the function takes
        ``*, state=None``, and every call of it (compiled or eager) that
        passes ``p`` as a name passes ``state=<holder>[p]`` too, the holder
        as the caller sees it (``self.state`` through the call's receiver).
        A call the fix does not reach still looks the entry up inside, as
        before.  (edits, why unsafe), or ([], why there is none)."""
        source = ctx.source
        stmt = source.parent(lookup)
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.value is lookup and stmt in fn.body):
            return [], "the entry is not bound to a name by a statement of the function's own body"
        if not _alone(source, stmt):
            return [], "the lookup shares its line with another statement"
        name, key, holder = stmt.targets[0].id, lookup.slice.id, lookup.value  # type: ignore[attr-defined]
        args = fn.args
        if name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} or args.vararg or args.kwarg:
            return [], "the function already takes that name, or takes *args or **kwargs"
        if sum(1 for n in walk(fn) if isinstance(n, ast.Name) and n.id in (name, key) and not isinstance(n.ctx, ast.Load)) != 1:
            return [], f"`{name}` or `{key}` is bound more than once in the function"
        if isinstance(holder, ast.Attribute):
            holder_name = holder.attr
        elif isinstance(holder, ast.Name):
            holder_name = holder.id
        else:
            return [], "the dict is not a name or an attribute of `self`"
        before = fn.body[: fn.body.index(stmt)]
        if any((isinstance(n, ast.Name) and n.id in (name, holder_name)) or (isinstance(n, ast.Attribute) and n.attr == holder_name) for s in before for n in walk(s)):
            return [], "a statement before the lookup uses the dict"
        if any(self._may_touch_dict(ctx, n, holder) for s in before for n in walk(s) if isinstance(n, ast.Call)):
            return [], "a call before the lookup may create or replace the entry (the caller's lookup would run first)"
        bound_self = cls is not None
        skips = _skips(fn, before)
        exits = any(isinstance(n, (ast.Return, ast.Raise)) for s in before for n in walk(s))
        if exits and skips is None and not optimizer_state:
            return [], "a statement before the lookup may return first, and the caller's lookup could fail where the function returned"
        calls = self._calls(ctx, fn, cls)
        edits: List[Edit] = []
        unskipped = 0  # calls that look the entry up where the function may have returned first
        rebindable: List[str] = []  # attributes called that a subclass may bind to another callable
        for call in calls:
            entry = self._entry_in_caller(ctx, fn, call, holder, key, bound_self)
            if entry is None:
                continue
            skip = _skip_in_caller(fn, call, skips, bound_self) if exits and skips else None
            if exits and skip is None:
                if not optimizer_state:
                    continue  # this call passes nothing and looks the entry up inside, as before
                unskipped += 1
            edits.append(Edit(source.target(call, "Call"), functools.partial(add_keyword_argument, name, functools.partial(_entry_expr, *entry, skip))))
            if _rebindable(fn, call):
                rebindable.append(source.segment(call.func))
        if not edits:
            return [], f"no call of `{fn.name}` in this module passes `{key}` as a name the fix can look the entry up with"
        edits.append(Edit(statement_target(source, fn), functools.partial(add_keyword_only_param, name, functools.partial(name_node, "None"))))
        edits.append(Edit(statement_target(source, stmt), functools.partial(_if_none, name)))
        why = ""
        if skips is None:
            why = "the callers look the entry up before the function's first statements run"
            if exits:
                why += f" (an early return no longer skips the lookup: the optimizer's `self.state` gains an empty entry for a `{key}` it skips)"
        elif unskipped:
            why = f"a caller looks the entry up where the function returns first (the optimizer's `self.state` gains an empty entry for a `{key}` it skips)"
        elif cls is not None and not _private_method(fn):
            why = f"a subclass that overrides `{fn.name}` without `{name}=` gets it from the callers (a TypeError)"
        elif rebindable:
            why = f"a subclass may store another callable in `{rebindable[0]}`, which the callers now pass `{name}=` (a TypeError)"
        if not why:
            return edits, ""
        return edits, why + "; a caller in another module passes none and still looks it up inside"

    @staticmethod
    def _may_touch_dict(ctx, call: ast.Call, holder: ast.AST) -> bool:
        """May ``call``, run before the lookup, create or replace the entry
        (``self._init_state(p)`` that writes ``self.state[p] = {...}``)?  For
        ``self.<attr>``: a call through ``self`` or given ``self``; for a
        name: a call of a function of this module that mentions the name."""
        if isinstance(holder, ast.Attribute):
            func = call.func
            while isinstance(func, (ast.Attribute, ast.Subscript, ast.Call)):
                func = func.func if isinstance(func, ast.Call) else func.value
            given = [*call.args, *(kw.value for kw in call.keywords)]
            return (isinstance(func, ast.Name) and func.id == "self") or any(isinstance(a, ast.Name) and a.id == "self" for a in given)
        name = holder.id  # type: ignore[attr-defined]
        callee = call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else None
        return any(
            isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == callee and any(isinstance(n, ast.Name) and n.id == name for n in walk(d))
            for d in walk(ctx.source.tree)
        )

    @staticmethod
    def _calls(ctx, fn, cls: Optional[ast.ClassDef]) -> List[ast.Call]:
        """Every call of ``fn`` this module shows: of the compiled callables
        made from it, and of the function itself (``self.<name>(...)`` in its
        class, ``<name>(...)`` for a module-level function)."""
        found = {}
        for site in ctx.model.compile_sites:
            if site.target_def is fn and (cls is None or site.form == "decorator" or TensorKeyedState._stored_on_its_object(site)):
                found.update((id(c), c) for c in site.calls if TensorKeyedState._holds_only_fn(ctx, fn, c))
        scope = cls if cls is not None else ctx.source.tree
        for node in walk(scope):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if cls is not None and isinstance(func, ast.Attribute) and func.attr == fn.name and isinstance(func.value, ast.Name) and func.value.id == "self":
                found[id(node)] = node
            elif (
                cls is None and isinstance(func, ast.Name) and func.id == fn.name and ctx.source.parent(fn) is ctx.source.tree
                and TensorKeyedState._holds_only_fn(ctx, fn, node)
            ):
                found[id(node)] = node  # the name is the function (not a parameter or local that shadows it)
        return sorted(found.values(), key=lambda c: (c.lineno, c.col_offset))

    @staticmethod
    def _holds_only_fn(ctx, fn, call: ast.Call) -> bool:
        """Does the name or attribute ``call`` calls hold ``fn`` compiled (or
        None, or ``fn`` itself) wherever the module binds it?  Bound elsewhere
        to another callable (``self._step_fn = self._plain_update``, then
        ``= torch.compile(self._update)`` when asked; a parameter ``fn`` of a
        helper given either), the call may run a function without the new
        keyword: a TypeError."""
        compiled = {id(s.node) for s in ctx.model.compile_sites if s.target_def is fn}

        def holds(value: Optional[ast.AST]) -> bool:
            if isinstance(value, ast.IfExp):
                return holds(value.body) and holds(value.orelse)
            return value is not None and (id(value) in compiled or (isinstance(value, ast.Constant) and value.value is None))

        func = call.func
        if isinstance(func, ast.Name):
            bindings = ctx.model.bindings(func)
            return bool(bindings) and all((b.kind == "def" and b.node is fn) or (b.kind in ("assign", "annassign") and holds(b.value)) for b in bindings)
        if not isinstance(func, ast.Attribute):
            return False
        for node in walk(ctx.source.tree):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                for t in walk(target):
                    if isinstance(t, ast.Attribute) and t.attr == func.attr and isinstance(t.ctx, ast.Store) and (t is not target or not holds(value)):
                        return False
        return True

    @staticmethod
    def _stored_on_its_object(site) -> bool:
        """Is a compiled bound method stored on the object it is bound to
        (``self._compiled = torch.compile(self._update)``)?  Then a call's
        receiver is the method's ``self``; stored elsewhere
        (``runner.step = torch.compile(opt._update)``), it is not."""
        target = site.target
        return (
            isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and site.binding is not None and site.binding.split(".")[0] == target.value.id and "." in site.binding
        )

    @staticmethod
    def _entry_in_caller(ctx, fn, call: ast.Call, holder: ast.AST, key: str, bound_self: bool) -> Optional[Tuple[Optional[str], str, str]]:
        """``<holder>[<key passed>]`` as the caller writes it, as (receiver or
        None, the dict's attribute or name, the key's name), or None: the key
        passed must be a name, the call's receiver a name (``self.state`` is
        read through it), and a module-level dict not rebound in the caller."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
            return None
        value = passed_argument(call, fn, key, bound_self)
        if not isinstance(value, ast.Name):
            return None
        if isinstance(holder, ast.Attribute):
            receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
            if not isinstance(receiver, ast.Name):
                return None
            return receiver.id, holder.attr, value.id
        else:
            # the module's dict, unless the caller (or a function around it) binds the name
            scope = ctx.source.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            while scope is not None:
                if any(
                    (isinstance(n, ast.Name) and n.id == holder.id and not isinstance(n.ctx, ast.Load)) or (isinstance(n, ast.arg) and n.arg == holder.id)  # type: ignore[attr-defined]
                    for n in walk(scope)
                ):
                    return None
                scope = ctx.source.enclosing(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        return None, holder.id, value.id  # type: ignore[attr-defined]

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


def _skips(fn, before: List[ast.stmt]) -> Optional[List[ast.expr]]:
    """The tests of the early returns before the lookup (``if p.grad is None:
    return``), when every statement before it is pure: such a return, a name
    bound to a name, attribute or constant (``grad = p.grad``), a docstring,
    ``pass``; the tests read only the function's parameters through
    attributes, ``is``/``is not``, ``not``, ``and``/``or``.  Then a caller can
    look the entry up exactly when the function would reach the lookup (the
    tests, evaluated in the caller) with no effect moved before another.
    None: some statement is not such."""
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    tests: List[ast.expr] = []
    for stmt in before:
        if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return):
            value = stmt.body[0].value
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                return None
            if not _pure_test(stmt.test, params):
                return None
            tests.append(stmt.test)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Name, ast.Tuple)):
            target = stmt.targets[0]
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            if not all(isinstance(n, ast.Name) and n.id not in params for n in names) or not _pure_value(stmt.value):
                return None
        elif isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
            continue
        else:
            return None
    return tests


def _pure_value(node: ast.AST) -> bool:
    """A name read through attributes and constant keys (``p.grad``,
    ``group["betas"]``), or a constant: nothing called."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


def _pure_test(node: ast.AST, params: Set[str]) -> bool:
    """A test an early return may be mirrored with in a caller: parameters
    read through attributes, ``None``/``True``/``False``, ``is``/``is not``,
    ``not``, ``and``/``or``."""
    if isinstance(node, ast.BoolOp):
        return all(_pure_test(v, params) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Not) and _pure_test(node.operand, params)
    if isinstance(node, ast.Compare):
        return all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) and all(_pure_test(n, params) for n in [node.left, *node.comparators])
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is True or node.value is False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in params


def _skip_in_caller(fn, call: ast.Call, tests: List[ast.expr], bound_self: bool):
    """A maker of the caller's ``<t1> or <t2>`` for the early returns'
    ``tests``, each parameter read as the name ``call`` passes for it (the
    receiver for ``self``), or None: some parameter is not passed as a name."""
    names: Dict[str, str] = {}
    first = [*fn.args.posonlyargs, *fn.args.args][:1]
    for test in tests:
        for node in walk(test):
            if not isinstance(node, ast.Name) or node.id in names:
                continue
            if bound_self and first and node.id == first[0].arg:
                receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
                value: Optional[ast.AST] = receiver
            else:
                value = passed_argument(call, fn, node.id, bound_self)
            if not isinstance(value, ast.Name):
                return None
            names[node.id] = value.id
    return functools.partial(_or_of, tests, names)


def _rebindable(fn, call: ast.Call) -> bool:
    """Does ``call`` call through an attribute other than the function's own
    name-mangled one that a subclass could bind to another callable
    (``self._compiled_update``, not ``self.__update`` or ``self.__compiled``)?"""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    return not (func.attr == fn.name and _private_method(fn)) and not (func.attr.startswith("__") and not func.attr.endswith("__"))


def _alone(source, stmt: ast.stmt) -> bool:
    """Is ``stmt`` the only statement on its lines (no ``a = b; c = d``)?"""
    parent = source.parent(stmt)
    block = next((b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and stmt in b), [])
    return all(s is stmt or s.end_lineno < stmt.lineno or s.lineno > stmt.end_lineno for s in block)  # type: ignore[operator]


def _private_method(fn) -> bool:
    """A name-mangled method (``__update``): no subclass overrides it."""
    return fn.name.startswith("__") and not fn.name.endswith("__")


def _test_cst(node: ast.AST, names: Dict[str, str]) -> "cst.BaseExpression":
    """The CST of a test :func:`_pure_test` accepts, each parameter renamed
    by ``names``; a nested ``and``/``or`` in parentheses."""

    def inner(n: ast.AST) -> "cst.BaseExpression":
        out = _test_cst(n, names)
        if isinstance(n, ast.BoolOp):
            out = out.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return out

    if isinstance(node, ast.BoolOp):
        op = cst.And() if isinstance(node.op, ast.And) else cst.Or()
        out = inner(node.values[0])
        for value in node.values[1:]:
            out = cst.BooleanOperation(left=out, operator=op, right=inner(value))
        return out
    if isinstance(node, ast.UnaryOp):
        return cst.UnaryOperation(operator=cst.Not(), expression=inner(node.operand))
    if isinstance(node, ast.Compare):
        ops = [cst.Is() if isinstance(op, ast.Is) else cst.IsNot() for op in node.ops]
        return cst.Comparison(left=inner(node.left), comparisons=[cst.ComparisonTarget(operator=op, comparator=inner(c)) for op, c in zip(ops, node.comparators)])
    if isinstance(node, ast.Constant):
        return cst.Name(repr(node.value))
    if isinstance(node, ast.Attribute):
        return cst.Attribute(value=_test_cst(node.value, names), attr=cst.Name(node.attr))
    return cst.Name(names[node.id])  # type: ignore[attr-defined]


def _or_of(tests: List[ast.expr], names: Dict[str, str]) -> "cst.BaseExpression":
    """``<t1> or <t2> ...`` (one test: itself)."""
    parts = [_test_cst(t, names) for t in tests]
    parts = [p.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if isinstance(t, ast.BoolOp) and len(tests) > 1 else p for p, t in zip(parts, tests)]
    out = parts[0]
    for part in parts[1:]:
        out = cst.BooleanOperation(left=out, operator=cst.Or(), right=part)
    return out


def _entry_expr(receiver: Optional[str], holder: str, key: str, skip=None) -> "cst.BaseExpression":
    """``<receiver>.<holder>[<key>]`` (``<holder>[<key>]`` without a
    receiver); ``None if <skip> else ...`` when the function may return
    before its lookup (``skip()`` makes the test)."""
    base = cst.Name(holder) if receiver is None else cst.Attribute(value=cst.Name(receiver), attr=cst.Name(holder))
    entry = cst.Subscript(value=base, slice=[cst.SubscriptElement(cst.Index(cst.Name(key)))])
    if skip is None:
        return entry
    return cst.IfExp(test=skip(), body=cst.Name("None"), orelse=entry)


def _if_none(name: str, node: "cst.SimpleStatementLine") -> "cst.If":
    """``state = self.state[p]`` -> ``if state is None: state = self.state[p]``."""
    test = cst.Comparison(left=cst.Name(name), comparisons=[cst.ComparisonTarget(operator=cst.Is(), comparator=cst.Name("None"))])
    return guard_statement(test, node)
