"""Robustness check on real code: run every pass (unsafe fixes on) over every
``.py`` file under the given folders, in-process, and check that

* nothing crashes: a FileError (unparsable input, bad encoding) is the user's
  problem and only counted; any other exception, or a FileError that says
  "internal error", is a bug in the engine or a pass;
* every changed file parses;
* a second run over a changed file changes nothing (idempotence).

    python scripts/check_corpus.py FOLDER [FOLDER ...] [--select CODES] [--no-prefilter] [--quiet]

Prints counts (files, findings per code, changed, errors, crashes, seconds)
and exits 1 when a crash or a non-idempotent fix was found.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import libcst as cst  # noqa: E402

from codemods.analysis.context import Settings  # noqa: E402
from codemods.pipeline.engine import analyze, render, should_apply  # noqa: E402
from codemods.findings import FileError  # noqa: E402


@dataclass
class Report:
    files: int = 0
    prefiltered: int = 0
    findings: Counter = field(default_factory=Counter)
    fixable: Counter = field(default_factory=Counter)
    changed: int = 0
    #: (path, reason): bad input, reported by the tool as it should be
    errors: List[Tuple[str, str]] = field(default_factory=list)
    #: (path, description): bugs
    crashes: List[Tuple[str, str]] = field(default_factory=list)
    not_idempotent: List[str] = field(default_factory=list)
    seconds: float = 0.0
    slowest: List[Tuple[float, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.crashes and not self.not_idempotent

    def lines(self) -> List[str]:
        out = [
            f"files: {self.files} (ruled out by the prefilter: {self.prefiltered})",
            "findings: " + (", ".join(f"{code} {n}" for code, n in sorted(self.findings.items())) or "none"),
            "with a fix: " + (", ".join(f"{code} {n}" for code, n in sorted(self.fixable.items())) or "none"),
            f"changed: {self.changed}",
            f"errors (bad input): {len(self.errors)}",
            f"crashes: {len(self.crashes)}",
            f"not idempotent: {len(self.not_idempotent)}",
            f"seconds: {self.seconds:.1f}",
        ]
        for path, reason in self.errors[:20]:
            out.append(f"  error: {path}: {reason}")
        for path, what in self.crashes[:20]:
            out.append(f"  CRASH: {path}: {what}")
        for path in self.not_idempotent[:20]:
            out.append(f"  NOT IDEMPOTENT: {path}")
        for secs, path in sorted(self.slowest, reverse=True)[:5]:
            out.append(f"  slow: {secs:.2f}s {path}")
        return out


def python_files(folders: Sequence[str]) -> List[str]:
    found: List[str] = []
    for folder in folders:
        if os.path.isfile(folder):
            found.append(folder)
            continue
        for dirpath, dirnames, names in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            found.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".py"))
    return found


class Crash(Exception):
    pass


def fix_once(path: str, data: bytes, settings: Settings):
    """(findings, new bytes or None).  FileError for bad input; Crash for a bug."""
    try:
        ctx, findings = analyze(path, path, data, settings)
    except FileError:
        raise
    except RecursionError:
        raise FileError(path, "too deeply nested") from None
    except Exception as exc:  # noqa: BLE001 - the point of this script
        raise Crash(f"analysis: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-4)}") from None
    if ctx is None:
        return None, None
    chosen = [f for f in findings if should_apply(f, settings)]
    if not chosen:
        return findings, None
    try:
        new = render(ctx, chosen)
    except FileError as exc:
        raise Crash(f"render: {exc.reason}") from None
    except Exception as exc:  # noqa: BLE001
        raise Crash(f"render: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-4)}") from None
    return findings, (new if new != data else None)


def check_file(path: str, settings: Settings, report: Report) -> None:
    report.files += 1
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        report.errors.append((path, f"cannot read: {exc}"))
        return
    try:
        findings, new = fix_once(path, data, settings)
    except FileError as exc:
        if "internal error" in exc.reason:
            report.crashes.append((path, exc.reason))
        else:
            report.errors.append((path, exc.reason))
        return
    except Crash as exc:
        report.crashes.append((path, str(exc)))
        return
    if findings is None:
        report.prefiltered += 1
        return
    for f in findings:
        report.findings[f.code] += 1
        if f.fix is not None:
            report.fixable[f.code] += 1
    if new is None:
        return
    report.changed += 1
    try:
        cst.parse_module(new)
    except Exception as exc:  # noqa: BLE001
        report.crashes.append((path, f"the fixed file does not parse: {type(exc).__name__}"))
        return
    try:
        _, again = fix_once(path, new, settings)
    except (FileError, Crash) as exc:
        report.crashes.append((path, f"second run: {exc}"))
        return
    if again is not None:
        report.not_idempotent.append(path)


def set_prefilter(enabled: bool) -> bool:
    """Turn the engine's byte prefilter on/off; returns the old state."""
    from codemods.pipeline import prefilter

    old = prefilter.ENABLED
    prefilter.ENABLED = enabled
    return old


def check(folders: Sequence[str], settings: Optional[Settings] = None, progress: bool = False) -> Report:
    settings = settings or Settings(unsafe_fixes=True)
    report = Report()
    start = time.perf_counter()
    files = python_files(folders)
    for i, path in enumerate(files):
        t0 = time.perf_counter()
        check_file(path, settings, report)
        report.slowest.append((time.perf_counter() - t0, path))
        report.slowest = sorted(report.slowest, reverse=True)[:5]
        if progress and (i + 1) % 250 == 0:
            print(f"... {i + 1}/{len(files)} files, {time.perf_counter() - start:.0f}s", file=sys.stderr, flush=True)
    report.seconds = time.perf_counter() - start
    return report


def main(argv: Optional[Iterable[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--select", help="comma-separated rule codes (default: every rule)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--no-prefilter", action="store_true", help="run every rule on every file that parses")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.no_prefilter:
        set_prefilter(False)
    select = frozenset(c.strip().upper() for c in args.select.split(",")) if args.select else None
    report = check(args.folders, Settings(select=select, unsafe_fixes=True), progress=not args.quiet)
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
