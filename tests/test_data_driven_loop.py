"""FR015 from a trace: the length guard on a loop's iterator (`.0` of a
comprehension, `___stack1` after a graph break) is named as a loop over
data and matched to FR015's finding (issue 27, form 7)."""

from __future__ import annotations

from test_trace import copied  # noqa: F401 (a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr


def test_the_loop_iterator_is_named_and_fr015_matched(copied):  # noqa: F811
    script, trace = copied("data_loop")
    lengths = [e for e in trace.entries if tr.LENGTH in e.causes]
    assert lengths, [e.causes for e in trace.entries]
    for entry in lengths:
        label = tr.cure_label(entry, tr.LENGTH, ["FR015"])
        assert label.startswith("FR015, report: the iterator of a Python loop ("), label
        assert "FR013" not in label and "appends" not in label
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=False)
    matched = [m for m in guided.matches if m.finding.code == "FR015"]
    assert [(m.finding.line, m.cause) for m in matched] == [(8, tr.LENGTH)]
    assert matched[0].finding.fix is None
