"""FR005 unspec-int-attrs and FR006 recompile-limit: what the emitted config
code does on fake torch config objects (old releases, limits raised elsewhere),
where the statements go, and when nothing is reported."""

from __future__ import annotations

import os
import textwrap
import types

import libcst as cst
import pytest

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source


class OldConfig:
    """Like dynamo's config module on torch < 2.7: setting an unknown name fails."""

    def __init__(self, **known):
        object.__setattr__(self, "_known", dict(known))

    def __getattr__(self, name):
        try:
            return self._known[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        if name not in self._known:
            raise AttributeError(f"torch._dynamo.config has no attribute {name!r}")
        self._known[name] = value


def fake_torch(config):
    return types.SimpleNamespace(_dynamo=types.SimpleNamespace(config=config))


def fix(source: str, code: str, *, unsafe: bool = False, target=None):
    settings = Settings(select=frozenset({code}), unsafe_fixes=unsafe, target_torch=target)
    result = process_source("t.py", "t.py", textwrap.dedent(source).encode(), settings)
    assert result.error is None, result.error
    new = result.new.decode() if result.new is not None else None
    return result.findings, new


def statements_added(before: str, after: str, **_) -> str:
    """The lines the fix added (the fixed code minus the input's lines)."""
    old = textwrap.dedent(before).splitlines()
    return "\n".join(line for line in after.splitlines() if line not in old)


COUNTER = """\
import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


model = torch.compile(Counter())
"""

LOOP = """\
import torch


@torch.compile(dynamic=False)
def f(x, i):
    return x * i


for i in range(12):
    f(torch.ones(2), i)
"""


# -- the emitted code on fake configs -------------------------------------------
def test_flag_guard_is_a_no_op_on_a_release_without_the_flag():
    _, new = fix(COUNTER, "FR005")
    added = textwrap.dedent(statements_added(COUNTER, new))
    old = OldConfig(cache_size_limit=8)
    exec(added, {"torch": fake_torch(old)})  # must not raise
    assert "allow_unspec_int_on_nn_module" not in old._known
    # the unguarded assignment is what would have crashed there
    with pytest.raises(AttributeError):
        exec("torch._dynamo.config.allow_unspec_int_on_nn_module = True", {"torch": fake_torch(old)})


def test_flag_guard_sets_the_flag_where_it_exists():
    _, new = fix(COUNTER, "FR005")
    new_cfg = OldConfig(allow_unspec_int_on_nn_module=False)
    exec(textwrap.dedent(statements_added(COUNTER, new)), {"torch": fake_torch(new_cfg)})
    assert new_cfg._known["allow_unspec_int_on_nn_module"] is True


def test_target_torch_27_writes_the_plain_assignment():
    _, new = fix(COUNTER, "FR005", target=(2, 7))
    assert statements_added(COUNTER, new) == "torch._dynamo.config.allow_unspec_int_on_nn_module = True"
    _, guarded = fix(COUNTER, "FR005", target=(2, 6))
    assert "hasattr" in statements_added(COUNTER, guarded)


@pytest.mark.parametrize("current, expected", [(8, 12), (64, 64), (12, 12), (200, 200)])
def test_limit_raise_never_lowers(current, expected):
    _, new = fix(LOOP, "FR006", unsafe=True)
    cfg = OldConfig(cache_size_limit=current)  # every release from 2.1 has cache_size_limit
    exec(statements_added(LOOP, new), {"torch": fake_torch(cfg)})
    assert cfg._known["cache_size_limit"] == expected


def test_limit_raise_uses_the_new_name_only_for_27_and_later():
    _, new = fix(LOOP, "FR006", unsafe=True, target=(2, 7))
    assert "recompile_limit = max(torch._dynamo.config.recompile_limit, 12)" in new
    _, old = fix(LOOP, "FR006", unsafe=True, target=(2, 6))
    assert "recompile_limit" not in old and "cache_size_limit" in old


def test_emitted_code_reaches_dynamo_through_plain_import_torch():
    """`import torch` alone makes `torch._dynamo.config` reachable (2.13)."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "assert 'torch._dynamo' not in sys.modules or True\n"
        "torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 12)\n"
        "print(torch._dynamo.config.cache_size_limit, hasattr(torch._dynamo.config, 'allow_unspec_int_on_nn_module'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["12", "True"]


# -- FR006 is unsafe --------------------------------------------------------------
def test_limit_raise_is_held_back_without_unsafe_fixes():
    findings, new = fix(LOOP, "FR006")
    assert new is None
    assert [f.fix.safety.value for f in findings] == ["unsafe"]


# -- placement ----------------------------------------------------------------------
def test_flag_is_set_in_each_branch_that_compiles():
    src = COUNTER.replace(
        "model = torch.compile(Counter())\n",
        "if __name__ == '__main__':\n    model = torch.compile(Counter())\nelse:\n    model = Counter()\n    model.compile()\n",
    )
    findings, new = fix(src, "FR005")
    assert len(findings) == 2
    tree = cst.parse_module(new)
    branch = tree.body[-1]
    assert "allow_unspec_int_on_nn_module" in tree.code_for_node(branch.body.body[0])
    assert "allow_unspec_int_on_nn_module" in tree.code_for_node(branch.orelse.body.body[1])


def test_one_flag_covers_later_compiles_in_nested_blocks():
    src = COUNTER + "if True:\n    other = torch.compile(Counter())\nthird = torch.compile(Counter())\n"
    findings, new = fix(src, "FR005")
    assert len(findings) == 1
    assert new.count("allow_unspec_int_on_nn_module = True") == 1
    assert new.index("allow_unspec_int_on_nn_module") < new.index("model = torch.compile")


def test_comment_above_the_compile_stays_with_it():
    src = COUNTER.replace("model = torch", "x = 1\n\n# the compiled model\nmodel = torch")
    _, new = fix(src, "FR005")
    lines = new.splitlines()
    i = lines.index("# the compiled model")
    assert lines[i + 1].startswith("model = torch.compile")
    assert lines[i - 1] == "    torch._dynamo.config.allow_unspec_int_on_nn_module = True"
    assert lines[i - 3] == ""  # the blank line stays above the inserted guard


def test_limit_goes_before_the_outermost_loop_of_the_function():
    src = """\
    import torch


    @torch.compile(dynamic=False)
    def f(x):
        return x.sum()


    def train():
        for epoch in range(3):
            for n in range(1, 11):
                f(torch.ones(n))
    """
    _, new = fix(src, "FR006", unsafe=True)
    lines = new.splitlines()
    i = lines.index("    for epoch in range(3):")
    assert lines[i - 1] == "    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 10)"


def raised_to(code: str):
    return [int(line.rsplit(",", 1)[1].strip(" )")) for line in code.splitlines() if "_limit = max(" in line]


@pytest.mark.parametrize("first, second", [(12, 10), (9, 20), (3, 9)])
def test_loops_in_one_block_share_one_raise_before_the_first(first, second):
    """Variants of every loop share one cache: one raise, before the first
    loop, to the sum of the loops' counts."""
    src = LOOP.replace("range(12)", f"range({first})") + f"for j in range({second}):\n    f(torch.ones(2), j)\n"
    findings, new = fix(src, "FR006", unsafe=True)
    assert len(findings) == 1
    assert raised_to(new) == [first + second]
    assert new.index("_limit = max(") < new.index(f"range({first})")


def test_loops_at_or_below_the_limit_each_are_not_reported():
    src = LOOP.replace("range(12)", "range(6)") + "for j in range(6):\n    f(torch.ones(2), j)\n"
    assert fix(src, "FR006", unsafe=True)[0] == []


def test_loops_in_different_functions_each_get_a_raise():
    src = LOOP.replace("for i in range(12):\n    f(", "def a():\n    for i in range(12):\n        f(")
    src += "def b():\n    for j in range(10):\n        f(torch.ones(2), j)\n"
    findings, new = fix(src, "FR006", unsafe=True)
    assert len(findings) == 2
    assert raised_to(new) == [22, 22]


# -- nothing reported ------------------------------------------------------------
@pytest.mark.parametrize(
    "setter",
    [
        "torch._dynamo.config.allow_unspec_int_on_nn_module = False\n",
        "setattr(torch._dynamo.config, 'allow_unspec_int_on_nn_module', True)\n",
        "@torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True)\ndef run():\n    pass\n",
    ],
)
def test_flag_already_set_by_the_module(setter):
    findings, new = fix(COUNTER + setter, "FR005")
    assert findings == [] and new is None


@pytest.mark.parametrize(
    "init",
    ["0.0", "torch.zeros(())", "torch.tensor(0)", "n", "None"],
)
def test_non_int_attributes_are_not_reported(init):
    src = COUNTER.replace("self.calls = 0", f"self.calls = {init}").replace("def __init__(self)", "def __init__(self, n=0)")
    findings, _ = fix(src, "FR005")
    assert findings == []


def test_int_attribute_of_a_module_that_is_not_compiled():
    findings, _ = fix(COUNTER.replace("torch.compile(Counter())", "Counter()"), "FR005")
    assert findings == []


def test_a_plain_class_is_not_a_module():
    src = COUNTER.replace("class Counter(torch.nn.Module)", "class Counter(object)").replace("        super().__init__()\n", "")
    findings, _ = fix(src, "FR005")
    assert findings == []


@pytest.mark.parametrize(
    "setter",
    [
        "torch._dynamo.config.cache_size_limit = 4\n",
        "torch._dynamo.config.recompile_limit += 8\n",
        "with torch._dynamo.config.patch(cache_size_limit=32):\n    pass\n",
    ],
)
def test_limit_already_set_by_the_module(setter):
    findings, _ = fix(setter + LOOP, "FR006", unsafe=True)
    assert findings == []


@pytest.mark.parametrize("bound", [1, 8])
def test_bound_at_or_below_the_default_limit(bound):
    findings, _ = fix(LOOP.replace("range(12)", f"range({bound})"), "FR006", unsafe=True)
    assert findings == []


def test_unknown_bound_is_not_reported():
    """A bound whose value the module does not show: no finding.  A name
    bound once to a constant is a visible bound (codemods/constants.py)."""
    unknown = LOOP.replace("range(12)", "range(n)").replace("for i", "import sys\nn = int(sys.argv[1])\nfor i")
    findings, _ = fix(unknown, "FR006", unsafe=True)
    assert findings == []
    rebound = LOOP.replace("range(12)", "range(n)").replace("for i", "n = 12\nn = 4\nfor i")
    assert fix(rebound, "FR006", unsafe=True)[0] == []
    known, _ = fix(LOOP.replace("range(12)", "range(n)").replace("for i", "n = 12\nfor i"), "FR006", unsafe=True)
    assert [f.code for f in known] == ["FR006"]


def test_shadowed_max_gets_no_fix():
    src = "def max(a, b):\n    return a\n\n\n" + LOOP
    findings, new = fix(src, "FR006", unsafe=True)
    assert len(findings) == 1 and findings[0].fix is None and new is None


def test_fr005_and_fr006_together_with_fr001_compose():
    src = COUNTER + LOOP.replace("import torch\n", "")
    settings = Settings(unsafe_fixes=True)
    first = process_source("t.py", "t.py", src.encode(), settings)
    assert first.error is None
    codes = sorted({f.code for f in first.findings})
    assert {"FR001", "FR005", "FR006"} <= set(codes)
    fixed = first.new
    cst.parse_module(fixed)
    compile(fixed, "t.py", "exec")
    second = process_source("t.py", "t.py", fixed, settings)
    assert second.new is None or second.new == fixed


@pytest.mark.parametrize("name", ["torch", "fix-recompiles", "fix_recompiles", "libcst", "typer", "no-such-distribution-here"])
def test_dist_version_agrees_with_importlib_metadata(name):
    from importlib import metadata

    from codemods.pipeline.config import dist_version

    try:
        expected = metadata.version(name)
    except metadata.PackageNotFoundError:
        expected = None
    assert dist_version(name) == expected


def test_dist_version_reads_dist_info_folders_without_importlib_metadata():
    import subprocess
    import sys

    code = "import sys; from codemods.pipeline.config import dist_version; v = dist_version('torch'); print(v, 'importlib.metadata' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=60)
    version, imported = proc.stdout.split()
    assert version.startswith("2.13.0") and imported == "False", proc.stderr


def test_without_torch_installed_no_release_is_assumed(tmp_path, monkeypatch):
    """pre-commit's hook environment has no torch (issue 29, item 7): the
    settings assume no release and the fix takes the guarded form; a
    target-torch in pyproject.toml gives the release's own spelling."""
    import cli
    from codemods.pipeline import config

    monkeypatch.setattr(config, "dist_version", lambda name: None)
    assert config.installed_torch() is None
    settings, _cfg = cli.resolve_settings([str(tmp_path)])
    assert settings.target_torch is None
    _, new = fix(COUNTER, "FR005", target=settings.target_torch)
    assert "hasattr" in statements_added(COUNTER, new)
    (tmp_path / "pyproject.toml").write_text('[tool.fix-recompiles]\ntarget-torch = "2.13"\n')
    settings, _cfg = cli.resolve_settings([str(tmp_path)])
    assert tuple(settings.target_torch) == (2, 13)
    _, new = fix(COUNTER, "FR005", target=settings.target_torch)
    assert statements_added(COUNTER, new) == "torch._dynamo.config.allow_unspec_int_on_nn_module = True"


WARMUP = """\
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        self.step_count += 1
        return x * {scale}


model = torch.compile(Model())
"""


def test_flag_is_unsafe_before_2_13_where_inductor_miscomputes_min_of_a_division():
    """torch 2.9.1 and 2.11.0's inductor computes `min(1.0, (step + 1) / 10)`
    as 0.0 once `step` is dynamic (2.13.0, 2.14.1 right; measured): the flag
    that makes it dynamic is unsafe for a release before 2.13, safe from it."""
    risky = WARMUP.format(scale="min(1.0, (self.step_count + 1) / 10)")
    for target, safe in (((2, 11), False), ((2, 9), False), ((2, 13), True), ((2, 14), True)):
        findings, new = fix(risky, "FR005", target=target)
        [finding] = findings
        assert (finding.fix.safety.value == "safe") == safe, (target, finding.message)
        assert (new is not None) == safe
        if not safe:
            assert "before torch 2.13" in finding.message and "line 11" in finding.message
    # the same counter in plain arithmetic: safe on every release
    findings, new = fix(WARMUP.format(scale="(self.step_count + 1) / 10"), "FR005", target=(2, 11))
    assert [f.fix.safety.value for f in findings] == ["safe"] and new is not None
