"""FR016 object-int-state: an int attribute of a plain object (not an
``nn.Module``) that the compiled code both reads and counts up (a KV
cache's ``pos``, a step counter): torch guards the value it read, the
compiled call changes it, so the next call recompiles (karpathy/nanochat
2bc521a: sampling through the ``dynamic=False`` compiled model, whose
``KVCache.pos`` grows by one each decode step: a graph per position)."""

from __future__ import annotations

from typing import Iterable, List, Set, Tuple

from ..analysis.modules import CountedInt, counted_object_ints
from ..findings import Finding
from .base import Example, Rule

class ObjectIntState(Rule):
    code = "FR016"
    #: no trace cause: report only, and the trace's int guard (`kv_cache.pos
    #: == 25`) is not told apart from an int argument's, whose cures are FR001's
    cures = ()
    name = "object-int-state"
    summary = "an int attribute of a plain object counted up inside compiled code"
    what_it_does = """
Finds an int attribute of an object of a plain class of the module (not an
`nn.Module`: a KV cache, a step counter) that the compiled code both reads
and changes from its own value: `self.pos += n`, `self.pos = self.pos + n`,
or `self.pos = t1` with `t1 = self.pos + T`. The attribute is an int literal
in `__init__` (or the class body), and the methods are run by the compiled
code: called on an object the compiled code is given (`kv_cache.get_pos()`,
the method's name defined by one plain class of the module), on a module-level
object, from a compiled module's `forward` and what it reaches (its methods,
its submodules, the blocks of an `nn.ModuleList` it loops over), or from a
compiled function. Methods under `@torch.compiler.disable` run eagerly and
count for nothing. Report only.
"""
    why_it_recompiles = """
dynamo reads the attribute while tracing and guards its value
(`kv_cache.pos == 25`); the compiled call then changes it, so the next call
fails the guard. By default the int turns dynamic after that one recompile
(2 graphs); under `dynamic=False` every value is a new graph until the
recompile limit, after which the code runs eagerly. Measured on torch 2.13
(CPU, counting backend): nanochat's sampling through its `dynamic=False`
compiled model before 2bc521a, 8 graphs and the limit (`kv_cache.pos == 25`,
`26`, ...); sampled with the uncompiled model, 1.
"""
    example = """
    class KVCache:
        def __init__(self):
            self.pos = 0

        def insert_kv(self, k):
            t1 = self.pos + k.size(2)
            ...
            self.pos = t1                    # counted up inside the compiled call

    model = torch.compile(GPT(config), dynamic=False)
    model(ids, kv_cache=cache)              # T0 = kv_cache.pos: a graph per position

Cured by hand: keep the position in a tensor updated in place
(`self.pos.add_(T)`, read without `.item()`), or run this path without
compiling (nanochat 2bc521a: `Engine(orig_model, tokenizer)`).
"""
    fix_safety = """
No automatic fix: a tensor position changes every slice it sizes into a
data-dependent one, and which calls should run eagerly is the user's choice.
"""
    report_only = True
    reads = "ast"
    triggers = (b"+=", b"= self.")
    valid = (
        # counted up only outside the compiled code
        "import torch\nclass Counter:\n    def __init__(self):\n        self.n = 0\n    def bump(self):\n        self.n += 1\n"
        "c = Counter()\n@torch.compile\ndef f(x):\n    return x * 2\nfor _ in range(3):\n    f(torch.ones(2))\n    c.bump()\n",
        # read inside, but never changed there
        "import torch\nclass Cfg:\n    def __init__(self):\n        self.k = 2\n    def get_k(self):\n        return self.k\n"
        "cfg = Cfg()\n@torch.compile\ndef f(x):\n    return x * cfg.get_k()\n",
        # changed inside, under @torch.compiler.disable
        "import torch\nclass Counter:\n    def __init__(self):\n        self.n = 0\n    @torch.compiler.disable\n    def bump(self):\n        self.n += 1\n        return self.n\n"
        "c = Counter()\n@torch.compile\ndef f(x):\n    return x * c.bump()\n",
        # the compiled model is never given the cache (only the eager one is)
        "import torch\nclass KVCache:\n    def __init__(self):\n        self.pos = 0\n    def get_pos(self):\n        return self.pos\n"
        "    def advance(self, n):\n        self.pos += n\n"
        "class GPT(torch.nn.Module):\n    def forward(self, x, kv_cache=None):\n        T0 = 0 if kv_cache is None else kv_cache.get_pos()\n"
        "        if kv_cache is not None:\n            kv_cache.advance(x.size(0))\n        return x[T0:]\n"
        "model = GPT()\nmodel = torch.compile(model)\nmodel(torch.ones(8))\nGPT()(torch.ones(8), kv_cache=KVCache())\n",
        # an nn.Module's int: FR005's concern
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M())\n",
    )
    invalid = (
        # nanochat's KVCache (before 2bc521a), given to a compiled model's forward
        Example(
            "import torch\nclass KVCache:\n    def __init__(self):\n        self.pos = 0\n    def get_pos(self):\n        return self.pos\n"
            "    def advance(self, n):\n        t1 = self.pos + n\n        self.pos = t1\n"
            "class GPT(torch.nn.Module):\n    def forward(self, x, kv_cache=None):\n        T0 = 0 if kv_cache is None else kv_cache.get_pos()\n"
            "        if kv_cache is not None:\n            kv_cache.advance(x.size(0))\n        return x[T0:]\n"
            "model = torch.compile(GPT(), dynamic=False)\ncache = KVCache()\nfor t in range(4):\n    model(torch.ones(8), kv_cache=cache)\n"
        ),
        # a module-level counter a compiled function reads and bumps
        Example(
            "import torch\nclass Steps:\n    def __init__(self):\n        self.n = 0\n    def next(self):\n        self.n += 1\n        return self.n\n"
            "steps = Steps()\n@torch.compile\ndef f(x):\n    return x * steps.next()\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        findings: List[Finding] = []
        seen: Set[Tuple[int, str]] = set()
        for site in model.compile_sites:
            for counted in counted_object_ints(model, site):
                if (id(counted.owner), counted.attr) in seen:
                    continue
                seen.add((id(counted.owner), counted.attr))
                findings.append(self._finding(ctx, site, counted))
        return sorted(findings, key=lambda f: (f.line, f.column))

    def _finding(self, ctx, site, counted: CountedInt) -> Finding:
        cls, attr, reads, start = counted.owner, counted.attr, counted.reads, counted.start
        method, write = counted.writes[0]
        dynamic_false = site.dynamic_literal is False
        how = (
            f"under `dynamic=False` (line {site.node.lineno}) every value is a new graph, until the recompile limit"  # type: ignore[attr-defined]
            if dynamic_false
            else "it recompiles once, then the int turns dynamic (every value a new graph under `dynamic=False`)"
        )
        read_in = sorted({name for name, _ in reads})
        message = (
            f"`{cls.name}.{attr}` is an int of a plain object that the compiled code reads (in `{'`, `'.join(read_in)}`) and counts up "
            f"(`{ctx.source.segment(write).strip()}` in `{cls.name}.{method}`), reached from the compiled {start} (compiled on line {site.node.lineno}): "  # type: ignore[attr-defined]
            f"torch guards the value it read, and the next call sees another; {how}; keep it in a tensor updated in place "
            "(read without `.item()`), or run this path without compiling (no automatic fix)"
        )
        return self.finding(ctx, write, message, proven=True, feeds=counted.feeds)
