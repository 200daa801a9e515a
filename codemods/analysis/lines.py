"""Where a line of a file lands after an edit: the review and the trace move
recorded line numbers onto the code as accepted so far."""

from __future__ import annotations

import difflib
from typing import Callable, Dict


def line_map(before: bytes, after: bytes) -> Callable[[int], int]:
    """Where each (1-based) line of ``before`` lands in ``after``.

    Unchanged lines follow their shift; a line inside a rewritten block maps to
    the line at the same offset in the new block (or its last line); a deleted
    line maps to the line that now follows the deletion.
    """
    a = before.splitlines()
    b = after.splitlines()
    mapping: Dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(i2 - i1):
            if tag == "equal":
                target = j1 + k
            elif tag == "replace":
                target = j1 + min(k, j2 - j1 - 1)
            else:  # delete
                target = j1
            mapping[i1 + k + 1] = target + 1
    return lambda line: mapping.get(line, line)
