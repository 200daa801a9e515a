"""FR004 optimizer-scalars: a float ``lr`` of an optimizer stepped inside a
compiled region becomes a 0-d tensor (with the scheduler scalars torch accepts
as tensors, and ``group["lr"] = v`` becoming ``group["lr"].fill_(v)``)."""

from __future__ import annotations

import ast
import bisect
import dataclasses
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from ..compile_sites import _import_qualified, dotted_name
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
from ..placement import torch_expr
from ..source import Source
from ._cst import remove_keyword
from .base import Example, Rule

_TENSOR_FACTORIES = {"torch.tensor", "torch.as_tensor", "torch.full", "torch.scalar_tensor", "torch.ones", "torch.zeros"}
_NO_WS = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
_NEWLINE = re.compile(r"\r\n|\r|\n")
_CODE_TOKENS = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING, tokenize.OP) + tuple(
    getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)
)


@dataclass
class _Built:
    """One ``torch.optim`` optimizer or scheduler construction."""

    call: ast.Call
    kind: str  # "optimizer" | "scheduler"
    qualname: str
    binding: Optional[str]
    cls: Optional[ast.ClassDef]
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


@dataclass(frozen=True)
class _Arg:
    """One argument of a call: ``node`` is the ``ast.keyword`` (``lr=v``) or,
    for a positional argument, the expression itself; ``value`` the expression."""

    node: ast.AST
    value: ast.expr

    @property
    def is_keyword(self) -> bool:
        return isinstance(self.node, ast.keyword)


def _source_order(nodes: Iterable[ast.AST]) -> List[ast.AST]:
    """Nodes in the order a depth-first walk of the source meets them (an
    enclosing node before the nodes it holds): libcst's visiting order."""
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset, -n.end_lineno, -n.end_col_offset))  # type: ignore[attr-defined]


def _calls_in(node: ast.AST) -> List[ast.Call]:
    return _source_order(n for n in ast.walk(node) if isinstance(n, ast.Call))  # type: ignore[return-value]


def _arg(call: ast.Call, keyword: str, index: Optional[int]) -> Optional[_Arg]:
    """The argument ``keyword=``, else the positional argument ``index`` when
    no ``*args`` comes before it."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return _Arg(kw, kw.value)
    if index is None:
        return None
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if index < len(positional):
        chosen = positional[index]
        for a in call.args:
            if a is chosen:
                return _Arg(chosen, chosen)
            if isinstance(a, ast.Starred):
                return None
    return None


def _has_star(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)


def _literal_bool(arg: Optional[_Arg]) -> Optional[bool]:
    if arg is None:
        return None
    value = arg.value
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return value.value
    return None


def _numeric_kind(expr: ast.AST) -> Optional[str]:
    """"int" / "float" for an arithmetic expression of number literals, else None."""
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, float):
            return "float"
        if isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return "int"
        return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _numeric_kind(expr.operand)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        left, right = _numeric_kind(expr.left), _numeric_kind(expr.right)
        if left is None or right is None:
            return None
        if isinstance(expr.op, ast.Div) or "float" in (left, right):
            return "float"
        return "int"
    return None


def _qualified_names(model, expr: ast.AST) -> Set[str]:
    """``model.qualified_names(expr)``, except that a bare name does not see
    the bindings of its own scope that come after it (``a = SGD(p)`` before
    ``from torch.optim import SGD`` at module level is a NameError, or the
    earlier ``SGD``): what libcst's qualified names gave.  Names in a
    function body still see every binding of the module."""
    if not isinstance(expr, ast.Name):
        return model.qualified_names(expr)
    bindings = model.scopes.bindings_of(expr)
    here = model.scopes.name_scope.get(expr)
    at = (expr.lineno, expr.col_offset)
    if not any(b.scope is here and _binding_start(b) > at for b in bindings):
        return model.qualified_names(expr)
    out: Set[str] = set()
    for b in bindings:
        if b.scope is here and _binding_start(b) > at:
            continue
        if b.kind == "import":
            q = _import_qualified(b)
            if q is not None:
                out.add(q)
        else:
            out.add(expr.id)
    return out


def _binding_start(binding) -> Tuple[int, int]:
    node = binding.node if hasattr(binding.node, "lineno") else binding.stmt
    return (node.lineno, node.col_offset) if node is not None else (0, 0)


# -- text spans ---------------------------------------------------------------------
class _Text:
    """Offsets into the source text, for the spans libcst gives an argument
    and ``ast`` does not (parentheses around an expression)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.text = source.text
        # lines as the tokenizer counts them (``str.splitlines`` would also
        # split at form feeds and other separators ``ast`` does not count)
        self.starts: List[int] = [0] + [m.end() for m in _NEWLINE.finditer(self.text)]
        self._toks: Optional[List[Tuple[str, int, int]]] = None
        self._first: Dict[int, int] = {}
        self._last: Dict[int, int] = {}

    def _col(self, line: int, byte_col: int) -> int:
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        text = self.text[start:end]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def offset(self, line: int, byte_col: int) -> int:
        return self.starts[line - 1] + self._col(line, byte_col)

    def pos(self, offset: int) -> Tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1]

    def paren_span(self, expr: ast.AST) -> Tuple[int, int]:
        """Offsets of ``expr`` with the parentheses around it (libcst keeps
        them, and comments between them, in the expression's node; ``ast``
        positions leave them out).  Not for a call's first argument, whose
        ``(`` would be the call's."""
        start = self.offset(expr.lineno, expr.col_offset)  # type: ignore[attr-defined]
        end = self.offset(expr.end_lineno, expr.end_col_offset)  # type: ignore[attr-defined]
        before, after = self.text[:start].rstrip(), self.text[end:].lstrip()
        if not (before.endswith("(") or "#" in before[-200:]) or not (after.startswith(")") or after.startswith("#")):
            return start, end  # no parenthesis around it: no need to tokenize the file
        tokens = self._tokens()
        i, j = self._first.get(start), self._last.get(end)
        if i is None or j is None:
            return start, end
        while i > 0 and j + 1 < len(tokens) and tokens[i - 1][0] == "(" and tokens[j + 1][0] == ")":
            i, j = i - 1, j + 1
        return tokens[i][1], tokens[j][2]

    def _tokens(self) -> List[Tuple[str, int, int]]:
        """(string, start, end offsets) of the tokens that are code (no
        comments, line breaks or indentation)."""
        if self._toks is None:
            toks: List[Tuple[str, int, int]] = []
            try:
                for tok in tokenize.generate_tokens(io.StringIO(self.text, newline="").readline):
                    if tok.type in _CODE_TOKENS:
                        toks.append((tok.string, self.starts[tok.start[0] - 1] + tok.start[1], self.starts[tok.end[0] - 1] + tok.end[1]))
            except (tokenize.TokenError, SyntaxError):
                toks = []
            self._toks = toks
            self._first = {t[1]: k for k, t in enumerate(toks)}
            self._last = {t[2]: k for k, t in enumerate(toks)}
        return self._toks

    def code(self, expr: ast.AST) -> str:
        """What ``module.code_for_node`` gave for the libcst node of ``expr``."""
        start, end = self.paren_span(expr)
        return self.text[start:end]


def _is_lr_subscript(source: Source, node: ast.AST) -> bool:
    """``x["lr"]``: one plain string literal (not ``"l" "r"``) as the index."""
    if not isinstance(node, ast.Subscript):
        return False
    index = node.slice
    if not (isinstance(index, ast.Constant) and index.value == "lr"):
        return False
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source.segment(index)).readline) if t.type == tokenize.STRING]
    except (tokenize.TokenError, SyntaxError):
        return False
    return len(tokens) == 1


def _fill(target: cst.CSTNode):
    """``x["lr"] = v`` -> ``x["lr"].fill_(v)``."""
    assert isinstance(target, cst.Assign)
    subscript = target.targets[0].target
    call = cst.Call(func=cst.Attribute(value=subscript, attr=cst.Name("fill_")), args=[cst.Arg(target.value)])
    return cst.Expr(call)


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
then picks the single-tensor path for a tensor lr) and is unsafe: a step run
eager or with backend="eager" is slower (20 x Linear(64): 11.2 ms → 21.5 ms a
step), while the step compiled by the default inductor backend is as fast
(measured on CPU, 0.5 M and 8.4 M parameters, within ±6%:
`benchmarks/foreach_step.py`, results in `codemods/optim_table.py`).
"""
    triggers = (b"optim",)
    reads = "ast"
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
        if b"step" not in ctx.source.data:
            return []  # every finding needs a `.step` run in a compiled region
        model = ctx.model
        if not model.compile_sites:  # early exit before walking the module
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
        model, source = ctx.model, ctx.source
        found: List[_Built] = []
        for node in _source_order(n for n in source.parents if type(n) is ast.Call):
            for q in sorted(_qualified_names(model, node.func)):
                kind = "scheduler" if q.startswith(SCHED_PREFIX) else ("optimizer" if is_optimizer_name(q) else None)
                if kind is None:
                    continue
                parent = source.parent(node)
                binding = None
                if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                    binding = dotted_name(parent.targets[0])
                elif isinstance(parent, ast.AnnAssign):
                    binding = dotted_name(parent.target)
                cls = source.enclosing(node, ast.ClassDef)
                found.append(
                    _Built(node, kind, q, binding, cls if isinstance(cls, ast.ClassDef) else None,
                           opt_row=optimizer_row(q) if kind == "optimizer" else None,
                           sched_row=scheduler_row(q) if kind == "scheduler" else None)
                )
                break
        ctx.cache["fr004_by_call"] = {b.call: b for b in found}
        ctx.cache["fr004_built"] = found
        for b in found:
            if b.kind == "scheduler":
                arg = _arg(b.call, "optimizer", 0)
                target = self._resolve(ctx, arg.value) if arg is not None else None
                if target is not None and target.kind == "optimizer":
                    b.optimizer = target
                    target.schedulers.append(b)
        return found

    def _resolve(self, ctx, expr: ast.AST) -> Optional[_Built]:
        """The construction a name (``opt``) or attribute (``self.opt``) is bound to."""
        by_call: Dict[ast.Call, _Built] = ctx.cache["fr004_by_call"]
        if isinstance(expr, ast.Call):
            return by_call.get(expr)
        if isinstance(expr, ast.Name):
            for value in ctx.model.assigned_values(expr):
                if isinstance(value, ast.Call) and value in by_call:
                    return by_call[value]
            return None
        name = dotted_name(expr)
        if name is None:
            return None
        cls = ctx.source.enclosing(expr, ast.ClassDef) if name.startswith("self.") else None
        for b in ctx.cache["fr004_built"]:
            if b.binding == name and (b.cls is cls if name.startswith("self.") else True):
                return b
        return None

    def _region_functions(self, ctx) -> List[ast.AST]:
        """Compiled functions and, transitively, the functions of this module they call."""
        model = ctx.model
        todo: List[ast.AST] = []
        for site in model.compile_sites:
            if site.target_def is not None:
                todo.append(site.target_def)
            elif site.target is not None:
                cls = model.module_class_of(site.target)
                if cls is not None:
                    fwd = model.method(cls, "forward")
                    if fwd is not None:
                        todo.append(fwd)
        seen: Dict[ast.AST, None] = {}
        while todo:
            fn = todo.pop(0)
            if fn in seen:
                continue
            seen[fn] = None
            for call in _calls_in(fn):
                callee = self._callee_def(ctx, call)
                if callee is not None and callee not in seen:
                    todo.append(callee)
        return list(seen)

    def _callee_def(self, ctx, call: ast.Call) -> Optional[ast.AST]:
        func = call.func
        if isinstance(func, ast.Name):
            return ctx.model.resolve_function(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = ctx.source.enclosing(call, ast.ClassDef)
            if isinstance(cls, ast.ClassDef):
                return ctx.model.method(cls, func.attr)
        return None

    def _mark_stepped(self, ctx, built: List[_Built]) -> None:
        model = ctx.model
        for fn in self._region_functions(ctx):
            for call in _calls_in(fn):
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "step":
                    b = self._resolve(ctx, func.value)
                    if b is not None and b.stepped_at is None:
                        b.stepped_at = call.lineno
        for site in model.compile_sites:  # opt.step = torch.compile(opt.step)
            t = site.target
            if isinstance(t, ast.Attribute) and t.attr == "step":
                b = self._resolve(ctx, t.value)
                if b is not None and b.stepped_at is None:
                    b.stepped_at = site.node.lineno  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- values
    def _value(self, ctx, expr: ast.AST) -> Tuple[str, Optional[str]]:
        """("tensor"|"float"|"int"|"unknown", detail)."""
        model = ctx.model
        if isinstance(expr, ast.Call) and _qualified_names(model, expr.func) & _TENSOR_FACTORIES:
            return "tensor", None
        kind = _numeric_kind(expr)
        if kind is not None:
            return kind, None
        if isinstance(expr, ast.Name):
            # one binding in its scope, `NAME = <value>` (a `del` binds nothing)
            bindings = [b for b in model.scopes.bindings_of(expr) if b.kind != "del"]
            if len(bindings) == 1 and bindings[0].kind == "assign":
                assign = bindings[0].stmt
                if isinstance(assign, ast.Assign) and len(assign.targets) == 1:
                    inner = self._value(ctx, assign.value)
                    if inner[0] in ("float", "int", "tensor"):
                        return inner[0], f"constant `{expr.id}`"
        return "unknown", self._text(ctx).code(expr)

    @staticmethod
    def _text(ctx) -> _Text:
        text = ctx.cache.get("fr004_text")
        if text is None:
            text = ctx.cache["fr004_text"] = _Text(ctx.source)
        return text

    @staticmethod
    def _wrap(ctx, expr: cst.BaseExpression, kind: str) -> cst.BaseExpression:
        if kind == "int":
            if isinstance(expr, cst.Integer):
                expr = cst.Float(f"{int(expr.value.replace('_', ''), 0)}.0")
            else:
                expr = cst.Call(func=cst.Name("float"), args=[cst.Arg(expr)])
        return cst.Call(func=torch_expr(ctx.model, "tensor"), args=[cst.Arg(expr)])

    def _wrap_edit(self, ctx, arg: _Arg, kind: str) -> Edit:
        # the value's own node: libcst keeps its parentheses in it, so
        # `lr=(0.1)` becomes `lr=torch.tensor((0.1))` as before
        return Edit(ctx.source.target(arg.value, cst.BaseExpression), lambda node: self._wrap(ctx, node, kind))

    def _arg_finding(self, ctx, arg: _Arg, message: str, **fix) -> Finding:
        """A finding on an argument, spanning what libcst's ``Arg`` spans: the
        keyword with its value, or a positional value with its parentheses."""
        found = self.finding(ctx, arg.node, message, **fix)
        if arg.is_keyword:
            return found
        text = self._text(ctx)
        (l1, c1), (l2, c2) = (text.pos(o) for o in text.paren_span(arg.value))
        return dataclasses.replace(found, line=l1, column=c1 + 1, end_line=l2, end_column=c2 + 1)

    # -------------------------------------------------------------- findings
    def _optimizer_findings(self, ctx, b: _Built, built: List[_Built]) -> List[Finding]:
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
        call_target = ctx.source.target(b.call, cst.Call)
        anchor: Optional[_Arg] = None
        lr = _arg(b.call, "lr", 1)
        lr_fixed = False
        if lr is None:
            default = cst.Float(repr(float(row.default_lr)))
            new_arg = cst.Arg(keyword=cst.Name("lr"), value=cst.Call(func=torch_expr(ctx.model, "tensor"), args=[cst.Arg(default)]), equal=_NO_WS)
            edits.append(Edit(call_target, lambda node: node.with_changes(args=[*node.args, new_arg])))
            notes.append(f"pass the default `lr={row.default_lr}` as a tensor")
            lr_fixed = True
        else:
            anchor = lr
            kind, detail = self._value(ctx, lr.value)
            if kind == "unknown":
                out.append(self._arg_finding(ctx, lr, f"{lead}; lr comes from `{detail}`, not a constant visible here, so it cannot be wrapped statically (no automatic fix; wrap it where it is built: `torch.tensor(float(...))`)"))
                return out
            if kind != "tensor":
                edits.append(self._wrap_edit(ctx, lr, kind))
                lr_fixed = True
        foreach = _arg(b.call, "foreach", None)
        if lr_fixed and foreach is not None and _literal_bool(foreach) is not False:
            capturable = _literal_bool(_arg(b.call, "capturable", None))
            if _literal_bool(foreach) is None:
                out.append(self._arg_finding(ctx, foreach, f"{lead}; `foreach` is not a literal and a tensor lr may be rejected with foreach=True (no automatic fix)"))
                return out
            if row.foreach_min_torch is not None:
                target = ctx.settings.target_torch
                if target is None or target < row.foreach_min_torch:
                    need = ".".join(map(str, row.foreach_min_torch))
                    out.append(self._arg_finding(ctx, foreach, f"{lead}; `{b.short}` with `foreach=True` rejects a tensor lr before torch {need} (no automatic fix; use --target-torch {need} if you only run {need}+)"))
                    return out
            if row.foreach_needs_capturable and capturable is not True:
                edits.append(Edit(call_target, lambda node: remove_keyword(node, "foreach")))
                unsafe.append(
                    "`foreach=True` rejects a tensor lr without `capturable=True` (which fails on CPU), so it is removed: "
                    "a step compiled by the default inductor backend is as fast (measured), one run eager or with backend=\"eager\" is slower"
                )
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
        # every param group's own lr must become a tensor too: `.fill_` below
        # (and a scheduler) would meet a float in the group that kept one
        group_lrs, unseen = self._group_lrs(ctx, b)
        for value in group_lrs:
            kind, detail = self._value(ctx, value)
            if kind == "unknown":
                out.append(self.finding(ctx, value, f"{lead}; the param group's own lr `{detail}` is not a constant visible here, and every group's lr must be a tensor (no automatic fix; wrap it where it is built: `torch.tensor(float(...))`)"))
                return out
            if kind != "tensor":
                edits.append(Edit(ctx.source.target(value, cst.BaseExpression), lambda node, kind=kind: self._wrap(ctx, node, kind)))
        # follow-through: group["lr"] = v -> group["lr"].fill_(v)
        fills = self._fill_edits(ctx, b)
        if fills and unseen:
            out.append(self.finding(ctx, b.call, f"{lead}; the param groups are built elsewhere, so a group's own float lr cannot be seen, and `group[\"lr\"].fill_(...)` would fail on it (no automatic fix)"))
            return out
        edits.extend(fills)
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
        fix = {
            "edits": edits,
            "safety": Safety.UNSAFE if unsafe else Safety.SAFE,
            "needs_torch": True,
            "title": "wrap `lr` and scheduler scalars in `torch.tensor`",
        }
        out.append(self._arg_finding(ctx, anchor, message, **fix) if anchor is not None else self.finding(ctx, b.call, message, **fix))
        return out

    @staticmethod
    def _group_lrs(ctx, b: _Built) -> Tuple[List[ast.AST], bool]:
        """(the ``"lr"`` values of the param-group dicts passed to the
        optimizer, whether the groups cannot be seen): ``[{"params": ...,
        "lr": 0.01}, {...}]`` is seen; ``model.parameters()`` holds no groups;
        a name or anything else may hold groups with their own lr."""
        params = _arg(b.call, "params", 0)
        if params is None:
            return [], False
        value = params.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("parameters", "named_parameters"):
            return [], False
        if not isinstance(value, (ast.List, ast.Tuple)):
            return [], True
        found: List[ast.AST] = []
        for element in value.elts:
            if not isinstance(element, ast.Dict):
                if isinstance(element, ast.Starred):
                    return found, True
                continue  # a tensor: no group of its own
            for key, val in zip(element.keys, element.values):
                if key is None:
                    return found, True  # `**other`: may hold an lr
                if isinstance(key, ast.Constant) and key.value == "lr":
                    found.append(val)
        return found, False

    def _fill_edits(self, ctx, b: _Built) -> List[Edit]:
        source = ctx.source
        edits: List[Edit] = []

        def groups_of(expr: ast.AST) -> bool:
            # X.param_groups with X bound to b
            return isinstance(expr, ast.Attribute) and expr.attr == "param_groups" and self._resolve(ctx, expr.value) is b

        for node in self._lr_assigns(ctx):
            holder = node.targets[0].value  # type: ignore[attr-defined]
            ok = False
            if isinstance(holder, ast.Subscript) and groups_of(holder.value):
                ok = True  # opt.param_groups[i]["lr"] = v
            elif isinstance(holder, ast.Name):
                for anc in source.ancestors(node):
                    if isinstance(anc, (ast.For, ast.AsyncFor)) and isinstance(anc.target, ast.Name) and anc.target.id == holder.id:
                        ok = groups_of(anc.iter)
                        break
            if ok:
                edits.append(Edit(source.target(node, cst.Assign), _fill))
        return edits

    def _lr_assigns(self, ctx) -> List[ast.Assign]:
        """``x["lr"] = v`` statements (one target), in source order."""
        found = ctx.cache.get("fr004_lr_assigns")
        if found is None:
            source = ctx.source
            found = ctx.cache["fr004_lr_assigns"] = _source_order(
                n for n in source.parents
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and _is_lr_subscript(source, n.targets[0])
            )
        return found

    def _lr_reads(self, ctx) -> List[int]:
        """Lines where the module reads an lr back (``x["lr"]`` loads, ``get_last_lr()``)."""
        lines = ctx.cache.get("fr004_lr_reads")
        if lines is not None:
            return lines
        source = ctx.source
        lines = []
        for node in source.parents:  # every node but the module
            if isinstance(node, ast.Subscript):
                if not _is_lr_subscript(source, node):
                    continue
                parent = source.parent(node)
                # written, not read: `x["lr"] = v` (a direct target) and, as
                # libcst saw it, anything in an augmented assignment
                if isinstance(parent, ast.AugAssign) or (isinstance(parent, ast.Assign) and any(t is node for t in parent.targets)):
                    continue
                lines.append(node.lineno)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get_last_lr", "get_lr"):
                lines.append(node.lineno)
        lines.sort()
        ctx.cache["fr004_lr_reads"] = lines
        return lines
