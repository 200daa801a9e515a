"""Inputs that arrive as one tensor (the duplicate-tensor guard) -> ``.clone()``
where the alias is made, from the trace alone (codemods/trace/cures.py,
``clone_aliases``), and torch's vmap wrapper mapped to the user's vmapped
function (codemods/trace/match.py, ``map_library_entries``): mujoco-torch
before dbf4ed8 (``d.update_(qacc=d.qacc_smooth)`` fed back into
``torch.compile(torch.vmap(step))``)."""

from __future__ import annotations

import textwrap

from test_trace import copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import cures as trace_cures
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr

FIELDS = textwrap.dedent(
    """\
    import torch


    def forward(d):
        d.update_(qacc_smooth=d.qvel * 2)
        d.update_(qacc=d.qacc_smooth)
        d.qfrc = d.qfrc_smooth
        return d


    def step(d):
        return forward(d)
    """
)

PAIRS = [("args[1].qacc", "args[1].qacc_smooth")]


def clone(src: str, pairs=PAIRS, function="step", line=11):
    new, sites = trace_cures.clone_aliases(src.encode(), function, line, pairs)
    return (new.decode() if new is not None else None), sites


def test_the_field_set_from_the_other_gets_a_copy():
    new, sites = clone(FIELDS)
    assert "    d.update_(qacc=d.qacc_smooth.clone())\n" in new
    # another pair of fields is not the one the trace saw aliased
    assert "    d.qfrc = d.qfrc_smooth\n" in new
    assert [(s.line, s.value, s.aliased) for s in sites] == [(6, "d.qacc_smooth", PAIRS[0])]
    again, sites = clone(new)
    assert again is None and sites == []  # a second run changes nothing


def test_an_assignment_is_an_alias_too():
    new, _ = clone(FIELDS, [("d.qfrc_smooth", "d.qfrc")])
    assert "    d.qfrc = d.qfrc_smooth.clone()\n" in new


def test_not_where_a_field_is_changed_in_place():
    # the alias may be meant: a write through one name shows through the other
    src = FIELDS.replace("    return forward(d)\n", "    d = forward(d)\n    d.qacc.add_(1)\n    return d\n")
    assert "add_" in src
    assert clone(src) == (None, [])


ARGS = textwrap.dedent(
    """\
    import torch


    @torch.compile
    def mix(x, y):
        return x * 2 + y


    def main(a, b, h):
        mix(a, b)
        mix(h, h)
        mix(x=h, y=h)
    """
)


def test_one_tensor_passed_for_two_arguments_gets_a_copy_once():
    new, sites = clone(ARGS, [("x", "y")], "mix", 4)
    assert "    mix(a, b)\n    mix(h, h.clone())\n    mix(x=h, y=h.clone())\n" in new
    assert [s.value for s in sites] == ["h", "h"]
    src = ARGS.replace("    return x * 2 + y\n", "    y.add_(x)\n    return y\n")
    assert "add_" in src
    assert clone(src, [("x", "y")], "mix", 4) == (None, [])  # the function writes through the alias


def test_run_fix_clones_where_the_vmapped_step_aliases(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result; the row is
    the user's vmapped ``step``, not torch's wrapper."""
    proc, script = run_cli(tmp_path, "alias_fields", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "step (through torch.vmap)  alias_fields.py:34 " in out
    assert "`.clone()` where `args[1].qacc` and `args[1].qacc_smooth` are made one tensor" in out
    assert "fixed: alias_fields.py:30:20: TRACE " in out
    assert graphs(out, "step (alias_fields.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "    d.update_(qacc=d.qacc_smooth.clone())\n" in script.read_text()


def test_run_fix_clones_an_argument_passed_twice(tmp_path):
    proc, script = run_cli(tmp_path, "alias_args", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "mix (alias_args.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "    total += float(mix(h, h.clone()).sum())\n" in script.read_text()


def test_the_recorded_trace_maps_the_wrapper_and_gives_the_same_fix(copied):  # noqa: F811
    script, trace = copied("alias_fields")
    [entry] = trace.entries
    assert entry.name == "wrapped" and entry.filename.endswith("torch/_functorch/apis.py")
    assert tr.aliased_pairs(entry) == PAIRS
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert (entry.name, entry.firstlineno, entry.through) == ("step", 34, "torch.vmap")
    assert tr.display_name(entry) == "step (through torch.vmap)"
    assert [(m.finding.code, m.finding.rule_name, m.cause, m.finding.line) for m in guided.matches] == [
        ("TRACE", "clone-alias-from-trace", tr.ALIASING, 30)
    ]
    off = trace_guide.guide(trace, Settings(ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert not off.matches


def test_two_vmapped_compiles_leave_the_wrapper_unmapped(copied):  # noqa: F811
    script, trace = copied("alias_fields")
    (script.parent / "other.py").write_text(
        "import torch\n\ndef g(x):\n    return x\n\nh = torch.compile(torch.vmap(g))\n"
    )
    trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=False)
    [entry] = trace.entries
    assert entry.name == "wrapped" and entry.through == ""  # which one ran is not known: torch's row stays
