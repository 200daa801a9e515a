"""CompileModel's module-level names: a class or function defined twice is
the last definition (what the name is bound to once the module has run),
as the CST analysis had it."""

from __future__ import annotations

import ast

from codemods.compile_sites import CompileModel
from codemods.source import Source


def model_of(code: str) -> CompileModel:
    return CompileModel(Source("m.py", "m.py", code.encode(), ast.parse(code), code, "utf-8"))


def test_a_class_defined_twice_is_the_last_definition():
    code = (
        "import torch\n"
        "class Net:\n    pass\n"
        "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "m = Net()\nm.compile()\n"
    )
    model = model_of(code)
    assert model.classes["Net"].lineno == 4
    assert [s.form for s in model.compile_sites] == ["method"]


def test_a_function_defined_twice_is_the_last_definition():
    model = model_of("def f():\n    return 1\nasync def f():\n    return 2\n")
    assert isinstance(model.functions["f"], ast.AsyncFunctionDef)


def test_relative_imports_are_qualified_with_their_level():
    import ast as _ast

    from codemods.compile_sites import CompileModel
    from codemods.source import Source

    data = b"from . import kernels\nfrom ..pkg import k2 as k\nfrom .m import f\nkernels, k, f\n"
    tree = _ast.parse(data)
    model = CompileModel(Source("x.py", "x.py", data, tree, data.decode(), "utf-8"))
    names = [n for n in _ast.walk(tree) if isinstance(n, _ast.Name)]
    got = {n.id: model.qualified_names(n) for n in names}
    assert got == {"kernels": {".kernels"}, "k": {"..pkg.k2"}, "f": {".m.f"}}
