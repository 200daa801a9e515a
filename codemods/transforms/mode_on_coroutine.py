"""FR021 mode-decorator-on-coroutine: ``@torch.inference_mode()`` (or
``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``autocast``) on an
``async def`` sets the mode only while the coroutine object is made, not
while its body runs: torch's context-manager decorators wrap plain
functions and generators, and a coroutine function's call returns at once.
Tensors the body makes are then made outside the mode, and where they reach
compiled code that other calls gave tensors made under it, the tensor guards
see other dispatch keys (an inference tensor or not) and compile again
(lmdeploy before e81c0dfa, PR #3513: ``_async_loop_background`` decorated
``@torch.inference_mode()``; its ``next_token_ids`` became the next decode
step's ``input_ids``, one recompile per rank)."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional

from .._lazy import cst

from ..analysis.source import statement_target
from ..findings import Edit, Finding, Safety
from ..cst_edits import is_docstring
from ..trace.causes import DISPATCH, CuresCause
from .base import Example, Rule

#: the context-manager decorators whose mode a coroutine's body never sees
MODES = (
    "torch.inference_mode",
    "torch.no_grad",
    "torch.enable_grad",
    "torch.set_grad_enabled",
    "torch.autograd.grad_mode.inference_mode",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.enable_grad",
    "torch.autograd.grad_mode.set_grad_enabled",
    "torch.autocast",
    "torch.amp.autocast",
    "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast",
)


class ModeOnCoroutine(Rule):
    code = "FR021"
    #: the trace shows an inference tensor and a normal one at the same
    #: input; which code made it it cannot tell, so `run` takes this rule's
    #: findings anywhere in an implicated file (applied with --unsafe-fixes,
    #: kept only if the rerun compiles fewer graphs with the same output)
    cures = (CuresCause(DISPATCH, inference_only=True),)
    name = "mode-decorator-on-coroutine"
    summary = "`@torch.inference_mode()` / `@torch.no_grad()` on an `async def`: the body runs outside the mode"
    what_it_does = """
Finds `async def` functions decorated with `torch.inference_mode()`,
`torch.no_grad()`, `torch.enable_grad()`, `torch.set_grad_enabled(...)` or
`torch.autocast(...)`, in a file that compiles something (the body's
tensors and calls can reach compiled code). The decorator enters the mode
around the call that makes the coroutine object, which returns at once; the
body runs later, when the coroutine is awaited, under whatever mode the
caller is in.
"""
    why_it_recompiles = """
Tensors made in the body are made outside the mode the code asks for: not
inference tensors under `@torch.inference_mode()`, tracked by autograd under
`@torch.no_grad()`. Compiled code that other calls gave tensors made under
the mode guards their dispatch keys (`ADInplaceOrView`, autograd keys) and
the grad mode: a tensor from the coroutine fails those guards and the code
compiles again. Measured on torch 2.13 (CPU, counting backend): lmdeploy's
TP decode loop before e81c0dfa (PR #3513), 2 graphs; with the mode entered
in the body, 1.
"""
    example = """
    @torch.inference_mode()                      # only around making the coroutine
    async def _async_loop_background(self, in_que):
        for forward_inputs in in_que:
            await self._async_step_background(**forward_inputs)

    # fixed:
    async def _async_loop_background(self, in_que):
        with torch.inference_mode():
            for forward_inputs in in_que:
                await self._async_step_background(**forward_inputs)
"""
    fix_safety = """
Unsafe: the body then runs under the mode it names, which changes what it
computes (inference tensors cannot be saved for backward later, autocast
changes dtypes), and the mode is thread-local: while the body awaits, other
coroutines of the event loop run under it too. Where the body awaits, a
narrower `with` around the tensors it makes may be what the code needs (the
project's own fix wrapped one `torch.empty_like`). `run --fix
--unsafe-fixes` applies it where the trace shows an inference tensor and a
normal one at one input, and keeps it only if fewer graphs compile with the
same output.
"""
    reads = "ast"
    triggers = (b"async def",)
    valid = (
        # a plain function: the decorator covers its body
        "import torch\n@torch.inference_mode()\ndef step(model, x):\n    return model(x)\nm = torch.compile(torch.nn.Linear(2, 2))\n",
        # the mode entered inside the coroutine
        "import torch\nasync def loop(model, xs):\n    with torch.inference_mode():\n        for x in xs:\n            model(x)\nm = torch.compile(torch.nn.Linear(2, 2))\n",
        # another decorator on a coroutine
        "import functools\nimport torch\n@functools.lru_cache\nasync def loop(x):\n    return x\nm = torch.compile(torch.nn.Linear(2, 2))\n",
        # nothing compiled in the file
        "import torch\n@torch.no_grad()\nasync def push(weights, x):\n    weights.copy_(x)\n",
    )
    invalid = (
        Example(
            "import torch\nclass Agent:\n    @torch.inference_mode()\n    async def loop(self, xs):\n        \"\"\"The decode loop.\"\"\"\n"
            "        for x in xs:\n            await self.step(x)\n    async def step(self, x):\n        return self.model(torch.empty_like(x))\n"
            "m = torch.compile(torch.nn.Linear(2, 2))\n",
            "import torch\nclass Agent:\n    async def loop(self, xs):\n        \"\"\"The decode loop.\"\"\"\n        with torch.inference_mode():\n"
            "            for x in xs:\n                await self.step(x)\n    async def step(self, x):\n        return self.model(torch.empty_like(x))\n"
            "m = torch.compile(torch.nn.Linear(2, 2))\n",
            unsafe=True,
        ),
        # a bare decorator (torch accepts `@torch.no_grad` without a call), under another one
        Example(
            "import functools\nimport torch\n@functools.wraps(print)\n@torch.no_grad\nasync def push(weights, x):\n    weights.copy_(x)\n"
            "step = torch.compile(lambda w: w * 2)\n",
            "import functools\nimport torch\n@functools.wraps(print)\nasync def push(weights, x):\n    with torch.no_grad():\n        weights.copy_(x)\n"
            "step = torch.compile(lambda w: w * 2)\n",
            unsafe=True,
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        if not model.compile_sites:
            return []
        findings: List[Finding] = []
        for fn in ctx.source.nodes(ast.AsyncFunctionDef):
            for index, decorator in enumerate(fn.decorator_list):
                mode = self._mode(model, decorator)
                if mode is None:
                    continue
                findings.append(self._finding(ctx, fn, index, decorator, mode))
                break
        return sorted(findings, key=lambda f: (f.line, f.column))

    @staticmethod
    def _mode(model, decorator: ast.AST) -> Optional[str]:
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        names = model.qualified_names(func)
        return next((q for q in sorted(names) if q in MODES), None)

    def _finding(self, ctx, fn: ast.AsyncFunctionDef, index: int, decorator: ast.AST, mode: str) -> Finding:
        shown = ctx.source.segment(decorator).strip()
        message = (
            f"`@{shown}` on the coroutine function `{fn.name}` enters {mode.rsplit('.', 1)[-1].replace('_', ' ')} only while the coroutine "
            "object is made: its body runs later, outside it, so the tensors it makes carry other dispatch keys (and grad mode) than "
            "those made under it, and compiled code given both compiles again; enter the mode in the body (`with ...:`)"
        )

        def apply(node: cst.CSTNode):
            assert isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock)
            removed = node.decorators[index]
            item = removed.decorator if isinstance(removed.decorator, cst.Call) else cst.Call(func=removed.decorator)
            body = list(node.body.body)
            keep = 1 if body and is_docstring(body[0]) else 0
            wrapped = cst.With(items=[cst.WithItem(item=item)], body=cst.IndentedBlock(body=body[keep:]))
            decorators = [d for i, d in enumerate(node.decorators) if i != index]
            changes = {"decorators": decorators, "body": node.body.with_changes(body=body[:keep] + [wrapped])}
            if not decorators and index == 0:
                # the def takes the decorator's place (its comments and blank lines)
                changes["leading_lines"] = list(node.leading_lines) + list(removed.leading_lines)
            return node.with_changes(**changes)

        return self.finding(
            ctx, decorator, message, edits=[Edit(statement_target(ctx.source, fn), apply)], safety=Safety.UNSAFE,
            title=f"enter `{shown}` in the body of `{fn.name}`",
            unsafe_because="the body then runs under the mode (another result where it matters), and while it awaits other coroutines run under it too",
        )

