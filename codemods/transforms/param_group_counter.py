"""FR022 param-group-counter: an optimizer whose compiled ``step`` counts a
Python int up in its param groups (``group['step'] += 1``): torch guards the
value it read, the step writes the next one, so the next step recompiles
(timm before 29993ffc, PR #2704: LAMB and nine other optimizers kept the
step a Python int; timm compiles ``optimizer.step``)."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Tuple

from ..analysis.modules import class_chain
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


def group_counters(step: ast.AST) -> List[Tuple[ast.AST, str]]:
    """(the count-up statement, the key) of every int a loop over
    ``self.param_groups`` in ``step`` counts up in each group, where every
    write of that entry in the loop is an int (a literal, or the entry plus
    a literal): a tensor written there (``torch.tensor(0.)``, timm's fix)
    makes it no such int."""
    out: List[Tuple[ast.AST, str]] = []
    for loop in ast.walk(step):
        if not (
            isinstance(loop, ast.For)
            and isinstance(loop.target, ast.Name)
            and isinstance(loop.iter, ast.Attribute)
            and loop.iter.attr == "param_groups"
            and isinstance(loop.iter.value, ast.Name)
            and loop.iter.value.id == "self"
        ):
            continue
        group = loop.target.id
        counts: List[Tuple[ast.AST, str]] = []
        other = set()
        for node in ast.walk(loop):
            if isinstance(node, ast.AugAssign):
                key = _entry(node.target, group)
                if key is not None:
                    if isinstance(node.op, ast.Add) and _is_int(node.value):
                        counts.append((node, key))
                    else:
                        other.add(key)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    key = _entry(target, group)
                    if key is None:
                        continue
                    if _counted_up(node.value, group, key):
                        counts.append((node, key))
                    elif not _is_int(node.value):
                        other.add(key)
        seen = set()
        for node, key in counts:
            if key not in other and key not in seen:
                seen.add(key)
                out.append((node, key))
    return out


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


class ParamGroupCounter(Rule):
    code = "FR022"
    #: report only; the trace's guard (`args[0].param_groups[0]['step'] == 1`)
    #: is an int argument's, cured from the trace by dynamic-sources-from-trace
    cures = ()
    name = "param-group-counter"
    summary = "an int an optimizer's compiled step counts up in its param groups"
    what_it_does = """
Finds, in the `step` of a `torch.optim.Optimizer` subclass of the module
whose step is compiled (`@torch.compile` on it, or `torch.compile(opt.step)`
of an instance made here), an int that a loop over `self.param_groups`
counts up in each group: `group['step'] += 1`, `group['step'] =
group.get('step', 0) + 1`, where every write of that entry there is an int.
Not under `dynamic=True`, nor where the module names the entry in
`torch.compiler.config.dynamic_sources` (the trace cure's setting): the int
is symbolic from the first call there. Report only.
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
as the tensor while compiling: timm 29993ffc). `fix-recompiles run --fix`
names it in `torch.compiler.config.dynamic_sources` from the trace
(dynamic-sources-from-trace: 3 -> 2 on timm's LAMB).
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
            for write, key in group_counters(step):
                if id(write) in seen or named_dynamic(model, key):
                    continue
                seen.add(id(write))
                how = (
                    f"under `dynamic=False` (line {site.node.lineno}) every step is a new graph, until the recompile limit"
                    if site.dynamic_literal is False
                    else "it recompiles once, then the int turns dynamic (every step a new graph under `dynamic=False`)"
                )
                message = (
                    f"`{cls.name}.step`, compiled on line {site.node.lineno}, counts the Python int `group['{key}']` up in each param group"
                    f" (`{ctx.source.segment(write).strip()}`): torch guards the value it read, and the next step sees another; {how};"
                    f" keep it a 0-d tensor counted in place (`.add_(1)`), or run `fix-recompiles run --fix`, which makes it dynamic"
                    " from the first compile from the trace (no automatic fix here)"
                )
                findings.append(self.finding(ctx, write, message, proven=True))
        return sorted(findings, key=lambda f: (f.line, f.column))
