"""An attribute compiled code tests with ``hasattr`` while it is missing and
then creates (vllm-ascend cc9fa548, ``running_in_graph``): a default first in
``__init__`` (codemods/trace/init_default.py), only where every reader reads
the default as it read the missing attribute; each accepted form is run on
real torch here, before and after, with fewer graphs and the same values."""

from __future__ import annotations

import textwrap

import pytest
import torch

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.pipeline.engine import parse_ast
from codemods.trace import guide as trace_guide
from codemods.analysis import presence
from codemods.trace import init_default

#: a plain object whose compiled `step` sets `flag` and whose `_use` reads it
#: through READER (a placeholder), compiled through a module's forward
PROGRAM = '''
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Impl:
    def __init__(self, scale):
        """An attention impl."""
        self.scale = scale

    def _use(self, x):
        if READER:
            return x * 2.0
        return x * self.scale

    def step(self, x, on):
        self.flag = on
        return self._use(x) + 1.0


class Layer(torch.nn.Module):
    def __init__(self, on):
        super().__init__()
        self.impl = Impl(0.5)
        self.on = on

    def forward(self, x):
        return self.impl.step(x, self.on)


def main(on):
    compiled = torch.compile(Layer(on), backend=counting_backend)
    xs = [torch.full((3,), float(i)) for i in range(4)]
    return [compiled(x) for x in xs], GRAPHS
'''

#: reader -> the default that keeps its value, for both values the compiled call sets
READERS = [
    ('hasattr(self, "flag") and not self.flag', True),
    ('hasattr(self, "flag") and self.flag', False),
    ('not hasattr(self, "flag") or self.flag', True),
    ('not hasattr(self, "flag") or not self.flag', False),
    ('hasattr(self, "flag") and self.flag is not None', None),
    ('not hasattr(self, "flag") or self.flag is None', None),
    ('getattr(self, "flag", False)', False),
]


def _program(reader: str) -> str:
    return PROGRAM.replace("READER", reader)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _run(text: str, on: bool):
    namespace: dict = {"__name__": "program"}
    torch._dynamo.reset()
    exec(compile(text, "<program>", "exec"), namespace)
    return namespace["main"](on)


@pytest.mark.parametrize("reader,default", READERS[:6])
@pytest.mark.parametrize("on", [True, False])
def test_each_accepted_reader_keeps_its_values_with_fewer_graphs(reader, default, on):
    text = _program(reader)
    d = init_default.plan(text.encode(), _line_of(text, "if " + reader.split(" ")[0]), "flag")
    assert d.new is not None, d.why
    assert d.value == repr(default)
    fixed = d.new.decode()
    assert f'        """An attention impl."""\n        self.flag = {default}\n        self.scale = scale\n' in fixed
    before, graphs_before = _run(text, on)
    after, graphs_after = _run(fixed, on)
    assert graphs_before == 2 and graphs_after == 1
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    eager, _ = _run(text.replace("torch.compile(Layer(on), backend=counting_backend)", "Layer(on)"), on)
    assert all(torch.equal(a, b) for a, b in zip(after, eager))


def test_a_getattr_default_is_the_default_it_asks_for():
    # getattr with a default guards nothing on 2.13 (no recompile): the
    # proof still takes the constant it falls back to
    text = _program('getattr(self, "flag", False)')
    source = parse_ast("<t>", text.encode())
    assert presence.default_for([source], "flag") == (False, "")


def _plan(code: str, attr: str = "flag"):
    text = textwrap.dedent(code)
    return init_default.plan(text.encode(), _line_of(text, f"hasattr(self, \"{attr}\")"), attr)


@pytest.mark.parametrize(
    "code,why",
    [
        # a lazy set-up decides on the attribute being missing
        (
            """
            class Impl:
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if not hasattr(self, "flag"):
                        self.flag = x.sum() > 0
                    return x
            """,
            "decides on the attribute being missing",
        ),
        # two readers asking for different defaults
        (
            """
            class Impl:
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        return x
                    if hasattr(self, "flag") and not self.flag:
                        return -x
                    return x * 2
            """,
            "need different defaults",
        ),
        # a read whose AttributeError is caught
        (
            """
            class Impl:
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        return x
                    try:
                        return x * self.flag
                    except AttributeError:
                        return x
            """,
            "catches AttributeError",
        ),
        # the attribute deleted
        (
            """
            class Impl:
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        del self.flag
                    return x
            """,
            "is deleted",
        ),
        # the name as a string elsewhere (vars(self)["flag"], a config key)
        (
            """
            class Impl:
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        return x
                    return x * len(vars(self).get("flag", ()))
            """,
            "used as a string",
        ),
        # a class that decides what reading an attribute does
        (
            """
            class Impl:
                __slots__ = ("scale", "flag")
                def __init__(self):
                    self.scale = 1
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        return x
                    return x
            """,
            "defines `__slots__`",
        ),
        # no __init__ of its own
        (
            """
            class Impl:
                def use(self, x):
                    if hasattr(self, "flag") and self.flag:
                        return x
                    return x
            """,
            "has no plain `__init__`",
        ),
    ],
)
def test_a_default_is_refused_where_a_reader_could_read_otherwise(code, why):
    d = _plan(code)
    assert d.new is None and why in d.why, d.why


def test_a_reader_in_another_file_is_checked_too():
    code = """
    class Impl:
        def __init__(self):
            self.scale = 1
        def use(self, x):
            if hasattr(self, "flag") and self.flag:
                return x
            return x
    """
    text = textwrap.dedent(code)
    other = parse_ast("other.py", b"def report(impl):\n    return 'on' if hasattr(impl, 'flag') else 'off'\n")
    d = init_default.plan(text.encode(), _line_of(text, "hasattr"), "flag", [other])
    assert d.new is None and "other.py:2" in d.why, d.why


def test_an_nn_module_gets_its_default_after_super_init():
    code = """
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)

        def forward(self, x):
            if hasattr(self, "flag") and not self.flag:
                return x
            self.flag = True
            return self.proj(x)
    """
    d = _plan(code)
    assert d.new is not None, d.why
    assert "        super().__init__()\n        self.flag = True\n        self.proj" in d.new.decode()


def test_run_fix_sets_the_default_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1 (the flag set by the first compiled call)."""
    proc, script = run_cli(tmp_path, "attr_set_in_forward", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "TRACE `Impl.running_in_graph` is missing at the first compiled call and set by it" in out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (2, 1)
    assert "        self.running_in_graph = True\n        self.scale = scale\n" in script.read_text()


def test_the_trace_names_the_default_and_the_guard_reads_it(copied):  # noqa: F811
    from codemods.modes.guard import cause_details

    script, trace = copied("attr_set_in_forward")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    (presence,) = [d for d in cause_details(entry, []) if d.startswith("cause: key or attribute presence")]
    assert presence.endswith("cure: a default `self.running_in_graph = True` first in `Impl.__init__`, read by every reader as the missing attribute (`run --fix` writes it)")
    assert script.read_bytes() == (SCRIPTS / "attr_set_in_forward.py").read_bytes()  # nothing written
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (m,) = [m for m in guided.matches if m.finding.rule_name == "init-default-from-trace"]
    assert m.finding.applied and m.finding.fix.safety.name == "SAFE"
    (g,) = [g for g in guided.files if g.changed]
    assert b"self.running_in_graph = True" in g.new


IMPL = '''
class Impl:
    def __init__(self, scale):
        self.scale = scale

    def _project(self, x):
        if hasattr(self, "running_in_graph") and not self.running_in_graph:
            return x * 2.0
        return x * self.scale

    def forward(self, x, decode):
        self.running_in_graph = decode
        return self._project(x) + 1.0
'''

MAIN = '''
import torch

from impl import Impl

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.impl = Impl(0.5)

    def forward(self, x):
        return self.impl.forward(x, True)


compiled = torch.compile(Layer(), backend=counting_backend)
total = 0.0
for i in range(3):
    total += float(compiled(torch.full((4,), float(i))).sum())
print("graphs:", GRAPHS)
print("result:", total)
'''


def test_the_default_goes_into_the_class_of_another_module(tmp_path):
    """The compiled model in main.py, the class whose attribute `hasattr`
    found missing in impl.py (vllm-ascend's layout): 2 graphs -> 1."""
    from test_trace import run_fix_main

    (tmp_path / "impl.py").write_text(IMPL)
    (tmp_path / "main.py").write_text(MAIN)
    proc = run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    first, second = results(out)
    assert first == second
    assert graphs(out, "total") == (2, 1)
    assert "    def __init__(self, scale):\n        self.running_in_graph = True\n" in (tmp_path / "impl.py").read_text()
    assert (tmp_path / "main.py").read_text() == MAIN
