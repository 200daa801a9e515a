"""Read a ``TORCH_TRACE`` folder (torch's structured trace, what tlparse reads)
and say, per compiled code object, how many graphs it compiled, why it
recompiled and whether it hit the recompile limit.

Pure functions over files: this module never imports torch.

The trace format (measured on torch 2.13): one file per process, each record
one line ``<glog prefix>] {json}``, optionally followed by a payload on lines
starting with a tab.  The records used here:

- ``{"str": [filename, index]}``: interns a filename for ``dynamo_start`` stacks;
- ``{"dynamo_start": {"stack": [{"line", "name", "filename": index, ...}]}, "frame_id", ...}``:
  the Python stack when dynamo started compiling frame ``frame_id``;
- ``{"dynamo_output_graph": ..., "frame_id", ...}``: one FX graph compiled;
- ``{"compilation_metrics": {"co_name", "co_filename", "co_firstlineno",
  "recompile_reason", "fail_type", "fail_reason", ...}, "frame_id", ...}``: one
  compile attempt.  When the recompile limit is hit, the attempt's record has
  ``co_name`` None, ``fail_type`` "Unsupported" and a ``fail_reason`` that names
  the limit ("Dynamo recompile limit exceeded ... Limit type: recompile_limit").

Recompile reasons changed text between releases, so they are classified on
their structure (``<source> == <literal>``, ``tensor '<name>' size mismatch``)
and anything else is kept raw as cause "other".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

# -- causes ---------------------------------------------------------------

FLOAT_ARG = "float argument"
INT_ARG = "int argument"
TENSOR_SHAPE = "tensor shape"
MODULE_INT_ATTR = "module int attribute"
OPTIMIZER_LR = "optimizer lr"
GLOBAL = "global"
OTHER = "other"

#: every cause, in the order the table lists them
CAUSES = (
    FLOAT_ARG,
    INT_ARG,
    TENSOR_SHAPE,
    MODULE_INT_ATTR,
    OPTIMIZER_LR,
    GLOBAL,
    OTHER,
)


@dataclass(frozen=True)
class Cure:
    """A rule that cures a cause.  ``upgrade``: an observed recompile of this
    cause is the evidence the rule lacks when it calls its fix unsafe, so a
    trace makes the fix safe.  Rules whose fixes are unsafe for behavioural
    reasons (a float used as a Python number, an lr the user overwrites) are
    not upgraded: a trace proves the recompile, not that the rewrite keeps
    the program's results."""

    code: str
    upgrade: bool = False


#: cause -> rules that cure it, keyed by rule code so passes can land later
CURES: Dict[str, Tuple[Cure, ...]] = {
    FLOAT_ARG: (Cure("FR003"), Cure("FR001", upgrade=True)),
    INT_ARG: (Cure("FR001", upgrade=True),),
    TENSOR_SHAPE: (Cure("FR001", upgrade=True),),
    MODULE_INT_ATTR: (Cure("FR005"),),
    OPTIMIZER_LR: (Cure("FR004"),),
    GLOBAL: (),
    OTHER: (),
}


@dataclass(frozen=True)
class Reason:
    """One recompile reason, classified."""

    cause: str
    #: the guarded source as the user wrote it (``temperature``, ``self.calls``,
    #: ``x``, ``SCALE``), "" when unknown
    source: str
    #: the reason's guard text without the compile-id prefix and code comment
    text: str
    #: the user-code line the guard points at (from the reason), 0 when unknown
    line: int = 0
    file: str = ""


@dataclass
class CodeEntry:
    """One compiled code object (one ``frame_id`` of one process)."""

    name: str
    filename: str
    firstlineno: int
    graphs: int = 0
    compiles: int = 0
    limit_hit: bool = False
    reasons: List[Reason] = field(default_factory=list)
    #: innermost frame of the compile stack outside torch/site-packages:
    #: (filename, line, function) -- where user code reached this code object
    user_frame: Optional[Tuple[str, int, str]] = None

    @property
    def recompiles(self) -> int:
        return len(self.reasons)

    @property
    def causes(self) -> List[str]:
        """Distinct causes, most frequent first (ties: table order)."""
        counts: Dict[str, int] = {}
        for r in self.reasons:
            counts[r.cause] = counts.get(r.cause, 0) + 1
        return sorted(counts, key=lambda c: (-counts[c], CAUSES.index(c)))

    @property
    def key(self) -> Tuple[str, int, str]:
        return (self.filename, self.firstlineno, self.name)


@dataclass
class Trace:
    entries: List[CodeEntry] = field(default_factory=list)
    #: files read, and lines that were not JSON records
    files: List[str] = field(default_factory=list)
    bad_lines: int = 0

    @property
    def total_graphs(self) -> int:
        return sum(e.graphs for e in self.entries)

    def graphs_by_key(self) -> Dict[Tuple[str, int, str], int]:
        out: Dict[Tuple[str, int, str], int] = {}
        for e in self.entries:
            out[e.key] = out.get(e.key, 0) + e.graphs
        return out


# -- reading records --------------------------------------------------------


def iter_records(path: str) -> Iterator[Optional[dict]]:
    """The JSON records of one trace file (None for a line that is not one)."""
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("\t") or not line.strip():
                continue  # payload lines
            start = line.find("] {")
            start = start + 2 if start >= 0 else line.find("{")
            if start < 0:
                yield None
                continue
            try:
                record = json.loads(line[start:])
            except ValueError:
                yield None
                continue
            yield record if isinstance(record, dict) else None


def trace_files(folder: str) -> List[str]:
    """Trace files in ``folder`` (sorted: stable output)."""
    if os.path.isfile(folder):
        return [folder]
    out = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith((".log", ".json")) or name.startswith(
                "dedicated_log_torch_trace"
            ):
                out.append(os.path.join(root, name))
    return sorted(out)


_LIMIT_RE = re.compile(r"(recompile|cache[ _]size)[ _]?limit|limit type", re.IGNORECASE)


def _is_limit_failure(metrics: dict) -> bool:
    text = f"{metrics.get('fail_type') or ''} {metrics.get('fail_reason') or ''}"
    return (
        bool(metrics.get("fail_type"))
        and bool(_LIMIT_RE.search(text))
        and "exceed" in text.lower()
    )


def _is_torch_file(filename: str) -> bool:
    norm = filename.replace("\\", "/")
    return (
        "/site-packages/" in norm
        or "/dist-packages/" in norm
        or "/lib/python" in norm
        or norm.startswith("<")
    )


def read_trace(folder: str) -> Trace:
    """Parse every trace file under ``folder``."""
    trace = Trace()
    for path in trace_files(folder):
        trace.files.append(path)
        trace.entries.extend(_read_file(path, trace))
    return trace


def _read_file(path: str, trace: Trace) -> List[CodeEntry]:
    strings: Dict[int, str] = {}
    entries: Dict[int, CodeEntry] = {}
    order: List[int] = []
    pending: Dict[
        int, dict
    ] = {}  # frame_id -> info seen before the code object is known
    for record in iter_records(path):
        if record is None:
            trace.bad_lines += 1
            continue
        frame = record.get("frame_id")
        if "str" in record:
            value = record["str"]
            if (
                isinstance(value, list)
                and len(value) == 2
                and isinstance(value[1], int)
            ):
                strings[value[1]] = str(value[0])
            continue
        if not isinstance(frame, int):
            continue
        info = pending.setdefault(frame, {"graphs": 0, "stack": None})
        if "dynamo_start" in record:
            stack = (record["dynamo_start"] or {}).get("stack") or []
            frames = []
            for fr in stack:
                if not isinstance(fr, dict):
                    continue
                fname = fr.get("filename")
                fname = (
                    strings.get(fname, str(fname))
                    if isinstance(fname, int)
                    else str(fname or "")
                )
                frames.append(
                    (fname, int(fr.get("line") or 0), str(fr.get("name") or ""))
                )
            info["stack"] = frames
        elif "dynamo_output_graph" in record:
            info["graphs"] += 1
            if frame in entries:
                entries[frame].graphs += 1
        elif "compilation_metrics" in record:
            metrics = record["compilation_metrics"] or {}
            entry = entries.get(frame)
            if entry is None and metrics.get("co_name"):
                entry = CodeEntry(
                    name=str(metrics["co_name"]),
                    filename=str(metrics.get("co_filename") or ""),
                    firstlineno=int(metrics.get("co_firstlineno") or 0),
                    graphs=info["graphs"],
                )
                entries[frame] = entry
                order.append(frame)
            if entry is None:
                # a failure before any successful compile of this frame: name it from the stack
                stack = info.get("stack") or []
                if not stack:
                    continue
                fname, line, name = stack[-1]
                entry = CodeEntry(
                    name=name, filename=fname, firstlineno=line, graphs=info["graphs"]
                )
                entries[frame] = entry
                order.append(frame)
            if entry.user_frame is None and info.get("stack"):
                entry.user_frame = _user_frame(info["stack"])
            if _is_limit_failure(metrics):
                entry.limit_hit = True
            elif not metrics.get("fail_type"):
                entry.compiles += 1
            reason = metrics.get("recompile_reason")
            if reason:
                entry.reasons.extend(parse_reason(str(reason)))
    return [entries[f] for f in order]


def _user_frame(
    stack: Sequence[Tuple[str, int, str]],
) -> Optional[Tuple[str, int, str]]:
    for fname, line, name in reversed(stack):
        if not _is_torch_file(fname):
            return (fname, line, name)
    return None


# -- classifying reasons -----------------------------------------------------

_COMPILE_ID = re.compile(r"^\s*\[?\d+/\d+\]?\s*:\s*")
_COMMENT = re.compile(r"\s+#\s")
_USER_STACK = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_TENSOR_MISMATCH = re.compile(
    r"^tensor\s+'(?P<name>.+?)'\s+(?P<what>size|stride|rank|dim|dispatch|dtype|device|requires_grad)\w*\s+mismatch",
    re.IGNORECASE,
)
_EQ = re.compile(r"^(?P<src>.+?)\s*==\s*(?P<val>.+?)\s*$")
_LOCAL = re.compile(r"""^L\[['"](?P<name>[^'"]+)['"]\]""")
_GLOBAL = re.compile(r"""^G\[['"](?P<name>[^'"]+)['"]\]""")
_ANY_SCOPE = re.compile(r"""\b[LG]\[['"](?P<name>[^'"]+)['"]\]""")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_ATTR = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+|inf|nan)$")
_LR = re.compile(r"""\[['"](lr|initial_lr)['"]\]|param_groups""")


def _user_source(src: str) -> Tuple[str, bool]:
    """``L['x'].attr`` -> ("x.attr", False); ``G['X']`` -> ("X", True)."""
    src = src.strip()
    is_global = bool(_GLOBAL.match(src))
    src = _ANY_SCOPE.sub(lambda m: m.group("name"), src)
    return src, is_global


def classify_guard(guard: str) -> Tuple[str, str]:
    """(cause, source) for one failed guard's text."""
    m = _TENSOR_MISMATCH.match(guard)
    if m:
        name, _ = _user_source(m.group("name"))
        what = m.group("what").lower()
        return (
            TENSOR_SHAPE if what in ("size", "stride", "rank", "dim") else OTHER
        ), name
    m = _EQ.match(guard)
    if not m:
        return OTHER, ""
    src, is_global = _user_source(m.group("src"))
    value = m.group("val").strip()
    if _LR.search(m.group("src")):
        return OPTIMIZER_LR, src
    if is_global:
        return GLOBAL, src
    is_int, is_float = bool(_INT.match(value)), bool(_FLOAT.match(value))
    if _ATTR.match(src) and is_int:
        return MODULE_INT_ATTR, src
    if _IDENT.match(src):
        if is_float:
            return FLOAT_ARG, src
        if is_int:
            return INT_ARG, src
    return OTHER, src


def parse_reason(text: str) -> List[Reason]:
    """Every failed guard of one ``recompile_reason``, classified."""
    head, _, stack = text.partition("User stack trace:")
    frames = list(_USER_STACK.finditer(stack))
    file, line = "", 0
    if frames:
        file, line = frames[-1].group("file"), int(frames[-1].group("line"))
    out: List[Reason] = []
    for raw in head.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        guard_text = _COMPILE_ID.sub("", raw, count=1)
        guard = _COMMENT.split(guard_text, maxsplit=1)[0].strip()
        cause, source = classify_guard(guard)
        text_out = guard if cause != OTHER else guard_text.strip()
        out.append(
            Reason(cause=cause, source=source, text=text_out, line=line, file=file)
        )
    return out


# -- the table -----------------------------------------------------------------


def cure_codes(cause: str, available: Iterable[str]) -> List[str]:
    """Rule codes (present in ``available``) that cure ``cause``, best first."""
    have = set(available)
    return [c.code for c in CURES.get(cause, ()) if c.code in have]


def display_location(entry: CodeEntry, relative_to: Optional[str] = None) -> str:
    filename, line = entry.filename, entry.firstlineno
    if _is_torch_file(filename) and entry.user_frame is not None:
        filename, line = entry.user_frame[0], entry.user_frame[1]
    if relative_to:
        try:
            rel = os.path.relpath(filename, relative_to)
            if not rel.startswith(".."):
                filename = rel
        except ValueError:
            pass
    return f"{filename}:{line}"


def display_name(entry: CodeEntry) -> str:
    if _is_torch_file(entry.filename) and entry.user_frame is not None:
        return f"{entry.name} (via {entry.user_frame[2]})"
    return entry.name


def table_rows(
    trace: Trace, available: Iterable[str], relative_to: Optional[str] = None
) -> List[List[str]]:
    """One row per cause of every code object that recompiled or hit the limit;
    code objects compiled without recompiling get one row with cause "-"."""
    codes = list(available)
    rows: List[List[str]] = []
    for entry in trace.entries:
        if not entry.reasons and not entry.limit_hit and entry.graphs == 0:
            continue  # a frame that compiled nothing (e.g. torch's own wrappers)
        base = [
            display_name(entry),
            display_location(entry, relative_to),
            str(entry.graphs),
            "yes" if entry.limit_hit else "no",
        ]
        causes = entry.causes
        if not causes:
            rows.append(base + ["-", "-"])
            continue
        for cause in causes:
            reasons = [r for r in entry.reasons if r.cause == cause]
            if cause == OTHER:
                label = f"other: {reasons[0].text}"
            else:
                sources = []
                for r in reasons:
                    if r.source and r.source not in sources:
                        sources.append(r.source)
                label = f"{cause} `{', '.join(sources)}`" if sources else cause
            cures = cure_codes(cause, codes)
            rows.append(base + [label, ", ".join(cures) if cures else "none"])
    return rows


HEADER = ["function", "file:line", "graphs", "limit hit", "cause", "cure"]


def format_table(
    rows: Sequence[Sequence[str]], header: Sequence[str] = HEADER
) -> List[str]:
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [list(header)] + [list(r) for r in rows]:
        cells = [
            cell.ljust(widths[i]) if i < len(row) - 1 else cell
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines
