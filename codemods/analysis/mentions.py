"""What a file's bytes can hold, before any parse: a compile site
(:func:`no_compile_site`, :func:`mentions_compile`) or a call of one of the
project index's names (:func:`mentions_any`).

Byte tests that read comments and string literals as prose.  The engine's
prefilter (:mod:`codemods.pipeline.prefilter`) and the project index both
ask them, so they live here, below both: a file the bytes rule out is never
parsed for what they rule out.
"""

from __future__ import annotations

import bisect
import re
from typing import Dict, List, Optional, Sequence, Tuple

TORCH = "torch"


#: an import that may bind the name ``compile`` (or ``*``): on one line, over
#: continuations, or in parentheses
_IMPORT_COMPILE = re.compile(rb"import\b(?:[^\n;\\(]|\\\r?\n|\\.)*?(?:\bcompile\b|\*)|import\s*\([^)]*(?:\bcompile\b|\*)")
#: a plain ``import a, b.c,`` prefix (no ``as``) before a module's name
_PLAIN_IMPORT_PREFIX = re.compile(rb"[ \t]*import[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*\Z")
_LINE_END = re.compile(rb"[\r\n]")


#: comments and string literals, each consumed whole, leftmost first (the
#: lookahead lets the scan skip other bytes fast).  A quote the pattern
#: cannot pair (a syntax error) is skipped, so an answer errs on "in code".
#: One spelling is given up: an f-string counts as prose, so a compile
#: written inside its braces (``f"{torch.compile(f)(x)}"``) is not seen.
_PROSE = re.compile(
    rb"(?=[#\"'])(?:#[^\r\n]*"
    rb'|"""(?:\\[\s\S]|[^\\])*?"""'
    rb"|'''(?:\\[\s\S]|[^\\])*?'''"
    rb'|"(?:\\[\s\S]|[^"\\\r\n])*"'
    rb"|'(?:\\[\s\S]|[^'\\\r\n])*')"
)
#: modules whose ``compile`` is common and never torch's
_REGEX_MODULES = (b"re", b"regex")


class _Code:
    """Which bytes of a file are code, not comments or string literals:
    :data:`_PROSE` run lazily, only as far as the questions go."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.spans = _PROSE.finditer(data)
        self.starts: List[int] = []
        self.ends: List[int] = []
        #: {end: start} of each comment seen so far
        self.comments: Dict[int, int] = {}
        self.frontier = 0  # every span that ends before this is known

    def at(self, pos: int) -> bool:
        """Is ``pos`` in code?  Also makes :attr:`comments` hold every
        comment that ends at or before ``pos``."""
        while self.frontier <= pos:
            span = next(self.spans, None)
            if span is None:
                self.frontier = len(self.data) + 1
                break
            start, end = span.span()
            self.starts.append(start)
            self.ends.append(end)
            if self.data[start] == 0x23:  # `#`
                self.comments[end] = start
            self.frontier = end
        i = bisect.bisect_right(self.starts, pos) - 1
        return i < 0 or pos >= self.ends[i]


def no_compile_site(data: bytes) -> bool:
    """Do the bytes show that the compile-site model
    (:mod:`codemods.analysis.compile_sites`) can find no compile site -- and so no
    compiled function -- in this file?  Then it need not be parsed for one,
    and the rules that need a site skip it.

    The model recognises a site only where an expression ending in the
    attribute ``.compile`` is called or is a decorator (``torch.compile(f)``,
    ``(th.compile)(f)``, ``@torch.compile``, ``model.compile()``), or where
    a name an import binds to ``torch.compile`` is (``from torch import
    compile as c; c(f)``).  So the answer is True when no import in code may
    bind a name ``compile`` (or ``*``), and every word ``compile`` in code
    (comments and strings never count) is

    * not an attribute: a keyword argument, a parameter, a ``def``, a call of
      the builtin (``compile=True``, ``def compile(self)``, ``compile(src)``);
    * an attribute that is neither called nor a whole decorator
      (:func:`_called_or_decorator`): ``cfg.compile.enable``, ``cfg.compile
      = x``, ``partial(torch.compile, mode=m)``, ``if cfg.compile:``, ``from
      pkg.compile import f``;
    * or ``re.compile`` / ``regex.compile``, where that name occurs in code
      nowhere else than in ``name.attr`` and in plain ``import`` lists (the
      module, never rebound: ``import torch as re`` is not plain).

    Anything unusual answers False (parse).  A first pass reads only the
    bytes around each ``compile``; comments and strings are told from code
    only when that pass is unsure."""
    global _LAST
    if _LAST[0] is data:
        return _LAST[1]
    answer = _no_site(data)
    _LAST = (data, answer)
    return answer


#: the last answer of :func:`no_compile_site` (the engine asks about one
#: file several times in a row: index, rule selection, limits)
_LAST: Tuple[object, bool] = (None, False)

_INERT, _SITE, _UNSURE = "inert", "site", "unsure"


def _no_site(data: bytes) -> bool:
    if b"compile" not in data:
        return True
    words = _words(data, b"compile")
    if not words:
        return True
    imports = list(_IMPORT_COMPILE.finditer(data))
    # 1. the bytes around each word, every word taken for code
    if not imports and all(_kind(data, at, None) == _INERT for at in words):
        return True
    # 2. again, for the words in code only
    code = _Code(data)
    for match in imports:
        # an import of `compile` (or `*`) in code; an import's words in prose do not count
        if data[match.end() - 1] == 0x2A:  # `*`
            if code.at(match.end() - 1):
                return False
        elif any(code.at(at) for at in words[bisect.bisect_left(words, match.start()) : bisect.bisect_right(words, match.end())]):
            return False
    used = set()
    for at in words:
        if not code.at(at):
            continue
        kind = _kind(data, at, code.comments)
        if kind == _INERT:
            continue
        if kind == _SITE:
            return False
        used.add(kind)  # `re.compile(...)`: is `re` the module?
    for name in used:
        for at in _words(data, name):
            if not code.at(at):
                continue
            before = _before(data, at, code.comments)
            if data[before - 1 : before] == b".":
                return False  # `x.re`: not the module (never `used`), parse to be sure
            follow = at + len(name)
            while data[follow : follow + 1] in (b" ", b"\t"):
                follow += 1  # `re . compile`; over a line end it could be `as re` before `...`
            if data[follow : follow + 1] != b".":
                line_start = data.rfind(b"\n", 0, at) + 1
                if _PLAIN_IMPORT_PREFIX.match(data, line_start, at) is None:
                    return False  # rebound, a parameter, `import torch as re` ...: parse to be sure
    return True


def _words(data: bytes, word: bytes) -> List[int]:
    """The starts of ``word`` as a whole word (not inside a longer name)."""
    out = []
    size, n = len(data), len(word)
    at = data.find(word)
    while at >= 0:
        end = at + n
        if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
            out.append(at)
        at = data.find(word, end)
    return out


def _kind(data: bytes, at: int, comments: Optional[Dict[int, int]]):
    """What the word ``compile`` at ``at``, taken for code, can be: _INERT
    (never a site), _SITE (maybe one), ``b"re"``/``b"regex"`` (a call of
    ``re.compile`` or a whole decorator ``@re.compile``), or _UNSURE (a
    comment may stand between it and the code before it: ``comments`` None)."""
    dot = _before(data, at, comments)
    if dot < 0:
        return _UNSURE
    if data[dot - 1 : dot] != b".":
        return _INERT  # not an attribute: only an import (ruled out apart) binds a name to torch.compile
    if not _called_or_decorator(data, at + 7):
        return _INERT  # `cfg.compile.x`, `cfg.compile = x`, `f(torch.compile, m)`, `if cfg.compile:`
    base = _before(data, dot - 1, comments)
    if base < 0:
        return _UNSURE
    for name in _REGEX_MODULES:
        start = base - len(name)
        if start >= 0 and data[start:base] == name and (start == 0 or not _word_byte(data[start - 1])) and data[start - 1 : start] != b".":
            return name
    return _SITE


def _before(data: bytes, at: int, comments: Optional[Dict[int, int]]) -> int:
    """Where the code before ``at`` ends, over spaces, line ends,
    continuations and comments: ``data[result - 1]`` is its last byte.  With
    ``comments`` None (not known), -1 when a line it crosses holds a ``#``."""
    while at > 0:
        byte = data[at - 1]
        if byte in b" \t\f\\":
            at -= 1
        elif byte == 0x0A or byte == 0x0D:  # a line end: skip the previous line's comment
            at -= 1
            if byte == 0x0A and data[at - 1 : at] == b"\r":
                at -= 1
            if comments is not None:
                at = comments.get(at, at)
            elif b"#" in data[max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at)) + 1 : at]:
                return -1
        else:
            break
    return at


def _after(data: bytes, at: int) -> int:
    """Where the code after ``at`` (in code) resumes, over spaces, line ends,
    continuations and comments."""
    size = len(data)
    while at < size:
        byte = data[at]
        if byte in b" \t\f\r\n\\":
            at += 1
        elif byte == 0x23:  # `#`: a comment, to its line's end
            end = _LINE_END.search(data, at)
            at = size if end is None else end.start()
        else:
            break
    return at


def _called_or_decorator(data: bytes, end: int) -> bool:
    """May the attribute that ends at ``end`` be called or be a whole
    decorator?  It is followed, over closing parentheses (``(torch.compile)(f)``,
    ``@(torch.compile)``), by ``(`` (a call), ``@`` (a decorator's next
    decorator), ``def``/``class``/``async`` (a decorator's function), or the
    end of the file.  Anything else (``.``, ``=``, ``,``, ``:``, ``[``,
    ``if``, ``import``, a new statement that is not a definition) rules both out."""
    size = len(data)
    at = _after(data, end)
    while at < size and data[at] == 0x29:  # `)`
        at = _after(data, at + 1)
    if at >= size or data[at] in b"(@":
        return True
    for word in (b"def", b"class", b"async"):
        if data.startswith(word, at) and not _word_byte(data[at + len(word)] if at + len(word) < size else 0x20):
            return True
    return False


def _word_byte(byte: int) -> bool:
    # ASCII letters, digits, `_`, and any non-ASCII byte (identifiers may use them)
    return byte >= 0x80 or byte == 0x5F or 0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A


#: a relative import that spells no module: ``from . import f``, ``from ..
#: import k`` (every other relative import spells the module it reaches:
#: ``from .kernels import f``)
_DOTS_IMPORT = re.compile(rb"from[ \t]*\.+[ \t]*import\b")


def mentions_any(data: bytes, names: Sequence[Tuple[bytes, bytes]]) -> bool:
    """Can the file call one of ``names``, the project index's compiled
    functions as (function name, last part of its module's name)?  Only if
    the bytes hold, in code (:func:`_in_code`: not in a comment or a string
    literal; an f-string counts as code),

    * the function's name as a whole word (not inside a longer name: ``f``
      is not in ``def``) where a call can use it: called (``f(``, ``m.f(``)
      or imported (an ``import`` shortly before it: ``from m import f``,
      ``from m import (\n f,\n)``) -- a name only read as a value, in a
      comment or a docstring, calls nothing;
    * and its module's name as a whole word (the index resolves a call only
      through an import that spells the module: ``from pkg.kernels import f``,
      ``from .kernels import f``, ``from . import kernels``), unless a
      relative import spells no module (``from . import f``: ``f`` of the
      package's ``__init__``).  A comment naming the module (``# after
      train_gpt.py``) does not count.

    A common method name (``update``) of one module then no longer pulls in
    every file that calls ``dict.update``.  Each distinct name is looked for
    once, whatever the number of modules defining it."""
    size = len(data)
    relative: Optional[bool] = None
    code: Optional[_Code] = None
    words: dict = {}  # module name -> whether the code holds it as a word
    modules_of: Dict[bytes, List[bytes]] = {}
    for name, module in names:
        modules_of.setdefault(name, []).append(module)
    for name, modules in modules_of.items():
        at = data.find(name)
        if at < 0:
            continue
        if code is None:
            code = _Code(data)
            relative = _DOTS_IMPORT.search(data) is not None
        if not relative:
            spelled = False
            for module in modules:
                has = words.get(module)
                if has is None:
                    has = words[module] = _has_word(data, module, code)
                if has:
                    spelled = True
                    break
            if not spelled:
                continue
        while at >= 0:
            end = at + len(name)
            if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
                follow = end
                while follow < size and data[follow] in b" \t":
                    follow += 1
                if (data[follow : follow + 1] == b"(" or b"import" in data[max(0, at - 500) : at]) and _in_code(code, at):
                    return True
            at = data.find(name, end)
    return False


def _has_word(data: bytes, word: bytes, code: Optional[_Code] = None) -> bool:
    """Does ``word`` occur as a whole word (in code, with ``code``)?"""
    size = len(data)
    at = data.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
            if code is None or _in_code(code, at):
                return True
        at = data.find(word, end)
    return False


def _in_code(code: _Code, pos: int) -> bool:
    """Is ``pos`` in code, or in an f-string (whose braces hold code)?"""
    if code.at(pos):
        return True
    data = code.data
    start = code.starts[bisect.bisect_right(code.starts, pos) - 1]
    if data[start] == 0x23:  # a comment
        return False
    before = start - 1  # the string's prefix letters: f, rf, Fr, ...
    while before >= 0 and data[before] in b"rRbBuUfF":
        if data[before] in b"fF":
            return True
        before -= 1
    return False


def mentions_compile(data: bytes) -> bool:
    """May the file hold a compile site or a compiled function?  Cheap byte
    tests: ``torch`` and ``compile`` both occur, and some ``compile`` may be a
    site (:func:`no_compile_site`)."""
    return has_compile(data) and TORCH.encode() in data and not no_compile_site(data)


def has_compile(data: bytes) -> bool:
    """Do the bytes hold ``compile`` anywhere (a longer name, prose)?  One
    scan for the file the engine looks at: a project fact's byte test of it
    (:attr:`~codemods.analysis.project.ProjectFact.later`) asks again."""
    global _LAST_HAS
    if _LAST_HAS[0] is not data:
        _LAST_HAS = (data, b"compile" in data)
    return _LAST_HAS[1]


#: the last answer of :func:`has_compile`
_LAST_HAS: Tuple[object, bool] = (None, False)
