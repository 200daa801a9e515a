"""Graph breaks at ``Tensor.item()`` whose resumed code recompiles ->
``torch._dynamo.config.capture_scalar_outputs = True`` after the imports,
from the trace (codemods/trace/scalar_capture.py); pytorch/rl before #4094."""

from __future__ import annotations

import textwrap

from test_trace import copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import scalar_capture


def test_the_flag_goes_after_the_imports_once():
    src = textwrap.dedent(
        """\
        \"\"\"doc\"\"\"
        import os
        import torch
        import torch.nn as nn
        from torch import Tensor

        X = 1
        import json
        """
    )
    new, line = scalar_capture.capture_flag(src.encode())
    assert line == 5
    assert new.decode() == src.replace("from torch import Tensor\n", "from torch import Tensor\ntorch._dynamo.config.capture_scalar_outputs = True\n")
    assert scalar_capture.capture_flag(new) == (None, 0)  # set already: a second run changes nothing
    # no module-level `import torch`: no place known
    assert scalar_capture.capture_flag(b"def f():\n    import torch\n") == (None, 0)


def test_the_recorded_trace_counts_item_breaks_and_offers_the_flag_as_unsafe(copied):  # noqa: F811
    script, trace = copied("item_resume")
    first = next(e for e in trace.entries if e.name == "normalize")
    assert first.item_breaks == 1
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [match] = [m for m in guided.matches if m.finding.rule_name == "capture-scalars-from-trace"]
    assert (match.finding.line, match.finding.applied, match.finding.fix.safety.value) == (3, False, "unsafe")
    assert all(not g.changed for g in guided.files)
    applied = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    [g] = [g for g in applied.files if g.changed]
    assert b"import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n" in g.new
    off = trace_guide.guide(trace, Settings(unsafe_fixes=True, ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert not any(m.finding.rule_name == "capture-scalars-from-trace" for m in off.matches)


def test_no_flag_without_a_recompile(copied):  # noqa: F811
    script, trace = copied("item_resume")
    for e in trace.entries:  # the same breaks; no compile counted as a recompile
        e.recompiles = 0
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert guided.files  # the file is implicated (its reasons stay) ...
    assert not any(m.finding.rule_name == "capture-scalars-from-trace" for m in guided.matches)  # ... the flag is not offered


def test_run_fix_keeps_the_item_in_the_graph(tmp_path):
    """Under torch 2.13: 3 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "item_resume", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "torch_dynamo_resume_in_normalize_at_8 (item_resume.py)") == (2, 0)
    assert "  total" in out and " 3 -> 1" in out
    first, second = results(out)
    assert first == second
    assert "import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n" in script.read_text()
