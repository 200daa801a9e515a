"""FR003 float-args: a Python float passed to a compiled function becomes
``torch.tensor(<float>, dtype=torch.float64)``."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Tuple

import libcst as cst

from ..analysis import dotted_name
from ..findings import Edit, Finding, Safety
from ..floats import (
    FunctionSummary,
    float_reason,
    functions_by_line,
    summarize_function,
    tensor_width,
    torch_aliases,
)
from .base import Example, Rule


def _tensor_call(analysis, value: cst.BaseExpression) -> cst.Call:
    no_space = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return cst.Call(
        func=analysis.torch_expr("tensor"),
        args=[
            cst.Arg(value=value),
            cst.Arg(keyword=cst.Name("dtype"), value=analysis.torch_expr("float64"), equal=no_space),
        ],
    )


class FloatArgs(Rule):
    code = "FR003"
    name = "float-args"
    summary = "a Python float passed to a compiled function (guarded on its value)"
    what_it_does = """
Finds calls of compiled functions (every compile form, and functions compiled
in another module of the run and imported here) where a positional or keyword
argument is a Python float: a float literal, arithmetic with a float literal
or a true division (`0.5 + i`, `i / 7`), a call that returns a float
(`float(y)`, `math.cos(a)`, `random.random()`, `abs`/`round(v, n)` of a float,
`max`/`min` of floats), a name bound in the enclosing scope to such a value --
also when recomputed in a loop or rebuilt from itself (`t = t * 0.95`,
`t *= 0.9`, `lr = max(lr * 0.5, 1e-4)`) -- or a parameter or variable
annotated `float`. A name counts only when every binding of it is a Python
number and one is a float: a name that is a tensor or unknown on some path is
left alone, as are floats passed through `functools.partial` or `**kwargs`.
It wraps the argument: `torch.tensor(<expr>, dtype=torch.float64)`
under the module's alias of torch (`import torch` is added if missing).
Ints, bools, strings, None and tensors are left alone (automatic dynamic
already handles plain int arguments).
"""
    why_it_recompiles = """
Dynamo guards a Python float argument on its value. On torch 2.1-2.5 every new
value recompiles until the recompile limit, then the function runs eager; on
2.6+ the second value costs one extra graph; under `dynamic=False` every value
recompiles. A tensor argument is guarded on its shape and dtype only, so one
graph serves every value.

Why `dtype=torch.float64`: measured on torch 2.13 (`tests/test_float_args.py::
test_dtype_choice`), a 0-d float64 tensor gives bit-identical results to the
Python float for `x + c`, `c + x`, `x - c`, `c - x`, `x * c`, `x / c`,
comparisons and `clamp(min=/max=)` when `x` is a float16, bfloat16, float32
or float64 tensor (a 0-d tensor does not promote within a category), and for
`c * x` when `x` is float32/float64. `torch.tensor(c)` (float32) would round
`c` for float64 tensors (`x_f64 + 0.1` would become `x_f64 + 0.10000000149`).
No dtype is right for integer tensors: `x_int + c` is float32, with a float64
tensor it is float64. So the fix is only safe when the other operand is
visibly floating.
"""
    example = """
    @torch.compile(dynamic=False)
    def sample(logits, temperature):
        return torch.softmax(logits / temperature, dim=-1)

    logits = torch.randn(4, 10)
    for step in range(10):
        temperature = 1.0 - 0.05 * step
        sample(logits, temperature)          # 8 graphs, then eager

Use instead:

        sample(logits, torch.tensor(temperature, dtype=torch.float64))   # 1 graph
"""
    fix_safety = """
Safe only when every use of the matching parameter inside the callee's body is
tensor arithmetic that gives the same result with a 0-d float64 tensor: an
operand of `+ - * /` (`c / x` and `**` excluded: they round differently), a
comparison feeding a tensor op, or the `min`/`max` of `clamp`/`clip` -- with
the other operand visibly a floating tensor (a float factory such as
`torch.randn`, `.float()`, a float op such as `softmax` or a loss, or a
parameter whose argument at this call is one of those). Arithmetic with Python
numbers (`temperature + 1e-6`) is followed. Unsafe (reported, applied with
`--unsafe-fixes`) when the callee uses the value as a Python number (`if` /
`while` tests, `round`, `int`, `math.*`, `isinstance`, `range`, formatting,
dict keys, `max`/`min`, returning it), when the other operand's dtype cannot
be seen, or when the callee's body cannot be seen. The message says why.
One known difference remains even when safe: a float beyond the range of the
other tensor's dtype (above 65504 for float16) raises with a Python float and
gives `inf` with a tensor.
"""
    valid = (
        "import torch\n@torch.compile\ndef f(x, n):\n    return x * n\nf(torch.ones(3), 2)\n",
        "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nf(torch.ones(3), torch.tensor(0.5))\n",
        "import torch\ndef f(x, c):\n    return x * c\nf(torch.ones(3), 0.5)\n",
        "import torch\n@torch.compile\ndef f(x, flag):\n    return x\nf(torch.ones(3), True)\n",
    )
    invalid = (
        Example(
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nf(torch.ones(3), 0.5)\n",
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nf(torch.ones(3), torch.tensor(0.5, dtype=torch.float64))\n",
        ),
        Example(
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * round(c, 2)\nf(torch.ones(3), 0.5)\n",
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * round(c, 2)\nf(torch.ones(3), torch.tensor(0.5, dtype=torch.float64))\n",
            unsafe=True,
        ),
    )

    # -- callee summaries ---------------------------------------------------
    def _local_summary(self, ctx, fn: cst.FunctionDef) -> Optional[FunctionSummary]:
        cache = ctx.cache.setdefault("FR003", {})
        if "ast" not in cache:
            try:
                tree = ast.parse(ctx.module.code)
            except (SyntaxError, ValueError, RecursionError):
                tree = None
            cache["ast"] = tree
            cache["aliases"] = torch_aliases(tree) if tree is not None else {}
            cache["defs"] = functions_by_line(tree) if tree is not None else {}
            cache["summaries"] = {}
        line = ctx.analysis.position(fn.name).start.line
        node = cache["defs"].get(line)
        if node is None:
            return None
        if line not in cache["summaries"]:
            cache["summaries"][line] = summarize_function(node, cache["aliases"])
        return cache["summaries"][line]

    def _is_method(self, ctx, fn: cst.FunctionDef) -> bool:
        block = ctx.analysis.parent(fn)
        if not isinstance(ctx.analysis.parent(block), cst.ClassDef):
            return False
        return not any(dotted_name(d.decorator) == "staticmethod" for d in fn.decorators)

    def _callees(self, ctx) -> List[Tuple[cst.Call, str, Optional[FunctionSummary], bool]]:
        """(call, callee name, summary or None, skip self) for every call of a compiled function."""
        analysis = ctx.analysis
        out: List[Tuple[cst.Call, str, Optional[FunctionSummary], bool]] = []
        seen: Dict[int, bool] = {}
        for site in analysis.compile_sites:
            summary = None
            skip_self = False
            if site.target_def is not None:
                summary = self._local_summary(ctx, site.target_def)
                skip_self = self._is_method(ctx, site.target_def)
            name = site.binding or (dotted_name(site.target) if site.target is not None else None) or "compiled function"
            for call in site.calls:
                if id(call) in seen:
                    continue
                seen[id(call)] = True
                out.append((call, name, summary, skip_self))
        project = ctx.project
        if project is not None and getattr(project, "compiled", None):
            found: List[Tuple[cst.Call, str, Optional[FunctionSummary], bool]] = []

            class Finder(cst.CSTVisitor):
                def visit_Call(self, node: cst.Call) -> None:
                    if id(node) in seen:
                        return
                    for q in sorted(analysis.qualified_names(node.func)):
                        hit = project.resolve(ctx.path, q)
                        if hit is not None:
                            (_, module), summary = hit
                            seen[id(node)] = True
                            found.append((node, f"{module}.{summary.name}", summary, False))
                            return

            ctx.module.visit(Finder())
            out.extend(found)
        return out

    # -- the check ------------------------------------------------------------
    def check(self, ctx) -> Iterable[Finding]:
        analysis = ctx.analysis
        findings: List[Finding] = []
        for call, callee, summary, skip_self in self._callees(ctx):
            by_param: Dict[str, cst.BaseExpression] = {}
            args: List[Tuple[cst.Arg, Optional[str]]] = []
            index = 0
            positional_ok = True
            for arg in call.args:
                if arg.star:
                    positional_ok = False
                    args.append((arg, None))
                    continue
                param = None
                if summary is not None:
                    if arg.keyword is not None:
                        param = summary.param_for(None, arg.keyword.value, skip_self)
                    elif positional_ok:
                        param = summary.param_for(index, None, skip_self)
                if arg.keyword is None:
                    index += 1
                if param is not None:
                    by_param[param] = arg.value
                args.append((arg, param))
            for arg, param in args:
                if arg.star:
                    continue
                reason = float_reason(analysis, arg.value)
                if reason is None:
                    continue
                code = ctx.module.code_for_node(arg.value)
                where = f"`{arg.keyword.value}=`" if arg.keyword is not None else f"`{code}`"
                head = f"float argument {where} ({reason}) to compiled `{callee}` is guarded on its value: new values recompile"
                unsafe_why = self._unsafe_reason(analysis, summary, param, by_param)
                if unsafe_why is None:
                    message = f"{head}; pass a 0-d tensor"
                    safety = Safety.SAFE
                else:
                    message = f"{head}; fix is unsafe: {unsafe_why}"
                    safety = Safety.UNSAFE
                edit = Edit(arg.value, lambda node: _tensor_call(analysis, node))
                findings.append(
                    self.finding(
                        ctx,
                        arg.value,
                        message,
                        edits=[edit],
                        safety=safety,
                        needs_torch=True,
                        title="wrap in `torch.tensor(..., dtype=torch.float64)`",
                    )
                )
        return findings

    @staticmethod
    def _unsafe_reason(analysis, summary: Optional[FunctionSummary], param: Optional[str], by_param) -> Optional[str]:
        if summary is None:
            return "the compiled function's body cannot be seen"
        if param is None:
            return "the argument does not map to a named parameter of the compiled function"
        use = summary.uses.get(param)
        if use is None:
            return "the argument does not map to a named parameter of the compiled function"
        if not use.safe:
            return f"`{summary.name}` uses `{param}` as a Python number: {use.reason}"
        for other, required in use.needs:
            expr = by_param.get(other)
            width = tensor_width(analysis, expr) if expr is not None else None
            if not (width == "full" or (width == "float" and required == "float")):
                kind = "a float32/float64 tensor" if required == "full" else "a floating tensor"
                return f"`{param}` meets `{other}` in tensor arithmetic and `{other}` is not visibly {kind} here (an integer tensor would turn float64)"
        return None
