"""FR003 on the stdlib ``ast`` model: what the call side keeps from the libcst
analysis it replaced (how names resolve, how arguments are quoted) and what
it now sees better."""

from __future__ import annotations

import os

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.pipeline.runner import run
from codemods.transforms import BY_CODE

UNSAFE = Settings(select=frozenset({"FR003"}), unsafe_fixes=True, unproven=True)  # small programs: one call, no evidence
HEAD = "import torch\n@torch.compile\ndef f(x, c):\n    return x * c\nx = torch.randn(3)\n"


def _findings(src: str):
    result = process_source("m.py", "m.py", src.encode(), UNSAFE)
    assert result.error is None, result.error
    return result


def test_rule_reads_the_ast_and_the_project_index():
    rule = BY_CODE["FR003"]
    assert rule.reads == "ast" and rule.reads_project


def test_message_quotes_the_argument_with_its_parentheses():
    result = _findings(HEAD + "for i in range(3):\n    f(x, ( 1.0 - 0.1 * i ))\n    f(\n        x,  # a (comment\n        (0.5))\n")
    assert ["`( 1.0 - 0.1 * i )`" in result.findings[0].message, "`(0.5)`" in result.findings[1].message] == [True, True]
    # the edit wraps the parenthesized expression, the finding spans it without the parentheses
    assert (result.findings[0].column, result.findings[0].end_column) == (12, 25)
    assert "f(x, torch.tensor(( 1.0 - 0.1 * i ), dtype=torch.float64))" in result.new.decode()


def test_call_before_the_compile_in_the_same_scope_is_not_its_call():
    """At module level, `f(x, 0.5)` before `f = torch.compile(g)` calls
    something else (libcst's reading, kept); in a function defined earlier it
    runs later and calls the compiled one."""
    src = (
        "import torch\ndef g(x, c):\n    return x * c\nx = torch.randn(3)\n"
        "f(x, 0.5)\n"
        "def later():\n    f(x, 0.25)\n"
        "f = torch.compile(g)\n"
        "f(x, 0.75)\n"
    )
    assert [f.line for f in _findings(src).findings] == [7, 9]


def test_name_read_before_its_import_is_not_the_import():
    src = HEAD + "f(x, cos(0.5))\nfrom math import cos\nf(x, cos(0.5))\n"
    assert [f.line for f in _findings(src).findings] == [8]


def test_variable_named_after_a_module_is_not_the_module():
    src = HEAD + "import math\nf(x, math.cos(0.5))\ndef g(math):\n    f(x, math.cos(0.5))\nrandom = 3\nf(x, random.random())\n"
    assert [f.line for f in _findings(src).findings] == [7]


def test_del_binds_no_value():
    src = HEAD + "t = 0.5\nfor i in range(2):\n    f(x, t)\ndel t\n"
    assert [f.line for f in _findings(src).findings] == [8]


def test_compiled_through_global_is_seen():
    """`global f; f = torch.compile(f)` in a function (litgpt's generate):
    libcst's scopes did not see this compile, the ast scopes do."""
    src = (
        "import torch\ndef step(x, temperature):\n    return x / temperature\n"
        "def main(compile):\n    global step\n    if compile:\n        step = torch.compile(step)\n"
        "def loop(x, temperature: float):\n    return step(x, temperature)\n"
    )
    (finding,) = _findings(src).findings
    assert "`temperature` is annotated `float`" in finding.message and finding.line == 9


def test_relative_import_of_a_module_resolves(tmp_path, monkeypatch):
    """`from . import kernels; kernels.smooth(x, 0.5)` names pkg.kernels.smooth."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels.py").write_text("import torch\n\n@torch.compile\ndef smooth(x, beta):\n    return x * beta\n")
    (pkg / "user.py").write_text("from . import kernels\nfrom .kernels import smooth as sm\nkernels.smooth(None, 0.5)\nsm(None, 0.25)\n")
    monkeypatch.chdir(tmp_path)
    result = run(["."], UNSAFE)
    found = [(f.path, f.line) for f in result.findings]
    assert found == [(os.path.join("pkg", "user.py"), 3), (os.path.join("pkg", "user.py"), 4)]
    assert all("`pkg.kernels.smooth`" in f.message for f in result.findings)
