"""FR020 attr-presence-state: an attribute that the compiled code tests with
``hasattr(self, "a")`` and itself creates (``self.a = ...`` in a method it
runs), set nowhere else and never in ``__init__``: the first compiled call
finds it missing and guards that, the call creates it, and the next call
compiles again (vllm-ascend before cc9fa548: ``AscendMLATorchairImpl``,
held by the compiled model's attention layers, sets ``running_in_graph``
only in its ``forward``, and ``_v_up_proj_and_o_proj`` tests ``if
hasattr(self, "running_in_graph") and not self.running_in_graph``)."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Set, Tuple

from ..analysis.modules import class_chain, compiled_reach, init_assignments, self_attr, walk_body
from ..analysis.params import parameter_names
from ..analysis.presence import class_default, presence_call
from ..findings import Finding, Safety
from .base import Example, Rule


class PresenceState(Rule):
    code = "FR020"
    #: the trace's own cure (init-default-from-trace) writes the same default
    #: with the readers of every file of the run checked; this rule sees one
    #: file, so its fix stays unsafe and the trace's cure is the one `run` applies
    cures = ()
    name = "attr-presence-state"
    summary = "an attribute the compiled code tests with `hasattr` and creates itself"
    what_it_does = """
Finds an attribute of a class of the module (an `nn.Module` or a plain
object it holds) that code run compiled tests with `hasattr(self, "a")` and
also sets (`self.a = ...`) in a method it runs, while `__init__` and the
class body never set it and nothing else in the file does. The methods are
those a compiled module's `forward` reaches (its own, its submodules', and
those of objects its submodules hold: `self.mla_attn.impl.forward(...)`,
`impl` given to the submodule's `__init__`), or those of module-level
objects a compiled function calls. Methods under `@torch.compiler.disable`
run eagerly and count for nothing.
"""
    why_it_recompiles = """
Dynamo answers `hasattr` on the object as the call found it and guards that
answer (`not hasattr(impl, 'running_in_graph')`); the compiled call creates
the attribute, so the next call fails the guard and compiles the whole graph
again (one recompile: a large model's compile, a CUDA-graph capture, an
error under `error_on_recompile`). Measured on torch 2.13 (CPU, counting
backend): vllm-ascend's decode step before cc9fa548, 2 graphs; with the
attribute set in `__init__`, 1.
"""
    example = """
    class Impl:
        def __init__(self, scale):
            self.running_in_graph = True  # inserted (the reader below reads False either way)
            self.scale = scale

        def _project(self, x):
            if hasattr(self, "running_in_graph") and not self.running_in_graph:
                return x * 2.0
            return x * self.scale

        def forward(self, x, decode):
            self.running_in_graph = decode   # first set inside the compiled call
            return self._project(x)
"""
    fix_safety = """
Unsafe: the default is proven to read as the missing attribute read for
every use of the name in this file (`codemods/analysis/presence.py`:
`hasattr(X, 'a') and X.a` with False, `... and not X.a` with True, `... and
X.a is not None` with None, the `not hasattr(...) or` forms, `getattr(X, 'a',
C)` with C; plain reads raised), but a module this file does not show may
test it otherwise. `run --fix` writes the same default as a safe fix from
the trace, after checking every file of the run; where the proof fails the
finding says why and offers no fix.
"""
    reads = "ast"
    triggers = (b"hasattr",)
    valid = (
        # set in __init__: present from the start
        "import torch\nclass Impl:\n    def __init__(self):\n        self.flag = False\n"
        "    def use(self, x):\n        if hasattr(self, 'flag') and self.flag:\n            return x\n        self.flag = True\n        return x\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.impl = Impl()\n"
        "    def forward(self, x):\n        return self.impl.use(x)\nm = torch.compile(M())\n",
        # set up eagerly before compiling (the file writes it outside the compiled code)
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if hasattr(self, 'flag') and self.flag:\n            return x\n"
        "        self.flag = True\n        return x * 2\nm = M()\nm.flag = False\ncm = torch.compile(m)\n",
        # tested and set only by eager code
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n    def prepare(self):\n"
        "        if not hasattr(self, 'flag'):\n            self.flag = True\nm = M()\ncm = torch.compile(m)\n",
        # tested, never set by the compiled code
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if hasattr(self, 'scale'):\n            return x * self.scale\n        return x\ncm = torch.compile(M())\n",
    )
    invalid = (
        # vllm-ascend's form: a plain object held by a submodule, set in its compiled forward
        Example(
            "import torch\nclass Impl:\n    def __init__(self, scale):\n        self.scale = scale\n"
            "    def _project(self, x):\n        if hasattr(self, 'running_in_graph') and not self.running_in_graph:\n            return x * 2.0\n"
            "        return x * self.scale\n"
            "    def forward(self, x, decode):\n        self.running_in_graph = decode\n        return self._project(x)\n"
            "class Attention(torch.nn.Module):\n    def __init__(self, impl):\n        super().__init__()\n        self.impl = impl\n"
            "class Layer(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        impl = Impl(0.5)\n        self.attn = Attention(impl)\n"
            "    def forward(self, x):\n        return self.attn.impl.forward(x, True)\n"
            "model = torch.compile(Layer())\n",
            "import torch\nclass Impl:\n    def __init__(self, scale):\n        self.running_in_graph = True\n        self.scale = scale\n"
            "    def _project(self, x):\n        if hasattr(self, 'running_in_graph') and not self.running_in_graph:\n            return x * 2.0\n"
            "        return x * self.scale\n"
            "    def forward(self, x, decode):\n        self.running_in_graph = decode\n        return self._project(x)\n"
            "class Attention(torch.nn.Module):\n    def __init__(self, impl):\n        super().__init__()\n        self.impl = impl\n"
            "class Layer(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        impl = Impl(0.5)\n        self.attn = Attention(impl)\n"
            "    def forward(self, x):\n        return self.attn.impl.forward(x, True)\n"
            "model = torch.compile(Layer())\n",
            unsafe=True,
        ),
        # a lazy set-up in a compiled forward: reported, no default reads the same
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if not hasattr(self, 'table'):\n"
            "            self.table = torch.arange(4)\n        return x + self.table\ncm = torch.compile(M())\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        findings: List[Finding] = []
        seen: Set[Tuple[int, str]] = set()
        for site in model.compile_sites:
            reach = compiled_reach(model, site)
            if reach is None:
                continue
            for cls, attr, test, write in _created_while_tested(model, ctx.source, reach.reached):
                if (id(cls), attr) in seen:
                    continue
                seen.add((id(cls), attr))
                findings.append(self._finding(ctx, site, reach, cls, attr, test, write))
        return sorted(findings, key=lambda f: (f.line, f.column))

    def _finding(self, ctx, site, reach, cls: ast.ClassDef, attr: str, test: ast.Call, write: ast.AST) -> Finding:
        default = class_default(ctx.source, ctx.model, cls, attr)
        message = (
            f"`{cls.name}.{attr}` is tested with `hasattr` (line {test.lineno}) and first set by the compiled code itself "
            f"(line {write.lineno}), reached from the compiled `{reach.start}` (compiled on line {site.node.lineno}): "  # type: ignore[attr-defined]
            "the first compiled call guards that it is missing and creates it, so the next call compiles again"
        )
        if default.edit is None:
            message += f"; set it up before the first compiled call (no default in `__init__` proven: {default.why})"
            return self.finding(ctx, test, message, proven=True, feeds=reach.feeds)
        message += f"; `self.{attr} = {default.value}` first in `__init__` reads as the missing attribute for every reader in this file"
        return self.finding(
            ctx, test, message, edits=[default.edit], safety=Safety.UNSAFE, proven=True, feeds=reach.feeds,
            title=f"default `{attr}` in `{cls.name}.__init__`",
            unsafe_because=f"a module this file does not show may test `{attr}` otherwise (`run --fix` checks every file of the run)",
        )


def _created_while_tested(model, source, reached) -> List[Tuple[ast.ClassDef, str, ast.Call, ast.AST]]:
    """(class, attribute, the ``hasattr`` test, a write) for each attribute a
    reached method tests with ``hasattr(self, 'a')`` and a reached method of
    the same class sets, which ``__init__`` and the class body (its own or a
    base's of this module) never set and no other code of the file writes."""
    tests: Dict[Tuple[int, str], ast.Call] = {}
    writes: Dict[Tuple[int, str], ast.AST] = {}
    every_write: Set[int] = set()
    classes: Dict[int, ast.ClassDef] = {}
    for cls, _name, fn in reached:
        me = parameter_names(fn)[:1]
        if not me:
            continue
        classes[id(cls)] = cls
        for node in walk_body(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" and len(node.args) == 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and presence_call(node, arg.value) is not None:
                    if isinstance(node.args[0], ast.Name) and node.args[0].id == me[0]:
                        tests.setdefault((id(cls), arg.value), node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and self_attr(node) is not None:
                if isinstance(node.value, ast.Name) and node.value.id == me[0]:
                    writes.setdefault((id(cls), node.attr), node)
                    every_write.add(id(node))
    out: List[Tuple[ast.ClassDef, str, ast.Call, ast.AST]] = []
    for key, test in tests.items():
        write = writes.get(key)
        if write is None:
            continue
        cls, attr = classes[key[0]], key[1]
        if _set_up_front(model, cls, attr) or _written_elsewhere(source, attr, every_write):
            continue
        out.append((cls, attr, test, write))
    return sorted(out, key=lambda t: (t[2].lineno, t[2].col_offset))


def _set_up_front(model, cls: ast.ClassDef, attr: str) -> bool:
    """Does ``cls`` (or a base of this module) set ``attr`` in its body or its ``__init__``?"""
    for c in class_chain(model, cls):
        for stmt in c.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(isinstance(t, ast.Name) and t.id == attr for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
                return True
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
                return True
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__" and any(self_attr(t) == attr for t, _v in init_assignments(stmt)):
                return True
    return False


def _written_elsewhere(source, attr: str, mine: Set[int]) -> bool:
    """Does code of the file other than the reached methods' writes set
    ``attr`` on anything (``m.flag = False`` before compiling, ``setattr``)?"""
    for node in source.nodes(ast.Attribute):
        if node.attr == attr and isinstance(node.ctx, ast.Store) and id(node) not in mine:
            return True
    return any(
        isinstance(n.func, ast.Name) and n.func.id == "setattr" and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and n.args[1].value == attr
        for n in source.nodes(ast.Call)
    )
