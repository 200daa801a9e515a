"""FR001 dynamic-shapes: ``dynamic=False`` where inputs vary."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Tuple

from .._lazy import cst

from ..findings import Edit, Finding, Safety
from ..analysis.constants import store_true_flag
from ..analysis.intent import static_intent
from ..analysis.variation import evidence_for
from ..cst_edits import remove_keyword
from ..trace.causes import CuresCause, FLOAT_ARG, INT_ARG, TENSOR_SHAPE
from .base import Example, Rule


def _or_none(value: cst.BaseExpression) -> cst.BaseExpression:
    """``args.flag`` -> ``args.flag or None``."""
    return cst.BooleanOperation(left=value, operator=cst.Or(), right=cst.Name("None"))


def _set_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    args = [
        a.with_changes(value=value) if a.keyword is not None and a.keyword.value == keyword else a
        for a in call.args
    ]
    return call.with_changes(args=args)


class DynamicShapes(Rule):
    code = "FR001"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(FLOAT_ARG, upgrade=True), CuresCause(INT_ARG, upgrade=True), CuresCause(TENSOR_SHAPE, upgrade=True))
    name = "dynamic-shapes"
    summary = "`dynamic=False` on a compiled function whose input shapes vary"
    what_it_does = """
Finds `torch.compile(..., dynamic=False)` (every compile form: decorator,
wrapper, `model.compile`, aliases of torch) and removes `dynamic=False` when a
call in the same module shows the inputs varying: the compiled function is
called in a loop with a tensor whose shape comes from the loop variable
(`f(torch.ones(i))`, `f(x[:n])`), with a number computed from the loop
variable, with a number read out of a tensor the loop rebuilds every
iteration (`max_seqlen = lengths.max().item()` of each batch, quack#150;
`int(mask.sum())`), or with tensors of different literal shapes at different
calls.
A slice whose width is the same on every iteration (`x[i*mbs:(i+1)*mbs]`,
`x[i:i+n]`) is not evidence: every call sees one shape.

Without evidence nothing is reported by default: `dynamic=False` is often
deliberate. With `--unproven` (or `unproven = true` in the configuration) it
reports, with an unsafe fix: `dynamic=False` with no varying call seen; a
static compile that varies but that the module marks as deliberate (a comment
at the compile about static shapes, speed or recompiles; the recompile limit
raised in the module; `disable_cache_limit()`; `mark_static`);
`dynamic=<variable>` (never rewritten, except a store_true flag, below); and `dynamic=False` passed through
`**opts` when `opts` is a dict built in the same module
(`opts = dict(dynamic=False)`, `opts = {"dynamic": False}`) and used only as
`**opts` (never rewritten).

A call that passes the loop variable of a loop over parameters itself
(`for p in group["params"]: f(p, p.grad)`) gets a report and no fix: a
Parameter's shapes stay static whatever `dynamic=` says
(`torch._dynamo.config.force_parameter_static_shapes`), so removing
`dynamic=False` alone cures nothing (HeavyBall#16: 8 graphs and the limit
either way); with it removed, `p.detach()` or the flag set to False gives 3.

`dynamic=args.compile_dynamic` where the module's parser makes
`--compile_dynamic` a store_true flag (no default, or `default=False`) and
nothing assigns it: the value is False whenever the user does not pass the
flag (musubi-tuner before fe044b6: `--compile` alone gave `dynamic=False`,
16 graphs -> 10 with its fix). The fix writes `dynamic=args.compile_dynamic or
None`: True when the flag is passed, automatic dynamic shapes otherwise; found
and made safe on the same evidence as `dynamic=False`.

With `--dynamic-fix true` (or `dynamic-fix = "true"` in the configuration) the
fix writes `dynamic=True` instead of removing the argument (not for a flag:
`or None` keeps the flag's meaning when it is passed). `run --fix` writes it
when its rerun shows the removal did not settle the function (more than the
static and the dynamic graph, or no fewer graphs than before: sizes that
changed one after another), kept only if it compiles fewer graphs again
(ai-toolkit's captioner: removal 3 -> 3, `dynamic=True` 3 -> 1).
"""
    why_it_recompiles = """
`dynamic=False` turns off automatic dynamic shapes: every new input shape,
and every new int or float value, is a guard failure and a new graph. After
the recompile limit (8 by default) the function silently runs eager. With the
default `dynamic=None`, torch compiles static first and, on the first change,
recompiles once with dynamic shapes that serve every later size.

Removal is the default rather than `dynamic=True`: `dynamic=None` costs one
extra graph but keeps static-shape specialisation where shapes never change,
while `dynamic=True` makes every dimension symbolic from the first call, which
torch's docs call error-prone and which can be slower.
"""
    example = """
    @torch.compile(dynamic=False)
    def f(x):
        return x * 2

    for n in range(1, 20):
        f(torch.ones(n))       # 8 graphs, then eager

Use instead:

    @torch.compile()
    def f(x):
        return x * 2           # 2 graphs for every n
"""
    fix_safety = """
Safe when a call in the module shows the inputs varying and nothing marks
the static compile as deliberate: removing `dynamic=False` never changes
results. Unsafe otherwise: `dynamic=False` is often deliberate (max-autotune,
CUDA graphs, inputs that never change shape), so those findings are reported
only with `--unproven` and fixed only with `--unsafe-fixes`.
`dynamic=<variable>` and `dynamic=False` inside `**` options have no fix,
but for a store_true flag (`or None`, under the same rule: it changes only
the run where the flag is not passed, from static to automatic dynamic).
"""
    valid = (
        "import torch\n@torch.compile(dynamic=True)\ndef f(x):\n    return x\n",
        "import re\nre.compile('a', dynamic=False)\n",
        "def compile(fn, dynamic=False):\n    return fn\ng = compile(len, dynamic=False)\n",
        # options dict changed after it is built, or not visible here
        "import torch\nopts = {'dynamic': False}\nopts['dynamic'] = None\nf = torch.compile(len, **opts)\n",
        "import torch\ndef build(fn, **opts):\n    return torch.compile(fn, **opts)\n",
        # constant-width slices: every call sees the same shape (measured: 1 graph)
        "import torch\nmodel = torch.compile(torch.nn.Linear(4, 4), dynamic=False)\nx = torch.randn(32, 4)\nmbs = 8\n"
        "for i in range(len(x) // mbs):\n    model(x[i * mbs:(i + 1) * mbs])\n",
        # no varying call seen: quiet by default (reported with --unproven)
        "import torch\ndef g(x):\n    return x\nf = torch.compile(g, dynamic=False)\n",
        # a read-out capped by min() at a few values: no more graphs than the limit
        "import torch\n@torch.compile(dynamic=False)\ndef f(x, n):\n    return x[:n]\nfor lengths in batches:\n    f(x, min(lengths.max().item(), 4))\n",
    )
    invalid = (
        # a number read out of each batch's tensor (quack#150), or of a wide random draw
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, n):\n    return x[:n]\nfor i in range(12):\n    f(x, torch.randint(0, n, (4,)).max().item())\n",
            "import torch\n@torch.compile()\ndef f(x, n):\n    return x[:n]\nfor i in range(12):\n    f(x, torch.randint(0, n, (4,)).max().item())\n",
        ),
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, n):\n    return x[:n]\nfor lengths in batches:\n    f(x, lengths.max().item())\n",
            "import torch\n@torch.compile()\ndef f(x, n):\n    return x[:n]\nfor lengths in batches:\n    f(x, lengths.max().item())\n",
        ),
        # ... also inside min/max/int (a cap larger than the limit keeps it varying)
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, n):\n    return x[:n]\nfor lengths in batches:\n"
            "    n = min(max_len, max(1, int(lengths.max().item())))\n    f(x, n)\n",
            "import torch\n@torch.compile()\ndef f(x, n):\n    return x[:n]\nfor lengths in batches:\n"
            "    n = min(max_len, max(1, int(lengths.max().item())))\n    f(x, n)\n",
        ),
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n",
            "import torch\n@torch.compile()\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n",
        ),
        Example(
            "import torch\ndef g(x):\n    return x\nf = torch.compile(g, dynamic=False)\n",
            "import torch\ndef g(x):\n    return x\nf = torch.compile(g)\n",
            unsafe=True,
            unproven=True,
        ),
        # `dynamic=False` through `**opts`: reported at the dict entry, no fix
        Example("import torch\nopts = dict(dynamic=False, fullgraph=True)\nf = torch.compile(len, **opts)\n", unproven=True),
        # a store_true flag: False unless passed (musubi-tuner before fe044b6)
        Example(
            "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--compile_dynamic', action='store_true')\n"
            "args = parser.parse_args()\nf = torch.compile(torch.relu, dynamic=args.compile_dynamic)\nfor n in range(3):\n    f(torch.ones(n))\n",
            "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--compile_dynamic', action='store_true')\n"
            "args = parser.parse_args()\nf = torch.compile(torch.relu, dynamic=args.compile_dynamic or None)\nfor n in range(3):\n    f(torch.ones(n))\n",
        ),
        # varying shapes, but the comment says static is deliberate: unsafe, unproven
        Example(
            "import torch\n@torch.compile(dynamic=False)  # static shapes: much faster here\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n",
            "import torch\n@torch.compile()  # static shapes: much faster here\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n",
            unsafe=True,
            unproven=True,
        ),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        findings: List[Finding] = []
        for site in model.compile_sites:
            kw = site.option("dynamic")
            if kw is None and site.has_star_kwargs:
                self._check_star_kwargs(ctx, site, findings)
                continue
            if kw is None or site.options_call is None:
                continue
            value = kw.value
            known = site.option_value("dynamic")  # a literal, or a module constant bound once to one
            if known is True or known is None:
                continue
            flag = store_true_flag(model, value) if known is not False else None
            if known is not False and flag is None:
                findings.append(
                    self.finding(
                        ctx,
                        kw,
                        f"`dynamic={source.segment(value)}` is not a literal: if it is False, every new input shape or number recompiles (no automatic fix)",
                        proven=False,
                    )
                )
                continue
            if flag is not None:
                spelled = f"`dynamic={source.segment(value)}` (False unless `{flag}` is passed, a store_true flag)"
            elif isinstance(value, ast.Constant):
                spelled = "`dynamic=False`"
            else:
                spelled = f"`dynamic={source.segment(value)}` (False)"
            evidence = evidence_for(model, site)
            intent = static_intent(model, site) if evidence else None
            target = source.target(site.options_call, "Call")
            if flag is not None:
                # a store_true flag: False whenever the user did not pass it
                # (musubi-tuner before fe044b6); `or None` keeps True when it
                # is passed and gives automatic dynamic shapes otherwise
                edit = Edit(source.target(value, "BaseExpression"), _or_none)
                title = f"pass `dynamic={source.segment(value)} or None`"
            elif ctx.settings.dynamic_fix == "true":
                edit = Edit(target, lambda node: _set_keyword(node, "dynamic", cst.Name("True")))
                title = "replace `dynamic=False` by `dynamic=True`"
            else:
                edit = Edit(target, lambda node: remove_keyword(node, "dynamic"))
                title = "remove `dynamic=False`"
            if evidence and intent is None:
                ev = evidence[0]
                lead = f"{spelled} but inputs vary (line {ev.call.lineno}: {ev.detail})"
                because = ""
                message = f"{lead}; every variant recompiles"
                safety = Safety.SAFE
            elif evidence:
                ev = evidence[0]
                lead = f"{spelled} but inputs vary (line {ev.call.lineno}: {ev.detail})"
                because = f"; the static compile looks deliberate ({intent}), so the fix is unsafe"
                message = lead + because
                safety = Safety.UNSAFE
            else:
                lead = f"{spelled} turns off automatic dynamic shapes: every new shape or number recompiles"
                because = " (no varying call seen here; fix is unsafe as it may be deliberate)"
                message = lead + because
                safety = Safety.UNSAFE
            if flag is not None:
                message += (
                    f"; pass `dynamic={source.segment(value)} or None`: True when `{flag}` is passed,"
                    " automatic dynamic shapes (the default) otherwise"
                )
            proven = bool(evidence) and intent is None
            parameter = _parameter_argument(model, site)
            if parameter is not None:
                # a Parameter's shapes stay static whatever `dynamic=` says: removing it cures nothing there
                call, name = parameter
                message = (
                    f"{lead}; but line {call.lineno} passes `{name}`, an nn.Parameter of a loop over parameters, whose "
                    "shapes stay static whatever `dynamic=` says (torch._dynamo.config.force_parameter_static_shapes): "
                    "removing `dynamic=False` alone does not cure them (HeavyBall#16: 8 graphs and the limit either way); "
                    f"remove it and pass `{name}.detach()` or set `torch._dynamo.config.force_parameter_static_shapes = False` "
                    "(3 graphs), or raise the recompile limit to the number of shapes (no automatic fix)"
                )
                findings.append(self.finding(ctx, kw, message, proven=proven))
                continue
            findings.append(self.finding(ctx, kw, message, edits=[edit], safety=safety, title=title, proven=proven,
                                         unsafe_because=because))
        return findings

    def _check_star_kwargs(self, ctx, site, findings: List[Finding]) -> None:
        """``opts = dict(dynamic=False)`` … ``torch.compile(fn, **opts)``: reported at
        the dict entry, never fixed (the dict may be shared or deliberate)."""
        found = ctx.model.star_kwargs_option(site, "dynamic")
        if found is None:
            return
        entry, value = found
        if not (isinstance(value, ast.Constant) and value.value is False):
            return
        anchor = (entry, value) if not isinstance(entry, ast.keyword) else entry
        findings.append(
            self.finding(
                ctx,
                anchor,
                f"`dynamic=False` reaches the compile on line {site.options_call.lineno} through `**` options: it turns off "
                "automatic dynamic shapes, so every new shape or number recompiles (no automatic fix: "
                "remove it from the options if the inputs vary)",
                proven=False,
            )
        )


def _parameter_argument(model, site) -> Optional[Tuple[ast.Call, str]]:
    """(call, name) where a call of ``site`` passes the loop variable of a loop
    over parameters itself (``for p in group["params"]``, ``for p in
    model.parameters()``, ``for name, p in m.named_parameters()``): an
    nn.Parameter, not its ``.grad`` or ``.detach()``."""
    for call in site.calls:
        passed = {v.id for v in list(call.args) + [k.value for k in call.keywords] if isinstance(v, ast.Name)}
        for loop in model.source.loops_around(call):
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            target, it = loop.target, loop.iter
            method = it.func.attr if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args else None
            if method == "named_parameters" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
            elif not (method == "parameters" or (isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Constant) and it.slice.value == "params")):
                continue
            if isinstance(target, ast.Name) and target.id in passed:
                return call, target.id
    return None
