"""A mark for a variable that may hold None at the call (layer 0's
`residual` in a model's loop over regionally compiled layers: vllm-gaudi
7e7adbe6's case): a mark of None raises, so the mark goes under `if
residual is not None:` (codemods/trace/cures.py, codemods/analysis/
placement.py ``may_be_none``).  Run on real torch: fewer graphs, the same
values, and a second run finds its own guarded mark."""

from __future__ import annotations

import ast

from test_trace import graphs, results, run_cli

from codemods.analysis.compile_sites import model_of
from codemods.analysis.placement import marks_before, may_be_none
from codemods.pipeline.engine import parse_ast


def test_run_fix_guards_the_mark_of_a_variable_bound_to_none(tmp_path):
    """Under torch 2.13: 4 graphs -> 2; unguarded, the mark raised on None
    and the run restored the file."""
    proc, script = run_cli(tmp_path, "residual_none_first", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (4, 2)
    text = script.read_text()
    assert (
        "            torch._dynamo.maybe_mark_dynamic(positions, 0)\n"
        "            if residual is not None:\n"
        "                torch._dynamo.maybe_mark_dynamic(residual, 0)\n"
        "            torch._dynamo.maybe_mark_dynamic(hidden_states, 0)\n"
        "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
    ) in text
    assert "where it is not None (`if residual is not None:`" in out
    # a second run finds the guarded mark among the marks before the call
    source = parse_ast("<t>", text.encode())
    call = next(n for n in source.nodes(ast.Assign) if isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "layer")
    assert ("maybe_mark_dynamic", "residual", 0) in marks_before(source, call)


def _names(code: str):
    source = parse_ast("<t>", code.encode())
    model = model_of(source)
    uses = [n for n in source.nodes(ast.Name) if isinstance(n.ctx, ast.Load) and n.id == "x"]
    return [may_be_none(model, n) for n in uses]


def test_may_be_none():
    assert _names("def f(a):\n    x = None\n    for _ in a:\n        x = g(x)\n") == [True]
    assert _names("def f(a, x=None):\n    return g(x)\n") == [True]
    assert _names("def f(a, c):\n    x = a if c else None\n    return g(x)\n") == [True]
    # bound only to values: no guard
    assert _names("def f(a):\n    x = a\n    return g(x)\n") == [False]
    assert _names("def f(a, x=0):\n    return g(x)\n") == [False]
    assert _names("def f(a):\n    x, y = a\n    return g(x)\n") == [False]


def test_a_tensor_input_found_none_is_a_none_check():
    """torch 2.13 says ``expected type of 'residual' to be a tensor type, '
    but found <class 'NoneType'>`` where the first layer got None: a None
    check, whose cure the table names (a value at every call)."""
    from test_trace import fixture
    from codemods.trace import read as tr

    (entry,) = [e for e in fixture("residual_none_first").entries if e.name == "forward"]
    assert entry.sources(tr.NONE_CHECK) == ["residual"]
    assert "pass a value at every call" in tr.cure_label(entry, tr.NONE_CHECK, [])
