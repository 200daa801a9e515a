"""FR004 optimizer-scalars: a float ``lr`` of an optimizer stepped inside a
compiled region becomes a 0-d tensor (with the scheduler scalars torch accepts
as tensors, and ``group["lr"] = v`` becoming ``group["lr"].fill_(v)``)."""

from __future__ import annotations

import ast
import bisect
import contextlib
import dataclasses
import functools
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from .._lazy import cst

from ..analysis.compile_sites import def_first_lines, dotted_name
from ..analysis.constants import number_kind
from ..analysis import lr_writers
from ..analysis.params import argument_at, parameter_defaults, passed_argument
from ..analysis.project import ModuleKey, ProjectFact
from ..findings import Edit, Finding, Safety
from ..analysis.optim_table import (
    NEVER_TENSORIZE,
    OPTIM_PREFIX,
    SCHED_PREFIX,
    OptimizerRow,
    SchedulerRow,
    is_optimizer_name,
    optimizer_row,
    scheduler_row,
)
from ..analysis.placement import always_follows, block_of, torch_expr
from ..analysis.tensor_ops_table import TENSOR_MAKERS
from ..analysis.source import Source, children, statement_target, walk
from ..cst_edits import remove_keyword
from ..trace.causes import CuresCause, OPTIMIZER_LR
from .base import Example, Rule

def _no_ws() -> "cst.AssignEqual":
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
_NEWLINE = re.compile(r"\r\n|\r|\n")
_CODE_TOKENS = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING, tokenize.OP) + tuple(
    getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)
)


@dataclass(eq=False)
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
    #: where it is stepped compiled when that is in another module (an
    #: optimizer a factory of this module returns: "module `train` line 37")
    stepped_elsewhere: str = ""
    #: stepped by a compiled function of another module: its file and the
    #: lines its code objects start on (a trace's recompiles there match)
    feeds_path: str = ""
    feeds: Tuple[int, ...] = ()
    #: for schedulers: the optimizer construction they drive
    optimizer: Optional["_Built"] = None
    schedulers: List["_Built"] = field(default_factory=list)
    #: the class came through this expression (a ``functools.partial(...)``
    #: call, a dict entry, a factory's ``return``), not named at the call
    via: Optional[ast.AST] = None

    @property
    def label(self) -> str:
        return self.binding or self.short

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


def _source_key(n: ast.AST) -> Tuple[int, int, int, int]:
    """Where a depth-first walk of the source meets ``n`` (an enclosing node
    before the nodes it holds): libcst's visiting order."""
    return (n.lineno, n.col_offset, -n.end_lineno, -n.end_col_offset)  # type: ignore[attr-defined]


def _source_order(nodes: Iterable[ast.AST]) -> List[ast.AST]:
    """Nodes in the order a depth-first walk of the source meets them."""
    return sorted(nodes, key=_source_key)


def _own_nodes(fn: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a function's body, not those of functions, lambdas or
    classes nested in it."""
    stack = list(children(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(children(node))


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _bound_arg(call: ast.Call, fn: ast.AST, param: ast.arg, skip: int) -> Optional[ast.expr]:
    """The expression ``call`` passes for ``param`` of ``fn`` (``skip``: 1
    when ``self`` of a constructor or method is bound implicitly); None when
    it is not passed plainly (a default, or any ``*args``/``**kwargs`` at the
    call: the analysis does not guess through them)."""
    if _has_star(call):
        return None
    return passed_argument(call, fn, param.arg, skip == 1)  # type: ignore[return-value]


#: the callees :meth:`OptimizerScalars._optimizer_class` follows beyond their names
_FOLLOWED = (ast.Name, ast.Subscript, ast.Call)


def _calls_in(node: ast.AST) -> List[ast.Call]:
    """The calls in ``node``, in source order (computed once per node)."""
    found = getattr(node, "_fr_calls", None)
    if found is None:
        found = node._fr_calls = _source_order(n for n in walk(node) if isinstance(n, ast.Call))  # type: ignore[attr-defined]
    return found  # type: ignore[return-value]


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


def _tensor_test(ctx, test: ast.AST) -> Optional[Tuple[ast.AST, bool]]:
    """(its subject, whether it holds when the subject is a tensor) of a test
    ``isinstance(S, torch.Tensor)``, ``torch.is_tensor(S)``, ``isinstance(S,
    float)`` (or ``(int, float)``: holds when S is not a tensor), or ``not``
    one of them; None for any other test."""
    positive = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, not positive
    if not isinstance(test, ast.Call) or test.keywords or not test.args or any(isinstance(a, ast.Starred) for a in test.args):
        return None
    names = ctx.model.qualified_names(test.func)
    if "torch.is_tensor" in names and len(test.args) == 1:
        return test.args[0], positive
    if "builtins.isinstance" in names and len(test.args) == 2:
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        quals = [ctx.model.qualified_names(kind) for kind in kinds]
        if quals and all("torch.Tensor" in q for q in quals):
            return test.args[0], positive
        if quals and all(q & {"builtins.float", "builtins.int"} for q in quals):
            return test.args[0], not positive
    return None


#: tensor methods that keep a tensor a tensor
_TENSOR_KEEPERS = frozenset(("detach", "to", "clone", "float", "double", "cpu", "cuda"))


def _makes_tensor(ctx, value: ast.AST, stmt: ast.AST) -> bool:
    """Is ``value``, bound or written by ``stmt``, a tensor: a call of a
    torch tensor maker, or a chain of tensor methods (``.detach().to(d)``) on
    a name that the ``if`` around ``stmt`` tests to be a tensor?"""
    if not isinstance(value, ast.Call):
        return False
    if ctx.model.qualified_names(value.func, visible=True) & TENSOR_MAKERS:
        return True
    chain = value
    while isinstance(chain, ast.Call) and isinstance(chain.func, ast.Attribute) and chain.func.attr in _TENSOR_KEEPERS:
        chain = chain.func.value
    if not (isinstance(chain, ast.Name) and chain is not value):
        return False
    child: ast.AST = stmt
    for anc in ctx.source.ancestors(stmt):
        if isinstance(anc, ast.If) and any(child is body for body in anc.body):
            found = _tensor_test(ctx, anc.test)
            return found is not None and found[1] and isinstance(found[0], ast.Name) and found[0].id == chain.id
        if isinstance(anc, _DEFS + (ast.Lambda, ast.ClassDef, ast.Module)):
            return False
        child = anc
    return False


def _tensor_written(ctx, stmt: ast.Assign) -> bool:
    """Does ``g["lr"] = v`` write a tensor: ``v`` a tensor maker's call, or
    a name whose last binding before the write, in its block, is one, or an
    ``if`` whose both branches end by binding it to one (open_clip's
    ``tensorize_learning_rate``: ``lr.detach().to(device)`` if it is a tensor,
    else ``torch.tensor(float(lr), device=device)``)?"""
    value = stmt.value
    if isinstance(value, ast.Call):
        return _makes_tensor(ctx, value, stmt)
    if not isinstance(value, ast.Name):
        return False
    return _binds_tensor_before(ctx, stmt, value.id)


def _binds_tensor_before(ctx, stmt: ast.AST, name: str) -> bool:
    """Is the last statement before ``stmt`` in its block that binds
    ``name`` one that binds it to a tensor (:func:`_binds_tensor`)?"""
    parent = ctx.source.parent(stmt)
    for field_name in ("body", "orelse", "finalbody"):
        block = getattr(parent, field_name, None)
        if isinstance(block, list) and any(stmt is s for s in block):
            at = next(i for i, s in enumerate(block) if s is stmt)
            for prev in reversed(block[:at]):
                if _binds_name(prev, name):
                    return _binds_tensor(ctx, prev, name)
            return False
    return False


def _binds_name(stmt: ast.AST, name: str) -> bool:
    """Does ``stmt`` (anything in it) bind ``name``?"""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in walk(stmt))


def _binds_tensor(ctx, stmt: ast.AST, name: str) -> bool:
    """Does ``stmt`` leave ``name`` bound to a tensor on every path: ``name
    = <tensor>``, or an ``if``/``else`` each of whose branches ends so?"""
    if isinstance(stmt, ast.Assign):
        return len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name and _makes_tensor(ctx, stmt.value, stmt)
    if isinstance(stmt, ast.If) and stmt.body and stmt.orelse:
        for block in (stmt.body, stmt.orelse):
            last = next((s for s in reversed(block) if _binds_name(s, name)), None)
            if last is None or not _binds_tensor(ctx, last, name):
                return False
        return True
    return False


def _fill(target: cst.CSTNode):
    """``x["lr"] = v`` -> ``x["lr"].fill_(v)``."""
    assert isinstance(target, cst.Assign)
    subscript = target.targets[0].target
    call = cst.Call(func=cst.Attribute(value=subscript, attr=cst.Name("fill_")), args=[cst.Arg(target.value)])
    return cst.Expr(call)


def _group_loop(ctx, write: ast.Assign) -> Optional[Tuple[ast.AST, ast.AST]]:
    """(the loop, what it walks) of the write ``g["lr"] = v`` whose ``g`` the
    loop binds (the innermost such loop around it): ``for g in G:``, and
    torch's own ``for g, lr in zip(G, values):`` and ``for i, g in
    enumerate(G):`` (G then the walked argument); None otherwise."""
    holder = write.targets[0].value  # type: ignore[attr-defined]
    if not isinstance(holder, ast.Name):
        return None
    for anc in ctx.source.ancestors(write):
        if not isinstance(anc, (ast.For, ast.AsyncFor)):
            continue
        target = anc.target
        if isinstance(target, ast.Name):
            if target.id == holder.id:
                return anc, anc.iter
            continue
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts] if isinstance(target, ast.Tuple) else []
        if holder.id not in names:
            continue
        at = names.index(holder.id)
        walked = _walked_by(ctx, anc.iter, at, len(names))
        return (anc, walked) if walked is not None else None
    return None


def _walked_by(ctx, it: ast.AST, at: int, width: int) -> Optional[ast.AST]:
    """The iterable whose items the ``at``-th of ``width`` names of a loop
    target get from ``it``: an argument of the builtin ``zip(...)``, or the
    one of ``enumerate(...)`` for the second name; None otherwise."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords):
        return None
    if any(isinstance(a, ast.Starred) for a in it.args) or ctx.model.scopes.bindings_of(it.func):
        return None  # unpacked arguments, or a zip/enumerate of the program's own
    if it.func.id == "zip" and len(it.args) == width:
        return it.args[at]
    if it.func.id == "enumerate" and width == 2 and at == 1 and len(it.args) == 1:
        return it.args[0]
    return None


def _fill_if_tensor(model, line: cst.CSTNode):
    """``x["lr"] = v`` (a statement alone on its line) -> ``if
    isinstance(x["lr"], torch.Tensor): x["lr"].fill_(v) else: x["lr"] = v``."""
    assert isinstance(line, cst.SimpleStatementLine)
    assign = line.body[0]
    assert isinstance(assign, cst.Assign)
    subscript = assign.targets[0].target
    test = cst.Call(func=cst.Name("isinstance"), args=[cst.Arg(subscript), cst.Arg(torch_expr(model, "Tensor"))])
    fill = cst.SimpleStatementLine(body=[cst.Expr(cst.Call(func=cst.Attribute(value=subscript, attr=cst.Name("fill_")), args=[cst.Arg(assign.value)]))])
    return cst.If(
        test=test,
        body=cst.IndentedBlock(body=[fill]),
        orelse=cst.Else(body=cst.IndentedBlock(body=[line.with_changes(leading_lines=())])),
        leading_lines=line.leading_lines,
    )


def _alone(source, node: ast.stmt) -> bool:
    """Is ``node`` a statement on lines of its own, in an indented block (a
    compound statement may take its place)?"""
    block = block_of(source, node)
    if block is None or isinstance(block[0], ast.Module):
        return False
    return not any(s is not node and (s.lineno <= node.end_lineno and node.lineno <= s.end_lineno) for s in getattr(*block))  # type: ignore[attr-defined]


#: FR004's scratch entries that depend on neither the settings nor the index
_SHARED = frozenset(("fr004_by_call", "fr004_built", "fr004_write_reach", "fr004_store_reach", "fr004_lr_stores", "fr004_lr_stores_all", "fr004_tensorizers", "fr004_steppers", "fr004_stepped", "fr004_lr_assigns", "fr004_lr_reads", "fr004_passed", "fr004_text", "fr004_writers", "fr004_fill_edits", "fr004_state_loads"))


def index_facts(source) -> Optional[dict]:
    """FR004's facts for the project index (JSON-ready), or None: the
    module's lr writers (:meth:`OptimizerScalars._writers`), and the
    optimizers it passes to code of other modules
    (:meth:`OptimizerScalars._passes_out`)."""
    from ..analysis.context import FileContext, Settings

    data = source.data
    writers: Dict[str, dict] = {}
    passes: dict = {}
    rule = OptimizerScalars()
    ctx = FileContext(source.path, source.display_path, Settings(), None, source)
    tensorizers: Dict[str, dict] = {}
    if b"param_groups" in data:
        writers = rule._writers(ctx)
        tensorizers = rule._tensorizers(ctx)
    factories: Dict[str, dict] = {}
    uses: List[dict] = []
    steppers: Dict[str, dict] = {}
    if b"optim" in data:  # an optimizer handed on may be stepped by code of another module
        passes = rule._passes_out(ctx)
    if b"optim" in data and b"step" in data:
        uses = rule._factory_uses(ctx)
    if b"step" in data and b"compile" in data:
        steppers = rule._steppers(ctx)
    if b"optim" in data and b"return" in data:
        factories = rule._factories(ctx)
    # what does not depend on the settings or the index is kept for the
    # rule's own run on this parse (the first look)
    source.__dict__["_fr004_shared"] = {k: v for k, v in ctx.cache.items() if k in _SHARED}
    if not writers and not passes and not factories and not uses and not tensorizers and not steppers:
        return None
    found: dict = {"writers": writers, "passes": passes}
    if steppers:
        found["steppers"] = steppers
    if tensorizers:
        found["tensorizers"] = tensorizers
    if factories:
        found["factories"] = factories
    if uses:
        found["factory_uses"] = uses
    return found


#: what FR004 needs to know of other modules: their lr writers, proven for
#: ``.fill_`` when every optimizer passed to them gets a tensor lr
#: (:mod:`codemods.analysis.lr_writers`)
LR_WRITERS = ProjectFact("lr", gather=index_facts, valid=lr_writers.valid, prove=lr_writers.prove, later=lr_writers.later, wanted=lr_writers.wanted)


class OptimizerScalars(Rule):
    code = "FR004"
    #: the trace causes its fix cures (the trace's cure table is made from these)
    cures = (CuresCause(OPTIMIZER_LR),)
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
of a fixed optimizer become `...["lr"].fill_(v)`, also inside a helper whose
parameter receives the optimizer at every visible call (`def set_lr(optimizer,
lr)`, or `self.opt` set from a constructor parameter of a class built here,
also through a function that hands back a torch optimizer it is given,
DeepSpeed's `self.optimizer = get_torch_optimizer(optimizer)`), or the
optimizer's `.param_groups` (DeepSpeed's `update_lr(param_groups, lrs)`). The
loop over the groups may be `for g in groups`, torch's own `for g, lr in
zip(groups, values)` or `for i, g in enumerate(groups)`. Optimizers whose lr
the same statement writes are fixed together, by the first one's finding.
An optimizer whose lr is a tensor already (DeepSpeed 407708cdb: the model
script's choice) with a float written over it gets only the `.fill_`.

A finding needs evidence that the lr changes between steps: a scheduler of
the optimizer, a write into its param groups in the module, or an lr writer
of another module of the run it is passed to. A constant lr compiles once
(pytorch/examples' RPC pipeline: 1 graph over 23 steps), and an optimizer
handed only to code outside the run may or may not see its lr change: both
are reported only with `--unproven`.

Across modules (a run over the project, through its index): an lr writer of
another module -- a function or class whose parameter's param groups get
`["lr"] = v`, also under a computed key such as `group[self.lr_field]` with
`lr_field="lr"` as the `__init__` default, or a function that only hands
its parameter to one, also from the closure it returns (open_clip's
`cosine_lr(optimizer, ...)`, whose `_lr_adjuster` calls
`assign_learning_rate(optimizer, lr)`) -- has its writes made
`.fill_` (a finding in its module) when the index proves that every
optimizer passed to it, in every file of the run, gets a tensor lr from plain
`--fix`; the constructor's fix is then safe. When some of them get it only
from an unsafe fix (an lr from `args.lr`; an optimizer built in a module
that does not compile and handed to a training loop of another module that
steps it compiled, open_clip's `main.py`), the writer's `.fill_` is unsafe
too, and so is the fix of every optimizer that shares the writer: applied
together with `--unsafe-fixes`, none without. A writer that is also given
optimizers that keep a float lr (open_clip's `cosine_lr`, given
`legacy_main.py`'s eagerly stepped AdamW too), or that files the index has
not seen may call, gets a tensor-aware write instead, the project's own cure
(3650e7b): `if isinstance(g["lr"], torch.Tensor): g["lr"].fill_(v) else:
g["lr"] = v` (`import torch` added when missing), safe on its own (a float
stays a float) and unsafe only with an optimizer whose tensor lr is; the
write must stand on a line of its own. Not proven (the constructor's fix
stays unsafe, the writer is left alone): a writer that uses the optimizer for
more than its param groups or reads an lr back, a call that passes the key,
a caller whose optimizer keeps a float lr or is also passed to other code, a
subclass or any other file of the run that mentions the writer, or, for a
write two of them share (two schedule factories of one helper), one of them.

An optimizer that loads a saved state (`opt.load_state_dict(...)`, torch's
`set_optimizer_state_dict(model, opt, ...)`: nanoGPT's resume) gets the
saved lr back, a float in a checkpoint written before the fix, and a plain
`.fill_` would crash on it: every write that reaches it, here or in a writer
of another module, or in a user of a proven factory, becomes tensor-aware
instead (a float lr stays a float and recompiles as before, until a
checkpoint written after the fix is loaded); one that shares its line with
other code leaves the finding report-only. A group added later
(`opt.add_param_group({"params": ..., "lr": 0.01})`, a layer unfrozen while
training) has its own lr made a tensor like the constructor's groups; one
added from a dict not visible here, or to an optimizer not resolved here,
leaves a fix that would `.fill_` report-only (its float lr would meet it).

The optimizer's class may be named (`torch.optim.AdamW`, any import or alias)
or reached through what the module shows: a name bound once to it, a
`functools.partial(<class>, ...)` (reported without a fix when the partial
itself passes `params`, `lr`, `foreach` or `capturable`), a dict literal
indexed by a constant (`OPTIMIZERS["sgd"](...)`), a function or `self.` method
without arguments returning it (`self.optimizer()(params, lr=...)`).

An lr that is not a constant visible here (`lr=args.lr`, `cfg["lr"]`, an
argument) is made a float and a tensor where it is passed,
`torch.tensor(float(args.lr))`, an unsafe fix: its value is not visible, and
a 0-d tensor the program fills itself would be replaced by a copy. (A group's
own lr not visible stays reported without a fix.)

Reported without a fix: an lr write that may give param groups different
values (`g["lr"] = lr * g["lr_scale"]`, `opt.param_groups[0]["lr"] = v`)
into an optimizer two of whose groups have no lr of their own: torch gives
them all the constructor's `lr` object, one tensor, and `.fill_` into one
group's lr writes them all (measured: every group ends with the value
written last; `tests/test_shared_lr_tensor.py`), and for the same reason a
scheduler of such an optimizer given a value per group (`LambdaLR(opt,
[f, g])`, `max_lr=[...]`): torch's schedulers write a tensor lr in place. An optimizer missing from the table, `CyclicLR`/`OneCycleLR` with
`cycle_momentum=True` (they write Python floats into momentum/betas every
step), `ReduceLROnPlateau` unless `--target-torch` is 2.10 or newer (older
releases put a float lr back), Adamax/NAdam with `foreach=True` unless the
target is 2.4+, and an lr write shared with an optimizer that cannot be made
a tensor (a `set_lr` helper also called for an optimizer built elsewhere, or
with an lr not visible here): `.fill_` would fail on that one's float, and
without `.fill_` the float comes back. An optimizer built here and stepped
eagerly that shares the write (`set_lr(opt_g, lr); set_lr(opt_d, lr)` with
only `opt_g` stepped compiled) gets a tensor lr too, in the same fix.
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
(`["lr"]`, `get_last_lr()`, `get_lr()`), the fix is unsafe; so it is when
the lr may be read another way (found by an audit of the safe fixes):
`print(optimizer)` / `str(optimizer)`, a group's `.get("lr")` or `.items()`,
`map(itemgetter("lr"), groups)`, `state_dict()` used for anything but
`torch.save` or a checkpoint dict, a scheduler's `state_dict()` or
`_last_lr`, a scheduler handed to a function (a logger that reads
`get_last_lr()`). The tensor is float32: values agree with the float lr to
about 7 digits, and torch's tensor-lr step computes its bias corrections in
tensors, so a long run's losses differ in the last digits printed at full
precision (the audit measured AdamW with a cosine schedule: 0.44750661 ->
0.44750658 at step 40; a float64 model differs from the 9th digit); this is
the cure PyTorch documents, and counted safe. A helper that is
already tensor-aware (`lr = g["lr"]; if isinstance(lr, torch.Tensor):
lr.fill_(v) else: g["lr"] = v`, as open_clip's; or `if is_tensor(g["lr"]): v
= tensor([v], ...)` before `g["lr"] = v`, as DeepSpeed's) neither reads the lr
back nor gets a `.fill_`: its float branch is never reached once the lr is a
tensor, and stays a plain write for an optimizer that keeps a float lr
(`.fill_` there would fail on it).

The fix is unsafe when an lr write it turns into `.fill_` also reaches an
optimizer stepped eagerly: that one's lr becomes a tensor too, and its eager
step reads it (the same value to about 7 digits; measured on 2.13 with a
`set_lr` helper of three SGDs, two stepped compiled: 4 → 2 graphs, same
output, tests/realworld/pos_set_lr_helper_shared.py).

The fix is also unsafe when the analysis cannot see every lr write: a
`["lr"] = v` into param groups of an optimizer not visible here (it may be
this one), or the optimizer passed to code outside the module (not torch's):
a float written there replaces the tensor (recompiles again). When the fix
would also make `.fill_` of writes of its own, such a write (one in this
module the analysis does not follow: `warm(opt.param_groups[:1], v)`) makes
it report-only: its float would meet the `.fill_` and fail. A writer in another module proven by the project
index (above) is the exception. The proof covers the files of the run: a file
outside it that passes a float-lr optimizer to the writer would meet `.fill_`
on a float, so run the tool over the whole project.

An optimizer handed to a function of another module of the run that steps
it inside a compiled region is stepped there too: a training loop
`train(model, optimizer, ...)` that compiles the closure a factory returns
(`make_train_step(model, optimizer)`), also through a field of what it is
handed (open_clip's `train_one_epoch(state)` compiling
`_make_train_step_no_accum_no_scaler(state.task, state.optimizer, ...)`,
`state = TrainState(optimizer=optimizer)` here). The constructor's fix is
safe only when that module does nothing else with it (`.step()`,
`.zero_grad()`, handed to another such function) and writes and reads no
lr; otherwise unsafe, as for any code the optimizer is passed to. When this
module also hands it to an lr writer of another module, the writer's
`.fill_` is proven only as an unsafe fix (the index proves the writer from
what each file shows alone, and a module that does not compile cannot show
that its optimizer gets a tensor lr from plain `--fix`).

An optimizer handed to a function that makes its lr a tensor (every
`["lr"] = v` there writes a tensor: `torch.tensor(...)`, or a name bound
so on every path, as open_clip's `tensorize_learning_rate`), of this module
or of another of the run, has no float lr to guard on: not reported, unless
a float write reaches it afterwards (then the cure is that write's `.fill_`).

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
    reads_project = True
    project_facts = (LR_WRITERS,)
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
        # built in another module, but stepped eagerly: nothing recompiles
        (
            "import torch\nfrom model import GPT\nmodel = torch.compile(GPT())\noptimizer = model.configure_optimizers(0.1, 6e-4)\n"
            "for it in range(10):\n    for g in optimizer.param_groups:\n        g['lr'] = 6e-4 * (1 - it / 10)\n    optimizer.step()\n"
        ),
        # made a tensor by a helper after the constructor (open_clip's
        # tensorize_learning_rate, 3650e7b), its schedule tensor-aware
        (
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.Adam(m.parameters(), lr=0.01)\n"
            "def tensorize(o):\n    for g in o.param_groups:\n        g['lr'] = torch.tensor(g['lr'])\n"
            "def set_lr(o, v):\n    for g in o.param_groups:\n        lr = g['lr']\n        if isinstance(lr, torch.Tensor):\n"
            "            lr.fill_(v)\n        else:\n            g['lr'] = v\n"
            "tensorize(opt)\n@torch.compile\ndef f():\n    opt.step()\nfor i in range(3):\n    set_lr(opt, 0.01 / (i + 1))\n    f()\n"
        ),
        # nothing changes the lr (pytorch/examples' rpc pipeline: measured 1 graph over 23 steps)
        (
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.05)\nopt.step = torch.compile(opt.step)\n"
            "for i in range(10):\n    opt.step()\n"
        ),
    )
    invalid = (
        # built in another module (nanoGPT's `model.configure_optimizers`), its lr
        # written here as a float, its step compiled: reported, no fix (the
        # constructor's half of the cure is not in this file)
        Example(
            "import torch\nfrom model import GPT\nmodel = GPT()\noptimizer = model.configure_optimizers(0.1, 6e-4)\n"
            "@torch.compile\ndef opt_step():\n    optimizer.step()\n"
            "for it in range(10):\n    for g in optimizer.param_groups:\n        g['lr'] = 6e-4 * (1 - it / 10)\n    opt_step()\n"
        ),
        # held in a dataclass field and handed to the factory whose closure is
        # compiled and steps it (open_clip 0b07760's `TrainState(optimizer=...)`,
        # `torch.compile(make_step(state.model, state.optimizer))`)
        Example(
            "import dataclasses\nimport torch\n@dataclasses.dataclass\nclass TrainState:\n    model: torch.nn.Module\n    optimizer: torch.optim.Optimizer\n"
            "def make_step(model, optimizer):\n    def train_step(x):\n        model(x).sum().backward()\n        optimizer.step()\n    return train_step\n"
            "m = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "state = TrainState(m, optimizer=opt)\nstep = torch.compile(make_step(state.model, state.optimizer))\n",
            "import dataclasses\nimport torch\n@dataclasses.dataclass\nclass TrainState:\n    model: torch.nn.Module\n    optimizer: torch.optim.Optimizer\n"
            "def make_step(model, optimizer):\n    def train_step(x):\n        model(x).sum().backward()\n        optimizer.step()\n    return train_step\n"
            "m = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "state = TrainState(m, optimizer=opt)\nstep = torch.compile(make_step(state.model, state.optimizer))\n",
        ),
        # made a tensor by a helper only under a test the construction is not
        # under (open_clip before 0b07760: native AdamW on CUDA only): whether
        # the test holds when the step is compiled is not followed (--unproven)
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "def tensorize(o):\n    for g in o.param_groups:\n        g['lr'] = torch.tensor(g['lr'])\n"
            "if on_cuda:\n    tensorize(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "def tensorize(o):\n    for g in o.param_groups:\n        g['lr'] = torch.tensor(g['lr'])\n"
            "if on_cuda:\n    tensorize(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            unproven=True,
        ),
        # nothing visible changes the lr: a constant lr compiles once, reported only with --unproven
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            unproven=True,
        ),
        # a scheduler of it changes the lr: a default finding
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
        ),
        # ... the lr from a config (`cfg.lr`, `args.lr`): made a float and a
        # tensor where it is passed; unsafe, its value is not visible
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=cfg.lr)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(float(cfg.lr)))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            unsafe=True,
        ),
        # the class through functools.partial / a dict
        Example(
            "import functools\nimport torch\nm = torch.nn.Linear(2, 2)\nOpt = functools.partial(torch.optim.AdamW, weight_decay=0.0)\n"
            "opt = Opt(m.parameters(), lr=0.1)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n@torch.compile\ndef f():\n    opt.step()\n",
            "import functools\nimport torch\nm = torch.nn.Linear(2, 2)\nOpt = functools.partial(torch.optim.AdamW, weight_decay=0.0)\n"
            "opt = Opt(m.parameters(), lr=torch.tensor(0.1))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n@torch.compile\ndef f():\n    opt.step()\n",
        ),
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nOPTS = {'sgd': torch.optim.SGD}\nopt = OPTS['sgd'](m.parameters(), lr=0.1)\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nOPTS = {'sgd': torch.optim.SGD}\nopt = OPTS['sgd'](m.parameters(), lr=torch.tensor(0.1))\ns = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "@torch.compile\ndef f():\n    opt.step()\n",
        ),
        # an lr helper called with the optimizer: its write becomes `.fill_`
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'] = lr\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'].fill_(lr)\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
        ),
        # ... also called with an optimizer stepped eagerly: its lr becomes a tensor too (unsafe)
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "other = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'] = lr\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\nset_lr(other, 0.05)\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "other = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'].fill_(lr)\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\nset_lr(other, 0.05)\n",
            unsafe=True,
        ),
        # ... also one whose own lr comes from a config (unsafe, as above)
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "other = torch.optim.SGD(m.parameters(), lr=cfg.lr)\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'] = lr\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\nset_lr(other, 0.05)\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "other = torch.optim.SGD(m.parameters(), lr=torch.tensor(float(cfg.lr)))\n"
            "def set_lr(o, lr):\n    for g in o.param_groups:\n        g['lr'].fill_(lr)\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\nset_lr(other, 0.05)\n",
            unsafe=True,
        ),
        # a tensor-aware helper (open_clip's): its float branch stays a plain write
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "def set_lr(o, v):\n    for g in o.param_groups:\n        lr = g['lr']\n        if isinstance(lr, torch.Tensor):\n"
            "            lr.fill_(v)\n        else:\n            g['lr'] = v\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "def set_lr(o, v):\n    for g in o.param_groups:\n        lr = g['lr']\n        if isinstance(lr, torch.Tensor):\n"
            "            lr.fill_(v)\n        else:\n            g['lr'] = v\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
        ),
        # ... also when the test has another condition: `not isinstance(...) and ...`
        # keeps a tensor lr out of the body (the else may see either)
        Example(
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "def set_lr(o, v):\n    for g in o.param_groups:\n        if not isinstance(g['lr'], torch.Tensor) and v is not None:\n"
            "            g['lr'] = v\n        elif v is not None:\n            g['lr'].fill_(v)\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
            "import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "def set_lr(o, v):\n    for g in o.param_groups:\n        if not isinstance(g['lr'], torch.Tensor) and v is not None:\n"
            "            g['lr'] = v\n        elif v is not None:\n            g['lr'].fill_(v)\n"
            "@torch.compile\ndef f():\n    opt.step()\nset_lr(opt, 0.05)\n",
        ),
        # passed to code not visible here: unsafe
        Example(
            "import torch\nfrom sched import Warmup\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "s = Warmup(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nfrom sched import Warmup\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "s = Warmup(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            unsafe=True,
            unproven=True,
        ),
        # ... a star-imported name is such code too (not a builtin)
        Example(
            "import torch\nfrom sched import *\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "s = Warmup(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            "import torch\nfrom sched import *\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))\n"
            "s = Warmup(opt)\n@torch.compile\ndef f():\n    opt.step()\n",
            unsafe=True,
            unproven=True,
        ),
    )

    # ------------------------------------------------------------------ check
    def check(self, ctx) -> Iterable[Finding]:
        out = (self._project_fills(ctx) + self._factory_findings(ctx)) if ctx.project is not None else []
        return out + self._check_module(ctx)

    def _check_module(self, ctx) -> List[Finding]:
        steppers = ctx.project is not None and ctx.project.table("lr_steppers")
        if b"step" not in ctx.source.data and not steppers:
            return []  # every finding needs a `.step` run in a compiled region (here, or by a function of another module)
        shared = ctx.source.__dict__.get("_fr004_shared")
        if shared:  # the index's look at this same parse (index_facts)
            for key, value in shared.items():
                ctx.cache.setdefault(key, value)
        model = ctx.model
        if not model.compile_sites and not steppers:
            return []  # early exit before walking the module: nothing here is stepped compiled
        built = self._constructions(ctx)
        elsewhere = self._built_elsewhere(ctx) if b"param_groups" in ctx.source.data else []
        if not built:
            return elsewhere
        self._mark_stepped(ctx, built)
        region = [b for b in built if b.kind == "optimizer" and (b.stepped_at is not None or any(s.stepped_at is not None for s in b.schedulers))]
        region = [b for b in region if not self._tensorized(ctx, b)]
        if not region:
            return elsewhere
        reach = self._write_reach(ctx)
        # an lr write shared by several optimizers (a `set_lr(opt, lr)` helper)
        # becomes `.fill_` only if every optimizer it reaches gets a tensor lr:
        # those stepped eagerly, built here, get one too (their share of the
        # fix is unsafe: an eager step reads a tensor lr); drop the
        # optimizers that cannot, until nothing changes
        eager = self._eager_companions(reach, region, built)
        pool = region + eager
        results: Dict[_Built, List[Finding]] = {}
        converted = set(pool)
        held: Dict[_Built, Tuple[ast.Assign, Optional[_Built]]] = {}
        changed = True
        while changed:
            changed = False
            for write, (reached, complete) in reach.items():
                if not reached & converted or (complete and reached <= converted):
                    continue
                rest = sorted(reached - converted, key=lambda o: (o.call.lineno, o.call.col_offset))
                other = rest[0] if rest else None
                for b in reached & converted:
                    held[b] = (write, other)
                    converted.discard(b)
                    changed = True
            for b in pool:
                if b in converted:
                    if b not in results:
                        results[b] = self._optimizer_findings(ctx, b, built)
                    if not any(f.fix is not None for f in results[b]):
                        converted.discard(b)
                        changed = True
        for b, (write, other) in held.items():
            if b in eager:
                continue  # an eager companion has no finding of its own
            whose = f"`{other.label}` (line {other.call.lineno}), which is not made a tensor" if other is not None else "optimizers not visible here"
            results[b] = [self.finding(ctx, b.call, (
                f"{self._lead(b)}; its lr is written as a float at line {write.lineno}, which also writes the lr of "
                f"{whose}, so `.fill_` cannot be used there (no automatic fix)"
            ))]
        self._share_fixes(ctx, pool, reach, results, eager)
        # what the project index learns of this module: the optimizers whose
        # lr plain --fix makes a tensor (a safe fix, or unsafe only because
        # the optimizer is passed to code of another module)
        fixable: Dict[_Built, bool] = ctx.cache.get("fr004_fixable", {})
        ok = _together(reach, fixable, held, {b for b in region if fixable.get(b) and b not in held})
        # ... and those it makes a tensor only with --unsafe-fixes
        anyhow = _together(reach, fixable, held, {b for b in region if b not in held and any(f.fix is not None for f in results.get(b, ()))})
        ctx.cache["fr004_converted"] = ok
        ctx.cache["fr004_converted_unsafe"] = anyhow - ok
        ctx.cache["fr004_results"] = results
        out: List[Finding] = []
        for b in region:
            found = results.get(b, [])
            if found and self._lr_change(ctx, b) is None:
                # a constant lr compiles once: nothing to prove a recompile (--unproven)
                quiet = "; nothing here changes its lr (no scheduler, no write into its param groups): a constant lr compiles once"
                found = [dataclasses.replace(f, message=f.message + quiet, proven=False) for f in found]
            maybe = self._maybe_tensorized(ctx, b) if found else None
            if maybe is not None:
                # whether the test that runs the tensorizer holds when the step
                # is compiled is not followed (--unproven)
                quiet = f"; line {maybe.lineno} makes its lr a tensor under a test (`{ast.unparse(maybe)}`): a float only when that test fails"
                found = [dataclasses.replace(f, message=f.message + quiet, proven=False) for f in found]
            out.extend(found)
        return out + elsewhere

    def _built_elsewhere(self, ctx) -> List[Finding]:
        """Report-only findings for an optimizer built outside this module
        (``optimizer = model.configure_optimizers(...)`` with ``GPT`` imported:
        nanoGPT's train.py and model.py) whose ``.step()`` runs compiled here
        and whose lr this module writes as a float (``param_group["lr"] =
        lr``): the same recompile as a construction here, but the constructor's
        ``lr=`` is not in this file, and ``.fill_`` here without it would
        crash, so the finding names both halves of the cure."""
        stepped: Dict[str, int] = {}
        for receiver, line in self._stepped(ctx):
            if isinstance(receiver, ast.Name):
                stepped.setdefault(receiver.id, line)
        if not stepped:
            return []
        out: List[Finding] = []
        for write in self._lr_assigns(ctx):
            holder = self._groups_of(ctx, write)
            if not isinstance(holder, ast.Name) or holder.id not in stepped:
                continue
            value = self._single_value(ctx, holder)
            if not isinstance(value, ast.Call) or self._resolve(ctx, holder) is not None or self._made_here(ctx, value):
                continue  # not a call's result, or one this module shows
            made = self._text(ctx).code(value)
            proven = self._proven_factory(ctx, value)
            loads = next((call for call, expr in self._state_loads(ctx) if isinstance(expr, ast.Name) and expr.id == holder.id), None)
            if proven is not None and write in self._lr_assigns(ctx) and (loads is None or _alone(ctx.source, write)):
                label, home = proven
                how = "write it in place with `.fill_`" if loads is None else (
                    f"line {loads.lineno} loads a saved state, whose lr is a float if it was saved before the fix: "
                    "write it in place with `.fill_` when it is a tensor"
                )
                out.append(self._fill_finding(
                    ctx, write,
                    f"the lr of `{holder.id}` is written as a float here while its `.step()` runs compiled (line {stepped[holder.id]}); "
                    f"`{holder.id}` is built by {label}, whose lr becomes a 0-d tensor there: {how}",
                    aware=loads is not None,
                    needs=(home,) if home else (),
                ))
                continue
            out.append(self.finding(ctx, write, (
                f"the lr of `{holder.id}` is written as a float here while its `.step()` runs compiled (line {stepped[holder.id]}), "
                f"and `{holder.id}` is built outside this module (`{made}`, line {value.lineno}): torch guards a float lr, so new "
                "values recompile (on torch 2.6+ once before it turns dynamic, every time under dynamic=False or on 2.5 and older); "
                "make the constructor's `lr=` a 0-d tensor where it is built (`lr=torch.tensor(lr)`) and write `.fill_(...)` here "
                "(no automatic fix: the construction is in another module)"
            )))
        return out

    def _proven_factory(self, ctx, call: ast.Call) -> Optional[Tuple[str, str]]:
        """("`GPT.configure_optimizers` of module `model`", its file) when
        ``call`` runs a factory of another module that the project index
        proved (its construction's lr becomes a tensor, every user's writes
        ``.fill_``)."""
        project = ctx.project
        if project is None or not project.table("lr_factories"):
            return None
        factory = self._imported_factory(ctx, call)
        if factory is None:
            return None
        q, method = factory
        hit = project.lookup("lr_factories", ctx.path, q)
        if hit is None or method not in hit[1]:
            return None
        name = q.rpartition(".")[2]
        return f"`{name}{'.' + method if method else ''}` of module `{hit[0][1]}`", project.path_of(hit[0]) or ""

    def _made_here(self, ctx, call: ast.Call) -> bool:
        """Does ``call`` run code of this module (a function or class defined
        here, a method of an instance of one)?"""
        model, func = ctx.model, call.func
        if isinstance(func, ast.Name):
            return model.resolve_function(func) is not None or func.id in model.classes
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            receiver = func.value
            return receiver.id == "self" or model.module_class_of(receiver) is not None or model.instance_class(receiver) is not None
        return False

    def _lr_change(self, ctx, b: _Built) -> Optional[str]:
        """What visibly changes the lr of ``b`` between steps (the evidence a
        default finding needs), or None: a scheduler of it, a write into its
        param groups here, or an lr writer of another module of the run it is
        passed to (project index), proven for ``.fill_`` or not."""
        if b.schedulers:
            s = b.schedulers[0]
            return f"`{s.short}` (line {s.call.lineno})"
        for node, (reached, _) in self._write_reach(ctx, every=True).items():
            if b in reached:
                return f"the write on line {node.lineno}"
        project = ctx.project
        if project is None or not project.table("lr_writers"):
            return None
        for call in self._escapes(ctx, b):
            for q in sorted(ctx.model.qualified_names(call.func, visible=True)):
                writer = project.resolve_in("lr_writers", ctx.path, q)
                if writer is not None:
                    return f"`{writer[0]}` of module `{writer[1]}`"
        return None

    def _eager_companions(self, reach, region: List[_Built], built: List[_Built]) -> List[_Built]:
        """The optimizers built here and not stepped in a compiled region
        whose lr a write also reaching a region's optimizer writes, when that
        write's optimizers are all visible (``set_lr(opt_g, lr); set_lr(opt_d,
        lr)`` with only ``opt_g`` stepped compiled): the write becomes
        ``.fill_`` only if their lr is a tensor too."""
        inside = set(region)
        out: List[_Built] = []
        for reached, complete in reach.values():
            if not complete or not reached & inside:
                continue
            for b in sorted(reached - inside, key=lambda o: (o.call.lineno, o.call.col_offset)):
                if b.kind == "optimizer" and b in built and b not in out:
                    out.append(b)
        return out

    def _share_fixes(self, ctx, region: List[_Built], reach, results: Dict[_Built, List[Finding]], eager: Sequence[_Built] = ()) -> None:
        """Optimizers whose lr the same statement writes are fixed together,
        by one finding (the first optimizer's): applying one without the other
        would leave `.fill_` meeting a float.  An optimizer stepped eagerly
        (``eager``) among them makes the fix unsafe: its eager step then
        reads a 0-d tensor lr (the same value to about 7 digits; on a GPU a
        tensor lr the step reads as a number)."""
        leader: Dict[_Built, _Built] = {b: b for b in region}

        def root(b: _Built) -> _Built:
            while leader[b] is not b:
                b = leader[b]
            return b

        order = {b: i for i, b in enumerate(region)}
        for reached, _ in reach.values():
            members = sorted((b for b in reached if b in leader), key=order.__getitem__)
            for b in members[1:]:
                a, c = root(members[0]), root(b)
                if a is not c:
                    first, second = (a, c) if order[a] < order[c] else (c, a)
                    leader[second] = first
        groups: Dict[_Built, List[_Built]] = {}
        for b in region:
            groups.setdefault(root(b), []).append(b)
        for head, members in groups.items():
            if len(members) < 2:
                continue
            fixed = [(b, i, f) for b in members for i, f in enumerate(results.get(b, [])) if f.fix is not None]
            if len(fixed) < 2:
                continue
            edits: List[Edit] = []
            seen: Set[int] = set()
            for _, _, f in fixed:
                for e in f.fix.edits:  # type: ignore[union-attr]
                    if id(e) not in seen:
                        seen.add(id(e))
                        edits.append(e)
            unsafe = any(f.fix.safety is Safety.UNSAFE for _, _, f in fixed)  # type: ignore[union-attr]
            first_b, first_i, first_f = fixed[0]
            stepped_eagerly = [b for b, _, _ in fixed if b in eager]
            message = first_f.message
            if stepped_eagerly:
                unsafe = True
                named = ", ".join(f"`{b.label}` (line {b.call.lineno})" for b in stepped_eagerly)
                message += (
                    f"; the same lr write reaches {named}, stepped eagerly, whose lr becomes a 0-d tensor too"
                    f" (unsafe: its eager step reads a tensor lr)"
                )
            results[first_b][first_i] = dataclasses.replace(
                first_f, message=message, fix=dataclasses.replace(first_f.fix, edits=tuple(edits), safety=Safety.UNSAFE if unsafe else Safety.SAFE)
            )
            for b, i, f in fixed[1:]:
                results[b][i] = dataclasses.replace(
                    f, fix=None, fixed_by=results[first_b][first_i], message=f"{f.message}; fixed with `{first_b.label}` (line {first_b.call.lineno}): the same statement writes both lrs"
                )

    # ------------------------------------------------------------ collection
    def _constructions(self, ctx) -> List[_Built]:
        if "fr004_built" in ctx.cache:
            return ctx.cache["fr004_built"]
        model, source = ctx.model, ctx.source
        found: List[_Built] = []
        # every call is looked at, in the index's order; the few constructions
        # are put in source order at the end (a call builds at most one)
        for node in source.nodes(ast.Call):
            names = model.qualified_names(node.func, visible=True)
            via: Optional[ast.AST] = None
            if not any(q.startswith(OPTIM_PREFIX) for q in names):
                # a class reached through `partial(...)`, a dict or a factory
                # (any other callee, `a.b`, is an optimizer by its names alone,
                # and none of these names is one)
                if not isinstance(node.func, _FOLLOWED):  # type: ignore[attr-defined]
                    continue
                cls_of = self._optimizer_class(ctx, node.func, 0)  # type: ignore[attr-defined]
                if cls_of is None:
                    continue
                names, via = {cls_of[0]}, cls_of[1]
            for q in sorted(names):
                kind = "scheduler" if q.startswith(SCHED_PREFIX) else ("optimizer" if is_optimizer_name(q) else None)
                if kind is None or (via is not None and kind != "optimizer"):
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
                           sched_row=scheduler_row(q) if kind == "scheduler" else None,
                           via=via)
                )
                break
        found.sort(key=lambda b: _source_key(b.call))
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

    def _optimizer_class(self, ctx, expr: ast.AST, depth: int) -> Optional[Tuple[str, Optional[ast.AST]]]:
        """(qualified name, the ``partial(...)`` call or None) of the one
        ``torch.optim`` optimizer class ``expr`` evaluates to, followed through
        what the module shows: a name bound once (``Cls = ...``), a
        ``functools.partial(<class>, ...)``, a dict literal bound once indexed
        by a constant (``OPTIMIZERS["sgd"]``), and a call of a function or
        ``self.`` method of this module with no arguments whose every
        ``return`` gives the same class (``self.optimizer()``).  None when it
        is not one known optimizer class."""
        if depth > 4:
            return None
        model = ctx.model
        names = model.qualified_names(expr, visible=True)
        optim = {q for q in names if is_optimizer_name(q)}
        if optim:
            return (optim.pop(), None) if len(optim) == 1 and len(names) == 1 else None
        if isinstance(expr, ast.Name):
            value = self._single_value(ctx, expr)
            return self._optimizer_class(ctx, value, depth + 1) if value is not None else None
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, ast.Constant):
            table = self._single_value(ctx, expr.value)
            if not isinstance(table, ast.Dict) or self._subscript_stored(ctx, expr.value.id):
                return None
            entries = [v for k, v in zip(table.keys, table.values) if k is None or (isinstance(k, ast.Constant) and k.value == expr.slice.value)]
            if len(entries) != 1 or None in table.keys:
                return None  # missing, given twice, or a `**other` that may override it
            return self._optimizer_class(ctx, entries[0], depth + 1)
        if not isinstance(expr, ast.Call):
            return None
        if model.qualified_names(expr.func, visible=True) & {"functools.partial"}:
            if not expr.args or isinstance(expr.args[0], ast.Starred):
                return None
            inner = self._optimizer_class(ctx, expr.args[0], depth + 1)
            if inner is None or inner[1] is not None:
                return None
            return inner[0], expr
        if expr.args or expr.keywords:
            return None
        fn = self._callee_def(ctx, expr)
        if fn is None or self._overridden(ctx, expr):
            return None
        returns = [n for n in _own_nodes(fn) if isinstance(n, ast.Return)]
        classes = {self._optimizer_class(ctx, r.value, depth + 1) if r.value is not None else None for r in returns}
        if len(classes) != 1:
            return None
        only = classes.pop()
        return only if only is not None and only[1] is None else None

    @staticmethod
    def _overridden(ctx, call: ast.Call) -> bool:
        """``self.m()`` where a subclass in this module defines its own ``m``."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
            return False
        cls = ctx.source.enclosing(call, ast.ClassDef)
        for other in ctx.model.classes.values():
            if other is not cls and any(dotted_name(base) == getattr(cls, "name", None) for base in other.bases):
                if ctx.model.method(other, func.attr) is not None:
                    return True
        return False

    @staticmethod
    def _single_value(ctx, name: ast.Name) -> Optional[ast.AST]:
        """The value of a name bound exactly once, by ``name = value``."""
        bindings = [b for b in ctx.model.scopes.bindings_of(name) if b.kind != "del"]
        if len(bindings) == 1 and bindings[0].kind in ("assign", "annassign") and bindings[0].value is not None:
            stmt = bindings[0].stmt
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                return bindings[0].value
            if isinstance(stmt, ast.AnnAssign):
                return bindings[0].value
        return None

    @staticmethod
    def _subscript_stored(ctx, name: str) -> bool:
        """Does the module store into ``name[...]`` anywhere (``TABLE[k] = v``, ``del TABLE[k]``)?"""
        for node in ctx.source.nodes(ast.Subscript):
            if isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name) and node.value.id == name:  # type: ignore[attr-defined]
                return True
        return False

    def _resolve(self, ctx, expr: ast.AST) -> Optional[_Built]:
        """The construction a name (``opt``) or attribute (``self.opt``) is bound to."""
        by_call: Dict[ast.Call, _Built] = ctx.cache["fr004_by_call"]
        if isinstance(expr, ast.Call):
            return by_call.get(expr)
        if isinstance(expr, ast.Name):
            values = list(ctx.model.assigned_values(expr))
            built = [by_call[v] for v in values if isinstance(v, ast.Call) and v in by_call]
            if len(set(built)) > 1:
                # `optimizer = AdamW(head...)`, later `optimizer = AdamW(model...)`
                # (a linear probe, then fine-tuning): which one a use
                # reaches is not followed (audit: the second kept a float
                # lr and the shared write's `.fill_` crashed)
                return None
            if built:
                return built[0]
            if not self._built_in_functions(ctx):
                return None
            values = list(ctx.model.assigned_values(expr))
            if len(values) == 1 and isinstance(values[0], ast.Call):
                # `optimizer = model.configure_optimizers(...)` (nanoGPT): a
                # method or function of this module that returns one construction
                return self._returned(ctx, values[0], 0)
            return None
        name = dotted_name(expr)
        if name is None:
            return None
        cls = ctx.source.enclosing(expr, ast.ClassDef) if name.startswith("self.") else None
        if cls is None and isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id != "self":
            # `trainer.opt` with `trainer = Trainer(...)`, a class of this module
            # that sets `self.opt = <optimizer>`
            value = self._single_value(ctx, expr.value)
            owner = ctx.model.classes.get(dotted_name(value.func) or "") if isinstance(value, ast.Call) else None
            if owner is not None:
                for b in ctx.cache["fr004_built"]:
                    if b.binding == f"self.{expr.attr}" and b.cls is owner:
                        return b
        for b in ctx.cache["fr004_built"]:
            if b.binding == name and (b.cls is cls if name.startswith("self.") else True):
                return b
        return None

    @staticmethod
    def _built_in_functions(ctx) -> bool:
        """Is an optimizer built inside a function or method of this module
        (only then can a call return one)?"""
        held = ctx.cache.get("fr004_in_functions")
        if held is None:
            held = ctx.cache["fr004_in_functions"] = any(
                b.kind == "optimizer" and ctx.source.enclosing(b.call, _DEFS) is not None for b in ctx.cache["fr004_built"]
            )
        return held

    def _returned(self, ctx, call: ast.Call, depth: int) -> Optional[_Built]:
        """The one construction every ``return`` of the function or method
        ``call`` runs gives (``return optimizer``, ``optimizer`` bound to
        ``torch.optim.AdamW(...)`` in it): a function of this module, a
        ``self.`` method, or a method of a module-level instance of a class
        of this module (``model.configure_optimizers(...)``, ``model =
        GPT(...)``); None when it returns anything else."""
        if depth > 3:
            return None
        fn = self._callee_def(ctx, call)
        func = call.func
        if fn is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            cls = ctx.model.module_class_of(func.value) or ctx.model.instance_class(func.value)
            fn = ctx.model.method(cls, func.attr) if cls is not None else None
        if fn is None:
            return None
        return self._returned_by(ctx, fn, depth)

    def _returned_by(self, ctx, fn: ast.AST, depth: int = 0) -> Optional[_Built]:
        """The one construction every ``return`` of ``fn`` gives (see :meth:`_returned`)."""
        returns = [n for n in _own_nodes(fn) if isinstance(n, ast.Return)]
        found = set()
        for r in returns:
            value = r.value
            b = None
            if isinstance(value, ast.Call):
                b = self._resolve(ctx, value) or self._returned(ctx, value, depth + 1)
            elif isinstance(value, ast.Name):
                b = self._resolve(ctx, value)
            found.add(b)
        if len(found) != 1:
            return None
        return found.pop()

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
        return ctx.model.called_def(call.func)

    def _stepped(self, ctx) -> List[Tuple[ast.AST, int]]:
        """(receiver, line) of every ``x.step()`` run compiled: called in a
        compiled function or one it calls, then ``opt.step`` compiled itself
        (``opt.step = torch.compile(opt.step)``); computed once per file."""
        found = ctx.cache.get("fr004_stepped")
        if found is None:
            found = []
            for fn in self._region_functions(ctx):
                for call in _calls_in(fn):
                    func = call.func
                    if isinstance(func, ast.Attribute) and func.attr == "step":
                        found.append((func.value, call.lineno))
            for site in ctx.model.compile_sites:
                t = site.target
                if isinstance(t, ast.Attribute) and t.attr == "step":
                    found.append((t.value, site.node.lineno))  # type: ignore[attr-defined]
            ctx.cache["fr004_stepped"] = found
        return found

    def _mark_stepped(self, ctx, built: List[_Built]) -> None:
        for receiver, line in self._stepped(ctx):
            b = self._resolve(ctx, receiver)
            # a parameter (a factory's `optimizer`, stepped by the closure it
            # returns): the optimizers its function's calls pass
            reached = (b,) if b is not None else sorted(self._reaching(ctx, receiver, 0)[0], key=lambda o: (o.call.lineno, o.call.col_offset))
            for b in reached:
                if b.stepped_at is None:
                    b.stepped_at = line
        project = ctx.project
        if project is None or not project.table("lr_steppers"):
            return
        for b in built:  # handed to a function of another module that steps it compiled
            if b.kind != "optimizer" or b.stepped_at is not None:
                continue
            hit = self._stepper_call(ctx, b)
            if hit is not None:
                call, name, key, entry = hit
                b.stepped_at = call.lineno
                b.stepped_elsewhere = f"by `{name}` of module `{key[1]}`, given it on line {call.lineno}"
                b.feeds_path, b.feeds = project.path_of(key) or "", tuple(entry["compiled"])

    def _stepper_call(self, ctx, b: _Built, clean: bool = False) -> Optional[Tuple[ast.Call, str, ModuleKey, dict]]:
        """(call, function, module, its entry) of the first call here that hands ``b``, at
        its slot, to a function of another module that steps it inside a
        compiled region (project index ``lr_steppers``; with ``clean``, one
        that does nothing else with it)."""
        project = ctx.project
        if project is None or not project.table("lr_steppers"):
            return None
        names = ctx.cache.get("fr004_stepper_names")
        if names is None:
            names = ctx.cache["fr004_stepper_names"] = {name for found in project.table("lr_steppers").values() for name in found}
        for call, slot, fld in self._handoffs(ctx, b):
            func = call.func
            if (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None) not in names:
                continue
            for q, (key, entry) in self._index_entries(ctx, call, "lr_steppers"):
                if (entry["clean"] or not clean) and lr_writers.hands_over(entry, slot, fld):
                    return call, q.rpartition(".")[2], key, entry
        return None

    def _handoffs(self, ctx, b: _Built) -> List[Tuple[ast.Call, object, str]]:
        """(call, slot, field) of every call here, in source order, that hands
        ``b`` over plainly: as its argument at ``slot`` (a position before
        any ``*args``, or a keyword), field "", or as what the keyword
        ``field`` gave the name passed at ``slot`` (``state =
        TrainState(optimizer=optimizer)``, then ``train_one_epoch(state)``).
        A function of another module that steps what it gets at that slot
        (:func:`codemods.analysis.lr_writers.hands_over`) steps ``b``."""
        handed = ctx.cache.get("fr004_handed")
        if handed is None:
            handed = ctx.cache["fr004_handed"] = []
            for call in _source_order(ctx.source.nodes(ast.Call)):
                slots: List[Tuple[object, ast.AST]] = []
                for i, a in enumerate(call.args):  # type: ignore[attr-defined]
                    if isinstance(a, ast.Starred):
                        break
                    slots.append((i, a))
                slots += [(kw.arg, kw.value) for kw in call.keywords if kw.arg is not None]  # type: ignore[attr-defined]
                for slot, arg in slots:
                    if not isinstance(arg, (ast.Name, ast.Attribute)):
                        continue
                    target = self._resolve(ctx, arg)
                    if target is not None:
                        handed.append((call, slot, "", target))
                        continue
                    holder = self._field_holder(ctx, arg)
                    for kw in holder.keywords if holder is not None else ():
                        if kw.arg is not None and isinstance(kw.value, (ast.Name, ast.Attribute)):
                            target = self._resolve(ctx, kw.value)
                            if target is not None:
                                handed.append((call, slot, kw.arg, target))
        return [(call, slot, fld) for call, slot, fld, target in handed if target is b]

    @staticmethod
    def _index_entries(ctx, call: ast.Call, table: str) -> Iterator[Tuple[str, Tuple[ModuleKey, dict]]]:
        """(qualified name, (module, entry)) of each entry of the project
        index's ``table`` that the callee of ``call`` may name."""
        for q in sorted(ctx.model.qualified_names(call.func, visible=True)):
            hit = ctx.project.lookup(table, ctx.path, q)
            if hit is not None:
                yield q, hit

    @staticmethod
    def _field_holder(ctx, holder: ast.AST) -> Optional[ast.Call]:
        """The call ``holder``, a name bound once, was bound to (``state =
        TrainState(task=task, optimizer=optimizer)``: what its fields were
        given by keyword); None otherwise."""
        if not isinstance(holder, ast.Name):
            return None
        bindings = [b for b in ctx.model.scopes.bindings_of(holder) if b.kind != "del"]
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or not isinstance(bindings[0].value, ast.Call):
            return None
        return bindings[0].value

    # ---------------------------------------------------------------- values
    def _value(self, ctx, expr: ast.AST, depth: int = 0, detail: bool = True) -> Tuple[str, Optional[str]]:
        """("tensor"|"float"|"int"|"unknown", detail); without ``detail``, an
        unknown value's text is not made (it needs the file's tokens)."""
        model = ctx.model
        if isinstance(expr, ast.Call) and model.qualified_names(expr.func, visible=True) & TENSOR_MAKERS:
            return "tensor", None
        kind = number_kind(expr)
        if kind is not None:
            return kind, None
        if isinstance(expr, ast.Name):
            # one binding in its scope, `NAME = <value>` (a `del` binds nothing)
            bindings = [b for b in model.scopes.bindings_of(expr) if b.kind != "del"]
            if len(bindings) == 1 and bindings[0].kind == "assign":
                assign = bindings[0].stmt
                if isinstance(assign, ast.Assign) and len(assign.targets) == 1:
                    inner = self._value(ctx, assign.value, depth + 1, detail)
                    if inner[0] in ("float", "int", "tensor"):
                        return inner[0], f"constant `{expr.id}`"
            root = self._param_root(ctx, expr) if depth < 3 else None
            if root is not None:
                # a parameter (`learning_rate` of nanoGPT's configure_optimizers):
                # what every call of its function in this module passes
                passed = self._passed_everywhere(ctx, *root)
                kinds = {self._value(ctx, v, depth + 1, detail)[0] for v in passed or []}
                if passed and len(kinds) == 1 and kinds <= {"float", "int"}:
                    return kinds.pop(), f"`{expr.id}`, given a number at every call (line {passed[0].lineno})"  # type: ignore[attr-defined]
                assumed = ctx.cache.get("fr004_assumed", {}).get((id(root[0]), root[1].arg))
                if passed is None and assumed is not None:
                    # a factory's lr parameter, given a number by every call in
                    # the other modules of the run (project index)
                    return assumed, f"`{expr.id}`, given a {assumed} at every call in other modules"
        return "unknown", (self._text(ctx).code(expr) if detail else None)

    def _passed_everywhere(self, ctx, fn: ast.AST, param: ast.arg) -> Optional[List[ast.AST]]:
        """What every call of ``fn`` in this module passes for ``param`` (a
        function by its name, a class's ``__init__`` by its constructions, a
        method through ``self.m(...)`` or an instance of its class,
        ``model.configure_optimizers(...)``); None when a call passes nothing
        plainly, a use is not a call, or there is no call."""
        owner = ctx.source.parent(fn)
        calls: Optional[List[Tuple[ast.Call, int]]]
        if isinstance(owner, ast.ClassDef) and getattr(fn, "name", "") != "__init__":
            name = fn.name  # type: ignore[attr-defined]
            calls = []
            for node in ctx.source.nodes(ast.Attribute):
                if node.attr != name or not isinstance(node.value, ast.Name):  # type: ignore[attr-defined]
                    continue
                receiver = node.value  # type: ignore[attr-defined]
                cls = ctx.source.enclosing(node, ast.ClassDef) if receiver.id == "self" else ctx.model.module_class_of(receiver)
                if cls is not owner:
                    continue
                call = ctx.source.parent(node)
                if not (isinstance(call, ast.Call) and call.func is node):
                    return None  # the method is passed on or stored: not every call is seen
                calls.append((call, 1))
        else:
            calls = self._calls_of(ctx, fn)
        if not calls:
            return None
        out: List[ast.AST] = []
        for call, skip in calls:
            value = _bound_arg(call, fn, param, skip)
            if value is None:
                return None
            out.append(value)
        return out

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
        return Edit(ctx.source.target(arg.value, "BaseExpression"), lambda node: self._wrap(ctx, node, kind))

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
    @staticmethod
    def _lead(b: _Built) -> str:
        if b.stepped_at is None and not b.stepped_elsewhere and not any(s.stepped_at is not None for s in b.schedulers):
            # an eager companion of a shared lr write (its finding is merged, never shown alone)
            return f"`{b.short}` (line {b.call.lineno}) is stepped eagerly"
        if b.stepped_elsewhere:
            where = b.stepped_elsewhere
        elif b.stepped_at is not None:
            where = f"line {b.stepped_at}"
        else:
            where = f"line {next(s.stepped_at for s in b.schedulers if s.stepped_at is not None)}, by its scheduler"
        return (
            f"`{b.short}` is stepped inside a compiled region ({where}): a float `lr` is a guarded constant, "
            "a change recompiles (on torch 2.6+ the first one, then it is dynamic unless compiled with dynamic=False; "
            "on 2.5 and older every one, up to the limit)"
        )

    def _optimizer_findings(self, ctx, b: _Built, built: List[_Built]) -> List[Finding]:
        """The findings about optimizer ``b``: each names the compiled code
        of another module that steps it, when that is where (a trace's
        recompiles there match them)."""
        found = self._judge_optimizer(ctx, b, built)
        if not b.feeds_path:
            return found
        return [f if f.feeds_path else dataclasses.replace(f, feeds=b.feeds, feeds_path=b.feeds_path) for f in found]

    def _judge_optimizer(self, ctx, b: _Built, built: List[_Built]) -> List[Finding]:
        out: List[Finding] = []
        lead = self._lead(b)
        row = b.opt_row
        if row is None:
            return [self.finding(ctx, b.call, f"{lead}; `{b.short}` is not in the table of optimizers known to accept a tensor lr (no automatic fix)")]
        if _has_star(b.call):
            return [self.finding(ctx, b.call, f"{lead}; the call passes `*args`/`**kwargs`, so lr cannot be seen here (no automatic fix)")]
        if isinstance(b.via, ast.Call) and (len(b.via.args) > 1 or _has_star(b.via) or any(kw.arg in ("params", "lr", "foreach", "capturable") for kw in b.via.keywords)):
            return [self.finding(ctx, b.call, f"{lead}; its class comes from `functools.partial(...)` (line {b.via.lineno}), which passes arguments the fix would have to change (no automatic fix)")]
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
        if b.schedulers and self._shared_groups(ctx, b):
            # torch's schedulers write a tensor lr in place (`.fill_`): groups
            # sharing one tensor all get the value of the group written last
            split, arg = next(((s, a) for s in b.schedulers for a in [self._per_group_arg(ctx, s.call)] if a is not None), (None, None))
            if split is not None:
                out.append(self.finding(ctx, split.call, (
                    f"{lead}; `{split.short}` is given a value per param group (`{self._text(ctx).code(arg)}`), and the groups without an lr of "
                    f"their own share the one tensor `lr=` would pass, which the scheduler writes in place: every group would get the value of "
                    f"the group written last (no automatic fix)"
                )))
                return out

        edits: List[Edit] = []
        unsafe: List[str] = []
        notes: List[str] = []
        call_target = ctx.source.target(b.call, "Call")
        anchor: Optional[_Arg] = None
        lr = _arg(b.call, "lr", 1)
        lr_fixed = False
        if lr is None:
            default = cst.Float(repr(float(row.default_lr)))
            new_arg = cst.Arg(keyword=cst.Name("lr"), value=cst.Call(func=torch_expr(ctx.model, "tensor"), args=[cst.Arg(default)]), equal=_no_ws())
            edits.append(Edit(call_target, lambda node: node.with_changes(args=[*node.args, new_arg])))
            notes.append(f"pass the default `lr={row.default_lr}` as a tensor")
            lr_fixed = True
        else:
            anchor = lr
            kind, detail = self._value(ctx, lr.value)
            if kind == "unknown":
                # `lr=args.lr`: made a float and a tensor where it is passed;
                # unsafe, as its value is not visible: a 0-d tensor the
                # program fills itself would be replaced by a copy
                edits.append(self._wrap_edit(ctx, lr, "int"))
                lr_fixed = True
                unsafe.append(f"lr comes from `{detail}`, a value not visible here: `torch.tensor(float(...))` copies it, so a tensor lr the program fills itself would no longer be the optimizer's")
            elif kind != "tensor":
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
                edits.append(Edit(ctx.source.target(value, "BaseExpression"), lambda node, kind=kind: self._wrap(ctx, node, kind)))
        # follow-through: group["lr"] = v -> group["lr"].fill_(v)
        fills = self._fill_edits(ctx, b)
        loads = self._loads_state(ctx, b)
        if fills is None:
            over = next(w for w, (reached, _) in self._write_reach(ctx).items() if b in reached and not _alone(ctx.source, w))
            out.append(self.finding(ctx, b.call, (
                f"{lead}; line {loads.lineno} loads a saved state, which puts the saved lr back (a float, from a checkpoint written "
                f"before the fix), and line {over.lineno} shares its line with other code, so its write cannot become tensor-aware "
                f"(`if isinstance(g[\"lr\"], torch.Tensor): g[\"lr\"].fill_(v) else: g[\"lr\"] = v`) (no automatic fix)"
            )))
            return out
        if fills and loads is not None:
            notes.append(f"line {loads.lineno} loads a saved state, whose lr is a float if it was saved before the fix: the writes fill a tensor lr and keep a float one a float")
        if fills and unseen:
            added = self._added_unseen(ctx, b)
            where = f"a group added on line {added.lineno} (`add_param_group`) may hold an lr not visible here" if added is not None else "the param groups are built elsewhere"
            out.append(self.finding(ctx, b.call, f"{lead}; {where}, so a group's own float lr cannot be seen, and `group[\"lr\"].fill_(...)` would fail on it (no automatic fix)"))
            return out
        if fills and self._shared_groups(ctx, b):
            varied = next((w for w, (reached, _) in self._write_reach(ctx).items() if b in reached and not self._uniform(ctx, w)), None)
            if varied is not None:
                out.append(self.finding(ctx, b.call, (
                    f"{lead}; line {varied.lineno} writes an lr that may differ between its param groups, and the groups without an lr "
                    f"of their own share the one tensor `lr=` would pass: `.fill_` would give each group the value written last (no automatic fix)"
                )))
                return out
        edits.extend(fills)
        if not edits:
            # the lr, every group's too, is a tensor already: for the index,
            # an optimizer with a tensor lr (a writer of another module given
            # it may `.fill_`), unless a write not seen may put a float there
            if not unseen and all(complete for _, complete in self._write_reach(ctx).values()):
                ctx.cache.setdefault("fr004_fixable", {})[b] = True
                ctx.cache.setdefault("fr004_tensor_lr", set()).add(b)
            return out
        reads = self._lr_reads(ctx)
        if reads:
            unsafe.append(f"line {reads[0]} reads the lr back, which becomes a 0-d tensor (formatting, `round`, `isinstance(lr, float)`, JSON change)")
        else:
            shown = self._shown(ctx, b)
            if shown is not None:
                unsafe.append(f"line {shown.lineno} hands `{self._text(ctx).code(shown)}` on where its lr may be read, which becomes a 0-d tensor (printing, JSON, a scheduler's state)")
        unknown = [w for w, (reached, complete) in self._write_reach(ctx).items() if not complete]
        if unknown and fills:
            # the float it may write would meet a `.fill_` at the next write: a crash
            out.append(self.finding(ctx, b.call, (
                f"{lead}; line {unknown[0].lineno} writes a float lr into param groups of an optimizer not visible here, which "
                f"may be this one: the `.fill_` its own lr writes would become could meet that float and fail (no automatic fix)"
            )))
            return out
        if unknown:
            unsafe.append(f"line {unknown[0].lineno} writes a float lr into param groups of an optimizer not visible here, which may be this one (the lr would be a float again{', and `.fill_` fail on it' if fills else ''})")
        fixable = ctx.cache.setdefault("fr004_fixable", {})
        fixable[b] = not unsafe
        stepper = self._stepper_call(ctx, b, clean=True)
        escape = next((c for c in self._escapes(ctx, b) if not self._proven_writer(ctx, c) and not (stepper is not None and c is stepper[0])), None)
        if escape is not None:
            unsafe.append(f"the optimizer is passed to `{self._text(ctx).code(escape.func)}` (line {escape.lineno}), code not visible here: a float lr written there would replace the tensor{' (and `.fill_` fail on it)' if fills else ''}")
        if lr_fixed:
            message = f"{lead}; make it a 0-d tensor (`lr=torch.tensor(...)`)"
        else:
            # a tensor lr already (DeepSpeed 407708cdb: the model script's choice), a float written over it
            over = next((w for w, (reached, _) in self._write_reach(ctx).items() if b in reached), None)
            message = f"{lead}; its lr is a 0-d tensor{f', but line {over.lineno} writes a float over it' if over is not None else ''}: keep the tensor lr a tensor"
        writers = [w for w in map(functools.partial(self._proven_writer, ctx), self._escapes(ctx, b)) if w is not None]
        if writers:
            named = ", ".join(dict.fromkeys(f"`{name}` of module `{where}`" for name, where, _ in writers))
            notes.append(f"the lr writes of {named} become `.fill_`, fixed there")
            risky = [w for w in writers if w[2]]
            if risky:
                name, where, _ = risky[0]
                unsafe.append(f"`{name}` of module `{where}` writes `.fill_` only with --unsafe-fixes (an optimizer it gets is made a tensor by an unsafe fix), so this half goes with it")
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

    def _group_lrs(self, ctx, b: _Built) -> Tuple[List[ast.AST], bool]:
        """(the ``"lr"`` values of the param-group dicts given to the
        optimizer, whether the groups cannot be seen): ``[{"params": ...,
        "lr": 0.01}, {...}]`` is seen; ``model.parameters()`` holds no groups;
        a name or anything else may hold groups with their own lr.  A group
        added later counts too (``opt.add_param_group({"params": ..., "lr":
        0.01})``: a float lr there would meet ``.fill_``); one added to an
        optimizer not resolved here may be one of ``b``'s (not seen)."""
        found, unseen = self._built_group_lrs(ctx, b)
        if unseen:
            return found, unseen
        for call in self._added_groups(ctx):
            target = self._resolve(ctx, call.func.value)  # type: ignore[attr-defined]
            if target is not None and target is not b:
                continue
            group = self._added_group(call)
            if target is None or group is None:
                return found, True
            found += [val for key, val in zip(group.keys, group.values) if isinstance(key, ast.Constant) and key.value == "lr"]
        return found, False

    @staticmethod
    def _added_groups(ctx) -> List[ast.Call]:
        """Every ``X.add_param_group(...)`` call, in source order."""
        if b"add_param_group" not in ctx.source.data:
            return []
        return _source_order(c for c in ctx.source.nodes(ast.Call) if isinstance(c.func, ast.Attribute) and c.func.attr == "add_param_group")

    @staticmethod
    def _added_group(call: ast.Call) -> Optional[ast.Dict]:
        """The dict literal ``add_param_group`` is given, when every key of
        it can be seen (no ``**other``); else None."""
        group = call.args[0] if len(call.args) == 1 and not call.keywords else next((kw.value for kw in call.keywords if kw.arg == "param_group"), None) if not call.args else None
        if not isinstance(group, ast.Dict) or any(key is None for key in group.keys):
            return None
        return group

    def _added_unseen(self, ctx, b: _Built) -> Optional[ast.Call]:
        """The first group added to ``b`` (or to an optimizer not resolved
        here) whose lr cannot be seen."""
        for call in self._added_groups(ctx):
            target = self._resolve(ctx, call.func.value)  # type: ignore[attr-defined]
            if target is None or (target is b and self._added_group(call) is None):
                return call
        return None

    @staticmethod
    def _built_group_lrs(ctx, b: _Built) -> Tuple[List[ast.AST], bool]:
        """:meth:`_group_lrs` of the groups given to the constructor."""
        params = _arg(b.call, "params", 0)
        if params is None:
            return [], False
        value = params.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("parameters", "named_parameters"):
            return [], False
        if isinstance(value, ast.Name):
            # `optim_groups = [{...}, {...}]` bound once, never changed after
            # (nanoGPT's configure_optimizers): the list it names
            bound = OptimizerScalars._single_value(ctx, value)
            scope = ctx.source.enclosing(value, (ast.FunctionDef, ast.AsyncFunctionDef))
            # any use but its binding and being passed as an argument may add a group or an lr
            changed = any(
                isinstance(n, ast.Name) and n.id == value.id and n is not value and isinstance(n.ctx, ast.Load)
                and not (isinstance(ctx.source.parent(n), ast.Call) and n in ctx.source.parent(n).args)
                for n in (ast.walk(scope) if scope is not None else ctx.source.nodes(ast.Name))
            )
            if isinstance(bound, (ast.List, ast.Tuple)) and not changed:
                value = bound
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

    @staticmethod
    def _shared_groups(ctx, b: _Built) -> bool:
        """May two param groups of ``b`` hold the same lr tensor?  torch
        gives every group without an ``"lr"`` of its own the constructor's
        ``lr`` object: a list of two or more such group dicts, groups not
        visible here, or a group added later (``add_param_group``)."""
        params = _arg(b.call, "params", 0)
        if b"add_param_group" in ctx.source.data or params is None:
            return b"add_param_group" in ctx.source.data
        value = params.value
        if isinstance(value, ast.Name):
            value = OptimizerScalars._single_value(ctx, value)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("parameters", "named_parameters"):
            return False
        if not isinstance(value, (ast.List, ast.Tuple)):
            return True
        if not all(isinstance(e, ast.Dict) for e in value.elts):
            return any(isinstance(e, (ast.Dict, ast.Starred)) for e in value.elts)  # a list of tensors is one group
        own = sum(1 for e in value.elts if any(isinstance(k, ast.Constant) and k.value == "lr" for k in e.keys))
        return len(value.elts) - own > 1

    @staticmethod
    def _per_group_arg(ctx, call: ast.Call) -> Optional[ast.AST]:
        """An argument of a scheduler's construction (after the optimizer)
        that gives one value per param group: a list or tuple
        (`LambdaLR(opt, [f, g])`, `OneCycleLR(opt, max_lr=[0.1, 0.01])`),
        also through a name bound once to one."""
        for value in [*call.args[1:], *(kw.value for kw in call.keywords if kw.arg != "optimizer")]:
            seen = OptimizerScalars._single_value(ctx, value) if isinstance(value, ast.Name) else value
            if isinstance(seen, (ast.List, ast.Tuple, ast.ListComp)):
                return value
        return None

    @staticmethod
    def _uniform(ctx, write: ast.Assign) -> bool:
        """Does ``write`` (``g["lr"] = v``) give every param group the same
        value: in ``for g in X.param_groups:``, with ``v`` using no name the
        loop binds (its target, or a name assigned in its body)?  An
        indexed write (``X.param_groups[0]["lr"] = v``) gives one group."""
        found = _group_loop(ctx, write)
        if found is None:
            return False
        loop = found[0]
        bound: Set[str] = set()  # the names the loop binds, its target's among them
        for node in ast.walk(loop):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
        return not any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(write.value))

    def _fill_edits(self, ctx, b: _Built) -> Optional[List[Edit]]:
        """``.fill_`` edits of the lr writes that reach ``b``'s param groups
        (one Edit object per write, shared by every optimizer it reaches).
        A write reaching an optimizer that loads a saved state
        (:meth:`_loads_state`: a checkpoint from before the fix puts a float
        lr back) becomes tensor-aware; None when such a write has no lines
        of its own for the ``if`` (no fix can be safe)."""
        edits: Dict[ast.Assign, Edit] = ctx.cache.setdefault("fr004_fill_edits", {})
        out: List[Edit] = []
        for node, (reached, _) in self._write_reach(ctx).items():
            if b in reached:
                if node not in edits:
                    if any(self._loads_state(ctx, r) for r in reached):
                        if not _alone(ctx.source, node):
                            return None
                        edits[node] = Edit(statement_target(ctx.source, node), functools.partial(_fill_if_tensor, ctx.model))
                    else:
                        edits[node] = Edit(ctx.source.target(node, "Assign"), _fill)
                out.append(edits[node])
        return out

    #: what may be done with an optimizer without reading its lr: its step,
    #: its groups (whose lr reads are :meth:`_lr_reads`'), its state
    _OPTIMIZER_USES = frozenset(("step", "zero_grad", "param_groups", "add_param_group", "load_state_dict", "state", "defaults", "register_step_pre_hook", "register_step_post_hook"))
    #: and with a scheduler of it
    _SCHEDULER_USES = frozenset(("step", "load_state_dict", "last_epoch", "get_last_lr", "get_lr"))

    def _shown(self, ctx, b: _Built) -> Optional[ast.AST]:
        """The first use of ``b`` or of a scheduler of it that may read its
        lr without a subscript ``["lr"]`` (found by an audit):
        ``print(optimizer)`` or an f-string of it, a scheduler handed to a
        function (``log_metrics(step, loss, scheduler)`` reads
        ``get_last_lr()`` there), ``scheduler._last_lr``, ``state_dict()``
        anywhere but in ``torch.save(...)`` or a checkpoint dict.  Calls of
        code not visible here that get the optimizer are
        :meth:`_escapes`'."""
        source = ctx.source
        owners = {id(b): self._OPTIMIZER_USES, **{id(s): self._SCHEDULER_USES for s in b.schedulers}}
        for node in _source_order(n for n in source.nodes(ast.Name) + source.nodes(ast.Attribute) if isinstance(n.ctx, ast.Load)):
            target = self._resolve(ctx, node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if target is None or id(target) not in owners:
                continue
            parent = source.parent(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                if parent.attr == "param_groups" and target is b:
                    shown = self._groups_shown(ctx, parent)
                    if shown is not None:
                        return shown
                    continue
                if parent.attr in owners[id(target)]:
                    continue
                if parent.attr == "state_dict" and self._saved(ctx, source.parent(parent)):
                    continue
                return parent
            if isinstance(parent, ast.Call) and node in parent.args or isinstance(parent, ast.keyword):
                call = parent if isinstance(parent, ast.Call) else source.parent(parent)
                if target is b and (any(call is s.call for s in b.schedulers) or call in self._escapes(ctx, b)):
                    continue  # a scheduler of it; code not visible: unsafe already
                if self._callee_def(ctx, call) is not None or (isinstance(call.func, ast.Name) and call.func.id in ctx.model.classes):
                    continue  # a function or class of this module: its lr writes and reads are its own
                stepper = self._stepper_call(ctx, b, clean=True)
                if (stepper is not None and call is stepper[0]) or self._proven_writer(ctx, call) is not None:
                    continue  # a training loop or lr writer of another module the index proved clean
                names = ctx.model.qualified_names(call.func, visible=True)
                if target is b and any(q.startswith("torch.") for q in names):
                    continue
                return call
            if isinstance(parent, ast.FormattedValue):
                return node
        return None

    #: what reading a group dict's keys may be done with, its lr's reads
    #: apart (:meth:`_lr_reads`): a key subscript, an update of it
    _GROUP_USES = frozenset(("update", "setdefault", "__setitem__"))

    def _groups_shown(self, ctx, groups: ast.Attribute) -> Optional[ast.AST]:
        """A use of ``X.param_groups`` (``groups``) that may read a group's lr
        without ``["lr"]``: ``g.get("lr")``, ``g.items()``, a group passed
        to a function or printed, ``map(itemgetter("lr"), X.param_groups)``
        (audit).  Followed: a ``for`` over the groups (also through ``zip``
        / ``enumerate``) and its loop variable, ``X.param_groups[i]``."""
        source = ctx.source
        parent = source.parent(groups)
        if isinstance(parent, ast.Subscript) and parent.value is groups:
            return self._group_shown(ctx, parent)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("zip", "enumerate", "len"):
            if parent.func.id == "len":
                return None
            loop = source.parent(parent)
            if isinstance(loop, ast.For) and loop.iter is parent and isinstance(loop.target, ast.Tuple):
                at = parent.args.index(groups) + (1 if parent.func.id == "enumerate" else 0) if groups in parent.args else -1
                if 0 <= at < len(loop.target.elts):
                    return self._loop_var_shown(ctx, loop, loop.target.elts[at])
            return parent
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is groups:
            return self._loop_var_shown(ctx, parent, parent.target)
        if isinstance(parent, ast.Call) and groups in parent.args and self._callee_def(ctx, parent) is not None:
            return None  # a helper of this module: its writes and reads are its own
        if isinstance(parent, ast.Assign) and parent.value is groups:
            return None  # `groups = opt.param_groups`: its uses are those of a name (followed as lr writes)
        return parent

    def _loop_var_shown(self, ctx, loop: ast.AST, var: ast.AST) -> Optional[ast.AST]:
        """:meth:`_group_shown` of the uses of a loop's variable ``var``
        within the loop (a ``for``, or a comprehension: its expression)."""
        span = ctx.source.parent(loop) if isinstance(loop, ast.comprehension) else loop  # a comprehension has no place of its own
        if not isinstance(var, ast.Name):
            return span
        scope = ctx.model.scopes.scope_of(var)
        for ref in scope.references.get(var.id, []):
            if not (span.lineno <= ref.lineno <= span.end_lineno):  # type: ignore[attr-defined]
                continue
            shown = self._group_shown(ctx, ref)
            if shown is not None:
                return shown
        return None

    def _group_shown(self, ctx, group: ast.AST) -> Optional[ast.AST]:
        """``group`` (a group dict) used but by a key subscript or an update."""
        parent = ctx.source.parent(group)
        if isinstance(parent, ast.Subscript) and parent.value is group:
            return None
        if isinstance(parent, ast.Attribute) and parent.value is group and parent.attr in self._GROUP_USES:
            return None
        return parent

    @staticmethod
    def _saved(ctx, call: Optional[ast.AST]) -> bool:
        """Is the ``state_dict()`` call ``call`` saved as it is: an argument of
        ``torch.save``, or a value of a dict literal (a checkpoint)?"""
        if not isinstance(call, ast.Call):
            return False
        parent = ctx.source.parent(call)
        if isinstance(parent, ast.Dict):
            return True
        return isinstance(parent, ast.Call) and call in parent.args and "torch.save" in ctx.model.qualified_names(parent.func)

    def _state_loads(self, ctx) -> List[Tuple[ast.Call, ast.AST]]:
        """Every call that loads a saved state into an optimizer, with the
        optimizer's expression: ``opt.load_state_dict(sd)`` and torch's
        ``set_optimizer_state_dict(model, opt, ...)`` /
        ``set_state_dict(model, opt, ...)`` (torch.distributed.checkpoint).
        torch's ``load_state_dict`` replaces each param group's lr by the
        saved one: a float, in a checkpoint written before the fix."""
        found = ctx.cache.get("fr004_state_loads")
        if found is not None:
            return found
        found = ctx.cache["fr004_state_loads"] = []
        if b"state_dict" not in ctx.source.data:
            return found
        for call in _source_order(ctx.source.nodes(ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "load_state_dict":
                found.append((call, func.value))
                continue
            names = ctx.model.qualified_names(func, visible=True)
            if any(q.startswith("torch.distributed.") and q.rpartition(".")[2] in ("set_optimizer_state_dict", "set_state_dict") for q in names):
                arg = call.args[1] if len(call.args) > 1 else next((kw.value for kw in call.keywords if kw.arg == "optimizers"), None)
                if arg is not None:
                    for one in arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]:
                        found.append((call, one))
        return found

    def _loads_state(self, ctx, b: _Built) -> Optional[ast.Call]:
        """The first call that loads a saved state into ``b`` (:meth:`_state_loads`)."""
        return next((call for call, expr in self._state_loads(ctx) if self._resolve(ctx, expr) is b), None)

    def _write_reach(self, ctx, every: bool = False) -> Dict[ast.Assign, Tuple[FrozenSet[_Built], bool]]:
        """Every ``g["lr"] = v`` into param groups (``X.param_groups[i]["lr"] = v``,
        or ``g`` a loop variable over ``X.param_groups``) -> (the optimizers
        built here that ``X`` may be, whether that is all ``X`` may be: False
        for a parameter of a function also called from elsewhere, an optimizer
        not built here ...): the writes the fix turns into ``.fill_``, or with
        ``every`` the float branches of tensor-aware helpers too."""
        if not every:  # the same reach, without the float branches: computed once
            found = ctx.cache.get("fr004_write_reach")
            if found is None:
                fills = set(self._lr_assigns(ctx))
                found = ctx.cache["fr004_write_reach"] = {n: r for n, r in self._write_reach(ctx, every=True).items() if n in fills}
            return found
        found = ctx.cache.get("fr004_store_reach")
        if found is not None:
            return found
        found = {}
        for node in self._lr_stores(ctx):
            holder = self._groups_of(ctx, node)
            found[node] = self._reaching(ctx, holder, 0) if holder is not None else self._groups_reaching(ctx, node)
        ctx.cache["fr004_store_reach"] = found
        return found

    def _reaching(self, ctx, expr: ast.AST, depth: int) -> Tuple[FrozenSet[_Built], bool]:
        """The optimizers built here that ``expr`` may be: one bound to it,
        or, for a parameter of a function of this module (``def set_lr(opt,
        lr)``), what every call of the function passes; for ``self.opt`` set
        from a parameter of ``__init__``, what every construction of the class
        passes; and whether that is all it may be (not when something of it
        is not visible here)."""
        none: Tuple[FrozenSet[_Built], bool] = (frozenset(), False)
        b = self._resolve(ctx, expr)
        if b is not None:
            return (frozenset((b,)), True) if b.kind == "optimizer" else none
        if depth > 3:
            return none
        root = self._param_root(ctx, expr)
        if root is None and isinstance(expr, ast.Attribute):
            # `state.optimizer`: a field of a dataclass the holder is
            # (open_clip 0b07760's `TrainState(optimizer=optimizer)`,
            # handed down to the factory whose closure steps it)
            values, whole = self._field_values(ctx, expr.value, expr.attr, 0)
            out: Set[_Built] = set()
            for value in values:
                reached, complete = self._reaching(ctx, value, depth + 1)
                out |= reached
                whole = whole and complete
            return frozenset(out), whole and bool(values)
        if root is None:
            return none
        fn, param = root
        calls = self._calls_of(ctx, fn)
        if calls is None:
            return none
        out: Set[_Built] = set()
        complete = bool(calls)
        for call, skip in calls:
            arg = _bound_arg(call, fn, param, skip)
            reached, whole = self._reaching(ctx, arg, depth + 1) if arg is not None else none
            out |= reached
            complete = complete and whole
        return frozenset(out), complete

    def _field_values(self, ctx, holder: ast.AST, field: str, depth: int) -> Tuple[List[ast.AST], bool]:
        """What the field ``field`` of what ``holder`` holds may be: the
        value a dataclass construction of this module gives it, where
        ``holder`` is a name bound once to that construction, or a parameter
        of a function of this module whose every call passes such a holder;
        and whether that is all (not when the module assigns a ``.field``
        anywhere, or a holder is not followed)."""
        none: Tuple[List[ast.AST], bool] = ([], False)
        if depth > 4 or not isinstance(holder, ast.Name) or self._field_stored(ctx, field):
            return none
        value = self._single_value(ctx, holder)
        if isinstance(value, ast.Call):
            passed = ctx.model.field_value(value, field)
            return ([passed], True) if passed is not None else none
        root = self._param_root(ctx, holder)
        calls = self._calls_of(ctx, root[0]) if root is not None else None
        if not calls:
            return none
        out: List[ast.AST] = []
        whole = True
        for call, skip in calls:
            arg = _bound_arg(call, root[0], root[1], skip)  # type: ignore[index]
            values, complete = self._field_values(ctx, arg, field, depth + 1) if arg is not None else none
            out += values
            whole = whole and complete
        return out, whole

    @staticmethod
    def _field_stored(ctx, field: str) -> bool:
        """Does the module assign an attribute named ``field`` anywhere
        (``state.optimizer = ...``): a field it may change after the
        construction?"""
        key = f"fr004_field_stored:{field}"
        found = ctx.cache.get(key)
        if found is None:
            found = ctx.cache[key] = any(
                isinstance(n.ctx, (ast.Store, ast.Del)) and n.attr == field for n in ctx.source.nodes(ast.Attribute)  # type: ignore[attr-defined]
            )
        return found

    def _groups_reaching(self, ctx, write: ast.Assign) -> Tuple[FrozenSet[_Built], bool]:
        """For an lr write into the groups a function is given, not an
        optimizer (DeepSpeed's ``update_lr(param_groups, lrs)``: ``for
        param_group, lr in zip(param_groups, lrs)``): the optimizers whose
        ``.param_groups`` its calls pass (:meth:`_reaching`), and whether
        that is all; a write into groups not followed may be into any
        optimizer's (nothing reached, not complete)."""
        none: Tuple[FrozenSet[_Built], bool] = (frozenset(), False)
        loop = _group_loop(ctx, write)
        root = self._param_root(ctx, loop[1]) if loop is not None and isinstance(loop[1], ast.Name) else None
        calls = self._calls_of(ctx, root[0]) if root is not None else None
        if not calls:
            return none
        out: Set[_Built] = set()
        complete = True
        for call, skip in calls:
            arg = _bound_arg(call, root[0], root[1], skip)  # type: ignore[index]
            if not (isinstance(arg, ast.Attribute) and arg.attr == "param_groups"):
                return none
            reached, whole = self._reaching(ctx, arg.value, 1)
            out |= reached
            complete = complete and whole
        return frozenset(out), complete

    def _calls_of(self, ctx, fn: ast.AST) -> Optional[List[Tuple[ast.Call, int]]]:
        """(call, parameters bound implicitly) for every use of ``fn``: calls
        of a function by its name, or constructions of the class whose
        ``__init__`` it is; None if the name is used otherwise (passed on,
        stored, rebound) or not defined where a name can reach it."""
        model = ctx.model
        owner = ctx.source.parent(fn)
        skip = 0
        if isinstance(owner, ast.ClassDef):
            if getattr(fn, "name", "") != "__init__":
                return None
            fn, skip = owner, 1
        scope_node = ctx.source.enclosing(fn, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))
        scope = model.scopes.of_node.get(scope_node) if scope_node is not None else None
        name = getattr(fn, "name", None)
        if scope is None or name is None or len(scope.bindings.get(name, [])) != 1:
            return None
        out: List[Tuple[ast.Call, int]] = []
        for ref in scope.references.get(name, []):
            call = ctx.source.parent(ref)
            if not (isinstance(call, ast.Call) and call.func is ref):
                return None
            out.append((call, skip))
        return out

    def _tensorized(self, ctx, b: _Built) -> bool:
        """Is ``b`` passed, at its slot, to a function that makes its lr a
        tensor (:meth:`_tensorizers`, of this module or, through the project
        index, of another), by a call that runs whenever ``b`` is built?  Its
        lr is then no float to guard on."""
        return any(always for _call, always in self._tensorizer_calls(ctx, b))

    def _maybe_tensorized(self, ctx, b: _Built) -> Optional[ast.Call]:
        """A call that makes ``b``'s lr a tensor only under a test its
        construction is not under (open_clip's ``if use_tensor_learning_rate:
        tensorize_learning_rate(optimizer, device)``, 0b07760 and before): the
        lr may stay a float, or not, as the test decides; None when there is
        no such call."""
        return next((call for call, always in self._tensorizer_calls(ctx, b) if not always), None)

    def _tensorizer_calls(self, ctx, b: _Built) -> List[Tuple[ast.Call, bool]]:
        """(call, whether it runs whenever ``b`` is built) for the calls that
        pass ``b`` at its slot to a tensorizer; none when a float is written
        after it (the cure is that write's ``.fill_``); computed once per optimizer."""
        held = ctx.cache.setdefault("fr004_tensorizer_calls", {})
        if b not in held:
            held[b] = self._find_tensorizer_calls(ctx, b)
        return held[b]

    def _find_tensorizer_calls(self, ctx, b: _Built) -> List[Tuple[ast.Call, bool]]:
        if any(b in reached for reached, _ in self._write_reach(ctx).values()):
            return []  # a float written after it: the cure is that write's `.fill_`
        escapes = self._escapes(ctx, b)  # also fills the calls that pass names on
        project = ctx.project
        if project is not None and project.table("lr_writers"):
            if any(hit[1].get("fills") for call in escapes for _, hit in self._index_entries(ctx, call, "lr_writers")):
                return []  # likewise, in a writer of another module
        local = self._tensorizers(ctx) if b"param_groups" in ctx.source.data else {}
        project = project if project is not None and project.table("lr_tensorizers") else None
        out: List[Tuple[ast.Call, bool]] = []
        for call, target in ctx.cache["fr004_passed"]:
            if target is not b:
                continue
            entry = None
            if isinstance(call.func, ast.Name) and call.func.id in local:
                bindings = ctx.model.scopes.bindings_of(call.func)
                if len(bindings) == 1 and bindings[0].kind == "def" and isinstance(ctx.source.parent(bindings[0].node), ast.Module):
                    entry = local[call.func.id]
            elif project is not None:
                entry = next((hit[1] for _, hit in self._index_entries(ctx, call, "lr_tensorizers")), None)
            if entry is None:
                continue
            arg = argument_at(call, entry["index"], entry["param"])
            if arg is not None and self._resolve(ctx, arg) is b:
                stmt, built = ctx.source.statement_of(call), ctx.source.statement_of(b.call)
                out.append((call, stmt is not None and built is not None and always_follows(ctx.source, stmt, built)))
        return out

    def _escapes(self, ctx, b: _Built) -> List[ast.Call]:
        """The calls that pass ``b`` to code not visible here (not torch's,
        not a builtin, not a function or class of this module), in source order."""
        passed = ctx.cache.get("fr004_passed")
        if passed is None:
            passed = ctx.cache["fr004_passed"] = []
            for call in _source_order(ctx.source.nodes(ast.Call)):
                for arg in [*call.args, *(kw.value for kw in call.keywords)]:  # type: ignore[attr-defined]
                    if isinstance(arg, (ast.Name, ast.Attribute)):
                        target = self._resolve(ctx, arg)
                        if target is not None:
                            passed.append((call, target))
        out: List[ast.Call] = []
        for call, target in passed:
            if target is not b:
                continue
            names = ctx.model.qualified_names(call.func, visible=True)
            if any(q == "torch" or q.startswith(("torch.", "builtins.")) for q in names):
                continue
            if self._callee_def(ctx, call) is not None or (isinstance(call.func, ast.Name) and call.func.id in ctx.model.classes):
                continue
            out.append(call)
        return out

    def _lr_stores(self, ctx) -> List[ast.Assign]:
        """Every ``x["lr"] = v`` statement (one target), in source order."""
        found = ctx.cache.get("fr004_lr_stores")
        if found is None:
            found = ctx.cache["fr004_lr_stores"] = [n for n in self._lr_stores_all(ctx) if not _tensor_written(ctx, n)]
        return found

    def _lr_stores_all(self, ctx) -> List[ast.Assign]:
        """Every ``x["lr"] = v`` statement (one target), in source order, a
        tensor written too."""
        found = ctx.cache.get("fr004_lr_stores_all")
        if found is None:
            found = ctx.cache["fr004_lr_stores_all"] = _source_order(
                n for n in ctx.source.nodes(ast.Assign)
                if len(n.targets) == 1 and self._lr_key(ctx, n.targets[0]) is not None  # type: ignore[attr-defined]
            )
        return found

    def _steppers(self, ctx) -> Dict[str, dict]:
        """The module's functions that step an optimizer they are given inside
        a compiled region: module-level function name -> {"param", "index",
        "field", "clean", "compiled"}: its parameter reaches a compiled
        ``.step()`` (a factory whose returned closure is compiled and steps
        it: ``make_train_step(model, optimizer)``), or is handed on to such a
        function of this module (``train(model, optimizer, ...)``); with
        "field", the optimizer is that field of what the parameter holds
        (``state.optimizer``).  "clean": the parameter is used only so
        (``.step()``, ``.zero_grad()``, handed on to clean ones) and the
        module writes and reads no lr: a tensor lr given to it stays one.
        "compiled": the first lines of the module's compiled functions (the
        code objects a trace names).  JSON-ready."""
        found = ctx.cache.get("fr004_steppers")
        if found is not None:
            return found
        found = {}
        #: function name -> (function, parameter, field of the parameter that holds the optimizer or "")
        roots: Dict[str, Tuple[ast.AST, ast.arg, str]] = {}

        def add(expr: Optional[ast.AST], field: str) -> Optional[Tuple[ast.AST, ast.arg, str]]:
            if isinstance(expr, ast.Attribute) and not field and isinstance(expr.value, ast.Name):
                expr, field = expr.value, expr.attr  # `state.optimizer`: a field of what the parameter holds
            root = self._param_root(ctx, expr) if isinstance(expr, ast.Name) else None
            if root is None or not isinstance(ctx.source.parent(root[0]), ast.Module) or root[0].name in roots:  # type: ignore[attr-defined]
                return None
            roots[root[0].name] = (root[0], root[1], field)  # type: ignore[attr-defined]
            return roots[root[0].name]  # type: ignore[attr-defined]

        todo = [r for r in (add(receiver, "") for receiver, _line in self._stepped(ctx)) if r is not None]
        while todo:  # a function that hands its parameter (or what holds it) to a stepper steps it too
            fn, param, field = todo.pop(0)
            for call, skip in self._calls_of(ctx, fn) or ():
                root = add(_bound_arg(call, fn, param, skip), field)
                if root is not None:
                    todo.append(root)
        quiet = not self._lr_stores_all(ctx) and not self._lr_reads(ctx)
        # the code objects a trace names for the step: every compiled function here
        compiled = sorted({line for site in ctx.model.compile_sites if site.target_def is not None for line in def_first_lines(site.target_def)})
        #: name -> the steppers it hands the optimizer to, when it does nothing else with it
        handed = {name: self._only_stepped(ctx, fn, param, roots) if quiet and not field else None for name, (fn, param, field) in roots.items()}
        changed = True
        while changed:  # clean only if every stepper it hands the optimizer to is clean
            changed = False
            for name, callees in handed.items():
                if callees is not None and any(handed.get(c) is None for c in callees):
                    handed[name] = None
                    changed = True
        for name, (fn, param, field) in sorted(roots.items()):
            found[name] = {"param": param.arg, "index": _position(fn, param, 0), "field": field, "clean": handed[name] is not None, "compiled": compiled}
        ctx.cache["fr004_steppers"] = found
        return found

    def _only_stepped(self, ctx, fn: ast.AST, param: ast.arg, steppers: Dict[str, Tuple[ast.AST, ast.arg, str]]) -> Optional[Set[str]]:
        """The steppers of this module ``fn`` hands ``param`` to, when every
        load of ``param`` in ``fn`` (its closures too) is the receiver of
        ``.step()`` / ``.zero_grad()`` or the argument such a stepper gets
        for its optimizer; None when some load is anything else."""
        out: Set[str] = set()
        for ref in walk(fn):
            if not (isinstance(ref, ast.Name) and ref.id == param.arg):
                continue
            bindings = ctx.model.scopes.bindings_of(ref) if isinstance(ref.ctx, ast.Load) else []
            if not isinstance(ref.ctx, ast.Load) or len(bindings) != 1:
                return None
            if bindings[0].node is not param:
                continue
            parent = ctx.source.parent(ref)
            if isinstance(parent, ast.Attribute) and parent.attr in ("step", "zero_grad"):
                call = ctx.source.parent(parent)
                if isinstance(call, ast.Call) and call.func is parent:
                    continue
                return None
            if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in steppers:
                callee, its, field = steppers[parent.func.id]
                if not field and ctx.model.resolve_function(parent.func) is callee and _bound_arg(parent, callee, its, 0) is ref:
                    out.add(parent.func.id)
                    continue
            return None
        return out

    def _tensorizers(self, ctx) -> Dict[str, dict]:
        """The module's functions that make an optimizer's lr a tensor (open_clip's
        ``tensorize_learning_rate(optimizer, device)``): module-level function
        name -> {"param", "index"}, when every ``["lr"] = v`` write of the
        function writes a tensor into the param groups of that parameter (see
        :func:`_tensor_written`) and there is at least one.  JSON-ready."""
        found = ctx.cache.get("fr004_tensorizers")
        if found is not None:
            return found
        found = {}
        bad: Set[str] = set()
        for node in self._lr_stores_all(ctx):
            groups = self._groups_of(ctx, node)
            root = self._param_root(ctx, groups) if groups is not None else None
            fn = root[0] if root is not None else ctx.source.enclosing(node, _DEFS)
            if fn is None or not isinstance(ctx.source.parent(fn), ast.Module):
                continue
            name = fn.name  # type: ignore[attr-defined]
            if root is None or not _tensor_written(ctx, node) or (name in found and found[name]["param"] != root[1].arg):
                bad.add(name)
                continue
            found[name] = {"param": root[1].arg, "index": _position(fn, root[1], 0)}
        for name in bad:
            found.pop(name, None)
        ctx.cache["fr004_tensorizers"] = found
        return found

    def _lr_assigns(self, ctx) -> List[ast.Assign]:
        """The lr writes the fix turns into ``.fill_``: :meth:`_lr_stores` but
        those of the branch a tensor lr never takes (:meth:`_float_branch`)."""
        found = ctx.cache.get("fr004_lr_assigns")
        if found is None:
            found = ctx.cache["fr004_lr_assigns"] = [n for n in self._lr_stores(ctx) if not self._float_branch(ctx, n) and not self._keeps_tensor(ctx, n)]
        return found

    def _keeps_tensor(self, ctx, node: ast.Assign) -> bool:
        """Does ``g["lr"] = v`` keep a tensor lr a tensor: ``v`` a name whose
        last binding before it in its block is an ``if`` without ``else``,
        testing that this same lr is a tensor, whose body binds ``v`` to one
        (DeepSpeed's cure, 407708cdb: ``if is_tensor(param_group['lr']): lr =
        tensor([lr], ...)``, then ``param_group['lr'] = lr``)?  A float lr
        gets the float there (``.fill_`` would fail on it), a tensor a tensor."""
        holder, value = node.targets[0].value, node.value  # type: ignore[attr-defined]
        if not (isinstance(holder, ast.Name) and isinstance(value, ast.Name)):
            return False
        parent = ctx.source.parent(node)
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(parent, field_name, None)
            if isinstance(block, list) and any(node is s for s in block):
                at = next(i for i, s in enumerate(block) if s is node)
                prev = next((s for s in reversed(block[:at]) if _binds_name(s, value.id)), None)
                if not (isinstance(prev, ast.If) and not prev.orelse):
                    return False
                test = _tensor_test(ctx, prev.test)
                last = next((s for s in reversed(prev.body) if _binds_name(s, value.id)), None)
                return (
                    test is not None and test[1] and self._names_lr_of(ctx, test[0], holder)
                    and last is not None and _binds_tensor(ctx, last, value.id)
                )
        return False

    def _float_branch(self, ctx, node: ast.Assign) -> bool:
        """Is the write ``g["lr"] = v`` in the branch of a test on that same
        lr that runs only when it is not a tensor?  ``lr = g["lr"]; if
        isinstance(lr, torch.Tensor): lr.fill_(v) else: g["lr"] = v`` (open_clip's
        ``assign_learning_rate``) is already tensor-aware: once the lr is a
        tensor the write is never reached, and where a float lr reaches it
        (another optimizer sharing the helper), ``.fill_`` would fail."""
        holder = node.targets[0].value  # type: ignore[attr-defined]
        if not isinstance(holder, ast.Name):
            return False
        child: ast.AST = node
        for anc in ctx.source.ancestors(node):
            if isinstance(anc, _DEFS + (ast.Lambda, ast.ClassDef, ast.Module)):
                return False
            if isinstance(anc, ast.If):
                floats_only = self._float_only_branches(ctx, anc.test, holder)
                if floats_only:
                    return ("body" if any(child is stmt for stmt in anc.body) else "orelse") in floats_only
            child = anc
        return False

    def _float_only_branches(self, ctx, test: ast.AST, holder: ast.Name) -> Tuple[str, ...]:
        """The branches of ``if test:`` ("body", "orelse") that run only when
        the lr of ``holder`` is not a tensor: a tensor test on it (see
        :func:`_tensor_test`) decides both; in ``A and B`` a test that fails
        for a tensor keeps the body from a tensor (the else may run either
        way), in ``A or B`` a test that holds for a tensor keeps the else."""
        if isinstance(test, ast.BoolOp):
            branch, wanted = ("body", False) if isinstance(test.op, ast.And) else ("orelse", True)
            for operand in test.values:
                found = _tensor_test(ctx, operand)
                if found is not None and found[1] == wanted and self._names_lr_of(ctx, found[0], holder):
                    return (branch,)
            return ()
        found = _tensor_test(ctx, test)
        if found is None or not self._names_lr_of(ctx, found[0], holder):
            return ()
        return ("orelse",) if found[1] else ("body",)  # the body runs when the test holds

    def _names_lr_of(self, ctx, expr: ast.AST, holder: ast.Name) -> bool:
        """Is ``expr`` the lr of the group ``holder`` names: ``holder["lr"]``,
        or a name bound once, to that, in its function?"""
        if isinstance(expr, ast.Subscript):
            return isinstance(expr.value, ast.Name) and expr.value.id == holder.id and self._lr_key(ctx, expr) is not None
        if isinstance(expr, ast.Name):
            bindings = ctx.model.scopes.bindings_of(expr)
            return (
                len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].value, ast.Subscript)
                and bindings[0].value is bindings[0].stmt.value  # type: ignore[union-attr]
                and self._names_lr_of(ctx, bindings[0].value, holder)
            )
        return False

    def _lr_reads(self, ctx) -> List[int]:
        """Lines where the module reads an lr back (``x["lr"]`` loads, ``get_last_lr()``)."""
        lines = ctx.cache.get("fr004_lr_reads")
        if lines is not None:
            return lines
        source = ctx.source
        lines = []
        for node in source.nodes(ast.Subscript) + source.nodes(ast.Call):  # (sorted below)
            if isinstance(node, ast.Subscript):
                if self._lr_key(ctx, node) is None:
                    continue
                parent = source.parent(node)
                # written, not read: `x["lr"] = v` (a direct target) and, as
                # libcst saw it, anything in an augmented assignment
                if isinstance(parent, ast.AugAssign) or (isinstance(parent, ast.Assign) and any(t is node for t in parent.targets)):
                    continue
                if self._tensor_aware_read(ctx, node, parent):
                    continue
                if isinstance(parent, ast.keyword) and parent.arg == "lr" and any(b.call is source.parent(parent) for b in self._constructions(ctx)):
                    continue  # `lr=cfg["lr"]`: the value an optimizer is built with, not one read back
                fn = source.enclosing(node, _DEFS)
                if fn is not None and fn.name in self._tensorizers(ctx) and isinstance(source.parent(fn), ast.Module):  # type: ignore[attr-defined]
                    continue  # read to be made a tensor
                lines.append(node.lineno)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get_last_lr", "get_lr"):
                lines.append(node.lineno)
        lines.sort()
        ctx.cache["fr004_lr_reads"] = lines
        return lines

    def _tensor_aware_read(self, ctx, node: ast.Subscript, parent: Optional[ast.AST]) -> bool:
        """Does the read ``g["lr"]`` only serve a tensor lr as one: the subject
        of a tensor test (``isinstance(g["lr"], torch.Tensor)``), the tensor of
        ``g["lr"].fill_(v)``, or bound to a name (``lr = g["lr"]``, its one
        binding) used only in those two ways?"""
        if self._tensor_use(ctx, node, parent):
            return True
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) and parent.value is node):
            return False
        name = parent.targets[0]
        scope = ctx.model.scopes.scope_of(name)
        if len(scope.bindings.get(name.id, ())) != 1:
            return False
        loads = scope.references.get(name.id, [])
        return bool(loads) and all(self._tensor_use(ctx, load, ctx.source.parent(load)) for load in loads)

    @staticmethod
    def _tensor_use(ctx, expr: ast.AST, parent: Optional[ast.AST]) -> bool:
        """``expr`` is the subject of a tensor test or the tensor ``.fill_`` is called on."""
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is expr and _tensor_test(ctx, parent) is not None:
            return True
        if isinstance(parent, ast.Attribute) and parent.attr == "fill_" and parent.value is expr:
            call = ctx.source.parent(parent)
            return isinstance(call, ast.Call) and call.func is parent
        return False

    # ------------------------------------------------------ computed lr keys
    def _lr_key(self, ctx, node: ast.AST) -> Optional[Tuple[Tuple[ast.AST, ast.arg], ...]]:
        """Is ``node`` a subscript ``x[<key>]`` whose key is ``"lr"``?  None
        when it is not (or may not be); else the parameters (function, arg)
        whose default ``"lr"`` the key is -- no call of this module passes
        them; calls from other modules are the project index's to check --
        and () for the literal or a module constant ``LR_KEY = "lr"``.
        ``group[self.lr_field]`` with ``self.lr_field = lr_field`` set once,
        in ``__init__``, from ``lr_field="lr"`` is such a key."""
        if not isinstance(node, ast.Subscript):
            return None
        index = node.slice
        if isinstance(index, ast.Constant):
            return () if _is_lr_subscript(ctx.source, node) else None
        if not isinstance(index, (ast.Name, ast.Attribute)):
            return None
        model = ctx.model
        param: Optional[ast.arg] = None
        fn: Optional[ast.AST] = None
        if isinstance(index, ast.Name):
            bindings = [b for b in model.scopes.bindings_of(index) if b.kind != "del"]
            if len(bindings) != 1:
                return None
            if bindings[0].kind == "param":
                param, fn = bindings[0].node, bindings[0].scope.node  # type: ignore[assignment]
            elif bindings[0].kind == "assign" and bindings[0].scope.kind == "module":
                value = bindings[0].value
                return () if isinstance(value, ast.Constant) and value.value == "lr" else None
        elif isinstance(index.value, ast.Name) and index.value.id == "self":
            cls = ctx.source.enclosing(index, ast.ClassDef)
            init = model.method(cls, "__init__") if isinstance(cls, ast.ClassDef) else None
            values = model.self_attr_values(cls, index.attr) if init is not None else []
            if len(values) == 1 and isinstance(values[0], ast.Name) and ctx.source.enclosing(values[0], _DEFS) is init:
                bindings = model.scopes.bindings_of(values[0])
                if len(bindings) == 1 and bindings[0].kind == "param":
                    param, fn = bindings[0].node, init  # type: ignore[assignment]
        if param is None or not isinstance(fn, _DEFS) or not _default_is_lr(fn, param):
            return None
        calls = self._calls_of(ctx, fn)
        if calls is None or any(_passes(call, fn, param, skip) for call, skip in calls):
            return None
        return ((fn, param),)

    # ------------------------------------------------------- across modules
    def _groups_of(self, ctx, node: ast.Assign) -> Optional[ast.AST]:
        """``X`` of an lr write into ``X.param_groups`` (see :meth:`_write_reach`)."""
        holder = node.targets[0].value  # type: ignore[attr-defined]
        groups: Optional[ast.AST] = None
        if isinstance(holder, ast.Subscript):
            groups = holder.value  # opt.param_groups[i]["lr"] = v
        else:
            loop = _group_loop(ctx, node)
            groups = loop[1] if loop is not None else None
        if isinstance(groups, ast.Attribute) and groups.attr == "param_groups":
            return groups.value
        return None

    def _param_root(self, ctx, expr: ast.AST) -> Optional[Tuple[ast.AST, ast.arg]]:
        """(function, parameter) when ``expr`` is a parameter of a function or
        ``self.x`` set in ``__init__`` from one of its parameters."""
        model = ctx.model
        if isinstance(expr, ast.Name):
            bindings = model.scopes.bindings_of(expr)
            if len(bindings) == 1 and bindings[0].kind == "param" and isinstance(bindings[0].scope.node, _DEFS):
                return bindings[0].scope.node, bindings[0].node  # type: ignore[return-value]
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = ctx.source.enclosing(expr, ast.ClassDef)
            init = model.method(cls, "__init__") if isinstance(cls, ast.ClassDef) else None
            values = model.self_attr_values(cls, expr.attr) if init is not None else []
            value = self._passed_through(ctx, values[0]) if len(values) == 1 else None
            if isinstance(value, ast.Name) and ctx.source.enclosing(value, _DEFS) is init:
                bindings = model.scopes.bindings_of(value)
                if len(bindings) == 1 and bindings[0].kind == "param":
                    return init, bindings[0].node  # type: ignore[return-value]
        return None

    @staticmethod
    def _passed_through(ctx, value: ast.AST) -> ast.AST:
        """``x`` of ``f(x)`` when ``f``, a module-level function here, hands
        back a torch optimizer it is given first thing (DeepSpeed's
        ``get_torch_optimizer``: ``if isinstance(optimizer, Optimizer):
        return optimizer``); else ``value`` itself."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1 and not value.keywords):
            return value
        fn = ctx.model.resolve_function(value.func)
        if not isinstance(fn, _DEFS) or not isinstance(ctx.source.parent(fn), ast.Module) or isinstance(value.args[0], ast.Starred):
            return value
        params = [*fn.args.posonlyargs, *fn.args.args]
        body = [n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        first = body[0] if body else None
        if not (params and isinstance(first, ast.If) and len(first.body) == 1 and isinstance(first.body[0], ast.Return)):
            return value
        name = params[0].arg
        test, back = first.test, first.body[0].value
        if not (isinstance(back, ast.Name) and back.id == name and isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2 and isinstance(test.args[0], ast.Name) and test.args[0].id == name):
            return value
        if not ({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"} & set(ctx.model.qualified_names(test.args[1], visible=True))):
            return value
        return value.args[0]

    def _writers(self, ctx) -> Dict[str, dict]:
        """The module's lr writers for the project index: callable name (a
        module-level function, or a module-level class through its
        ``__init__``) -> {"param", "index" (position after ``self``; -1:
        keyword-only), "keys" ([name, index] of parameters whose default
        "lr" the written key is: no caller may pass them), "lines" (the
        writes), "clean" (every use of the optimizer there is visible:
        nothing but ``.param_groups`` of it is used, no lr is read back, every
        lr write of the module is one of these, and the module itself never
        calls the callable)}.  JSON-ready."""
        found = ctx.cache.get("fr004_writers")
        if found is not None:
            return found
        found = {}
        source = ctx.source
        unresolved = False
        filled = set(map(id, self._lr_assigns(ctx)))
        #: writer name -> its calls in this module (a function's only)
        called: Dict[str, List[ast.Call]] = {}
        for node in self._lr_stores(ctx):
            aware = id(node) not in filled  # the float branch of a tensor-aware writer: nothing to fill
            groups = self._groups_of(ctx, node)
            root = self._param_root(ctx, groups) if groups is not None else None
            owner = source.parent(root[0]) if root is not None else None
            if root is None or owner is None:
                unresolved = unresolved or not aware
                continue
            fn, param = root
            if isinstance(owner, ast.Module):
                name, skip, cls = fn.name, 0, None  # type: ignore[attr-defined]
            elif isinstance(owner, ast.ClassDef) and isinstance(source.parent(owner), ast.Module) and fn.name == "__init__":  # type: ignore[attr-defined]
                name, skip, cls = owner.name, 1, owner
            else:
                unresolved = True
                continue
            entry = found.setdefault(name, {"param": param.arg, "index": _position(fn, param, skip), "keys": [], "lines": [], "clean": True, "uniform": True, "alone": True})
            if not aware and not self._uniform(ctx, node):
                entry["uniform"] = False  # its optimizers' groups must not share one lr tensor
            if not aware and not _alone(source, node):
                entry["alone"] = False  # no room for a tensor-aware `if` in its place
            if entry["param"] != param.arg:
                entry["clean"] = False
            if not aware:
                entry["lines"].append(node.lineno)
            for key_fn, key_param in self._lr_key(ctx, node.targets[0]) or ():
                if key_fn is not fn:
                    entry["clean"] = False
                elif [key_param.arg, _position(fn, key_param, skip)] not in entry["keys"]:
                    entry["keys"].append([key_param.arg, _position(fn, key_param, skip)])
            calls = self._calls_of(ctx, fn)
            if entry["clean"] and not (calls is not None and (not calls or skip == 0) and self._uses_only_groups(ctx, fn, param, cls)):
                entry["clean"] = False
            if calls:
                called[name] = [call for call, _ in calls]
        if unresolved or self._lr_reads(ctx):
            for entry in found.values():
                entry["clean"] = False
        self._add_forwarders(ctx, found, called)
        ctx.cache["fr004_writers"] = found
        return found

    def _add_forwarders(self, ctx, found: Dict[str, dict], called: Dict[str, List[ast.Call]]) -> None:
        """Add to ``found`` (the module's lr writers) the module-level
        functions that only hand a parameter to them: open_clip's
        ``cosine_lr(optimizer, ...)``, whose returned closure calls
        ``assign_learning_rate(optimizer, lr)``.  Such a forwarder writes
        what its writers write ("lines"; "via": their names); its every use
        of the parameter is a call of a writer by name, at the writer's
        optimizer slot, passing none of its key parameters.  A writer this
        module calls stays clean only when every such call is a forwarder's
        (the optimizer then comes through the forwarder's callers)."""
        if not found:
            return
        forwarded: Set[int] = set()
        forwarders: Dict[str, dict] = {}
        for fn in ctx.source.tree.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in found:
                continue
            args = fn.args
            for param in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                via = self._forwarded_to(ctx, fn, param, found)
                if via is None:
                    continue
                if self._calls_of(ctx, fn) != []:
                    break
                names = sorted({name for name, _ in via})
                forwarded |= {id(call) for _, call in via}
                forwarders[fn.name] = {
                    "param": param.arg, "index": _position(fn, param, 0), "keys": [],
                    "lines": sorted({line for name in names for line in found[name]["lines"]}), "clean": True, "via": names,
                    "uniform": all(found[name]["uniform"] for name in names),
                    "alone": all(found[name]["alone"] for name in names),
                }
                break
        for name, calls in called.items():
            if not all(id(call) in forwarded for call in calls):
                found[name]["clean"] = False
        for entry in forwarders.values():
            entry["clean"] = all(found[name]["clean"] for name in entry["via"])
        found.update(forwarders)

    def _forwarded_to(self, ctx, fn: ast.AST, param: ast.arg, writers: Dict[str, dict]) -> Optional[List[Tuple[str, ast.Call]]]:
        """(writer name, call) for every load of ``param`` inside ``fn`` (its
        nested functions too), when each is passed to a function writer of
        this module at its optimizer slot and passes none of its key
        parameters; None when some load is anything else, or there is none."""
        model = ctx.model
        out: List[Tuple[str, ast.Call]] = []
        for ref in walk(fn):
            if not (isinstance(ref, ast.Name) and ref.id == param.arg):
                continue
            if not isinstance(ref.ctx, ast.Load):
                return None  # rebound or deleted
            bindings = model.scopes.bindings_of(ref)
            if not (len(bindings) == 1 and bindings[0].node is param):
                continue  # another name of the same spelling (a nested parameter)
            call = ctx.source.parent(ref)
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in writers):
                return None
            target = model.scopes.bindings_of(call.func)
            entry = writers[call.func.id]
            if not (len(target) == 1 and target[0].kind == "def" and isinstance(ctx.source.parent(target[0].node), ast.Module)):
                return None
            if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
                return None
            if argument_at(call, entry["index"], entry["param"]) is not ref:
                return None
            if any(k in {kw.arg for kw in call.keywords} or 0 <= i < len(call.args) for k, i in entry["keys"]):
                return None
            out.append((call.func.id, call))
        return out or None

    def _uses_only_groups(self, ctx, fn: ast.AST, param: ast.arg, cls: Optional[ast.ClassDef]) -> bool:
        """Is the optimizer ``param`` brings used only as ``X.param_groups``
        (``param`` itself, or ``self.x`` it is stored in, set once)?"""
        scope = ctx.model.scopes.of_node.get(fn)
        if scope is None:
            return False
        stored: Optional[str] = None
        for ref in scope.references.get(param.arg, []):
            parent = ctx.source.parent(ref)
            if isinstance(parent, ast.Attribute) and parent.attr == "param_groups":
                continue
            target = parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
            if cls is not None and stored is None and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                stored = target.attr
                continue
            return False
        if stored is None:
            return True
        for node in walk(cls):  # type: ignore[arg-type]
            if isinstance(node, ast.Attribute) and node.attr == stored and isinstance(node.value, ast.Name) and node.value.id == "self":
                parent = ctx.source.parent(node)
                if isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute) and parent.attr == "param_groups"):
                    return False
        return len(ctx.model.self_attr_values(cls, stored)) == 1  # type: ignore[arg-type]

    def _passes_out(self, ctx) -> dict:
        """For the project index: every optimizer built here that is passed to
        code of another module: {"line", "fixed" ("safe": plain --fix makes
        its lr a tensor, a fix that is safe or unsafe only for being passed
        on; "unsafe": only --unsafe-fixes does; "": neither), for one stepped
        nowhere here "if_stepped" (it would get a fix, were it stepped by
        code of another module: :meth:`_fixed_if_stepped`) and "handoffs"
        ([qualified callee, slot, field], of :meth:`_handoffs`),
        "calls": [[qualified callee, slot (position or keyword), positional
        count, keywords, *args/**kwargs, line], ...]}, and for each callee
        whether every use of it here is one of these calls ("complete")."""
        self._check_module(ctx)
        # a module with no compile site still passes its optimizers on (to a
        # training loop of another module that may step them compiled)
        built = ctx.cache.get("fr004_built") or (self._constructions(ctx) if not ctx.model.compile_sites else [])
        converted = ctx.cache.get("fr004_converted", set())
        unsafe = ctx.cache.get("fr004_converted_unsafe", set())
        results = ctx.cache.get("fr004_results", {})
        table = None
        if b"fix-recompiles:" in ctx.source.data:
            from ..analysis.suppressions import is_suppressed, suppressions

            table = suppressions(ctx.source.text)
        out: List[dict] = []
        recorded: Dict[str, List[ast.Call]] = {}
        unknown = any(not complete for _, complete in self._write_reach(ctx).values()) if built else False
        for b in built:
            if b.kind != "optimizer":
                continue
            calls = []
            for call in self._escapes(ctx, b):
                slot: object = None
                for i, a in enumerate(call.args):
                    if isinstance(a, ast.Starred):
                        break
                    if self._resolve(ctx, a) is b:
                        slot = i
                        break
                for kw in call.keywords:
                    if kw.arg is not None and self._resolve(ctx, kw.value) is b:
                        slot = kw.arg
                for q in sorted(ctx.model.qualified_names(call.func, visible=True)):
                    if "." in q:
                        recorded.setdefault(q, []).append(call)
                        calls.append([q, slot, len(call.args), sorted(kw.arg for kw in call.keywords if kw.arg), _has_star(call), call.lineno])
            if not calls:
                continue
            level = "tensor" if b in ctx.cache.get("fr004_tensor_lr", ()) else "safe" if b in converted else "unsafe" if b in unsafe else ""
            if unknown:
                level = ""  # a float written where the analysis cannot follow may replace its tensor lr: no `.fill_` elsewhere may count on it
            if level and table is not None and any(is_suppressed(f, table) for f in results.get(b, [])):
                level = ""
            record = {"line": b.call.lineno, "fixed": level, "shared": self._shared_groups(ctx, b), "calls": calls}
            if self._loads_state(ctx, b) is not None:
                record["loads"] = True  # a saved float lr may come back: only a tensor-aware write is safe
            if b.stepped_at is None and not b.schedulers and len({c[5] for c in calls}) > 1:
                # stepped nowhere here, handed to two callables or more (one
                # may step it compiled, another write its lr): would it be
                # fixed were it stepped by a function of another module?
                record["if_stepped"] = self._fixed_if_stepped(ctx, b, built)
                record["handoffs"] = [
                    [q, slot, fld] for call, slot, fld in self._handoffs(ctx, b)
                    for q in sorted(ctx.model.qualified_names(call.func, visible=True)) if "." in q
                ] if record["if_stepped"] else []
            out.append(record)
        if not out:
            return {}
        return {"complete": {q: self._every_use_called(ctx, q, found) for q, found in recorded.items()}, "optimizers": out}

    def _factories(self, ctx) -> Dict[str, Dict[str, dict]]:
        """For the project index: the module-level functions and the methods
        of module-level classes that return one optimizer built here
        (nanoGPT's ``GPT.configure_optimizers``): name -> {method ("" for a
        function) -> {"line": the construction's, "fixable": were it stepped
        compiled, its lr would get a safe fix here, and this module neither
        steps it, schedules it, writes its lr nor passes it on}}.  JSON-ready."""
        found = ctx.cache.get("fr004_factories")
        if found is not None:
            return found
        found = {}
        built = self._constructions(ctx)
        self._mark_stepped(ctx, built)
        for b in built:
            if b.kind != "optimizer":
                continue
            fn = ctx.source.enclosing(b.call, _DEFS)
            owner = ctx.source.parent(fn) if fn is not None else None
            if isinstance(owner, ast.Module):
                name, method = fn.name, ""  # type: ignore[union-attr]
            elif isinstance(owner, ast.ClassDef) and isinstance(ctx.source.parent(owner), ast.Module):
                name, method = owner.name, fn.name  # type: ignore[union-attr]
            else:
                continue
            if self._returned_by(ctx, fn) is not b:
                continue
            lr = _arg(b.call, "lr", 1)
            root = self._param_root(ctx, lr.value) if lr is not None else None
            param = [root[1].arg, _position(fn, root[1], 1 if method else 0)] if root is not None and root[0] is fn else None
            with self._assuming(ctx, fn, param):
                fixable = self._factory_fixable(ctx, b, built)
            found.setdefault(name, {})[method] = {"line": b.call.lineno, "fixable": fixable, "lr_param": param}
        ctx.cache["fr004_factories"] = found
        return found

    @staticmethod
    @contextlib.contextmanager
    def _assuming(ctx, fn: ast.AST, param: Optional[list]):
        """While judging a factory's construction: its lr parameter ``param``
        ([name, position]) is given a float by its callers in other modules
        (the index proves that of every caller before the fix is made)."""
        assumed = ctx.cache.setdefault("fr004_assumed", {})
        if param is not None:
            assumed[(id(fn), param[0])] = "float"
        try:
            yield
        finally:
            if param is not None:
                assumed.pop((id(fn), param[0]), None)

    def _fixed_if_stepped(self, ctx, b: _Built, built: List[_Built]) -> bool:
        """Would FR004 fix the lr of ``b`` (built here, stepped nowhere here,
        scheduled by nothing here), safely or not, were it stepped compiled
        by code of another module it is handed to (open_clip's ``main.py``
        hands its AdamW to ``train_one_epoch``)?  Not when this module steps
        it eagerly or writes its lr."""
        for call in ctx.source.nodes(ast.Call):
            func = call.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Attribute) and func.attr == "step" and self._resolve(ctx, func.value) is b:
                return False  # stepped eagerly here
        return bool(self._fixes_if_stepped_elsewhere(ctx, b, built))

    def _factory_fixable(self, ctx, b: _Built, built: List[_Built]) -> bool:
        """Would ``b``, built and returned by a factory of this module, get a
        safe fix of its lr were it stepped compiled elsewhere, with nothing of
        this module stepping, scheduling, writing or passing it on?"""
        if b.stepped_at is not None or b.schedulers or self._escapes(ctx, b):
            return False
        if any(f.fix.safety is Safety.SAFE for f in self._fixes_if_stepped_elsewhere(ctx, b, built)):  # type: ignore[union-attr]
            return True
        return b in ctx.cache.get("fr004_tensor_lr", ())  # a tensor lr already: its users' `.fill_` need no fix here

    def _fixes_if_stepped_elsewhere(self, ctx, b: _Built, built: List[_Built]) -> List[Finding]:
        """The findings with a fix FR004 would make here for ``b`` were it
        stepped compiled by another module, none when this module writes its
        lr; a suppressed fix is not made (the other half, a `.fill_`
        elsewhere, would crash without it)."""
        if any(b in reached for reached, _ in self._write_reach(ctx, every=True).values()):
            return []
        b.stepped_elsewhere = "another module"
        try:
            found = [f for f in self._optimizer_findings(ctx, b, built) if f.fix is not None]
        finally:
            b.stepped_elsewhere = ""
        if found and b"fix-recompiles:" in ctx.source.data:
            from ..analysis.suppressions import is_suppressed, suppressions

            table = suppressions(ctx.source.text)
            found = [f for f in found if not is_suppressed(f, table)]
        return found

    def _factory_uses(self, ctx) -> List[dict]:
        """For the project index: every optimizer this module gets from a
        factory of another module (``optimizer = model.configure_optimizers(...)``,
        ``model = GPT(...)`` with ``GPT`` imported; ``opt = build_optimizer(...)``
        imported): {"q": the factory's qualified name as seen here (the class,
        or the function), "method" ("" for a function), "line", "stepped"
        (its ``.step()`` runs compiled here), "fills" (every lr write of this
        module is into its param groups or another's that can be told
        apart, none is a read back, so each of its writes can be ``.fill_``),
        "complete" (no other call of the factory here), the kinds of the
        arguments ("args", "kwargs", "star")}, for the names stepped here or
        whose lr is written here."""
        found = ctx.cache.get("fr004_factory_uses")
        if found is not None:
            return found
        found = []
        ctx.cache["fr004_factory_uses"] = found
        self._constructions(ctx)
        stepped = {r.id for r, _ in self._stepped(ctx) if isinstance(r, ast.Name)}
        writes: Dict[str, List[ast.Assign]] = {}
        unknown = False
        for write in self._lr_stores(ctx) if b"param_groups" in ctx.source.data else ():
            holder = self._groups_of(ctx, write)
            if isinstance(holder, ast.Name) and self._param_root(ctx, holder) is None:
                writes.setdefault(holder.id, []).append(write)
            else:  # `self.opt.param_groups`, a helper's parameter: may be any optimizer
                unknown = True
        # only names used as optimizers here (stepped, eagerly or compiled, or
        # their lr written) can hold one from a factory; any other call of the
        # factory makes the uses incomplete (below)
        used = set(stepped) | set(writes)
        for call in ctx.source.nodes(ast.Call):
            func = call.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Attribute) and func.attr == "step" and isinstance(func.value, ast.Name):
                used.add(func.value.id)
        candidates = [
            node for node in _source_order(ctx.source.nodes(ast.Assign))
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in used and isinstance(node.value, ast.Call)  # type: ignore[attr-defined]
        ]
        if not candidates:
            return found
        reads = bool(self._lr_reads(ctx))
        for node in candidates:
            holder, call = node.targets[0], node.value  # type: ignore[attr-defined]
            bindings = [b for b in ctx.model.scopes.scope_of(holder).bindings.get(holder.id, []) if b.kind != "del"]
            if len(bindings) != 1 or bindings[0].value is not call or call in ctx.cache["fr004_by_call"] or self._made_here(ctx, call):
                continue  # bound more than once, a construction here, or code of this module
            factory = self._imported_factory(ctx, call)
            if factory is None:
                continue
            q, method = factory
            # the factory's groups may share one lr tensor: every write must give all the same value
            ok = not unknown and not reads and all(w in self._lr_assigns(ctx) and self._uniform(ctx, w) for w in writes.get(holder.id, ()))
            found.append({
                "q": q, "method": method, "line": node.lineno, "stepped": holder.id in stepped, "fills": ok, "complete": True,
                "args": [self._value(ctx, a, detail=False)[0] for a in call.args],
                "kwargs": {kw.arg: self._value(ctx, kw.value, detail=False)[0] for kw in call.keywords if kw.arg},
                "star": _has_star(call),
            })
        # a call of the same method or function this module makes that is
        # not one of these (`self.opt = model.configure_optimizers(...)`):
        # an optimizer the index cannot follow
        calls: Dict[str, int] = {}
        for call in ctx.source.nodes(ast.Call):
            func = call.func  # type: ignore[attr-defined]
            key = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else None)
            if key is not None:
                calls[key] = calls.get(key, 0) + 1
        for use in found:
            key = use["method"] or use["q"].rpartition(".")[2]
            use["complete"] = calls.get(key, 0) == sum(1 for u in found if (u["method"] or u["q"].rpartition(".")[2]) == key)
        return found

    @staticmethod
    def _imported_factory(ctx, call: ast.Call) -> Optional[Tuple[str, str]]:
        """(qualified name, method) of the imported factory ``call`` runs: a
        method of an instance of an imported class (``model.configure_optimizers``,
        ``model = GPT(...)``), or an imported function; None otherwise."""
        model, func = ctx.model, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            values = list(model.assigned_values(func.value))
            if len(values) != 1 or not isinstance(values[0], ast.Call):
                return None
            names = model.qualified_names(values[0].func, visible=True)
            method = func.attr
        elif isinstance(func, ast.Name):
            names = model.qualified_names(func, visible=True)
            method = ""
        else:
            return None
        imported = sorted(q for q in names if "." in q and not q.startswith(("torch.", "builtins.", "<local>")))
        return (imported[0], method) if len(imported) == 1 else None

    def _factory_callers(self, ctx) -> Dict[str, Dict[str, List[Tuple[str, int]]]]:
        """The proven factories of this module (project index): name ->
        method -> the (module, line) of every optimizer they build for
        another module."""
        project = ctx.project
        return project.table_in("lr_factories", ctx.path) if project is not None else {}

    def _factory_findings(self, ctx) -> List[Finding]:
        """The constructions the proven factories of this module return get
        FR004's fix of their lr (the index proved every module using them
        writes its lr with ``.fill_``)."""
        proven = self._factory_callers(ctx)
        if not proven:
            return []
        built = self._constructions(ctx)
        by_line = {b.call.lineno: b for b in built if b.kind == "optimizer"}
        out: List[Finding] = []
        for name, methods in sorted(self._factories(ctx).items()):
            for method, entry in sorted(methods.items()):
                callers = proven.get(name, {}).get(method)
                b = by_line.get(entry["line"])
                if not callers or not entry["fixable"] or b is None:
                    continue
                module, line = callers[0]
                b.stepped_elsewhere = f"by module `{module}`, which gets it from `{name}{'.' + method if method else ''}` here on its line {line}"
                with self._assuming(ctx, ctx.source.enclosing(b.call, _DEFS), entry["lr_param"]):
                    found = self._optimizer_findings(ctx, b, built)
                out.extend(f for f in found if f.fix is not None and f.fix.safety is Safety.SAFE)
        return out

    def _every_use_called(self, ctx, q: str, calls: List[ast.Call]) -> bool:
        """Is every use of the imported name behind ``q`` one of ``calls``?"""
        func = calls[0].func
        base = func.value if isinstance(func, ast.Attribute) else func
        if not isinstance(base, ast.Name):
            return False
        bindings = ctx.model.scopes.bindings_of(base)
        if len(bindings) != 1 or bindings[0].kind != "import":
            return False
        funcs = {id(c.func) for c in calls}
        for ref in bindings[0].scope.references.get(base.id, []):
            node = ref if not isinstance(func, ast.Attribute) else ctx.source.parent(ref)
            if isinstance(func, ast.Attribute) and not (isinstance(node, ast.Attribute) and node.attr == func.attr):
                continue  # another attribute of the module
            if id(node) not in funcs:
                return False
        return True

    def _proven_writer(self, ctx, call: ast.Call) -> Optional[Tuple[str, str, bool]]:
        """(callable, where, only with --unsafe-fixes) when the project
        index proves that ``call`` reaches an lr writer of another module
        whose writes become ``.fill_`` (every optimizer passed to it, in
        every module, gets a tensor lr: the index's ``lr_unsafe`` names the
        writers some of whose optimizers get it from an unsafe fix)."""
        project = ctx.project
        if project is None or not project.table("lr_proven"):
            return None
        for q in sorted(ctx.model.qualified_names(call.func, visible=True)):
            hit = project.resolve_in("lr_proven", ctx.path, q)
            if hit is not None:
                return (*hit, project.resolve_in("lr_unsafe", ctx.path, q) is not None)
        return None

    def _project_fills(self, ctx) -> List[Finding]:
        """The lr writes of this module's proven writers (project index)
        become ``.fill_``: every optimizer reaching them, from every module,
        gets a tensor lr from plain --fix."""
        proven = ctx.project.table_in("lr_proven", ctx.path)
        if not proven:
            return []
        risky = ctx.project.table_in("lr_unsafe", ctx.path)
        aware = ctx.project.table_in("lr_aware", ctx.path)
        ready = ctx.project.table_in("lr_ready", ctx.path)
        writers = self._writers(ctx)
        by_line = {n.lineno: n for n in self._lr_assigns(ctx)}
        # line -> (the first writer's message, unsafe callers, tensor-aware,
        # callers whose lr a fix makes a tensor, callers with a tensor lr already)
        fills: Dict[int, Tuple[str, List[Tuple[str, int]], List[bool], List[Tuple[str, int]], List[Tuple[str, int]]]] = {}
        for name, callers in sorted(proven.items()):
            entry = writers.get(name)
            if entry is None or not entry["clean"]:
                continue
            where = ", ".join(f"{path} line {line}" for path, line in callers)
            through = "".join(f" (through `{v}`)" for v in entry.get("via", ()))
            for line in entry["lines"]:
                if line not in by_line:
                    continue
                message = (
                    f"`{name}`{through} writes a float lr into the param groups of optimizers that are stepped inside a compiled region "
                    f"and get a 0-d tensor lr ({where}): the float replaces the tensor and every new value recompiles; "
                )
                # a write two writers share is as unsafe as either, and
                # tensor-aware when either is given float lrs too
                at = fills.setdefault(line, (message, [], [], [], []))
                at[1].extend(risky.get(name, ()))
                at[2].append(bool(aware.get(name)))
                at[3].extend(c for c in callers if c not in ready.get(name, ()))
                at[4].extend(ready.get(name, ()))
        out: List[Finding] = []
        for line, (message, unsafe, kinds, fixed, tensors) in sorted(fills.items()):
            if any(kinds):
                message += (
                    "write it in place when it is a tensor (`if isinstance(g[\"lr\"], torch.Tensor): g[\"lr\"].fill_(v)`), "
                    "as a float otherwise: other optimizers it is given keep a float lr"
                )
            else:
                message += "write it in place with `.fill_`"
            if unsafe:
                path, at = sorted(set(unsafe))[0]
                message += f"; unsafe: the optimizer of {path} line {at} gets its tensor lr from an unsafe fix, so this write holds only with it (--unsafe-fixes)"
            # a plain `.fill_` needs the callers' tensor lr; a tensor-aware write needs nothing
            needs = () if any(kinds) else lr_writers.files_of(ctx.project, (module for module, _ in fixed))
            finding = self._fill_finding(ctx, by_line[line], message, unsafe=bool(unsafe), aware=any(kinds), needs=needs)
            if tensors:
                # a trace's recompile of the step of a caller whose lr is a
                # tensor already is this write's to cure (no fix there)
                finding.feeds_path = next(iter(lr_writers.files_of(ctx.project, [sorted(tensors)[0][0]])), "")
            out.append(finding)
        return out

    def _fill_finding(self, ctx, write: ast.Assign, message: str, unsafe: bool = False, aware: bool = False, needs: Tuple[str, ...] = ()) -> Finding:
        """A finding that writes the lr of ``write`` in place (``.fill_``;
        with ``aware``, only when it is a tensor), the other half of a fix
        made in another module (proven by the index), the files ``needs``;
        unsafe when that fix is."""
        if aware:
            edit = Edit(statement_target(ctx.source, write), functools.partial(_fill_if_tensor, ctx.model))
        else:
            edit = Edit(ctx.source.target(write, "Assign"), _fill)
        return self.finding(
            ctx, write, message,
            edits=[edit],
            safety=Safety.UNSAFE if unsafe else Safety.SAFE,
            needs_torch=aware,
            title="write the lr in place when it is a tensor" if aware else "write the lr in place (`.fill_`)",
            rests_on=tuple((path, self.code) for path in needs if path != ctx.path),
        )


def _together(reach, fixable, held, ok: Set[_Built]) -> Set[_Built]:
    """``ok`` less the optimizers an lr write shares with one not in it
    (optimizers whose lr the same statement writes are fixed together: all
    or none), until nothing changes."""
    ok = set(ok)
    changed = True
    while changed:
        changed = False
        for reached, _ in reach.values():
            members = {b for b in reached if b in fixable or b in held}
            if members & ok and not members <= ok:
                ok -= members
                changed = True
    return ok


def _default_is_lr(fn: ast.AST, param: ast.arg) -> bool:
    """Does ``param`` of ``fn`` default to the string ``"lr"``?"""
    default = parameter_defaults(fn).get(param.arg)
    return isinstance(default, ast.Constant) and default.value == "lr"


def _position(fn: ast.AST, param: ast.arg, skip: int) -> int:
    """Position of ``param`` among the arguments a call passes (after
    ``skip`` implicit ones); -1 for a keyword-only parameter."""
    args = fn.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args][skip:]
    for i, a in enumerate(positional):
        if a is param:
            return i
    return -1


def _passes(call: ast.Call, fn: ast.AST, param: ast.arg, skip: int) -> bool:
    """May ``call`` pass a value for ``param`` (of ``fn``)?"""
    if _has_star(call) or any(kw.arg == param.arg for kw in call.keywords):
        return True
    at = _position(fn, param, skip)
    return 0 <= at < len(call.args)
