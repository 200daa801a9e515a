"""Source.lines counts lines as the tokenizer (and so ``ast``) does."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.pipeline.engine import parse_ast


def test_form_feed_and_other_separators_do_not_split_lines():
    text = "# \u00e9t\u00e9\n\x0c\nx = 1  # \x1c \x85 \u2028\ny = '\u00e9'; z = x['lr']\n"
    source = parse_ast("t.py", text.encode("utf-8"))
    assert len(source.lines) == 4
    subscript = next(n for n in ast.walk(source.tree) if isinstance(n, ast.Subscript))
    assert source.segment(subscript) == "x['lr']"
    assert source.start(subscript) == (4, 13)  # code points, after the non-ASCII 'é'


def test_crlf_and_cr_line_ends():
    source = parse_ast("t.py", b"a = 1\r\nb = 2\rc = [b]\n")
    assert source.lines == ["a = 1\r\n", "b = 2\r", "c = [b]\n"]
    listing = next(n for n in ast.walk(source.tree) if isinstance(n, ast.List))
    assert source.segment(listing) == "[b]"


#: every kind of node the parser makes (3.11): children() is checked on each
EVERY_FORM = '''
from . import a as b
import x.y
@dec(1, *a, k=2, **kw)
async def f(p, /, q: int = 1, *args, r, s=2, **kw) -> "T":
    global g
    async with a as (b, c), d:
        async for i, *j in k:
            await z
    x: int = (w := 3); y = x
    x += 1; x[1:2:3] = x.a; del x[0], x.b
    return {**d, 1: 2}, {1, 2}, [i for i in r if i], {i: j for i, j in r}, (i async for i in r)
class C(B, metaclass=M):
    nonlocal_free = lambda a, *, b=1: (yield a) if not a and b or -a else f"{a!r:>{b}}"
    def g(self):
        nonlocal q
        try:
            raise E from e
        except (A, B) as err:
            assert err, "m"
        else:
            pass
        finally:
            yield from x
        while a < b <= c is not d:
            break
        else:
            continue
        match p:
            case [1, *rest] | {"k": v, **kw} if v: pass
            case Point(x=0, y=_) as pt: pass
            case None | str(): pass
try:
    pass
except* ValueError:
    pass
'''


def test_children_are_the_node_fields_in_order():
    """children() (a function made per node type) gives what
    ast.iter_child_nodes gives, without the context and operator singletons."""
    import codemods.analysis.scopes
    import codemods.analysis.source
    from codemods.analysis.source import children

    leaves = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
    trees = [ast.parse(EVERY_FORM)] + [ast.parse(open(m.__file__, encoding="utf-8").read()) for m in (ast, codemods.analysis.source, codemods.analysis.scopes)]
    kinds = set()
    for tree in trees:
        for node in ast.walk(tree):
            kinds.add(type(node))
            expected = [c for c in ast.iter_child_nodes(node) if not isinstance(c, leaves)]
            assert list(children(node)) == expected, type(node).__name__
    assert {ast.MatchMapping, ast.TryStar, ast.Dict, ast.arguments, ast.Global, ast.Nonlocal} <= kinds


def test_scopes_of_a_long_expression():
    """The scope walk is iterative over plain expressions: a 2,500-term sum
    (within the parser's limits, beyond Python's recursion limit) resolves."""
    from codemods.analysis.scopes import Scopes

    tree = ast.parse("n = 1\ndef f():\n    return " + " + ".join(["n"] * 2500) + "\n")
    scopes = Scopes(tree)
    loads = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    assert len(loads) == 2500 and all(scopes.resolved[name] is scopes.module for name in loads)
    assert len(scopes.module.references["n"]) == 2500


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["x = 1", "# -*- coding: latin-1 -*-", "# coding=utf-8", "#!/usr/bin/env python", "", "s = 'coding'", "y = 'é'", "\ufeffz = 2", "\ttab = 3"]), max_size=4), st.sampled_from(["\n", "\r\n"]))
def test_decode_fast_path_is_the_interpreters_decoding(lines, newline):
    """ASCII without an encoding declaration in its first two lines skips
    ``tokenize.detect_encoding``; the text and encoding are what it gives."""
    import io
    import tokenize

    from codemods.analysis.source import decode, plain_ascii

    data = newline.join(lines).encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError) as exc:  # a BOM with a latin-1 cookie
        with pytest.raises(type(exc)):
            decode(data)
        return
    if text.startswith("\ufeff"):
        text = text[1:]
    assert decode(data) == (text, encoding)
    if plain_ascii(data):
        assert encoding == "utf-8" and data.isascii()
    assert not plain_ascii(b"# -*- coding: latin-1 -*-\nx = 1\n")
    assert not plain_ascii(b"#!/usr/bin/python\n# vim: set fileencoding=ascii :\n")
    assert plain_ascii(b"x = 1\ny = 2\n# coding: latin-1\n")  # a third line declares nothing
