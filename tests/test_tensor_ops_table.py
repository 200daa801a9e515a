"""Prove every row of ``codemods/tensor_ops_table.py`` on the installed torch.

TENSOR_OK rows: the op with a Python float and with a 0-d float64 tensor of
the same value gives bit-identical results of the same dtype (every floating
dtype the row allows, 1000 elements, several values), for every function and
method form and every slot; and ``torch.compile(fullgraph=True)`` with a
counting backend compiles one graph for three tensor values, whose results
equal eager's.  REJECTED entries really differ or raise.  NUMBER_ONLY rows and
the builtin claims FR003 writes in its messages really happen.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

from codemods.analysis.tensor_ops_table import BUILTIN_NUMBER_ONLY, NUMBER_ONLY, REJECTED, TENSOR_OK, number_only_row, tensor_row

VALUES = [0.1, 1 / 3, 0.7 + 1e-9, 1e-3, 2.5, -0.37, 0.9]
FULL = [torch.float32, torch.float64]
HALF = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    torch._dynamo.reset()


def _t(v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float64)


def _operands(dtype):
    torch.manual_seed(0)
    x = torch.randn(1000).to(dtype)
    y = torch.randn(1000).to(dtype)
    z = (torch.rand(1000) + 0.5).to(dtype)
    return x, y, z


def _forms(row):
    """Every way the table lets a call pass the value: (label, fn(x, y, z, v))."""
    n_tensors = len(row.operands)
    out = []
    for slot, index in row.slots.items():
        for path in row.functions:
            fn = eval(path, {"torch": torch})
            if index is not None:
                out.append((f"{path} positional {slot}", lambda x, y, z, v, fn=fn, index=index: fn(*_positional([x, y, z][:n_tensors], index, v))))
            out.append((f"{path}({slot}=)", lambda x, y, z, v, fn=fn, slot=slot: fn(*[x, y, z][:n_tensors], **{slot: v})))
        for method in row.methods:
            def call(x, y, z, v, method=method, slot=slot, index=index, by_keyword=False):
                tensors = [x.clone(), y, z][:n_tensors]
                bound = getattr(tensors[0], method)
                if index is None or by_keyword:
                    return bound(*tensors[1:], **{slot: v})
                return bound(*_positional(tensors, index, v)[1:])

            if index is not None:
                out.append((f"x.{method} positional {slot}", call))
            out.append((f"x.{method}({slot}=)", lambda x, y, z, v, call=call: call(x, y, z, v, by_keyword=True)))
    return out


def _positional(tensors, index, v):
    """Positional arguments with ``v`` at ``index`` (earlier scalar slots None,
    as clamp(x, None, max) allows)."""
    args = list(tensors)
    while len(args) < index:
        args.append(None)
    args.insert(index, v)
    return args


ROW_FORMS = [(name, label, fn) for name, row in TENSOR_OK.items() for label, fn in _forms(row)]


@pytest.mark.parametrize("name, label, fn", ROW_FORMS, ids=[f"{n}: {lbl}" for n, lbl, _ in ROW_FORMS])
def test_row_same_result_with_a_0d_float64_tensor(name, label, fn):
    row = TENSOR_OK[name]
    dtypes = FULL + (HALF if row.width == "float" else [])
    for dtype in dtypes:
        x, y, z = _operands(dtype)
        for v in VALUES:
            ref = fn(x, y, z, v)
            got = fn(x, y, z, _t(v))
            assert ref.dtype == got.dtype == dtype, (label, dtype, v, ref.dtype, got.dtype)
            assert torch.equal(ref, got), (label, dtype, v)


@pytest.mark.parametrize("name, label, fn", ROW_FORMS, ids=[f"{n}: {lbl}" for n, lbl, _ in ROW_FORMS])
def test_row_compiles_once_for_every_tensor_value(name, label, fn):
    x, y, z = _operands(torch.float32)
    cnt = CompileCounter()
    compiled = torch.compile(fn, backend=cnt, fullgraph=True)
    for v in (0.3, 0.7, 0.9):
        assert torch.equal(compiled(x, y, z, _t(v)), fn(x, y, z, v)), (label, v)
    assert cnt.frame_count == 1, (label, cnt.frame_count)


def test_float_form_recompiles_where_the_tensor_form_does_not():
    """Why the rows matter: with dynamic=False a float weight compiles once per
    value, the tensor weight once."""
    x, y, _ = _operands(torch.float32)
    for arg, expected in ((lambda v: v, 3), (_t, 1)):
        torch._dynamo.reset()
        cnt = CompileCounter()
        f = torch.compile(lambda a, b, w: torch.lerp(a, b, w), backend=cnt, dynamic=False)
        for v in (0.3, 0.7, 0.9):
            f(x, y, arg(v))
        assert cnt.frame_count == expected


@pytest.mark.parametrize("name", list(REJECTED))
def test_rejected_forms_really_differ(name):
    expr, what = REJECTED[name]
    x, y, z = _operands(torch.float32)

    fn = eval(f"lambda x, y, c, v: {expr}", {"torch": torch})

    if what == "differs":
        assert any(not torch.equal(fn(x, y, z, v), fn(x, y, z, _t(v))) for v in VALUES), name
    elif what == "compiled differs":
        compiled = torch.compile(fn, backend=CompileCounter(), fullgraph=True)
        assert any(not torch.equal(compiled(x, y, z, _t(v)), fn(x, y, z, _t(v))) for v in VALUES), name
    else:
        with pytest.raises(Exception, match=what):
            fn(x, y, z, VALUES[0])


def test_lookup():
    assert tensor_row("torch.lerp", None).name == "lerp"
    assert tensor_row(None, "lerp_").name == "lerp"
    assert tensor_row("torch.clip", None).name == "clamp"
    assert tensor_row("torch.pow", None) is None
    assert tensor_row(None, "pow") is None
    assert number_only_row("torch.nn.functional.dropout").name == "dropout"
    assert number_only_row("torch.nn.functional.relu") is None
    for row in TENSOR_OK.values():
        for path in row.functions:
            assert eval(path, {"torch": torch}) is not None
        for method in row.methods:
            assert hasattr(torch.Tensor, method), method
    for row in NUMBER_ONLY.values():
        for path in row.functions:
            assert callable(eval(path, {"torch": torch})), path


# -- what needs a Python number ------------------------------------------------------


def _run(fn, args_list, **compile_kwargs):
    """(graphs, recompile-limit hits, graph breaks) over ``args_list``."""
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounter()
    compiled = torch.compile(fn, backend=cnt, **compile_kwargs)
    for args in args_list:
        compiled(*args)
    limit = sum(n for reason, n in counters["unimplemented"].items() if "recompile limit" in reason.lower())
    return cnt.frame_count, limit, sum(counters["graph_break"].values())


def _number_only_call(row):
    fn = eval(row.functions[0], {"torch": torch})
    extra = {"training": True} if row.name != "torch.dropout" else {}
    shape = {"dropout1d": (1, 4, 8), "dropout2d": (1, 4, 8, 1), "dropout3d": (1, 4, 8, 1, 1), "feature_alpha_dropout": (1, 4, 8)}.get(row.name, (4, 8))
    if row.name == "torch.dropout":
        return lambda x, p: fn(x.view(shape), p, True)
    return lambda x, p: fn(x.view(shape), p=p, **extra)


P_VALUES = [0.05 * i for i in range(1, 11)]


@pytest.mark.parametrize("name", list(NUMBER_ONLY))
def test_number_only_float_recompiles_every_value(name):
    """A float p is specialised even under the default dynamic=None: 10 values
    hit the recompile limit."""
    call = _number_only_call(NUMBER_ONLY[name])
    x = torch.randn(4, 8)
    graphs, limit, _ = _run(call, [(x, p) for p in P_VALUES])
    assert graphs == 8 and limit >= 1


@pytest.mark.parametrize("name", list(NUMBER_ONLY))
def test_number_only_tensor_cannot_cure(name):
    """The claim of each row: a tensor p leaves the graph (a graph break; an
    error under fullgraph=True) or still recompiles every value."""
    row = NUMBER_ONLY[name]
    call = _number_only_call(row)
    x = torch.randn(4, 8)
    call(x, _t(0.3))  # eager accepts it
    graphs, limit, breaks = _run(call, [(x, _t(p)) for p in P_VALUES])
    if row.tensor_effect == "graph break":
        assert breaks >= 1 and limit == 0, (graphs, limit, breaks)
        torch._dynamo.reset()
        with pytest.raises(Exception, match="data-dependent"):
            torch.compile(call, backend=CompileCounter(), fullgraph=True)(x, _t(0.3))
    else:
        assert row.tensor_effect == "recompiles"
        assert graphs == 8 and limit >= 1


def test_dropout_cure_as_tensor_code_compiles_once():
    """The cure FR003 names: dropout written as tensor code with a 0-d tensor
    p compiles one graph for every value, also under fullgraph=True, and
    keeps the expectation of x."""

    def drop(x, p):
        return x * (torch.rand_like(x) >= p) / (1 - p)

    x = torch.ones(200, 200)
    graphs, limit, breaks = _run(drop, [(x, _t(p)) for p in P_VALUES], fullgraph=True)
    assert (graphs, limit, breaks) == (1, 0, 0)
    torch.manual_seed(0)
    assert abs(drop(x, _t(0.4)).mean().item() - 1.0) < 0.02


def test_builtin_claims():
    t = _t(2.5)
    with pytest.raises(TypeError):
        round(t, 2)
    with pytest.raises(TypeError):
        round(t)
    with pytest.raises(TypeError):
        range(t)
    assert set(BUILTIN_NUMBER_ONLY) == {"round", "range", "int", "float", "math"}
    x = torch.randn(4, 8)
    values = [0.5 + 0.25 * i for i in range(5)]
    for conv in (int, float):
        def f(x, c, conv=conv):
            return x * conv(c)

        f_graphs, _, f_breaks = _run(f, [(x, v) for v in values])
        t_graphs, _, t_breaks = _run(f, [(x, _t(v)) for v in values])
        assert f_breaks == 0 and t_breaks >= 1  # the graph break (.item())
        assert t_graphs >= f_graphs  # and no fewer graphs: the number is guarded again

    def m(x, c):
        return x * math.sqrt(c)

    f_graphs, _, _ = _run(m, [(x, v) for v in values])
    t_graphs, _, _ = _run(m, [(x, _t(v)) for v in values])
    assert t_graphs > f_graphs, (f_graphs, t_graphs)


def _branch(x, t):
    if t > 0.0:
        return torch.softmax(x / t, -1)
    return torch.softmax(x, -1)


BRANCH_VALUES = [0.8, 0.7, 1.0, 0.6, 0.9, 0.0, 0.5, 0.0, 1.2, 1.3, 1.4, 1.5]


def test_branch_on_a_tensor_fullgraph_raises():
    x = torch.randn(4, 8)
    f = torch.compile(_branch, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(Exception, match="[Dd]ata-dependent"):
        f(x, _t(0.5))


def test_branch_on_a_tensor_without_fullgraph():
    """What FR003's decision rests on: under the default dynamic=None the wrap
    cuts no graph (and adds a graph break); under dynamic=False it cures the
    recompile-limit hit."""
    x = torch.randn(4, 8)
    default_float = _run(_branch, [(x, v) for v in BRANCH_VALUES])
    default_tensor = _run(_branch, [(x, _t(v)) for v in BRANCH_VALUES])
    assert default_tensor[0] >= default_float[0] and default_float[1] == default_tensor[1] == 0
    static_float = _run(_branch, [(x, v) for v in BRANCH_VALUES], dynamic=False)
    static_tensor = _run(_branch, [(x, _t(v)) for v in BRANCH_VALUES], dynamic=False)
    assert static_float[1] >= 1 and static_tensor[1] == 0 and static_tensor[0] < static_float[0]
    # and the values are right (the branch runs in Python on the tensor's value)
    f = torch.compile(_branch, backend=CompileCounter())
    for v in (0.0, 0.7):
        assert torch.equal(f(x, _t(v)), _branch(x, v))
