"""FR019 across modules: the factory that makes a module class per call in
one module, the blocks compiled one by one in another module of the same
program (unsloth's layout: diffusion_convrot.py and diffusion_speed.py,
whose `compile_repeated_blocks` call compiles diffusers' blocks). The runtime
cure of this form is tests/realworld/pos_class_per_call_cross_module."""

from __future__ import annotations

import os
import textwrap

from codemods.analysis.context import Settings
from codemods.findings import Safety
from codemods.pipeline.runner import run

FACTORY = """
from torch import nn


def scaled_class():
    class Scaled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 0.5

    return Scaled


def install(module):
    module.__class__ = scaled_class()


def install_all(modules):
    for m in modules:
        install(m)
"""

SPEED = """
def compile_blocks(transformer):
    transformer.compile_repeated_blocks(dynamic=True)
"""

MAIN = """
from factory import install_all
from speed import compile_blocks
"""


def _run(tmp_path, files, settings=Settings(), jobs=1, cache_dir=None):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        outcome = run(["."], settings, jobs=jobs, cache_dir=cache_dir)
    finally:
        os.chdir(cwd)
    assert not outcome.errors, outcome.errors
    return {r.display_path.replace(os.sep, "/").removeprefix("./"): [(f.code, f.fix.safety if f.fix else None, f.message) for f in r.findings] for r in outcome.results}


def test_blocks_compiled_one_by_one_in_another_module_are_the_evidence(tmp_path):
    found = _run(tmp_path, {"factory.py": FACTORY, "speed.py": SPEED, "main.py": MAIN})
    [(code, safety, message)] = found["factory.py"]
    assert code == "FR019" and safety == Safety.SAFE
    assert "modules compiled one by one in module `speed`, line 2" in message


def test_the_same_from_the_cache_and_a_pool(tmp_path):
    files = {"factory.py": FACTORY, "speed.py": SPEED, "main.py": MAIN}
    first = _run(tmp_path, files)
    cache = tmp_path / ".cache"
    assert _run(tmp_path, files, jobs=2, cache_dir=str(cache)) == first
    assert _run(tmp_path, files, jobs=2, cache_dir=str(cache)) == first


def test_without_a_compile_one_by_one_the_factory_is_not_read(tmp_path):
    """The whole model compiled: the factory's module, which compiles
    nothing, is not analysed for FR019 (a trace's type guard naming its
    class is what brings it in: `run --fix`)."""
    files = {"factory.py": FACTORY, "speed.py": "import torch\n\n\ndef compile_model(m):\n    return torch.compile(m)\n", "main.py": MAIN}
    assert _run(tmp_path, files)["factory.py"] == []
    assert _run(tmp_path, files, Settings(unproven=True))["factory.py"] == []


def test_a_compile_of_another_program_is_no_evidence(tmp_path):
    """Two programs in one run (two folders of scripts): the blocks another
    program compiles one by one cannot be the factory's modules."""
    files = {"rotate/factory.py": FACTORY, "rotate/main.py": MAIN.replace("from speed import compile_blocks\n", ""), "serve/speed.py": SPEED}
    assert _run(tmp_path, files)["rotate/factory.py"] == []
