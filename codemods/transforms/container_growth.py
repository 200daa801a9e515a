"""FR013 container-growth: a list (or deque) attribute that a compiled
module's forward, or a compiled bound method, appends to on every call.
torch guards the list's length, so every call recompiles until the limit
(pytorch/torchrec#3647: a metric's window buffer)."""

from __future__ import annotations

import ast
import functools
from typing import Dict, Iterable, List, Set, Tuple

from .._lazy import cst
from ..analysis.compile_sites import def_first_lines
from ..analysis.context import DEFAULT_RECOMPILE_LIMIT
from ..analysis.placement import torch_expr
from ..findings import Edit, Finding, Safety
from ..analysis.variation import literal_int
from ..trace.causes import CuresCause, LENGTH
from .base import Example, Rule
from ..analysis.modules import class_chain, compiled_class_method, init_assignments, methods_reached, runs_eager, self_attr, walk_body

#: methods that make a list or deque longer (also the trace's growth cure's)
GROW_METHODS = {"append", "extend", "insert", "appendleft", "extendleft"}
#: what makes it shorter or new again: a bound, or a reset between calls
_SHRINK = {"clear", "pop", "popleft", "remove"}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _grows_unbounded(model, value: ast.AST) -> bool:
    """Is ``value`` an empty list (``[]``, ``list()``) or a deque that can
    grow past the recompile limit (``deque()``, ``deque(maxlen=1000)``)?"""
    if isinstance(value, ast.List):
        return not value.elts
    if not isinstance(value, ast.Call):
        return False
    names = model.qualified_names(value.func)
    if "builtins.list" in names:
        return not value.args and not value.keywords
    if "collections.deque" in names:
        maxlen = next((kw.value for kw in value.keywords if kw.arg == "maxlen"), value.args[1] if len(value.args) > 1 else None)
        if maxlen is None or (isinstance(maxlen, ast.Constant) and maxlen.value is None):
            return True
        bound = literal_int(maxlen)
        return bound is not None and bound > DEFAULT_RECOMPILE_LIMIT  # a variable bound may be small
    return False


def _list_attrs(model, cls: ast.ClassDef) -> Set[str]:
    """Attributes of ``cls`` (and its bases here) every value given to which
    in ``__init__`` or the class body is a list or deque that can grow past
    the limit."""
    values: Dict[str, List[ast.AST]] = {}
    for c in class_chain(model, cls):
        for stmt in c.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                values.setdefault(stmt.targets[0].id, []).append(stmt.value)
            elif isinstance(stmt, _DEFS) and stmt.name == "__init__":
                for target, value in init_assignments(stmt):
                    name = self_attr(target)
                    if name is not None:
                        values.setdefault(name, []).append(value)
    return {name for name, found in values.items() if all(_grows_unbounded(model, v) for v in found)}


def _changes_elsewhere(source, attr: str, inits: Set[ast.AST]) -> bool:
    """Does the module make ``<anything>.attr`` shorter or new anywhere but
    an ``__init__`` (``m.hist.clear()``, ``self.hist = []``, ``del
    m.hist[:]``)?  A reset between calls (by the training loop, a ``reset()``
    method) may keep the length to a few values."""
    for node in source.nodes(ast.Attribute):
        if node.attr != attr:  # type: ignore[attr-defined]
            continue
        if isinstance(node.ctx, (ast.Store, ast.Del)):  # type: ignore[attr-defined]
            parent = source.parent(node)
            if isinstance(parent, ast.AugAssign) and isinstance(parent.op, ast.Add):
                continue  # `self.hist += [...]`: growth, not a reset
            if source.enclosing(node, _DEFS) not in inits:
                return True
            continue
        parent = source.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr in _SHRINK:
            return True
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Del):
            return True
    return False


# -- the cure: the method that grows the list runs eagerly ----------------------------
#
# torchrec's own fix (#3647, eb2d656b): `@torch.compiler.disable` on the method
# that appends, so the list stays out of the graph and the rest of the compiled
# call compiles once.  Shared by this rule and the trace's
# disable-growth-from-trace (codemods/trace/growth_disable.py).


def disable_refused(source, model, fn: ast.AST) -> str:
    """Why ``fn`` cannot take the decorator ("" when it can): it runs eagerly
    already, or it is defined inside another function (a decorator there is
    made anew at every call)."""
    if runs_eager(model, fn):
        return f"`{fn.name}` is already under `torch.compiler.disable`"  # type: ignore[attr-defined]
    if source.enclosing(fn, _DEFS) is not None:
        return f"`{fn.name}` is defined inside another function (a decorator there is made anew at every call)"  # type: ignore[attr-defined]
    return ""


def disable_edit(source, model, fn: ast.AST) -> Edit:
    """``@torch.compiler.disable`` above the other decorators of ``fn``."""
    return Edit(source.target(fn, "FunctionDef"), functools.partial(_add_disable, model))


def _add_disable(model, node: "cst.FunctionDef") -> "cst.FunctionDef":
    decorators = [cst.Decorator(decorator=torch_expr(model, "compiler", "disable"))] + list(node.decorators)
    return node.with_changes(decorators=decorators)


class ContainerGrowth(Rule):
    code = "FR013"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(LENGTH, loop_iterator=False, upgrade=True, trace_cure="disable-growth-from-trace"),)
    name = "container-growth"
    summary = "a list attribute the compiled code appends to on every call"
    what_it_does = """
Finds a list or deque attribute of an `nn.Module` class of the module
(`self.hist = []`, `deque()`, `deque(maxlen=N)` with N above the recompile
limit, in `__init__` or the class body) that the compiled code of an
instance grows on every call: `self.hist.append(...)`, `.extend`, `.insert`,
`.appendleft` or `self.hist += [...]` in the `forward` of a compiled
instance (`torch.compile(model)`, `model.compile()`), in a compiled bound
method (`torch.compile(metric.update)`), or in a method either reaches
(`self.method()`, `self.sub.method()` of a submodule class of the module).
Not reported when the module makes the attribute shorter or new anywhere
but `__init__` (`.clear()`, `.pop()`, `self.hist = []`, `del m.hist[:]`):
a reset between calls may keep its length to a few values; nor for a method
under `@torch.compiler.disable` (it runs eagerly).

Where a method the compiled code reaches grows it (not the compiled method
itself), puts `@torch.compiler.disable` on that method (torchrec's fix);
otherwise report only, with the cure.
"""
    why_it_recompiles = """
dynamo traces the list as a Python object and guards its length
(`len(self.hist) == 7`): an append in the compiled code makes the next call
fail that guard, so every call compiles a new graph, and after the
recompile limit (8 by default) the module silently runs eager. Measured on
torch 2.13 (CPU): `self.hist.append(y.sum())` in a compiled forward, 12
calls: 8 graphs and the limit (pytorch/torchrec#3647: a metric's window
buffer, a deque of maxlen 1000, grown inside a compiled `update`).
"""
    example = """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.hist = []

        def forward(self, x):
            y = self.lin(x)
            self.hist.append(y.detach().sum())   # len(self.hist) is guarded
            return y

    m = torch.compile(M())                       # 8 graphs, then eager

Cure (by hand): return the value and append it in the caller, outside the
compiled code; or move the append into a method decorated with
`@torch.compiler.disable` (a graph break, torchrec's fix); or write into a
preallocated tensor buffer in place.
"""
    fix_safety = """
Unsafe: the method then runs eagerly from the first call, while the rest of
the compiled call runs eagerly only after the limit: a run that stays below
it may be slower. A trace that shows the length recompiling makes it safe
(`run --fix`, which keeps it only with fewer graphs and the same output).
No fix where the compiled method itself grows the list: where it is kept
then (the caller, a tensor buffer) is a design choice.
"""
    reads = "ast"
    triggers = (b"append", b"extend", b"insert", b"+=")
    valid = (
        # the training loop clears it between calls: its length stays small
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.hist = []\n"
        "    def forward(self, x):\n        self.hist.append(x.sum())\n        return x\n"
        "m = torch.compile(M())\nfor i in range(12):\n    m(torch.ones(2))\n    m.hist.clear()\n",
        # a deque bounded below the recompile limit
        "import collections\nimport torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.hist = collections.deque(maxlen=4)\n    def forward(self, x):\n        self.hist.append(x.sum())\n        return x\n"
        "m = torch.compile(M())\n",
        # the module is not compiled
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.hist = []\n"
        "    def forward(self, x):\n        self.hist.append(x.sum())\n        return x\nm = M()\n",
        # grown in a method that runs eagerly (torchrec's fix)
        "import collections\nimport torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.window = collections.deque(maxlen=1000)\n    def forward(self, x):\n        self._record(x)\n        return x\n"
        "    @torch.compiler.disable\n    def _record(self, x):\n        self.window.append(x.sum())\nm = M()\nm.compile()\n",
        # a list built anew in forward: the same length every call
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        out = []\n        out.append(x.sum())\n        return out\n"
        "m = torch.compile(M())\n",
    )
    invalid = (
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.hist = []\n"
            "    def forward(self, x):\n        self.hist.append(x.sum())\n        return x\nm = torch.compile(M())\n"
        ),
        # a deque grown by a method forward reaches, model.compile(): that method runs eagerly (unsafe)
        Example(
            "import collections\nimport torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.window = collections.deque(maxlen=1000)\n    def forward(self, x):\n        self._record(x)\n        return x\n"
            "    def _record(self, x):\n        self.window.append(x.sum())\nm = M()\nm.compile()\n",
            "import collections\nimport torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.window = collections.deque(maxlen=1000)\n    def forward(self, x):\n        self._record(x)\n        return x\n"
            "    @torch.compiler.disable\n    def _record(self, x):\n        self.window.append(x.sum())\nm = M()\nm.compile()\n",
            unsafe=True,
        ),
        # a compiled bound method (torchrec's metric update)
        Example(
            "import torch\nclass Metric(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.values = []\n"
            "    def update(self, x):\n        self.values += [x.mean()]\nmetric = Metric()\nstep = torch.compile(metric.update)\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        findings: List[Finding] = []
        seen: Set[Tuple[int, str]] = set()
        #: the methods given the decorator (by id), with the line of that fix
        decorated: Dict[int, int] = {}
        for site in model.compile_sites:
            compiled = compiled_class_method(model, site)
            if compiled is None:
                continue
            cls, start = compiled
            reached = methods_reached(model, cls, start)
            # the code object a trace shows is the compiled method's: match the finding by its lines
            feeds = def_first_lines(reached[0][2]) if reached else ()
            for owner, method, fn in reached:
                if runs_eager(model, fn):
                    continue  # `@torch.compiler.disable`: what it grows stays out of the graph
                lists = _list_attrs(model, owner)
                if not lists:
                    continue
                inits = {stmt for c in class_chain(model, owner) for stmt in c.body if isinstance(stmt, _DEFS) and stmt.name == "__init__"}
                for node, attr in self._growth(fn, lists):
                    if (id(owner), attr) in seen or _changes_elsewhere(source, attr, inits):
                        continue
                    seen.add((id(owner), attr))
                    itself = method == start and owner is cls
                    where = f"the compiled `{start}` of `{cls.name}`" if itself else f"`{owner.name}.{method}`, which the compiled `{start}` of `{cls.name}` reaches"
                    message = (
                        f"`self.{attr}` grows on every call in {where} (compiled on line {site.node.lineno}): torch guards "  # type: ignore[attr-defined]
                        f"its length (`len(self.{attr}) == n`), so every call recompiles, and after the recompile limit "
                        f"({DEFAULT_RECOMPILE_LIMIT} graphs) the module runs eager. "
                    )
                    # the method that grows it, when it is not the compiled one itself, can run eagerly (torchrec's fix)
                    takes = not itself and not disable_refused(source, model, fn)
                    if not takes:
                        message += (
                            "Keep the list outside the compiled code (return the value and append it in the caller), or grow it "
                            "in a method decorated with `@torch.compiler.disable` (a graph break), or write into a preallocated tensor buffer"
                        )
                        findings.append(self.finding(ctx, node, message, feeds=feeds))
                        continue
                    if id(fn) in decorated:
                        message += f"`@torch.compiler.disable` on `{owner.name}.{method}` (the fix of line {decorated[id(fn)]}) cures it too"
                        findings.append(self.finding(ctx, node, message, feeds=feeds))
                        continue
                    decorated[id(fn)] = node.lineno  # type: ignore[attr-defined]
                    because = (
                        f"; unsafe: `{method}` then runs eagerly from the first call, the rest of the compiled call only after the "
                        "limit (a run that stays below it may be slower)"
                    )
                    message += f"Run `{owner.name}.{method}` eagerly, `@torch.compiler.disable` (a graph break: the list stays out of the graph){because}"
                    findings.append(
                        self.finding(
                            ctx, node, message, feeds=feeds, edits=[disable_edit(source, model, fn)], safety=Safety.UNSAFE,
                            needs_torch=True, title=f"`@torch.compiler.disable` on `{owner.name}.{method}`", unsafe_because=because,
                        )
                    )
        return findings

    @staticmethod
    def _growth(fn: ast.AST, lists: Set[str]) -> List[Tuple[ast.AST, str]]:
        """(node, attribute) of each growth of a list attribute in ``fn``'s
        body, in source order; none for an attribute ``fn`` also shrinks or
        rebinds (``self.hist = []`` first: the same length every call)."""
        grown: List[Tuple[ast.AST, str]] = []
        reset: Set[str] = set()
        for node in walk_body(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = self_attr(node.func.value)
                if attr in lists:
                    if node.func.attr in GROW_METHODS:
                        grown.append((node, attr))
                    elif node.func.attr in _SHRINK:
                        reset.add(attr)  # type: ignore[arg-type]
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                attr = self_attr(node.target)
                if attr in lists:
                    grown.append((node, attr))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    # `self.hist = []` rebinds, `del self.hist[:]` shrinks; `self.hist[i] = v` keeps the length
                    base = target.value if isinstance(target, ast.Subscript) and isinstance(node, ast.Delete) else target
                    attr = self_attr(base)
                    if attr in lists:
                        reset.add(attr)  # type: ignore[arg-type]
        return sorted(((n, a) for n, a in grown if a not in reset), key=lambda p: (p[0].lineno, p[0].col_offset))  # type: ignore[attr-defined]
