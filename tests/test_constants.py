"""codemods.analysis.constants: the one int a bound visibly has, or None."""

from __future__ import annotations

import ast
import textwrap

import pytest

from codemods.analysis.compile_sites import model_of
from codemods.analysis.constants import int_value
from codemods.pipeline.engine import parse_ast


def bound_of(src: str):
    """int_value of the first argument of the last ``range(...)`` of ``src``."""
    source = parse_ast("t.py", textwrap.dedent(src).encode())
    model = model_of(source)
    call = max((n for n in source.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id == "range"), key=lambda n: n.lineno)
    return int_value(model, call.args[0])


CASES = [
    # a config namespace, through __init__ and a module-level name
    (
        """
        from types import SimpleNamespace
        class M:
            def __init__(self, config):
                self.n = config.n_layer
            def forward(self, x):
                for i in range(self.n):
                    pass
        config = SimpleNamespace(n_layer=12)
        M(config)
        """,
        12,
    ),
    # a dataclass default, the config built without arguments
    (
        """
        from dataclasses import dataclass
        @dataclass
        class Config:
            n_layer: int = 6 * 2
        class M:
            def __init__(self, cfg):
                self.cfg = cfg
            def forward(self):
                for i in range(self.cfg.n_layer):
                    pass
        M(Config())
        """,
        12,
    ),
    # the dataclass field overridden at the call
    (
        """
        from dataclasses import dataclass
        @dataclass
        class Config:
            n_layer: int = 4
        def run(cfg):
            for i in range(cfg.n_layer):
                pass
        run(Config(n_layer=20))
        """,
        20,
    ),
    # an argparse default, the dashes of the option mapped to the attribute
    (
        """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--n-layer", type=int, default=16)
        args = p.parse_args()
        for i in range(args.n_layer):
            pass
        """,
        16,
    ),
    # two constructions that disagree: no one value
    (
        """
        from types import SimpleNamespace
        class M:
            def __init__(self, config):
                self.n = config.n_layer
            def forward(self):
                for i in range(self.n):
                    pass
        M(SimpleNamespace(n_layer=12))
        M(SimpleNamespace(n_layer=24))
        """,
        None,
    ),
    # the attribute changes after __init__
    (
        """
        class M:
            def __init__(self):
                self.n = 12
            def grow(self):
                self.n += 1
            def forward(self):
                for i in range(self.n):
                    pass
        """,
        None,
    ),
    # the argument is forwarded through **kwargs: not visible
    (
        """
        def run(n):
            for i in range(n):
                pass
        opts = {"n": 12}
        run(**opts)
        """,
        None,
    ),
    # the namespace lacks the field
    (
        """
        from types import SimpleNamespace
        def run(cfg):
            for i in range(cfg.depth):
                pass
        run(SimpleNamespace(n_layer=12))
        """,
        None,
    ),
    # a name rebound in a loop is not a constant
    (
        """
        n = 3
        for step in range(5):
            n = n + 1
        for i in range(n):
            pass
        """,
        None,
    ),
]


@pytest.mark.parametrize("src, expected", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_int_value(src, expected):
    assert bound_of(src) == expected


# -- a store_true flag passed as dynamic= (FR001's `or None`) --------------------------

FLAG = """import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument({option}, action="store_true"{more})
args = parser.parse_args()
f = torch.compile(len, dynamic=args.compile_dynamic)
"""


def flag_of(code):
    from codemods.analysis.constants import store_true_flag

    model = model_of(parse_ast("t.py", code.encode()))
    return store_true_flag(model, model.compile_sites[0].option("dynamic").value)


def test_a_store_true_flag_is_false_unless_passed():
    assert flag_of(FLAG.format(option='"--compile_dynamic"', more="")) == "--compile_dynamic"
    assert flag_of(FLAG.format(option='"--compile-dynamic"', more=", default=False")) == "--compile-dynamic"
    assert flag_of(FLAG.format(option='"--dyn"', more=', dest="compile_dynamic"')) == "--dyn"


def test_not_a_flag_that_can_be_false_otherwise():
    assert flag_of(FLAG.format(option='"--compile_dynamic"', more=", default=True")) is None
    assert flag_of(FLAG.format(option='"--compile_dynamic"', more="").replace("store_true", "store_false")) is None
    assert flag_of(FLAG.format(option='"--other"', more="")) is None  # the parser is elsewhere
    written = FLAG.format(option='"--compile_dynamic"', more="") + "args.compile_dynamic = False\n"
    assert flag_of(written) is None
