"""The byte prefilter: can any selected rule find something in this file?

The first step of the engine, before any parse: a rule names byte strings
(``Rule.triggers``) one of which a file must contain; a rule that needs a
compile site also skips a file whose only ``compile`` is ``re.compile``
(:func:`compile_is_regex_only`); a rule that reads the project index runs on
a file that mentions one of the index's names (:func:`mentions_any`).
Everything that passes is parsed once with the stdlib ``ast`` and analysed
(:mod:`codemods.compile_sites`); there is no second, cheaper judgement of
what a rule would find, so nothing here can drop a finding that the rules'
own analysis would make, except by a byte test that the tests compare with
and without (``FIX_RECOMPILES_NO_PREFILTER=1``: every selected rule on every
file that parses).
"""

from __future__ import annotations

import os
import re
from typing import List, Sequence, Tuple

TORCH = "torch"

#: False: every selected rule runs on every file (tests compare findings with and without)
ENABLED = os.environ.get("FIX_RECOMPILES_NO_PREFILTER", "") in ("", "0")


#: the word ``compile`` (``torch.compile``, ``re.compile``, ``compile(``, prose)
_COMPILE_WORD = re.compile(rb"compile\b")  # literal first: fast scan; the start is checked apart
#: an import that may bind the name ``compile`` (or ``*``): on one line, over
#: continuations, or in parentheses
_IMPORT_COMPILE = re.compile(rb"import\b(?:[^\n;\\(]|\\\r?\n|\\.)*?(?:\bcompile\b|\*)|import\s*\([^)]*(?:\bcompile\b|\*)")
#: modules whose ``compile`` is common and never torch's
_REGEX_MODULES = (b"re", b"regex")
#: a plain ``import a, b.c,`` prefix (no ``as``) before a module's name
_PLAIN_IMPORT_PREFIX = re.compile(rb"[ \t]*import[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*\Z")


#: comments and string literals (consumed whole, leftmost first) or the word
#: ``compile`` outside them: a match of the last alternative is ``compile``
#: in code (a NAME token, as the tokenizer would say)
_COMPILE_IN_CODE = re.compile(
    rb"#[^\r\n]*"
    rb'|"""(?:\\[\s\S]|[^\\])*?"""'
    rb"|'''(?:\\[\s\S]|[^\\])*?'''"
    rb'|"(?:\\[\s\S]|[^"\\\r\n])*"'
    rb"|'(?:\\[\s\S]|[^'\\\r\n])*'"
    rb"|(?<![\w\x80-\xff])(compile)(?![\w\x80-\xff])"
)


def compile_in_code(data: bytes) -> bool:
    """Is the word ``compile`` in the code, not only in comments and strings?
    Every compile site and compiled function the model recognises is spelled
    with a name ``compile`` in code (``torch.compile``, ``m.compile()``,
    ``from torch import compile``); a file that says it only in prose (a
    docstring about ``torch.compile``) need not be parsed.  A quote the
    pattern cannot pair (a syntax error) is skipped, so the answer errs on
    "in code".  One spelling is given up: an f-string counts as prose, so a
    compile written inside its braces (``f"{torch.compile(f)(x)}"``) is not
    seen."""
    for match in _COMPILE_IN_CODE.finditer(data):
        if match.start(1) >= 0:
            return True
    return False


def compile_is_regex_only(data: bytes) -> bool:
    """Do the bytes show that every ``compile`` a compile site could use is
    ``re.compile`` / ``regex.compile``?  True only when every ``.compile``
    attribute is on the bare name ``re`` or ``regex``, each such name occurs
    nowhere else than in ``name.attr`` and in plain ``import`` lists (so it is
    the module, never rebound -- ``import torch as re`` is not plain), and no
    import may bind a name ``compile`` (or ``*``).  Then no torch.compile
    site, no ``model.compile()`` and no compiled function can be in the file,
    so it need not be parsed; anything unusual answers False (parse it).
    Also True when ``compile`` is only in comments and strings
    (:func:`compile_in_code`; asked last, and once per file: it scans the
    whole file)."""
    global _LAST
    if _LAST[0] is data:
        return _LAST[1]
    answer = _regex_only(data) or not compile_in_code(data)
    _LAST = (data, answer)
    return answer


#: the last answer of :func:`compile_is_regex_only` (the engine asks about one
#: file several times in a row: index, rule selection, limits)
_LAST: Tuple[object, bool] = (None, False)


def _regex_only(data: bytes) -> bool:
    if _IMPORT_COMPILE.search(data) is not None:
        return False
    used = set()
    for match in _COMPILE_WORD.finditer(data):
        i = match.start()
        if i > 0 and (data[i - 1 : i].isalnum() or data[i - 1 : i] == b"_"):
            continue  # part of a longer name (`torch_compile`): not the word
        # what comes before the word, over spaces and line continuations
        newline = False
        while i > 0 and data[i - 1 : i] in b" \t\f\r\n\\":
            newline = newline or data[i - 1 : i] == b"\n"
            i -= 1
        if data[i - 1 : i] != b".":
            if newline and b"#" in data[data.rfind(b"\n", 0, i) + 1 : i]:
                return False  # `torch.  # comment` on the line before: maybe an attribute
            continue  # not an attribute: `compile(` (builtin, or imported: see above), prose
        dot = i - 1
        while dot > 0 and data[dot - 1 : dot] in b" \t\f\r\n\\":
            dot -= 1
        for name in _REGEX_MODULES:
            start = dot - len(name)
            if start >= 0 and data[start:dot] == name and (start == 0 or not (data[start - 1 : start].isalnum() or data[start - 1 : start] in b"_.")):
                used.add(name)
                break
        else:
            return False
    for name in used:
        at = data.find(name)
        while at >= 0:
            end = at + len(name)
            before, after = data[at - 1 : at] if at else b"", data[end : end + 1]
            whole = not before or not (before.isalnum() or before in (b"_", b"."))
            whole = whole and not (after.isalnum() or after == b"_")
            follow = end
            while data[follow : follow + 1] in (b" ", b"\t"):
                follow += 1  # `re . compile`
            if whole and data[follow : follow + 1] != b".":
                # the bare name, not `name.attr`: only a plain import may bind it
                line_start = data.rfind(b"\n", 0, at) + 1
                if _PLAIN_IMPORT_PREFIX.match(data, line_start, at) is None:
                    return False  # rebound, a parameter, a string, a comment ...: parse to be sure
            at = data.find(name, end)
    return True


def _word_byte(byte: int) -> bool:
    # ASCII letters, digits, `_`, and any non-ASCII byte (identifiers may use them)
    return byte >= 0x80 or byte == 0x5F or 0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A


def mentions_any(data: bytes, names: Sequence[Tuple[bytes, bytes]]) -> bool:
    """Can the file call one of ``names``, the project index's compiled
    functions as (function name, last part of its module's name)?  Only if
    the bytes hold

    * the function's name as a whole word (not inside a longer name: ``f``
      is not in ``def``) where a call can use it: called (``f(``, ``m.f(``)
      or imported (an ``import`` shortly before it: ``from m import f``,
      ``from m import (\n f,\n)``) -- a name only read as a value, in a
      comment or a docstring, calls nothing;
    * and its module's name as a whole word (the index resolves a call only
      through an import that spells the module: ``from pkg.kernels import f``,
      ``from . import kernels``), or a relative import (``from . import f``
      names a package by its dots).

    A common method name (``update``) of one module then no longer pulls in
    every file that calls ``dict.update``."""
    size = len(data)
    relative = b"from ." in data
    words: dict = {}  # module name -> whether the bytes hold it as a word
    for name, module in names:
        at = data.find(name)
        if at < 0:
            continue
        if not relative:
            has = words.get(module)
            if has is None:
                has = words[module] = _has_word(data, module)
            if not has:
                continue
        while at >= 0:
            end = at + len(name)
            if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
                follow = end
                while follow < size and data[follow] in b" \t":
                    follow += 1
                if data[follow : follow + 1] == b"(" or b"import" in data[max(0, at - 500) : at]:
                    return True
            at = data.find(name, end)
    return False


def _has_word(data: bytes, word: bytes) -> bool:
    size = len(data)
    at = data.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
            return True
        at = data.find(word, end)
    return False


def mentions_compile(data: bytes) -> bool:
    """May the file hold a compile site or a compiled function?  Cheap byte
    tests: ``torch`` and ``compile`` both occur, and not only as ``re.compile``."""
    return b"compile" in data and TORCH.encode() in data and not compile_is_regex_only(data)


def select(data: bytes, rules: Sequence, extra: Sequence[Tuple[bytes, bytes]] = (), always: bool = False) -> Tuple[List, bool]:
    """(the rules that may find something in ``data``, whether it mentions a
    name of the project index ``extra``; ``always``: the index concerns the
    file whatever it mentions)."""
    cross = always or (bool(extra) and mentions_any(data, extra))
    if not ENABLED:
        return list(rules), cross
    regex_only = None
    out = []
    for rule in rules:
        if cross and rule.reads_project:
            out.append(rule)
        elif any(t in data for t in rule.triggers):
            if rule.needs_compile_site:
                if regex_only is None:
                    regex_only = compile_is_regex_only(data)
                if regex_only:
                    continue
            out.append(rule)
    return out, cross
