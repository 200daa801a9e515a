"""A compiled function that recompiles on the size of an ``nn.Parameter``,
or on a size its code ties to one (unsloth-zoo before #1003: one norm
forward compiled for norms of several widths): ``force_parameter_static_shapes
=False`` for that compiled function (codemods/trace/config_cures.py), read
from the trace (codemods/trace/read.py: ``parameter_pins``).  Run on real
torch here, before and after: fewer graphs, the same values."""

from __future__ import annotations

import torch

from test_trace import SCRIPTS, copied, fixture, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr


def test_the_trace_shows_the_dim_tied_to_the_weight():
    trace = fixture("parameter_tied_norm")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    assert entry.causes == [tr.TENSOR_SHAPE]  # only the input's guard fails
    assert tr.parameter_pins(entry) == [("hidden_states", 2, "weight", "parameter_tied_norm.py:28", "return out * self.weight")]
    # a mark cannot lift a dim tied to a static size: none is proposed
    assert "hidden_states" not in tr.varying_dims(entry)
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, [])
    assert "dim 2 of `hidden_states` is tied to the size of `weight` (parameter_tied_norm.py:28)" in label
    assert "force_parameter_static_shapes = False" in label
    assert "maybe_mark_dynamic" not in label


def test_run_fix_scopes_the_setting_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 5 graphs (one per width) -> 1."""
    proc, script = run_cli(tmp_path, "parameter_tied_norm", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: parameter_tied_norm.py:31:1: TRACE `forward` recompiled on the size of an nn.Parameter or a size tied to one" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (5, 1)
    text = script.read_text()
    assert (
        "RMSNorm.forward = torch._dynamo.config.patch(force_parameter_static_shapes=False)(\n"
        "    torch.compile(RMSNorm.forward, backend=counting_backend, dynamic=True)\n"
        ")\n"
    ) in text
    assert "torch._dynamo.config.force_parameter_static_shapes = False" not in text  # not the global setting


def test_the_table_names_the_cure_and_the_guide_writes_nothing(copied):  # noqa: F811
    from codemods.modes.output import report_lines

    script, trace = copied("parameter_tied_norm")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in guided.matches if m.finding.rule_name == "parameter-shapes-from-trace"]
    assert m.finding.applied and m.finding.fix.safety.name == "SAFE" and m.cause == tr.TENSOR_SHAPE
    row = next(line for line in report_lines(trace, Settings(), guided) if "tensor shape" in line)
    assert "force_parameter_static_shapes=False for it" in row
    assert script.read_bytes() == (SCRIPTS / "parameter_tied_norm.py").read_bytes()


def _run(text: str):
    namespace: dict = {"__name__": "__main__"}
    torch._dynamo.reset()
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, "<program>", "exec"), namespace)
    return namespace["GRAPHS"], namespace["total"]


def test_where_the_compile_is_not_seen_the_global_setting_is_unsafe(copied):  # noqa: F811
    """The compile hidden in a helper the file cannot resolve: the global
    setting after the imports, applied only with --unsafe-fixes; run, it
    cures as the scoped one does."""
    script, trace = copied("parameter_tied_norm")
    text = script.read_text().replace(
        "RMSNorm.forward = torch.compile(RMSNorm.forward, backend=counting_backend, dynamic=True)",
        "def patch_function(target, name, new_func):\n"
        "    setattr(target, name, torch.compile(new_func, backend=counting_backend, dynamic=True))\n\n\n"
        "patch_function(RMSNorm, \"forward\", RMSNorm.forward)",
    )
    script.write_text(text)
    held = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in held.matches if m.finding.rule_name == "parameter-shapes-from-trace"]
    assert m.finding.fix.safety.name == "UNSAFE" and not m.finding.applied
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    (g,) = [g for g in guided.files if g.new is not None]
    fixed = g.new.decode()
    assert "import torch\ntorch._dynamo.config.force_parameter_static_shapes = False\n" in fixed
    before_graphs, before = _run(text)
    try:
        after_graphs, after = _run(fixed)
    finally:
        torch._dynamo.config.force_parameter_static_shapes = True  # the fixed program set it for this process
    assert (before_graphs, after_graphs) == (5, 1)
    assert before == after


def test_a_dim_tied_to_a_weight_that_did_not_recompile_is_no_pin():
    """A Linear's input features are fixed to its weight's at every compile;
    the recompile was on another dim (the sequence): no pin, the mark stays."""
    entry = tr.CodeEntry(name="forward", filename="model.py", firstlineno=10)
    entry.reasons.append(tr.Reason(cause=tr.TENSOR_SHAPE, source="hidden_states", text="tensor 'hidden_states' size mismatch at index 1. expected 4, actual 6", dims=(1,)))
    entry.specialized.append((0, "hidden_states", 2, "16", "linear.py:134", "return F.linear(input, self.weight, self.bias)"))
    entry.parameter_sizes[0] = {"weight": [8, 16], "bias": [8]}
    assert tr.parameter_pins(entry) == []
    assert tr.varying_dims(entry) == {"hidden_states": (1,)}
    # the same record on the dim that recompiled is one
    entry.specialized.append((1, "hidden_states", 1, "16", "model.py:12", "return x * self.weight"))
    entry.parameter_sizes[1] = {"weight": [16]}
    assert tr.parameter_pins(entry) == [("hidden_states", 1, "weight", "model.py:12", "return x * self.weight")]
    assert tr.varying_dims(entry) == {}
