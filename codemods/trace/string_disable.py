"""A fix made from trace evidence: a function compiled code calls, whose
frames recompile on the value of a string, runs eagerly
(``@torch.compiler.disable``).

Dynamo never makes a ``str`` (or ``bytes``) dynamic: code that reads one
guards its value, so every new value is a graph, until the recompile limit.
nari-labs/dia before 5f57172d: the compiled ``_prepare_generation`` calls
``self._prepare_text_input(text)``, which encodes the prompt
(``text.encode``, ``bytes.replace``, ``list(...)``); the call breaks the
graph, the function runs as a frame of its own and guards ``text == '[S1]
Dia is ...'`` (and, after its own break, ``___stack0 == b'\\x01 Dia ...'``):
every prompt compiles again.  OpenTau before 1aeed09: the compiled
``sample_actions`` calls ``self.prepare_language(batch)``, which formats the
task prompt and the binned robot state into an f-string; the frame resumed
after its break guards ``tasks[0] == 'Open the drawer'`` and
``___stack0[0] == '153 140 ...'``.  The projects moved the string work out
of the compiled code (dia: encode eagerly and pass the tensor; OpenTau:
compile the tensor-only model instead).

The trace shows the string guards of the function's frames (its own and
those resumed after a break in it, :func:`codemods.trace.read.string_guards`)
and a frame of compiled code resumed after a graph break at a call of that
function (the evidence that compiled code reaches it, and that it is not the
compiled function itself).  The function, in a file of the run, gets
``@torch.compiler.disable`` (the edit is FR013's,
:func:`codemods.transforms.container_growth.disable_edit`): the string work
runs eagerly, the tensors it makes reach the compiled code.  Measured on
2.13: dia 5 -> 1 graphs (the project's count), OpenTau 10 -> 6 (the
project's 3 compiles only the model), ``tests/trace_scripts/prompt_encode.py``
9 -> 1 (ten prompts), 5 -> 1 (four).  Safe where one of the function's
frames hit the recompile limit: from then on torch ran it, and what it
calls, without compiling again ("run only": its callees' cached graphs at
most); unsafe otherwise: a string that takes few values (a mode) is
compiled once each and then reused, and the function then runs eagerly at
every call, which can be slower.  ``run --fix`` keeps it
only if the rerun compiles fewer graphs with the same output and exit code."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import read as tr
from .registry import STRING_DISABLE
from ..analysis.compile_sites import code_def, model_of
from ..analysis.project import _read_bytes
from ..findings import FileError
from ..pipeline.engine import parse_ast
from ..transforms.container_growth import disable_refused
from .cures import _disable_fix, _unfixed
from .match import Guided, Match, _real

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class StringFrames:
    """The frames of one function that recompiled on string values: its
    file and name, a line in it (its ``def`` or a graph break in it), the
    sources guarded, its entries, and where compiled code called it (file,
    line of the call, the caller's name)."""

    file: str
    function: str
    line: int
    sources: Tuple[str, ...]
    entries: Tuple[tr.CodeEntry, ...]
    called_at: Tuple[str, int, str]

    @property
    def limit_hit(self) -> bool:
        return any(e.limit_hit for e in self.entries)

    @property
    def recompiles(self) -> int:
        return sum(max(e.count(tr.CONSTANT), e.count(tr.RESUME_VALUE)) for e in self.entries)


def _called_names(data: bytes, path: str) -> Dict[str, List[Tuple[int, int]]]:
    """Name -> the line spans of the file's calls of it (``f(...)``,
    ``self.f(...)``); empty when the file does not parse."""
    try:
        source = parse_ast(path, data)
    except FileError:
        return {}
    out: Dict[str, List[Tuple[int, int]]] = {}
    for node in source.nodes(ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name is not None:
            out.setdefault(name, []).append((node.lineno, node.end_lineno or node.lineno))
    return out


def string_frames(trace: tr.Trace, read: Callable[[str], Optional[bytes]] = _read_bytes) -> List[StringFrames]:
    """Each user function whose frames recompiled on string values and that
    a frame of compiled code, resumed after a graph break at a call of it in
    another function, shows compiled code reaching; ``read`` gives a file's
    bytes (the run's current ones)."""
    groups: Dict[Tuple[str, str], List[tr.CodeEntry]] = {}
    for entry in trace.entries:
        if tr.is_library_file(entry.filename) or not tr.string_guards(entry):
            continue
        at = tr.resumed_at(entry.name)
        groups.setdefault((_real(entry.filename), at[0] if at else entry.name), []).append(entry)
    out: List[StringFrames] = []
    calls: Dict[str, Dict[str, List[Tuple[int, int]]]] = {}  # each caller file read and parsed once

    def calls_of(path: str) -> Dict[str, List[Tuple[int, int]]]:
        if path not in calls:
            data = read(path)
            calls[path] = _called_names(data, path) if data is not None else {}
        return calls[path]

    for (real, function), entries in groups.items():
        called = None
        for other in trace.entries:
            at = tr.resumed_at(other.name)
            if at is None or at[0] == function or tr.is_library_file(other.filename):
                continue
            if any(first <= at[1] <= last for first, last in calls_of(other.filename).get(function, ())):
                called = (other.filename, at[1], at[0])
                break
        if called is None:
            continue
        sources = tuple(dict.fromkeys(s for e in entries for s in tr.string_guards(e)))
        first = entries[0]
        at = tr.resumed_at(first.name)
        out.append(StringFrames(first.filename, function, at[1] if at else first.firstlineno, sources, tuple(entries), called))
    return out


def string_files(trace: tr.Trace, paths: Sequence[str]) -> List[str]:
    """The files of ``paths`` holding a function whose frames recompiled on
    string values (it may be in another file than the compiled code)."""
    by_real = {_real(p): p for p in paths}
    out: List[str] = []
    for frames in string_frames(trace):
        path = by_real.get(_real(frames.file))
        if path is not None and path not in out:
            out.append(path)
    return out


def string_function(source, model, frames: StringFrames, line: int) -> Tuple[Optional[ast.AST], str]:
    """The ``def`` of ``frames``' function at ``line`` (its first line, or a
    graph break in it), or None and why it cannot take the decorator."""
    fn = code_def(source, frames.function, line)
    if fn is None:
        spans = [
            f for f in source.nodes(ast.FunctionDef) + source.nodes(ast.AsyncFunctionDef)
            if f.name == frames.function and f.lineno <= line <= (f.end_lineno or f.lineno)
        ]
        fn = min(spans, key=lambda f: (f.end_lineno or f.lineno) - f.lineno) if spans else None
    if fn is None:
        return None, ""
    if any(site.target_def is fn for site in model.compile_sites):
        return None, f"`{frames.function}` is compiled itself: encode the string outside the compiled code and pass the tensor"
    refused = disable_refused(source, model, fn)
    return (None, refused) if refused else (fn, "")


def _what(frames: StringFrames) -> str:
    names = ", ".join(f"`{s}`" for s in frames.sources)
    return (
        f"`{frames.function}` recompiles on the value of a string ({names}; {tr.recompiles(frames.recompiles)}): "
        f"torch never makes a string dynamic, each new value is a graph; compiled code calls it "
        f"(`{frames.called_at[2]}`, graph break at line {frames.called_at[1]})"
    )


def apply_string_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool) -> None:
    """``@torch.compiler.disable`` on each function of a guided file whose
    frames recompiled on string values and that compiled code calls (one
    finding each, code ``TRACE``): safe where one of its frames hit the
    recompile limit, unsafe otherwise; where the function cannot take it, a
    finding without a fix says why."""

    by_real = {_real(g.path): g for g in guided.files}

    def current(path: str) -> Optional[bytes]:
        g = by_real.get(_real(path))
        return g.original if g is not None else _read_bytes(path)

    for frames in string_frames(trace, current):
        g = by_real.get(_real(frames.file))
        if g is None:
            continue
        base, mover = g.current()
        moved = mover(frames.line)
        try:
            source = parse_ast(g.path, base)
        except FileError:
            continue
        model = model_of(source)
        entry = frames.entries[0]
        cause = tr.CONSTANT if tr.CONSTANT in entry.causes else tr.RESUME_VALUE
        fn, why = string_function(source, model, frames, moved)
        if fn is None:
            if why:
                _unfixed(g, entry, cause, moved, 1, f"{_what(frames)}; no fix: {why}", STRING_DISABLE.name)
            continue
        unsafe = not frames.limit_hit
        lead = f"{_what(frames)}: run it eagerly, `@torch.compiler.disable`, so the string stays out of the graph and the tensors it makes reach the compiled code"
        if unsafe:
            message = (
                f"{lead}; unsafe: no frame of it hit the recompile limit, and `{frames.function}` then runs eagerly at every call, "
                "which can be slower (a string that takes few values, a mode, compiles once each and is reused)"
            )
        else:
            message = f"{lead}; safe: a frame of it hit the recompile limit, after which torch runs it, and what it calls, without compiling again"
        finding = _disable_fix(g, source, base, model, fn, message, STRING_DISABLE.name, unsafe=unsafe, unsafe_fixes=unsafe_fixes)
        for e in frames.entries:
            g.matches.append(Match(finding, e, tr.CONSTANT if tr.CONSTANT in e.causes else tr.RESUME_VALUE))


def string_cure(entry: tr.CodeEntry, trace: Optional[tr.Trace], report: str) -> str:
    """For the CI guard, which changes nothing: the cure of a code object
    that recompiled on string values, read from the files as they are now
    (the fix ``run --fix`` would write, and whether it is safe), or
    ``report`` (the table's label) with why there is none."""
    if trace is None or not tr.string_guards(entry):
        return report
    frames = next((f for f in string_frames(trace) if any(e is entry for e in f.entries)), None)
    if frames is None:
        return report
    data = _read_bytes(frames.file)
    if data is None:
        return report
    try:
        source = parse_ast(frames.file, data)
    except FileError:
        return report
    fn, why = string_function(source, model_of(source), frames, frames.line)
    if fn is None:
        return f"{report}; no fix runs it eagerly: {why}" if why else report
    how = f"`@torch.compiler.disable` on `{frames.function}`, called from compiled code (`run --fix"
    if frames.limit_hit:
        return how + "` writes it; safe: a frame of it hit the recompile limit, after which torch runs it without compiling again)"
    return how + " --unsafe-fixes` writes it; unsafe: the function then runs eagerly at every call)"
