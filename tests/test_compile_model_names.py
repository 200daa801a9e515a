"""CompileModel's module-level names: a class or function defined twice is
the last definition (what the name is bound to once the module has run),
as the CST analysis had it."""

from __future__ import annotations

import ast

from codemods.analysis.compile_sites import CompileModel
from codemods.analysis.source import Source


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

    from codemods.analysis.compile_sites import CompileModel
    from codemods.analysis.source import Source

    data = b"from . import kernels\nfrom ..pkg import k2 as k\nfrom .m import f\nkernels, k, f\n"
    tree = _ast.parse(data)
    model = CompileModel(Source("x.py", "x.py", data, tree, data.decode(), "utf-8"))
    names = [n for n in _ast.walk(tree) if isinstance(n, _ast.Name)]
    got = {n.id: model.qualified_names(n) for n in names}
    assert got == {"kernels": {".kernels"}, "k": {"..pkg.k2"}, "f": {".m.f"}}


# -- flows of compiled callables (issue 12, forms 4-6) ------------------------------------


def _calls(model: CompileModel):
    """(call line, name of the function the call runs compiled) of every site."""
    out = set()
    for site in model.compile_sites:
        for call in site.calls:
            fn = site.def_of(call)
            out.add((call.lineno, getattr(fn, "name", None)))
    return out


def test_returned_and_passed_on_as_an_argument():
    model = model_of(
        "import torch\n"
        "def step(x, t):\n    return x / t\n"  # 2
        "def load(compile=True):\n    fn = step\n    if compile:\n        fn = torch.compile(fn)\n    return fn\n"  # 4-8
        "def run(f, x, t):\n    return f(x, t)\n"  # 9-10
        "decode = load()\n"  # 11
        "run(decode, torch.ones(2), 0.5)\n"  # 12
        "decode(torch.ones(2), 0.7)\n"  # 13
    )
    assert _calls(model) == {(10, "step"), (13, "step")}


def test_a_function_given_only_eager_functions_has_no_compiled_calls():
    # `run` is only ever given an eager function: its call is not a compiled call
    model = model_of(
        "import torch\n"
        "def step(x):\n    return x\n"
        "def run(f, x):\n    return f(x)\n"
        "c = torch.compile(step)\n"
        "run(step, torch.ones(2))\n"
    )
    assert _calls(model) == set()


def test_project_decorator_compiling_lazily_in_a_closure():
    model = model_of(
        "import torch\n"
        "def maybe_compile(fn):\n"  # 2
        "    compiled = None\n"
        "    def wrapper(*a):\n"
        "        nonlocal compiled\n"
        "        if compiled is None:\n"
        "            compiled = torch.compile(fn, dynamic=False)\n"  # 7
        "        return compiled(*a)\n"  # 8
        "    return wrapper\n"
        "@maybe_compile\n"  # 10
        "def f(x, a):\n    return x * a\n"  # 11
        "@maybe_compile\n"
        "def g(x):\n    return x\n"  # 14
        "f(torch.ones(2), 0.5)\n"  # 16
        "g(torch.ones(3))\n"  # 17
        "h = maybe_compile(g)\n"  # 18
        "h(torch.ones(4))\n"  # 19
    )
    [site] = model.compile_sites
    assert site.option("dynamic") is not None
    assert _calls(model) == {(8, None), (16, "f"), (17, "g"), (19, "g")}
    assert set(model.module_compiled_functions()) == {"f", "g", "h"}


def test_decorator_factory_and_a_decorator_that_does_not_hand_out_the_compiled_callable():
    model = model_of(
        "import torch\n"
        "def compiled(**opts):\n"
        "    def deco(fn):\n"
        "        return torch.compile(fn, **opts)\n"
        "    return deco\n"
        "def register(fn):\n"  # 6: compiles, but returns the eager function
        "    REG.append(torch.compile(fn))\n"
        "    return fn\n"
        "@compiled(dynamic=None)\n"
        "def f(x):\n    return x\n"  # 10
        "@register\n"
        "def g(x):\n    return x\n"  # 13
        "f(torch.ones(2))\n"  # 15
        "g(torch.ones(2))\n"  # 16
    )
    assert _calls(model) == {(15, "f")}


def test_bound_method_stored_on_an_attribute_by_a_method_that_returns_it():
    model = model_of(
        "import torch\n"
        "class Loss(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self._fn = self._make()\n"  # 5
        "    def _make(self):\n"
        "        return torch.compile(self._loss)\n"  # 7
        "    def _loss(self, x, w):\n"
        "        return x * w\n"
        "    def forward(self, x, w):\n"
        "        return self._fn(x, w)\n"  # 11
    )
    assert _calls(model) == {(11, "_loss")}


# -- what a name stands for: one implementation, its two options ---------------------------

NAMES = (
    "from torch.optim import SGD\n"  # 1
    "from helpers import *\n"  # 2
    "import numpy as np\n"  # 3
    "a = SGD\n"  # 4
    "b = len\n"  # 5
    "c = schedule\n"  # 6: star-imported (or unbound): not a builtin
    "d = np.zeros\n"  # 7
    "e = SGD.step\n"  # 8
    "def f():\n    return SGD\n"  # 9-10
    "SGD = SGD(params)\n"  # 11: the call reads the import, not the name it binds
    "len = 2\n"  # 12
    "del np\n"  # 13
)


def _loads(model: CompileModel):
    """line -> the (dotted) name a statement's value is (or calls)."""
    out = {}
    for node in ast.walk(model.tree):
        if isinstance(node, (ast.Assign, ast.Return)):
            value = node.value.func if isinstance(node.value, ast.Call) else node.value
            if isinstance(value, (ast.Name, ast.Attribute)):
                out[node.lineno] = value
    return out


def test_every_binding_or_the_bindings_seen_where_the_name_is():
    model = model_of(NAMES)
    at = _loads(model)
    every = {line: model.qualified_names(expr) for line, expr in at.items()}
    assert every == {
        4: {"torch.optim.SGD", "SGD"},
        5: {"len"},
        6: set(),  # was {"builtins.schedule"}: FR004 took such a call for a builtin
        7: {"numpy.zeros"},  # `del np` binds nothing
        8: {"torch.optim.SGD.step", "SGD.step"},
        10: {"torch.optim.SGD", "SGD"},
        11: {"torch.optim.SGD", "SGD"},
    }
    seen = {line: model.qualified_names(expr, visible=True) for line, expr in at.items()}
    assert seen == {
        4: {"torch.optim.SGD"},
        5: {"builtins.len"},  # the module rebinds `len` only later
        6: set(),
        7: {"numpy.zeros"},
        8: {"torch.optim.SGD.step", "SGD.step"},  # a dotted name's base has every binding
        10: {"torch.optim.SGD", "SGD"},  # another scope: every binding of the module
        11: {"torch.optim.SGD"},
    }
    assert model.qualified_names(at[4], local="<local>.") == {"torch.optim.SGD", "<local>.SGD"}
    assert model.qualified_names(at[5], visible=True, local="<local>.") == {"builtins.len"}


def test_the_number_analysis_and_fr004_ask_the_model():
    from codemods.analysis.floats import NameResolver

    model = model_of(NAMES)
    at = _loads(model)
    site = NameResolver(model)
    for expr in at.values():
        assert site.qualified_names(expr) is model.qualified_names(expr, visible=True, local="<local>.")
    assert model.qualified_names(at[11], visible=True) is model.qualified_names(at[11], visible=True)  # cached per node


FILLED = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        return x


class Other(nn.Module):
    def forward(self, x):
        return x


class Tower(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.blocks = nn.ModuleDict()
        for i in range(depth):
            self.blocks[str(i)] = Block()
        self.layers = nn.ModuleList()
        for _ in range(depth):
            self.layers.append(Block())
        self.mixed = nn.ModuleList()
        self.mixed.append(Block())
        self.mixed.append(Other())
        self.grown = nn.ModuleList()
        self.grown.extend(make_blocks())

    def forward(self, x):
        for name, blk in self.blocks.items():
            x = blk(x)
        for layer in self.layers:
            x = layer(x)
        for m in self.mixed:
            x = m(x)
        for g in self.grown:
            x = g(x)
        return x
"""


def test_an_empty_module_container_filled_in_a_loop_holds_what_is_put_in():
    # torchtitan's and cosmos-rl's layout: `self.blocks = nn.ModuleDict()`, then
    # `self.blocks[str(i)] = Block(...)` (or `.append(Block(...))`) in a loop
    model = model_of(FILLED)
    calls = {c.func.id: c for c in ast.walk(model.source.tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in ("blk", "layer", "m", "g")}
    found = {name: getattr(model.module_class_of(call.func), "name", None) for name, call in calls.items()}
    # two classes put in, or a container grown by what the model cannot see: unknown
    assert found == {"blk": "Block", "layer": "Block", "m": None, "g": None}
