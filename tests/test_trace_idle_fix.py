"""Issue 29, item 4: each fix of ``run --fix`` earns its place per function.
A fix whose own function compiles as many graphs after it as before is taken
back, though the run's total fell by another fix (codemods/modes/traced.py)."""

from __future__ import annotations

import re

from test_trace import graphs, results, run_cli


def test_a_mark_that_cures_nothing_is_taken_back(tmp_path):
    """Under torch 2.13: `scaled` 6 -> 1 (FR001 + FR003), `pooled` 2 -> 2 with
    the trace's maybe_mark_dynamic (its code branches on the size): the mark
    is removed, the other fixes are kept and verified by a third run."""
    proc, script = run_cli(tmp_path, "idle_mark", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: idle_mark.py:29:20: TRACE `pooled` recompiled on tensor shape `x`" in out
    assert "fix-recompiles: the fixes for `pooled` (idle_mark.py) did not reduce its graphs (2 -> 2); taking them back" in out
    kept = [re.match(r"kept: \S+: (\w+) ", ln).group(1) for ln in out.splitlines() if ln.startswith("kept: ")]
    assert kept == ["FR001", "FR003"], out
    text = script.read_text()
    assert "torch._dynamo.maybe_mark_dynamic(" not in text
    assert 'sample = torch.compile(scaled, backend="eager")\n' in text
    assert "torch.tensor(temperature, dtype=torch.float64)" in text
    # the third run, on the kept fixes only
    assert out.count("Graphs compiled, before -> after:") == 2
    assert graphs(out.rsplit("Graphs compiled", 1)[1], "scaled (idle_mark.py)") == (6, 1)
    assert len(set(results(out))) == 1 and len(results(out)) == 3


def test_a_code_object_with_no_graph_is_judged_by_its_compiles():
    """A frame that broke at once compiles no graph, yet recompiles (dia's
    `_prepare_text_input`, once per prompt): a fix matched to it earns its
    place when its compiles drop, and is taken back when they do not."""
    from codemods.findings import Finding, Fix, Safety
    from codemods.modes.traced import _idle_functions
    from codemods.trace import read as tr
    from codemods.trace.match import Guided, GuidedFile, Match

    def trace(compiles):
        return tr.Trace(entries=[tr.CodeEntry("_prepare_text_input", "/p/m.py", 22, graphs=0, compiles=compiles)])

    before = trace(8)
    fix = Fix(edits=(), safety=Safety.SAFE, title="t")
    finding = Finding("TRACE", "m", "m.py", 22, 1, 22, 1, fix=fix, applied=True)
    guided = Guided(files=[GuidedFile("/p/m.py", "m.py", b"", matches=[Match(finding, before.entries[0], tr.CONSTANT)])])
    assert _idle_functions(guided, before, trace(0)) == []
    assert _idle_functions(guided, before, trace(8)) == [(("/p/m.py", "_prepare_text_input"), "its compiles (8 -> 8; no graphs)")]
