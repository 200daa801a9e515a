"""A module global compiled code fills on first use (vllm-gaudi 86bb66e7,
``_CACHED_FSDPA_OP``): skipped while compiling, a local standing in for it
(codemods/trace/global_memo.py, FR014's judgement of the form in
codemods/transforms/compiled_memo.py).  Each accepted form is run on real
torch here, before and after, with fewer graphs and the values of eager."""

from __future__ import annotations

import textwrap

import pytest
import torch

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.compile_sites import model_of
from codemods.analysis.context import Settings
from codemods.pipeline.engine import parse_ast
from codemods.trace import guide as trace_guide
from codemods.trace.cures import _render_edits
from codemods.transforms.compiled_memo import global_memo, global_memo_edits, global_memo_impure

#: blocks compiled one by one, each calling `attend`, which fills the global
#: `_OP` through FILL (a placeholder) on first use
PROGRAM = '''
import types

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Scale(torch.nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def _make_scale():
    return Scale(0.5)


kernels = types.SimpleNamespace(scale=_make_scale)

_OP = None


def attend(x):
    global _OP
    if _OP is None:
        FILL
    return _OP(x).softmax(dim=-1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(attend(x))


def main(compiled):
    torch.manual_seed(0)
    blocks = [Block() for _ in range(3)]
    if compiled:
        blocks = [torch.compile(b, backend=counting_backend) for b in blocks]
    outs = []
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 4)
            for b in blocks:
                x = b(x)
            outs.append(x)
    return outs, GRAPHS
'''

#: fills of `_OP`, and whether the fix is proven safe
FILLS = [
    ("_OP = torch.tanh", True),  # a torch function: pure
    ("op = Scale(0.5)\n        _OP = op", False),  # a module class built: not known pure
    ("_OP = kernels.scale()", False),  # a module-level object's method (vllm-gaudi's kernels.fsdpa())
]


def _program(fill: str) -> str:
    return PROGRAM.replace("FILL", fill)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _fixed(text: str):
    source = parse_ast("<program>", text.encode())
    model = model_of(source)
    memo, why = global_memo(source, model, _line_of(text, "if _OP is None"), "_OP")
    assert memo is not None, why
    settings = Settings(target_torch=(2, 13))
    new = _render_edits(source, text.encode(), global_memo_edits(source, model, settings, memo), settings).decode()
    return new, global_memo_impure(source, model, memo)


def _run(text: str, compiled: bool):
    namespace: dict = {"__name__": "program"}
    torch._dynamo.reset()
    exec(compile(text, "<program>", "exec"), namespace)
    outs, count = namespace["main"](compiled)
    return outs, count, namespace["_OP"]


@pytest.mark.parametrize("fill,safe", FILLS)
def test_each_fill_keeps_its_values_with_fewer_graphs(fill, safe):
    text = _program(fill)
    fixed, impure = _fixed(text)
    assert (impure is None) == safe, impure
    local = "op_1" if "op = " in fill else "op"  # the fill's own `op` is taken
    assert f"    {local} = None if torch.compiler.is_compiling() else _OP\n    if {local} is None:\n" in fixed
    assert f"        if not torch.compiler.is_compiling():\n            _OP = {local}\n" in fixed
    before, graphs_before, _ = _run(text, True)
    after, graphs_after, _ = _run(fixed, True)
    assert graphs_before == 2 and graphs_after == 1
    eager, _, filled = _run(fixed, False)
    assert filled is not None  # eager calls still fill the global
    for a, b, e in zip(before, after, eager):
        assert torch.equal(a, b) and torch.equal(b, e)


def test_the_local_is_named_after_the_global_and_free():
    fixed, _ = _fixed(_program("op = Scale(0.5)\n        _OP = op"))
    # `op` is taken by the fill: the local gets another name
    assert "    op_1 = None if torch.compiler.is_compiling() else _OP\n    if op_1 is None:\n" in fixed
    assert "        op_1 = op\n        if not torch.compiler.is_compiling():\n            _OP = op_1\n" in fixed
    assert "    return op_1(x).softmax(dim=-1)\n" in fixed


def test_an_older_target_torch_spells_the_dynamo_test():
    text = _program("_OP = torch.tanh")
    source = parse_ast("<program>", text.encode())
    model = model_of(source)
    memo, _ = global_memo(source, model, _line_of(text, "if _OP is None"), "_OP")
    settings = Settings(target_torch=(2, 1))
    fixed = _render_edits(source, text.encode(), global_memo_edits(source, model, settings, memo), settings).decode()
    assert "op = None if torch._dynamo.is_compiling() else _OP" in fixed


def _why(code: str, line_needle: str = "is None:", name: str = "_OP") -> str:
    text = textwrap.dedent(code)
    source = parse_ast("<t>", text.encode())
    memo, why = global_memo(source, model_of(source), _line_of(text, line_needle), name)
    assert memo is None
    return why


@pytest.mark.parametrize(
    "code,why",
    [
        # another function reads it: it would find it unfilled by compiled calls
        (
            """
            import torch
            _OP = None
            def attend(x):
                global _OP
                if _OP is None:
                    _OP = torch.tanh
                return _OP(x)
            def current():
                return _OP
            """,
            "`current` reads `_OP` too",
        ),
        # the check has an else
        (
            """
            import torch
            _OP = None
            def attend(x):
                global _OP
                if _OP is None:
                    _OP = torch.tanh
                else:
                    x = x + 1
                return _OP(x)
            """,
            "has an `else`",
        ),
        # written outside its check
        (
            """
            import torch
            _OP = None
            def attend(x):
                global _OP
                if _OP is None:
                    _OP = torch.tanh
                y = _OP(x)
                _OP = None
                return y
            """,
            "is changed on line 9",
        ),
        # the module binds something else first
        (
            """
            import torch
            _OP = torch.relu
            def attend(x):
                global _OP
                if _OP is None:
                    _OP = torch.tanh
                return _OP(x)
            """,
            "does not bind `_OP` once, to None",
        ),
        # two functions fill it
        (
            """
            import torch
            _OP = None
            def attend(x):
                global _OP
                if _OP is None:
                    _OP = torch.tanh
                return _OP(x)
            def reset():
                global _OP
                _OP = None
            """,
            "more than one function declares",
        ),
        # read before its check
        (
            """
            import torch
            _OP = None
            def attend(x):
                global _OP
                old = _OP
                if _OP is None:
                    _OP = torch.tanh
                return _OP(x), old
            """,
            "read before its check",
        ),
    ],
)
def test_a_form_the_fix_does_not_prove_is_refused(code, why):
    assert why in _why(code)


def test_a_value_read_from_an_argument_is_not_pure():
    text = textwrap.dedent(
        """
        import torch
        _OP = None
        def attend(x, scale):
            global _OP
            if _OP is None:
                _OP = torch.full((4,), scale)
            return x * _OP
        """
    )
    source = parse_ast("<t>", text.encode())
    model = model_of(source)
    memo, why = global_memo(source, model, _line_of(text, "is None:"), "_OP")
    assert memo is not None, why
    assert "`scale`" in global_memo_impure(source, model, memo)


def test_run_fix_skips_the_global_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1 (the table filled by the first compiled call)."""
    proc, script = run_cli(tmp_path, "global_memo_filled", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "TRACE `_ROPE_TABLE` is filled on first use in `rotary_attention`, inside compiled code" in out
    assert "safe: its value is a pure function of nothing" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (2, 1)
    text = script.read_text()
    assert "    rope_table = None if torch.compiler.is_compiling() else _ROPE_TABLE\n    if rope_table is None:\n" in text
    assert "        if not torch.compiler.is_compiling():\n            _ROPE_TABLE = rope_table\n" in text


def test_the_guard_names_the_cure_and_the_guide_applies_it(copied):  # noqa: F811
    from codemods.modes.guard import cause_details

    script, trace = copied("global_memo_filled")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    (detail,) = [d for d in cause_details(entry, []) if d.startswith("cause: None check")]
    assert detail.endswith("cure: skip `_ROPE_TABLE` while compiling, `rope_table` standing in for it (`run --fix` writes it; safe: its value is a pure function of nothing)")
    assert script.read_bytes() == (SCRIPTS / "global_memo_filled.py").read_bytes()  # nothing written
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in guided.matches if m.finding.rule_name == "global-memo-from-trace"]
    assert m.finding.applied and m.finding.fix.safety.name == "SAFE"
    (g,) = [g for g in guided.files if g.changed]
    assert b"rope_table = None if torch." in g.new
