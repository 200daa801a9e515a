"""A function compiled code calls whose frames recompile on string values
(nari-labs/dia before 5f57172d: the prompt encoded in `_prepare_text_input`,
reached from the compiled `_prepare_generation`): `@torch.compiler.disable`
on it (codemods/trace/string_disable.py), safe where a frame of it hit the
recompile limit.  Run on real torch here, before and after: fewer graphs,
the same values."""

from __future__ import annotations

import dataclasses

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.modes.guard import cause_details
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr
from codemods.trace.string_disable import string_frames

DECORATED = "    @torch.compiler.disable\n    def _prepare_text_input(self, text: str) -> torch.Tensor:\n"


def test_string_guards_read_str_and_bytes_literals():
    def entry(*texts):
        return tr.CodeEntry("f", "f.py", 1, reasons=[r for t in texts for r in tr.parse_reason(t)])

    assert tr.string_guards(entry("0/0: text == '[S1] Dia is an open weights text'")) == ["text"]
    assert tr.string_guards(entry("0/0: ___stack0 == b'\\x01 Dia is'")) == ["___stack0"]
    assert tr.string_guards(entry("0/0: tasks[0] == \"it's a prompt\"")) == ["tasks[0]"]
    assert tr.string_guards(entry("0/0: n == 3", "0/0: x == 2.5")) == []
    assert tr.resumed_at("torch_dynamo_resume_in__prepare_text_input_at_24") == ("_prepare_text_input", 24)
    assert tr.resumed_at("_prepare_text_input") is None


def test_the_frames_of_the_function_and_the_call_that_reaches_it(copied):  # noqa: F811
    script, trace = copied("prompt_encode")
    (frames,) = string_frames(trace)
    assert frames.function == "_prepare_text_input" and frames.sources == ("text", "___stack0")
    assert frames.called_at[1:] == (32, "_prepare_generation") and frames.limit_hit
    assert {e.name for e in frames.entries} == {"_prepare_text_input", "torch_dynamo_resume_in__prepare_text_input_at_24"}
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    matches = [m for m in guided.matches if m.finding.rule_name == "disable-string-from-trace"]
    assert len({id(m.finding) for m in matches}) == 1 and len(matches) == 3  # one finding, each frame matched
    finding = matches[0].finding
    assert finding.applied and finding.fix.safety.name == "SAFE" and finding.line == 22
    assert "safe: a frame of it hit the recompile limit" in finding.message
    assert DECORATED in guided.files[0].new.decode()
    # the CI guard, which changes nothing, names the same cure
    (entry,) = [e for e in trace.entries if e.name == "_prepare_text_input"]
    (detail,) = [d for d in cause_details(entry, [], trace) if d.startswith("cause: constant value")]
    assert "`@torch.compiler.disable` on `_prepare_text_input`, called from compiled code (`run --fix` writes it; safe" in detail


def test_without_the_limit_it_is_unsafe(copied):  # noqa: F811
    """Below the limit a string that takes few values (a mode) is compiled
    once each and reused; eager at every call can be slower: --unsafe-fixes."""
    script, trace = copied("prompt_encode")
    trace.entries[:] = [dataclasses.replace(e, limit_hit=False) for e in trace.entries]
    for unsafe in (False, True):
        guided = trace_guide.guide(trace, Settings(unsafe_fixes=unsafe), [str(script.parent)], fixing=True)
        findings = {id(m.finding): m.finding for m in guided.matches if m.finding.rule_name == "disable-string-from-trace"}
        (finding,) = findings.values()
        assert finding.fix.safety.name == "UNSAFE" and finding.applied is unsafe
        assert "unsafe: no frame of it hit the recompile limit" in finding.message
        assert (guided.files[0].new is not None) is unsafe


def test_a_function_already_disabled_gets_no_second_decorator(copied):  # noqa: F811
    script, trace = copied("prompt_encode")
    # (in place of the blank line above it: the trace's lines stay where they were)
    text = script.read_text().replace("\n\n    def _prepare_text_input", "\n    @torch.compiler.disable\n    def _prepare_text_input", 1)
    assert text.count("\n") == script.read_text().count("\n")
    script.write_text(text)
    trace = tr.read_trace(str(script.parent / "trace"))
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    whys = {m.finding.message for m in guided.matches if m.finding.rule_name == "disable-string-from-trace"}
    (why,) = whys
    assert "no fix: `_prepare_text_input` is already under `torch.compiler.disable`" in why
    assert all(g.new is None for g in guided.files)


def test_a_str_argument_of_the_compiled_function_itself_is_left_alone(copied):  # noqa: F811
    """`activate(x, mode)` compiled itself: no frame of compiled code broke
    at a call of it; disabling it would compile nothing.  The table's
    'bounded only if' stands, no fix."""
    script, trace = copied("mode_string")
    (entry,) = [e for e in trace.entries if e.name == "activate"]
    assert tr.string_guards(entry) == ["mode"] and string_frames(trace) == []
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert not [m for m in guided.matches if m.finding.rule_name == "disable-string-from-trace"]
    assert all(g.new is None for g in guided.files)
    assert "bounded only if `mode` takes few values" in tr.cure_label(entry, tr.CONSTANT, [])


def test_run_fix_encodes_the_prompt_eagerly_fewer_graphs_same_output(tmp_path):
    """Ten prompts under torch 2.13: 9 graphs and the limit -> 1, the same
    values, by default (safe: the limit was hit)."""
    proc, script = run_cli(tmp_path, "prompt_encode", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (9, 1), out
    assert out.count("fixed: prompt_encode.py:22:5: TRACE `_prepare_text_input` recompiles on the value of a string") == 1
    assert "taking them back" not in out
    assert script.read_text().count(DECORATED) == 1
    # FR023 found the prompt changing between calls in the source; the table
    # names it at the frame that guards the string (it reads the argument)
    assert "FR023, `@torch.compiler.disable` on the function that reads `text`" in out


def test_run_fix_below_the_limit_needs_unsafe_fixes(tmp_path):
    """Four prompts: 5 graphs, no limit; `run --fix` writes nothing and says
    why, `--unsafe-fixes` cures it 5 -> 1 with the same values."""
    proc, script = run_cli(tmp_path, "prompt_encode", "--fix", script_args=("4",))
    out = proc.stdout
    assert "unsafe: no frame of it hit the recompile limit" in out and "apply with --unsafe-fixes" in out
    assert script.read_bytes() == (SCRIPTS / "prompt_encode.py").read_bytes()
    proc, script = run_cli(tmp_path, "prompt_encode", "--fix", "--unsafe-fixes", script_args=("4",))
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (5, 1), out
    assert script.read_text().count(DECORATED) == 1
