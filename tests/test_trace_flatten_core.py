"""A compiled function recompiling on its input's rank (compressed-tensors
55777c4b, ``cast_to_fp4``): an eager wrapper flattens the input of the
compiled elementwise core (codemods/trace/flatten_core.py), only where the
body is proven elementwise (codemods/analysis/elementwise.py, whose table is
proven here on real torch)."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch
import torch.nn.functional as F

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.analysis.elementwise import ELEMENTWISE, MASKS, why_not_elementwise
from codemods.trace import flatten_core
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr

# -- the table: every op it lists is elementwise on real torch ----------------------------

#: how the table test calls an op (``x``, ``y``, ``z`` tensors of one shape,
#: ``m`` a mask, ``i``/``j`` int tensors); the rest take ``(x)`` and, when
#: binary, ``(x, y)`` and ``(x, 0.5)``
CALLS = {
    "where": ["m, x, y", "m, x, 0.0"],
    "clamp": ["x, -0.5, 0.5", "x, min=y"],
    "clip": ["x, -0.5, 0.5"],
    "clamp_min": ["x, 0.1"],
    "clamp_max": ["x, 0.1"],
    "lerp": ["x, y, 0.3"],
    "addcmul": ["x, y, z"],
    "addcdiv": ["x, y, z.abs() + 1"],
    "masked_fill": ["x, m, 0.0"],
    "full_like": ["x, 2.0"],
    "threshold": ["x, 0.1, 0.0"],
    "logical_not": ["m"],
    "bitwise_not": ["i"],
    "bitwise_and": ["i, j", "m, m"],
    "bitwise_or": ["i, j"],
    "bitwise_xor": ["i, j"],
    "floor_divide": ["x, y", "x, 0.5"],
    "round": ["x", "x, decimals=1"],
    "pow": ["x.abs(), y", "x.abs(), 0.5"],
    "nan_to_num": ["x.log()"],
}
BINARY = {
    "add sub subtract mul multiply div divide true_divide remainder fmod maximum minimum fmax fmin eq ne lt le gt ge "
    "greater less greater_equal less_equal not_equal logical_and logical_or logical_xor atan2 hypot copysign"
}
BINARY = set(" ".join(BINARY).split())


def _op(name):
    for space in (torch, F, torch.special):
        if hasattr(space, name):
            return getattr(space, name)
    raise AssertionError(f"{name}: neither torch.{name} nor torch.nn.functional.{name}")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_every_op_of_the_table_maps_elements_to_elements(name, layout):
    torch.manual_seed(0)
    shape = (2, 3, 4)

    def make(kind):
        t = {"f": torch.randn(4, 3, 2), "m": torch.randn(4, 3, 2) > 0, "i": torch.randint(0, 50, (4, 3, 2))}[kind]
        return t.permute(2, 1, 0) if layout == "transposed" else t.reshape(shape)

    full = {"x": make("f"), "y": make("f"), "z": make("f"), "m": make("m"), "i": make("i"), "j": make("i")}
    flat = {k: v.flatten() for k, v in full.items()}
    forms = CALLS.get(name, ["x, y", "x, 0.5"] if name in BINARY else ["x"])
    op = _op(name)
    ran = 0
    for form in forms:
        try:
            a = eval(f"op({form})", {"op": op}, full)  # noqa: S307 - the test's own call forms
        except (TypeError, RuntimeError):
            # an op that takes no literal there (`atan2(x, 0.5)`) fails on
            # the flattened input too: the wrapper changes no crash into a value
            with pytest.raises((TypeError, RuntimeError)):
                eval(f"op({form})", {"op": op}, flat)  # noqa: S307
            continue
        ran += 1
        b = eval(f"op({form})", {"op": op}, flat)  # noqa: S307
        assert a.shape == shape, (name, form)
        # bit-identical for a contiguous input (flatten() is a view of the
        # same memory, one kernel path); for a transposed one, ops with
        # vectorised kernels (exp, gelu, sigmoid) may differ in the last bit,
        # as eager does between any two layouts
        exact = {"rtol": 0, "atol": 0} if layout == "contiguous" else {}
        torch.testing.assert_close(b.reshape(shape), a, equal_nan=True, msg=f"{name}({form})", **exact)
        if name in MASKS:
            assert a.dtype == torch.bool, name
        # as a tensor method too, where torch has one
        if hasattr(torch.Tensor, name) and not form.startswith(("m, x", "x, m")):
            first, _, rest = form.partition(", ")
            c = eval(f"({first}).{name}({rest})", {}, full)  # noqa: S307
            torch.testing.assert_close(c, a, rtol=0, atol=0, equal_nan=True)
    assert ran, name


# -- the proof ---------------------------------------------------------------------------

FP4 = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    class FP4_E2M1_DATA:
        @staticmethod
        @torch.compile
        def cast_to_fp4(x):
            sign = torch.sign(x)
            x = torch.abs(x)
            x[(x >= 0.0) & (x <= 0.25)] = 0.0
            x[(x > 0.25) & (x < 0.75)] = 0.5
            x[x > 5.0] = 6.0
            return x * sign
    """
)


def why(body: str, param: str = "x"):
    src = (
        "import torch\nimport math\nimport torch.nn.functional as F\nW = torch.ones(4)\nLIMIT = 6.0\nLIMIT_T = torch.tensor(6.0)\n"
        "class Q:\n    max = 6.0\n    scale = 0.5\n\nQ.scale = 0.25\n\ndef f(x):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    )
    from codemods.analysis.compile_sites import model_of
    from codemods.pipeline.engine import parse_ast

    source = parse_ast("<t>", src.encode())
    model = model_of(source)
    fn = next(n for n in ast.walk(source.tree) if isinstance(n, ast.FunctionDef))
    return why_not_elementwise(fn, param, model)


@pytest.mark.parametrize(
    "body",
    [
        "sign = torch.sign(x)\nx = torch.abs(x)\nx[(x >= 0.0) & (x <= 0.25)] = 0.0\nreturn x * sign\n",
        "return F.gelu(x, approximate='tanh') * 0.5\n",
        "y = x.float()\nz = torch.where(y > 0, y, -y)\nz.clamp_(max=math.pi)\nz += 1\nreturn z.to(torch.bfloat16)\n",
        '"""doc"""\nt = torch.zeros_like(x)\nm = ~torch.isnan(x)\nt[m] = x[m]\nreturn t\n',
        "return torch.round(x, decimals=2).clamp(-float('inf'), 6.0)\n",
        # numbers: a local, a module constant, a class-level constant
        "n = 2\nn += 1\nreturn (x * n).clamp(-LIMIT, LIMIT) * Q.max\n",
    ],
)
def test_elementwise_bodies_are_proven(body):
    assert why(body) is None


@pytest.mark.parametrize(
    "body, reason",
    [
        ("return torch.softmax(x, -1)\n", "`torch.softmax` is not an elementwise op"),
        ("return x - x.mean()\n", "`x.mean` is not an elementwise op"),
        ("return x * W\n", "`W` is not known to have the input's shape"),  # a global may broadcast
        ("x[x > 0] = 0.0\nreturn x * 2\n", "may be the input itself"),  # the caller sees the change
        ("y = x.float()\ny[y > 0] = 0.0\nreturn y * 2\n", "may be the input itself"),  # .float() of a float tensor is x
        ("return x.float()\n", "may return its input itself"),
        ("if x.sum() > 0:\n    x = x * 2\nreturn x * 1\n", "is not a step of elementwise code"),
        ("return x @ x\n", "is not an elementwise op"),
        ("t = torch.abs(x)\nt[t.long()] = 0.0\nreturn t\n", "not indexed by a mask"),
        ("t = torch.abs(x)\nt[t > 0] = x\nreturn t\n", "is written through a mask"),
        ("return torch.flip(x, [0])\n", "is not an elementwise op"),
        ("return (0 < x < 1) * 1.0\n", "is not an elementwise op"),
        ("return torch.relu(*[x])\n", "unpacked"),
        ("n = W\nreturn x * n\n", "`W` is not known to have the input's shape"),
        ("return x * LIMIT_T\n", "`LIMIT_T` is not known"),  # a module-level tensor
        ("return x * Q.scale\n", "`Q.scale` is not an elementwise op"),  # rebound elsewhere
    ],
)
def test_what_is_not_elementwise_says_why(body, reason):
    got = why(body)
    assert got is not None and reason in got, got


# -- the rewrite -------------------------------------------------------------------------


def split(src: str, function="cast_to_fp4", first=8, param="x"):
    """(new text or None, (line, column, core) of the wrapper, why not or None)."""
    done = flatten_core.plan(src.encode(), function, first, param)
    if done.new is None:
        return None, None, done.why
    return done.new.decode(), (done.line, done.column, done.core), None


def test_a_static_method_becomes_an_eager_wrapper_around_a_compiled_core():
    new, site, reason = split(FP4)
    assert reason is None and site == (8, 5, "_cast_to_fp4")
    assert (
        "    @staticmethod\n"
        "    def cast_to_fp4(x):\n"
        "        return FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)\n"
        "\n"
        "    @staticmethod\n"
        "    @torch.compile\n"
        "    def _cast_to_fp4(x):\n"
        "        sign = torch.sign(x)\n"
    ) in new
    assert new.replace("FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)", "").count("_cast_to_fp4") == 1
    # a second run: the public name is compiled no more, nothing to change
    assert split(new)[0] is None


def test_a_module_function_and_a_method_call_their_core_by_its_name():
    module = "import torch\n\n\n@torch.compile(backend='eager')\ndef fp4(x):\n    \"\"\"Round.\"\"\"\n    return torch.sign(x) * torch.abs(x).clamp(max=6.0)\n"
    new, site, reason = split(module, "fp4", 5)
    assert reason is None
    # the docstring stays with the public name (and in the core)
    assert new == textwrap.dedent(
        '''\
        import torch


        def fp4(x):
            """Round."""
            return _fp4(x.flatten()).reshape(x.shape)


        @torch.compile(backend='eager')
        def _fp4(x):
            """Round."""
            return torch.sign(x) * torch.abs(x).clamp(max=6.0)
        '''
    )
    method = "import torch\n\n\nclass Q:\n    @torch.compile\n    def round(self, x):\n        return torch.round(x * 2.0) / 2.0\n"
    new, site, reason = split(method, "round", 6)
    assert reason is None and "    def round(self, x):\n        return self._round(x.flatten()).reshape(x.shape)\n" in new


def test_the_core_gets_a_name_the_file_does_not_use():
    src = FP4 + "\n\ndef _cast_to_fp4():\n    pass\n"
    new, site, reason = split(src)
    assert site[2] == "_cast_to_fp4_2" and "FP4_E2M1_DATA._cast_to_fp4_2(x.flatten())" in new


@pytest.mark.parametrize(
    "change, reason",
    [
        (("    @torch.compile\n", "    @torch.compile\n    @functools.cache\n"), "decorator"),
        (("def cast_to_fp4(x):", "def cast_to_fp4(x, scale):"), "takes more than the tensor"),
        (("def cast_to_fp4(x):", "def cast_to_fp4(x, *rest):"), "takes more than the tensor"),
        (("        return x * sign\n", "        return (x * sign).sum(-1)\n"), "not proven elementwise"),
    ],
)
def test_what_the_wrapper_would_change_is_left_alone(change, reason):
    src = FP4.replace(*change)
    assert src != FP4
    new, site, got = split(src)
    assert new is None and reason in got


# -- from the trace: the recorded runs, then the real runs --------------------------------


def test_the_recorded_trace_gives_the_wrapper(copied):  # noqa: F811
    script, trace = copied("rank_and_size")
    (entry,) = [e for e in trace.entries if e.name == "cast_to_fp4"]
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.finding.rule_name, m.cause, m.finding.applied) for m in guided.matches] == [
        ("TRACE", "flatten-core-from-trace", tr.RANK, True)
    ]
    assert b"        return FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)\n" in guided.files[0].new
    assert tr.cure_label(entry, tr.RANK, [], trace_cures={"flatten-core-from-trace"}) == (
        "an eager wrapper flattens `x` for the elementwise compiled core (one rank)"
    )
    off = trace_guide.guide(trace, Settings(ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert not off.matches


def test_the_recorded_trace_of_a_softmax_keeps_the_report(copied):  # noqa: F811
    script, trace = copied("rank_softmax")
    (entry,) = [e for e in trace.entries if e.name == "normalize"]
    assert tr.RANK in entry.causes
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert not any(g.changed for g in guided.files)
    # a report (no fix) that says why there is no wrapper
    [m] = guided.matches
    assert (m.finding.code, m.finding.fix, m.finding.applied, m.cause) == ("TRACE", None, False, tr.RANK)
    assert m.finding.message.endswith("no flattening wrapper: it is not proven elementwise in `x`: `torch.softmax` is not an elementwise op")
    assert tr.cure_label(entry, tr.RANK, []).startswith("report: one graph per number of dims of `x`")


def test_run_fix_flattens_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 4 graphs (ranks 1, 2, 3, then a new rank-1 size) -> 2
    (the flattened sizes 16, 64, 128, 12: one recompile, then dynamic)."""
    proc, script = run_cli(tmp_path, "rank_and_size", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: rank_and_size.py:21:5: TRACE `cast_to_fp4` recompiled on the rank of `x`" in out
    first, second = results(out)
    assert first == second
    assert "total                     4 -> 2" in out or graphs(out, "total") == (4, 2)
    assert "def _cast_to_fp4(x):" in script.read_text()


def test_run_fix_leaves_a_softmax_alone(tmp_path):
    proc, script = run_cli(tmp_path, "rank_softmax", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "report: one graph per number of dims of `x`" in out
    assert "no flattening wrapper: it is not proven elementwise in `x`" in out
    assert script.read_bytes() == (SCRIPTS / "rank_softmax.py").read_bytes()  # left byte-identical


# -- the wrap form: `name = torch.compile(fn)` ----------------------------------------------

WRAP = textwrap.dedent(
    """\
    import torch


    def fp4(x):
        return torch.sign(x) * torch.abs(x).clamp(max=6.0)


    fast_fp4 = torch.compile(fp4, backend="eager")
    # a use
    print(fast_fp4(torch.ones(2, 3)))
    """
)


def test_a_wrapped_function_gets_a_compiled_core_binding_and_an_eager_wrapper():
    new, site, reason = split(WRAP, "fp4", 4)
    assert reason is None and site == (8, 1, "_fast_fp4")
    assert new == WRAP.replace(
        'fast_fp4 = torch.compile(fp4, backend="eager")\n',
        '_fast_fp4 = torch.compile(fp4, backend="eager")\n\n\ndef fast_fp4(x):\n    return _fast_fp4(x.flatten()).reshape(x.shape)\n\n\n',
    )
    # a second run: the compiled binding is called with a flattened tensor only
    assert split(new, "fp4", 4) == (None, None, "its calls pass a flattened tensor already")


@pytest.mark.parametrize(
    "change, reason",
    [
        (('fast_fp4 = torch.compile(fp4, backend="eager")\n', 'def make():\n    return torch.compile(fp4, backend="eager")\n'), "not compiled by its decorator or by one"),
        (("def fp4(x):", "def fp4(x, s):"), "takes more than the tensor"),
        (("return torch.sign(x)", "return torch.cumsum(x, 0)"), "not proven elementwise"),
    ],
)
def test_what_the_wrap_form_leaves_alone(change, reason):
    src = WRAP.replace(*change)
    assert src != WRAP
    new, site, got = split(src, "fp4", 4)
    assert new is None and reason in got, got


def test_run_fix_splits_a_wrapped_function_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 4 graphs (ranks 1, 2, 3, a new rank-1 size) -> 2."""
    proc, script = run_cli(tmp_path, "rank_wrap", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "TRACE `round_half` recompiled on the rank of `x`" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (4, 2)
    text = script.read_text()
    assert "_fast_round = torch.compile(round_half, backend=counting_backend)\n\n\ndef fast_round(x):\n" in text


def test_the_ci_guard_says_whether_the_function_can_be_split(copied):  # noqa: F811
    # --max-recompiles changes nothing, but reads the source to tell the cure
    from codemods.modes.guard import cause_details

    script, trace = copied("rank_and_size")
    (entry,) = [e for e in trace.entries if e.name == "cast_to_fp4"]
    (rank,) = [d for d in cause_details(entry, []) if d.startswith("cause: tensor rank")]
    assert rank == "cause: tensor rank `x`; cure: an eager wrapper can flatten `x` for the elementwise compiled core `_cast_to_fp4` (`run --fix` writes it)"
    assert script.read_bytes() == (SCRIPTS / "rank_and_size.py").read_bytes()  # nothing written


def test_the_ci_guard_says_why_a_function_cannot_be_split(copied):  # noqa: F811
    from codemods.modes.guard import cause_details

    script, trace = copied("rank_softmax")
    (entry,) = [e for e in trace.entries if e.name == "normalize"]
    (rank,) = [d for d in cause_details(entry, []) if d.startswith("cause: tensor rank")]
    assert rank.startswith("cause: tensor rank `x`; cure: report: one graph per number of dims of `x`")
    assert rank.endswith("; no flattening wrapper: it is not proven elementwise in `x`: `torch.softmax` is not an elementwise op")
