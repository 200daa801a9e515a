"""FR015 data-driven-loop: a Python loop inside compiled code whose trip
count comes from tensor data (``for n in lens.unbind()``, ``.tolist()``,
``range(n.item())``).  torch unrolls the loop and guards its length, so
every new count recompiles (fla-org/flash-linear-attention#909: per-segment
``torch.arange`` over ``prepare_lens(cu_seqlens).unbind()``)."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Set

from ..analysis.compile_sites import def_first_lines
from ..analysis.modules import compiled_class_method, methods_reached
from ..findings import Finding
from ..trace.causes import CuresCause, LENGTH
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: tensor methods whose result's length is the tensor's data or size
_DATA_ITER = {"unbind", "tolist"}


def _data_iterable(node: ast.AST) -> Optional[str]:
    """How ``node`` (a loop's iterable) takes its length from tensor data:
    ``x.unbind()``, ``x.tolist()``, ``range(x.item())`` / ``range(int(x))``
    of a tensor read out; None otherwise."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _DATA_ITER:
        return f".{node.func.attr}()"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
        for arg in node.args:
            for sub in ast.walk(arg):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("item", "tolist"):
                    return f"range() of .{sub.func.attr}()"
    return None


def _receiver(node: ast.AST) -> ast.AST:
    """The tensor the iterable is read from."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value
    return node


def _from_inputs(fn: ast.AST, expr: ast.AST) -> bool:
    """Does ``expr`` read a parameter of ``fn`` (not ``self``), directly or
    through a local assigned once from an expression that does?"""
    args = fn.args  # type: ignore[attr-defined]
    params = {a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)} - {"self"}
    if args.vararg is not None:
        params.add(args.vararg.arg)
    if args.kwarg is not None:
        params.add(args.kwarg.arg)
    derived: Set[str] = set(params)
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(stmt.value)):
                derived.add(stmt.targets[0].id)
    return any(isinstance(n, ast.Name) and n.id in derived for n in ast.walk(expr))


class DataDrivenLoop(Rule):
    code = "FR015"
    #: the trace's length guard on the loop's iterator (`len(.0) == 3` of a comprehension)
    cures = (CuresCause(LENGTH, loop_iterator=True),)
    name = "data-driven-loop"
    summary = "a Python loop whose trip count comes from tensor data, inside compiled code"
    what_it_does = """
Finds a `for` loop or a comprehension, in a function the module compiles (a
decorator, `torch.compile(fn)`, a compiled module's `forward` and the methods
it reaches), whose iterable takes its length from tensor data: `x.unbind()`,
`x.tolist()`, `range(x.item())`, where `x` is computed from the function's
inputs. A default finding when the compile passes `dynamic=True` (sizes are
meant to vary, and this loop cannot follow them); with `--unproven`
otherwise. Report only.
"""
    why_it_recompiles = """
dynamo runs a Python loop at trace time: the graph holds one copy of the
body per element, and torch guards the number of elements (a length guard on
the loop's iterator, `len(.0) == 3`) and, through `.tolist()` / `.item()`,
their values. Every new count (or value) is a new graph, whatever `dynamic=`
says. Measured on torch 2.13 (CPU, counting backend): fla's
`prepare_position_ids` before #909, `torch.cat([torch.arange(n) for n in
prepare_lens(cu_seqlens).unbind()])` under `dynamic=True`, 21 graphs over 9
packed batches; vectorised (`repeat_interleave` of segment ids), 1.
"""
    example = """
    @functools.partial(torch.compile, dynamic=True)
    def prepare_position_ids(cu_seqlens):
        return torch.cat([torch.arange(n) for n in torch.diff(cu_seqlens).unbind()])   # one graph per count

Cured by hand (fla #909): a vectorised form, no Python loop over the data:

    def prepare_position_ids(cu_seqlens):
        lens = torch.diff(cu_seqlens)
        seg = torch.repeat_interleave(torch.arange(lens.numel()), lens)
        return torch.arange(seg.numel()) - F.pad(lens.cumsum(0), (1, 0))[:-1][seg]
"""
    fix_safety = """
No automatic fix: the cure is a vectorised rewrite of the loop's body (a
segment op, `repeat_interleave`, `scatter`, a padded batch), or running the
loop outside the compiled code; no rewrite can be proven to compute the same.
"""
    report_only = True
    reads = "ast"
    triggers = (b"unbind", b"tolist", b"item()")
    valid = (
        # the loop runs outside the compiled code
        "import torch\ndef pos(cu):\n    return torch.cat([torch.arange(n) for n in torch.diff(cu).unbind()])\nf = torch.compile(lambda x: x * 2, dynamic=True)\n",
        # over a module's own weights: a fixed count
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(4, 3))\n"
        "    def forward(self, x):\n        return sum(x * r for r in self.w.unbind())\nm = torch.compile(M(), dynamic=True)\n",
        # a loop over a Python list argument: FR013's and FR001's concern, not data
        "import torch\n@torch.compile(dynamic=True)\ndef f(xs):\n    return sum(x.sum() for x in xs)\n",
    )
    invalid = (
        # fla's form (#909), compiled with dynamic=True: a default finding
        Example(
            "import torch\ndef prepare_position_ids(cu_seqlens):\n    return torch.cat([torch.arange(n) for n in torch.diff(cu_seqlens).unbind()])\n"
            "compiled = torch.compile(prepare_position_ids, dynamic=True)\n"
        ),
        # a loop bounded by a value read out of a tensor, in a compiled forward
        Example(
            "import torch\nclass Decoder(torch.nn.Module):\n    def forward(self, x, steps):\n        for _ in range(steps.item()):\n            x = x * 2\n        return x\n"
            "m = torch.compile(Decoder(), dynamic=True)\n"
        ),
        # without dynamic=True: only with --unproven
        Example(
            "import torch\n@torch.compile\ndef f(x, lens):\n    return [x[:n].sum() for n in lens.tolist()]\n",
            unproven=True,
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        # the few calls that can make a loop's length from data, first (the
        # type index): most files with a compile have none in a loop header
        iterables = []
        for call in source.nodes(ast.Call):
            parent = source.parent(call)
            if isinstance(parent, ast.comprehension) and parent.iter is call or isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is call:
                if _data_iterable(call) is not None:
                    iterables.append(call)
        if not iterables:
            return []
        findings: List[Finding] = []
        seen: Set[int] = set()
        for site in model.compile_sites:
            proven = site.dynamic_literal is True
            defs: List[ast.AST] = [d for d in (site.target_def, *site.call_defs.values()) if isinstance(d, _DEFS)]
            compiled = compiled_class_method(model, site)
            if compiled is not None:
                defs += [fn for _cls, _name, fn in methods_reached(model, compiled[0], compiled[1])]
            for fn in defs:
                for it in iterables:
                    if id(it) in seen or not any(a is fn for a in source.ancestors(it)) or not _from_inputs(fn, _receiver(it)):
                        continue
                    seen.add(id(it))
                    how = _data_iterable(it)
                    holder = source.parent(it)
                    feeds = def_first_lines(fn)
                    if isinstance(holder, ast.comprehension):
                        # a comprehension is a code object of its own (before 3.12), guarded on its iterator
                        feeds = feeds + (source.parent(holder).lineno,)  # type: ignore[attr-defined]
                    name = getattr(fn, "name", "the compiled function")
                    findings.append(
                        self.finding(
                            ctx,
                            it,
                            f"a Python loop over `{source.segment(it)}` inside `{name}`, which is compiled (line {site.node.lineno}): "  # type: ignore[attr-defined]
                            f"its trip count comes from tensor data ({how}), torch unrolls it and guards the count, so every new count recompiles"
                            + (" (`dynamic=True` cannot follow it)" if proven else "")
                            + "; vectorise it (a segment op, `repeat_interleave`, a padded batch) or run the loop outside the compiled code (no automatic fix)",
                            proven=proven,
                            feeds=feeds,
                        )
                    )
        return sorted(findings, key=lambda f: (f.line, f.column))
