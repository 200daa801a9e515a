"""A whole run over many files: discover, process each file, gather results in a
stable order.  The CLI and the interactive mode both start here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

from .context import Settings
from .discovery import discover, display_path
from .engine import FileResult, process_file
from .findings import FileError, Finding
from .project import build_project_index
from .writer import write_atomic


@dataclass
class RunResult:
    results: List[FileResult] = field(default_factory=list)
    #: (display path, reason) for every path or file that failed
    errors: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def findings(self) -> List[Finding]:
        return [f for r in self.results for f in r.findings]


def run(paths: Sequence[str], settings: Settings, *, excludes: Sequence[str] = ()) -> RunResult:
    found = discover(paths, excludes)
    out = RunResult()
    for path, reason in found.missing:
        out.errors.append((path, reason))
    project = build_project_index(found.files, settings)
    for path in found.files:
        result = process_file(path, display_path(path), settings, project)
        out.results.append(result)
        if result.error:
            out.errors.append((result.display_path, result.error))
    out.results.sort(key=lambda r: r.display_path)
    return out


def write_results(run_result: RunResult) -> int:
    """Write every changed file atomically; returns how many were written."""
    written = 0
    for result in run_result.results:
        if not result.changed:
            continue
        try:
            write_atomic(result.path, result.new, result.display_path)  # type: ignore[arg-type]
            written += 1
        except FileError as exc:
            run_result.errors.append((exc.path, exc.reason))
            for f in result.findings:
                f.applied = False
            result.new = None
    return written
