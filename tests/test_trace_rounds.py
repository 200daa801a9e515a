"""``run --fix`` in rounds: a rerun's trace shows what the first run's
failed guards hid, and a next round cures it, kept only if it compiles
fewer graphs again with the same output (codemods/modes/traced.py)."""

from __future__ import annotations

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide


def test_a_second_round_cures_what_the_first_fix_left(tmp_path):
    """Under torch 2.13: round 1 removes `dynamic=False` (4 -> 2: automatic
    dynamic then costs one recompile); round 2 marks the optional mask
    entry the rerun shows changing (2 -> 1); the same result all three runs."""
    proc, script = run_cli(tmp_path, "compiled_call_rounds", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = out.split("Round 2: the rerun still recompiles where a fix applies; fixing what its trace shows\n")
    assert "fixed: compiled_call_rounds.py:29:64: FR001 " in first and "TRACE" not in first.split("Findings at")[1]
    assert graphs(first, "total") == (4, 2)
    assert 'fixed: compiled_call_rounds.py:43:22: TRACE `forward` recompiled on tensor shape `attention_mask`' in second
    assert graphs(second, "total") == (2, 1)
    assert "Over 2 rounds: 4 -> 1 graphs." in second and "Round 3" not in second
    # removing dynamic=False settled `forward` (static, then one dynamic graph): no `dynamic=True` round
    assert "trying `dynamic=True`" not in out
    assert len(results(out)) == 3 and len(set(results(out))) == 1
    text = script.read_text()
    assert 'self._compiled_call = torch.compile(self.__call__, backend="eager")\n' in text
    assert (
        '            if isinstance(model_inputs.get("attention_mask"), torch.Tensor):\n'
        '                torch._dynamo.maybe_mark_dynamic(model_inputs["attention_mask"], 1)\n'
        "            logits = model_forward(**model_inputs)\n"
    ) in text


def test_one_round_when_the_rerun_shows_nothing_to_fix(tmp_path):
    """held_int_pair: one round cures it all (2 -> 1); no second round is printed or run."""
    proc, _script = run_cli(tmp_path, "held_int_pair", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "Round 2" not in out and "Over " not in out
    assert len(results(out)) == 2


def test_a_round_that_cures_nothing_is_taken_back_and_the_earlier_stays(tmp_path):
    """Under torch 2.13: round 1 (FR001) 5 -> 2; round 2's mark 2 -> 2 (the
    code branches on the size): taken back, the file keeps round 1's fix only."""
    proc, script = run_cli(tmp_path, "round_taken_back", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = out.split("Round 2: the rerun still recompiles where a fix applies; fixing what its trace shows\n")
    assert graphs(first, "total") == (5, 2) and graphs(second, "total") == (2, 2)
    assert "fix-recompiles: round 2 was taken back; the fixes of the round before it stay" in second
    assert "Over " not in second and len(set(results(out))) == 1
    assert "trying `dynamic=True`" not in out
    text = script.read_text()
    assert 'pool = torch.compile(pooled, backend="eager")\n' in text and "maybe_mark_dynamic" not in text


def test_dynamic_true_replaces_a_removal_that_did_not_settle(tmp_path):
    """Under torch 2.13: the lengths change, then the batch: removing
    `dynamic=False` compiles 3 graphs (4 -> 3, kept), a graph per size that
    changed in turn; round 2 writes `dynamic=True` in its place, from the
    file as it was (3 -> 1), and no third round finds anything."""
    proc, script = run_cli(tmp_path, "static_decode_buckets", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = out.split(
        "Round 2: removing `dynamic=False` left `forward` compiling 3 graphs; trying `dynamic=True` for `forward` instead\n"
    )
    assert "fixed: static_decode_buckets.py:25:46: FR001 " in first and graphs(first, "total") == (4, 3)
    assert graphs(second, "total") == (3, 1) and "Over 2 rounds: 4 -> 1 graphs." in second
    assert "Round 3" not in second and len(results(out)) == 3 and len(set(results(out))) == 1
    assert 'step = torch.compile(model, backend="eager", dynamic=True)\n' in script.read_text()


def test_a_dynamic_true_round_that_fails_is_taken_back(tmp_path):
    """Under torch 2.13: `math.isqrt` of a symbolic size cannot be traced
    under fullgraph=True: the removal's rerun fails (restored), the
    `dynamic=True` round fails as well (taken back); the file is as it was,
    and the run exits 2 (the first round's failed rerun)."""
    original = (SCRIPTS / "square_grid_sizes.py").read_bytes()
    proc, script = run_cli(tmp_path, "square_grid_sizes", "--fix")
    out = proc.stdout
    assert proc.returncode == 2, out
    first, second = out.split(
        "Round 2: removing `dynamic=False` was taken back; trying `dynamic=True` for `tokens_to_grid` instead\n"
    )
    assert "fixed: square_grid_sizes.py:19:58: FR001 " in first
    assert "error: exit code changed 0 -> 1 after the fixes; the files were restored" in first
    assert "error: exit code changed 0 -> 1 after the fixes; the files were restored" in second
    assert "fix-recompiles: round 2 was taken back; the files are as they were" in second
    assert "Over " not in second and "Round 3" not in second
    assert script.read_bytes() == original


def test_dynamic_true_is_not_tried_with_dynamic_fix_true(tmp_path):
    """--dynamic-fix true writes `dynamic=True` in the first round: 4 -> 1, one round."""
    proc, script = run_cli(tmp_path, "static_decode_buckets", "--fix", "--dynamic-fix", "true")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "total") == (4, 1) and "Round 2" not in out
    assert 'step = torch.compile(model, backend="eager", dynamic=True)\n' in script.read_text()


def test_a_call_of_a_compiled_callable_is_where_the_trace_shows_it(copied):  # noqa: F811
    """The trace's stack shows `generate` calling `forward` through the
    compiled callable's wrapper (torch's eval_frame), as a module call shows
    torch's module frames: the call at that line (`model_forward(**model_inputs)`,
    a variable holding `torch.compile(self.__call__)`) is the one to mark
    at, though the model cannot follow what it holds."""
    script, trace = copied("compiled_call_rounds")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    assert [(line, name) for _f, line, name in entry.module_callers] == [(43, "generate")]
    # the trace of the first run: FR001 removes dynamic=False (and the marks wait for a rerun)
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in guided.matches if m.finding.applied] == ["FR001"]
