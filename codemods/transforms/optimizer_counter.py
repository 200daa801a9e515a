"""FR022 optimizer-int-counter: an optimizer whose compiled ``step`` counts a
Python int up in its param groups (``group['step'] += 1``) or in each
parameter's state (``state['step'] += 1``): torch guards the value it read,
the step writes the next one, so the next step recompiles (timm before
29993ffc, PR #2704: LAMB and nine other optimizers kept the step a Python
int; timm compiles ``optimizer.step``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

from ..analysis.modules import class_chain, self_attr
from ..findings import Finding
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def compiled_optimizer_step(model, site) -> Optional[Tuple[ast.ClassDef, ast.AST]]:
    """(optimizer class, its ``step`` def) when ``site`` compiles the
    ``step`` of a ``torch.optim.Optimizer`` subclass of this module: the
    decorator on the method, or ``torch.compile(opt.step)`` of a name bound
    once to an instance (``opt = Lamb(...)``)."""
    fn = site.target_def
    if isinstance(fn, _DEFS):
        cls = model.source.enclosing(fn, ast.ClassDef)
        if fn.name == "step" and isinstance(cls, ast.ClassDef) and model.is_optimizer_class(cls):
            return cls, fn
        return None
    target = site.target
    if site.form != "wrap" or not isinstance(target, ast.Attribute) or target.attr != "step" or not isinstance(target.value, ast.Name):
        return None
    cls = model.instance_class(target.value)
    if cls is None or not model.is_optimizer_class(cls):
        return None
    for c in class_chain(model, cls):
        step = model.method(c, "step")
        if step is not None:
            return cls, step
    return None


def _entry(node: ast.AST, group: str) -> Optional[str]:
    """``k`` for ``<group>['k']``."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == group
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _counted_up(value: ast.AST, group: str, key: str) -> bool:
    """``group.get(key, 0) + 1`` or ``group[key] + 1``."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) and _is_int(value.right)):
        return False
    left = value.left
    if _entry(left, group) == key:
        return True
    return (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Attribute)
        and left.func.attr == "get"
        and isinstance(left.func.value, ast.Name)
        and left.func.value.id == group
        and len(left.args) == 2
        and isinstance(left.args[0], ast.Constant)
        and left.args[0].value == key
        and _is_int(left.args[1])
    )


@dataclass(frozen=True)
class Counter:
    """An int the compiled step counts up: the statement, the dict it is kept
    in (``group``, ``state``), its key, and whether that dict is a param
    group (else a parameter's state, ``state = self.state[p]``)."""

    node: ast.AST
    holder: str
    key: str
    group: bool


def _int_counts(scope: ast.AST, holder: str) -> List[Tuple[ast.AST, str]]:
    """(the count-up statement, the key) of every entry of the dict named
    ``holder`` that ``scope`` counts up (``holder['k'] += 1``, ``holder['k'] =
    holder.get('k', 0) + 1``), where every write of that entry in ``scope`` is
    an int (a literal, or the entry plus a literal): a tensor written there
    (``torch.tensor(0.)``, timm's fix) makes it no such int."""
    counts: List[Tuple[ast.AST, str]] = []
    other = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.AugAssign):
            key = _entry(node.target, holder)
            if key is not None:
                if isinstance(node.op, ast.Add) and _is_int(node.value):
                    counts.append((node, key))
                else:
                    other.add(key)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                key = _entry(target, holder)
                if key is None:
                    continue
                if _counted_up(node.value, holder, key):
                    counts.append((node, key))
                elif not _is_int(node.value):
                    other.add(key)
    out: List[Tuple[ast.AST, str]] = []
    for node, key in counts:
        if key not in other and all(k != key for _, k in out):
            out.append((node, key))
    return out


def step_counters(source, step: ast.AST) -> List[Counter]:
    """The ints ``step`` counts up: in each param group (a loop ``for group in
    self.param_groups``), or in each parameter's state (``state =
    self.state[p]``, counted in the loop that looked it up)."""
    out: List[Counter] = []
    for node in ast.walk(step):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and self_attr(node.iter) == "param_groups":
            out += [Counter(n, node.target.id, k, True) for n, k in _int_counts(node, node.target.id)]
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Subscript)
            and self_attr(node.value.value) == "state"
        ):
            scope = source.enclosing(node, (ast.For, ast.FunctionDef, ast.AsyncFunctionDef)) or step
            holder = node.targets[0].id
            out += [Counter(n, holder, k, False) for n, k in _int_counts(scope, holder)]
    unique: List[Counter] = []
    for c in out:
        if all(u.node is not c.node for u in unique):
            unique.append(c)
    return unique


def _int_like(value: ast.AST, key: str) -> bool:
    """An int literal, a copy of that entry of another dict
    (``lm_head_state['step']``), or such an entry plus an int
    (``x.get('step', 0) + 1``, ``x['step'] + 1``)."""
    if _is_int(value) or (isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and value.slice.value == key):
        return True
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) and _is_int(value.right)):
        return False
    left = value.left
    if isinstance(left, ast.Subscript):
        return _int_like(left, key)
    return isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and isinstance(left.func.value, ast.Name) and _counted_up(value, left.func.value.id, key)


def only_ints(model, cls: ast.ClassDef, key: str) -> bool:
    """Is every value the class (and its bases here) writes under ``key`` an
    int: ``x['step'] = ...``, ``dict(step=...)``, ``{'step': ...}`` (a state
    made in ``__init__``, modded-nanogpt's ``self.state[p] = dict(step=0,
    ...)``)?  A tensor written anywhere makes the count no Python int."""
    for c in class_chain(model, cls):
        for node in ast.walk(c):
            values: List[ast.AST] = []
            if isinstance(node, ast.Assign):
                values += [node.value for t in node.targets if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == key]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
                values += [kw.value for kw in node.keywords if kw.arg == key]
            elif isinstance(node, ast.Dict):
                values += [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == key]
            if any(not _int_like(v, key) for v in values):
                return False
    return True


def named_dynamic(model, key: str) -> bool:
    """Does the module append a param group's ``['key']`` to
    ``torch.compiler.config.dynamic_sources`` (the trace cure's setting,
    written by ``run --fix``): the int is then symbolic from the first call."""
    for node in model.source.nodes(ast.AugAssign):
        target, value = node.target, node.value
        if (
            isinstance(target, ast.Attribute)
            and target.attr == "dynamic_sources"
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and f".param_groups[" in value.value
            and f"['{key}']" in value.value
        ):
            return True
    return False


class OptimizerCounter(Rule):
    code = "FR022"
    #: report only; the trace's guard (`args[0].param_groups[0]['step'] == 1`)
    #: is an int argument's, cured from the trace by dynamic-sources-from-trace
    cures = ()
    name = "optimizer-int-counter"
    summary = "an int an optimizer's compiled step counts up in its param groups or its state"
    what_it_does = """
Finds, in the `step` of a `torch.optim.Optimizer` subclass of the module
whose step is compiled (`@torch.compile` on it, or `torch.compile(opt.step)`
of an instance made here), an int the step counts up in each param group
(`group['step'] += 1`, `group['step'] = group.get('step', 0) + 1` in a loop
over `self.param_groups`) or in each parameter's state (`state =
self.state[p]`, then `state['step'] += 1`), where every write of that entry
there is an int. Not under `dynamic=True`, nor where the module names a
group's entry in `torch.compiler.config.dynamic_sources` (the trace cure's
setting): the int is symbolic from the first call there. A param group's
count is reported by default; a parameter's state's with `--unproven` (its
one recompile is often absorbed by a deliberate warm-up: modded-nanogpt's
`DistAdam` counts `dict(step=0, ...)` up under `@torch.compile` and warms
its kernels up before the timed run). Report only.
"""
    why_it_recompiles = """
dynamo reads the int while tracing the step and guards its value
(`args[0].param_groups[0]['step'] == 1`); the step itself writes the next
value, so the next step fails the guard. By default the int turns dynamic
after that one recompile; under `dynamic=False` every step is a new graph,
until the recompile limit. Measured on torch 2.13 (CPU, counting backend):
timm's LAMB before 29993ffc stepped 20 times by a compiled `optimizer.step`,
3 graphs (the state's first step, then the count); with a 0-d tensor step, 2.
"""
    example = """
    class Lamb(Optimizer):
        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                if 'step' in group:
                    group['step'] += 1          # a new value at every compiled step
                else:
                    group['step'] = 1
                bias_correction1 = 1 - beta1 ** group['step']
                ...

    compiled_step = torch.compile(optimizer.step)

Cured by hand: keep the count a 0-d tensor counted in place
(`group['step'] = torch.tensor(0.)`, `group['step'].add_(1)`, its value read
as the tensor while compiling: timm 29993ffc; torch's own optimizers keep
`state['step']` so). For a param group's count `fix-recompiles run --fix`
names it in `torch.compiler.config.dynamic_sources` from the trace
(dynamic-sources-from-trace: 3 -> 2 on timm's LAMB); a state's count has a
source per parameter, which that setting cannot name.
"""
    fix_safety = """
No automatic fix in the source: a tensor count changes every reader of the
group's entry (a checkpoint, a scheduler, a log), and the dynamo name of the
int depends on how the step is reached, which only the trace shows.
"""
    report_only = True
    reads = "ast"
    triggers = (b"param_groups",)
    valid = (
        # the step is not compiled
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def step(self):\n        for group in self.param_groups:\n"
        "            group['step'] = group.get('step', 0) + 1\nopt = Opt([torch.zeros(2)], {})\nopt.step()\n",
        # a tensor count (timm's fix)
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def step(self):\n        for group in self.param_groups:\n"
        "            if 'step' not in group:\n                group['step'] = torch.tensor(0.0)\n            group['step'] += 1\n"
        "opt = Opt([torch.zeros(2)], {})\ncompiled = torch.compile(opt.step)\n",
        # a tensor count made in __init__ (counted up in step as an int would be)
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def __init__(self, params):\n        super().__init__(params, {})\n"
        "        for p in self.param_groups[0]['params']:\n            self.state[p] = dict(step=torch.tensor(0.0))\n"
        "    def step(self):\n        for group in self.param_groups:\n            for p in group['params']:\n"
        "                state = self.state[p]\n                state['step'] += 1\n"
        "opt = Opt([torch.zeros(2)])\ncompiled = torch.compile(opt.step)\n",
        # a tensor count in the state (torch's own optimizers)
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def step(self):\n        for group in self.param_groups:\n"
        "            for p in group['params']:\n                state = self.state[p]\n                if len(state) == 0:\n"
        "                    state['step'] = torch.tensor(0.0)\n                state['step'] += 1\n"
        "opt = Opt([torch.zeros(2)], {})\ncompiled = torch.compile(opt.step)\n",
        # compiled with dynamic=True: the int is symbolic from the first call
        "import torch\nclass Opt(torch.optim.Optimizer):\n    def step(self):\n        for group in self.param_groups:\n"
        "            group['step'] = group.get('step', 0) + 1\nopt = Opt([torch.zeros(2)], {})\ncompiled = torch.compile(opt.step, dynamic=True)\n",
        # named dynamic from the first compile (what `run --fix` writes from the trace)
        "import torch\ntorch.compiler.config.dynamic_sources += \"L['args'][0].param_groups[0]['step'],\"\n"
        "class Opt(torch.optim.Optimizer):\n    def step(self):\n        for group in self.param_groups:\n"
        "            group['step'] = group.get('step', 0) + 1\nopt = Opt([torch.zeros(2)], {})\ncompiled = torch.compile(opt.step)\n",
        # not an optimizer
        "import torch\nclass Sched:\n    def __init__(self):\n        self.param_groups = [{}]\n    def step(self):\n        for group in self.param_groups:\n"
        "            group['step'] = group.get('step', 0) + 1\ns = Sched()\ncompiled = torch.compile(s.step)\n",
    )
    invalid = (
        # timm's LAMB before 29993ffc, its step compiled as timm's test does
        Example(
            "import torch\nfrom torch.optim import Optimizer\nclass Lamb(Optimizer):\n    @torch.no_grad()\n    def step(self, closure=None):\n"
            "        for group in self.param_groups:\n            if 'step' in group:\n                group['step'] += 1\n"
            "            else:\n                group['step'] = 1\n            c = 1 - 0.9 ** group['step']\n"
            "def train(model):\n    optimizer = Lamb(model.parameters(), {})\n    compiled_step = torch.compile(optimizer.step)\n"
            "    for _ in range(20):\n        compiled_step()\n"
        ),
        # a count in each parameter's state (a custom optimizer's `state['step']`): with --unproven
        Example(
            "import torch\nclass Lion(torch.optim.Optimizer):\n    @torch.no_grad()\n    def step(self):\n        for group in self.param_groups:\n"
            "            for p in group['params']:\n                state = self.state[p]\n                if len(state) == 0:\n"
            "                    state['step'] = 0\n                state['step'] += 1\n"
            "opt = Lion([torch.zeros(2, requires_grad=True)], {})\nstep = torch.compile(opt.step)\n",
            unproven=True,
        ),
        # the decorator on the method
        Example(
            "import torch\nclass Opt(torch.optim.Optimizer):\n    @torch.compile\n    def step(self):\n        for group in self.param_groups:\n"
            "            group['step'] = group.get('step', 0) + 1\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        findings: List[Finding] = []
        seen = set()
        for site in model.compile_sites:
            found = compiled_optimizer_step(model, site)
            if found is None or site.dynamic_literal is True:
                continue
            cls, step = found
            for c in step_counters(ctx.source, step):
                if id(c.node) in seen or (c.group and named_dynamic(model, c.key)) or not only_ints(model, cls, c.key):
                    continue
                seen.add(id(c.node))
                how = (
                    f"under `dynamic=False` (line {site.node.lineno}) every step is a new graph, until the recompile limit"
                    if site.dynamic_literal is False
                    else "it recompiles once, then the int turns dynamic (every step a new graph under `dynamic=False`)"
                )
                where = "in each param group" if c.group else "in each parameter's state"
                cure = (
                    "keep it a 0-d tensor counted in place (`.add_(1)`), or run `fix-recompiles run --fix`, which makes it dynamic"
                    " from the first compile from the trace (no automatic fix here)"
                    if c.group
                    else "keep it a 0-d tensor counted in place (`.add_(1)`), as torch's own optimizers keep `state['step']` (no automatic fix)"
                )
                message = (
                    f"`{cls.name}.step`, compiled on line {site.node.lineno}, counts the Python int `{c.holder}['{c.key}']` up {where}"
                    f" (`{ctx.source.segment(c.node).strip()}`): torch guards the value it read, and the next step sees another; {how}; {cure}"
                )
                # a state's count: with --unproven (modded-nanogpt's DistAdam: `dict(step=0, ...)` per
                # parameter, its one recompile absorbed by the run's deliberate kernel warm-up)
                findings.append(self.finding(ctx, c.node, message, proven=c.group))
        return sorted(findings, key=lambda f: (f.line, f.column))
