"""One source file as the analysis sees it: bytes, text, the stdlib ``ast``
tree, and the bridge from ``ast`` positions to libcst nodes.

Analysis runs on the ``ast`` tree (the C parser, no CST).  A rule that fixes
something names the code to edit by a :class:`Target`: the source range of an
``ast`` node plus the kind of libcst node to edit there.  Only when a fix is
shown or written does the engine parse the file with libcst and
:func:`locate` each target's node (pyupgrade's model: analysis on ``ast``,
edits keyed by offsets -- but the edits themselves stay CST edits, so nested
fixes compose).

Positions: ``ast`` columns are UTF-8 byte offsets within the line, libcst's
are code points; :meth:`Source.char_col` converts.  Both exclude the
parentheses around an expression and the decorators of a ``def``/``class``;
both count a tab as one column.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .._lazy import cst

Pos = Tuple[int, int]  # (line 1-based, column 0-based in code points)


@dataclass(frozen=True)
class Target:
    """The libcst node an edit applies to: the outermost node that is an
    instance of ``kind`` and spans exactly ``start``-``end``; with ``up``, the
    nearest ancestor of that node that is an instance of ``up`` (a small
    statement's ``SimpleStatementLine``)."""

    start: Pos
    end: Pos
    #: the libcst class by name ("Call", "BaseExpression"...): naming it here
    #: would import libcst, which a report never needs (0.2-0.3 s per worker)
    kind: str
    up: Optional[str] = None


class Source:
    """A parsed file.  ``tree`` is the stdlib ``ast`` module; everything else
    (parents, segments, comments) is computed on first use."""

    def __init__(self, path: str, display_path: str, data: bytes, tree: ast.Module, text: str, encoding: str) -> None:
        self.path = path
        self.display_path = display_path
        self.data = data
        self.tree = tree
        self.text = text
        self.encoding = encoding
        self._lines: Optional[List[str]] = None
        self._ascii: Optional[List[bool]] = None
        self._parents: Optional[Dict[ast.AST, ast.AST]] = None
        self._comments: Optional[List[Tuple[int, int, str]]] = None
        self._by_type: Optional[Dict[type, List[ast.AST]]] = None

    def release(self) -> None:
        """The file is done: drop the derived indexes and the compile-site
        model, breaking their reference cycles (a run frees each tree by
        reference counting instead of by the cyclic collector)."""
        model = self.__dict__.pop("_compile_model", None)
        if model is not None:
            model.release()
        self._parents = None
        self._by_type = None

    # -- text ------------------------------------------------------------------
    @property
    def lines(self) -> List[str]:
        """The text split into lines as the tokenizer counts them (line 1 is ``lines[0]``)."""
        if self._lines is None:
            # split at \n, \r\n and \r only, as the tokenizer does (str.splitlines
            # also splits at form feeds, \x1c-\x1e, \x85, \u2028 ...)
            self._lines = io.StringIO(self.text, newline="").readlines() if self.text else [""]
            self._ascii = [line.isascii() for line in self._lines]
        return self._lines

    def char_col(self, line: int, byte_col: int) -> int:
        """Code-point column of byte offset ``byte_col`` in ``line`` (1-based)."""
        lines = self.lines
        if line < 1 or line > len(lines) or self._ascii[line - 1]:  # type: ignore[index]
            return byte_col
        return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> Pos:
        return node.lineno, self.char_col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> Pos:
        return node.end_lineno, self.char_col(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` (what ``ast.get_source_segment`` gives)."""
        (l1, c1), (l2, c2) = self.start(node), self.end(node)
        lines = self.lines
        if l1 == l2:
            return lines[l1 - 1][c1:c2]
        return lines[l1 - 1][c1:] + "".join(lines[l1 : l2 - 1]) + lines[l2 - 1][:c2]

    def target(self, node: ast.AST, kind: str, up: Optional[str] = None) -> Target:
        return Target(self._cst_pos(self.start(node)), self._cst_pos(self.end(node)), kind, up)

    def _cst_pos(self, pos: Pos) -> Pos:
        """libcst drops form feeds at the very start of a line (and counts no
        column for them): its position of the same place."""
        line, col = pos
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        lead = len(text) - len(text.lstrip("\f"))
        return (line, col - lead) if lead and col >= lead else pos

    # -- tree ------------------------------------------------------------------
    @property
    def parents(self) -> Dict[ast.AST, ast.AST]:
        if self._parents is None:
            self._index()
        return self._parents  # type: ignore[return-value]

    def nodes(self, kind: type) -> List[ast.AST]:
        """Every node of exactly type ``kind``, in no particular order."""
        if self._by_type is None:
            self._index()
        return self._by_type.get(kind, [])  # type: ignore[union-attr]

    def adopt_index(self, parents: Dict[ast.AST, ast.AST], by_type: Dict[type, List[ast.AST]]) -> None:
        """Take the parent map and the nodes by type from a walk that made
        them anyway (:class:`codemods.analysis.scopes.Scopes`), unless already built."""
        if self._by_type is None:
            self._parents, self._by_type = parents, by_type

    def _index(self) -> None:
        """One walk for the parent map and the nodes by type."""
        parents: Dict[ast.AST, ast.AST] = {}
        by_type: Dict[type, List[ast.AST]] = {}
        table = _CHILDREN
        stack: List[ast.AST] = [self.tree]
        pop, push = stack.pop, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            same = by_type.get(kind)
            if same is None:
                by_type[kind] = [node]
            else:
                same.append(node)
            fn = table.get(kind)
            below = fn(node) if fn is not None else children(node)
            if below:
                for child in below:
                    parents[child] = node
                push(below)
        self._parents = parents
        self._by_type = by_type

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        return self.parents.get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        parents = self.parents
        cur = parents.get(node)
        while cur is not None:
            yield cur
            cur = parents.get(cur)

    def enclosing(self, node: ast.AST, kinds) -> Optional[ast.AST]:
        for anc in self.ancestors(node):
            if isinstance(anc, kinds):
                return anc
        return None

    def loops_around(self, node: ast.AST) -> List[ast.AST]:
        """The loops (``for``, ``async for``, ``while``) that enclose ``node``
        in the function, lambda or class body that runs it, innermost first."""
        out: List[ast.AST] = []
        for anc in self.ancestors(node):
            if isinstance(anc, _SCOPE_BOUNDARIES):
                break
            if isinstance(anc, _LOOP_KINDS):
                out.append(anc)
        return out

    def statement_of(self, node: ast.AST) -> Optional[ast.stmt]:
        cur: Optional[ast.AST] = node
        while cur is not None and not isinstance(cur, ast.stmt):
            cur = self.parents.get(cur)
        return cur  # type: ignore[return-value]

    def comments_in(self, first: int, last: int) -> List[Tuple[int, int, str]]:
        """The comments of lines ``first``..``last`` (1-based), tokenizing only
        those lines when they are whole statements (else the whole file)."""
        first = max(first, 1)
        chunk = "".join(self.lines[first - 1 : last])
        if "#" not in chunk:
            return []
        if self._comments is None:
            try:
                out = []
                for tok in tokenize.generate_tokens(io.StringIO(chunk).readline):
                    if tok.type == tokenize.COMMENT:
                        out.append((tok.start[0] + first - 1, tok.start[1], tok.string))
                return out
            except (tokenize.TokenError, SyntaxError, IndentationError):
                pass
        return [c for c in self.comments() if first <= c[0] <= last]

    def comments(self) -> List[Tuple[int, int, str]]:
        """(line, column, text) of every comment, in order."""
        if self._comments is None:
            out: List[Tuple[int, int, str]] = []
            try:
                for tok in tokenize.generate_tokens(io.StringIO(self.text).readline):
                    if tok.type == tokenize.COMMENT:
                        out.append((tok.start[0], tok.start[1], tok.string))
            except (tokenize.TokenError, SyntaxError):
                pass
            self._comments = out
        return self._comments


#: fields that never hold a child node (names, flags, operator singletons)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "module", "level", "kind", "type_comment", "is_async", "conversion", "simple", "rest", "tag"})
#: ASDL types that are not nodes
_BUILTIN_TYPES = frozenset({"identifier", "string", "int", "constant"})
#: list fields whose items may be None (``{**d}``'s key, a keyword-only
#: parameter without default)
_NONE_ITEMS = frozenset({("Dict", "keys"), ("arguments", "kw_defaults")})
#: node type -> a function giving its children (see :func:`children`)
_CHILDREN: Dict[type, Callable[[ast.AST], Sequence[ast.AST]]] = {}
_NO_CHILDREN: Tuple[ast.AST, ...] = ()


def _no_children(node: ast.AST) -> Sequence[ast.AST]:
    return _NO_CHILDREN


def _generic_children(node: ast.AST) -> List[ast.AST]:
    out: List[ast.AST] = []
    kind = type(node)
    for name in kind._fields:
        if name in _LEAF_FIELDS or (kind is ast.Constant and name == "value"):
            continue
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _children_function(kind: type) -> Callable[[ast.AST], Sequence[ast.AST]]:
    """A function made for ``kind`` from its ASDL signature (the class's
    docstring, ``Call(expr func, expr* args, keyword* keywords)``): the node
    fields in order, lists spliced, optional ones only when present -- what
    :func:`_generic_children` gives for a tree from the parser, without its
    per-field ``getattr`` and ``isinstance`` (the walks of the analysis spend
    most of their time here).  The generic function for a class whose
    signature does not read as expected."""
    match = re.match(r"^(\w+)\((.*)\)$", ((kind.__doc__ or "").strip().splitlines() or [""])[0])
    if match is None or match.group(1) != kind.__name__:
        return _generic_children
    fields = [f.split() for f in match.group(2).split(",")] if match.group(2) else []
    if [f[1] for f in fields if len(f) == 2] != list(kind._fields) or any(len(f) != 2 for f in fields):
        return _generic_children
    parts: List[str] = []
    for asdl, name in fields:
        base = asdl.rstrip("*?")
        if name in _LEAF_FIELDS or base in _BUILTIN_TYPES or (kind is ast.Constant and name == "value"):
            continue
        if asdl.endswith("*"):
            if (kind.__name__, name) in _NONE_ITEMS:
                parts.append(f"*[v for v in n.{name} if v is not None]")
            else:
                parts.append(f"*n.{name}")
        elif asdl.endswith("?"):
            parts.append(f"*((n.{name},) if n.{name} is not None else ())")
        else:
            parts.append(f"n.{name}")
    if not parts:
        return _no_children
    namespace: Dict[str, object] = {}
    exec(f"def children_of_{kind.__name__}(n):\n    return [{', '.join(parts)}]\n", namespace)  # noqa: S102 - generated from the ast module's own signatures
    return namespace[f"children_of_{kind.__name__}"]  # type: ignore[return-value]


def _children_table() -> None:
    stack = [ast.AST]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls is not ast.AST and cls.__module__ == "ast" and cls not in _CHILDREN:
            _CHILDREN[cls] = _children_function(cls) if cls._fields else _no_children


_children_table()


#: node types with context or operator singletons (``ctx``, ``op``, ``ops``):
#: ``ast.iter_child_nodes`` gives those one level down, :func:`children` does not
SINGLETON_HOLDERS = frozenset(kind for kind in _CHILDREN if {"ctx", "op", "ops"} & set(kind._fields))


def children(node: ast.AST) -> Sequence[ast.AST]:
    """The child nodes of ``node`` in field order (``ast.iter_child_nodes``
    without the context and operator singletons), from a function made for
    each node type (about 5x cheaper than the generic walk of the fields)."""
    kind = type(node)
    fn = _CHILDREN.get(kind)
    if fn is None:  # a node class made outside the ast module
        fn = _CHILDREN[kind] = _generic_children
    return fn(node)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and its descendants in ``ast.walk``'s breadth-first order,
    without the context and operator singletons (``Load``, ``Add``, ...: they
    hold nothing), from the per-type child functions (several times cheaper
    than ``ast.walk``)."""
    table = _CHILDREN
    level: List[ast.AST] = [node]
    while level:
        following: List[ast.AST] = []
        grow = following.extend
        for cur in level:
            yield cur
            fn = table.get(type(cur))
            grow(fn(cur) if fn is not None else children(cur))
        level = following


def statement_target(source: Source, stmt: ast.stmt) -> Target:
    """The libcst statement for an ``ast`` statement: the compound statement
    itself, or the ``SimpleStatementLine`` that holds a small statement."""
    if isinstance(stmt, COMPOUND):
        return source.target(stmt, "BaseCompoundStatement")
    return source.target(stmt, "BaseSmallStatement", "SimpleStatementLine")


_LOOP_KINDS = (ast.For, ast.AsyncFor, ast.While)
_SCOPE_BOUNDARIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


# -- from targets to libcst nodes (render time only) ------------------------------
class NodeLocator:
    """Finds the libcst node of each :class:`Target` in one parsed module."""

    def __init__(self, module: cst.Module) -> None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._positions = wrapper.resolve(PositionProvider)
        self._by_range: Dict[Tuple[Pos, Pos], List[cst.CSTNode]] = {}
        for node, rng in self._positions.items():
            key = ((rng.start.line, rng.start.column), (rng.end.line, rng.end.column))
            self._by_range.setdefault(key, []).append(node)
        self._parents: Optional[Dict[cst.CSTNode, cst.CSTNode]] = None
        self.module = module

    def _parent_map(self) -> Dict[cst.CSTNode, cst.CSTNode]:
        if self._parents is None:
            parents: Dict[cst.CSTNode, cst.CSTNode] = {}
            stack: List[cst.CSTNode] = [self.module]
            while stack:
                node = stack.pop()
                for child in node.children:
                    parents[child] = node
                    stack.append(child)
            self._parents = parents
        return self._parents

    def locate(self, target: Target) -> Optional[cst.CSTNode]:
        kind = getattr(cst, target.kind)
        found = [n for n in self._by_range.get((target.start, target.end), ()) if isinstance(n, kind)]
        if not found:
            return None
        node = found[0]
        if len(found) > 1:
            # the outermost of nested nodes with one range (positions are
            # recorded parent first, so the first is the outermost)
            parents = self._parent_map()
            candidates = set(map(id, found))
            for candidate in found:
                parent = parents.get(candidate)
                if parent is None or id(parent) not in candidates:
                    node = candidate
                    break
        if target.up is not None:
            parents = self._parent_map()
            cur: Optional[cst.CSTNode] = node
            up = getattr(cst, target.up)
            while cur is not None and not isinstance(cur, up):
                cur = parents.get(cur)
            return cur
        return node


def parse(text: str, data: bytes, filename: str = "<unknown>") -> ast.Module:
    """The ``ast`` of a file from its decoded ``text`` (about 15% cheaper
    than from its bytes, and the same tree: columns are UTF-8 byte offsets
    either way).  When the text does not parse, the bytes are parsed, so
    the error is the parser's own for the file (its offsets count bytes)."""
    try:
        return ast.parse(text, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return ast.parse(data, filename)


def plain_ascii(data: bytes) -> bool:
    """ASCII bytes with no encoding declaration (PEP 263: a ``coding`` in the
    first two lines): the interpreter reads them as UTF-8, which cannot fail."""
    if not data.isascii():
        return False
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    return b"coding" not in (data if second < 0 else data[:second])


def decode(data: bytes) -> Tuple[str, str]:
    """(text, encoding) of source bytes, as the interpreter would decode them."""
    if plain_ascii(data):
        return data.decode("ascii"), "utf-8"
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding
