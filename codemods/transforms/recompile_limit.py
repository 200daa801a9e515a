"""FR006 recompile-limit: a ``dynamic=False`` function that visibly needs more
variants than the recompile limit gets the limit raised to that bound."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional

from .._lazy import cst

from ..analysis.compile_sites import CompileSite, dotted_name
from ..analysis.constants import int_value
from ..findings import Edit, Finding, Safety
from ..analysis.placement import (
    block_of,
    builtin_shadowed,
    config_mentions,
    dominates,
    insert_before,
    start_of,
    torch_at_least,
    torch_expr,
)
from ..analysis.context import DEFAULT_RECOMPILE_LIMIT as DEFAULT_LIMIT
from ..analysis.variation import Evidence, evidence_for
from .base import Example, Rule

#: above this many variants compiling each one is no cure: report, do not fix
MAX_FIXED_BOUND = 64
#: `recompile_limit` is the name from 2.7; `cache_size_limit` works on every release
RENAMED_IN = (2, 7)
LIMIT_NAMES = ("cache_size_limit", "recompile_limit")
#: `torch.compile(..., recompile_limit=N)`: a limit for that compile only
PER_CALL_SINCE = (2, 12)


def _add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` appended, in the layout of its arguments
    (a one-line call stays one line; a call with one argument per line gets
    the new one on its own line, before a trailing comma kept last)."""
    args = list(call.args)
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        new = new.with_changes(comma=last.comma)
        args[-1] = last.with_changes(comma=between)
    return call.with_changes(args=args + [new])


@dataclass
class _Need:
    """One place that needs the limit raised: the statement to insert before."""

    anchor: ast.stmt
    bound: int
    site: CompileSite
    evidence: Evidence
    others: List[CompileSite] = field(default_factory=list)


class RecompileLimit(Rule):
    code = "FR006"
    name = "recompile-limit"
    summary = "`dynamic=False` function that visibly needs more variants than the recompile limit"
    what_it_does = """
Finds a function compiled with `dynamic=False` whose calls in the same module
show a constant number of variants above the default recompile limit (8): it
is called in `for i in range(12)` with a shape or a number taken from the loop
variable, with each tensor of a literal list of shapes, or with more than 8
different literal shapes. A bound behind a name or an attribute counts when
the module shows its one value: `range(self.n_layer)` with `self.n_layer =
config.n_layer` and every construction passing a `SimpleNamespace(n_layer=12)`
(or a config class call, or an argparse `default=12`); the fix then raises the
limit to what the loop reads (`max(..., self.n_layer)`), not to today's value. Before the outermost loop around the call (or the
first call), in the same function or at module level, it inserts:

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 12)

`cache_size_limit` is accepted by every release from 2.1 (`recompile_limit`,
its new name since 2.7, is written when `target_torch >= 2.7`), and `max`
never lowers a limit raised elsewhere. With `target_torch >= 2.12` it passes
`recompile_limit=12` to the compile instead (`torch.compile(...,
recompile_limit=N)`, new in 2.12): a limit for that function only, not for
the whole process (measured on 2.13: the function compiles its 12 variants,
another `dynamic=False` function still stops at 8). Nothing is reported when the module
already sets the limit (`cache_size_limit`/`recompile_limit` assigned, set
with `config.patch`, or passed as `torch.compile(recompile_limit=...)`), when
the bound is 8 or less, or when it is unknown. Above 64 variants it reports
without a fix: compiling that many graphs is no cure.
"""
    why_it_recompiles = """
Under `dynamic=False` every new input shape and every new int or float value
is a guard failure and a new graph. After `cache_size_limit` graphs (8) the
function, and the functions it calls, silently run eager for the rest of the
process. When the set of variants is small and known, a limit at least that
large keeps every variant compiled (measured on 2.13: `range(12)` int under
`dynamic=False`, 8 graphs and an eager fallback → 12 graphs, no fallback).

Removing `dynamic=False` (FR001) is usually the better cure: one dynamic graph
serves every variant. Raising the limit is the cure when `dynamic=False` is
deliberate (max-autotune, CUDA graphs, "static shapes are much faster").
"""
    example = """
    @torch.compile(dynamic=False)
    def f(x, i):
        return x * i

    for i in range(12):
        f(x, i)            # 8 graphs, then eager

Becomes (with --unsafe-fixes):

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 12)
    for i in range(12):
        f(x, i)            # 12 graphs, all compiled
"""
    fix_safety = """
Unsafe. Values never change, but speed does, both ways: every extra variant
is a full compile (seconds with inductor), and the limit is process-wide, so
it also lets every other compiled function of the process recompile more.
Whether compiling 12 graphs beats running 4 of 12 variants eager depends on
how often they run (the per-compile keyword written for torch >= 2.12 keeps
the raise to the one function). When `dynamic=False` is not deliberate, FR001's removal
is the better (and safe) cure, so this fix is only applied with
`--unsafe-fixes`.
"""
    valid = (
        # bound below the limit
        "import torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
        "for i in range(6):\n    f(torch.ones(2), i)\n",
        # the limit is already set
        "import torch\ntorch._dynamo.config.cache_size_limit = 32\n"
        "@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\nfor i in range(12):\n    f(torch.ones(2), i)\n",
        # automatic dynamic handles it
        "import torch\n@torch.compile\ndef f(x, i):\n    return x * i\nfor i in range(12):\n    f(torch.ones(2), i)\n",
        # a bound behind an argparse option whose default is below the limit
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--n-layer', type=int, default=6)\n"
        "args = parser.parse_args()\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
        "for i in range(args.n_layer):\n    f(torch.ones(2), i)\n",
        # the attribute is rebound: no visible bound
        "import torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\nclass M:\n    def __init__(self):\n        self.n = 12\n"
        "    def grow(self):\n        self.n += 1\n    def run(self, x):\n        for i in range(self.n):\n            f(x, i)\n",
    )
    invalid = (
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "for i in range(12):\n    f(torch.ones(2), i)\n",
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 12)\n"
            "for i in range(12):\n    f(torch.ones(2), i)\n",
            unsafe=True,
        ),
        # the bound behind an attribute set from a config namespace: the fix raises the limit to what the loop reads
        Example(
            "from types import SimpleNamespace\nimport torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "class M:\n    def __init__(self, config):\n        self.n_layer = config.n_layer\n"
            "    def forward(self, x):\n        for i in range(self.n_layer):\n            x = f(x, i)\n        return x\n"
            "M(SimpleNamespace(n_layer=12)).forward(torch.ones(2))\n",
            "from types import SimpleNamespace\nimport torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "class M:\n    def __init__(self, config):\n        self.n_layer = config.n_layer\n"
            "    def forward(self, x):\n"
            "        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, self.n_layer)\n"
            "        for i in range(self.n_layer):\n            x = f(x, i)\n        return x\n"
            "M(SimpleNamespace(n_layer=12)).forward(torch.ones(2))\n",
            unsafe=True,
        ),
        # an argparse default
        Example(
            "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--n-layer', type=int, default=12)\n"
            "args = parser.parse_args()\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "for i in range(args.n_layer):\n    f(torch.ones(2), i)\n",
            "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--n-layer', type=int, default=12)\n"
            "args = parser.parse_args()\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, args.n_layer)\n"
            "for i in range(args.n_layer):\n    f(torch.ones(2), i)\n",
            unsafe=True,
        ),
        # too many variants to compile each: reported, no fix
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef f(x, i):\n    return x * i\n"
            "for i in range(1000):\n    f(torch.ones(2), i)\n",
        ),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        needs: List[_Need] = []
        #: loop -> the name or attribute its `range()` bound reads, when not a literal
        bound_exprs: Dict[int, ast.AST] = {}
        for site in model.compile_sites:
            if not site.static or site.option("recompile_limit") is not None:
                continue
            counted = []
            for e in evidence_for(model, site):
                if e.variants is None and e.per_iteration:  # a value read out of a tensor may repeat: no count
                    e = self._resolve_bound(model, e, bound_exprs)
                if e.variants is not None:
                    counted.append(e)
            # per loop (None: literal shapes at several calls), the largest count seen
            per_loop: List[Evidence] = []
            for ev in counted:
                same_loop = next((i for i, e in enumerate(per_loop) if e.loop is ev.loop), None)
                if same_loop is None:
                    per_loop.append(ev)
                elif (ev.variants or 0) > (per_loop[same_loop].variants or 0):
                    per_loop[same_loop] = ev
            # report only when one loop alone certainly exceeds the limit ...
            if not per_loop or max(e.variants or 0 for e in per_loop) <= DEFAULT_LIMIT:
                continue
            # ... but raise it to cover every loop: the variants share one cache
            total = sum(e.variants or 0 for e in per_loop)
            for ev in per_loop:
                call = ev.call
                if ev.loop is None and site.calls:  # literal shapes at several calls: before the first
                    call = min(site.calls, key=start_of)
                anchor = self._anchor(source, call)
                if anchor is None:
                    continue
                same = next((n for n in needs if n.anchor is anchor), None)
                if same is None:
                    needs.append(_Need(anchor, total, site, ev))
                elif site is not same.site and all(site is not o for o in same.others):
                    # another compiled function in the same loop: a limit per code object
                    same.others.append(site)
                    same.bound = max(same.bound, total)
        if not needs or config_mentions(source, LIMIT_NAMES):  # the module walk last
            return []
        needs.sort(key=lambda n: start_of(n.anchor))

        findings: List[Finding] = []
        chosen: List[_Need] = []
        #: compile sites given `recompile_limit=` (torch >= 2.12)
        keyed: List[CompileSite] = []
        for need in needs:
            if any(c.bound >= need.bound and dominates(source, c.anchor, need.anchor) for c in chosen):
                continue  # an earlier raise already covers it
            names = ", ".join(f"`{s.binding}`" if s.binding else f"line {s.node.lineno}" for s in [need.site] + need.others)
            message = (
                f"{names} compiled with `dynamic=False` needs "
                f"{'' if need.bound == need.evidence.variants else 'up to '}{need.bound} variants "
                f"({need.evidence.detail}), more than the recompile limit ({DEFAULT_LIMIT}): "
                "the rest run eager"
            )
            node = need.evidence.loop.iter if need.evidence.loop is not None else need.evidence.call  # type: ignore[attr-defined]
            if need.bound > MAX_FIXED_BOUND:
                findings.append(self.finding(ctx, node, message + "; too many to compile each, make the input dynamic (no automatic fix)"))
                continue
            sites = [need.site] + need.others
            if torch_at_least(ctx.settings, PER_CALL_SINCE) and all(s.options_call is not None and not s.has_star_kwargs for s in sites):
                # 2.12+: a limit for these compiled functions only, not process-wide
                fresh = [s for s in sites if all(s is not d for d in keyed)]
                if not fresh:
                    continue  # another loop's finding already gives these compiles the keyword
                keyed.extend(fresh)
                bound_value = cst.Integer(str(need.bound))
                findings.append(
                    self.finding(
                        ctx,
                        node,
                        message + f"; pass `recompile_limit={need.bound}` to the compile (or remove `dynamic=False`, FR001)",
                        edits=[
                            Edit(source.target(s.options_call, "Call"), lambda call, v=bound_value: _add_keyword(call, "recompile_limit", v))  # type: ignore[arg-type]
                            for s in fresh
                        ],
                        safety=Safety.UNSAFE,
                        title=f"pass `recompile_limit={need.bound}` to the compile",
                    )
                )
                continue
            if block_of(source, need.anchor) is None or builtin_shadowed(model, need.anchor, "max"):
                findings.append(self.finding(ctx, node, message + " (no automatic fix here)"))
                continue
            limit = LIMIT_NAMES[1] if torch_at_least(ctx.settings, RENAMED_IN) else LIMIT_NAMES[0]
            bound: object = need.bound
            loop = need.evidence.loop
            if loop is need.anchor and not need.others and id(loop) in bound_exprs and need.bound == need.evidence.variants:
                # `range(self.n_layer)` right here: raise the limit to what the loop reads, not to today's value
                bound = bound_exprs[id(loop)]
            chosen.append(need)
            findings.append(
                self.finding(
                    ctx,
                    node,
                    message + f"; raise `{limit}` to {need.bound} (or remove `dynamic=False`, FR001)",
                    edits=[insert_before(source, need.anchor, self._raise(model, limit, bound, source))],
                    safety=Safety.UNSAFE,
                    needs_torch=True,
                    title=f"raise `torch._dynamo.config.{limit}` to at least {need.bound}",
                )
            )
        return findings

    @staticmethod
    def _anchor(source, call: ast.Call) -> Optional[ast.stmt]:
        """The outermost loop around ``call`` in its function, else its statement."""
        loops = source.loops_around(call)
        return loops[-1] if loops else source.statement_of(call)

    @staticmethod
    def _resolve_bound(model, ev: Evidence, bound_exprs: Dict[int, ast.AST]) -> Evidence:
        """``range(self.n_layer)``, ``range(config.n_layer)``: the count when
        the bound is an int the source makes visible (see codemods.analysis.constants)."""
        loop = ev.loop
        it = getattr(loop, "iter", None)
        if not (isinstance(it, ast.Call) and dotted_name(it.func) == "range" and model.scopes.is_builtin(it.func)):
            return ev
        if it.keywords or not 1 <= len(it.args) <= 3 or any(isinstance(a, ast.Starred) for a in it.args):
            return ev
        values = [int_value(model, a) for a in it.args]
        if any(v is None for v in values) or (len(values) == 3 and values[2] == 0):
            return ev
        count = len(range(*values))  # type: ignore[arg-type]
        if len(it.args) == 1 and dotted_name(it.args[0]) is not None:
            bound_exprs[id(loop)] = it.args[0]
        shown = ", ".join(model.source.segment(a) for a in it.args)
        return replace(ev, variants=count, detail=f"{ev.detail}; `range({shown})` runs {count} times")

    @staticmethod
    def _raise(model, limit: str, bound: object, source) -> cst.BaseStatement:
        target = torch_expr(model, "_dynamo", "config", limit)
        amount = cst.Integer(str(bound)) if isinstance(bound, int) else cst.parse_expression(source.segment(bound))
        value = cst.Call(func=cst.Name("max"), args=[cst.Arg(torch_expr(model, "_dynamo", "config", limit)), cst.Arg(amount)])
        return cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(target)], value=value)])
