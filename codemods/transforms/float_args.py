"""FR003 float-args: a Python float passed to a compiled function becomes
``torch.tensor(<float>, dtype=torch.float64)``."""

from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Set, Tuple

from .._lazy import cst

from ..analysis.compile_sites import def_first_lines, dotted_name
from ..analysis.variation import number_varies
from ..findings import Edit, Finding, Safety
from ..analysis.params import argument_for, binds_self
from ..analysis.floats import (
    NameResolver,
    FloatFlow,
    FunctionSummary,
    ParamUse,
    SummaryContext,
    call_args,
    callee_width,
    calls_of,
    counted_int,
    float_flow,
    summarize_function,
    tensor_width,
)
from ..analysis.placement import torch_at_least, torch_expr
from ..analysis.scopes import Binding
from ..trace.causes import CuresCause, FLOAT_ARG
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
    for call, callee, *_ in callees:
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


#: how deep a float is followed through forwarding functions (`*args`, `**kwargs`)
_FORWARD_DEPTH = 4
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class _Route:
    """How the arguments of ``origin`` reach the compiled function: directly
    (``origin`` is the compiled call) or through forwarding functions
    (``origin`` calls ``f(..., **kw)`` whose body passes ``**kw`` on)."""

    origin: ast.Call
    #: the call that runs the compiled function (``origin`` when direct)
    inner: ast.Call
    callee: str
    summary: Callable[[], Optional[FunctionSummary]]
    skip_self: bool
    #: (keyword, position) in ``inner`` of each forwarded argument of
    #: ``origin``, by the argument's value node; None when direct
    slots: Optional[Dict[int, Tuple[Optional[str], Optional[int]]]] = None
    #: the forwarding functions passed through, outermost first
    via: Tuple[str, ...] = ()
    #: the compiled function's def, when it is in this module
    fn_def: Optional[ast.AST] = None
    #: why a forwarder makes the wrap unsafe (it reads what it forwards)
    unsafe: Optional[str] = None
    #: the compile site (its options: ``fullgraph=``, ``dynamic=``); None when
    #: compiled in another module
    site: object = None
    #: compiled in another module of the run: (its path, the first lines its
    #: code object can start on), for the trace to match
    elsewhere: Optional[Tuple[str, Tuple[int, ...]]] = None


class _Member(NamedTuple):
    """One argument of a compiled call judged for a wrap: how it is passed,
    the parameter it lands in, why it is a guarded number."""

    keyword: Optional[str]
    value: ast.AST
    param: Optional[str]
    slot: object
    flow: FloatFlow
    #: the source the trace saw guarded, when only the trace tells
    seen: Optional[str]
    #: the evidence that it changes between calls (None: none seen)
    varies: Optional[str]


def _var_params(fn: ast.AST) -> Tuple[Optional[str], Optional[str]]:
    args = fn.args  # type: ignore[attr-defined]
    return (args.vararg.arg if args.vararg else None, args.kwarg.arg if args.kwarg else None)


def _forwarded_stars(site_model: NameResolver, call: ast.Call, fn: ast.AST) -> Tuple[Optional[int], bool]:
    """(how many plain positional arguments come before ``*args`` when ``call``
    passes on ``fn``'s own ``*args``, else None; whether it passes on ``fn``'s
    own ``**kwargs``).  The names must not be rebound in ``fn``."""
    vararg, kwarg = _var_params(fn)

    def own(expr: ast.AST, name: Optional[str]) -> bool:
        if name is None or not isinstance(expr, ast.Name) or expr.id != name:
            return False
        bindings = site_model.bindings(expr)
        return len(bindings) == 1 and bindings[0].kind == "param" and bindings[0].scope.node is fn

    position: Optional[int] = None
    plain = 0
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            if own(arg.value, vararg) and position is None:
                position = plain
            else:
                return None, False  # another *xs before or after: positions unknown
        else:
            plain += 1
    kwargs = any(kw.arg is None and own(kw.value, kwarg) for kw in call.keywords)
    if position is not None and plain != position:
        position = None  # plain arguments after *args: positions unknown
    return position, kwargs


def keyword_at(route: _Route, keyword: Optional[str], value: ast.AST) -> Optional[str]:
    """The keyword an argument has at the compiled call."""
    if route.slots is not None and id(value) in route.slots:
        return route.slots[id(value)][0]
    return keyword


def _reads_forwarded(site_model: NameResolver, fn: ast.AST) -> Optional[str]:
    """Why a forwarding function may treat what it forwards as a Python
    number: it reads its ``*args`` / ``**kwargs`` other than to pass them on."""
    for name in _var_params(fn):
        if name is None:
            continue
        scope = site_model.scopes.of_node.get(fn)
        for ref in scope.references.get(name, []) if scope is not None else []:
            parent = site_model.source.parent(ref)
            if isinstance(parent, ast.Starred) or (isinstance(parent, ast.keyword) and parent.arg is None):
                continue
            return f"`{getattr(fn, 'name', '?')}` reads `{name}` (line {ref.lineno}) besides passing it on"
    return None


def _traced_floats(ctx, route: _Route) -> FrozenSet[str]:
    """The arguments a trace of a run saw guarded on a float's value in the
    compiled function ``route`` reaches (``ctx.evidence``, in ``fix-recompiles
    run`` only): ``temperature``, ``kw['temperature']``, ``args[1]``."""
    evidence = getattr(ctx, "evidence", None)
    if evidence is None or not isinstance(route.fn_def, _FUNCS):
        return frozenset()
    out: Set[str] = set()
    for line in def_first_lines(route.fn_def):
        out.update(evidence.float_args.get(line, ()))
    return frozenset(out)


def _traced_source(route: _Route, traced: FrozenSet[str], param: Optional[str], keyword: Optional[str], slot: object) -> Optional[str]:
    """The traced guard source an argument of the compiled call fills: its
    parameter (``temperature``), its key in the compiled function's
    ``**kwargs`` (``kw['temperature']``), or its index in ``*args``
    (``args[1]``); None when the trace saw no float there."""
    if param is not None:
        return param if param in traced else None
    vararg, kwarg = _var_params(route.fn_def)
    if keyword is not None:
        if kwarg is None:
            return None
        for quote in ("'", '"'):
            src = f"{kwarg}[{quote}{keyword}{quote}]"
            if src in traced:
                return src
        return None
    if vararg is None or not isinstance(slot, int):
        return None
    args = route.fn_def.args  # type: ignore[attr-defined]
    named = len(args.posonlyargs) + len(args.args) - (1 if route.skip_self else 0)
    src = f"{vararg}[{slot - named}]"
    return src if slot >= named and src in traced else None


class FloatArgs(Rule):
    code = "FR003"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(FLOAT_ARG, first=True),)
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
`t *= 0.9`, `lr = max(lr * 0.5, 1e-4)`) -- a parameter or variable
annotated `float`, or a parameter known only by its float default
(`def generate(self, x, T=0.7)`). A name counts only when every binding of it
is a Python number and one is a float: a name that is a tensor or unknown on
some path is left alone. The float is followed through the forms training
code uses: a param group's lr (`group["lr"]` with `group` from
`X.param_groups`, also in arithmetic such as `group["lr"] * max(1.0, a / b)
** 0.5`, `group["lr"] * getattr(p, "lr_mul", 1.0)`, comprehensions and
`zip`), unless the module keeps its lrs as tensors (`.fill_`, a tensor
`lr=`); and through functions that pass their `*args` / `**kwargs` on to the
compiled function (`generate(x, temperature=t)` -> `decode(x,
**sampling_kwargs)`), or call a compiled function they are given
(`run(fn, *args)`): the finding and the wrap are then on the call that
passes the float in. A parameter with neither annotation nor default is what
every call of its function in the module passes (`run(step_fn, t)` called
with `0.5 + i / 10`; `m(x, step)` reaches `forward` of `m`'s nn.Module class,
`C(...)` reaches `__init__`), up to three functions out, and only when the
function is not passed around or decorated; `self.attr` is a number when every
value its class (and any `obj.attr = v` of the module) gives it is one, so
`step / self.warmup` is a float when `step` is passed numbers. The finding and
the wrap stay on the compiled call. Floats passed through `functools.partial` are left alone.
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
calls: rebuilt in a loop around the call, computed from parameters (directly
or through a local assigned once, `w = min(1.0, step / self.warmup)`) of a
function that is called with changing or different values -- followed up to
three functions out, nn.Module calls included (a default counts as the value
passed) -- or different literals at different calls. A float computed from a
param group's lr changes when the lr does: the module writes the group's lr
in a loop or a function (not `__init__`, not a one-off setup loop over the
groups), or builds a `torch.optim.lr_scheduler` scheduler; being read again
for every group or parameter is no evidence. A float passed once, or read once from a command line or config, is
reported only with `--unproven` (on torch 2.6+ such a value costs at most one
recompile).

Safe only when every use of the matching parameter inside the callee's body is
tensor arithmetic that gives the same result with a 0-d float64 tensor: an
operand of `+ - * /` (`c / x` and `**` excluded: they round differently), a
comparison feeding a tensor op, or a slot of a torch op in the table
`codemods/tensor_ops_table.py` (`torch.lerp` weight, `mul`/`add`/`sub`/`div`
other -- `x.mul_(c)` / `x.add(c)` count as `x * c` / `x + c` --,
`clamp`/`clip` min/max, `addcmul` value; each row proven on torch 2.13 by
`tests/test_tensor_ops_table.py`: same values and dtype, one graph for every
tensor value) -- with the other operand visibly a floating tensor (a float
factory such as `torch.randn`, `.float()`, a float op such as `softmax` or a
loss, `p.grad`, a parameter an optimizer steps (`for p in group["params"]`),
`self.w` or a dict entry (`state["buf"]`) bound to one of those, or a
parameter whose argument at this call -- or at every call of the function
holding it -- is one of those; lerp needs float32/float64). Arithmetic with
Python numbers (`temperature + 1e-6`) is followed, and so is a call of a
function of the same module (the value's uses there count); a float landing
in the compiled function's `**kwargs` is followed into the module's functions
it is passed on to. Unsafe (reported, applied with `--unsafe-fixes`) when the
callee uses the value as a Python number in a way a tensor survives but that
changes what the code does (`isinstance`, `str`, formatting, dict keys,
`max`/`min`, returning it), passes it to a torch op not in the table, when
the other operand's dtype cannot be seen, when the callee's body cannot be
seen, or when a forwarding function reads what it forwards (`if
kwargs["temperature"] > 0`). The message says why.

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
- a Python branch on it (`if temperature > 0.0`, also in a helper or in a
  function the compiled function's `**kwargs` are passed on to): with a 0-d
  tensor the branch is data-dependent, which `fullgraph=True` refuses (no fix
  when the compile has `fullgraph=True` or its `fullgraph=` cannot be read,
  e.g. in another module); without it the branch is a graph break at every
  call: with `dynamic=False` that still cures the recompiles (every float
  value would recompile: measured 8 graphs and the limit against 3), so the
  fix is offered as unsafe; on torch 2.6+ (`--target-torch`) without
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
        # a scheduled lr beside a step counted up with it (a fused optimizer
        # kernel): wrapped together or not at all, the int as well
        Example(
            "import torch\n@torch.compile(dynamic=False)\ndef upd(p, step, lr):\n    p.sub_(lr * p / (1 - 0.9 ** step))\n"
            "p = torch.ones(3)\nstate = {'step': 0}\nfor it in range(4):\n    lr = 0.1 * (1 - it / 4)\n    state['step'] += 1\n    upd(p, state['step'], lr)\n",
            "import torch\n@torch.compile(dynamic=False)\ndef upd(p, step, lr):\n    p.sub_(lr * p / (1 - 0.9 ** step))\n"
            "p = torch.ones(3)\nstate = {'step': 0}\nfor it in range(4):\n    lr = 0.1 * (1 - it / 4)\n    state['step'] += 1\n"
            "    upd(p, torch.tensor(state['step'], dtype=torch.float64), torch.tensor(lr, dtype=torch.float64))\n",
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
    @staticmethod
    def _cache(ctx) -> dict:
        """The module's summary state: summaries by def, and the
        context the summaries share (helpers followed once)."""
        cache = ctx.cache.setdefault("FR003", {})
        if "context" not in cache:
            cache["summaries"] = {}
            cache["context"] = SummaryContext(ctx.model.torch_path, ctx.model.functions)
        return cache

    def _local_summary(self, ctx, fn: ast.AST) -> FunctionSummary:
        cache = self._cache(ctx)
        summaries = cache["summaries"]
        if fn not in summaries:
            summaries[fn] = summarize_function(fn, ctx.model.torch_path, context=cache["context"])  # type: ignore[arg-type]
        return summaries[fn]

    @staticmethod
    def _is_method(ctx, fn: ast.AST) -> bool:
        return binds_self(ctx.source, fn)

    def _callees(self, ctx, site_model: NameResolver) -> List[Tuple[ast.Call, str, Callable[[], Optional[FunctionSummary]], bool, Optional[ast.AST], object, object]]:
        """(call, callee name, summary (computed on demand, None when unseen),
        skip self, the compiled function's def when it is in this module,
        compile site (None: compiled in another module), (path, first lines)
        of a function compiled in another module) for every call of a
        compiled function."""
        model = ctx.model
        out: List[Tuple[ast.Call, str, Callable[[], Optional[FunctionSummary]], bool, Optional[ast.AST], object]] = []
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
                if bound is not None and isinstance(call.func, ast.Name) and call.func.id == bound.name and not site_model.sees(bound, call.func):
                    continue  # a call before the compile, in the same scope
                seen.add(call)
                if call in site.call_defs:  # reached through a flow (a project decorator, a parameter)
                    other = site.call_defs[call]
                    found = functools.partial(self._local_summary, ctx, other) if other is not None else _no_summary
                    out.append((call, dotted_name(call.func) or name, found, other is not None and self._is_method(ctx, other), other, site, None))
                    continue
                reached = name if dotted_name(call.func) == site.binding or fn is None else getattr(fn, "name", name)  # through a flow: the function's own name
                out.append((call, reached, summary, skip_self, fn, site, None))
        project = ctx.project
        if project is not None and getattr(project, "compiled", None):
            # a dotted callee `m.f` can only name a compiled function whose name is `f`
            names = {n.decode() for n, _ in getattr(project, "names", ())} or None
            for node in sorted(ctx.source.nodes(ast.Call), key=lambda c: (c.lineno, c.col_offset)):
                if node in seen:
                    continue
                if names is not None and isinstance(node.func, ast.Attribute) and node.func.attr not in names:
                    continue
                for q in sorted(site_model.qualified_names(node.func)):
                    hit = project.resolve(ctx.path, q)
                    if hit is not None:
                        key, found = hit
                        seen.add(node)
                        home = project.path_of(key)
                        elsewhere = (home, tuple(sorted({found.first_line, found.line} - {0}))) if home is not None else None
                        out.append((node, f"{key[1]}.{found.name}", (lambda found=found: found), False, None, None, elsewhere))
                        break
        return out

    # -- forwarding -------------------------------------------------------------
    def _forwarded(self, ctx, site_model: NameResolver, direct: List[_Route]) -> List[_Route]:
        """Calls whose floats reach a compiled function through functions that
        pass their ``*args`` / ``**kwargs`` on (``generate(x, temperature=t)``
        -> ``decode(x, **sampling_kwargs)`` compiled), or that call a compiled
        function they are given (``run(fn, *args)`` -> ``fn(*args)``)."""
        model = ctx.model
        source = ctx.source
        out: List[_Route] = []
        # (inner call, route it belongs to, map from inner positions/keywords to the compiled call's)
        todo: List[Tuple[ast.Call, _Route, Callable[[int], Optional[int]], int, Tuple[str, ...]]] = []
        for route in direct:
            todo.append((route.inner, route, lambda i: i, 0, ()))
        compiled = [(site, _site_binding(model, site)) for site in model.compile_sites]
        by_callee = {id(r.inner): r for r in direct}
        for call in source.nodes(ast.Call):
            # `fn(*args)` with `fn` a parameter: the compiled function may be passed in
            func = call.func  # type: ignore[attr-defined]
            if not isinstance(func, ast.Name) or id(call) in by_callee:
                continue
            if not any(isinstance(a, ast.Starred) for a in call.args) and not any(k.arg is None for k in call.keywords):  # type: ignore[attr-defined]
                continue
            bindings = site_model.bindings(func)
            if len(bindings) == 1 and bindings[0].kind == "param":
                todo.append((call, None, lambda i: i, 0, ()))  # type: ignore[arg-type]
        seen: Set[Tuple[int, int]] = set()
        while todo:
            inner, route, to_compiled, depth, via = todo.pop(0)
            fn = source.enclosing(inner, _FUNCS)
            if fn is None or depth >= _FORWARD_DEPTH or (id(inner), id(route)) in seen:
                continue
            seen.add((id(inner), id(route)))
            position, kwargs = _forwarded_stars(site_model, inner, fn)
            if position is None and not kwargs:
                continue
            args = fn.args  # type: ignore[attr-defined]
            named = [a.arg for a in list(args.posonlyargs) + list(args.args)]
            kwonly = {a.arg for a in args.kwonlyargs}
            param_callee = route is None
            for outer, bound_self in calls_of(site_model, fn):
                if outer is inner:
                    continue
                params = named[1:] if bound_self and named else named
                this = route
                if param_callee:
                    # the function called inside is a parameter: what is passed for it here?
                    which = inner.func.id  # type: ignore[attr-defined]
                    given = next((k.value for k in outer.keywords if k.arg == which), None)
                    if given is None and which in params and params.index(which) < len(outer.args):
                        given = outer.args[params.index(which)]
                    this = self._compiled_route(ctx, site_model, compiled, given, inner)
                    if this is None:
                        continue
                slots: Dict[int, Tuple[Optional[str], Optional[int]]] = {}
                starred_at = next((k for k, a in enumerate(outer.args) if isinstance(a, ast.Starred)), len(outer.args))
                if position is not None:
                    for k, arg in enumerate(outer.args[:starred_at]):
                        if k >= len(params):
                            target = to_compiled(position + k - len(params))
                            if target is not None:
                                slots[id(arg)] = (None, target)
                if kwargs:
                    for kw in outer.keywords:
                        if kw.arg is not None and kw.arg not in params and kw.arg not in kwonly:
                            slots[id(kw.value)] = (kw.arg, None)
                name = getattr(fn, "name", "?")
                unsafe = this.unsafe or _reads_forwarded(site_model, fn)
                this = dataclasses.replace(this, unsafe=unsafe)
                if slots:
                    out.append(dataclasses.replace(this, origin=outer, slots=slots, via=(name,) + via))
                # and on outwards, when `outer` passes on its own function's *args / **kwargs

                def further(k: int, position=position, params: List[str] = params, to_compiled=to_compiled) -> Optional[int]:
                    # position `k` in `outer` -> position in the compiled call
                    if k < len(params) or position is None:
                        return None
                    return to_compiled(position + k - len(params))

                todo.append((outer, this, further, depth + 1, (name,) + via))
        return out

    def _compiled_route(self, ctx, site_model: NameResolver, compiled, given: Optional[ast.AST], inner: ast.Call) -> Optional[_Route]:
        """The route for calling ``given`` at ``inner``, when ``given`` names a compiled function."""
        if not isinstance(given, ast.Name):
            return None
        referents = site_model.referents(given)
        for site, binding in compiled:
            if binding is not None and binding in referents:
                fn = site.target_def
                summary: Callable[[], Optional[FunctionSummary]] = _no_summary
                if fn is not None:
                    summary = functools.partial(self._local_summary, ctx, fn)
                return _Route(inner, inner, site.binding or given.id, summary, False, fn_def=fn, site=site)
        return None

    def _kwargs_use(self, ctx, fn: ast.AST, keyword: str, depth: int) -> Optional[ParamUse]:
        """How ``fn`` uses the keyword ``keyword`` that lands in its ``**kwargs``:
        every read of ``**kwargs`` must pass it on (``g(x, **kwargs)``) to a
        function of this module whose parameter ``keyword`` is safe; what that
        parameter must meet becomes a need on ``fn``'s own parameters.  A use
        there that is a branch or needs a Python number keeps its kind."""
        kwarg = fn.args.kwarg.arg  # type: ignore[attr-defined]
        scope = ctx.model.scopes.of_node.get(fn)
        refs = scope.references.get(kwarg, []) if scope is not None else []
        needs: List[Tuple[Tuple[str, ...], str]] = []
        cache = self._cache(ctx)
        for ref in refs:
            holder = ctx.source.parent(ref)
            call = ctx.source.parent(holder)
            if not (isinstance(holder, ast.keyword) and holder.arg is None and isinstance(call, ast.Call)):
                return ParamUse(False, f"`{kwarg}` is read other than passed on (line {ref.lineno})")
            if not isinstance(call.func, ast.Name):  # `self.sample(x, **kw)`, `m.f(**kw)`: not followed
                shown = dotted_name(call.func)
                callee = f"`{shown}()`" if shown else "a call"
                return ParamUse(False, f"`{kwarg}` is passed on to {callee}, which this analysis does not follow (line {call.lineno})")
            if any(kw.arg == keyword for kw in call.keywords):
                return ParamUse(False, f"`{keyword}` is also passed explicitly (line {call.lineno})")
            inner = ctx.model.resolve_function(call.func)
            if inner is None:
                return ParamUse(False, f"`{kwarg}` is passed on to `{call.func.id}()`, whose body cannot be seen (line {call.lineno})")
            summary = self._local_summary(ctx, inner)
            use = summary.uses.get(keyword)
            if use is None:
                if inner.args.kwarg is None or depth >= 3:  # type: ignore[attr-defined]
                    return ParamUse(False, f"`{call.func.id}()` has no parameter `{keyword}` (line {call.lineno})")
                use = self._kwargs_use(ctx, inner, keyword, depth + 1)
                if use is None:
                    return None
            if not use.safe:
                why = f"passed on through `**{kwarg}` to `{call.func.id}()` (line {call.lineno}), where `{keyword}` is {use.reason}"
                return ParamUse(False, why, kind=use.kind, cure=use.cure)
            for names, required in use.needs:
                passed = [argument_for(call, inner, other, False) for other in names]
                if any(p is None for p in passed):
                    width, params = None, ()  # through *args / **kwargs at the call: not seen
                else:
                    width, params = callee_width(fn, ctx.model.torch_path, passed, cache["context"])  # type: ignore[arg-type]
                if width == "full" or (width == "float" and required == "float"):
                    continue
                if not params:
                    shown = " or ".join(f"`{n}`" for n in names)
                    return ParamUse(False, f"`{keyword}` meets {shown} of `{call.func.id}()` in tensor arithmetic, not visibly a floating tensor (line {call.lineno})")
                needs.append((tuple(params), required))
        return ParamUse(True, "", tuple(needs))

    # -- the check ------------------------------------------------------------
    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        site_model = NameResolver(model)
        findings: List[Finding] = []
        callees = self._callees(ctx, site_model)
        literal_values = _literal_values(callees)
        direct = [
            _Route(call, call, callee, get_summary, skip_self, fn_def=fn, site=site, elsewhere=elsewhere)
            for call, callee, get_summary, skip_self, fn, site, elsewhere in callees
        ]
        routes = direct + self._forwarded(ctx, site_model, direct)
        done: Set[int] = set()
        for route in routes:
            call = route.origin
            flows = {}
            for _, star, value in call_args(call):
                if star or id(value) in done or (route.slots is not None and id(value) not in route.slots):
                    continue
                flow = float_flow(site_model, value)
                if flow is not None:
                    flows[id(value)] = flow
            traced = _traced_floats(ctx, route)
            if not flows and not traced:
                continue
            summary = route.summary()
            by_param: Dict[str, ast.AST] = {}
            args: List[Tuple[Optional[str], ast.AST, Optional[str], object]] = []
            # the compiled call's own arguments, then (forwarded) the origin's
            index = 0
            positional_ok = True
            for keyword, star, value in call_args(route.inner):
                if star:
                    positional_ok = False
                    continue
                param = None
                if summary is not None:
                    if keyword is not None:
                        param = summary.param_for(None, keyword, route.skip_self)
                    elif positional_ok:
                        param = summary.param_for(index, None, route.skip_self)
                position = index if positional_ok else None  # after `*xs`: unknown
                if keyword is None:
                    index += 1
                if param is not None:
                    by_param[param] = value
                if route.slots is None:
                    args.append((keyword, value, param, keyword if keyword is not None else position))
            for slot_value in call_args(call) if route.slots is not None else ():
                value = slot_value[2]
                if id(value) not in route.slots:
                    continue
                keyword, position = route.slots[id(value)]
                param = None
                if summary is not None:
                    param = summary.param_for(position, keyword, route.skip_self)
                if param is not None:
                    by_param[param] = value
                args.append((slot_value[0], value, param, keyword if keyword is not None else position))
            members: List[_Member] = []
            for keyword, value, param, slot in args:
                flow = flows.get(id(value))
                seen = None
                if flow is None and traced and id(value) not in done:
                    seen = _traced_source(route, traced, param, keyword_at(route, keyword, value), slot)
                    if seen is not None:
                        flow = FloatFlow(f"the trace saw `{seen}` guarded on a float's value")
                if flow is None:
                    continue
                done.add(id(value))
                varies = "the trace saw it recompile" if seen is not None else self._varies(site_model, call, value, flow)
                if varies is None and route.slots is None and len(literal_values.get((route.callee, slot), ())) > 1:
                    varies = f"`{route.callee}` is called with different values"
                members.append(_Member(keyword, value, param, slot, flow, seen, varies))
            changing = [m for m in members if m.varies is not None]
            counters: List[_Member] = []
            taken = {id(m.value) for m in members}
            for keyword, value, param, slot in args if changing else ():
                counted = counted_int(site_model, value) if id(value) not in taken else None
                if counted is not None:
                    counters.append(_Member(keyword, value, param, slot, FloatFlow(counted), None, counted))
            if counters:
                findings.append(self._together(ctx, site_model, route, summary, by_param, changing, counters))
            for member in members:
                if not counters or member.varies is None:
                    findings.append(self._alone(ctx, site_model, route, summary, by_param, member))
        return findings

    def _judged(self, ctx, site_model: NameResolver, route: _Route, summary, by_param, member: "_Member") -> Tuple[str, str]:
        """The verdict on wrapping one argument (:meth:`_verdict`), a forwarder's reason first."""
        verdict, why = self._verdict(ctx, site_model, route, summary, member.param, keyword_at(route, member.keyword, member.value), by_param)
        if verdict != "none" and route.unsafe:
            verdict, why = "unsafe", route.unsafe  # a forwarder reads what it forwards
        return verdict, why

    def _emit(self, ctx, route: _Route, member: "_Member", message: str, edits: List[Edit], safety: Optional[Safety], title: str, proven: bool, about: Tuple[str, ...]) -> Finding:
        return self.finding(
            ctx,
            member.value,
            message,
            edits=edits if safety is not None else [],
            safety=safety,
            needs_torch=True,
            title=title,
            proven=proven,
            feeds=def_first_lines(route.fn_def) if isinstance(route.fn_def, _FUNCS) else (route.elsewhere[1] if route.elsewhere else ()),
            feeds_path=route.elsewhere[0] if route.elsewhere and not isinstance(route.fn_def, _FUNCS) else "",
            about=about,
        )

    def _alone(self, ctx, site_model: NameResolver, route: _Route, summary, by_param, member: "_Member") -> Finding:
        """One float argument's finding: its own wrap."""
        model, call = ctx.model, route.origin
        keyword, value, param, flow = member.keyword, member.value, member.param, member.flow
        where = f"`{keyword}=`" if keyword is not None else f"`{site_model.code(call, value)}`"
        through = f" through `{'` -> `'.join(route.via)}`" if route.via else ""
        head = f"float argument {where} ({flow.reason}) to compiled `{route.callee}`{through} is guarded on its value: new values recompile"
        verdict, why = self._judged(ctx, site_model, route, summary, by_param, member)
        if verdict == "safe":
            message = f"{head}; pass a 0-d tensor"
            safety: Optional[Safety] = Safety.SAFE
        elif verdict == "unsafe":
            message = f"{head}; fix is unsafe: {why}"
            safety = Safety.UNSAFE
        else:  # no fix: the analysis knows a wrap crashes or cannot cure it
            message = f"{head}; {why}"
            safety = None
        edit = Edit(ctx.source.target(value, "BaseExpression"), lambda node: _tensor_call(model, node))
        varies = member.varies
        if varies is None:
            head_note = " (no call seen passing a changing value: reported with --unproven)"
            message = message.replace(head, head + head_note, 1)
        about = tuple(dict.fromkeys(n for n in (param, keyword_at(route, keyword, value)) if n))
        return self._emit(ctx, route, member, message, [edit], safety, "wrap in `torch.tensor(..., dtype=torch.float64)`", varies is not None, about)

    def _together(self, ctx, site_model: NameResolver, route: _Route, summary, by_param, members: List["_Member"], counters: List["_Member"]) -> Finding:
        """The floats of one call beside an int counted up with them (a fused
        optimizer kernel's lr and step): each new step recompiles whatever
        the floats are, so they are wrapped together, the counter included
        (a float64 0-d tensor holds an int exactly and meets Python floats in
        float64, as the int did), or not at all.  One finding, at the first
        float, with every wrap."""
        model, call = ctx.model, route.origin

        def shown(m: "_Member") -> str:
            return f"`{m.keyword}=`" if m.keyword is not None else f"`{site_model.code(call, m.value)}`"

        through = f" through `{'` -> `'.join(route.via)}`" if route.via else ""
        floats = ", ".join(f"{shown(m)} ({m.flow.reason})" for m in members)
        ints = ", ".join(f"{shown(m)} ({m.flow.reason})" for m in counters)
        head = (
            f"float argument{'s' if len(members) > 1 else ''} {floats} to compiled `{route.callee}`{through} "
            f"{'are' if len(members) > 1 else 'is'} guarded on {'their values' if len(members) > 1 else 'its value'}, and so is {ints} passed with {'them' if len(members) > 1 else 'it'}: "
            "every step changes them together and recompiles; a tensor for the floats alone cures nothing while the int still changes"
        )
        judged = [(m, *self._judged(ctx, site_model, route, summary, by_param, m)) for m in members + counters]
        blocked = [(m, why) for m, verdict, why in judged if verdict == "none"]
        risky = [(m, why) for m, verdict, why in judged if verdict == "unsafe"]
        if blocked:
            m, why = blocked[0]
            message = f"{head}; no fix, as {shown(m)} cannot be a tensor: {why}"
            safety: Optional[Safety] = None
        elif risky:
            m, why = risky[0]
            message = f"{head}; pass them all as 0-d float64 tensors (fix is unsafe: {shown(m)}: {why})"
            safety = Safety.UNSAFE
        else:
            message = f"{head}; pass them all as 0-d float64 tensors"
            safety = Safety.SAFE
        edits = [Edit(ctx.source.target(m.value, "BaseExpression"), lambda node: _tensor_call(model, node)) for m in members + counters]
        about = tuple(dict.fromkeys(n for m in members + counters for n in (m.param, keyword_at(route, m.keyword, m.value)) if n))
        return self._emit(ctx, route, members[0], message, edits, safety, "wrap the call's scalars in `torch.tensor(..., dtype=torch.float64)`", True, about)

    @staticmethod
    def _varies(site_model: NameResolver, call: ast.Call, value: ast.AST, flow) -> Optional[str]:
        """Evidence that the float changes between calls.  A float computed
        from a param group's lr changes when the lr does (written in a loop or
        a function, or an LR scheduler is built): being read again in the loop
        over the groups or parameters is no evidence; nor is a float known
        only by the return annotation of the call it is unpacked from."""
        if flow.group_lrs:
            return site_model.group_lr_facts()[1]
        if flow.unpacked:
            return None  # an annotated result of a call, unpacked again each time: no sign it changes
        return number_varies(site_model.model, call, value, calls=functools.partial(calls_of, site_model))

    @staticmethod
    def _site_option(site, name: str) -> Optional[bool]:
        """A compile option's literal bool (absent: False); None when it cannot
        be read (a variable, ``**opts``, a site in another module)."""
        if site is None or site.has_star_kwargs:
            return None
        value = site.option_value(name)  # a literal or a module constant
        if value is None and site.option(name) is None:
            return False
        return value if isinstance(value, bool) else None

    def _verdict(self, ctx, site_model: NameResolver, route: _Route, summary: Optional[FunctionSummary], param: Optional[str], keyword: Optional[str], by_param) -> Tuple[str, str]:
        """("safe", "") | ("unsafe", why) | ("none", why and what to do instead)."""
        if summary is None:
            return "unsafe", "the compiled function's body cannot be seen"
        site = route.site
        use = summary.uses.get(param) if param is not None else None
        if use is None and keyword is not None and route.fn_def is not None and route.fn_def.args.kwarg is not None:  # type: ignore[attr-defined]
            # `**kwargs` of the compiled function, passed on to functions of this module
            use = self._kwargs_use(ctx, route.fn_def, keyword, 0)
            param = keyword
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
