"""FR003 float-args: dtype choice measured under real torch, rule examples,
safety messages, the project index, and a property test on random float
expressions."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import pickle

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.analysis.project import module_key
from codemods.pipeline.index import build_project_index
from codemods.pipeline.runner import run
from codemods.transforms import BY_CODE

RULE = BY_CODE["FR003"]
# these tests are about what is a float and when a wrap is safe, on small
# programs that pass a value once: findings without evidence that the value
# changes are reported with --unproven (tests of the evidence itself set it off)
FIX = Settings(select=frozenset({"FR003"}), unproven=True)
UNSAFE = Settings(select=frozenset({"FR003"}), unsafe_fixes=True, unproven=True)
VALUES = [0.1, 1 / 3, 0.7 + 1e-9, 1e-3, 123.456, 2.5, -0.37]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))


def test_dtype_choice():
    """Why the fix emits ``dtype=torch.float64`` and accepts only some uses."""
    torch.manual_seed(0)
    safe_ops = {
        "x + c": lambda x, c: x + c,
        "c + x": lambda x, c: c + x,
        "x - c": lambda x, c: x - c,
        "c - x": lambda x, c: c - x,
        "x * c": lambda x, c: x * c,
        "x / c": lambda x, c: x / c,
        "x > c": lambda x, c: x > c,
        "clamp(max=c)": lambda x, c: torch.clamp(x, max=c),
        "clamp(min=c)": lambda x, c: x.clamp(min=c),
    }
    for dtype in FLOAT_DTYPES:
        x = torch.randn(1000).to(dtype)
        for v in VALUES:
            t = torch.tensor(v, dtype=torch.float64)
            for name, op in safe_ops.items():
                assert _same(op(x, v), op(x, t)), (dtype, v, name)
            if dtype in (torch.float32, torch.float64):
                assert _same(v * x, t * x), (dtype, v)
    # what the rule refuses, and why: each differs for some dtype / value
    x16 = torch.randn(1000).to(torch.float16)
    x32 = torch.randn(1000)
    assert any(not _same(v * x16, torch.tensor(v, dtype=torch.float64) * x16) for v in VALUES)  # `c * x`, half
    assert any(not _same(v / x32, torch.tensor(v, dtype=torch.float64) / x32) for v in VALUES)  # `c / x`
    assert any(not _same(x32.abs() ** v, x32.abs() ** torch.tensor(v, dtype=torch.float64)) for v in VALUES)  # `**`
    # the float32 default of torch.tensor(c) would round c for float64 tensors
    x64 = torch.randn(1000, dtype=torch.float64)
    assert not _same(x64 + 0.1, x64 + torch.tensor(0.1))
    # no float dtype is right for integer tensors: the result dtype changes
    xi = torch.arange(1, 100)
    assert (xi * 0.5).dtype == torch.float32
    assert (xi * torch.tensor(0.5, dtype=torch.float64)).dtype == torch.float64


def _fix(src: str, settings: Settings = FIX):
    result = process_source("m.py", "m.py", src.encode(), settings)
    assert result.error is None, result.error
    return result


def test_rule_examples():
    for src in RULE.valid:
        assert _fix(src).findings == [], src
    for example in RULE.invalid:
        result = _fix(example.before)
        assert result.findings, example.before
        assert all(f.code == "FR003" for f in result.findings)
        safe = _fix(example.before).new
        if example.after is None:  # report only: no fix, safe or unsafe
            assert all(f.fix is None for f in result.findings)
            assert safe is None and _fix(example.before, UNSAFE).new is None
        elif example.unsafe:
            assert safe is None
            assert _fix(example.before, UNSAFE).new.decode() == example.after
        else:
            assert safe.decode() == example.after


@pytest.mark.parametrize(
    "body, why",
    [
        ("if c > 0.5:\n        return x\n    return x * c", "condition"),
        ("return {c: x}", "dict"),
        ("return f'{c}'", "f-string"),
        ("return x * max(c, 0.1)", "max()"),
        ("return c", "returned"),
        ("return x ** c", "`**`"),
        ("return c / x", "`c / x`"),
        ("return x.cpu() * c", "not visibly"),
    ],
)
def test_unsafe_uses_are_explained(body, why):
    src = f"import torch\n@torch.compile\ndef f(x, c):\n    {body}\nf(torch.ones(3), 0.5)\n"
    result = _fix(src)
    assert len(result.findings) == 1
    finding = result.findings[0]
    assert finding.fix.safety.value == "unsafe"
    assert why in finding.message, finding.message
    assert result.new is None  # --fix leaves it alone


@pytest.mark.parametrize(
    "body, why",
    [
        ("return x * round(c, 2)", "`round()` of a 0-d tensor raises TypeError"),
        ("return x * round(c * 10)", "`round()` of a 0-d tensor raises TypeError"),
        ("return x * int(c)", "`int()` of a 0-d tensor is a graph break"),
        ("return x * float(c)", "`float()` of a 0-d tensor is a graph break"),
        ("for _ in range(c):\n        x = x + 1\n    return x", "`range()` of a 0-d float tensor raises TypeError"),
        ("import math\n    return x * math.cos(c)", "`math.cos()` reads a 0-d tensor back"),
        ("return torch.nn.functional.dropout(x, c)", "needs a Python number"),
        ("return torch.nn.functional.dropout(x, p=c, training=True)", "needs a Python number"),
        ("return torch.dropout(x, c, True)", "still compiles once per value"),
        # the worst use decides: a branch, then dropout
        ("if c > 0:\n        x = x * c\n    return torch.nn.functional.dropout(x, c)", "needs a Python number"),
    ],
)
def test_no_fix_uses(body, why):
    """Uses where a 0-d tensor crashes or cannot cure the recompiles (each
    claim proven in tests/test_tensor_ops_table.py): reported, no fix at all."""
    src = f"import torch\n@torch.compile\ndef f(x, c):\n    {body}\nf(torch.ones(3), 0.5)\n"
    for settings in (FIX, UNSAFE):
        result = _fix(src, settings)
        assert len(result.findings) == 1
        finding = result.findings[0]
        assert finding.fix is None, finding.message
        assert why in finding.message, finding.message
        assert "no fix" in finding.message
        assert result.new is None


def _branch_src(options: str, call: str = "f(torch.ones(3), 0.5)") -> str:
    return (
        "import torch\n"
        "def pick(x, t):\n    if t > 0.0:\n        return x / t\n    return x\n"
        f"@torch.compile({options})\ndef f(x, t):\n    return pick(x, t) * 2\n{call}\n"
    )


@pytest.mark.parametrize(
    "options, target, expected",
    [
        ("fullgraph=True", None, None),  # the wrap would raise: no fix
        ("fullgraph=opts.fg", None, None),  # cannot be read: as if True
        ("", (2, 6), None),  # torch 2.6+, dynamic=None: the wrap cuts no graph (measured)
        ("dynamic=False", (2, 13), "unsafe"),  # every value recompiles: the wrap cures it, with a graph break
        ("", None, "unsafe"),  # any torch from 2.1: before 2.6 every value recompiles
        ("fullgraph=False", (2, 5), "unsafe"),
    ],
)
def test_branch_on_the_value(options, target, expected):
    """A helper the compiled function calls branches on the value: decided by
    the compile options and the target torch (tests/test_tensor_ops_table.py
    measures both branches of the decision)."""
    settings = Settings(select=frozenset({"FR003"}), unproven=True, unsafe_fixes=True, target_torch=target)
    result = _fix(_branch_src(options), settings)
    assert len(result.findings) == 1
    finding = result.findings[0]
    assert "passed to `pick()`" in finding.message and "condition" in finding.message, finding.message
    if expected is None:
        assert finding.fix is None and result.new is None, finding.message
    else:
        assert finding.fix is not None and finding.fix.safety.value == expected


def test_helper_needs_map_back_to_the_call():
    """A helper's use `x * t` needs `x` floating: the compiled function passes
    its own parameter, whose argument at the call decides."""
    src = (
        "import torch\n"
        "def scale(x, t):\n    return x * t\n"
        "@torch.compile\ndef f(x, t):\n    return scale(x, t)\n"
        "f(torch.randn(3), 0.5)\nf(torch.arange(3), 0.7)\n"
    )
    result = _fix(src)
    assert [f.fix.safety.value for f in result.findings] == ["safe", "unsafe"], [f.message for f in result.findings]


def test_lerp_weight_is_safe_with_one_visible_float_operand():
    """torch.lerp takes a 0-d float64 weight with the same result for
    float32/float64 tensors (tensor_ops_table); start and end share a dtype,
    so one visibly float32 operand is enough."""
    src = (
        "import torch\n@torch.compile\ndef f(a, b, w):\n    return torch.lerp(a, b, w) + a.lerp(b, weight=w)\n"
        "def run(a):\n    return f(a, torch.randn(3), 0.25)\n"
    )
    result = _fix(src)
    assert [f.fix.safety.value for f in result.findings] == ["safe"]
    half = src.replace("torch.randn(3)", "torch.randn(3).half()")
    assert [f.fix.safety.value for f in _fix(half).findings] == ["unsafe"]  # half: lerp differs in the last bit
    untabled = src.replace("torch.lerp(a, b, w)", "torch.pow(a, w)")
    assert "torch.pow" in _fix(untabled).findings[0].message


def test_safe_uses():
    src = (
        "import torch\nimport torch.nn.functional as F\n"
        "@torch.compile\ndef f(x, y, c):\n"
        "    d = c + 1e-6\n"
        "    z = torch.where(x > c, x * d, x - c)\n"
        "    return F.softmax(y / d, -1) * z + (1 - c) * torch.sigmoid(x) + x.clamp(max=c)\n"
        "x = torch.randn(3)\n"
        "y = torch.ones(3).float()\n"
        "for i in range(4):\n"
        "    f(x, y, c=0.1 * i)\n"
    )
    result = _fix(src)
    assert [f.fix.safety.value for f in result.findings] == ["safe"]
    assert b"c=torch.tensor(0.1 * i, dtype=torch.float64)" in result.new


def test_not_floats():
    src = (
        "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\n"
        "t = torch.tensor(0.5)\n"
        "def run(unknown):\n"
        "    for i in range(3):\n"
        "        f(t, i)\n        f(t, True)\n        f(t, None)\n        f(t, 'a')\n        f(t, t)\n"
        "        f(t, unknown)\n        f(t, len('ab') * 2)\n        f(t, i // 2)\n"
    )
    assert _fix(src).findings == []


def test_unseen_callee_is_unsafe():
    src = (
        "import torch\nmodel = torch.compile(torch.nn.Dropout())\n"
        "opt_fn = torch.compile(getattr(torch, 'mul'))\n"
        "opt_fn(torch.ones(2), 0.5)\n"
    )
    result = _fix(src)
    assert len(result.findings) == 1
    assert "cannot be seen" in result.findings[0].message


def test_adds_import_and_uses_alias():
    src = "import torch as th\n@th.compile\ndef f(x, c):\n    return x + c\nf(th.ones(2), 0.5)\n"
    assert b"th.tensor(0.5, dtype=th.float64)" in _fix(src).new


# -- project index -----------------------------------------------------------


def _tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)


KERNELS = "import torch\n\n@torch.compile\ndef smooth(x, beta):\n    return x * beta\n\ndef _g(x, b):\n    return x + b\n\ng = torch.compile(_g)\n\ndef plain(x, b):\n    return x * b\n"


def test_project_index(tmp_path):
    _tree(
        str(tmp_path),
        {
            "pkg/__init__.py": "",
            "pkg/kernels.py": KERNELS,
            "pkg/train.py": "from .kernels import smooth\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/deep.py": "",
            "script.py": "",
        },
    )
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    index = build_project_index(files, FIX)
    index = pickle.loads(pickle.dumps(index))
    root = str(tmp_path)
    assert module_key(str(tmp_path / "pkg/sub/deep.py")) == (root, "pkg.sub.deep")
    assert module_key(str(tmp_path / "pkg/__init__.py")) == (root, "pkg")
    assert sorted(index.compiled[(root, "pkg.kernels")]) == ["g", "smooth"]
    train = str(tmp_path / "pkg/train.py")
    deep = str(tmp_path / "pkg/sub/deep.py")
    assert index.resolve(train, ".kernels.smooth")[1].name == "smooth"
    assert index.resolve(train, "pkg.kernels.g")[1].name == "_g"
    assert index.resolve(deep, "..kernels.smooth")[1].name == "smooth"
    assert index.resolve(train, ".kernels.plain") is None
    assert index.resolve(str(tmp_path / "script.py"), "pkg.kernels.smooth") is not None
    assert (b"smooth", b"kernels") in index.prefilter_tokens(train)
    assert index.compiled[(root, "pkg.kernels")]["smooth"].uses["beta"].safe


def test_cross_module_file_without_compile(tmp_path):
    """train.py never mentions `compile` nor imports torch: it is still fixed."""
    _tree(
        str(tmp_path),
        {
            "kernels.py": KERNELS,
            "train.py": "import kernels as k\nfrom kernels import g\nfor i in range(3):\n    k.smooth(k.torch.ones(2), 0.5 * i)\n    g(None, b=1.5)\n    k.plain(None, 0.5)\n",
        },
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = run(["."], UNSAFE)
    finally:
        os.chdir(cwd)
    by_path = {r.display_path: r for r in result.results}
    train = by_path["train.py"]
    assert [f.line for f in train.findings] == [4, 5]
    new = train.new.decode()
    assert new.startswith("import torch\n") or "\nimport torch\n" in new
    assert "k.smooth(k.torch.ones(2), torch.tensor(0.5 * i, dtype=torch.float64))" in new
    assert "g(None, b=torch.tensor(1.5, dtype=torch.float64))" in new
    assert "k.plain(None, 0.5)" in new


# -- property: wrapped float expressions give the same values ------------------

_leaf = st.one_of(
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-5, max_value=5).map(str),
    st.just("i"),
)


def _expr(children):
    return st.tuples(children, st.sampled_from(["+", "-", "*", "/"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})")


EXPRS = st.recursive(_leaf, _expr, max_leaves=6)

PROGRAM = """import torch


@torch.compile
def f(x, c):
    return (x + c, c - x, x * c, x / c, (x > c).float(), x.clamp(max=c))


def show(out):
    print([t.dtype for t in out], [t.tolist() for t in out])


def main():
    x16 = torch.linspace(-3, 3, 7, dtype=torch.float16)
    x32 = torch.linspace(-3, 3, 7)
    x64 = torch.linspace(-3, 3, 7, dtype=torch.float64)
    for i in range(3):
        try:
            c = {expr}
        except ZeroDivisionError:
            print("zero division")
            continue
        if abs(c) < 6e4:  # a Python float beyond float16's range raises for x16
            show(f(x16, c))
        if abs(c) < 3e38:  # ... and beyond float32's range for x32 (a tensor gives inf)
            show(f(x32, c))
        show(f(x64, c))


main()
"""


def _run_eager(src: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), torch._dynamo.config.patch(disable=True):
        exec(compile(src, "<fr003>", "exec"), {"__name__": "__main__"})
    return buf.getvalue()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRS)
def test_wrapped_expressions_keep_values(expr):
    src = PROGRAM.format(expr=expr)
    result = _fix(src)
    new = result.new.decode() if result.new else None
    is_float = "." in expr or "e" in expr or "/" in expr
    if not is_float:
        assert new is None  # an int expression is left alone
        return
    assert new is not None, expr
    assert "f(x64, torch.tensor(c, dtype=torch.float64))" in new
    assert _run_eager(new) == _run_eager(src)


# -- floats rebuilt from themselves and from float-returning calls -------------

_HEAD = (
    "import functools\nimport math\nimport random\nfrom random import uniform\nimport torch\n"
    "@torch.compile\ndef f(x, c):\n    return x * c\nx = torch.ones(3)\n"
)


@pytest.mark.parametrize(
    "body, reason",
    [
        ("t = 1.0\nfor s in range(5):\n    t = t * 0.95\n    f(x, t)\n", "recomputed in the loop"),
        ("t = 1.0\nfor s in range(5):\n    t *= 0.9\n    f(x, t)\n", "recomputed in the loop"),
        ("t = 1.0\nfor s in range(5):\n    t -= 0.01\n    f(x, t)\n", "recomputed in the loop"),
        ("t = 1\nfor s in range(5):\n    t /= 2\n    f(x, t)\n", "recomputed in the loop"),
        ("t = 1.0\nwhile t > 0.1:\n    t = 0.5 * t\n    f(x, t)\n", "recomputed in the loop"),
        ("lr = 1.0\nfor s in range(5):\n    lr = max(lr * 0.5, 1e-4)\n    f(x, lr)\n", "recomputed in the loop"),
        ("a = 1.0\nb = 2.0\nfor s in range(5):\n    a = b * 0.5\n    b = a + 1\n    f(x, a)\n", "recomputed in the loop"),
        ("def g(y):\n    v = float(y)\n    f(x, v)\n", "bound to a float"),
        ("v = math.cos(0.3)\nf(x, v)\n", "bound to a float"),
        ("v = random.random()\nf(x, v)\n", "bound to a float"),
        ("v = uniform(0.1, 0.2)\nf(x, v)\n", "bound to a float"),
        ("v = min(0.5, 0.25)\nf(x, v)\n", "bound to a float"),
        ("v = round(0.123, 2)\nf(x, v)\n", "bound to a float"),
        ("v = abs(-0.5)\nf(x, v)\n", "bound to a float"),
    ],
)
def test_float_sources(body, reason):
    findings = _fix(_HEAD + body).findings
    assert len(findings) == 1, body
    assert reason in findings[0].message, findings[0].message


@pytest.mark.parametrize(
    "body",
    [
        # float on one path, tensor / unknown / int on another
        "t = 1.0\nfor s in range(5):\n    if s:\n        t = torch.tensor(0.5)\n    f(x, t)\n",
        "t = torch.tensor(1.0)\nfor s in range(5):\n    t = t * 0.95\n    f(x, t)\n",
        "def g(y):\n    t = y\n    for s in range(5):\n        t = t * 0.95\n        f(x, t)\n",
        "def g(y):\n    a = 1.0\n    b = y\n    for s in range(5):\n        a = b * 0.5\n        b = a + y\n        f(x, a)\n",
        "t = 1.0\nfor s in range(3):\n    f(x, t)\n    t = torch.tensor(t)\n",
        # ints stay ints
        "t = 1\nfor s in range(5):\n    t = t * 2\n    f(x, t)\n",
        "t = 1\nfor s in range(5):\n    t *= 3\n    f(x, t)\n",
        "v = random.randint(1, 3)\nf(x, v)\n",
        "n = 0\nfor s in range(3):\n    n = max(n, s)\n    f(x, n)\n",
        # max/min of mixed kinds, with key=, or of one iterable: not known to be a float
        "v = max(0.5, 2)\nf(x, v)\n",
        "lr = 1.0\nlr = max(lr, 1)\nf(x, lr)\n",
        "v = max(0.5, 0.2, key=abs)\nf(x, v)\n",
        "v = max([0.5, 0.2])\nf(x, v)\n",
        "t = 1\nt |= 2\nf(x, t)\n",
        # a shadowed builtin is not the builtin
        "def float(v):\n    return torch.tensor(v)\nv = float(3)\nf(x, v)\n",
        "def max(a, b):\n    return torch.tensor(a)\nv = max(0.5, 0.1)\nf(x, v)\n",
        # floats reaching the call through functools.partial or **kwargs / *args
        "h = functools.partial(f, c=0.5)\nh(x)\n",
        "kw = {'c': 0.5}\nf(x, **kw)\n",
        "for s in range(3):\n    f(x, **dict(c=0.1 * s))\n",
        "args = (x, 0.5)\nf(*args)\n",
        "p = torch.compile(functools.partial(lambda x, c: x * c, c=0.5))\np(x)\n",
    ],
)
def test_not_float_sources(body):
    assert _fix(_HEAD + body).findings == [], body


def test_long_chains_terminate():
    """A long chain of names rebuilt from each other resolves without blowing up."""
    names = [f"v{i}" for i in range(60)]
    lines = ["v0 = 0.5"] + [f"{b} = {a} * 0.5 + {names[0]}" for a, b in itertools.pairwise(names)]
    body = "for s in range(3):\n" + "".join(f"    {line}\n" for line in lines) + f"    v0 = {names[-1]} - 0.1\n    f(x, {names[-1]})\n"
    assert len(_fix(_HEAD + body).findings) == 1
    # each name used twice: 2**40 paths; the step budget gives up (no finding) quickly
    lines = ["w0 = 0.5"] + [f"w{i + 1} = w{i} * 0.5 + w{i}" for i in range(40)]
    body = "".join(f"{line}\n" for line in lines) + "f(x, w40)\n"
    assert _fix(_HEAD + body).findings == []


def test_wrapping_changes_only_the_call():
    """The float is wrapped at the call: every other use of the name in the
    caller is left as it was (runtime proof: golden case `caller_unchanged`)."""
    src = (
        "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\n"
        "t = 1.0\nseen = {}\n"
        "for s in range(3):\n"
        "    t = t * 0.9\n"
        "    out = f(torch.ones(2), t)\n"
        "    seen[t] = round(t, 2)\n"
        "    print(f'{t:.2f}', isinstance(t, float), t > 0.5)\n"
    )
    new = _fix(src).new.decode()
    changed = [(a, b) for a, b in zip(src.splitlines(), new.splitlines()) if a != b]
    assert len(src.splitlines()) == len(new.splitlines())
    assert changed == [("    out = f(torch.ones(2), t)", "    out = f(torch.ones(2), torch.tensor(t, dtype=torch.float64))")]


def test_prefilter_keeps_random_only_floats(monkeypatch):
    from codemods.pipeline import prefilter

    src = (
        "import random\nimport torch\n@torch.compile\ndef f(x, c):\n    return x * c\n"
        "for s in range(3):\n    v = random.random()\n    f(torch.ones(2), v)\n"
    )
    monkeypatch.setattr(prefilter, "ENABLED", False)
    assert len(_fix(src).findings) == 1
    monkeypatch.setattr(prefilter, "ENABLED", True)
    assert len(_fix(src).findings) == 1


def test_cross_module_call_through_an_alias(tmp_path, monkeypatch):
    """`from kernels import smooth as sm; sm(x, 0.5)`: the index follows the
    import alias to the compiled function's name (same findings as without
    the byte prefilter)."""
    from codemods.pipeline import prefilter

    _tree(
        str(tmp_path),
        {
            "kernels.py": KERNELS,
            "alias.py": "import torch\nfrom kernels import smooth as sm\nsm(torch.ones(2), 0.5)\n",
            "star.py": "import torch\nfrom kernels import *\nsmooth(torch.ones(2), 0.25)\n",
        },
    )
    monkeypatch.chdir(tmp_path)
    results = {}
    for enabled in (True, False):
        monkeypatch.setattr(prefilter, "ENABLED", enabled)
        result = run(["."], UNSAFE)
        results[enabled] = [(f.path, f.line, f.message) for f in result.findings]
    assert results[True] == results[False]
    # a star import is not followed, with or without the prefilter
    assert [(p, line) for p, line, _ in results[True]] == [("alias.py", 3)]


def test_recursive_helpers_are_not_followed_forever():
    """Helpers that call each other: the cycle is cut (unsafe, with a reason),
    and a chain of helpers is followed to the use that decides."""
    src = (
        "import torch\n"
        "def a(x, t):\n    return b(x, t)\n"
        "def b(x, t):\n    return a(x, t) if x.sum() > 0 else x * t\n"
        "def c(x, t):\n    return d(x, t * 2.0)\n"
        "def d(x, t):\n    return round(t, 1) * x\n"
        "@torch.compile\ndef f(x, t, u):\n    return a(x, t) + c(x, u)\n"
        "for i in range(3):\n    f(torch.randn(3), 0.1 * i, 0.2 * i)\n"
    )
    result = _fix(src)
    by_kw = sorted(result.findings, key=lambda f: f.column)
    assert len(by_kw) == 2
    first, second = by_kw
    assert first.fix is not None and first.fix.safety.value == "unsafe" and "calls back into itself" in first.message, first.message
    assert second.fix is None and "passed to `c()`" in second.message and "passed to `d()`" in second.message and "round()" in second.message, second.message


# -- a fused kernel's scalars: a counted-up int beside the floats (issue 28) ----------

_KERNEL = """import torch
@torch.compile(dynamic=False)
def upd(p, step, lr, beta):
    p.sub_({use})
p = torch.ones(3)
state = {{"step": 0}}
for it in range(4):
    lr = 0.1 * (1 - it / 4)
    state["step"] += 1
    upd(p, {step}, lr, 0.9)
"""


def test_counted_int_is_wrapped_with_the_floats():
    """The lr beside a step counted up with it: one finding whose fix wraps
    both (a wrap of the lr alone leaves every step recompiling); the
    constant 0.9 is not part of it."""
    src = _KERNEL.format(use="lr * p / (1 - beta ** step)", step='state["step"]')
    r = _fix(src, Settings(select=frozenset({"FR003"}), unsafe_fixes=True))
    assert [f.code for f in r.findings] == ["FR003"]
    assert 'state["step"]' in r.findings[0].message and "alone cures nothing" in r.findings[0].message
    assert 'upd(p, torch.tensor(state["step"], dtype=torch.float64), torch.tensor(lr, dtype=torch.float64), 0.9)' in r.new.decode()


def test_counted_int_that_cannot_be_a_tensor_blocks_the_fix():
    """The step sizes a tensor: it cannot be a tensor, so neither is the lr
    wrapped (together or not at all)."""
    src = _KERNEL.format(use="lr * p * len(range(step))", step='state["step"]')
    r = _fix(src, UNSAFE)
    out, findings = (r.new or r.original).decode(), r.findings
    assert "no fix" in findings[0].message and findings[0].fix is None
    assert "torch.tensor(lr" not in out


def test_an_int_not_counted_up_leaves_the_float_alone():
    """A constant int beside the lr is not claimed: the lr's own wrap, as before."""
    src = _KERNEL.format(use="lr * p / (1 - beta ** step)", step="3")
    r = _fix(src, Settings(select=frozenset({"FR003"}), unsafe_fixes=True))
    out, findings = (r.new or r.original).decode(), r.findings
    assert [f.code for f in findings] == ["FR003"] and "counted up" not in findings[0].message
    assert "upd(p, 3, torch.tensor(lr, dtype=torch.float64), 0.9)" in out
