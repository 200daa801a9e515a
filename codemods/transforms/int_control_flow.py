"""FR009 int-control-flow: an int argument of a compiled function sets a
``range()`` length or indexes a Python list in its body, and the calls pass
values that change."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..analysis.compile_sites import CompileModel, CompileSite
from ..findings import Finding
from ..analysis.variation import loop_assignments, loop_names, varies_as_number, loop_variants
from ..analysis.source import walk
from .base import Example, Rule

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LISTS = {"builtins.list", "builtins.tuple"}


class IntControlFlow(Rule):
    code = "FR009"
    name = "int-control-flow"
    summary = "an int argument sets a `range()` length or indexes a Python list inside compiled code, with values that change"
    what_it_does = """
Finds a compiled function (its `def` visible in the module) with a parameter
that its body uses as the length of a Python loop (`for _ in range(n)`,
`range(0, n)`) or as the index into a Python list or tuple (`self.scales[n]`,
`table[n]`, the container a list display, comprehension, `list(...)`,
`tuple(...)` or `nn.ModuleList`), when a call in the module passes a value
that changes between calls: computed from the variable of a loop around the
call that runs over numbers (`for n in range(1, 13)`, a literal list of
ints), or a counter the loop steps (`n += 1`). A value only re-read in a loop
(`n = group["ns_steps"]` per param group) is not evidence. Report only: bucket the values (round `n` up to a few
sizes), or move the loop or the lookup out of the compiled code.

`if n > k` alone is not reported: measured on torch 2.13, a compare of a
dynamic int installs one guard per branch (2-3 graphs for 12 values, no storm).
"""
    why_it_recompiles = """
Dynamo unrolls a Python loop: `range(n)` needs the concrete `n`, so the int is
specialised and every new value is a new graph; a Python list indexed by `n`
needs the concrete index too. Automatic dynamic shapes cannot help, and
neither can `dynamic=True`. Measured on torch 2.13 (CPU, counting backend, 12
values): `for _ in range(n)` 8 graphs then the recompile limit (eager), with
`dynamic=None` and with `dynamic=True`; `x + table[n]` with `table` a list: 8
graphs, the limit.
"""
    example = """
    @torch.compile
    def f(x, n):
        for _ in range(n):     # unrolled: n is a constant of the graph
            x = x * 2
        return x

    for n in range(1, 13):
        f(x, n)                # 8 graphs, then eager
"""
    fix_safety = """
No automatic fix: the cure changes the program's structure (a tensor loop,
`torch.cond`/`while_loop`, a bucketed `n` with padding, or the loop moved
out of the compiled function), and only its author knows which keeps the
results the same.
"""
    report_only = True
    valid = (
        # the int never changes
        "import torch\n@torch.compile\ndef f(x, n):\n    for _ in range(n):\n        x = x * 2\n    return x\nfor _ in range(12):\n    f(torch.ones(2), 3)\n",
        # a compare only: bounded guards
        "import torch\n@torch.compile\ndef f(x, n):\n    if n > 5:\n        return x * 2\n    return x + n\nfor n in range(12):\n    f(torch.ones(2), n)\n",
        # arithmetic only: automatic dynamic
        "import torch\n@torch.compile\ndef f(x, n):\n    return x * n\nfor n in range(12):\n    f(torch.ones(2), n)\n",
        # an index into a tensor: a symbolic index
        "import torch\nw = torch.ones(12, 2)\n@torch.compile\ndef f(x, n):\n    return x + w[n]\nfor n in range(12):\n    f(torch.ones(2), n)\n",
    )
    invalid = (
        Example("import torch\n@torch.compile\ndef f(x, n):\n    for _ in range(n):\n        x = x * 2\n    return x\nfor n in range(1, 13):\n    f(torch.ones(2), n)\n"),
        Example(
            "import torch\ntable = [torch.ones(2) * k for k in range(12)]\n@torch.compile\ndef f(x, k):\n    return x + table[k]\n"
            "def run(x):\n    for step in range(12):\n        x = f(x, step)\n    return x\n"
        ),
    )

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        findings: List[Finding] = []
        done: Set[Tuple[int, str]] = set()
        for site in model.compile_sites:
            for call in site.calls:
                fn = site.def_of(call)
                if not isinstance(fn, _FUNCS):
                    continue
                uses = self._uses(model, fn)
                if not uses:
                    continue
                for param, (use, how) in uses.items():
                    if (id(fn), param) in done:
                        continue
                    arg = self._argument(model, site, fn, call, param)
                    if arg is None:
                        continue
                    why = self._varies(model, call, arg)
                    if why is None:
                        continue
                    done.add((id(fn), param))
                    findings.append(
                        self.finding(
                            ctx,
                            call,
                            f"`{fn.name}` (compiled) uses its int argument `{param}` as {how} (line {use.lineno}), and this call passes a value that changes "  # type: ignore[attr-defined]
                            f"({why}): torch specialises the int, each value is a new graph (the limit is 8, then eager) even with `dynamic=True`; "
                            "bucket the values or move the loop out of the compiled code (no automatic fix)",
                        )
                    )
        return findings

    def _uses(self, model: CompileModel, fn: ast.AST) -> Dict[str, Tuple[ast.AST, str]]:
        """param -> (the first use that specialises it, what it is), cached per function."""
        cache = getattr(fn, "_fr009_uses", None)
        if cache is not None:
            return cache
        args = fn.args  # type: ignore[attr-defined]
        params = {a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)} - {"self", "cls"}
        found: Dict[str, Tuple[ast.AST, str]] = {}
        fn_scope = model.scopes.of_node.get(fn)
        for node in walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and model.scopes.is_builtin(node.func):
                for a in node.args:
                    if isinstance(a, ast.Name) and a.id in params and model.scopes.resolved.get(a) is fn_scope and a.id not in found:
                        found[a.id] = (node, "a `range()` bound")
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                index = node.slice
                if isinstance(index, ast.Name) and index.id in params and model.scopes.resolved.get(index) is fn_scope and index.id not in found:
                    if self._is_list(model, node.value, fn):
                        found[index.id] = (node, f"an index into the Python list `{model.source.segment(node.value)}`")
        # a parameter rebound in the body is not the argument any more
        for name in list(found):
            if fn_scope is not None and any(b.kind != "param" for b in fn_scope.bindings.get(name, [])):
                del found[name]
        fn._fr009_uses = found  # type: ignore[attr-defined]
        return found

    @staticmethod
    def _is_list(model: CompileModel, expr: ast.AST, fn: ast.AST) -> bool:
        """Is ``expr`` visibly a Python list or tuple (or an ``nn.ModuleList``)?"""
        values: List[ast.AST] = []
        if isinstance(expr, ast.Name):
            bindings = model.scopes.bindings_of(expr)
            if not bindings or any(b.kind not in ("assign", "annassign") for b in bindings):
                return False
            values = [b.value for b in bindings if b.value is not None]
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = model.source.enclosing(fn, ast.ClassDef)
            if isinstance(cls, ast.ClassDef):
                values = model.self_attr_values(cls, expr.attr)
        if not values:
            return False
        for value in values:
            if isinstance(value, (ast.List, ast.Tuple, ast.ListComp)):
                continue
            if isinstance(value, ast.Call):
                names = model.qualified_names(value.func)
                if names & _LISTS or any(q.startswith("torch.nn.") and q.endswith(".ModuleList") for q in names):
                    continue
            return False
        return True

    @staticmethod
    def _varies(model: CompileModel, call: ast.Call, value: ast.AST) -> Optional[str]:
        """Evidence that the int passed at ``call`` takes several values: it is
        computed from the variable of a loop around the call that runs over
        numbers (``for n in range(1, 13)``, ``for n in (2, 4, 8)``), or it is
        a counter the loop steps (``n += 1``).  A value merely re-read in a
        loop (``n = group["ns_steps"]``) is not evidence."""
        source = model.source
        for loop in source.loops_around(call):
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                names = loop_assignments(loop, loop_names(loop))
                if varies_as_number(loop, value, names) and loop_variants(loop) != 1:
                    return f"it comes from the loop on line {loop.lineno}"
            if isinstance(value, ast.Name):
                for node in walk(loop):
                    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == value.id and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
                        return f"`{value.id}` is stepped in the loop on line {loop.lineno}"
        return None

    @staticmethod
    def _argument(model: CompileModel, site: CompileSite, fn: ast.AST, call: ast.Call, param: str) -> Optional[ast.AST]:
        """The expression ``call`` passes for ``param`` (None: not visible)."""
        args = fn.args  # type: ignore[attr-defined]
        positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
        if positional and positional[0] in ("self", "cls") and isinstance(model.source.parent(fn), ast.ClassDef):
            positional = positional[1:]
        for kw in call.keywords:
            if kw.arg == param:
                return kw.value
        if param in positional:
            index = positional.index(param)
            head = call.args[: next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), len(call.args))]
            if index < len(head):
                return head[index]
        return None
