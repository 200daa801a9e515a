"""FR002 graph-break: ``# fix-recompiles: graph-break`` markers become
``torch._dynamo.graph_break()``."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence

from .._lazy import cst

from ..findings import Edit, Finding, Safety
from ..analysis.placement import torch_expr
from .base import Example, Rule

MARKER_RE = re.compile(r"^#\s*fix-recompiles:\s*graph-break\s*$")
#: a comment line holding both halves of the marker (a superset of what
#: MARKER_RE accepts): a file without one never reaches libcst
#: (``graph-break`` alone is common prose: a comment about a decorator)
MARKER_LINE_RE = re.compile(rb"#[^\n\r]*?fix-recompiles:[^\n\r]*?graph-break")


def _is_marker(line: cst.EmptyLine) -> bool:
    return line.comment is not None and bool(MARKER_RE.match(line.comment.value.strip()))


def _marker_index(lines: Sequence[cst.EmptyLine], original_len: int, original_index: int) -> Optional[int]:
    """Where the marker that stood at ``original_index`` is now.

    Earlier graph-break edits on the same node only remove a prefix of the
    lines, so the marker moved left by the number of lines removed.  If another
    edit reshaped the lines, fall back to the first marker left.
    """
    index = original_index - (original_len - len(lines))
    if 0 <= index < len(lines) and _is_marker(lines[index]):
        return index
    for i, line in enumerate(lines):
        if _is_marker(line):
            return i
    return None


def _clause_keyword(node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> str:
    """``elif``/``else``/``except``/``finally`` when ``node`` is such a clause
    (its leading lines sit between two blocks, not before a statement)."""
    if isinstance(node, cst.If) and isinstance(parent, cst.If) and parent.orelse is node:
        return "elif"
    if isinstance(node, cst.Else):
        return "else"
    if isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)):
        return "except"
    if isinstance(node, cst.Finally):
        return "finally"
    return ""


class _Tree:
    """Parents and positions of the libcst tree (this rule reads comments,
    which only the CST keeps; it runs on files with the marker only)."""

    def __init__(self, module: cst.Module) -> None:
        from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._parents = wrapper.resolve(ParentNodeProvider)
        self._positions = wrapper.resolve(PositionProvider)

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode):
        cur = self._parents.get(node)
        while cur is not None:
            yield cur
            cur = self._parents.get(cur)

    def enclosing(self, node: cst.CSTNode, kinds) -> Optional[cst.CSTNode]:
        return next((a for a in self.ancestors(node) if isinstance(a, kinds)), None)

    def position(self, node: cst.CSTNode):
        return self._positions[node]


class GraphBreak(Rule):
    code = "FR002"
    name = "graph-break"
    summary = "`# fix-recompiles: graph-break` marker becomes `torch._dynamo.graph_break()`"
    what_it_does = """
Replaces a comment line `# fix-recompiles: graph-break` inside a function body
by a call `torch._dynamo.graph_break()` at the same place and indentation
(under the module's alias of torch; `import torch` is added if missing). The
marker is consumed, so a second run changes nothing. A marker outside any
function, or right before `elif`/`else`/`except`/`finally`, is reported
without a fix; one inside a loop or `try` statement gets an unsafe fix.
"""
    why_it_recompiles = """
When a large graph recompiles only because of a small tail (for example an
int that changes under `dynamic=False`), the whole graph is compiled again
each time. A graph break between them splits the function: the large part
compiles once and only the small tail recompiles.
"""
    example = """
    @torch.compile(dynamic=False)
    def fn(x, c):
        y = expensive(x)
        # fix-recompiles: graph-break
        return y + c

Becomes:

    @torch.compile(dynamic=False)
    def fn(x, c):
        y = expensive(x)
        torch._dynamo.graph_break()
        return y + c
"""
    fix_safety = """
Safe: `torch._dynamo.graph_break()` exists on every torch release from 2.1,
changes no value, and is a no-op outside compiled code. You asked for it with
the marker. Unsafe when the marker sits inside a `for`/`while` loop or a `try`
statement of its function: a graph break there makes dynamo (2.13, measured)
skip the whole frame, so the function runs eagerly instead of being split.
"""
    triggers = (b"graph-break",)
    #: the marker needs no compile site
    needs_compile_site = False
    valid = ("def f(x):\n    # fix-recompiles: graph break please\n    return x\n",)
    invalid = (
        Example(
            "import torch\ndef f(x):\n    y = x + 1\n    # fix-recompiles: graph-break\n    return y\n",
            "import torch\ndef f(x):\n    y = x + 1\n    torch._dynamo.graph_break()\n    return y\n",
        ),
        Example("x = 1\n# fix-recompiles: graph-break\ny = 2\n"),
    )

    def reads_cst(self, data: bytes) -> bool:
        return MARKER_LINE_RE.search(data) is not None

    def check(self, ctx) -> Iterable[Finding]:
        if not self.reads_cst(ctx.source.data):
            return []
        rule = self
        analysis = _Tree(ctx.module)
        model = ctx.model
        findings: List[Finding] = []

        def in_function(node: cst.CSTNode) -> bool:
            owner = analysis.enclosing(node, (cst.FunctionDef, cst.ClassDef))
            return isinstance(owner, cst.FunctionDef)

        def blocker(node: cst.CSTNode) -> str:
            """"a loop"/"a try statement" when ``node`` sits inside one within its function."""
            for anc in analysis.ancestors(node):
                if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                    return ""
                if isinstance(anc, (cst.For, cst.While)):
                    return "a loop"
                if isinstance(anc, (cst.Try, cst.TryStar)):
                    return "a `try` statement"
            return ""

        def make_call() -> cst.SimpleStatementLine:
            call = cst.Call(func=torch_expr(model, "_dynamo", "graph_break"))
            return cst.SimpleStatementLine(body=[cst.Expr(call)])

        def statement_edit(stmt: cst.BaseStatement, original_len: int, original_index: int) -> Edit:
            def apply(updated: cst.CSTNode):
                lines = list(updated.leading_lines)
                i = _marker_index(lines, original_len, original_index)
                if i is None:
                    return updated
                new = make_call().with_changes(leading_lines=lines[:i])
                return cst.FlattenSentinel([new, updated.with_changes(leading_lines=lines[i + 1 :])])

            return Edit(stmt, apply)

        def footer_edit(block: cst.IndentedBlock, original_len: int, original_index: int) -> Edit:
            def apply(updated: cst.CSTNode):
                lines = list(updated.footer)
                # footer lines are only ever removed from the front here as well
                i = _marker_index(lines, original_len, original_index)
                if i is None:
                    return updated
                new = make_call().with_changes(leading_lines=lines[:i])
                return updated.with_changes(body=list(updated.body) + [new], footer=lines[i + 1 :])

            return Edit(block, apply)

        def fullgraph(line_no: int) -> object:
            """The ``fullgraph=`` of a compile of a function holding the line
            (True, None: not passed or False, or UNKNOWN)."""
            found: object = None
            for site in model.compile_sites:
                fn = site.target_def
                if fn is None or not (fn.lineno <= line_no <= fn.end_lineno):  # type: ignore[attr-defined]
                    continue
                value = site.option_value("fullgraph")
                if value is True:
                    return True
                if value is not None and value is not False:
                    found = value
            return found

        def report(anchor: cst.CSTNode, line_no: int, fixable: bool, edit: Optional[Edit], why: str = "") -> None:
            inside = blocker(anchor) if edit else ""
            whole = fullgraph(line_no) if edit else None
            if whole is True:
                # measured on torch 2.13: dynamo raises at the graph break
                fixable, edit, why = False, None, (
                    "graph-break marker in a function compiled with `fullgraph=True`, which refuses graph breaks: "
                    "`torch._dynamo.graph_break()` there would make the call fail (no fix; drop `fullgraph=True` first)"
                )
            unknown = whole is not None and whole is not True
            if unknown and not inside:
                message = (
                    "graph-break marker in a function whose `fullgraph=` is not visible here: with `fullgraph=True`, "
                    "`torch._dynamo.graph_break()` there would make the call fail (fix is unsafe)"
                )
            elif inside:
                # measured on torch 2.13: a graph break inside a loop or a try
                # block makes dynamo skip the whole frame (0 graphs, all eager)
                message = (
                    f"graph-break marker inside {inside}: `torch._dynamo.graph_break()` there makes "
                    "torch run the whole function eagerly (fix is unsafe; move the marker out of it)"
                )
            elif fixable:
                message = "graph-break marker: insert `torch._dynamo.graph_break()` here"
            else:
                message = why or "graph-break marker outside a function body has no effect (no fix)"
            # a comment has no position of its own: point at the marker line
            f = rule.finding(
                ctx,
                ((line_no, 0), (line_no, 0)),
                message,
                edits=[edit] if edit else (),
                safety=(Safety.UNSAFE if inside or unknown else Safety.SAFE) if edit else None,
                needs_torch=True,
                title="insert `torch._dynamo.graph_break()`",
            )
            findings.append(f)

        class Finder(cst.CSTVisitor):
            def _lines(self, owner: cst.CSTNode, lines: Sequence[cst.EmptyLine], first_line: int, footer: bool, clause: str = "") -> None:
                markers = [i for i, line in enumerate(lines) if _is_marker(line)]
                if not markers:
                    return
                if clause:
                    # a comment right before `elif`/`else`/`except`/`finally` has no
                    # statement position: a call there would end the block
                    why = f"graph-break marker right before `{clause}` has no statement position (no fix): move it into a block"
                    for i in markers:
                        report(owner, first_line + i, False, None, why)
                    return
                fixable = in_function(owner) if not isinstance(owner, cst.Module) else False
                if footer and isinstance(owner, cst.IndentedBlock):
                    fixable = isinstance(analysis.parent(owner), cst.FunctionDef) or in_function(owner)
                for i in markers:
                    line_no = first_line + i
                    edit = None
                    if fixable:
                        edit = footer_edit(owner, len(lines), i) if footer else statement_edit(owner, len(lines), i)
                    report(owner, line_no, fixable, edit)

            def on_visit(self, node: cst.CSTNode) -> bool:
                clause = _clause_keyword(node, analysis.parent(node))
                if clause:
                    lines = node.leading_lines
                    if lines:
                        start = analysis.position(node).start.line
                        self._lines(node, lines, start - len(lines), footer=False, clause=clause)
                elif isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                    lines = node.leading_lines
                    if lines:
                        start = analysis.position(node).start.line
                        self._lines(node, lines, start - len(lines), footer=False)
                elif isinstance(node, cst.Module):
                    self._lines(node, node.header, 1, footer=False)
                    n_lines = len(node.code.split("\n")) - (1 if node.code.endswith("\n") else 0)
                    self._lines(node, node.footer, n_lines - len(node.footer) + 1, footer=True)
                elif isinstance(node, cst.IndentedBlock) and node.footer:
                    end = analysis.position(node).end.line
                    self._lines(node, node.footer, end - len(node.footer) + 1, footer=True)
                return True

        ctx.module.visit(Finder())
        return findings
