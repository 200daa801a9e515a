"""A field of a state fed back to a compiled step, made with another dtype
than the initial state had (mujoco-torch before a0eaa36: `Contact.zero()`'s
int32 contact ids over `make_data`'s int64 ones): the first call's dtype
where it is made (codemods/trace/dtype_fields.py), unsafe.  Run on real
torch here, before and after: fewer graphs, the same values."""

from __future__ import annotations

from test_trace import SCRIPTS, copied, fixture, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr


def test_the_trace_names_the_field_and_its_dtypes():
    (entry,) = [e for e in fixture("state_field_dtype").entries if e.name == "step"]
    assert tr.field_dtypes(entry) == [("geom", "int64", "int32")]
    label = tr.cure_label(entry, tr.DTYPE, [])
    assert label.startswith("report: a field of a state passed in changes dtype between calls (`geom` torch.int64 first, torch.int32 later")
    assert "bounded" not in label


def test_plain_run_fix_holds_it_back_as_unsafe(copied):  # noqa: F811
    script, trace = copied("state_field_dtype")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    found = [m for m in guided.matches if m.finding.rule_name == "field-dtype-from-trace"]
    assert [(m.finding.line, m.finding.fix.safety.name, m.finding.applied) for m in found] == [(32, "UNSAFE", False), (33, "UNSAFE", False)]
    assert all(g.new is None for g in guided.files)


def test_run_fix_unsafe_makes_the_fields_int64_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1; `geom1`, made by the same call as the
    guarded `geom` and int64 in `make_data` too, is changed with it."""
    proc, script = run_cli(tmp_path, "state_field_dtype", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (2, 1)
    text = script.read_text()
    assert "geom1=torch.zeros(shape, dtype=torch.int64),\n            geom=torch.zeros(shape + (2,), dtype=torch.int64),\n" in text
    assert "dist=torch.zeros(shape),\n" in text  # a field made without a dtype stays as it is


def test_no_construction_with_the_first_dtype_no_fix(copied):  # noqa: F811
    """Where the run's files never make the field with the first call's
    dtype (it came from elsewhere), nothing is changed: the table's report stands."""
    script, trace = copied("state_field_dtype")
    script.write_text(script.read_text().replace("dtype=torch.int64", "dtype=torch.int16"))
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert not [m for m in guided.matches if m.finding.rule_name == "field-dtype-from-trace"]
    assert all(g.new is None for g in guided.files)
