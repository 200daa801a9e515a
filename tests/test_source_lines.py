"""Source.lines counts lines as the tokenizer (and so ``ast``) does."""

from __future__ import annotations

import ast

from codemods.engine import parse_ast


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
