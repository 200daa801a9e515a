"""The interface every rule implements.

A pass is one class: a stable ``code``, a ``name``, the rule documentation
(ruff's four headings) and a ``check`` method that turns the shared
:class:`~codemods.analysis.context.FileContext` into findings.  Examples live beside the
rule (Fixit style) and are run as tests.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterable, Optional, Sequence, Tuple


from ..findings import Edit, Finding, Fix, Safety


@dataclass(frozen=True)
class Example:
    """``before`` must produce a finding; when ``after`` is given, ``--unsafe-fixes``
    (if ``unsafe``) or ``--fix`` turns ``before`` into ``after``."""

    before: str
    after: Optional[str] = None
    unsafe: bool = False
    #: the finding is reported only with ``--unproven`` (no evidence of variation)
    unproven: bool = False


if TYPE_CHECKING:
    from ..analysis.project import ProjectFact
    from ..trace.causes import CuresCause


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    what_it_does: ClassVar[str]
    why_it_recompiles: ClassVar[str]
    example: ClassVar[str]
    fix_safety: ClassVar[str]
    #: code that must produce no finding
    valid: ClassVar[Sequence[str]] = ()
    #: code that must produce a finding (and its fix)
    invalid: ClassVar[Sequence[Example]] = ()
    #: byte strings one of which a file must contain for this rule to find anything
    #: (the engine's cheap text prefilter is the union over selected rules)
    triggers: ClassVar[Tuple[bytes, ...]] = (b"compile",)
    #: what the rule reads: "ast" (the source and compile-site model) or
    #: "cst" (the libcst tree: only for comments, which ``ast`` drops)
    reads: ClassVar[str] = "cst"
    #: the rule reads the project index (facts of other modules of the run)
    reads_project: ClassVar[bool] = False
    #: the facts of other modules this rule needs beyond the index's compiled
    #: functions, gathered and proved by the run for it
    #: (:class:`~codemods.analysis.project.ProjectFact`)
    project_facts: ClassVar[Tuple["ProjectFact", ...]] = ()
    #: the rule can only find something where something is compiled (a file
    #: whose only ``compile`` is ``re.compile`` is skipped unparsed)
    needs_compile_site: ClassVar[bool] = True
    #: the rule only reports: no rewrite is known to cure what it finds
    #: (its documentation says why); its examples carry no ``after``
    report_only: ClassVar[bool] = False
    #: the trace causes (:mod:`codemods.trace.causes`) whose recompiles this
    #: rule's fix cures: ``run`` and ``--from-trace`` match its findings to
    #: them and the trace's table names it in the cure column
    cures: ClassVar[Tuple["CuresCause", ...]] = ()

    def check(self, ctx) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    def reads_cst(self, data: bytes) -> bool:
        """Will :meth:`check` read the libcst tree of a file of these bytes?
        The engine then parses it up front (libcst's own syntax errors are
        reported); otherwise libcst is not even imported for a report."""
        return self.reads != "ast"

    # helpers for subclasses -------------------------------------------------
    def finding(
        self,
        ctx,
        node,  # an ast node, (first, last) ast nodes, or ((line, col), (line, col))
        message: str,
        *,
        edits: Sequence[Edit] = (),
        safety: Optional[Safety] = None,
        needs_torch: bool = False,
        imports: Tuple[str, ...] = (),
        title: str = "",
        unsafe_because: str = "",
        proven: bool = True,
        feeds: Tuple[int, ...] = (),
        feeds_path: str = "",
        about: Tuple[str, ...] = (),
        rests_on: Tuple[Tuple[str, str], ...] = (),
    ) -> Finding:
        if isinstance(node, ast.AST):
            start, end = ctx.source.start(node), ctx.source.end(node)
        elif isinstance(node[0], ast.AST):  # (first, last) ast nodes: from the start of one to the end of the other
            start, end = ctx.source.start(node[0]), ctx.source.end(node[1])
        else:  # ((line, column), (line, column)), columns 0-based
            start, end = node
        fix = Fix(edits=tuple(edits), safety=safety, needs_torch=needs_torch, imports=imports, title=title, unsafe_because=unsafe_because, rests_on=rests_on) if edits else None
        return Finding(
            code=self.code,
            message=message,
            path=ctx.display_path,
            line=start[0],
            column=start[1] + 1,
            end_line=end[0],
            end_column=end[1] + 1,
            fix=fix,
            rule_name=self.name,
            proven=proven,
            feeds=feeds,
            feeds_path=feeds_path,
            about=about,
        )

    @classmethod
    def doc(cls) -> str:
        """The rule's documentation, as ``fix-recompiles rules CODE`` prints it."""
        return rule_doc(f"{cls.code} ({cls.name})", cls.what_it_does, cls.why_it_recompiles, cls.example, cls.fix_safety)


def rule_doc(title: str, what_it_does: str, why_it_recompiles: str, example: str, fix_safety: str) -> str:
    """A rule's documentation as ruff lays its rules' out: What it does / Why
    it recompiles / Example / Fix safety (also the trace's own fixes':
    :mod:`codemods.trace.registry`)."""
    parts = [
        title,
        "",
        "## What it does",
        what_it_does.strip(),
        "",
        "## Why it recompiles",
        why_it_recompiles.strip(),
        "",
        "## Example",
        example.strip("\n"),
        "",
        "## Fix safety",
        fix_safety.strip(),
    ]
    return "\n".join(parts) + "\n"
