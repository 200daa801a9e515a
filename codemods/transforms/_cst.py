"""Small CST edits shared by several passes."""

from __future__ import annotations

import libcst as cst


def remove_keyword(call: cst.Call, keyword: str) -> cst.Call:
    """``call`` without its ``keyword=`` argument; when that argument was last,
    the new last argument takes its comma (``f(a, k=1,)`` → ``f(a,)``), so the
    call's layout is kept."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            removed = args.pop(i)
            if i == len(args) and args:
                args[-1] = args[-1].with_changes(comma=removed.comma)
            return call.with_changes(args=args)
    return call
