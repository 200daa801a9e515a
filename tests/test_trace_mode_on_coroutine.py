"""A mode decorator on an `async def` (lmdeploy before e81c0dfa, PR #3513):
the trace shows an inference tensor and a normal one at one input, FR021's
finding in the file is what `run` offers (unsafe: applied with
--unsafe-fixes, kept only with fewer graphs and the same output)."""

from __future__ import annotations

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr


def test_run_fix_unsafe_enters_the_mode_in_the_body_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1."""
    proc, script = run_cli(tmp_path, "async_inference_loop", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: async_inference_loop.py:32:6: FR021" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (2, 1)
    assert "    async def loop(self, steps):\n        with torch.inference_mode():\n            for step in range(steps):\n" in script.read_text()


def test_without_unsafe_fixes_the_finding_is_offered_and_nothing_written(copied):  # noqa: F811
    script, trace = copied("async_inference_loop")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in guided.matches if m.finding.code == "FR021"]
    assert m.cause == tr.DISPATCH and not m.finding.applied
    assert not any(g.changed for g in guided.files)


def test_only_an_inference_mismatch_names_the_rule():
    inference = tr.CodeEntry(name="f", filename="/p/f.py", firstlineno=3, graphs=2)
    inference.reasons.extend(tr.parse_reason(
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect), "
        "actual DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)"
    ))
    assert [c.code for c in tr.rule_cures(inference, tr.DISPATCH)] == ["FR021"]
    other = tr.CodeEntry(name="f", filename="/p/f.py", firstlineno=3, graphs=2)
    other.reasons.extend(tr.parse_reason("0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect), actual DispatchKeySet(CPU, BackendSelect, Python)"))
    assert tr.rule_cures(other, tr.DISPATCH) == []
