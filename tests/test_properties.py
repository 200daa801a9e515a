"""Property tests (hypothesis + hypothesmith).

1. Arbitrary valid Python (hypothesmith): the engine never crashes, every
   output parses, a second run changes nothing, files without findings are
   byte-identical.  Programs libcst itself refuses are skipped with
   ``assume()`` (hypothesmith generates a few, see FACTS.md).
2. Small programs built from compile-related fragments (decorators with
   ``dynamic=False``, wrappers, graph-break markers, torch aliases, loops that
   vary shapes, suppression comments, CRLF, no final newline) so fixes really
   fire: same properties, plus the number of findings is what the fragments
   predict and only the expected lines change.
3. Both mixed: fragments followed by a generated program.

Health checks are suppressed per test, deliberately: hypothesmith programs are
slow to generate (``too_slow``) and ``assume`` on libcst parseability filters
some out (``filter_too_much``).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from typing import List, Tuple

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from codemods.pipeline import prefilter
from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.analysis.project import ProjectIndex, parse_for_index

SLOW = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
ALL_SAFE = Settings(unproven=True)  # every finding, proven or not: these test the engine
ALL_UNSAFE = Settings(unsafe_fixes=True, unproven=True)
# a comment line with every rule's trigger bytes; with the byte prefilter
# off too (``no_prefilter``), the analysis and every rule really run
PAST_PREFILTER = "# torch.compile fix-recompiles\n"
#: arbitrary valid Python; hypothesmith builds its grammar's parser when asked
#: (seconds of CPU): deferred, it is built once, by the first test that draws
#: from it, not while the tests are collected
PYTHON_PROGRAMS = st.deferred(hypothesmith.from_grammar)


@contextlib.contextmanager
def no_prefilter():
    """Turn off the engine's byte prefilter (every rule on every file)."""
    old = getattr(prefilter, "ENABLED", None)
    prefilter.ENABLED = False
    try:
        yield
    finally:
        prefilter.ENABLED = old


def libcst_parses(code: str) -> bool:
    try:
        cst.parse_module(code)
        return True
    except Exception:  # noqa: BLE001 - any refusal means: not a case for us
        return False


def check_engine_properties(data: bytes, settings: Settings):
    """Run twice; return the first result.  No crash, output parses, idempotent,
    byte-identical when nothing is found."""
    result = process_source("gen.py", "gen.py", data, settings)
    assert result.error is None, result.error
    if not result.findings:
        assert result.new is None or result.new == data
    if result.new is not None:
        assert result.new != data
        cst.parse_module(result.new)
        again = process_source("gen.py", "gen.py", result.new, settings)
        assert again.error is None, again.error
        assert again.new is None or again.new == result.new, "a second run changed the output again"
    return result


# ------------------------------------------------------------ 1. generated programs


@settings(max_examples=15, deadline=None, suppress_health_check=SLOW)
@given(code=PYTHON_PROGRAMS)
def test_generated_programs(code):
    assume(libcst_parses(code))
    data = code.encode("utf-8")
    for s in (ALL_SAFE, ALL_UNSAFE):
        # as is (mostly ruled out by the prefilter), and forced through every pass
        check_engine_properties(data, s)
        with no_prefilter():
            forced = check_engine_properties((PAST_PREFILTER + code).encode("utf-8"), s)
        assert forced.prefiltered is False


# ------------------------------------------------------------ 2. fragment programs


@st.composite
def fragment_programs(draw) -> Tuple[str, int, int, List[str]]:
    """(source, expected FR001 findings, expected FR002 findings, lines that
    may change, FR002 findings with a fix: a marker in a function compiled
    with `fullgraph=True` gets none, the graph break would fail the call)."""
    alias = draw(st.sampled_from(["torch", "th"]))
    lines: List[str] = ["import torch" if alias == "torch" else "import torch as th", ""]
    n_dynamic = n_markers = n_fixed = 0
    may_change: List[str] = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["decorator", "wrapper", "plain"]))
        options = draw(
            st.sampled_from(
                ["dynamic=False", "fullgraph=True, dynamic=False", "dynamic=False, fullgraph=True", "dynamic=True", "", "mode=None"]
            )
        )
        suppressed = draw(st.booleans()) if "dynamic=False" in options else False
        comment = "  # fix-recompiles: ignore" if suppressed else ""
        marker = draw(st.booleans())
        marker_indent = draw(st.sampled_from(["    ", "        "])) if marker else ""
        if kind == "decorator":
            lines.append(f"@{alias}.compile({options}){comment}" if options or draw(st.booleans()) else f"@{alias}.compile")
        lines.append(f"def f{i}(x):")
        if marker and marker_indent == "        ":
            lines += ["    if x.sum() > 0:", "        x = x + 1", "        # fix-recompiles: graph-break", "        x = x * 2"]
        else:
            lines.append("    y = x + 1")
            if marker:
                lines.append("    # fix-recompiles: graph-break")
            lines.append("    x = y * 2")
        lines.append("    return x")
        if marker:
            n_markers += 1
            n_fixed += kind == "plain" or "fullgraph=True" not in options
        if kind == "wrapper":
            lines.append(f"g{i} = {alias}.compile(f{i}, {options}){comment}" if options else f"g{i} = {alias}.compile(f{i})")
        if "dynamic=False" in options and kind != "plain" and not suppressed:
            n_dynamic += 1
            may_change.append("dynamic=False")
        name = f"g{i}" if kind == "wrapper" else f"f{i}"
        loop = draw(st.sampled_from(["shapes", "same", "none"]))
        if loop == "shapes":
            lines += ["for n in range(1, 4):", f"    {name}({alias}.ones(n))"]
        elif loop == "same":
            lines += [f"{name}({alias}.ones(3))"]
        lines += draw(st.sampled_from([[], [""], ["x = 1"], ["# a comment"], ['print("done")']]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    final = draw(st.booleans())
    source = newline.join(lines) + (newline if final else "")
    return source, n_dynamic, n_markers, may_change, n_fixed


def changed_line_pairs(before: str, after: str):
    a, b = before.splitlines(), after.splitlines()
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW)
@given(program=fragment_programs())
def test_fragment_programs(program):
    source, n_dynamic, n_markers, _, n_fixed = program
    data = source.encode("utf-8")
    newline = "\r\n" if "\r\n" in source else "\n"
    for s in (ALL_SAFE, ALL_UNSAFE):
        check_engine_properties(data, s)

    # only FR001 and FR002: the findings the fragments predict, and only their lines change
    only = Settings(select=frozenset({"FR001", "FR002"}), unsafe_fixes=True, unproven=True)
    result = check_engine_properties(data, only)
    codes = [f.code for f in result.findings]
    assert codes.count("FR001") == n_dynamic
    assert codes.count("FR002") == n_markers
    if not (n_dynamic or n_fixed):
        assert result.new is None
        return
    after = result.new.decode("utf-8")
    removed, added = changed_line_pairs(source, after)
    for line in removed:
        assert ("dynamic=False" in line and "ignore" not in line) or line.strip() == "# fix-recompiles: graph-break", line
    for line in added:
        assert line.strip() in ("torch._dynamo.graph_break()", "th._dynamo.graph_break()") or ".compile(" in line, line
    assert len([a for a in added if "graph_break()" in a]) == n_fixed
    # the untouched structure: line ends, final newline, suppressed lines
    assert after.count("\n") == after.count(newline) if newline == "\r\n" else "\r" not in after
    assert after.endswith(newline) == source.endswith(newline)
    assert after.count("fix-recompiles: graph-break") == n_markers - n_fixed
    assert after.count("dynamic=False") == source.count("# fix-recompiles: ignore")
    compile(after, "gen.py", "exec")


# ------------------------------------------------------------ 3. mixed


@settings(max_examples=10, deadline=None, suppress_health_check=SLOW)
@given(program=fragment_programs(), code=PYTHON_PROGRAMS)
def test_fragments_followed_by_generated_code(program, code):
    source = program[0]
    newline = "\r\n" if "\r\n" in source else "\n"
    if not source.endswith(newline):
        source += newline
    mixed = source + code
    assume(libcst_parses(mixed))
    for s in (ALL_SAFE, ALL_UNSAFE):
        result = check_engine_properties(mixed.encode("utf-8"), s)
        if result.new is not None and code:
            # the generated tail is never touched by fixes aimed at the fragments
            assert result.new.decode("utf-8").endswith(code) or any(f.line > source.count(newline) for f in result.findings)


# ------------------------------------------------------------ 4. the prefilter is conservative

#: blocks of code the rules reason about (once the ast screen's), by role: imports (aliases of
#: torch, compile, math/random, optim, re), compile sites, values (floats from
#: literals, arithmetic, math/random, annotations, loops; names shadowed in
#: other scopes), uses (calls of compiled callables), and the rest
#: (optimizers, int attributes, options dicts, re.compile); each block is
#: valid at module level
SCREEN_IMPORTS = [
    "import torch",
    "import torch as th",
    "from torch import compile",
    "from torch import compile as tc",
    "import math",
    "import math as m",
    "from math import cos",
    "from random import uniform as U",
    "import random",
    "import re",
    "import re, os",
    "import torch.optim as optim",
    "from torch.optim import SGD, Adam",
    "from torch.optim import *",
    "from torch import nn",
]
SCREEN_SITES = [  # compiled functions
    "@torch.compile\ndef f(x, c):\n    return x * c",
    "@torch.compile(dynamic=False)\ndef f(x, c=1.0):\n    return x + c",
    "@th.compile\ndef f(x, c):\n    return x - c",
    "@compile\ndef f(x, c):\n    return x * c",
    "def f0(x, c):\n    return x * c\ng = torch.compile(f0)",
    "def f0(x, c):\n    return x * c\ng = tc(f0, dynamic=False)",
    "g = torch.compile(lambda x, c: x * c)",
    "h = torch.compile(dynamic=False)(lambda x, c: x + c)",
    "opts = dict(dynamic=False)\nk = torch.compile(f0, **opts)",
    "opts = {'dynamic': False, 'fullgraph': True}\nk = torch.compile(f0, **opts)",
    "k = torch.compile(f0, **cfg.to_dict())",
    "pat = re.compile('x+')",
    "re = torch",
]
SCREEN_MODULE_SITES = [  # compiled modules
    "model = torch.compile(Net())",
    "net = Net()\nnet.compile()",
    "net = Net()\nnet2 = torch.compile(net)",
    "class Trainer:\n    def __init__(self):\n        self.model = Net()\n        self.model.compile()\n        self.fn = torch.compile(self.fwd)\n    def fwd(self, x, c):\n        return x * c\n    def go(self, x):\n        return self.fn(x, 0.5)",
]
SCREEN_STEP_SITES = [  # optimizer steps in compiled code
    "@torch.compile\ndef step():\n    opt.step()",
    "opt.step = torch.compile(opt.step)",
    "@torch.compile\ndef train(x):\n    opt.step()\n    sched.step()",
    "@th.compile(dynamic=False)\ndef step2():\n    opt.step()",
    "class Stepper(torch.nn.Module):\n    def forward(self, x):\n        opt.step()\n        return x\nstepper = torch.compile(Stepper())",
    "def helper():\n    opt.step()\n@torch.compile\ndef train2(x):\n    helper()\n    return x",
    "class Loop:\n    def run(self):\n        self.inner()\n    def inner(self):\n        opt.step()\n    def go(self):\n        return torch.compile(self.run)()",
]
SCREEN_VALUES = [
    "c = 0.5",
    "c = 3",
    "c = 1 / 3",
    "c = 2 * 3",
    "c = math.cos(0.5)",
    "c = m.sqrt(2)",
    "c = cos(1)",
    "c = U(0, 1)",
    "c = random.random()",
    "c = float(n)",
    "c = round(c, 2)",
    "c = max(c, 0.1)",
    "c: float = get()",
    "c = x.sum()",
    "t = 1\nt /= 2",
    "def other():\n    c = 0.5\n    return c",
    "def setter():\n    global c\n    c = 0.75",
]
SCREEN_USES = [
    "f(x, c)",
    "f(x, c=c)",
    "g(x, c)",
    "g(x, 2.0)",
    "h(x, c)",
    "h(x, t)",
    "model(x, c)",
    "net(x, 0.5)",
    "torch.compile(f0)(x, 0.5)",
    "obj.f(x, c)",
    "for c in [0.1, 0.2]:\n    f(x, c)",
    "for c in range(3):\n    g(x, c)",
    "t = 1.0\nfor _ in range(3):\n    t = t * 0.9\n    f(x, t)",
    "def run(c: float):\n    return f(x, c)",
    "def run2(c):\n    return g(x, c)",
    "def outer():\n    c = 0.25\n    def inner():\n        return f(x, c)\n    return inner",
    "for n in range(1, 4):\n    f(torch.ones(n), 1)",
]
SCREEN_OPTIMIZERS = [
    "params = [torch.zeros(2, requires_grad=True)]",
    "opt = torch.optim.SGD(params, lr=0.1)",
    "opt = optim.Adam(params, lr=c)",
    "opt = SGD(params, lr=0.01)",
    "opt = Adam(params, lr=0.01, foreach=True)",
    "opt = th.optim.AdamW(params, lr=1e-3)",
    "sched = torch.optim.lr_scheduler.StepLR(opt, 1)",
]
SCREEN_CLASSES = [
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.calls = 0\n    def forward(self, x):\n        self.calls += 1\n        return x * self.calls",
    "class Net(torch.nn.Module):\n    n = 0\n    def forward(self, x):\n        self.n = self.n + 1\n        return x",
    "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = 0.5\n    def forward(self, x):\n        self.scale += 1\n        return x",
    "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.k = -1\n    def forward(self, x):\n        return self.bump(x)\n    def bump(self, x):\n        self.k -= 1\n        return x",
    "class Net(th.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.step = int(0)\n    def forward(self, x):\n        self.step *= 2\n        return x",
]
#: a module of the same run compiling functions, and ways to reach them
SCREEN_KERNELS = "import torch\n\n@torch.compile\ndef smooth(x, beta):\n    return x * beta\n\ndef _g(x, b):\n    return x + b\n\ng2 = torch.compile(_g)\n"
SCREEN_CROSS_IMPORTS = [
    "from kernels import smooth",
    "from kernels import smooth as sm",
    "from kernels import g2",
    "import kernels",
    "import kernels as k",
    "from kernels import *",
]
SCREEN_CROSS_USES = [
    "smooth(x, c)",
    "smooth(x, 0.5)",
    "sm(x, c)",
    "sm(x, beta=1 / 3)",
    "g2(x, c)",
    "kernels.smooth(x, 2.0)",
    "k.smooth(x, c)",
    "k.g2(x, t)",
    "for c in [0.1, 0.2]:\n    smooth(x, c)",
]
SCREEN_CONFIG = [
    "torch._dynamo.config.cache_size_limit = 8",
    "torch._dynamo.config.recompile_limit = 8",
    "torch._dynamo.config.allow_unspec_int_on_nn_module = True",
]


@st.composite
def rule_programs(draw) -> str:
    """A program focused on one rule (floats, optimizers, int
    attributes) or mixing everything, blocks optionally shuffled."""
    focus = draw(st.sampled_from(["floats", "optim", "ints", "cross", "mixed"]))
    plan = {
        "floats": ((SCREEN_SITES, 1, 2), (SCREEN_VALUES, 1, 3), (SCREEN_USES, 1, 3)),
        "optim": ((SCREEN_OPTIMIZERS, 1, 3), (SCREEN_STEP_SITES, 1, 2), (SCREEN_VALUES, 0, 2)),
        "ints": ((SCREEN_CLASSES, 1, 1), (SCREEN_MODULE_SITES, 1, 2), (SCREEN_USES, 0, 1), (SCREEN_CONFIG, 0, 1)),
        "cross": ((SCREEN_CROSS_IMPORTS, 1, 3), (SCREEN_VALUES, 0, 2), (SCREEN_CROSS_USES, 1, 3), (SCREEN_SITES, 0, 1)),
        "mixed": (
            (SCREEN_SITES, 0, 2), (SCREEN_MODULE_SITES, 0, 1), (SCREEN_STEP_SITES, 0, 1), (SCREEN_OPTIMIZERS, 0, 2),
            (SCREEN_CLASSES, 0, 1), (SCREEN_CONFIG, 0, 1), (SCREEN_VALUES, 0, 3), (SCREEN_USES, 0, 3),
            (SCREEN_CROSS_IMPORTS, 0, 1), (SCREEN_CROSS_USES, 0, 2),
        ),
    }[focus]
    blocks: List[str] = [draw(st.sampled_from(["import torch", "import torch as th\nimport torch"]))]
    if focus == "floats":  # where floats come from: math / random through some import
        blocks.append(draw(st.sampled_from(["import math", "import math as m", "from math import cos", "from random import uniform as U", "import random"])))
    if focus == "optim":  # one optimizer that resolves whatever else is imported
        blocks.append(draw(st.sampled_from(["opt = torch.optim.SGD(params, lr=0.1)", "opt = torch.optim.Adam(params, lr=0.01)"])))
    blocks += draw(st.lists(st.sampled_from(SCREEN_IMPORTS), max_size=4))
    for pool, low, high in plan:
        blocks += draw(st.lists(st.sampled_from(pool), min_size=low, max_size=high))
    if draw(st.booleans()):
        blocks = draw(st.permutations(blocks))
    return "\n".join(blocks) + "\n"


@settings(max_examples=500, deadline=None, suppress_health_check=SLOW)
@given(source=rule_programs())
def test_prefilter_never_drops_a_finding_on_generated_programs(source):
    """The byte prefilter is a superset of what the rules find: the same
    findings and fixes with it as with byte triggers alone."""
    assume(libcst_parses(source))
    data = source.encode("utf-8")
    # the program sits beside kernels.py in a run: the project index lists
    # kernels' compiled functions (cross-module FR003)
    folder = os.path.join(tempfile.gettempdir(), "fix-recompiles-prefilter-props")
    program, kernels = os.path.join(folder, "gen.py"), os.path.join(folder, "kernels.py")
    project = ProjectIndex.from_functions([program, kernels], {kernels: parse_for_index(SCREEN_KERNELS.encode())[0]})
    with_prefilter = process_source(program, "gen.py", data, ALL_UNSAFE, project)
    with no_prefilter():
        without = process_source(program, "gen.py", data, ALL_UNSAFE, project)
    assert [(f.code, f.line, f.message) for f in with_prefilter.findings] == [(f.code, f.line, f.message) for f in without.findings]
    assert with_prefilter.new == without.new and with_prefilter.error == without.error


@pytest.mark.parametrize("value", SCREEN_VALUES)
def test_prefilter_keeps_every_float_source(value):
    """Every way SCREEN_VALUES binds `c` (or `t`), with every use, every import
    present and compiled `f` and `g`: the same findings with the prefilter as
    without it (exhaustive where the generated programs only sample)."""
    # f and g only: a compile called in place (h) keeps FR003 whatever the values
    head = "\n".join(SCREEN_IMPORTS + [SCREEN_SITES[0], SCREEN_SITES[4]])
    for use in SCREEN_USES:
        source = f"{head}\n{value}\n{use}\n"
        data = source.encode("utf-8")
        with_prefilter = process_source("gen.py", "gen.py", data, ALL_UNSAFE)
        with no_prefilter():
            without = process_source("gen.py", "gen.py", data, ALL_UNSAFE)
        assert [(f.code, f.line, f.message) for f in with_prefilter.findings] == [(f.code, f.line, f.message) for f in without.findings], source
