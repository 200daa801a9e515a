"""FR011 global-rebound: a module-level int or float global read inside a
compiled function and rebound between its calls; torch guards the global's
value (``G['STEP'] == 7``), so each new value recompiles."""

from __future__ import annotations

import ast
import functools
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..analysis.compile_sites import CompileModel, CompileSite, def_first_lines
from ..analysis.constants import number_kind
from ..cst_edits import add_keyword_argument, add_keyword_only_param, name_node
from ..findings import Edit, Finding, Safety
from ..analysis.source import statement_target, walk
from ..trace.causes import CuresCause, GLOBAL
from .base import Example, Rule

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _is_number(node: Optional[ast.AST]) -> bool:
    """A number literal (int or float, not bool), or a sign, arithmetic of them."""
    return number_kind(node) is not None


def _number_like(node: Optional[ast.AST]) -> bool:
    """A number, or arithmetic of a number with names (``0.5 * i``, ``step + 1``)."""
    if _is_number(node):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
        sides = (node.left, node.right)
        return any(_number_like(s) for s in sides) and all(_number_like(s) or isinstance(s, ast.Name) for s in sides)
    return False


def _is_int(node: Optional[ast.AST]) -> bool:
    """An int literal (not bool), a sign of one, or int arithmetic of an int
    literal with names (``i * 2``, ``-1``)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_int(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_OPS):
        sides = (node.left, node.right)
        return any(_is_int(s) for s in sides) and all(_is_int(s) or isinstance(s, ast.Name) for s in sides)
    return False


_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
_NUMBER_OPS = _INT_OPS + (ast.Div,)


def _is_range_loop(loop: Optional[ast.AST]) -> bool:
    it = getattr(loop, "iter", None)
    return isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"


def _range_variable(model: CompileModel, b) -> bool:
    """``STEP = i`` where ``i`` is only ever the variable of ``for i in range(...)``: an int."""
    value = b.value if b.kind == "assign" else None
    if not isinstance(value, ast.Name):
        return False
    bound = model.scopes.bindings_of(value)
    return bool(bound) and all(v.kind == "for" and _is_range_loop(v.value) for v in bound)


class GlobalRebound(Rule):
    code = "FR011"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(GLOBAL),)
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

The cure: pass the value as an argument (automatic dynamic shapes make it a
symbolic int after one change), or keep it in a tensor and update it with
`.fill_()`. For an int global of a module-level function whose every use is
a plain call in this module, the fix does the first (unsafe): the
keyword-only parameter `STEP` on the `def`, `STEP=STEP` at every call (also
of the `def` called uncompiled). A float global is reported with no fix: as
an argument it still compiles one more graph, the same as the global.
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

With `--unsafe-fixes`:

    @torch.compile
    def warmup(x, *, STEP):
        return x * (STEP + 1)

    for _ in range(12):
        STEP += 1
        warmup(x, STEP=STEP)           # 2 graphs
"""
    fix_safety = """
Unsafe: the fix changes the function's signature and every call this module
makes; a call from another module (`from train import step_fn`) is not seen
and would then miss the new required argument. No fix (report only) when the
compiled function is used other than called (passed on, stored), is a method
or nested function, binds the name itself, a call passes `**kwargs`, the name
at a call is not the global, or the global is a float (a tensor updated with
`.fill_()` is the cure there, and it changes what the rest of the program
reads).
"""
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
        Example(
            "import torch\nSTEP = 0\n@torch.compile\ndef f(x):\n    return x * (STEP + 1)\nfor _ in range(12):\n    STEP += 1\n    f(torch.ones(2))\n",
            "import torch\nSTEP = 0\n@torch.compile\ndef f(x, *, STEP):\n    return x * (STEP + 1)\nfor _ in range(12):\n    STEP += 1\n    f(torch.ones(2), STEP=STEP)\n",
            unsafe=True,
        ),
        # a helper with `global` called in the training loop
        Example(
            "import torch\nSTEP = 0\ndef advance():\n    global STEP\n    STEP += 1\n"
            "def step_fn(x):\n    return x * (STEP + 1)\ncompiled = torch.compile(step_fn)\n"
            "def train(x):\n    for _ in range(12):\n        advance()\n        x = compiled(x)\n    return x\n",
            "import torch\nSTEP = 0\ndef advance():\n    global STEP\n    STEP += 1\n"
            "def step_fn(x, *, STEP):\n    return x * (STEP + 1)\ncompiled = torch.compile(step_fn)\n"
            "def train(x):\n    for _ in range(12):\n        advance()\n        x = compiled(x, STEP=STEP)\n    return x\n",
            unsafe=True,
        ),
        # a float global set in the loop
        Example("import torch\nSCALE = 1.0\n@torch.compile\ndef f(x):\n    return x * SCALE\nfor i in range(12):\n    SCALE = 0.5 * i\n    f(torch.ones(2))\n"),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        module = model.scopes.module
        findings: List[Finding] = []
        done: Set[Tuple[int, str]] = set()
        for site in model.compile_sites:
            fn = site.target_def
            if not site.calls or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in walk(fn):
                if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                    continue
                if (id(fn), node.id) in done or model.scopes.resolved.get(node) is not module:
                    continue
                bindings = module.bindings.get(node.id, [])
                if not bindings or not all(self._numeric(b) or _range_variable(model, b) for b in bindings):
                    continue
                if not any(b.kind in ("assign", "annassign") and _is_number(b.value) for b in bindings):
                    continue  # no binding is plainly a number
                why = self._rebound(model, site, bindings)
                if why is None:
                    continue
                done.add((id(fn), node.id))
                head = (
                    f"`{fn.name}` (compiled) reads the module global `{node.id}`, which {why}: torch guards the global's value "
                    f"(`G['{node.id}'] == ...`), so each new value recompiles (an int: every value, until the limit of 8, then eager; "
                    f"a float: once more)"
                )
                edits, calls, why_not = self._argument_fix(ctx, site, fn, node.id, bindings)
                if edits:
                    message = (
                        f"{head}; pass `{node.id}` as an argument (automatic dynamic makes it a symbolic int after one change); "
                        f"fix is unsafe: it adds the keyword-only parameter `{node.id}` to `{fn.name}` and passes `{node.id}={node.id}` "
                        f"at its {calls} call{'s' if calls != 1 else ''} in this module (calls from other modules are not seen)"
                    )
                else:
                    message = f"{head}; pass `{node.id}` as an argument, or keep it in a tensor updated with `.fill_()` (no automatic fix: {why_not})"
                findings.append(
                    self.finding(
                        ctx,
                        node,
                        message,
                        edits=edits,
                        safety=Safety.UNSAFE if edits else None,
                        title=f"pass `{node.id}` to `{fn.name}` as an argument",
                        feeds=def_first_lines(fn),
                    )
                )
        return findings

    # -- the fix: pass the global as a keyword-only argument ---------------------
    def _argument_fix(self, ctx, site: CompileSite, fn: ast.AST, name: str, bindings) -> Tuple[List[Edit], int, str]:
        """(edits, calls edited, why not): ``def f(x, *, NAME)`` and
        ``NAME=NAME`` at every call of the compiled function (and of its
        ``def`` called uncompiled), when all of them are plain calls in this
        module where ``NAME`` is the global."""
        model, source = ctx.model, ctx.source
        scopes = model.scopes
        module = scopes.module
        if not all(self._numeric(b, ints=True) or _range_variable(model, b) for b in bindings):
            return [], 0, "a float global recompiles once more as an argument too; keep it in a tensor"
        if source.parent(fn) is not source.tree:
            return [], 0, f"`{fn.name}` is not a module-level function"
        fn_scope = scopes.of_node.get(fn)
        args = fn.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
        if name in params or fn_scope is None or name in fn_scope.globals or name in fn_scope.bindings:
            return [], 0, f"`{fn.name}` binds `{name}` itself"
        calls: Dict[int, ast.Call] = {}
        for call in site.calls:
            if not isinstance(call.func, ast.Name):
                return [], 0, "a call of the compiled function is not a plain name"
            calls[id(call)] = call
        names = {call.func.id for call in calls.values()} | {fn.name}
        inside = {id(n) for n in walk(site.node)}  # `torch.compile(f)` reads `f`
        for ref_name in sorted(names):
            if module.bindings.get(ref_name, []) and len(module.bindings[ref_name]) > 1 and ref_name != fn.name:
                return [], 0, f"`{ref_name}` is bound more than once"
            for ref in module.references.get(ref_name, ()):
                if id(ref) in inside:
                    continue
                call = source.parent(ref)
                if not (isinstance(call, ast.Call) and call.func is ref):
                    return [], 0, f"`{ref_name}` is used other than called (line {ref.lineno})"
                calls[id(call)] = call
        if not calls:
            return [], 0, "no call of it is seen"
        for call in calls.values():
            if any(kw.arg is None or kw.arg == name for kw in call.keywords):
                return [], 0, f"a call passes `**kwargs` or `{name}=` (line {call.lineno})"
            if any(a is fn for a in source.ancestors(call)):
                return [], 0, f"`{fn.name}` calls itself"
            if scopes.lookup(scopes.scope_of(call.func), name) is not module:
                return [], 0, f"`{name}` is not the global at the call on line {call.lineno}"
        edits = [Edit(statement_target(source, fn), functools.partial(add_keyword_only_param, name, None))]
        edits.extend(
            Edit(source.target(call, "Call"), functools.partial(add_keyword_argument, name, functools.partial(name_node, name)))
            for call in sorted(calls.values(), key=lambda c: (c.lineno, c.col_offset))
        )
        return edits, len(calls), ""

    @staticmethod
    def _numeric(b, ints: bool = False) -> bool:
        """The binding binds a number (``ints``: an int)."""
        if b.kind in ("assign", "annassign"):
            return (_is_int if ints else _number_like)(b.value)
        if b.kind == "augassign":
            aug, ops = b.value, (_INT_OPS if ints else _NUMBER_OPS)
            return isinstance(aug, ast.AugAssign) and isinstance(aug.op, ops) and ((_is_int if ints else _is_number)(aug.value) or isinstance(aug.value, ast.Name))
        if b.kind == "for":
            return _is_range_loop(b.value) and isinstance(b.value.target, ast.Name)
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
