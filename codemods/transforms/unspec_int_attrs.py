"""FR005 unspec-int-attrs: a compiled nn.Module whose ``forward`` changes an int
attribute gets ``torch._dynamo.config.allow_unspec_int_on_nn_module = True``.

The statement-insertion helpers at the top of this module are shared with
FR006 (:mod:`.recompile_limit`), which also inserts a config assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.metadata import Assignment

from ..analysis import CompileSite, ModuleAnalysis, dotted_name
from ..findings import Edit, Finding, Safety
from ._cst import insert_before_node
from .base import Example, Rule

FLAG = "allow_unspec_int_on_nn_module"
#: first release that has the flag (AttributeError when set before)
FLAG_SINCE = (2, 7)


# -- statement insertion, shared with FR006 -------------------------------------
def block_of(analysis: ModuleAnalysis, stmt: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The block (IndentedBlock or Module) whose body lists ``stmt``, else None
    (e.g. an ``elif``, which cannot take a statement before it)."""
    parent = analysis.parent(stmt)
    if isinstance(parent, (cst.IndentedBlock, cst.Module)) and any(s is stmt for s in parent.body):
        return parent
    return None


def function_of(analysis: ModuleAnalysis, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The function (or lambda) whose body runs ``node``; None at module level
    (a class body runs in line with its enclosing scope)."""
    return analysis.enclosing(node, (cst.FunctionDef, cst.Lambda))


def start_of(analysis: ModuleAnalysis, node: cst.CSTNode) -> Tuple[int, int]:
    pos = analysis.position(node).start
    return (pos.line, pos.column)


def dominates(analysis: ModuleAnalysis, earlier: cst.CSTNode, later: cst.CSTNode) -> bool:
    """Does statement ``earlier`` always run before statement ``later`` runs?

    True when both run in the same function, ``earlier`` comes first, and the
    block of ``earlier`` is the block of ``later`` or one of its ancestors.
    """
    if function_of(analysis, earlier) is not function_of(analysis, later):
        return False
    if start_of(analysis, earlier) >= start_of(analysis, later):
        return False
    block = block_of(analysis, earlier)
    if block is None:
        return False
    return block is analysis.parent(later) or any(a is block for a in analysis.ancestors(later))


def insert_before(stmt: cst.BaseStatement, new_stmt: cst.BaseStatement) -> Edit:
    """An edit inserting ``new_stmt`` before ``stmt`` (which stays last)."""
    return insert_before_node(stmt, new_stmt)


def builtin_shadowed(analysis: ModuleAnalysis, node: cst.CSTNode, name: str) -> bool:
    """Is the builtin ``name`` rebound in a scope visible from ``node``?"""
    scope = analysis.scope(node)
    while scope is not None:
        if any(isinstance(a, Assignment) for a in scope.assignments[name]):
            return True
        parent = getattr(scope, "parent", None)
        scope = None if parent is scope else parent
    return False


def config_mentions(module: cst.Module, names: Sequence[str]) -> List[cst.CSTNode]:
    """Nodes that set one of the config ``names``: an assignment to ``….name``,
    a keyword ``name=`` (``config.patch(name=…)``, ``torch.compile(name=…)``),
    or the string ``"name"`` passed to a call (``setattr``, ``config.patch("name", …)``)."""
    wanted = set(names)
    found: List[cst.CSTNode] = []

    def target_hits(target: cst.BaseExpression) -> bool:
        if isinstance(target, cst.Attribute):
            return target.attr.value in wanted
        if isinstance(target, (cst.Tuple, cst.List)):
            return any(target_hits(e.value) for e in target.elements)
        return False

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(target_hits(t.target) for t in node.targets):
                found.append(node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if target_hits(node.target):
                found.append(node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None and target_hits(node.target):
                found.append(node)

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None and node.keyword.value in wanted:
                found.append(node)
            elif isinstance(node.value, cst.SimpleString) and node.value.evaluated_value in wanted:
                found.append(node)

    module.visit(V())
    return found


def torch_at_least(settings, version: Tuple[int, int]) -> bool:
    return settings.target_torch is not None and tuple(settings.target_torch) >= version


# -- int attributes changed in forward --------------------------------------------
_INT_OPS = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.FloorDivideAssign, cst.ModuloAssign)


def _is_int_literal(node: Optional[cst.BaseExpression]) -> bool:
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _is_int_literal(node.expression)
    if isinstance(node, cst.Call) and dotted_name(node.func) == "int":
        return True
    return False


def _self_attr(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _has_float_or_div(node: cst.CSTNode) -> bool:
    hit = []

    class V(cst.CSTVisitor):
        def visit_Float(self, n: cst.Float) -> None:
            hit.append(n)

        def visit_Divide(self, n: cst.Divide) -> None:
            hit.append(n)

    node.visit(V())
    return bool(hit)


def _mentions_self_attr(node: cst.CSTNode, attr: str) -> bool:
    hit = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            if _self_attr(n) == attr:
                hit.append(n)

    node.visit(V())
    return bool(hit)


def _body(cls: cst.ClassDef) -> Sequence[cst.BaseStatement]:
    return cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()


@dataclass
class IntMutation:
    attr: str
    #: the statement node that changes it (AugAssign / Assign)
    node: cst.CSTNode
    method: str
    cls_name: str = ""


@dataclass
class _ClassFacts:
    int_attrs: Set[str] = field(default_factory=set)
    non_int_attrs: Set[str] = field(default_factory=set)
    methods: Dict[str, cst.FunctionDef] = field(default_factory=dict)


def _class_chain(analysis: ModuleAnalysis, cls: cst.ClassDef) -> List[cst.ClassDef]:
    """``cls`` and its base classes defined in this module, nearest first."""
    chain: List[cst.ClassDef] = []
    todo = [cls]
    while todo:
        cur = todo.pop(0)
        if any(c is cur for c in chain):
            continue
        chain.append(cur)
        for base in cur.bases:
            name = dotted_name(base.value)
            if name in analysis.classes:
                todo.append(analysis.classes[name])
    return chain


def _facts(analysis: ModuleAnalysis, cls: cst.ClassDef) -> _ClassFacts:
    facts = _ClassFacts()
    # attributes are recorded from the farthest base first so nearer classes win
    for c in reversed(_class_chain(analysis, cls)):
        for stmt in _body(c):
            if isinstance(stmt, cst.FunctionDef):
                facts.methods[stmt.name.value] = stmt
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                        _record(facts, small.targets[0].target.value, small.value)
                    elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                        _record(facts, small.target.value, small.value)
        init = next((s for s in _body(c) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None:
            continue

        class V(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for t in node.targets:
                    name = _self_attr(t.target)
                    if name is not None:
                        _record(facts, name, node.value)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                name = _self_attr(node.target)
                if name is not None and node.value is not None:
                    _record(facts, name, node.value)

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is init  # not into nested functions

        init.visit(V())
    return facts


def _record(facts: _ClassFacts, name: str, value: cst.BaseExpression) -> None:
    if _is_int_literal(value) and name not in facts.non_int_attrs:
        facts.int_attrs.add(name)
    else:
        # any non-int initial value (float, tensor, unknown) rules the attribute out
        facts.int_attrs.discard(name)
        facts.non_int_attrs.add(name)


def int_mutations_in_forward(analysis: ModuleAnalysis, cls: cst.ClassDef) -> List[IntMutation]:
    """Int attributes (initialised to an int literal) that ``forward``, or a
    ``self.method()`` it calls, changes: ``self.n += 1``, ``self.n = self.n + 1``."""
    facts = _facts(analysis, cls)
    if not facts.int_attrs or "forward" not in facts.methods:
        return []
    order: List[str] = ["forward"]
    i = 0
    while i < len(order):
        fn = facts.methods[order[i]]
        i += 1
        for name in _self_calls(fn):
            if name in facts.methods and name not in order:
                order.append(name)
    found: List[IntMutation] = []
    for name in order:
        fn = facts.methods[name]

        class V(cst.CSTVisitor):
            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                attr = _self_attr(node.target)
                if attr in facts.int_attrs and isinstance(node.operator, _INT_OPS) and not _has_float_or_div(node.value):
                    found.append(IntMutation(attr, node, name))

            def visit_Assign(self, node: cst.Assign) -> None:
                for t in node.targets:
                    attr = _self_attr(t.target)
                    if (
                        attr in facts.int_attrs
                        and _mentions_self_attr(node.value, attr)
                        and not _has_float_or_div(node.value)
                    ):
                        found.append(IntMutation(attr, node, name))

        fn.body.visit(V())
    return found


def _self_calls(fn: cst.FunctionDef) -> List[str]:
    names: List[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            attr = _self_attr(node.func) if isinstance(node.func, cst.Attribute) else None
            if attr is not None and attr not in names:
                names.append(attr)

    fn.body.visit(V())
    return names


def _unwrap_module_call(expr: Optional[cst.CSTNode]) -> Optional[cst.CSTNode]:
    """``Model().to(device).eval()`` → ``Model()``."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and isinstance(expr.func.value, cst.Call):
        expr = expr.func.value
    return expr


def compiled_module_class(analysis: ModuleAnalysis, site: CompileSite) -> Optional[cst.ClassDef]:
    """The nn.Module subclass of this module an instance of which ``site`` compiles."""
    if site.form not in ("wrap", "method") or site.target is None:
        return None
    return analysis.module_class_of(_unwrap_module_call(site.target))


# -- the rule ---------------------------------------------------------------------
class UnspecIntAttrs(Rule):
    code = "FR005"
    name = "unspec-int-attrs"
    summary = "compiled nn.Module whose `forward` changes an int attribute"
    what_it_does = """
Finds an `nn.Module` subclass whose `forward` (or a `self.method()` it calls)
changes an attribute initialised to an int (`self.calls += 1`,
`self.step = self.step + 1`), when an instance of it is compiled in the same
module (`torch.compile(Model())`, `m = Model(); torch.compile(m)`,
`m.compile()`, `self.model = Model(); self.model.compile()`). It inserts,
once before the first such compile (in the same block, so the flag is set
before compiling):

    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True

The `hasattr` guard keeps the code running on releases before 2.7, which lack
the flag; with `target_torch >= 2.7` the plain assignment is written. Nothing
is reported when the module already sets the flag (assignment, `setattr`,
`config.patch(allow_unspec_int_on_nn_module=...)`). Attributes initialised to
floats, tensors or unknown values are not counted as ints.
"""
    why_it_recompiles = """
torch 2.8+ specialises int attributes of nn.Modules: the value is a constant
of the graph and a guard. A counter that changes on every call fails that
guard every call: a new graph each time, and after the recompile limit (8)
the module runs eager. `allow_unspec_int_on_nn_module` makes such ints
dynamic like int arguments: one recompile, then one graph serves every value
(measured on 2.13: 12 calls, 8 graphs then eager → 2 graphs, same outputs).
"""
    example = """
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    model = torch.compile(Counter())     # 8 graphs, then eager

Becomes:

    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    model = torch.compile(Counter())     # 2 graphs
"""
    fix_safety = """
Safe: the flag only stops torch from specialising the int; values are
unchanged (torch 2.4-2.7 behaved this way by default), and the guard makes
the line a no-op on releases without the flag. The flag is process-wide, as
all dynamo config is.
"""
    valid = (
        # float attribute
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.t = 0.0\n"
        "    def forward(self, x):\n        self.t += 1\n        return x * self.t\nm = torch.compile(M())\n",
        # never compiled
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = M()\n",
        # flag already set
        "import torch\ntorch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M())\n",
        # Module.compile() on a fresh instance returns None: nothing compiled can run
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nM().compile()\n",
    )
    invalid = (
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\nm = torch.compile(M())\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "    torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "m = torch.compile(M())\n",
        ),
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n = self.n + 1\n        return x * self.n\n"
            "def main():\n    m = M()\n    m.compile()\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n = self.n + 1\n        return x * self.n\n"
            "def main():\n    m = M()\n"
            '    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "        torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "    m.compile()\n",
        ),
        # an instance held by another class: `self.model = M()` then `self.model.compile()`
        Example(
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            "class Trainer:\n    def __init__(self):\n        self.model = M()\n        self.model.compile()\n",
            "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
            "    def forward(self, x):\n        self.n += 1\n        return x * self.n\n"
            "class Trainer:\n    def __init__(self):\n        self.model = M()\n"
            '        if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):\n'
            "            torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
            "        self.model.compile()\n",
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        analysis = ctx.analysis
        if not analysis.compile_sites:  # early exit before walking the module
            return []
        # (site, class, first mutation), in source order of the compile
        candidates = []
        for site in analysis.compile_sites:
            cls = compiled_module_class(analysis, site)
            if cls is None:
                continue
            mutations = int_mutations_in_forward(analysis, cls)
            if mutations and site.statement is not None:
                candidates.append((site, cls, mutations[0]))
        if not candidates or config_mentions(ctx.module, [FLAG]):  # the module walk last: costly
            return []
        candidates.sort(key=lambda c: start_of(analysis, c[0].statement))
        findings: List[Finding] = []
        chosen: List[cst.CSTNode] = []
        for site, cls, mutation in candidates:
            stmt = site.statement
            if any(s is stmt or dominates(analysis, s, stmt) for s in chosen):
                continue  # the flag is already set before this compile runs
            line = analysis.position(mutation.node).start.line
            message = (
                f"`{cls.name.value}.{mutation.method}` changes int attribute `self.{mutation.attr}` (line {line}): "
                "torch specialises int attributes of compiled modules, so every new value recompiles"
            )
            if block_of(analysis, stmt) is None or (
                not torch_at_least(ctx.settings, FLAG_SINCE) and builtin_shadowed(analysis, stmt, "hasattr")
            ):
                findings.append(self.finding(ctx, site.node, message + " (no automatic fix here)"))
                continue
            chosen.append(stmt)
            findings.append(
                self.finding(
                    ctx,
                    site.node,
                    message + f"; set `{FLAG} = True` before compiling",
                    edits=[insert_before(stmt, self._flag_statement(ctx))],
                    safety=Safety.SAFE,
                    needs_torch=True,
                    title=f"set `torch._dynamo.config.{FLAG} = True` before the compile",
                )
            )
        return findings

    @staticmethod
    def _flag_statement(ctx) -> cst.BaseStatement:
        analysis = ctx.analysis
        assign = cst.SimpleStatementLine(
            body=[
                cst.Assign(
                    targets=[cst.AssignTarget(analysis.torch_expr("_dynamo", "config", FLAG))],
                    value=cst.Name("True"),
                )
            ]
        )
        if torch_at_least(ctx.settings, FLAG_SINCE):
            return assign
        test = cst.Call(
            func=cst.Name("hasattr"),
            args=[
                cst.Arg(analysis.torch_expr("_dynamo", "config")),
                cst.Arg(cst.SimpleString(f'"{FLAG}"')),
            ],
        )
        return cst.If(test=test, body=cst.IndentedBlock(body=[assign]))
