"""FR014's proof that a memo holds a pure function of its key
(codemods/analysis/purity.py): the skip-the-memo fix is safe exactly when
the proof holds, and an unproven fix says what was not proven.

Each case is the AnyFlow-shaped tuple memo (or QwenImage's dict memo) with
one thing changed; the runtime side of the same judgement is in
tests/realworld (pos_rope_freqs_memo: safe; pos_rope_learned_theta_memo:
unsafe) and the goldens of tests/golden/compiled_memo."""

from __future__ import annotations

import pytest

from codemods.analysis.context import Settings
from codemods.findings import Safety
from codemods.pipeline.engine import process_source

SETTINGS = Settings(select=frozenset({"FR014"}))

TUPLE_MEMO = """\
import importlib
import math
import numpy as np
import torch
TABLE_BASE = 10000.0
STATE = []
def helper(n):
    return torch.arange(n) * 2
def noisy(n):
    return torch.arange(n) * torch.rand(1)
class Rope(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.weight = torch.nn.Parameter(torch.ones(4))
        self.proj = torch.nn.Linear(4, 4)
        self.table = torch.arange(8.0)
        self._cache = None
    def _table(self, n, device):
        key = KEY
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        t = BODY
        self._cache = (key, t)
        return t
    def forward(self, x):
        return x + self._table(x.shape[0], x.device)
EXTRA
m = torch.compile(Rope(4))
"""


def _memo_fix(key: str = "(n, str(device))", body: str = "torch.arange(n, device=device)", extra: str = ""):
    src = TUPLE_MEMO.replace("KEY", key).replace("BODY", body).replace("EXTRA", extra)
    result = process_source("m.py", "m.py", src.encode(), SETTINGS)
    assert result.error is None, result.error
    memo = [f for f in result.findings if f.code == "FR014"]
    assert len(memo) == 1, [f.message for f in result.findings]
    assert memo[0].fix is not None
    return memo[0]


@pytest.mark.parametrize(
    "body",
    [
        "torch.arange(n, device=device)",
        "torch.arange(n, device=device) * self.dim / TABLE_BASE",  # an attribute only __init__ sets, a module constant
        "helper(n).to(device)",  # a pure function of the module
        "torch.outer(torch.arange(n), 1.0 / (math.pi ** torch.arange(0, self.dim, 2)))",
        "torch.tensor([[0] * math.prod((n, 2)) for _ in range(2)], device=device)",
        "torch.arange(n)\n        if n < 0:\n            raise ValueError(n)",  # raising is the same eager and compiled
    ],
)
def test_a_pure_value_makes_the_skip_safe(body):
    # a caller that reads the result (a new tensor from it) changes nothing
    finding = _memo_fix(body=body, extra="    def doubled(self, n, device):\n        t = self._table(n, device)\n        t = t * 2\n        return t\n")
    assert finding.fix.safety is Safety.SAFE, finding.message
    assert "safe: the value is a pure function of the key" in finding.message


@pytest.mark.parametrize(
    "key,body,extra,why",
    [
        ("(n, str(device))", "torch.randn(n, device=device)", "", "`torch.randn` is not a pure function"),
        ("(n, str(device))", "noisy(n)", "", "`torch.rand` is not a pure function"),
        ("(n, str(device))", "torch.arange(n) * self.weight.sum()", "", "`self.weight` is a parameter"),
        ("(n, str(device))", "self.proj(torch.ones(n))", "", "not a method of the class"),
        ("(n, str(device))", "torch.arange(n) + len(STATE)", "", "`STATE`, which is not a constant"),
        ("(n, device.type)", "torch.arange(n, device=device)", "", "`device`, which the key does not cover"),
        ("str(device)", "torch.arange(n, device=device)", "", "`n`, which the key does not cover"),
        # a local that may be a view of an attribute, changed in place
        ("(n, str(device))", "self.table.view(-1)\n        t.add_(1)", "", "`t.add_` changes a value in place"),
        # `n` rebound after the key is made: the key holds another value than the table is computed from
        ("(n, str(device))\n        n = n * 2", "torch.arange(n, device=device)", "", "`n`, which the key does not cover"),
        ("(n, str(device))", "torch.arange(n) * self.dim", "    def grow(self):\n        self.dim += 1\n", "`self.dim` is assigned on line"),
        ("(n, str(device))", "torch.arange(n)", "    def peek(self):\n        return self._cache[1]\n", "`._cache` is used outside the memo's method"),
        ("(n, str(device))", "torch.arange(n) + self.training", "", "`self.training` is not assigned in `__init__`"),
        # a function of another module, not torch's (transformers' _LazyConfigMapping
        # memoises importlib.import_module: the audit over the library corpus found it)
        ("(n, str(device))", "importlib.import_module(str(n))", "", "`importlib.import_module` is not known to be pure"),
        ("(n, str(device))", "torch.arange(n) * np.random.rand()", "", "`np.random.rand` is not"),
        # a caller changes the one cached tensor in place: with the memo the next call sees it
        ("(n, str(device))", "torch.arange(n)", "    def scaled(self, n, device):\n        t = self._table(n, device)\n        t.mul_(2)\n        return t\n",
         "a caller changes the returned value in place (`t`, line"),
        ("(n, str(device))", "torch.arange(n)", "    def zeroed(self, n, device):\n        self._table(n, device).zero_()\n",
         "a caller changes the returned value in place (line"),
        ("(n, str(device))", "torch.arange(n)", "    def pair(self, n, device):\n        a = self._table(n, device)\n        a[0] = 1\n        return a\n",
         "a caller changes the returned value in place (`a`, line"),
    ],
)
def test_an_unproven_value_keeps_the_skip_unsafe_and_says_why(key, body, extra, why):
    finding = _memo_fix(key=key, body=body, extra=extra)
    assert finding.fix.safety is Safety.UNSAFE, finding.message
    assert "not proven: " in finding.message and why in finding.message, finding.message


def test_a_hit_that_returns_another_value_than_a_miss_is_unsafe():
    src = TUPLE_MEMO.replace("KEY", "(n, str(device))").replace("BODY", "torch.arange(n)").replace("EXTRA", "")
    src = src.replace("        self._cache = (key, t)\n        return t\n", "        self._cache = (key, t)\n        return t * 2\n")
    result = process_source("m.py", "m.py", src.encode(), SETTINGS)
    (finding,) = [f for f in result.findings if f.code == "FR014"]
    assert finding.fix.safety is Safety.UNSAFE
    assert "a hit returns another value than a miss" in finding.message


DICT_MEMO = """\
import torch
class Rope(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_freqs = torch.arange(64.0)
        self.rope_cache = {}
    def forward(self, x, frame, height, device):
        if self.pos_freqs.device != device:
            self.pos_freqs = self.pos_freqs.to(device)
        rope_key = KEY
        if rope_key not in self.rope_cache:
            self.rope_cache[rope_key] = self.pos_freqs[: frame * height].clone()
        return x + self.rope_cache[rope_key].sum()
m = torch.compile(Rope())
"""


@pytest.mark.parametrize("key,safe", [('f"{frame}_{height}"', True), ('f"{frame}"', False)])
def test_qwenimage_dict_memo_is_safe_only_when_the_key_covers_every_size(key, safe):
    # QwenImage's rope (diffusers #12061): the local-dict form; `self.pos_freqs`
    # is moved by `.to(device)` in forward, which keeps its values
    result = process_source("m.py", "m.py", DICT_MEMO.replace("KEY", key).encode(), SETTINGS)
    (finding,) = [f for f in result.findings if f.code == "FR014"]
    assert finding.fix.safety is (Safety.SAFE if safe else Safety.UNSAFE), finding.message
    if not safe:
        assert "`height`, which the key does not cover" in finding.message


FORWARD_MEMO = """\
import torch
class Rope(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = None
    def forward(self, n):
        key = (n,)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        t = torch.arange(n) * 1.0
        self._cache = (key, t)
        return t
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rope()
    def forward(self, x):
        freqs = self.rope(x.shape[0])
USE        return x + freqs
m = torch.compile(Model())
"""


@pytest.mark.parametrize("use,safe", [("", True), ("        freqs.mul_(2)\n", False), ("        freqs[0] = 1.0\n", False)])
def test_a_module_call_that_changes_the_memo_forward_returns_is_unsafe(use, safe):
    # the memo in `forward`: its callers are the module calls `self.rope(...)`
    result = process_source("m.py", "m.py", FORWARD_MEMO.replace("USE", use).encode(), SETTINGS)
    (finding,) = [f for f in result.findings if f.code == "FR014"]
    assert finding.fix is not None
    assert finding.fix.safety is (Safety.SAFE if safe else Safety.UNSAFE), finding.message
    if not safe:
        assert "a caller changes the returned value in place (`freqs`, line 19)" in finding.message
