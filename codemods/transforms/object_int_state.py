"""FR016 object-int-state: an int attribute of a plain object (not an
``nn.Module``) that the compiled code both reads and counts up (a KV
cache's ``pos``, a step counter): torch guards the value it read, the
compiled call changes it, so the next call recompiles (karpathy/nanochat
2bc521a: sampling through the ``dynamic=False`` compiled model, whose
``KVCache.pos`` grows by one each decode step: a graph per position)."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..analysis.compile_sites import def_first_lines
from ..analysis.modules import (
    compiled_class_method,
    compiled_function,
    instance_methods_reached,
    int_attributes,
    methods_reached,
    methods_reached_through_submodules,
    plain_methods_called,
    runs_eager,
    self_attr,
    walk_body,
)
from ..findings import Finding
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _reads_attr(expr: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and self_attr(n) == attr for n in ast.walk(expr))


def _counted(fn: ast.AST, attr: str) -> List[ast.stmt]:
    """The statements of ``fn`` that set ``self.<attr>`` from its own value:
    ``self.pos += n``, ``self.pos = self.pos + n``, or through a local
    assigned once from it (``t1 = self.pos + T``; ``self.pos = t1``)."""
    derived: Dict[str, int] = {}
    for node in walk_body(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _reads_attr(node.value, attr):
            derived[node.targets[0].id] = derived.get(node.targets[0].id, 0) + 1
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple) and len(node.targets) == 1:
            for t, v in zip(node.targets[0].elts, node.value.elts):  # `t0, t1 = self.pos, self.pos + T_add`
                if isinstance(t, ast.Name) and _reads_attr(v, attr):
                    derived[t.id] = derived.get(t.id, 0) + 1
    out: List[ast.stmt] = []
    for node in walk_body(fn):
        if isinstance(node, ast.AugAssign) and self_attr(node.target) == attr and isinstance(node.op, (ast.Add, ast.Sub)):
            out.append(node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and self_attr(node.targets[0]) == attr:
            value = node.value
            if _reads_attr(value, attr) or any(isinstance(n, ast.Name) and derived.get(n.id) == 1 for n in ast.walk(value)):
                out.append(node)
    return out


def _passes(call: ast.Call, name: str, index: Optional[int]) -> bool:
    """Does ``call`` pass a value other than None as ``name`` (by keyword, or
    at positional ``index``)?"""
    for kw in call.keywords:
        if kw.arg == name:
            return not (isinstance(kw.value, ast.Constant) and kw.value.value is None)
    return index is not None and len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1])


def _handed(model, site, entry: ast.AST, param: str) -> bool:
    """Is an object given to the compiled code as ``param``: a call of the
    compiled callable passes it (by keyword, or at the entry's position of a
    parameter of that name), or the compiled callable is handed on (``Engine(model,
    tokenizer)``) and some call of the module passes ``param=`` (nanochat's
    ``self.model.forward(ids, kv_cache=...)``)?  A parameter the compiled
    code may receive but is never given (the training calls ``model(x, y)``)
    is no evidence."""
    args = entry.args  # type: ignore[attr-defined]
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    if positional and positional[0] in ("self", "cls") and isinstance(model.source.parent(entry), ast.ClassDef):
        positional = positional[1:]
    index = positional.index(param) if param in positional else None
    if any(_passes(call, param, index) for call in site.calls):
        return True
    binding = site.binding
    if not binding or "." in binding:
        return False
    escapes = False
    for n in model.source.nodes(ast.Name):
        parent = model.source.parent(n)
        if n.id == binding and isinstance(parent, ast.Call) and parent.func is not n and parent is not site.node and parent is not site.options_call:  # type: ignore[attr-defined]
            escapes = True  # handed to a call other than its own compile
            break
    return escapes and any(_passes(call, param, None) for call in model.source.nodes(ast.Call))


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
            compiled = compiled_class_method(model, site)
            if compiled is not None:
                entry = [fn for _c, _n, fn in methods_reached_through_submodules(model, compiled[0], compiled[1])]
                start = f"`{compiled[0].name}.{compiled[1]}`"
                objects: List[Tuple[ast.ClassDef, str, ast.AST]] = []
            else:
                fn = compiled_function(model, site)
                if fn is None:
                    continue
                entry = [fn]
                start = f"`{fn.name}`"  # type: ignore[attr-defined]
                objects = list(instance_methods_reached(model, fn))
            entry = [fn for fn in entry if not runs_eager(model, fn)]
            for fn in entry:
                objects += [(c, n, f) for c, n, f, param in plain_methods_called(model, fn) if _handed(model, site, entry[0], param)]
            # the methods those objects run in turn (`self.helper()`)
            plain: List[Tuple[ast.ClassDef, str, ast.AST]] = []
            for cls, name, _fn in objects:
                for c, n, f in methods_reached(model, cls, name):
                    if not model.is_module_class(c) and not runs_eager(model, f) and not any(f is g for _a, _b, g in plain):
                        plain.append((c, n, f))
            for cls, attr, reads, writes in self._counters(model, plain):
                if (id(cls), attr) in seen:
                    continue
                seen.add((id(cls), attr))
                findings.append(self._finding(ctx, site, start, cls, attr, reads, writes, def_first_lines(entry[0]) if entry else ()))
        return sorted(findings, key=lambda f: (f.line, f.column))

    @staticmethod
    def _counters(model, plain) -> List[Tuple[ast.ClassDef, str, List[Tuple[str, ast.AST]], List[Tuple[str, ast.stmt]]]]:
        """(class, int attribute, reads (method, node), counting writes (method, statement)) of each
        int attribute the reached methods of one class both read and count up."""
        out = []
        by_class: Dict[int, List[Tuple[ast.ClassDef, str, ast.AST]]] = {}
        for cls, name, fn in plain:
            by_class.setdefault(id(cls), []).append((cls, name, fn))
        for methods in by_class.values():
            cls = methods[0][0]
            for attr in sorted(int_attributes(model, cls)):
                reads = [(name, n) for _c, name, fn in methods for n in walk_body(fn) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and self_attr(n) == attr]
                writes = [(name, s) for _c, name, fn in methods for s in _counted(fn, attr)]
                if reads and writes:
                    out.append((cls, attr, reads, writes))
        return out

    def _finding(self, ctx, site, start: str, cls: ast.ClassDef, attr: str, reads, writes, feeds: Tuple[int, ...]) -> Finding:
        method, write = writes[0]
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
        return self.finding(ctx, write, message, proven=True, feeds=feeds)
