"""A fix made from trace evidence: an attribute the compiled code reads
through ``hasattr`` while it is missing, and then creates, gets a default at
the start of its class's ``__init__``.

vllm-ascend before cc9fa548 (PR #2532): ``AscendMLATorchairImpl`` (a plain
object held by the attention layers) gets ``self.running_in_graph`` only in
its ``forward``, run by the compiled decode step, and a method of the same
step tests ``if hasattr(self, "running_in_graph") and not
self.running_in_graph``.  The first graph is guarded on ``not hasattr(impl,
'running_in_graph')``; the call itself makes that false, so the next call
compiles again.  The project's fix is one line in ``__init__``:
``self.running_in_graph = False``.

The default is written only where every reader in the run's files is
proven to read it as it read the missing attribute, first in ``__init__``
(the proof and the edit: :mod:`codemods.analysis.presence`, shared with
rule FR020, which finds the same form in the source).  ``run --fix`` keeps it only if
the rerun compiles fewer graphs with the same output and exit code
(``tests/trace_scripts/attr_set_in_forward.py``: 2 -> 1;
``benchmarks/recall/vllm_ascend_running_in_graph_hasattr``: 2 -> 1, the
project's count)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple


from . import read as tr
from .registry import INIT_DEFAULT
from ..analysis.params import is_static, parameter_names
from ..analysis.compile_sites import model_of
from ..analysis.presence import class_default, presence_call
from ..findings import FileError
from ..pipeline.engine import parse_ast
from .cures import _applied_finding, _render_edits, _unfixed
from .match import Guided, Match, _real


@dataclass
class Default:
    """What :func:`plan` made of a presence guard: the class and its
    ``__init__`` line (0: none found), the default's source, the new bytes,
    or why not."""

    cls: str = ""
    line: int = 0
    value: str = ""
    new: Optional[bytes] = None
    why: str = ""


def _guard_call(source, line: int, attr: str) -> Optional[Tuple[ast.Call, ast.FunctionDef, ast.ClassDef]]:
    """The ``hasattr(self, 'attr')`` at ``line`` in a method of a class, the
    method and the class."""
    for node in source.nodes(ast.Call):
        call = presence_call(node, attr)
        if call is None or call.func.id != "hasattr" or not (call.lineno <= line <= call.end_lineno):
            continue
        fn = source.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        cls = source.parent(fn) if fn is not None else None
        if not isinstance(fn, ast.FunctionDef) or not isinstance(cls, ast.ClassDef) or is_static(fn):
            continue
        names = parameter_names(fn)
        if names and isinstance(call.args[0], ast.Name) and call.args[0].id == names[0]:
            return call, fn, cls
    return None


def plan(data: bytes, line: int, attr: str, others: Iterable = ()) -> Default:
    """``data`` with ``self.<attr> = <default>`` first in the ``__init__`` of
    the class whose method tests ``hasattr(self, '<attr>')`` at ``line``, or
    why not; ``others``: the run's other files that mention ``attr`` (parsed),
    whose readers must agree too."""
    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return Default(why="the file does not parse")
    found = _guard_call(source, line, attr)
    if found is None:
        return Default(why=f"no `hasattr(self, '{attr}')` in a method at line {line}")
    _call, _fn, cls = found
    d = class_default(source, model_of(source), cls, attr, others)
    out = Default(cls=cls.name, line=d.line, value=d.value, why=d.why)
    if d.edit is not None:
        out.new = _render_edits(source, data, [d.edit])
    return out


def _presence_reasons(entry: tr.CodeEntry) -> List[Tuple[str, int, str]]:
    """(file, line, attribute) of each ``hasattr`` guard of ``entry`` the
    trace saw fail on program state."""
    out: List[Tuple[str, int, str]] = []
    for r in entry.reasons:
        if r.cause != tr.KEYS or r.stale or not r.file or not r.line:
            continue
        attr = tr.presence_attribute(r.text)
        if attr and (r.file, r.line, attr) not in out:
            out.append((r.file, r.line, attr))
    return out


def presence_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` whose methods test an attribute ``hasattr``
    found missing in a recompiling code object: the class to give the
    default may be in another file than the compiled code (an attention
    impl held by the compiled model's layers)."""
    by_real = {_real(p): p for p in paths}
    out: List[str] = []
    for entry in trace.entries:
        for file, _line, _attr in _presence_reasons(entry):
            path = by_real.get(_real(file))
            if path is not None and path not in out:
                out.append(path)
    return out


def parsed_mentions(paths: Sequence[str], skip: str, attr: str, read: Callable[[str], bytes]) -> List:
    """The files of ``paths`` (but ``skip``, a real path) whose bytes
    (``read(path)``) mention ``attr``, parsed: the other files whose readers
    the proof must check.  Raises FileError for one that does not parse (its
    readers cannot be checked); a file that cannot be read is skipped."""
    out = []
    needle = attr.encode()
    for path in paths:
        if _real(path) == skip:
            continue
        try:
            data = read(path)
        except OSError:
            continue
        if needle in data:
            out.append(parse_ast(path, data))
    return out


def _others(guided: Guided, path: str, attr: str) -> List:
    """The run's other files that mention ``attr``, parsed, as the fixes so
    far left them (:func:`parsed_mentions`)."""
    project = guided.project
    paths = sorted(getattr(project, "modules", {}) or {}) if project is not None else []
    paths += [g.path for g in guided.files if g.path not in paths]
    current = {_real(g.path): (g.new or g.original) for g in guided.files}

    def read(other: str) -> bytes:
        known = current.get(_real(other))
        if known is not None:
            return known
        with open(other, "rb") as fh:
            return fh.read()

    return parsed_mentions(paths, _real(path), attr, read)


def apply_presence_evidence(trace: tr.Trace, guided: Guided) -> None:
    """Give every attribute a guided file's compiled code read through
    ``hasattr`` while it was missing (``not hasattr(self.impl, 'a')`` failed)
    a default in its class's ``__init__`` where every reader is proven to
    read the same (one finding, code ``TRACE``, safe, applied); where not, a
    finding without a fix says why."""

    by_real = {_real(g.path): g for g in guided.files}
    done = set()
    for entry in trace.entries:
        if tr.is_library_file(entry.filename):
            continue
        for file, line, attr in _presence_reasons(entry):
            g = by_real.get(_real(file))
            if g is None or (g.path, line, attr) in done:
                continue
            done.add((g.path, line, attr))
            base, mover = g.current()
            moved = mover(line)
            try:
                others = _others(guided, g.path, attr)
            except FileError as exc:
                why = f"{exc.path} does not parse"
                d = Default(why=why)
            else:
                d = plan(base, moved, attr, others)
            count = entry.count(tr.KEYS)
            if d.new is None:
                if d.line:
                    message = (
                        f"`{d.cls}.{attr}` is missing at the first compiled call and set by it (from the trace: "
                        f"{tr.recompiles(count)} on `hasattr`); no default in `__init__`: {d.why}"
                    )
                    _unfixed(g, entry, tr.KEYS, d.line, 1, message)
                continue
            g.new = d.new
            message = (
                f"`{d.cls}.{attr}` is missing at the first compiled call and set by it (from the trace: "
                f"{tr.recompiles(count)} on `hasattr`): `self.{attr} = {d.value}` first in `__init__`, "
                "which every reader reads as it read the missing attribute"
            )
            finding = _applied_finding(g.display_path, d.line, 1, message, f"default `{attr}` in `{d.cls}.__init__`", INIT_DEFAULT.name)
            g.matches.append(Match(finding, entry, tr.KEYS))


def presence_cure(entry: tr.CodeEntry, report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object that
    recompiled on an attribute ``hasattr`` found missing, read from the files
    as they are now (the default ``run --fix`` would write, with the readers
    of the files under the current folder checked), or ``report`` (the
    table's label) with why there is none."""
    import os

    from ..pipeline.selection import FileSelection

    found = [(f, line, a) for f, line, a in _presence_reasons(entry) if not tr.is_library_file(f)]
    if not found:
        return report
    file, line, attr = found[0]

    def read(path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    try:
        data = read(file)
        others = parsed_mentions(FileSelection().discover([os.getcwd()]).files, _real(file), attr, read)
    except (OSError, FileError):
        return report
    d = plan(data, line, attr, others)
    if d.new is not None:
        return f"a default `self.{attr} = {d.value}` first in `{d.cls}.__init__`, read by every reader as the missing attribute (`run --fix` writes it)"
    return f"{report}; no default in `__init__`: {d.why}"
