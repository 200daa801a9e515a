"""A ``functools.partial`` installed anew between compiled calls (OneTrainer
before 3fced711): made once per argument and reused
(codemods/trace/partial_reuse.py), only where the reused partial calls the
same method of the same object with equal arguments.  Run on real torch
here, before and after: fewer graphs, the same values."""

from __future__ import annotations

import textwrap

import pytest
import torch

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import partial_reuse


def test_run_fix_reuses_the_partial_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 5 graphs -> 2 (one for the partial, one for the bound
    method it stands in for while unhooked)."""
    proc, script = run_cli(tmp_path, "partial_rehooked", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "TRACE `functools.partial(self._leaf_forward, ...)` is installed as `.forward` anew at each call of `Adapter.hook`" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (5, 2)
    text = script.read_text()
    assert "    def __init__(self, leaves):\n        self._leaf_forward_partials = {}\n        self.leaves = leaves\n" in text
    # 90 columns on one line: laid out as black does
    assert (
        "            leaf.forward = self._leaf_forward_partials.setdefault(\n"
        "                leaf_index, functools.partial(self._leaf_forward, leaf_index)\n"
        "            )\n"
    ) in text


def test_the_table_names_the_cure_and_the_guide_applies_it(copied):  # noqa: F811
    from codemods.modes.output import report_lines

    script, trace = copied("partial_rehooked")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in guided.matches if m.finding.rule_name == "partial-reuse-from-trace"]
    assert m.finding.applied and m.finding.fix.safety.name == "SAFE"
    row = next(line for line in report_lines(trace, Settings(), guided) if "cache invalidated" in line)
    assert "made once per argument and reused" in row
    assert script.read_bytes() == (SCRIPTS / "partial_rehooked.py").read_bytes()  # the guide writes nothing


PROGRAM = '''
import functools

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Adapter:
    def __init__(self, leaves):
        """Adapters for the leaves."""
        self.leaves = leaves
        self.originals = [leaf.forward for leaf in leaves]

    def _leaf_forward(self, leaf_index, tag, x):
        return self.originals[leaf_index](x) * (leaf_index + len(tag))

    def hook(self):
        for leaf_index, leaf in enumerate(self.leaves):
            leaf.forward = functools.partial(self._leaf_forward, leaf_index, "qk")

    def unhook(self):
        for leaf, original in zip(self.leaves, self.originals):
            leaf.forward = original


def main(compiled):
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)])
    adapter = Adapter(list(layers))

    def run(x):
        return layers[0](x) - layers[1](x)

    step = torch.compile(run, backend=counting_backend) if compiled else run
    outs = []
    with torch.no_grad():
        for _ in range(3):
            adapter.hook()
            outs.append(step(torch.randn(2, 3)))
            adapter.unhook()
    return outs, GRAPHS
'''


def _run(text: str, compiled: bool):
    namespace: dict = {"__name__": "program"}
    torch._dynamo.reset()
    exec(compile(text, "<program>", "exec"), namespace)
    return namespace["main"](compiled)


def test_two_arguments_key_a_tuple_and_keep_the_values():
    new, found = partial_reuse.plan(PROGRAM.encode(), ["forward"])
    assert [p.why for _a, p in found] == [""]
    fixed = new.decode()
    assert '        """Adapters for the leaves."""\n        self._leaf_forward_partials = {}\n' in fixed
    assert (
        '            leaf.forward = self._leaf_forward_partials.setdefault(\n'
        '                (leaf_index, "qk"), functools.partial(self._leaf_forward, leaf_index, "qk")\n'
        '            )\n'
    ) in fixed
    before, graphs_before = _run(PROGRAM, True)
    after, graphs_after = _run(fixed, True)
    eager, _ = _run(PROGRAM, False)
    assert graphs_after < graphs_before
    for a, b, e in zip(before, after, eager):
        assert torch.equal(a, b) and torch.equal(b, e)
    # a second run finds nothing left to reuse
    again, found_again = partial_reuse.plan(new, ["forward"])
    assert again is None and found_again == []


def test_a_short_rewritten_call_stays_on_one_line():
    short = PROGRAM.replace("_leaf_forward", "_f").replace("leaf_index", "i").replace("leaf.forward", "leaf.fw").replace(', "qk")', ")")
    new, found = partial_reuse.plan(short.encode(), ["fw"])
    assert [p.why for _a, p in found] == [""]
    assert "            leaf.fw = self._f_partials.setdefault(i, functools.partial(self._f, i))\n" in new.decode()


@pytest.mark.parametrize(
    "change,why",
    [
        # an argument that may differ at each re-make
        ('functools.partial(self._leaf_forward, leaf_index, "qk")', None),
        ('functools.partial(self._leaf_forward, leaf_index, str(leaf))', "is not an int or str literal or a loop index"),
        # a keyword
        ('functools.partial(self._leaf_forward, leaf_index, tag="qk")', "takes keywords"),
        # a function that is not a method of the class
        ('functools.partial(print, leaf_index, "qk")', "does not bind a method of `self`"),
    ],
)
def test_a_partial_the_fix_does_not_prove_is_refused(change, why):
    text = PROGRAM.replace('functools.partial(self._leaf_forward, leaf_index, "qk")', change)
    new, found = partial_reuse.plan(text.encode(), ["forward"])
    (p,) = [p for _a, p in found]
    if why is None:
        assert new is not None and p.why == ""
    else:
        assert new is None and why in p.why, p.why


def test_a_method_something_rebinds_is_refused():
    text = PROGRAM + "\nAdapter._leaf_forward = lambda self, i, t, x: x\n"
    new, found = partial_reuse.plan(text.encode(), ["forward"])
    assert new is None and "something assigns `._leaf_forward`" in found[0][1].why


def test_a_partial_made_in_init_is_left_alone():
    text = textwrap.dedent(
        """
        import functools

        class Adapter:
            def __init__(self, leaf):
                leaf.forward = functools.partial(self.run, 0)

            def run(self, i, x):
                return x
        """
    )
    new, found = partial_reuse.plan(text.encode(), ["forward"])
    assert new is None and "made in `__init__`" in found[0][1].why
