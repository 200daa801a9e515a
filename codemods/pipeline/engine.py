"""The engine, top to bottom for one file:

read bytes → byte prefilter (:mod:`codemods.pipeline.prefilter`) → one stdlib ``ast``
parse (:class:`~codemods.analysis.source.Source`) → one analysis shared by every rule
(:mod:`codemods.analysis.scopes`, :mod:`codemods.analysis.compile_sites`, the project index)
→ every selected rule produces findings → drop suppressed and (without
``--unproven``) unproven ones → to show or write fixes only: libcst parses
the file, each edit's :class:`~codemods.analysis.source.Target` is located, the chosen
fixes are applied in one CST walk (nested edits compose), ``import torch`` is
added if a fix needs it, and the result is re-parsed → the findings and the
new bytes.

Nothing here writes files; :mod:`codemods.pipeline.writer` does, atomically.
"""

from __future__ import annotations

import ast
import bisect
import io
import os
import symtable
import sys
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .._lazy import cst

from . import prefilter
from ..analysis.context import FileContext, Settings
from ..findings import Edit, FileError, Finding, Safety
from ..analysis.suppressions import is_suppressed, suppressions
from ..analysis.source import NodeLocator, Source, Target, decode, plain_ascii
from ..analysis.source import parse as parse_text
from ..transforms import REGISTRY, Rule



@dataclass
class FileResult:
    path: str
    display_path: str
    findings: List[Finding] = field(default_factory=list)
    original: Optional[bytes] = None
    #: the fixed file's bytes, or None when nothing changes
    new: Optional[bytes] = None
    error: Optional[str] = None
    #: True when the text prefilter ruled the file out without parsing
    prefiltered: bool = False
    #: True when the file is marked ``@generated`` (skipped, so prefiltered too)
    generated: bool = False
    encoding: str = "utf-8"
    #: fixes would apply, but were not rendered (a report)
    pending: bool = False

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.original


def selected_rules(settings: Settings) -> List[Rule]:
    """The registry's rules ``settings`` selects, in registry order (one list
    per distinct settings: a run asks once per file)."""
    held = _SELECTED.get(settings)
    if held is None or held[0] is not REGISTRY:  # (a test may swap the registry)
        if len(_SELECTED) > 64:
            _SELECTED.clear()
        held = _SELECTED[settings] = (REGISTRY, [rule for rule in REGISTRY if settings.selects(rule.code)])
    return list(held[1])


_SELECTED: Dict[Settings, Tuple[object, List[Rule]]] = {}


def syntax_error(path: str, line: int, column: int, reason: str) -> FileError:
    """The error of a file the parser refuses, naming the Python whose grammar
    read it (the tool parses with the interpreter running it: a file using
    newer syntax, a ``type`` alias on 3.11, is refused) and, when the closest
    ``pyproject.toml`` requires a newer Python, that requirement."""
    from .config import python_required

    running = sys.version_info[:2]
    note = f"as Python {running[0]}.{running[1]} reads it"
    try:
        required = python_required(path)
        if required is not None and running < required[2]:
            note += f"; {os.path.relpath(required[1])} requires Python {required[0]}: run fix-recompiles with that Python"
    except (OSError, ValueError):  # an unreadable folder, a path on another drive: no hint
        pass
    return FileError(path, f"syntax error at line {line}, column {column}: {reason} ({note})")


def parse_source(path: str, data: bytes) -> cst.Module:
    if b"\x00" in data:
        raise FileError(path, "binary file (contains NUL bytes), not Python source")
    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        reason = str(exc.message).strip().splitlines()[0] if exc.message else "invalid syntax"
        line, column = exc.raw_line, exc.raw_column + 1
        try:  # Python's own parser places the error better (libcst points past it)
            compile(data, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as py_exc:
            if py_exc.lineno:
                line, column, reason = py_exc.lineno, py_exc.offset or 1, py_exc.msg
        except Exception:  # noqa: BLE001 - keep libcst's position
            pass
        raise syntax_error(path, line, column, reason) from None
    except (UnicodeDecodeError, LookupError) as exc:
        raise FileError(path, f"cannot decode: {exc}") from None
    except SyntaxError as exc:  # e.g. a bad encoding cookie
        raise FileError(path, f"cannot decode: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise FileError(path, "file too deeply nested to parse") from None


def check_source(path: str, data: bytes, parse: bool = True) -> None:
    """Report bad input in a file no pass will parse: binary or undecodable
    (bytes only), and with ``parse`` a syntax error too, as ruff and black
    would -- with the stdlib's C parser (about 10x cheaper than libcst), never
    libcst."""
    if parse:
        try:
            # fast path: the C parser plus scope analysis, without building the
            # Python AST objects (~30% cheaper); it accepts only what the parser
            # accepts, and anything it refuses gets the exact check below
            symtable.symtable(data, path, "exec")  # type: ignore[arg-type]
            return
        except Exception:  # noqa: BLE001 - decided (and reported) below
            pass
    if b"\x00" in data:
        raise FileError(path, "binary file (contains NUL bytes), not Python source")
    if not parse and plain_ascii(data):
        return  # decodes as whatever ASCII-compatible encoding it would get
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise FileError(path, f"cannot decode: {exc}") from None
    except SyntaxError as exc:  # a bad encoding cookie
        raise FileError(path, f"cannot decode: {exc.msg}") from None
    if not parse:
        return
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        raise syntax_error(path, exc.lineno or 1, exc.offset or 1, exc.msg) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise FileError(path, f"cannot parse: {type(exc).__name__}") from None


def _apply_edits(edits: Iterable[Edit]) -> "cst.CSTTransformer":
    """A transformer applying ``edits`` (the class is made on first use:
    libcst is imported only to render)."""
    global _ApplyEdits
    if _ApplyEdits is None:
        _ApplyEdits = _make_apply_edits()
    return _ApplyEdits(edits)


_ApplyEdits = None


def _make_apply_edits():
    class ApplyEdits(cst.CSTTransformer):
        """Apply edits bottom-up; several edits on one node chain in finding order.

        An edit that returns a FlattenSentinel (statements inserted before or
        after) keeps the edited statement in it: the very node it was given
        (statements inserted after it, :func:`~codemods.cst_edits.insert_after_node`),
        else the sentinel's last node (inserted before it, its comment lines
        moved: :func:`~codemods.cst_edits.insert_before_node`); later edits of
        the same node apply to that statement.
        """

        def __init__(self, edits: Iterable[Edit]) -> None:
            super().__init__()
            self._by_node: Dict[int, List[Callable]] = defaultdict(list)
            for edit in edits:
                self._by_node[id(edit.node)].append(edit.apply)

        def on_leave(self, original_node, updated_node):
            updated = super().on_leave(original_node, updated_node)
            around = [updated]  # the edited statement and the statements inserted around it
            at = 0  # where the edited statement is in `around`
            for apply in self._by_node.get(id(original_node), ()):
                node = around[at]
                result = apply(node)
                if isinstance(result, cst.RemovalSentinel):
                    around = around[:at] + around[at + 1 :]
                    break  # nothing left to edit
                new = list(result.nodes) if isinstance(result, cst.FlattenSentinel) else [result]
                kept = next((i for i, n in enumerate(new) if n is node), len(new) - 1)
                around = around[:at] + new + around[at + 1 :]
                at += kept
            if not around:
                return cst.RemovalSentinel.REMOVE
            return around[0] if len(around) == 1 else cst.FlattenSentinel(around)

    return ApplyEdits


def should_apply(finding: Finding, settings: Settings) -> bool:
    return finding.fix is not None and (finding.fix.safety == Safety.SAFE or settings.unsafe_fixes)


def _resolve_edits(ctx: FileContext, edits: Sequence[Edit], module: Optional[cst.Module] = None, shift: int = 0) -> List[Edit]:
    """Edits keyed by libcst node: a :class:`Target` of an ``ast`` rule is
    located in the parsed module (render time: the only place libcst parses a
    file that no CST rule read); ``module``: a part of the file whose line 1
    is the file's line ``shift + 1`` (:func:`_render_statements`)."""
    if not any(isinstance(e.node, Target) for e in edits):
        return list(edits)
    locator = NodeLocator(ctx.module if module is None else module)
    out: List[Edit] = []
    for edit in edits:
        if isinstance(edit.node, Target):
            t = edit.node
            node = locator.locate(Target((t.start[0] - shift, t.start[1]), (t.end[0] - shift, t.end[1]), t.kind, t.up) if shift else t)
            if node is None:
                raise FileError(ctx.display_path, f"internal error: no code to edit at line {t.start[0]}; file left unchanged")
            edit = Edit(node, edit.apply)
        out.append(edit)
    return out


def apply_findings(ctx: FileContext, findings: Sequence[Finding]) -> cst.Module:
    """The module with the fixes of ``findings`` applied (all of them, in order)."""
    edits = [edit for f in findings if f.fix for edit in f.fix.edits]
    if not edits:
        return ctx.module
    new_module = ctx.module.visit(_apply_edits(_resolve_edits(ctx, edits)))
    needed = _imports_needed(ctx, findings)
    if needed:
        # imported here: libcst.codemod pulls in libcst.matchers (~0.2 s), which
        # a run that adds no import never needs
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor

        context = CodemodContext()
        for module in needed:
            AddImportsVisitor.add_needed_import(context, module)
        new_module = AddImportsVisitor(context).transform_module(new_module)
    return new_module


def _imports_needed(ctx: FileContext, findings: Sequence[Finding]) -> List[str]:
    """The modules the fixes of ``findings`` name that the file may not
    import: ``torch`` when it has no alias for it, and every fix's
    ``imports`` (AddImportsVisitor adds only what is missing)."""
    fixes = [f.fix for f in findings if f.fix]
    needed = ["torch"] if any(fix.needs_torch for fix in fixes) and ctx.model.torch_alias is None else []
    for fix in fixes:
        needed += [m for m in fix.imports if m not in needed]
    return needed


def parse_ast(display_path: str, data: bytes, tree: Optional[ast.Module] = None) -> Source:
    """The file as the analysis reads it; bad input raises :class:`FileError`."""
    if b"\x00" in data:
        raise FileError(display_path, "binary file (contains NUL bytes), not Python source")
    try:
        text, encoding = decode(data)
    except (UnicodeDecodeError, LookupError) as exc:
        raise FileError(display_path, f"cannot decode: {exc}") from None
    except SyntaxError as exc:  # a bad encoding cookie
        raise FileError(display_path, f"cannot decode: {exc.msg}") from None
    if tree is None:
        try:
            tree = parse_text(text, data, display_path)
        except SyntaxError as exc:
            raise syntax_error(display_path, exc.lineno or 1, exc.offset or 1, exc.msg) from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise FileError(display_path, f"cannot parse: {type(exc).__name__}") from None
    return Source(display_path, display_path, data, tree, text, encoding)


def analyze(
    path: str, display_path: str, data: bytes, settings: Settings, project=None, tree=None, project_rules_only: bool = False, evidence=None
) -> Tuple[Optional[FileContext], List[Finding]]:
    """Run every selected rule that can apply; (None, []) when none can.
    ``tree``: the stdlib ``ast`` of exactly ``data`` when already parsed, or
    the :class:`Source` made from it (its compile-site model is reused).
    ``evidence``: what a trace observed in this file (:class:`~codemods.analysis.context.TraceEvidence`).

    A rule runs when the byte prefilter keeps the file for it
    (:mod:`codemods.pipeline.prefilter`); the file is then parsed with ``ast`` once
    and analysed once (:mod:`codemods.analysis.compile_sites`), and parsed with libcst
    only when a rule reads comments (FR002) or a fix is rendered."""
    rules = selected_rules(settings)
    if project_rules_only:  # the rest of the file's findings are known (see codemods.pipeline.runner)
        rules = [rule for rule in rules if rule.reads_project]
    extra = project.prefilter_tokens(path) if project is not None else ()
    always = project is not None and path in getattr(project, "always", ())  # a proven lr writer's module
    chosen, cross = prefilter.select(data, rules, extra, always)  # bytes only
    if not chosen:
        # bad input is reported even where no rule applies: binary or
        # undecodable bytes always, a syntax error with --check-syntax (unless
        # the index's parse already accepted the file)
        if tree is None:
            check_source(display_path, data, parse=settings.check_syntax)
        return None, []
    source = tree if isinstance(tree, Source) else parse_ast(display_path, data, tree)
    source.path, source.display_path = path, display_path
    # libcst parses the file only for a rule that reads comments (FR002),
    # reporting its own syntax errors; otherwise only to render fixes
    module = parse_source(display_path, data) if any(rule.reads_cst(data) for rule in chosen) else None
    ctx = FileContext(path, display_path, settings, project if cross else None, source, module, evidence)
    findings: List[Finding] = []
    for rule in chosen:  # registry order
        findings.extend(rule.check(ctx))
    if not settings.unproven:
        findings = [f for f in findings if f.proven]
    if b"fix-recompiles:" in data:  # cheap test before tokenizing for suppressions
        table = suppressions(source.text)
        findings = [f for f in findings if not is_suppressed(f, table)]
    findings.sort(key=Finding.sort_key)
    return ctx, findings


def _restore_lossy_tail(ctx: FileContext, data: bytes, new_bytes: bytes) -> bytes:
    r"""libcst does not always print an unchanged module back byte for byte: it
    drops a form feed at the start of a line, and blank lines before trailing
    indented comments or whitespace at the end of a module (``"x\n\n  # c\n"``
    prints as ``"x\n  # c\n"``).  Where its print of the unchanged module has
    the file's lines, the fixed text is rebuilt from the file's own lines
    around the lines the fixes changed (a changed line keeps what libcst
    dropped at its start); otherwise, when the fixes left the lossy tail alone,
    the file's own tail is put back; else the fix is refused (internal error)."""
    printed = ctx.module.bytes
    if printed == data:
        return new_bytes
    old_lines, printed_lines = data.splitlines(keepends=True), printed.splitlines(keepends=True)
    if len(old_lines) == len(printed_lines):
        import difflib

        new_lines = new_bytes.splitlines(keepends=True)
        out: List[bytes] = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, printed_lines, new_lines, autojunk=False).get_opcodes():
            if tag == "equal":
                out.extend(old_lines[i1:i2])
            elif tag == "replace" and i2 - i1 == j2 - j1:
                for old, shown, new in zip(old_lines[i1:i2], printed_lines[i1:i2], new_lines[j1:j2]):
                    lost = old[: len(old) - len(shown)] if old != shown and old.endswith(shown) else b""
                    out.append(lost + new)
            else:
                out.extend(new_lines[j1:j2])
        return b"".join(out)
    same = 0
    limit = min(len(printed), len(data))
    while same < limit and printed[same] == data[same]:
        same += 1
    printed_tail = printed[same:]
    if new_bytes.endswith(printed_tail):
        return new_bytes[: len(new_bytes) - len(printed_tail)] + data[same:]
    raise FileError(ctx.display_path, "internal error: libcst does not reproduce this file byte for byte; file left unchanged")


def _unrenderable(source, exc) -> str:
    """Why libcst cannot take a file Python parses: a form feed in the
    indentation of a line (Python resets the column there; libcst's tokenizer
    does not), or the parser's own first line."""
    for number, line in enumerate(source.lines, 1):
        lead = line[: len(line) - len(line.lstrip(" \t\f"))]
        if "\f" in lead and lead.rstrip("\f") and line.strip():
            return (
                f"fixes not applied: a form feed in the indentation of line {number}, which libcst (the renderer) "
                "cannot read (remove it to apply them; `fix-recompiles check` still reports the findings); file left unchanged"
            )
    first = str(getattr(exc, "message", "") or exc).strip().splitlines()
    return (
        f"fixes not applied: libcst (the renderer) cannot read this file ({first[0] if first else 'syntax'}; "
        "`fix-recompiles check` still reports the findings); file left unchanged"
    )


# -- rendering only the statements the edits touch --------------------------------
#
# libcst's cost grows with the file, not with the edits: on a 3.9 MB file of
# 240,000 lines, parsing takes 42 s, the positions that locate the edits' nodes
# 78 s, printing 8 s and parsing the result again (the check) 42 s (measured,
# libcst 1.x native parser), for two edits.  Every edit of an ``ast`` rule is a
# :class:`Target` (a position), and top-level statements are independent: the
# file is rendered one top-level statement at a time, only those an edit
# touches, each parsed from its own lines (with the blank and comment lines
# before it, which libcst attaches to it, behind one dummy ``pass`` line so
# they stay its own and do not become the chunk's header), then spliced back
# between the file's untouched bytes.  The chunk keeps the file's default
# indent and newline (libcst reads them from the first indented block and the
# first line end: what new code is written with), so the bytes are those of
# the whole-module rendering.  Anything else -- an edit that is a CST node, an
# ``import torch`` to add, a file not in UTF-8, a chunk libcst does not print
# back byte for byte -- renders the whole module as before.


def _defaults_of(text: str) -> Optional[Tuple[Optional[str], str]]:
    """(first indent, default newline) as libcst detects them: the first
    INDENT token's whitespace (None when there is no indented block: libcst
    then uses 4 spaces) and the first line end (else "\\n"); None when the
    text does not tokenize."""
    newline = "\n"
    for i, ch in enumerate(text):
        if ch in "\r\n":
            newline = "\r\n" if text.startswith("\r\n", i) else ch
            break
    indent: Optional[str] = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT:
                indent = tok.string
                break
    except (tokenize.TokenError, SyntaxError):
        return None
    return indent, newline


def _statement_spans(tree: ast.Module) -> List[Tuple[int, int]]:
    """(first line, last line) of each top-level statement (decorators
    included), statements sharing a line (``a = 1; b = 2``) merged."""
    spans: List[Tuple[int, int]] = []
    for stmt in tree.body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        if spans and first <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, last))
    return spans


def _render_statements(ctx: FileContext, edits: Sequence[Edit], data: bytes) -> Optional[bytes]:
    """``data`` with ``edits`` applied by rendering only the top-level
    statements they touch (see above); None when that cannot be done exactly."""
    if not edits or not all(isinstance(e.node, Target) for e in edits):
        return None
    if ctx.source.encoding.replace("_", "-").lower() not in ("utf-8", "utf8") or data.startswith(b"\xef\xbb\xbf"):
        return None
    defaults = _defaults_of(ctx.source.text)
    if defaults is None:
        return None
    indent, newline = defaults[0] or "    ", defaults[1]
    spans = _statement_spans(ctx.source.tree)
    starts = [s for s, _ in spans]
    by_span: Dict[int, List[Edit]] = defaultdict(list)
    for edit in edits:
        target: Target = edit.node  # type: ignore[assignment]
        i = bisect.bisect_right(starts, target.start[0]) - 1
        if i < 0 or target.end[0] > spans[i][1]:
            return None  # outside any top-level statement
        by_span[i].append(edit)
    lines = data.splitlines(keepends=True)
    out: List[bytes] = []
    done = 0  # lines of the file copied so far
    for i in sorted(by_span):
        prev_end = spans[i - 1][1] if i > 0 else 0
        first, last = prev_end + 1, spans[i][1]
        dummy = b"pass" + newline.encode() if prev_end else b""
        chunk = b"".join(lines[first - 1 : last])
        try:
            module = cst.parse_module(dummy + chunk)
        except Exception:  # noqa: BLE001 - the whole-module rendering reports it
            return None
        if module.bytes != dummy + chunk:
            return None
        # a parsed block whose indent is the chunk's default stores none: the
        # file's default may stand in only where the chunk has no block or the same
        own = _defaults_of((dummy + chunk).decode("utf-8"))
        if own is None or own[0] not in (None, indent) or own[1] != newline:
            return None
        module = module.with_changes(default_indent=indent, default_newline=newline)
        shift = prev_end - (1 if dummy else 0)  # file line = chunk line + shift
        new = module.visit(_apply_edits(_resolve_edits(ctx, by_span[i], module, shift))).bytes
        if not new.startswith(dummy):
            return None
        new = new[len(dummy) :]
        try:
            cst.parse_module(new)
        except Exception as exc:  # noqa: BLE001 - any failure here is our bug
            raise FileError(ctx.display_path, f"internal error: the fixed code does not parse ({type(exc).__name__}); file left unchanged") from None
        out.extend(lines[done : first - 1])
        out.append(new)
        done = last
    out.extend(lines[done:])
    return b"".join(out)


def render(ctx: FileContext, findings: Sequence[Finding], data: Optional[bytes] = None) -> bytes:
    """Bytes of the file with ``findings``' fixes applied; raises FileError if the
    result would not parse (an internal error: never written).  With ``data``
    (the file's bytes), bytes libcst would not reproduce are kept as they were,
    and only the top-level statements the edits touch are rendered when that
    is exact (:func:`_render_statements`)."""
    if data is not None and not _imports_needed(ctx, findings):
        try:
            fast = _render_statements(ctx, [e for f in findings if f.fix for e in f.fix.edits], data)
        except (FileError, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 - a broken edit is our bug, not the user's
            raise FileError(ctx.display_path, f"internal error: applying a fix failed ({type(exc).__name__}: {exc}); file left unchanged") from None
        if fast is not None:
            return fast
    try:
        ctx.module
    except cst.ParserSyntaxError as exc:
        raise FileError(ctx.display_path, _unrenderable(ctx.source, exc)) from None
    try:
        new_module = apply_findings(ctx, findings)
        if new_module is ctx.module:
            return ctx.module.bytes if data is None else data
        new_bytes = new_module.bytes
        if data is not None:
            new_bytes = _restore_lossy_tail(ctx, data, new_bytes)
    except (FileError, RecursionError):
        raise
    except Exception as exc:  # noqa: BLE001 - a broken edit is our bug, not the user's
        raise FileError(ctx.display_path, f"internal error: applying a fix failed ({type(exc).__name__}: {exc}); file left unchanged") from None
    try:
        cst.parse_module(new_bytes)
    except Exception as exc:  # noqa: BLE001 - any failure here is our bug
        raise FileError(ctx.display_path, f"internal error: the fixed code does not parse ({type(exc).__name__}); file left unchanged") from None
    return new_bytes


def process_source(
    path: str, display_path: str, data: bytes, settings: Settings, project=None, tree=None, render_fixes: bool = True, project_rules_only: bool = False
) -> FileResult:
    """Analyse one file; with ``render_fixes`` (``--diff``, ``--fix``) also make
    its fixed bytes.  A report needs no fixed text: libcst never parses the
    file then, and ``pending`` says whether fixes would apply.  With
    ``project_rules_only`` (a report only) just the rules that read the
    project index run (:func:`merge_project_findings` adds the others')."""
    result = FileResult(path=path, display_path=display_path, original=data)
    ctx = None
    try:
        ctx, findings = analyze(path, display_path, data, settings, project, tree, project_rules_only)
        if ctx is None:
            result.prefiltered = True
            return result
        result.encoding = ctx.source.encoding
        result.findings = findings
        chosen = [f for f in findings if should_apply(f, settings)]
        for f in chosen:
            f.applied = True
        for f in findings:  # fixed by another finding's fix: applied with it
            if f.fixed_by is not None and f.fixed_by.applied:
                f.applied = True
        if chosen and not render_fixes:
            result.pending = True
        elif chosen:
            new = render(ctx, chosen, data)
            if new != data:
                result.new = new
    except FileError as exc:
        result.error = exc.reason
        result.findings = []
        result.new = None
    except RecursionError:
        result.error = "file too deeply nested to analyse"
        result.findings = []
        result.new = None
    except Exception as exc:  # noqa: BLE001 - a rule crashed: our bug; report it, go on
        result.error = f"internal error: {type(exc).__name__}: {exc}; file left unchanged"
        result.findings = []
        result.new = None
    finally:
        if ctx is not None:
            ctx.release()
    return result


def project_rule_codes() -> frozenset:
    """The codes of the rules that read the project index."""
    return frozenset(rule.code for rule in REGISTRY if rule.reads_project)


def merge_project_findings(first: FileResult, again: FileResult) -> FileResult:
    """A report's result for a file analysed without the project index
    (``first``: every rule) and then with it by the rules that read it
    (``again``: ``project_rules_only``): what one analysis with the index
    gives.  The other rules never read the index, so their findings stand;
    findings sort by (path, line, column, code, message), so the merged
    list is in the order one analysis makes.  An error of ``again`` is the
    result's, as it would be (the other rules raised nothing in ``first``)."""
    if again.error is not None:
        return again
    codes = project_rule_codes()
    merged = replace(first, findings=sorted([f for f in first.findings if f.code not in codes] + again.findings, key=Finding.sort_key))
    merged.prefiltered = first.prefiltered and again.prefiltered
    if not again.prefiltered:
        merged.encoding = again.encoding
    merged.pending = any(f.applied for f in merged.findings)
    return merged


def read_file(path: str, display_path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        if os.path.islink(path):
            raise FileError(display_path, "cannot read: broken symbolic link (its target does not exist)") from None
        raise FileError(display_path, "file vanished before it could be read") from None
    except IsADirectoryError:
        raise FileError(display_path, "is a directory") from None
    except OSError as exc:
        raise FileError(display_path, f"cannot read: {exc.strerror or exc}") from None


def process_file(path: str, display_path: str, settings: Settings, project=None, render_fixes: bool = True) -> FileResult:
    try:
        data = read_file(path, display_path)
    except FileError as exc:
        return FileResult(path=path, display_path=display_path, error=exc.reason)
    return process_source(path, display_path, data, settings, project, render_fixes=render_fixes)
