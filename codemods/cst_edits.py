"""Small CST edits shared by several rules."""

from __future__ import annotations

from ._lazy import cst


#: black's default line length: an emitted statement longer than this is
#: laid out on several lines, as black does
LINE_LENGTH = 88


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


def add_keyword_only_param(name: str, make_default, node: "cst.FunctionDef") -> "cst.FunctionDef":
    """``def f(x)`` -> ``def f(x, *, NAME)`` (``NAME=<make_default()>`` when
    ``make_default`` is given; after any ``*args`` / keyword-only parameters).
    Parameters one a line with a trailing comma (black's layout) get the new
    ones on lines of their own, each with its comma."""
    params = node.params
    star = params.star_arg
    if isinstance(star, cst.MaybeSentinel):
        star = cst.ParamStar()
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    param = cst.Param(cst.Name(name)) if make_default is None else cst.Param(cst.Name(name), default=make_default(), equal=equal)
    kwonly = list(params.kwonly_params)
    changes = {}
    slash = [params.posonly_ind] if isinstance(params.posonly_ind, cst.ParamSlash) else []
    ordered = [*params.posonly_params, *slash, *params.params, *([params.star_arg] if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) else []), *kwonly]
    # (after a `/` last, or before `**kwargs`, the plain form)
    last = ordered[-1] if ordered and params.star_kwarg is None and not isinstance(ordered[-1], cst.ParamSlash) else None
    closing = getattr(last, "comma", None)
    if isinstance(closing, cst.Comma) and isinstance(closing.whitespace_after, cst.ParenthesizedWhitespace):
        between = next(
            (e.comma for e in reversed(ordered[:-1]) if isinstance(getattr(e, "comma", None), cst.Comma) and isinstance(e.comma.whitespace_after, cst.ParenthesizedWhitespace)),
            closing.with_changes(whitespace_after=closing.whitespace_after.with_changes(last_line=cst.SimpleWhitespace(closing.whitespace_after.last_line.value + "    "))),
        )
        param = param.with_changes(comma=closing)
        moved = last.with_changes(comma=between)
        if last is params.star_arg:
            star = moved
        elif kwonly and last is kwonly[-1]:
            kwonly[-1] = moved
        elif params.params and last is params.params[-1]:
            changes["params"] = [*params.params[:-1], moved]
        else:
            changes["posonly_params"] = [*params.posonly_params[:-1], moved]
        if star is not params.star_arg and isinstance(star, cst.ParamStar) and last is not params.star_arg:
            star = star.with_changes(comma=between)
    return node.with_changes(params=params.with_changes(star_arg=star, kwonly_params=kwonly + [param], **changes))


def add_keyword_argument(name: str, make_value, node: "cst.Call") -> "cst.Call":
    """``f(x)`` -> ``f(x, NAME=value)``, the value made by ``make_value()``
    (libcst is imported only when the edit is rendered)."""
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return node.with_changes(args=list(node.args) + [cst.Arg(value=make_value(), keyword=cst.Name(name), equal=equal)])


def name_node(name: str) -> "cst.Name":
    return cst.Name(name)


def guard_statement(test: "cst.BaseExpression", node: "cst.SimpleStatementLine") -> "cst.If":
    """``node`` (a statement) under ``if <test>:``; the comment lines above it
    stay above the ``if``."""
    return cst.If(test=test, body=cst.IndentedBlock(body=[node.with_changes(leading_lines=())]), leading_lines=node.leading_lines)


def split_leading_lines(lines) -> tuple:
    """(lines for an inserted statement, lines kept by the original one): the
    comment lines directly above a statement describe it and stay with it;
    blank lines (and comments separated by a blank line) go above the
    inserted statement."""
    k = len(lines)
    while k > 0 and lines[k - 1].comment is not None:
        k -= 1
    return list(lines[:k]), list(lines[k:])


def insert_before_node(stmt, new_stmt):
    """An edit inserting ``new_stmt`` (a libcst statement, or a list of them)
    before ``stmt`` (a libcst statement or a :class:`~codemods.analysis.source.Target`
    naming one), which stays last."""
    from .findings import Edit

    new = list(new_stmt) if isinstance(new_stmt, (list, tuple)) else [new_stmt]

    def apply(updated: cst.CSTNode):
        above, kept = split_leading_lines(updated.leading_lines)
        return cst.FlattenSentinel([new[0].with_changes(leading_lines=above), *new[1:], updated.with_changes(leading_lines=kept)])

    return Edit(stmt, apply)


def insert_after_node(stmt, new_stmt):
    """An edit inserting ``new_stmt`` (a libcst statement, or a list of them)
    after ``stmt`` (a libcst statement or a :class:`~codemods.analysis.source.Target`
    naming one), which stays itself: later edits of it still apply to it."""
    from .findings import Edit

    new = list(new_stmt) if isinstance(new_stmt, (list, tuple)) else [new_stmt]

    def apply(updated: cst.CSTNode):
        return cst.FlattenSentinel([updated, *new])

    return Edit(stmt, apply)


def is_docstring(stmt: "cst.CSTNode") -> bool:
    """Is ``stmt`` a docstring (a string expression statement on its own)?"""
    return (
        isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
