"""What a rule produces: findings, each with an optional fix made of CST edits.

A fix never edits text.  It is a list of :class:`Edit` objects, each naming a
node of the *original* tree and a function that receives that node's *updated*
form (children already rewritten by other edits) and returns its replacement.
Because edits are applied bottom-up in one transformer walk, fixes on nested
nodes compose instead of overwriting each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    import libcst as cst

EditResult = Union["cst.CSTNode", "cst.FlattenSentinel", "cst.RemovalSentinel"]


class Safety(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace ``node`` by ``apply(updated_node)``.  ``node`` is a
    :class:`~codemods.analysis.source.Target` (where an ``ast`` rule wants the edit; the
    engine finds the libcst node at render time) or a node of the original
    libcst tree."""

    node: object
    apply: Callable[[cst.CSTNode], EditResult]


@dataclass(frozen=True)
class Fix:
    edits: Sequence[Edit]
    safety: Safety
    #: the fix emits ``<torch alias>.…`` names and needs ``import torch`` if absent
    needs_torch: bool = False
    #: other modules the fix names (``functools``): ``import <name>`` is
    #: added where absent (libcst's AddImportsVisitor)
    imports: Tuple[str, ...] = ()
    #: one line saying what the fix does, e.g. "remove `dynamic=False`"
    title: str = ""
    #: the clause the finding's message ends with that says why the fix is
    #: unsafe, when it is only for want of evidence a trace can give (a
    #: trace-made upgrade to safe drops it: codemods.trace.match.upgrade)
    unsafe_because: str = ""
    #: (path, rule code) of the fixes of other files of the run this one
    #: needs applied with it (a `.fill_` of an lr that another file makes a
    #: tensor would fail on a float): ``--fix`` applies them together; the
    #: interactive review offers it only once those files' fixes of that
    #: code were all accepted
    rests_on: Tuple[Tuple[str, str], ...] = ()


@dataclass
class Finding:
    code: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Optional[Fix] = None
    #: the rule's name, for output formats that want it
    rule_name: str = ""
    #: filled by the engine: whether this run applied (or would apply) the fix
    applied: bool = field(default=False, compare=False)
    #: False when the source shows no evidence that the guarded value or
    #: shape changes between calls: reported only with ``--unproven``
    proven: bool = field(default=True, compare=False)
    #: the lines a traced code object of the compiled function this finding is
    #: about can start on (its decorators' and its ``def``'s), when the finding
    #: is not on that function's compile site or calls: a float passed in
    #: through forwarding functions.  The trace matches it by them.
    feeds: Tuple[int, ...] = field(default=(), compare=False)
    #: the file of those lines when the compiled function is in another module
    #: of the run ("" : this file)
    feeds_path: str = field(default="", compare=False)
    #: the names under which a trace guards the value this finding is about
    #: (FR003: the compiled function's parameter, the keyword it is passed
    #: by), so a trace implicates an unproven finding only for its own value
    about: Tuple[str, ...] = field(default=(), compare=False)
    #: the finding whose fix also fixes this one (FR004: optimizers sharing
    #: one lr write); this one has no fix of its own and is applied with it
    fixed_by: Optional["Finding"] = field(default=None, compare=False, repr=False)
    #: the notebook cell the finding is in (1-based; ``line`` counts within
    #: it): :mod:`codemods.pipeline.notebook`; None in a ``.py`` file
    cell: Optional[int] = field(default=None, compare=False)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    @property
    def safety(self) -> Optional[Safety]:
        return self.fix.safety if self.fix else None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)


class FileError(Exception):
    """Bad input: reported as one line ``path: reason``, the run goes on, exit 2."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
