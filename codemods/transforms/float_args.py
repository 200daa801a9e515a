"""FR003 float-args: a Python float passed to a compiled function becomes
``torch.tensor(<float>, dtype=torch.float64)``."""

from __future__ import annotations

import ast
import functools
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from ..compile_sites import dotted_name
from ..variation import number_varies
from ..findings import Edit, Finding, Safety
from ..floats import (
    CallSite,
    FunctionSummary,
    SummaryContext,
    call_args,
    float_reason,
    summarize_function,
    tensor_width,
    torch_aliases,
)
from ..placement import torch_at_least, torch_expr
from ..scopes import Binding
from .base import Example, Rule


def _tensor_call(model, value: cst.BaseExpression) -> cst.Call:
    no_space = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return cst.Call(
        func=torch_expr(model, "tensor"),
        args=[
            cst.Arg(value=value),
            cst.Arg(keyword=cst.Name("dtype"), value=torch_expr(model, "float64"), equal=no_space),
        ],
    )


def _no_summary() -> None:
    return None


def _site_binding(model, site) -> Optional[Binding]:
    """The binding of the name a compiled function is called through: the
    ``def`` of a decorated function, the target of ``f = torch.compile(g)``."""
    if site.binding is None or "." in site.binding:
        return None
    if site.form == "decorator":
        node: Optional[ast.AST] = site.target_def
        inner = model.scopes.of_node.get(node)
        scope = inner.parent if inner is not None else None
    elif site.form == "wrap":
        parent = model.source.parent(site.node)
        node = parent.targets[0] if isinstance(parent, ast.Assign) else getattr(parent, "target", None)
        scope = model.scopes.name_scope.get(node) if isinstance(node, ast.Name) else None
    else:
        return None
    for candidate in (scope, model.scopes.module):
        for binding in candidate.bindings.get(site.binding, ()) if candidate is not None else ():
            if binding.node is node:
                return binding
    return None


def _literal_values(callees) -> Dict[Tuple[str, object], set]:
    """(callee, keyword or position) -> the distinct literal numbers passed
    there at every call seen: more than one is evidence that the value changes."""
    out: Dict[Tuple[str, object], set] = {}
    for call, callee, _summary, _skip, _site in callees:
        index = 0
        for keyword, star, value in call_args(call):
            if star:
                break
            key = keyword if keyword is not None else index
            if keyword is None:
                index += 1
            if isinstance(value, ast.Constant) and type(value.value) in (int, float):
                out.setdefault((callee, key), set()).add(value.value)
    return out


class FloatArgs(Rule):
    code = "FR003"
    name = "float-args"
    reads = "ast"
    reads_project = True
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
Reported by default only when the source shows the value changing between
calls: rebuilt in a loop around the call, a parameter of a function that is
called with changing or different values, or different literals at different
calls. A float passed once, or read once from a command line or config, is
reported only with `--unproven` (on torch 2.6+ such a value costs at most one
recompile).

Safe only when every use of the matching parameter inside the callee's body is
tensor arithmetic that gives the same result with a 0-d float64 tensor: an
operand of `+ - * /` (`c / x` and `**` excluded: they round differently), a
comparison feeding a tensor op, or a slot of a torch op in the table
`codemods/tensor_ops_table.py` (`torch.lerp` weight, `mul`/`add`/`sub`/`div`
other, `clamp`/`clip` min/max, `addcmul` value; each row proven on torch 2.13
by `tests/test_tensor_ops_table.py`: same values and dtype, one graph for every
tensor value) -- with the other operand visibly a floating tensor (a float
factory such as `torch.randn`, `.float()`, a float op such as `softmax` or a
loss, or a parameter whose argument at this call is one of those; lerp needs
float32/float64). Arithmetic with Python numbers (`temperature + 1e-6`) is
followed, and so is a call of a function of the same module (the value's uses
there count). Unsafe (reported, applied with `--unsafe-fixes`) when the callee
uses the value as a Python number in a way a tensor survives but that changes
what the code does (`isinstance`, `str`, formatting, dict keys, `max`/`min`,
returning it), passes it to a torch op not in the table, when the other
operand's dtype cannot be seen, or when the callee's body cannot be seen. The
message says why.

No fix at all (the finding is reported, with what to do instead) where the
analysis knows a wrap crashes or cannot cure the recompiles (measured on
torch 2.13, asserted by `tests/test_tensor_ops_table.py`):
- the value reaches an op that needs a Python number: `F.dropout(p=)` and the
  dropout family (a float `p` recompiles for every value even under
  `dynamic=None`; with a 0-d tensor the op leaves the graph, a graph break, or
  `fullgraph=True` raises; `torch.dropout` still recompiles for every value).
  The message names the cures: keep `p` constant, change it in a few steps, or
  write the dropout as tensor code (`x * (torch.rand_like(x) >= p) / (1 - p)`,
  one graph for every tensor `p`);
- `round()` or `range()` of it (a 0-d tensor raises TypeError), `int()` or
  `float()` (a graph break, and the number after it is guarded again),
  `math.*` (read back as a Python number: more graphs than the float);
- a Python branch on it (`if temperature > 0.0`, also in a helper): with a
  0-d tensor the branch is data-dependent, which `fullgraph=True` refuses
  (no fix when the compile has `fullgraph=True` or its `fullgraph=` cannot be
  read, e.g. in another module); without it the branch is a graph break at
  every call: with `dynamic=False` that still cures the recompiles (every
  float value would recompile: measured 8 graphs and the limit against 3), so
  the fix is offered as unsafe; on torch 2.6+ (`--target-torch`) without
  `dynamic=False` the float costs only one recompile and the wrap cuts no
  graph (measured: 3 graphs either way), so no fix.
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
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nfor step in range(4):\n    f(torch.ones(3), 0.5 * step)\n",
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nfor step in range(4):\n    f(torch.ones(3), torch.tensor(0.5 * step, dtype=torch.float64))\n",
        ),
        # the value reaches `round()`: a 0-d tensor would raise TypeError, so no fix
        Example("import torch\n@torch.compile\ndef f(x, c):\n    return x * round(c, 2)\nf(torch.ones(3), 0.5)\nf(torch.ones(3), 0.7)\n"),
        # the value reaches `str()`: a wrap works but changes what is printed (unsafe)
        Example(
            "import torch\n@torch.compile\ndef f(x, c):\n    print(str(c))\n    return x * c\nf(torch.ones(3), 0.5)\nf(torch.ones(3), 0.7)\n",
            "import torch\n@torch.compile\ndef f(x, c):\n    print(str(c))\n    return x * c\nf(torch.ones(3), torch.tensor(0.5, dtype=torch.float64))\nf(torch.ones(3), torch.tensor(0.7, dtype=torch.float64))\n",
            unsafe=True,
        ),
        # one value, passed once: nothing shows it changing (reported with --unproven)
        Example(
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nf(torch.ones(3), 0.5)\n",
            "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nf(torch.ones(3), torch.tensor(0.5, dtype=torch.float64))\n",
            unproven=True,
        ),
    )

    # -- callee summaries ---------------------------------------------------
    def _local_summary(self, ctx, fn: ast.AST) -> FunctionSummary:
        cache = ctx.cache.setdefault("FR003", {})
        if "aliases" not in cache:
            cache["aliases"] = torch_aliases(ctx.source.tree)
            cache["summaries"] = {}
            cache["context"] = SummaryContext(cache["aliases"], ctx.model.functions)
        summaries = cache["summaries"]
        if fn not in summaries:
            summaries[fn] = summarize_function(fn, cache["aliases"], context=cache["context"])  # type: ignore[arg-type]
        return summaries[fn]

    @staticmethod
    def _is_method(ctx, fn: ast.AST) -> bool:
        if not isinstance(ctx.source.parent(fn), ast.ClassDef):
            return False
        return not any(dotted_name(d) == "staticmethod" for d in fn.decorator_list)  # type: ignore[attr-defined]

    def _callees(self, ctx, site_model: CallSite) -> List[Tuple[ast.Call, str, Callable[[], Optional[FunctionSummary]], bool, object]]:
        """(call, callee name, summary (computed on demand, None when unseen),
        skip self, compile site (None: compiled in another module)) for every
        call of a compiled function."""
        model = ctx.model
        out: List[Tuple[ast.Call, str, Callable[[], Optional[FunctionSummary]], bool, object]] = []
        seen: Set[ast.Call] = set()
        for site in model.compile_sites:
            fn = site.target_def
            summary: Callable[[], Optional[FunctionSummary]] = _no_summary
            skip_self = False
            if fn is not None:
                summary = functools.partial(self._local_summary, ctx, fn)
                skip_self = self._is_method(ctx, fn)
            name = site.binding or (dotted_name(site.target) if site.target is not None else None) or "compiled function"
            bound = _site_binding(model, site)
            for call in site.calls:
                if call in seen:
                    continue
                if bound is not None and isinstance(call.func, ast.Name) and not site_model.sees(bound, call.func):
                    continue  # a call before the compile, in the same scope
                seen.add(call)
                out.append((call, name, summary, skip_self, site))
        project = ctx.project
        if project is not None and getattr(project, "compiled", None):
            # a dotted callee `m.f` can only name a compiled function whose name is `f`
            names = {n.decode() for n in getattr(project, "names", ())} or None
            for node in ast.walk(ctx.source.tree):
                if not isinstance(node, ast.Call) or node in seen:
                    continue
                if names is not None and isinstance(node.func, ast.Attribute) and node.func.attr not in names:
                    continue
                for q in sorted(site_model.qualified_names(node.func)):
                    hit = project.resolve(ctx.path, q)
                    if hit is not None:
                        (_, module), found = hit
                        seen.add(node)
                        out.append((node, f"{module}.{found.name}", (lambda found=found: found), False, None))
                        break
        return out

    # -- the check ------------------------------------------------------------
    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        site_model = CallSite(model)
        findings: List[Finding] = []
        callees = self._callees(ctx, site_model)
        literal_values = _literal_values(callees)
        for call, callee, get_summary, skip_self, site in callees:
            arguments = call_args(call)
            reasons = [None if star else float_reason(site_model, value) for _, star, value in arguments]
            if not any(reasons):
                continue
            summary = get_summary()
            by_param: Dict[str, ast.AST] = {}
            args: List[Tuple[Optional[str], ast.AST, Optional[str], Optional[str], object]] = []
            index = 0
            positional_ok = True
            for (keyword, star, value), reason in zip(arguments, reasons):
                if star:
                    positional_ok = False
                    continue
                param = None
                if summary is not None:
                    if keyword is not None:
                        param = summary.param_for(None, keyword, skip_self)
                    elif positional_ok:
                        param = summary.param_for(index, None, skip_self)
                position = index
                if keyword is None:
                    index += 1
                if param is not None:
                    by_param[param] = value
                args.append((keyword, value, param, reason, keyword if keyword is not None else position))
            for keyword, value, param, reason, slot in args:
                if reason is None:
                    continue
                where = f"`{keyword}=`" if keyword is not None else f"`{site_model.code(call, value)}`"
                head = f"float argument {where} ({reason}) to compiled `{callee}` is guarded on its value: new values recompile"
                verdict, why = self._verdict(ctx, site_model, summary, param, by_param, site)
                if verdict == "safe":
                    message = f"{head}; pass a 0-d tensor"
                    safety: Optional[Safety] = Safety.SAFE
                elif verdict == "unsafe":
                    message = f"{head}; fix is unsafe: {why}"
                    safety = Safety.UNSAFE
                else:  # no fix: the analysis knows a wrap crashes or cannot cure it
                    message = f"{head}; {why}"
                    safety = None
                edit = Edit(ctx.source.target(value, cst.BaseExpression), lambda node: _tensor_call(model, node))
                varies = number_varies(model, call, value)
                if varies is None and len(literal_values.get((callee, slot), ())) > 1:
                    varies = f"`{callee}` is called with different values"
                if varies is None:
                    head_note = " (no call seen passing a changing value: reported with --unproven)"
                    message = message.replace(head, head + head_note, 1)
                findings.append(
                    self.finding(
                        ctx,
                        value,
                        message,
                        edits=[edit] if safety is not None else [],
                        safety=safety,
                        needs_torch=True,
                        title="wrap in `torch.tensor(..., dtype=torch.float64)`",
                        proven=varies is not None,
                    )
                )
        return findings

    @staticmethod
    def _site_option(site, name: str) -> Optional[bool]:
        """A compile option's literal bool (absent: False); None when it cannot
        be read (a variable, ``**opts``, a site in another module)."""
        if site is None or site.has_star_kwargs:
            return None
        kw = site.option(name)
        if kw is None:
            return False
        value = kw.value
        return value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None

    def _verdict(self, ctx, site_model: CallSite, summary: Optional[FunctionSummary], param: Optional[str], by_param, site) -> Tuple[str, str]:
        """("safe", "") | ("unsafe", why) | ("none", why and what to do instead)."""
        if summary is None:
            return "unsafe", "the compiled function's body cannot be seen"
        use = summary.uses.get(param) if param is not None else None
        if use is None:
            return "unsafe", "the argument does not map to a named parameter of the compiled function"
        where = f"`{summary.name}` uses `{param}` as a Python number: {use.reason}"
        if use.kind == "nofix":
            return "none", f"no fix, a tensor cannot help: in `{summary.name}`, `{param}` is {use.reason}; instead, {use.cure}"
        if use.kind == "branch":
            fullgraph = self._site_option(site, "fullgraph")
            if fullgraph is not False:
                told = "compiled with fullgraph=True" if fullgraph else "the compile's `fullgraph=` cannot be read here"
                return "none", f"no fix: in `{summary.name}`, `{param}` is {use.reason}; with a 0-d tensor the branch is data-dependent, which fullgraph=True refuses ({told}); instead, {use.cure}"
            if site.option("dynamic") is not None and self._site_option(site, "dynamic") is False:
                # dynamic=False: every float value recompiles; the tensor costs a graph break instead
                return "unsafe", f"{where}; with a 0-d tensor the branch is a graph break at every call (under dynamic=False it still cures the recompiles)"
            if torch_at_least(ctx.settings, (2, 6)):
                return "none", (
                    f"no fix: in `{summary.name}`, `{param}` is {use.reason}; with a 0-d tensor the branch is a graph break, and on torch 2.6+ without dynamic=False "
                    f"the float already becomes dynamic after one recompile: the wrap cuts no graph (measured on torch 2.13); instead, {use.cure}"
                )
            return "unsafe", f"{where}; with a 0-d tensor the branch is a graph break at every call (it cures recompiles only before torch 2.6 or under dynamic=False)"
        if not use.safe:
            return "unsafe", where
        for names, required in use.needs:
            widths = [tensor_width(site_model, by_param[n]) for n in names if n in by_param]
            if not any(w == "full" or (w == "float" and required == "float") for w in widths):
                kind = "a float32/float64 tensor" if required == "full" else "a floating tensor"
                shown = " or ".join(f"`{n}`" for n in names)
                return "unsafe", f"`{param}` meets {shown} in tensor arithmetic and {'it is' if len(names) == 1 else 'none is'} not visibly {kind} here (an integer tensor would turn float64)"
        return "safe", ""
