"""FR012 hook-after-compile: a forward hook registered on a compiled module
(or one of its submodules) after the compiled module's first call is
silently not run by the compiled code (pytorch#117758)."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional

from ..analysis.compile_sites import CompileSite, dotted_name
from ..findings import Finding
from .base import Example, Rule

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_HOOKS = {"register_forward_hook", "register_forward_pre_hook"}


def _receiver_name(expr: ast.AST) -> Optional[str]:
    """The dotted name a hook's receiver starts with (``model.layers`` for ``model.layers[0].attn``)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)) and dotted_name(expr) is None:
        expr = expr.value
    return dotted_name(expr)


class HookAfterCompile(Rule):
    code = "FR012"
    name = "hook-after-compile"
    summary = "a forward hook registered after the compiled module's first call is silently not run"
    what_it_does = """
Finds `register_forward_hook` / `register_forward_pre_hook` called on a
module compiled in the same function (or at module level), or on one of its
submodules (`model.layer.register_forward_hook`, `model.layers[0]...`), after
the compiled module was first called there (statement order; also a hook
registered in a loop after the compiled call): the module compiled by
`compiled = torch.compile(model)` or `model.compile()`.

A correctness issue, not a recompile. Report only, with the cure: register
the hook before the first call, or set
`torch._dynamo.config.skip_nnmodule_hook_guards = False` (which adds guards
on the hooks, so registering one recompiles). Not reported when the module
sets `skip_nnmodule_hook_guards` itself.
"""
    why_it_recompiles = """
It does not recompile, and that is the problem: by default
(`torch._dynamo.config.skip_nnmodule_hook_guards = True`) dynamo installs no
guard on a module's hook dictionaries, so the graph compiled at the first
call, traced without the hook, keeps being reused and the hook never runs
(pytorch#117758). Measured on torch 2.13 (CPU): a forward hook registered on
the module, or on a submodule, after the first call of `torch.compile(model)`
or `model.compile()` is not called on later calls; registered before the
first call it runs on every call.
"""
    example = """
    compiled = torch.compile(model)
    compiled(x)
    model.register_forward_hook(log_activations)   # never called by compiled(x)
    compiled(x)

Cure (by hand): register the hook before the first call.
"""
    fix_safety = """
No automatic fix: moving the registration before the first call changes when
the hook starts running (it would see the first call too), and turning the
hook guards on changes compile behaviour for the whole process.
"""
    report_only = True
    valid = (
        # registered before the first call: it runs
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.register_forward_hook(lambda m, i, o: None)\n"
        "compiled = torch.compile(model)\ncompiled(torch.ones(1, 2))\n",
        # the hook guards are turned on
        "import torch\nimport torch.nn as nn\ntorch._dynamo.config.skip_nnmodule_hook_guards = False\nmodel = nn.Linear(2, 2)\n"
        "compiled = torch.compile(model)\ncompiled(torch.ones(1, 2))\nmodel.register_forward_hook(lambda m, i, o: None)\n",
        # a different module
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nother = nn.Linear(2, 2)\n"
        "compiled = torch.compile(model)\ncompiled(torch.ones(1, 2))\nother.register_forward_hook(lambda m, i, o: None)\n",
    )
    invalid = (
        Example(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ncompiled = torch.compile(model)\ncompiled(torch.ones(1, 2))\n"
            "model.register_forward_hook(lambda m, i, o: None)\n"
        ),
        # model.compile(), a pre-hook on a submodule, in a function
        Example(
            "import torch.nn as nn\ndef run(x):\n    model = nn.Sequential(nn.Linear(2, 2))\n    model.compile()\n    model(x)\n"
            "    model[0].register_forward_pre_hook(lambda m, i: None)\n    return model(x)\n"
        ),
        # in a loop, after the compiled call
        Example(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ncompiled = torch.compile(model)\nfor step in range(4):\n"
            "    compiled(torch.ones(1, 2))\n    if step == 1:\n        model.register_forward_hook(lambda m, i, o: None)\n"
        ),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        data = source.data
        if b"register_forward" not in data or b"skip_nnmodule_hook_guards" in data:
            return []
        hooks = [
            c for c in source.nodes(ast.Call) if isinstance(c.func, ast.Attribute) and c.func.attr in _HOOKS  # type: ignore[attr-defined]
        ]
        if not hooks:
            return []
        findings: List[Finding] = []
        seen = set()
        for site in model.compile_sites:
            if not site.calls or site.form not in ("wrap", "method"):
                continue
            compiled_module = dotted_name(site.target) if site.form == "wrap" and site.target is not None else site.binding
            if compiled_module is None:
                continue
            # `model = torch.compile(model)`: the name is the wrapper now; its own hooks run
            # outside the compiled code, a submodule's (reached through the wrapper) do not
            wrapper_rebinds = site.form == "wrap" and site.binding == compiled_module
            for hook in hooks:
                if id(hook) in seen:
                    continue
                receiver = _receiver_name(hook.func.value)  # type: ignore[attr-defined]
                if receiver is None:
                    continue
                if not (receiver.startswith(compiled_module + ".") or (receiver == compiled_module and not wrapper_rebinds)):
                    continue
                first = self._call_before(source, site, hook)
                if first is None:
                    continue
                seen.add(id(hook))
                findings.append(
                    self.finding(
                        ctx,
                        hook,
                        f"`{source.segment(hook.func)}` is registered after the compiled `{compiled_module}` was first called (line {first.lineno}): "  # type: ignore[attr-defined]
                        "the graph compiled without the hook keeps being reused and the hook is silently not run "
                        "(pytorch#117758; `torch._dynamo.config.skip_nnmodule_hook_guards` is True by default). A correctness issue, not a recompile: "
                        "register the hook before the first call, or set `skip_nnmodule_hook_guards = False` (adds guards: a new hook then recompiles)",
                    )
                )
        return findings

    @staticmethod
    def _call_before(source, site: CompileSite, hook: ast.Call) -> Optional[ast.Call]:
        """A call of the compiled module in the hook's own function that runs before
        the hook is registered: earlier in statement order."""
        owner = source.enclosing(hook, _FUNCS)
        where = (hook.lineno, hook.col_offset)
        for call in site.calls:
            if (call.lineno, call.col_offset) < where and source.enclosing(call, _FUNCS) is owner:
                return call
        return None
