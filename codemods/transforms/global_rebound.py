"""FR011 global-rebound: a module-level int or float global read inside a
compiled function and rebound between its calls; torch guards the global's
value (``G['STEP'] == 7``), so each new value recompiles."""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Set, Tuple

from ..compile_sites import CompileModel, CompileSite
from ..findings import Finding
from .base import Example, Rule

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _is_number(node: Optional[ast.AST]) -> bool:
    """A number literal (int or float, not bool), or a sign, arithmetic of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _number_like(node: Optional[ast.AST]) -> bool:
    """A number, or arithmetic of a number with names (``0.5 * i``, ``step + 1``)."""
    if _is_number(node):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
        sides = (node.left, node.right)
        return any(_number_like(s) for s in sides) and all(_number_like(s) or isinstance(s, ast.Name) for s in sides)
    return False


class GlobalRebound(Rule):
    code = "FR011"
    name = "global-rebound"
    summary = "a module-level int or float global read by compiled code is rebound between its calls"
    what_it_does = """
Finds a module-level global whose every binding is a number (`STEP = 0`,
`STEP += 1`, `SCALE = 0.5 * i`, `for STEP in range(12)` at module level; one
of them a plain number literal), read
inside the body of a compiled function whose `def` is visible in the module,
when the global is rebound between calls of the compiled function: a function
that declares `global STEP` and assigns it is called in a loop that also
calls the compiled function, or the assignment itself sits in a loop (in a
function with `global STEP`, or at module level) around a compiled call.
A global assigned once (a config constant) is not reported, nor a bool
(a flag has two values at most).

Report only, with the cure: pass the value as an argument (automatic dynamic
shapes make it a symbolic int after one change), or keep it in a tensor and
update it with `.fill_()`.
"""
    why_it_recompiles = """
Dynamo reads the global's value while tracing and guards on it
(`G['STEP'] == 7`): an int global is specialised, so each new value fails the
guard and compiles a new graph; a module global never becomes dynamic.
Measured on torch 2.13 (CPU, counting backend, 12 steps): an int global
rebound every step compiles 8 graphs and then hits the recompile limit
(eager from then on); a float global compiles 2 graphs; the same int passed
as an argument compiles 2 graphs (automatic dynamic).
"""
    example = """
    STEP = 0

    @torch.compile
    def warmup(x):
        return x * (STEP + 1)          # guarded: G['STEP'] == 0

    for _ in range(12):
        STEP += 1
        warmup(x)                      # 8 graphs, then eager

Cure (by hand):

    @torch.compile
    def warmup(x, step):
        return x * (step + 1)

    for step in range(12):
        warmup(x, step)                # 2 graphs
"""
    fix_safety = """
No automatic fix: passing the global as an argument changes the function's
signature and every call (also calls in other modules), and a tensor global
changes what the rest of the program reads (`STEP` would no longer be an int
for `print`, `range`, comparisons).
"""
    report_only = True
    valid = (
        # a config constant: assigned once
        "import torch\nSCALE = 3\n@torch.compile\ndef f(x):\n    return x * SCALE\nfor _ in range(12):\n    f(torch.ones(2))\n",
        # the value is passed as an argument
        "import torch\n@torch.compile\ndef f(x, step):\n    return x * step\nSTEP = 0\nfor _ in range(12):\n    STEP += 1\n    f(torch.ones(2), STEP)\n",
        # a bool flag
        "import torch\nDEBUG = False\n@torch.compile\ndef f(x):\n    return x * 2 if DEBUG else x\nfor i in range(12):\n    DEBUG = i > 5\n    f(torch.ones(2))\n",
        # rebound, but the compiled function does not read it
        "import torch\nSTEP = 0\n@torch.compile\ndef f(x):\n    return x * 2\nfor _ in range(12):\n    STEP += 1\n    f(torch.ones(2))\n",
    )
    invalid = (
        Example("import torch\nSTEP = 0\n@torch.compile\ndef f(x):\n    return x * (STEP + 1)\nfor _ in range(12):\n    STEP += 1\n    f(torch.ones(2))\n"),
        # a helper with `global` called in the training loop
        Example(
            "import torch\nSTEP = 0\ndef advance():\n    global STEP\n    STEP += 1\n"
            "def step_fn(x):\n    return x * (STEP + 1)\ncompiled = torch.compile(step_fn)\n"
            "def train(x):\n    for _ in range(12):\n        advance()\n        x = compiled(x)\n    return x\n"
        ),
        # a float global set in the loop
        Example("import torch\nSCALE = 1.0\n@torch.compile\ndef f(x):\n    return x * SCALE\nfor i in range(12):\n    SCALE = 0.5 * i\n    f(torch.ones(2))\n"),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        module = model.scopes.module
        findings: List[Finding] = []
        done: Set[Tuple[int, str]] = set()
        for site in model.compile_sites:
            fn = site.target_def
            if not site.calls or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                    continue
                if (id(fn), node.id) in done or model.scopes.resolved.get(node) is not module:
                    continue
                bindings = module.bindings.get(node.id, [])
                if not bindings or not all(self._numeric(b) for b in bindings):
                    continue
                if not any(b.kind in ("assign", "annassign") and _is_number(b.value) for b in bindings):
                    continue  # no binding is plainly a number
                why = self._rebound(model, site, bindings)
                if why is None:
                    continue
                done.add((id(fn), node.id))
                findings.append(
                    self.finding(
                        ctx,
                        node,
                        f"`{fn.name}` (compiled) reads the module global `{node.id}`, which {why}: torch guards the global's value "
                        f"(`G['{node.id}'] == ...`), so each new value recompiles (an int: every value, until the limit of 8, then eager; "
                        f"a float: once more); pass `{node.id}` as an argument, or keep it in a tensor updated with `.fill_()` (no automatic fix)",
                    )
                )
        return findings

    @staticmethod
    def _numeric(b) -> bool:
        """Every binding of the global binds a number."""
        if b.kind in ("assign", "annassign"):
            return _number_like(b.value)
        if b.kind == "augassign":
            aug = b.value
            return isinstance(aug, ast.AugAssign) and isinstance(aug.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)) and (
                _is_number(aug.value) or isinstance(aug.value, ast.Name)
            )
        if b.kind == "for":
            loop = b.value
            it = getattr(loop, "iter", None)
            return isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
        return False

    def _rebound(self, model: CompileModel, site: CompileSite, bindings) -> Optional[str]:
        """How the global is rebound between calls of the compiled function, or None."""
        source = model.source
        module = model.scopes.module
        for b in bindings:
            stmt = b.node  # the stored name: its ancestors hold the statement and the loops around it
            owner = source.enclosing(stmt, _FUNCS)
            # the rebinding sits in a loop (of its own function) that calls the compiled function
            loop = self._loop_with_call(source, site, stmt, owner)
            if loop is not None:
                return f"is rebound in the loop on line {loop.lineno} that calls it"
            # the rebinding is in a module-level function called in such a loop
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and source.parent(owner) is source.tree:
                for ref in module.references.get(owner.name, ()):
                    call = source.parent(ref)
                    if not (isinstance(call, ast.Call) and call.func is ref):
                        continue
                    caller = source.enclosing(call, _FUNCS)
                    loop = self._loop_with_call(source, site, call, caller)
                    if loop is not None:
                        return f"`{owner.name}()` rebinds (line {b.line}), called in the loop on line {loop.lineno} that also calls it"
        return None

    @staticmethod
    def _loop_with_call(source, site: CompileSite, node: ast.AST, owner: Optional[ast.AST]) -> Optional[ast.AST]:
        """The innermost loop around ``node`` (within ``owner``) that also holds a call of the compiled function."""
        for anc in source.ancestors(node):
            if anc is owner:
                return None
            if isinstance(anc, _LOOPS):
                for call in site.calls:
                    if source.enclosing(call, _FUNCS) is owner and any(a is anc for a in source.ancestors(call)):
                        return anc
        return None
