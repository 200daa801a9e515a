"""FR004 optimizer-scalars: a float ``lr`` of an optimizer stepped inside a
compiled region becomes a 0-d tensor (with the scheduler scalars torch accepts
as tensors, and ``group["lr"] = v`` becoming ``group["lr"].fill_(v)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import libcst as cst
from libcst.metadata import Assignment

from ..analysis import dotted_name
from ..findings import Edit, Finding, Safety
from ..optim_table import (
    NEVER_TENSORIZE,
    SCHED_PREFIX,
    OptimizerRow,
    SchedulerRow,
    is_optimizer_name,
    optimizer_row,
    scheduler_row,
)
from ._cst import remove_keyword
from .base import Example, Rule

_TENSOR_FACTORIES = {"torch.tensor", "torch.as_tensor", "torch.full", "torch.scalar_tensor", "torch.ones", "torch.zeros"}
_NO_WS = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


@dataclass
class _Built:
    """One ``torch.optim`` optimizer or scheduler construction."""

    call: cst.Call
    kind: str  # "optimizer" | "scheduler"
    qualname: str
    binding: Optional[str]
    cls: Optional[cst.ClassDef]
    opt_row: Optional[OptimizerRow] = None
    sched_row: Optional[SchedulerRow] = None
    #: line of a ``.step()`` inside a compiled region (or of the compiled step)
    stepped_at: Optional[int] = None
    #: for schedulers: the optimizer construction they drive
    optimizer: Optional["_Built"] = None
    schedulers: List["_Built"] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def _arg(call: cst.Call, keyword: str, index: Optional[int]) -> Optional[cst.Arg]:
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a
    if index is not None and index < len(positional) and not any(a.star == "*" for a in call.args[: call.args.index(positional[index])]):
        return positional[index]
    return None


def _has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def _literal_bool(arg: Optional[cst.Arg]) -> Optional[bool]:
    if arg is None:
        return None
    if isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
        return arg.value.value == "True"
    return None


def _numeric_kind(expr: cst.BaseExpression) -> Optional[str]:
    """"int" / "float" for an arithmetic expression of number literals, else None."""
    if isinstance(expr, cst.Float):
        return "float"
    if isinstance(expr, cst.Integer):
        return "int"
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _numeric_kind(expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)
    ):
        left, right = _numeric_kind(expr.left), _numeric_kind(expr.right)
        if left is None or right is None:
            return None
        if isinstance(expr.operator, cst.Divide) or "float" in (left, right):
            return "float"
        return "int"
    return None


class OptimizerScalars(Rule):
    code = "FR004"
    name = "optimizer-scalars"
    summary = "float `lr` of an optimizer stepped inside a compiled region"
    what_it_does = """
Finds `torch.optim` optimizers (however imported or aliased) whose `step()` runs
inside a compiled region: called in the body of a compiled function, directly
or through a function or method of the same module it calls, or compiled
itself (`opt.step = torch.compile(opt.step)`); a scheduler whose `step()` runs
there puts its optimizer in the region too. At the optimizer's construction
the float `lr` (keyword or positional, a literal or a constant such as
`LR = 3e-4`; the optimizer's default when omitted) becomes
`lr=torch.tensor(<value>)`. Schedulers of that optimizer stepped inside the
region get the scalars they accept as tensors wrapped too (gamma, factors,
eta_min, max_lr ...; the table is `codemods/optim_table.py`, proven on torch
2.13 by `tests/test_optimizer_table.py`). `weight_decay` and `eps` are never
touched. In the same module, `group["lr"] = v` / `opt.param_groups[i]["lr"] = v`
of a fixed optimizer become `...["lr"].fill_(v)`.

Reported without a fix: an lr that is not a constant visible here (config,
argument), an optimizer missing from the table, `CyclicLR`/`OneCycleLR` with
`cycle_momentum=True` (they write Python floats into momentum/betas every
step), `ReduceLROnPlateau` unless `--target-torch` is 2.10 or newer (older
releases put a float lr back), Adamax/NAdam with `foreach=True` unless the
target is 2.4+.
"""
    why_it_recompiles = """
A Python float read inside a compiled function is a constant guarded by value.
A scheduler changes `param_groups[i]["lr"]` every step, so each new value is a
guard failure and a new graph, until the recompile limit, after which the step
runs eager. A 0-d tensor lr is an input of the graph instead: torch's
schedulers update it in place (`fill_`) and one graph serves every value.
Measured on torch 2.13, Adam(lr=0.01)+ExponentialLR(0.9) stepped in a compiled
function for 12 steps: 3 graphs with a float lr, 2 with a tensor lr.
"""
    example = """
    LR = 3e-4
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)

    @torch.compile
    def train_step(x):
        ...
        opt.step()
        sched.step()

Becomes:

    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(LR))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=torch.tensor(0.95))
"""
    fix_safety = """
Safe when nothing in the module reads the lr back. Once lr is a tensor,
`get_last_lr()`, `param_groups[i]["lr"]` and `state_dict()` hold 0-d tensors:
`f"{lr:.4f}"` and `"%.4f" % lr` still work (measured), but `round(lr, 4)`,
`json.dumps(lr)` and `isinstance(lr, float)` fail or change, and `print(lr)` /
`f"{lr}"` print a tensor or float32 digits. So if the module reads the lr
(`["lr"]`, `get_last_lr()`, `get_lr()`), the fix is unsafe. The tensor is
float32: values agree with the float lr to about 7 digits.

Adam/AdamW with `foreach=True` reject a tensor lr unless `capturable=True`,
and `capturable=True` raises on CPU parameters (AssertionError in an eager
step, measured on 2.13), so it is never added. With `capturable=True` already
given the fix is as above; otherwise the fix also removes `foreach=True` (torch
then picks the single-tensor path for a tensor lr) and is unsafe: the step can
be slower (measured with backend="eager", 20 x Linear(64): 11.2 ms → 21.5 ms a
step).
"""
    triggers = (b"optim",)
    valid = (
        # not stepped inside a compiled region
        (
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.Adam(m.parameters(), lr=0.01)\n"
            "@torch.compile\ndef f(x):\n    return m(x)\nopt.step()\n"
        ),
        # already a tensor
        (
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.Adam(m.parameters(), lr=torch.tensor(0.01))\n"
            "@torch.compile\ndef f():\n    opt.step()\n"
        ),
    )
    invalid = (
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
        ),
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=cfg.lr)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
        ),
    )

    # ------------------------------------------------------------------ check
    def check(self, ctx) -> Iterable[Finding]:
        a = ctx.analysis
        if not a.compile_sites:  # early exit before walking the module
            return []
        built = self._constructions(ctx)
        if not built:
            return []
        self._mark_stepped(ctx, built)
        findings: List[Finding] = []
        for b in built:
            if b.kind != "optimizer":
                continue
            in_region = b.stepped_at is not None or any(s.stepped_at is not None for s in b.schedulers)
            if in_region:
                findings.extend(self._optimizer_findings(ctx, b, built))
        return findings

    # ------------------------------------------------------------ collection
    def _constructions(self, ctx) -> List[_Built]:
        a = ctx.analysis
        found: List[_Built] = []

        class V(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                qnames = sorted(a.qualified_names(node.func))
                for q in qnames:
                    kind = "scheduler" if q.startswith(SCHED_PREFIX) else ("optimizer" if is_optimizer_name(q) else None)
                    if kind is None:
                        continue
                    parent = a.parent(node)
                    binding = None
                    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                        binding = dotted_name(parent.targets[0].target)
                    elif isinstance(parent, cst.AnnAssign):
                        binding = dotted_name(parent.target)
                    cls = a.enclosing(node, cst.ClassDef)
                    found.append(
                        _Built(node, kind, q, binding, cls if isinstance(cls, cst.ClassDef) else None,
                               opt_row=optimizer_row(q) if kind == "optimizer" else None,
                               sched_row=scheduler_row(q) if kind == "scheduler" else None)
                    )
                    return

        ctx.module.visit(V())
        by_call = {id(b.call): b for b in found}
        ctx.cache["fr004_by_call"] = by_call
        ctx.cache["fr004_built"] = found
        for b in found:
            if b.kind == "scheduler":
                arg = _arg(b.call, "optimizer", 0)
                target = self._resolve(ctx, arg.value) if arg is not None else None
                if target is not None and target.kind == "optimizer":
                    b.optimizer = target
                    target.schedulers.append(b)
        return found

    def _resolve(self, ctx, expr: cst.BaseExpression) -> Optional[_Built]:
        """The construction a name (``opt``) or attribute (``self.opt``) is bound to."""
        a = ctx.analysis
        by_call: Dict[int, _Built] = ctx.cache["fr004_by_call"]
        if isinstance(expr, cst.Call):
            return by_call.get(id(expr))
        if isinstance(expr, cst.Name):
            for value in a.assigned_values(expr):
                if isinstance(value, cst.Call) and id(value) in by_call:
                    return by_call[id(value)]
            return None
        name = dotted_name(expr)
        if name is None:
            return None
        cls = a.enclosing(expr, cst.ClassDef) if name.startswith("self.") else None
        for b in ctx.cache["fr004_built"]:
            if b.binding == name and (b.cls is cls if name.startswith("self.") else True):
                return b
        return None

    def _region_functions(self, ctx) -> List[cst.FunctionDef]:
        """Compiled functions and, transitively, the functions of this module they call."""
        a = ctx.analysis
        todo: List[cst.FunctionDef] = []
        for site in a.compile_sites:
            if site.target_def is not None:
                todo.append(site.target_def)
            elif site.target is not None:
                cls = a.module_class_of(site.target)
                if cls is not None:
                    fwd = a._method(cls, "forward")
                    if fwd is not None:
                        todo.append(fwd)
        seen: Dict[int, cst.FunctionDef] = {}
        while todo:
            fn = todo.pop(0)
            if id(fn) in seen:
                continue
            seen[id(fn)] = fn
            for call in self._calls_in(fn):
                callee = self._callee_def(ctx, call)
                if callee is not None and id(callee) not in seen:
                    todo.append(callee)
        return list(seen.values())

    @staticmethod
    def _calls_in(node: cst.CSTNode) -> List[cst.Call]:
        calls: List[cst.Call] = []

        class V(cst.CSTVisitor):
            def visit_Call(self, n: cst.Call) -> None:
                calls.append(n)

        node.visit(V())
        return calls

    def _callee_def(self, ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
        a = ctx.analysis
        func = call.func
        if isinstance(func, cst.Name):
            scope = a.scope(func)
            if scope is None:
                return None
            for assignment in a.in_source_order(scope[func.value]):
                if isinstance(assignment, Assignment) and isinstance(assignment.node, cst.FunctionDef):
                    return assignment.node
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = a.enclosing(call, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                return a._method(cls, func.attr.value)
        return None

    def _mark_stepped(self, ctx, built: List[_Built]) -> None:
        a = ctx.analysis
        for fn in self._region_functions(ctx):
            for call in self._calls_in(fn):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "step":
                    b = self._resolve(ctx, func.value)
                    if b is not None and b.stepped_at is None:
                        b.stepped_at = a.position(call).start.line
        for site in a.compile_sites:  # opt.step = torch.compile(opt.step)
            t = site.target
            if isinstance(t, cst.Attribute) and t.attr.value == "step":
                b = self._resolve(ctx, t.value)
                if b is not None and b.stepped_at is None:
                    b.stepped_at = a.position(site.node).start.line

    # ---------------------------------------------------------------- values
    def _value(self, ctx, expr: cst.BaseExpression) -> Tuple[str, Optional[str]]:
        """("tensor"|"float"|"int"|"unknown", detail)."""
        a = ctx.analysis
        if isinstance(expr, cst.Call) and a.qualified_names(expr.func) & _TENSOR_FACTORIES:
            return "tensor", None
        kind = _numeric_kind(expr)
        if kind is not None:
            return kind, None
        if isinstance(expr, cst.Name):
            scope = a.scope(expr)
            assignments = list(scope[expr.value]) if scope is not None else []
            if len(assignments) == 1 and isinstance(assignments[0], Assignment):
                assign = a.parent(assignments[0].node)
                if isinstance(assign, cst.AssignTarget):
                    assign = a.parent(assign)
                if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                    inner = self._value(ctx, assign.value)
                    if inner[0] in ("float", "int", "tensor"):
                        return inner[0], f"constant `{expr.value}`"
        return "unknown", ctx.module.code_for_node(expr)

    def _wrap(self, ctx, expr: cst.BaseExpression, kind: str) -> cst.BaseExpression:
        a = ctx.analysis
        if kind == "int":
            if isinstance(expr, cst.Integer):
                expr = cst.Float(f"{int(expr.value.replace('_', ''), 0)}.0")
            else:
                expr = cst.Call(func=cst.Name("float"), args=[cst.Arg(expr)])
        return cst.Call(func=a.torch_expr("tensor"), args=[cst.Arg(expr)])

    def _wrap_edit(self, ctx, arg: cst.Arg, kind: str) -> Edit:
        return Edit(arg, lambda node: node.with_changes(value=self._wrap(ctx, node.value, kind)))

    # -------------------------------------------------------------- findings
    def _optimizer_findings(self, ctx, b: _Built, built: List[_Built]) -> List[Finding]:
        a = ctx.analysis
        out: List[Finding] = []
        where = f"line {b.stepped_at}" if b.stepped_at is not None else f"line {next(s.stepped_at for s in b.schedulers if s.stepped_at is not None)}, by its scheduler"
        lead = f"`{b.short}` is stepped inside a compiled region ({where}): a float `lr` is a guarded constant, every lr change recompiles"
        row = b.opt_row
        if row is None:
            return [self.finding(ctx, b.call, f"{lead}; `{b.short}` is not in the table of optimizers known to accept a tensor lr (no automatic fix)")]
        if _has_star(b.call):
            return [self.finding(ctx, b.call, f"{lead}; the call passes `*args`/`**kwargs`, so lr cannot be seen here (no automatic fix)")]
        blocked = False
        for s in b.schedulers:
            srow = s.sched_row
            if srow is None:
                continue
            if srow.cycles_momentum and _literal_bool(_arg(s.call, "cycle_momentum", None)) is not False:
                out.append(self.finding(ctx, s.call, f"`{s.short}` with `cycle_momentum=True` (the default) writes Python floats into momentum/betas every step: the compiled step of `{b.short}` recompiles whatever lr is (no automatic fix; pass `cycle_momentum=False` if momentum may stay fixed)"))
                blocked = True
            target = ctx.settings.target_torch
            if srow.min_torch is not None and (target is None or target < srow.min_torch):
                need = ".".join(map(str, srow.min_torch))
                out.append(self.finding(ctx, s.call, f"`{s.short}` puts a Python float back into a tensor lr before torch {need}: wrapping the lr of `{b.short}` cannot stop its recompiles (no automatic fix; use --target-torch {need} if you only run {need}+)"))
                blocked = True
        if blocked:
            return out

        edits: List[Edit] = []
        unsafe: List[str] = []
        notes: List[str] = []
        anchor: cst.CSTNode = b.call
        lr = _arg(b.call, "lr", 1)
        lr_fixed = False
        if lr is None:
            default = cst.Float(repr(float(row.default_lr)))
            new_arg = cst.Arg(keyword=cst.Name("lr"), value=cst.Call(func=a.torch_expr("tensor"), args=[cst.Arg(default)]), equal=_NO_WS)
            edits.append(Edit(b.call, lambda node: node.with_changes(args=[*node.args, new_arg])))
            notes.append(f"pass the default `lr={row.default_lr}` as a tensor")
            lr_fixed = True
        else:
            anchor = lr
            kind, detail = self._value(ctx, lr.value)
            if kind == "unknown":
                out.append(self.finding(ctx, lr, f"{lead}; lr comes from `{detail}`, not a constant visible here, so it cannot be wrapped statically (no automatic fix; wrap it where it is built: `torch.tensor(float(...))`)"))
                return out
            if kind != "tensor":
                edits.append(self._wrap_edit(ctx, lr, kind))
                lr_fixed = True
        foreach = _arg(b.call, "foreach", None)
        if lr_fixed and foreach is not None and _literal_bool(foreach) is not False:
            capturable = _literal_bool(_arg(b.call, "capturable", None))
            if _literal_bool(foreach) is None:
                out.append(self.finding(ctx, foreach, f"{lead}; `foreach` is not a literal and a tensor lr may be rejected with foreach=True (no automatic fix)"))
                return out
            if row.foreach_min_torch is not None:
                target = ctx.settings.target_torch
                if target is None or target < row.foreach_min_torch:
                    need = ".".join(map(str, row.foreach_min_torch))
                    out.append(self.finding(ctx, foreach, f"{lead}; `{b.short}` with `foreach=True` rejects a tensor lr before torch {need} (no automatic fix; use --target-torch {need} if you only run {need}+)"))
                    return out
            if row.foreach_needs_capturable and capturable is not True:
                edits.append(Edit(b.call, lambda node: remove_keyword(node, "foreach")))
                unsafe.append("`foreach=True` rejects a tensor lr without `capturable=True` (which fails on CPU), so it is removed and the step may be slower")
        # schedulers stepped inside the region: their scalars
        for s in b.schedulers:
            if s.sched_row is None or s.stepped_at is None or _has_star(s.call):
                continue
            for kw, index in s.sched_row.tensor_params.items():
                if kw in NEVER_TENSORIZE:
                    continue
                arg = _arg(s.call, kw, index)
                if arg is None:
                    continue
                kind, _ = self._value(ctx, arg.value)
                if kind in ("float", "int"):
                    edits.append(self._wrap_edit(ctx, arg, kind))
        # follow-through: group["lr"] = v -> group["lr"].fill_(v)
        edits.extend(self._fill_edits(ctx, b))
        if not edits:
            return out
        reads = self._lr_reads(ctx)
        if reads:
            unsafe.append(f"line {reads[0]} reads the lr back, which becomes a 0-d tensor (formatting, `round`, `isinstance(lr, float)`, JSON change)")
        message = f"{lead}; make it a 0-d tensor (`lr=torch.tensor(...)`)" if lr_fixed else f"{lead}; keep the tensor lr a tensor"
        if notes:
            message += f" ({'; '.join(notes)})"
        if unsafe:
            message += f"; unsafe: {'; '.join(unsafe)}"
        out.append(
            self.finding(
                ctx, anchor, message, edits=edits,
                safety=Safety.UNSAFE if unsafe else Safety.SAFE,
                needs_torch=True,
                title="wrap `lr` and scheduler scalars in `torch.tensor`",
            )
        )
        return out

    def _fill_edits(self, ctx, b: _Built) -> List[Edit]:
        a = ctx.analysis
        rule = self
        edits: List[Edit] = []

        def groups_of(expr: cst.BaseExpression) -> bool:
            # X.param_groups with X bound to b
            return isinstance(expr, cst.Attribute) and expr.attr.value == "param_groups" and rule._resolve(ctx, expr.value) is b

        class V(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                if len(node.targets) != 1 or not _is_lr_subscript(node.targets[0].target):
                    return
                holder = node.targets[0].target.value  # type: ignore[union-attr]
                ok = False
                if isinstance(holder, cst.Subscript) and groups_of(holder.value):
                    ok = True  # opt.param_groups[i]["lr"] = v
                elif isinstance(holder, cst.Name):
                    for anc in a.ancestors(node):
                        if isinstance(anc, cst.For) and isinstance(anc.target, cst.Name) and anc.target.value == holder.value:
                            ok = groups_of(anc.iter)
                            break
                if ok:
                    edits.append(Edit(node, _to_fill))

        ctx.module.visit(V())
        return edits

    def _lr_reads(self, ctx) -> List[int]:
        """Lines where the module reads an lr back (``x["lr"]`` loads, ``get_last_lr()``)."""
        a = ctx.analysis
        lines: List[int] = []

        class V(cst.CSTVisitor):
            def visit_Subscript(self, node: cst.Subscript) -> None:
                if not _is_lr_subscript(node):
                    return
                parent = a.parent(node)
                if isinstance(parent, (cst.AssignTarget, cst.AugAssign)):
                    return
                lines.append(a.position(node).start.line)

            def visit_Call(self, node: cst.Call) -> None:
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("get_last_lr", "get_lr"):
                    lines.append(a.position(node).start.line)

        ctx.module.visit(V())
        return sorted(lines)


def _is_lr_subscript(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.SimpleString)
        and index.value.evaluated_value == "lr"
    )


def _to_fill(node: cst.CSTNode):
    assert isinstance(node, cst.Assign)
    target = node.targets[0].target
    call = cst.Call(func=cst.Attribute(value=target, attr=cst.Name("fill_")), args=[cst.Arg(node.value)])
    return cst.Expr(call)
