"""What the modes print: the text report, unified diffs (both made from the
same findings), the exit codes, and the table of a trace's recompiles."""

from __future__ import annotations

import difflib
import os
import sys
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..analysis.context import Settings
from ..findings import Finding, Safety
from ..trace import read as tr
from ..trace.cures import FLAG_CODE
from ..trace.registry import BY_NAME
from ..transforms import BY_CODE

#: ruff's exit codes: nothing found (or all fixed), findings remain, an error (2 wins)
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> List[str]:
    """Split on ``\\n`` only (as diff and git do), keeping line ends."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def git_path(prefix: str, path: str) -> str:
    """``prefix + path`` as git writes it in a patch header: quoted, with C
    escapes, when it holds a control character, a quote or a backslash (a
    tab or newline in a file name would otherwise break the whole patch)."""
    name = prefix + path
    if not any(c in _C_ESCAPES or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return name
    return '"' + "".join(_C_ESCAPES.get(c) or (f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in name) + '"'


def unified_diff(display_path: str, before: str, after: str, context: int = 3) -> str:
    """A patch ``git apply`` accepts: a/ b/ paths, 3 lines of context, and the
    "No newline at end of file" marker where a side lacks a final newline."""
    out: List[str] = []
    # a file outside the current folder has an absolute display path: "a//abs"
    # is a path git refuses; without the leading slash the patch applies from
    # the root folder (``git -C / apply``, ``patch -p1 -d /``)
    header = display_path.lstrip("/")
    for line in difflib.unified_diff(
        split_lines(before),
        split_lines(after),
        fromfile=git_path("a/", header),
        tofile=git_path("b/", header),
        n=context,
    ):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE)
    return "".join(out)


def unified_diff_bytes(display_path: str, before: bytes, after: bytes, context: int = 3) -> bytes:
    """:func:`unified_diff` on the files' raw bytes, so the patch keeps each
    file's own encoding, BOM and line ends (and ``git apply`` accepts it for a
    latin-1 or BOM file too).  Latin-1 maps every byte to one character, so the
    diff is computed on exactly the bytes on disk."""
    path = display_path.encode("utf-8", "surrogateescape").decode("latin-1")
    text = unified_diff(path, before.decode("latin-1"), after.decode("latin-1"), context)
    return text.encode("latin-1")


def format_finding(f: Finding, show_fix: bool = True) -> str:
    mark = ""
    if show_fix and f.fix is not None:
        mark = " [*]" if f.fix.safety == Safety.SAFE else " [unsafe fix]"
    where = f"{f.path}:cell {f.cell}:{f.line}:{f.column}" if f.cell is not None else f"{f.path}:{f.line}:{f.column}"
    return f"{where}: {f.code}{mark} {f.message}"


def summary(
    findings: Sequence[Finding],
    *,
    fixed: int,
    errors: int,
    files_changed: int,
    fixing: bool,
    unsafe_fixes: bool,
) -> List[str]:
    """Closing lines in ruff's style."""
    lines: List[str] = []
    remaining = len(findings) - fixed
    pending = [f for f in findings if f.fix is not None and not (fixing and f.applied)]
    safe_fixable = sum(1 for f in pending if f.fix.safety == Safety.SAFE)
    unsafe_held = sum(1 for f in pending if f.fix.safety == Safety.UNSAFE and not unsafe_fixes)
    if fixing:
        if fixed:
            lines.append(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} ({fixed} fixed in {files_changed} file{'s' if files_changed != 1 else ''}, {remaining} remaining).")
        elif findings:
            lines.append(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} (none fixed).")
        elif not errors:  # never "passed" next to errors
            lines.append("All checks passed!")
    else:
        if findings:
            lines.append(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}.")
            if safe_fixable:
                lines.append(f"[*] {safe_fixable} fixable with `--fix`.")
        elif not errors:  # never "passed" next to errors
            lines.append("All checks passed!")
    if unsafe_held:
        lines.append(f"{unsafe_held} unsafe fix{'es' if unsafe_held != 1 else ''} held back (enable with `--unsafe-fixes`).")
    if errors:
        lines.append(f"{errors} file{'s' if errors != 1 else ''} could not be processed (see above).")
    return lines


def statistics(findings: Iterable[Finding]) -> List[str]:
    counts = Counter(f.code for f in findings)
    names = {f.code: f.rule_name for f in findings}
    return [f"{n:>5}\t{code}\t{names[code]}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def out_line(line: str = "") -> None:
    """A line on stdout, flushed (the trace modes interleave with a command's output)."""
    print(line, flush=True)


def err_line(line: str) -> None:
    """A line on stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


# -- the trace's table -------------------------------------------------------------------


def available_codes(settings: Settings) -> List[str]:
    return [code for code in BY_CODE if settings.selects(code)]


def _cure_names(m) -> Set[str]:
    """What the table names for a matched finding: its code, and for the
    trace's own fixes which cure it is (and the rule whose fix that cure
    writes: the flag set from a trace is FR005's); for a rule's fix, the
    trace's cure whose edit it is (FR013's decorator)."""
    f = m.finding
    if f.code == FLAG_CODE:
        cure = BY_NAME.get(f.rule_name)
        return {cure.rule if cure is not None and cure.rule else f.code} | ({f.rule_name} if f.rule_name else set())
    rule = BY_CODE.get(f.code)
    same = [c.trace_cure for c in getattr(rule, "cures", ()) if c.cause == m.cause and c.trace_cure] if f.fix is not None else []
    return {f.code, *same}


def report_lines(trace: tr.Trace, settings: Settings, guided: Optional[object] = None) -> List[str]:
    """The table; with ``guided`` (the analysis of the implicated files), each
    cure names the rules whose findings match that recompile, and the rules
    of its cause that found nothing there."""
    found: Optional[Dict[Tuple[int, str], Set[str]]] = None
    if guided is not None:
        found = {}
        for m in guided.matches:
            names = _cure_names(m)
            for entry in (m.entry, *m.also):
                found.setdefault((id(entry), m.cause), set()).update(names)
    rows = tr.table_rows(trace, available_codes(settings), relative_to=os.getcwd(), found=found)
    notice = tr.limit_notice(trace)
    if not rows:
        return [
            "No compiled function recompiled (the trace holds no compile of user code)."
            if not trace.entries
            else "No compiled function recompiled."
        ]
    return tr.format_table(rows) + ([notice] if notice else [])
