"""Issue 27, form 3: a float kept in a dict attribute of submodules, changed
by eager code between calls -> 0-d tensors written into the dict, from the
trace (codemods/trace/float_state.py); peft before #2177 (LoRA ``scaling``)."""

from __future__ import annotations

import ast
import textwrap

from test_trace import copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import float_state
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr

LAYER = textwrap.dedent(
    """\
    import json
    import math
    import torch


    class Lora(torch.nn.Module):
        def __init__(self, alpha, r):
            super().__init__()
            self.r, self.scaling = {}, {}
            self.scaling["default"] = alpha / r
            self.extra = {"a": 0.5, "b": torch.tensor(1.0)}

        def forward(self, x):
            scaling = self.scaling["default"]
            return x * scaling - self.scaling["default"]


    def swap(module, value):
        if module.scaling["default"] == value:
            return
        if isinstance(module.scaling["default"], torch.Tensor):
            module.scaling["default"].fill_(value)
        else:
            module.scaling["default"] = value


    def convert(module):
        scaling = module.scaling
        for key, val in scaling.items():
            if isinstance(val, float):
                scaling[key] = torch.tensor(val)
            print(math.sqrt(val))
    """
)


def wrapped(src: str, attr: str = "scaling"):
    new, sites, forbidden = float_state.wrap_values(src.encode(), attr)
    return (new.decode() if new is not None else None), sites, forbidden


def test_every_float_written_into_the_dict_becomes_a_tensor():
    new, sites, forbidden = wrapped(LAYER)
    assert not forbidden
    assert '        self.scaling["default"] = torch.as_tensor(alpha / r)\n' in new
    assert '        module.scaling["default"] = torch.as_tensor(value)\n' in new
    # a tensor written already, and another dict, are left alone
    assert "            scaling[key] = torch.tensor(val)\n" in new
    assert 'self.extra = {"a": 0.5, "b": torch.tensor(1.0)}' in new
    assert [(line, value) for line, _c, value in sites] == [(10, "alpha / r"), (24, "value")]
    assert wrapped(new)[0] is None  # a second run changes nothing


def test_a_dict_literal_assigned_whole_is_wrapped_value_by_value():
    new, _sites, _ = wrapped(LAYER, "extra")
    assert 'self.extra = {"a": torch.as_tensor(0.5), "b": torch.tensor(1.0)}' in new


def test_a_use_a_tensor_does_not_behave_the_same_in_leaves_the_file():
    for use in (
        '    return json.dumps(module.scaling["default"])\n',  # a call argument
        '    return module.scaling["default"]\n',  # returned: anything may follow
        '    module.scaling.update(default=0.5)\n',  # a write the fix cannot see into
        '    module.scaling["default"] += 0.5\n',  # an augmented write
        '    s = module.scaling["default"]\n    return [s]\n',  # through a local name
    ):
        src = LAYER + "\n\ndef other(module):\n" + use
        new, sites, forbidden = wrapped(src)
        assert (new, sites, forbidden) == (None, [], True), use


def test_plan_follows_the_dict_bound_to_a_local_name_once():
    from codemods.analysis.compile_sites import model_of
    from codemods.pipeline.engine import parse_ast
    from codemods.transforms.float_dict_state import values_written

    source = parse_ast("m.py", LAYER.encode())
    values = values_written(source, model_of(source), "scaling")
    assert values is not None and [ast.unparse(v) for v in values] == ["alpha / r", "value"]


def test_run_fix_writes_tensors_only_with_unsafe_fixes(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    (tmp_path / "safe").mkdir()
    proc, script = run_cli(tmp_path / "safe", "dict_float_state", "--fix")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "torch.as_tensor(...) at every write of `scaling[...]` (unsafe)" in out
    # FR018 finds the dict from the source: its finding is the one implicated (the same edits)
    assert "dict_float_state.py:40:17: FR018 [unsafe fix] " in out
    assert "TRACE [unsafe fix]" not in out
    assert "1 implicated fix stays unsafe" in out
    assert "torch.as_tensor" not in script.read_text()
    (tmp_path / "unsafe").mkdir()
    proc, script = run_cli(tmp_path / "unsafe", "dict_float_state", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "forward (dict_float_state.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    text = script.read_text()
    assert '        self.scaling["default"] = torch.as_tensor(alpha / r)\n' in text
    assert '                module.scaling["default"] = torch.as_tensor(alpha / r)\n' in text


def test_the_recorded_trace_names_the_dict_and_the_cure(copied):  # noqa: F811
    script, trace = copied("dict_float_state")
    [entry] = trace.entries
    assert tr.dict_attributes(entry) == ["scaling"]
    assert tr.cure_label(entry, tr.MODULE_FLOAT_ATTR, []) == "torch.as_tensor(...) at every write of `scaling[...]` (unsafe)"
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    # FR018 found the dict from the source: its finding, with the same edits
    assert [(m.finding.code, m.finding.rule_name, m.finding.line, m.finding.applied) for m in guided.matches] == [
        ("FR018", "float-dict-state", 40, True),
    ]
    # without FR018, the trace's own cure makes them
    only_trace = trace_guide.guide(trace, Settings(unsafe_fixes=True, ignore=frozenset({"FR018"})), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.finding.rule_name, m.finding.line, m.finding.applied) for m in only_trace.matches] == [
        ("TRACE", "tensor-dict-values-from-trace", 16, True),
        ("TRACE", "tensor-dict-values-from-trace", 40, True),
    ]
    assert [f.new for f in only_trace.files] == [f.new for f in guided.files]
    # the code TRACE turned off leaves FR018's; both off, nothing
    no_trace = trace_guide.guide(trace, Settings(unsafe_fixes=True, ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in no_trace.matches] == ["FR018"]
    off = trace_guide.guide(trace, Settings(unsafe_fixes=True, ignore=frozenset({"TRACE", "FR018"})), [str(script.parent)], fixing=True)
    assert not off.matches
