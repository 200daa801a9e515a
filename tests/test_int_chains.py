"""FR005 across modules (project index): a class of another module compiled
one by one whose forward reaches an int attribute change in a submodule
method of a third module.  The runtime cure of the proven form is
tests/realworld/pos_kvcache_cross_module (its negative: neg_kvcache_cross_module)."""

from __future__ import annotations

import os
import textwrap
from typing import Dict, List, Optional

from codemods.analysis.context import Settings
from codemods.pipeline.runner import run

COMPILE = """
import torch
from modules import Layer

def compile_model(model):
    for m in reversed(list(model.modules())):
        if isinstance(m, Layer):
            m.compile(backend="eager")
"""

MODULES = """
from layer import Layer  # noqa
"""

LAYER = """
import torch
from torch import nn
from attention import Attention

class Layer(nn.Module):
    def __init__(self, dim{param}):
        super().__init__()
        self.attn = {attn}

    def forward(self, x):
        return self.attn(x) + x
"""

ATTENTION = """
import torch
from torch import nn
from kv_cache import KVCache

class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.kv_cache = None

    def setup_cache(self, n):
        self.kv_cache = KVCache(n)

    def forward(self, x):
        if self.kv_cache is not None:
            x = self.kv_cache.update(x)
        return x
"""

KV_CACHE = """
import torch
from torch import nn

class KVCache(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.size = 0

    def update(self, x):
        {update}
        return x
"""


def _project(tmp_path, *, attn: str = "Attention(dim)", param: str = "", update: str = "self.size += x.shape[0]", extra: Optional[Dict[str, str]] = None) -> str:
    files = {
        "_compile.py": COMPILE,
        "modules.py": MODULES,
        "layer.py": LAYER.format(attn=attn, param=param),
        "attention.py": ATTENTION,
        "kv_cache.py": KV_CACHE.format(update=update),
    }
    files.update(extra or {})
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return str(tmp_path)


def _fr005(root: str, settings: Settings = Settings(), **kw) -> List[tuple]:
    cwd = os.getcwd()
    os.chdir(root)
    try:
        out = run(["."], settings, **kw)
    finally:
        os.chdir(cwd)
    return [(os.path.basename(r.path), f) for r in out.results for f in r.findings if f.code == "FR005"]


def test_chain_across_three_modules_is_proven_and_fixed(tmp_path):
    root = _project(tmp_path)
    found = _fr005(root)
    assert [(name, f.line) for name, f in found] == [("_compile.py", 8)]
    finding = found[0][1]
    assert "KVCache.update" in finding.message and "self.size" in finding.message
    assert finding.fix is not None and finding.fix.safety.value == "safe"


def test_no_int_change_no_finding(tmp_path):
    # the int attribute is only set in __init__; update writes a buffer
    root = _project(tmp_path, update="self.register_buffer('pos', x)")
    assert _fr005(root, Settings(unproven=True)) == []


def test_annotated_parameter_is_unproven_only(tmp_path):
    # torchtune's layout: `self.attn = attn`, `attn: Attention` (a subclass may be passed)
    root = _project(tmp_path, attn="attn", param=", attn: Attention")
    assert _fr005(root) == []
    found = _fr005(root, Settings(unproven=True))
    assert [(name, f.line) for name, f in found] == [("_compile.py", 8)]
    assert not found[0][1].proven


def test_unannotated_parameter_or_factory_is_not_followed(tmp_path):
    for name, attn, param in (("param", "attn", ", attn"), ("factory", "make_attention(dim)", "")):
        folder = tmp_path / name
        folder.mkdir()
        assert _fr005(_project(folder, attn=attn, param=param), Settings(unproven=True)) == [], name


def test_flag_already_set_in_the_compile_module(tmp_path):
    compile_text = COMPILE.replace("def compile_model", "torch._dynamo.config.allow_unspec_int_on_nn_module = True\n\ndef compile_model")
    root = _project(tmp_path, extra={"_compile.py": compile_text})
    assert _fr005(root, Settings(unproven=True)) == []


def test_class_not_in_the_run_is_not_guessed(tmp_path):
    # the compiled class comes from a package outside the run
    compile_text = COMPILE.replace("from modules import Layer", "from othertune.modules import Layer")
    root = _project(tmp_path, extra={"_compile.py": compile_text})
    assert _fr005(root, Settings(unproven=True)) == []


def test_warm_cache_gives_the_same_finding_and_sees_a_changed_chain(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    root = _project(folder)
    cache = str(tmp_path / "cache")
    first = _fr005(root, cache_dir=cache)
    again = _fr005(root, cache_dir=cache)
    assert first and [(n, f.line, f.message) for n, f in first] == [(n, f.line, f.message) for n, f in again]
    # the cache's int attribute no longer changes: the compile's file (unchanged, cached) loses its finding
    (folder / "kv_cache.py").write_text(textwrap.dedent(KV_CACHE.format(update="pass")) + "\n")
    assert _fr005(root, cache_dir=cache) == []


def test_warm_cache_reads_the_chain_files_class_facts_without_parsing(tmp_path, monkeypatch):
    import codemods.analysis.modules as modules

    folder = tmp_path / "p"
    folder.mkdir()
    root = _project(folder)
    cache = str(tmp_path / "cache")
    parsed: List[str] = []
    real = modules.class_facts

    def counting(source):  # what FR005's proof reads of a file on a chain (analysis/int_chains.py)
        parsed.append(os.path.basename(source.path))
        return real(source)

    monkeypatch.setattr(modules, "class_facts", counting)
    first = _fr005(root, cache_dir=cache)
    assert first and "kv_cache.py" in parsed
    parsed.clear()
    again = _fr005(root, cache_dir=cache)
    assert [(n, f.line, f.message) for n, f in again] == [(n, f.line, f.message) for n, f in first]
    assert parsed == []  # every file on the chain answered by the facts cache
    (folder / "kv_cache.py").write_text(textwrap.dedent(KV_CACHE.format(update="pass")) + "\n")
    assert _fr005(root, cache_dir=cache) == [] and parsed == ["kv_cache.py"]  # only the changed one again


def test_per_file_ignore_drops_the_facts(tmp_path):
    from codemods.pipeline.config import PerFileIgnores
    from codemods.pipeline.selection import FileSelection

    root = _project(tmp_path)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        plain = run(["."], Settings())
        ignored = run(["."], Settings(), selection=FileSelection(per_file_ignores=PerFileIgnores([("_compile.py", ["FR005"])], root)))
    finally:
        os.chdir(cwd)
    assert plain.project.per_file.get("int_chains") and not ignored.project.per_file.get("int_chains")
    assert not [f for f in ignored.findings if f.code == "FR005"]
