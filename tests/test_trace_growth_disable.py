"""A method compiled code reaches that grows a list attribute (torchrec
before eb2d656b: the metric's window lists appended to in
`AUCMetricComputation.update`): `@torch.compiler.disable` on it
(codemods/trace/growth_disable.py), safe where the compiled code hit the
recompile limit.  Run on real torch here, before and after: fewer graphs,
the same values."""

from __future__ import annotations

import dataclasses

from test_trace import copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.modes.guard import cause_details
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr
from codemods.trace.growth_disable import growths

DECORATED = "    @torch.compiler.disable\n    def update(self, predictions, labels):\n        self.predictions.append"


def test_run_fix_runs_the_growing_method_eagerly_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 8 graphs and the limit -> 1 (the metric's own
    update, compiled once around the eager window update), the same values."""
    proc, script = run_cli(tmp_path, "window_list_update", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (8, 1), out
    text = script.read_text()
    assert text.count("\n    @torch.compiler.disable\n") == 1 and DECORATED in text


def test_the_guard_names_the_line_and_the_cure_is_safe_after_the_limit(copied):  # noqa: F811
    script, trace = copied("window_list_update")
    (entry,) = [e for e in trace.entries if tr.LENGTH in e.causes]
    assert entry.limit_hit
    (growth,) = growths(entry)
    assert growth.source == "ref.computation.labels" and growth.line == 22
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (match,) = [m for m in guided.matches if m.finding.rule_name == "disable-growth-from-trace"]
    assert match.finding.applied and match.finding.fix.safety.name == "SAFE" and match.finding.line == 20
    assert "safe: `inner` hit the recompile limit" in match.finding.message
    assert DECORATED in guided.files[0].new.decode()
    # the CI guard, which changes nothing, names the same cure
    (detail,) = [d for d in cause_details(entry, []) if d.startswith("cause: length")]
    assert "`@torch.compiler.disable` on `update`, which grows `ref.computation.labels` (`run --fix` writes it; safe" in detail


def test_without_the_limit_it_is_unsafe(copied):  # noqa: F811
    """Below the limit the method was compiled at every call so far: eager
    from now on can be slower, so only with --unsafe-fixes."""
    script, trace = copied("window_list_update")
    trace.entries[:] = [dataclasses.replace(e, limit_hit=False) for e in trace.entries]
    for unsafe in (False, True):
        guided = trace_guide.guide(trace, Settings(unsafe_fixes=unsafe), [str(script.parent)], fixing=True)
        (match,) = [m for m in guided.matches if m.finding.rule_name == "disable-growth-from-trace"]
        assert match.finding.fix.safety.name == "UNSAFE" and match.finding.applied is unsafe
        assert "unsafe: `inner` did not hit the recompile limit" in match.finding.message
        assert (guided.files[0].new is not None) is unsafe


def test_a_method_already_disabled_or_nested_gets_no_second_decorator(copied):  # noqa: F811
    script, trace = copied("window_list_update")
    text = script.read_text()
    script.write_text(text.replace("    def update(self, predictions, labels):\n        self.predictions", "    @torch.compiler.disable\n    def update(self, predictions, labels):\n        self.predictions", 1))
    trace = tr.read_trace(str(script.parent / "trace"))
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert not [m for m in guided.matches if m.finding.rule_name == "disable-growth-from-trace"]
    (why,) = [m.finding for m in guided.matches if m.finding.code == "TRACE" and m.cause == tr.LENGTH]
    assert why.fix is None and "already under `torch.compiler.disable`" in why.message
    assert all(g.new is None for g in guided.files)


def test_growth_in_the_compiled_function_itself_is_fr013s(copied):  # noqa: F811
    """`self.hist.append(...)` in the compiled forward: disabling it would
    disable the compile; FR013's report stands, no second finding."""
    script, trace = copied("list_attr_growth")
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in guided.matches if m.cause == tr.LENGTH] == ["FR013"]
    assert all(g.new is None for g in guided.files)


def test_fr013s_fix_found_in_the_source_is_the_one_applied(tmp_path):
    """torchrec before #3647: FR013 finds the helper that grows the window
    deque and offers the decorator, unsafe without evidence; the trace's
    length recompiles make it safe, and the trace's own cure adds no second
    decorator.  Under torch 2.13: 8 graphs and the limit -> 1, the same value."""
    proc, script = run_cli(tmp_path, "metric_window_deque", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (8, 1), out
    assert "fixed: metric_window_deque.py:23:9: FR013 " in out and "(safe: cures recompiles observed in trace:" in out
    assert "disable-growth" not in out and "TRACE `_aggregate_window_state`" not in out
    assert "FR013, `@torch.compiler.disable` on the function that grows `self._window`" in out
    text = script.read_text()
    assert text.count("\n    @torch.compiler.disable\n    def _aggregate_window_state(self, value):\n") == 1
