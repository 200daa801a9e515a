"""FR005 unspec-int-attrs: a compiled nn.Module whose ``forward`` changes an int
attribute gets ``torch._dynamo.config.allow_unspec_int_on_nn_module = True``.

The rule reads the stdlib ``ast`` (``ctx.source``, ``ctx.model``) and places
its statement with :mod:`codemods.placement`; only the inserted statement is
built with libcst.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

import libcst as cst

from .. import placement
from ..compile_sites import CompileModel
from ..compile_sites import CompileSite as AstCompileSite
from ..compile_sites import dotted_name as ast_dotted_name
from ..findings import Finding, Safety
from ..source import _COMPOUND, Source
from .base import Example, Rule

FLAG = "allow_unspec_int_on_nn_module"
#: first release that has the flag (AttributeError when set before)
FLAG_SINCE = (2, 7)


# -- int attributes changed in forward -------------------------------------------
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _is_int_literal(node: Optional[ast.AST]) -> bool:
    """``3``, ``-1``, ``+2``, ``int(...)`` (``True`` is not an int literal)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_int_literal(node.operand)
    if isinstance(node, ast.Call) and ast_dotted_name(node.func) == "int":
        return True
    return False


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _has_float_or_div(node: ast.AST) -> bool:
    """A float literal or a true division ``/`` anywhere in ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and type(sub.value) is float:
            return True
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div):
            return True
    return False


def _mentions_self_attr(node: ast.AST, attr: str) -> bool:
    return any(_self_attr(sub) == attr for sub in ast.walk(node))


def _walk_body(fn: ast.AST) -> Iterator[ast.AST]:
    """Every node of the statements of ``fn``'s body (nested defs included;
    not its decorators, parameters or annotations)."""
    for stmt in fn.body:  # type: ignore[attr-defined]
        yield from ast.walk(stmt)


def _in_order(nodes: List[ast.AST]) -> List[ast.AST]:
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


@dataclass
class IntMutation:
    attr: str
    #: the statement node that changes it (AugAssign / Assign)
    node: ast.stmt
    method: str
    cls_name: str = ""


@dataclass
class _ClassFacts:
    int_attrs: Set[str] = field(default_factory=set)
    non_int_attrs: Set[str] = field(default_factory=set)
    methods: Dict[str, ast.AST] = field(default_factory=dict)


def _class_chain(model: CompileModel, cls: ast.ClassDef) -> List[ast.ClassDef]:
    """``cls`` and its base classes defined in this module, nearest first."""
    chain: List[ast.ClassDef] = []
    todo = [cls]
    while todo:
        cur = todo.pop(0)
        if any(c is cur for c in chain):
            continue
        chain.append(cur)
        for base in cur.bases:
            name = ast_dotted_name(base)
            if name in model.classes:
                todo.append(model.classes[name])  # type: ignore[index]
    return chain


def _init_assignments(init: ast.AST) -> Iterator[Tuple[ast.AST, ast.AST]]:
    """(target, value) of the ``=`` and annotated ``=`` statements of
    ``__init__``, not those of functions nested in it."""
    stack: List[ast.AST] = list(init.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield target, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield node.target, node.value
        stack.extend(ast.iter_child_nodes(node))


def _facts(model: CompileModel, cls: ast.ClassDef) -> _ClassFacts:
    facts = _ClassFacts()
    # attributes are recorded from the farthest base first so nearer classes win
    for c in reversed(_class_chain(model, cls)):
        init = None
        for stmt in c.body:
            if isinstance(stmt, _DEFS):
                facts.methods[stmt.name] = stmt
                if init is None and stmt.name == "__init__":
                    init = stmt
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                _record(facts, stmt.targets[0].id, stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                _record(facts, stmt.target.id, stmt.value)
        if init is None:
            continue
        for target, value in _init_assignments(init):
            name = _self_attr(target)
            if name is not None:
                _record(facts, name, value)
    return facts


def _record(facts: _ClassFacts, name: str, value: ast.AST) -> None:
    # the outcome does not depend on the order values are recorded in: an
    # attribute is an int when every value recorded for it is an int literal
    if _is_int_literal(value) and name not in facts.non_int_attrs:
        facts.int_attrs.add(name)
    else:
        # any non-int initial value (float, tensor, unknown) rules the attribute out
        facts.int_attrs.discard(name)
        facts.non_int_attrs.add(name)


#: how many submodule hops (``self.kv_cache.update()`` → ``KVCache.update``) are followed
_MAX_HOPS = 3


def int_mutations_in_forward(model: CompileModel, cls: ast.ClassDef) -> List[IntMutation]:
    """Int attributes (initialised to an int literal) that ``forward``, or a
    method it calls, changes: ``self.n += 1``, ``self.n = self.n + 1``.  The
    methods followed are ``self.method()`` and ``self.sub.method()`` where
    ``self.sub`` is an instance of a class of this module (``self.kv_cache =
    KVCache(...)``; up to three such hops): what a submodule's method changes
    is an int attribute of a module the compiled forward reaches, and guarded
    the same way.  Methods in the order they are reached, mutations in source
    order."""
    facts_of: Dict[int, _ClassFacts] = {}

    def facts(c: ast.ClassDef) -> _ClassFacts:
        if id(c) not in facts_of:
            facts_of[id(c)] = _facts(model, c)
        return facts_of[id(c)]

    if "forward" not in facts(cls).methods:
        return []
    # (class, method name, hops)
    order: List[Tuple[ast.ClassDef, str, int]] = [(cls, "forward", 0)]
    seen = {(id(cls), "forward")}
    i = 0
    while i < len(order):
        owner, method, hops = order[i]
        i += 1
        for sub, name in _method_calls(facts(owner).methods[method]):
            target, next_hops = owner, hops
            if sub is not None:
                if hops >= _MAX_HOPS:
                    continue
                target = _submodule_class(model, owner, sub)
                next_hops = hops + 1
                if target is None:
                    continue
            if name in facts(target).methods and (id(target), name) not in seen:
                seen.add((id(target), name))
                order.append((target, name, next_hops))
    found: List[IntMutation] = []
    for owner, name, _ in order:
        owner_facts = facts(owner)
        if not owner_facts.int_attrs:
            continue
        fn = owner_facts.methods[name]
        statements = _in_order([n for n in _walk_body(fn) if isinstance(n, (ast.AugAssign, ast.Assign))])
        for node in statements:
            if isinstance(node, ast.AugAssign):
                attr = _self_attr(node.target)
                if attr in owner_facts.int_attrs and isinstance(node.op, _INT_OPS) and not _has_float_or_div(node.value):
                    found.append(IntMutation(attr, node, name, owner.name))  # type: ignore[arg-type]
            else:
                for target in node.targets:  # type: ignore[attr-defined]
                    attr = _self_attr(target)
                    if (
                        attr in owner_facts.int_attrs
                        and _mentions_self_attr(node.value, attr)  # type: ignore[attr-defined,arg-type]
                        and not _has_float_or_div(node.value)  # type: ignore[attr-defined]
                    ):
                        found.append(IntMutation(attr, node, name, owner.name))  # type: ignore[arg-type]
    return found


def _method_calls(fn: ast.AST) -> List[Tuple[Optional[str], str]]:
    """``self.<name>(...)`` → (None, name) and ``self.<sub>.<name>(...)`` →
    (sub, name) calls in ``fn``'s body, in source order."""
    calls: List[Tuple[Optional[str], str]] = []
    for call in _in_order([n for n in _walk_body(fn) if isinstance(n, ast.Call)]):
        func = call.func  # type: ignore[attr-defined]
        if not isinstance(func, ast.Attribute):
            continue
        key: Optional[Tuple[Optional[str], str]] = None
        if _self_attr(func) is not None:
            key = (None, func.attr)
        elif _self_attr(func.value) is not None:
            key = (_self_attr(func.value), func.attr)
        if key is not None and key not in calls:
            calls.append(key)
    return calls


def _submodule_class(model: CompileModel, owner: ast.ClassDef, attr: str) -> Optional[ast.ClassDef]:
    """The class of this module that ``self.<attr>`` of ``owner`` holds an
    instance of, when every instance assigned to it is of that one class."""
    found: Optional[ast.ClassDef] = None
    for c in _class_chain(model, owner):
        for value in model.self_attr_values(c, attr):
            value = _unwrap_module_call(value)  # type: ignore[assignment]
            if isinstance(value, ast.Constant) and value.value is None:
                continue  # `self.kv_cache = None` until caches are set up
            cls = model.module_class_of(value) if isinstance(value, ast.Call) else None
            if cls is None or (found is not None and cls is not found):
                return None
            found = cls
    return found


def _unwrap_module_call(expr: Optional[ast.AST]) -> Optional[ast.AST]:
    """``Model().to(device).eval()`` → ``Model()``."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Call):
        expr = expr.func.value
    return expr


def compiled_module_class(model: CompileModel, site: AstCompileSite) -> Optional[ast.ClassDef]:
    """The nn.Module subclass of this module an instance of which ``site`` compiles."""
    if site.form not in ("wrap", "method") or site.target is None:
        return None
    return model.module_class_of(_unwrap_module_call(site.target))  # type: ignore[arg-type]


def _compile_statement(model: CompileModel, site: AstCompileSite) -> ast.stmt:
    """The statement the flag must precede: the compile's own, or for modules
    compiled one by one in a loop (``for b in model.layers: b.compile()``) the
    loop, so the flag is set once, before the first of them."""
    target = site.target
    if isinstance(target, ast.Name):
        bindings = model.scopes.bindings_of(target)
        if len(bindings) == 1 and bindings[0].kind == "for" and isinstance(bindings[0].value, (ast.For, ast.AsyncFor)):
            loop = bindings[0].value
            if any(a is loop for a in model.source.ancestors(site.node)):
                return loop
    return site.statement  # type: ignore[return-value]


def _insertion_statement(source: Source, stmt: ast.stmt) -> ast.stmt:
    """The statement a line can be inserted before to run ahead of ``stmt``:
    ``stmt`` itself, or for a statement of a one-line suite (``if c: m =
    torch.compile(M())``) the compound statement that holds the suite."""
    if isinstance(stmt, _COMPOUND):
        return stmt  # never in a one-line suite
    parent = source.parent(stmt)
    if parent is None or isinstance(parent, ast.Module):
        return stmt
    body = next(
        (b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and any(s is stmt for s in b)),
        None,
    )
    if body is None:
        return stmt
    first = body[0]
    line = first.lineno
    prefix = source.lines[line - 1][: source.char_col(line, first.col_offset)]
    # `if c: \` + newline + `stmt` is a one-line suite too
    while not prefix.strip() and line > 1:
        above = source.lines[line - 2].rstrip("\r\n")
        if not above.endswith("\\") or "#" in above:  # no continuation (a comment may end with `\\`)
            break
        line -= 1
        prefix = above
    if not prefix.strip():
        return stmt
    holder = source.enclosing(stmt, ast.stmt)
    return holder if holder is not None else stmt  # type: ignore[return-value]


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

    reads = "ast"

    def check(self, ctx) -> Iterable[Finding]:
        model = ctx.model
        source = ctx.source
        if not model.compile_sites:
            return []
        # (insertion statement, site, class, first mutation), in source order of the compile
        candidates = []
        mutations_of: Dict[int, List[IntMutation]] = {}
        for site in model.compile_sites:
            cls = compiled_module_class(model, site)
            if cls is None or site.statement is None:
                continue
            if id(cls) not in mutations_of:
                mutations_of[id(cls)] = int_mutations_in_forward(model, cls)
            mutations = mutations_of[id(cls)]
            if mutations:
                candidates.append((_insertion_statement(source, _compile_statement(model, site)), site, cls, mutations[0]))
        if not candidates or placement.config_mentions(source, [FLAG]):
            return []
        candidates.sort(key=lambda c: placement.start_of(c[0]))
        findings: List[Finding] = []
        chosen: List[ast.stmt] = []
        for stmt, site, cls, mutation in candidates:
            if any(s is stmt or placement.dominates(source, s, stmt) for s in chosen):
                continue  # the flag is already set before this compile runs
            message = (
                f"`{mutation.cls_name or cls.name}.{mutation.method}` changes int attribute `self.{mutation.attr}` (line {mutation.node.lineno}): "
                "torch specialises int attributes of compiled modules, so every new value recompiles"
            )
            if placement.block_of(source, stmt) is None or (
                not placement.torch_at_least(ctx.settings, FLAG_SINCE) and placement.builtin_shadowed(model, stmt, "hasattr")
            ):
                findings.append(self.finding(ctx, site.node, message + " (no automatic fix here)"))
                continue
            chosen.append(stmt)
            findings.append(
                self.finding(
                    ctx,
                    site.node,
                    message + f"; set `{FLAG} = True` before compiling",
                    edits=[placement.insert_before(source, stmt, self._flag_statement(ctx))],
                    safety=Safety.SAFE,
                    needs_torch=True,
                    title=f"set `torch._dynamo.config.{FLAG} = True` before the compile",
                )
            )
        return findings

    @staticmethod
    def _flag_statement(ctx) -> cst.BaseStatement:
        model = ctx.model
        assign = cst.SimpleStatementLine(
            body=[
                cst.Assign(
                    targets=[cst.AssignTarget(placement.torch_expr(model, "_dynamo", "config", FLAG))],
                    value=cst.Name("True"),
                )
            ]
        )
        if placement.torch_at_least(ctx.settings, FLAG_SINCE):
            return assign
        test = cst.Call(
            func=cst.Name("hasattr"),
            args=[
                cst.Arg(placement.torch_expr(model, "_dynamo", "config")),
                cst.Arg(cst.SimpleString(f'"{FLAG}"')),
            ],
        )
        return cst.If(test=test, body=cst.IndentedBlock(body=[assign]))
