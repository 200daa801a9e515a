"""FR010 mark-dynamic-inside: ``torch._dynamo.mark_dynamic`` (and its kin)
called inside the compiled function itself."""

from __future__ import annotations

import ast
from typing import Iterable, List, Set

from ..findings import Finding
from ..analysis.source import walk
from .base import Example, Rule

#: the marking functions torch forbids tracing (``@forbid_in_graph``)
_MARKS = {
    f"torch._dynamo.{name}"
    for name in ("mark_dynamic", "maybe_mark_dynamic", "mark_static", "mark_static_address", "decorators.mark_dynamic", "decorators.maybe_mark_dynamic", "decorators.mark_static")
}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class MarkDynamicInside(Rule):
    code = "FR010"
    name = "mark-dynamic-inside"
    summary = "`torch._dynamo.mark_dynamic` called inside the compiled function: torch refuses to trace it"
    what_it_does = """
Finds a call of `torch._dynamo.mark_dynamic`, `maybe_mark_dynamic`,
`mark_static` or `mark_static_address` in the body of a function the module
compiles (its `def` visible: a decorator, a wrap, a project decorator the
compile-site model follows). Report only: call it on the tensor before it is
passed to the compiled function, which is where the docs say it belongs.
"""
    why_it_recompiles = """
The marks are read when a frame is compiled, from the tensors passed in; torch
forbids tracing the marking functions themselves (`@forbid_in_graph`). Measured
on torch 2.13 (CPU): `torch._dynamo.mark_dynamic(x, 0)` as the first line of a
compiled function raises `AssertionError: Attempt to trace forbidden callable
<function mark_dynamic ...>` on the first call (also `maybe_mark_dynamic`),
so the intended dynamic dim never takes effect; the same mark made before the
call gives 1 graph for 11 sizes.
"""
    example = """
    @torch.compile
    def f(x):
        torch._dynamo.mark_dynamic(x, 0)    # AssertionError when traced
        return x * 2

Move it out:

    @torch.compile
    def f(x):
        return x * 2

    torch._dynamo.mark_dynamic(t, 0)
    f(t)
"""
    fix_safety = """
No automatic fix: moving the mark means writing it before every call with the
tensor each call passes, and a program that crashes today cannot be run to
prove the moved version compiles less.
"""
    report_only = True
    valid = (
        "import torch\n@torch.compile\ndef f(x):\n    return x * 2\nt = torch.ones(3)\ntorch._dynamo.mark_dynamic(t, 0)\nf(t)\n",
        # not compiled
        "import torch\ndef prepare(x):\n    torch._dynamo.mark_dynamic(x, 0)\n    return x\nf = torch.compile(lambda x: x * 2)\nf(prepare(torch.ones(3)))\n",
    )
    invalid = (
        Example("import torch\n@torch.compile\ndef f(x):\n    torch._dynamo.mark_dynamic(x, 0)\n    return x * 2\nf(torch.ones(3))\n"),
        Example("import torch\nfrom torch._dynamo import maybe_mark_dynamic\ndef g(x):\n    maybe_mark_dynamic(x, 0)\n    return x + 1\ng = torch.compile(g)\n"),
    )

    reads = "ast"
    triggers = (b"mark_",)

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        defs: List[ast.AST] = []
        for site in model.compile_sites:
            for fn in [site.target_def, *site.call_defs.values()]:
                if isinstance(fn, _FUNCS) and all(fn is not d for d in defs):
                    defs.append(fn)
        findings: List[Finding] = []
        seen: Set[ast.AST] = set()
        for fn in defs:
            for node in walk(fn):
                if not isinstance(node, ast.Call) or node in seen:
                    continue
                names = model.qualified_names(node.func)
                hit = names & _MARKS
                if not hit:
                    continue
                seen.add(node)
                what = sorted(hit)[0].rsplit(".", 1)[1]
                findings.append(
                    self.finding(
                        ctx,
                        node,
                        f"`{what}` is called inside `{fn.name}`, which is compiled: torch refuses to trace it "  # type: ignore[attr-defined]
                        "(AssertionError `Attempt to trace forbidden callable` on torch 2.13) and the mark never applies; "
                        "call it on the tensor before it is passed to the compiled function (no automatic fix)",
                    )
                )
        return findings
