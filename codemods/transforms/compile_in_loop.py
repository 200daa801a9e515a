"""FR008 compile-in-loop: ``torch.compile`` inside a loop body compiles a new
callable each iteration; it recompiles when that callable (a closure over the
loop's variables) or its backend (a new object) differs each time."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional

from ..analysis.compile_sites import CompileModel, CompileSite, dotted_name
from ..findings import Finding
from ..analysis.variation import assigned_names
from ..analysis.source import walk
from .base import Example, Rule


class CompileInLoop(Rule):
    code = "FR008"
    name = "compile-in-loop"
    summary = "`torch.compile` in a loop body compiles a closure over the loop's variables, or gets a new backend, each iteration"
    what_it_does = """
Finds a `torch.compile` (any form the compile-site model knows: a wrap, a
decorator on a `def` in the loop, an immediate call) inside a `for` or `while`
body, whose compiled callable is called, when each iteration compiles
something torch cannot reuse:

* a closure over the loop: a `lambda` or a `def` in the loop body whose body
  reads a name the loop rebinds (`torch.compile(lambda x: x * i)` in
  `for i in ...`);
* a new backend object every iteration: `backend=` a `lambda`, a
  `functools.partial(...)` or an instance of a class of the module, built in
  the loop, while nothing else of the compile changes with the loop.

Report only. Not reported (measured on torch 2.13: no recompile): a
loop-invariant compile in a loop (the same function, a string backend):
torch keeps its cache on the function's code object, so a second
`torch.compile(fn)` of the same `fn` reuses the first graph; a loop that
compiles a different callable each time (`for block in model.layers:
block.compile()`, regional compilation); a loop that calls
`torch._dynamo.reset()` (benchmarks that compile each variant on purpose).
"""
    why_it_recompiles = """
The compiled code is the closure's code object, the same every iteration;
the value it captures (`i`) is guarded (`fn.__closure__[0].cell_contents == 0`,
or `G['i'] == 0` at module level), so each iteration fails the guard and
compiles again: measured on torch 2.13 (CPU, counting backend, 12
iterations), a `lambda` reading an int loop variable compiles 8 graphs and
then hits the recompile limit (eager from then on); a float captured value
turns dynamic after one change (2 graphs). A backend object that is new
each iteration fails the backend guard (`BACKEND_MATCH`): also 8 graphs and
the limit. The same compile with a string backend, or of a closure that reads
nothing the loop changes: 1 graph.
"""
    example = """
    for i in range(12):
        f = torch.compile(lambda x: x * 2 + i)   # a new closure over `i`
        f(x)                                      # 8 graphs, then eager

Cure (by hand: the value becomes an argument, the compile moves out):

    f = torch.compile(lambda x, i: x * 2 + i)
    for i in range(12):
        f(x, i)                                   # 2 graphs (automatic dynamic)
"""
    fix_safety = """
No automatic fix. Turning a captured value into an argument changes the
function's signature and every call; moving a compile that reads the loop's
variables out of the loop changes what it computes. For a new backend object
per iteration, building it once before the loop changes how often its
constructor runs (a stateful backend, a counter, sees every iteration), so it
is left to the author. A loop-invariant compile needs no cure on torch 2.13
(it does not recompile), so hoisting it is not offered either.
"""
    report_only = True
    valid = (
        # loop-invariant: the same function, a string backend (no recompile on 2.13)
        "import torch\ndef g(x):\n    return x * 2\nx = torch.ones(3)\nfor i in range(12):\n    f = torch.compile(g)\n    f(x)\n",
        # a closure that reads nothing the loop changes
        "import torch\nx = torch.ones(3)\nfor i in range(12):\n    f = torch.compile(lambda x: x * 2)\n    f(x)\n",
        # regional compilation: a different module each iteration
        "import torch\nimport torch.nn as nn\nlayers = nn.ModuleList([nn.Linear(2, 2) for _ in range(4)])\n"
        "for i, layer in enumerate(layers):\n    layers[i] = torch.compile(layer)\n",
        # a benchmark that resets dynamo for each variant
        "import torch\nx = torch.ones(3)\nfor i in range(4):\n    torch._dynamo.reset()\n    f = torch.compile(lambda x: x * i)\n    f(x)\n",
        # the lambda's own parameter shadows the loop variable
        "import torch\nx = torch.ones(3)\nfor i in range(12):\n    f = torch.compile(lambda x, i=1: x * i)\n    f(x)\n",
    )
    invalid = (
        Example("import torch\nx = torch.ones(3)\nfor i in range(12):\n    f = torch.compile(lambda x: x * 2 + i)\n    f(x)\n"),
        # a def in the loop body, compiled by its decorator
        Example(
            "import torch\n\ndef run(x, scales):\n    for s in scales:\n        @torch.compile\n        def step(x):\n            return x * s\n"
            "        x = step(x)\n    return x\n"
        ),
        # a new backend object per iteration
        Example(
            "import functools\nimport torch\ndef my_backend(gm, inputs, mode):\n    return gm.forward\ndef g(x):\n    return x * 2\n"
            "x = torch.ones(3)\nfor step in range(12):\n    f = torch.compile(g, backend=functools.partial(my_backend, mode='a'))\n    f(x)\n"
        ),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        findings: List[Finding] = []
        for site in model.compile_sites:
            if not site.calls:
                continue  # never called here: nothing compiles
            loop = self._loop_of(source, site)
            if loop is None or self._resets(model, loop):
                continue
            varying = assigned_names(loop)
            read = self._closure_reads(model, site, loop, varying)
            if read:
                names = ", ".join(f"`{n}`" for n in read)
                findings.append(
                    self.finding(
                        ctx,
                        site.node,
                        f"compiled in the loop on line {loop.lineno}: each iteration compiles a new closure whose body reads {names}, "
                        "which the loop changes; torch guards the captured value, so a new value recompiles (an int: every iteration, "
                        "until the limit of 8, then eager; a float: once more): "
                        f"pass {names} as an argument and compile once before the loop (no automatic fix)",
                    )
                )
                continue
            backend = site.option("backend")
            if backend is not None and self._fresh_object(model, backend.value) and not self._reads_loop(site, varying):
                findings.append(
                    self.finding(
                        ctx,
                        backend,
                        f"compiled in the loop on line {loop.lineno} with a new backend object each iteration "
                        f"(`{source.segment(backend.value)}`): each fails the backend guard and recompiles (the limit is 8, then eager): "
                        "build the backend once before the loop (no automatic fix)",
                    )
                )
        return findings

    @staticmethod
    def _loop_of(source, site: CompileSite) -> Optional[ast.AST]:
        """The innermost loop around the compile, in the function that runs it."""
        start = site.statement if site.form == "decorator" else site.node
        loops = source.loops_around(start)  # type: ignore[arg-type]
        return loops[0] if loops else None

    @staticmethod
    def _resets(model: CompileModel, loop: ast.AST) -> bool:
        """Does the loop call ``torch._dynamo.reset()`` / ``torch.compiler.reset()``?"""
        if b"reset" not in model.source.data:
            return False
        for node in walk(loop):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reset":
                if model.qualified_names(node.func) & {"torch._dynamo.reset", "torch.compiler.reset"}:
                    return True
        return False

    @staticmethod
    def _closure_reads(model: CompileModel, site: CompileSite, loop: ast.AST, varying) -> List[str]:
        """Names the compiled closure reads from the loop's scope that the loop rebinds."""
        source = model.source
        body: Optional[ast.AST] = None
        if isinstance(site.target, ast.Lambda):
            body = site.target
        elif isinstance(site.target_def, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(a is loop for a in source.ancestors(site.target_def)):
            body = site.target_def
        if body is None:
            return []
        outer = source.enclosing(loop, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        outer_scope = model.scopes.of_node.get(outer) if outer is not None else model.scopes.module
        found: List[str] = []
        for node in walk(body):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in varying and node.id not in found:
                if model.scopes.resolved.get(node) is outer_scope:
                    found.append(node.id)
        return found

    @staticmethod
    def _fresh_object(model: CompileModel, value: ast.AST) -> bool:
        """A backend expression that builds a new object each time it runs."""
        if isinstance(value, ast.Lambda):
            return True
        if isinstance(value, ast.Call):
            names = model.qualified_names(value.func)
            if names & {"functools.partial"}:
                return True
            cls = model.classes.get(dotted_name(value.func) or "")
            return cls is not None
        return False

    @staticmethod
    def _reads_loop(site: CompileSite, varying) -> bool:
        """Does the compile read a name the loop changes (a different callable or options each time)?"""
        call = site.options_call if site.options_call is not None else site.node
        parts = [call] + ([site.target] if site.target is not None and site.form != "decorator" else [])
        for part in parts:
            for node in walk(part):  # type: ignore[arg-type]
                if isinstance(node, ast.Name) and node.id in varying:
                    return True
        return False
