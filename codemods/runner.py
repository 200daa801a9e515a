"""A whole run over many files: discover, process each file, gather results in a
stable order.  The CLI and the interactive mode both start here.

For a monorepo the work is staged, cheapest first:

1. discovery (gitignore, default and configured excludes);
2. the project index (cross-module facts), built once (parsing in a pool
   when ``jobs > 1``) and shared; its parse also yields the screen's facts;
3. per file: ``stat`` + cache lookup (no read when size and mtime match),
   else read + the byte prefilter (most files never mention a trigger);
4. the files left go through the engine (stdlib-``ast`` screen, then libcst),
   in a process pool when ``jobs > 1``;
5. results are merged sorted by display path, so ``-j1`` and ``-jN`` print the
   same thing, and stored in the cache.

With ``jobs == 1`` and no cache (the defaults of :func:`run`), findings keep
their fixes' CST edits; results from workers or the cache carry the fix's
safety and title and the fixed bytes, but no edits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .context import Settings
from .discovery import DEFAULT_EXCLUDES, discover, display_path
from .engine import FileResult, process_source, read_file
from .findings import FileError, Finding, Fix
from .project import build_project_index, data_digest
from .writer import write_changed

GENERATED_MARKER = b"@generated"
#: how far into a file the ``@generated`` marker is looked for
GENERATED_HEAD = 2048
#: below this many files to analyse, a pool costs more than it saves
POOL_MIN_FILES = 4


@dataclass
class RunStats:
    seen: int = 0
    prefiltered: int = 0
    cached: int = 0
    generated: int = 0
    changed: int = 0
    failed: int = 0
    analysed: int = 0


@dataclass
class RunResult:
    results: List[FileResult] = field(default_factory=list)
    #: (display path, reason) for every path or file that failed
    errors: List[Tuple[str, str]] = field(default_factory=list)
    stats: RunStats = field(default_factory=RunStats)

    @property
    def findings(self) -> List[Finding]:
        return [f for r in self.results for f in r.findings]


def _portable(result: FileResult) -> FileResult:
    """The result without CST objects (fix edits hold nodes and closures), so it
    can cross a process boundary or go into the cache."""
    for f in result.findings:
        if f.fix is not None and f.fix.edits:
            f.fix = Fix(edits=(), safety=f.fix.safety, needs_torch=f.fix.needs_torch, title=f.fix.title)
    result.original = None
    return result


# worker state, set once per process by the pool initializer
_W: Dict[str, object] = {}


def _init_worker(project) -> None:
    _W["project"] = project


def _work(task) -> FileResult:
    path, display, data, settings, facts = task
    return _portable(process_source(path, display, data, settings, _W.get("project"), facts))


def _is_generated(data: bytes) -> bool:
    return GENERATED_MARKER in data[:GENERATED_HEAD]


def _excluded_by_default(path: str) -> bool:
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)[:-1]
    return any(p in DEFAULT_EXCLUDES for p in parts)


def _filter_excludes(files: Sequence[str], patterns: Sequence[str], root: str, explicit: Sequence[str], force: bool) -> List[str]:
    """Drop files matching ``patterns`` (gitignore-style, relative to ``root``).
    Files named on the command line are kept unless ``force``."""
    import pathspec

    spec = pathspec.PathSpec.from_lines("gitwildmatch", patterns) if patterns else None
    explicit_set = {os.path.abspath(p) for p in explicit}
    root = os.path.abspath(root)
    out = []
    for path in files:
        ab = os.path.abspath(path)
        if ab in explicit_set and not force:
            out.append(path)
            continue
        if force and ab in explicit_set and _excluded_by_default(path):
            continue
        if spec is not None:
            rel = os.path.relpath(ab, root).replace(os.sep, "/")
            if not rel.startswith("../") and spec.match_file(rel):
                continue
        out.append(path)
    return out


def run(
    paths: Sequence[str],
    settings: Settings,
    *,
    excludes: Sequence[str] = (),
    jobs: int = 1,
    cache_dir: Optional[str] = None,
    cache_write: bool = True,
    config_excludes: Sequence[str] = (),
    config_root: str = ".",
    force_exclude: bool = False,
    per_file_ignores=None,
    skip_generated: bool = True,
    progress: Optional[Callable[[int, int], None]] = None,
) -> RunResult:
    found = discover(paths, excludes)
    out = RunResult()
    for path, reason in found.missing:
        out.errors.append((path, reason))
    explicit = [p for p in paths if os.path.isfile(p)]
    files = found.files
    if config_excludes or force_exclude:
        files = _filter_excludes(files, config_excludes, config_root, explicit, force_exclude)
    # the screen's facts of the files the index parsed (no second parse)
    screen_facts: Dict[str, tuple] = {}
    project = build_project_index(files, settings, cache_dir=cache_dir, cache_write=cache_write, jobs=jobs, screen_facts=screen_facts)
    cache = None
    if cache_dir is not None:
        from .cache import Cache

        cache = Cache(cache_dir, settings, project)
    stats = out.stats
    stats.seen = len(files)
    results: List[FileResult] = []
    todo: List[Tuple[str, str, bytes, Settings, Optional[os.stat_result], object]] = []
    done = 0
    for path in files:
        display = display_path(path)
        file_settings = settings
        if per_file_ignores:
            extra = per_file_ignores.codes_for(path)
            if extra:
                file_settings = replace(settings, ignore=frozenset(settings.ignore | extra))
        try:
            st: Optional[os.stat_result] = os.stat(path)
        except OSError:
            st = None
        if cache is not None:
            entry = cache.lookup(path, file_settings, st)
            if entry is not None:
                from .cache import restore

                original = None
                if entry["result"]["new"] is not None:  # diff and fix need the original bytes
                    try:
                        original = read_file(path, display)
                    except FileError:
                        original = None
                if entry["result"]["new"] is None or original is not None:
                    results.append(restore(entry, path, display, original))
                    stats.cached += 1
                    done += 1
                    continue
        try:
            data = read_file(path, display)
        except FileError as exc:
            results.append(FileResult(path=path, display_path=display, error=exc.reason))
            done += 1
            continue
        if skip_generated and _is_generated(data):
            results.append(FileResult(path=path, display_path=display, original=data, prefiltered=True))
            stats.generated += 1
            done += 1
            continue
        # every file goes to the engine: the screen is cheap, and bad input
        # (binary, undecodable, syntax error) is reported even where no pass applies
        known = screen_facts.pop(path, None)
        facts = known[1] if known is not None and known[0] == data_digest(data) else None  # same bytes only
        todo.append((path, display, data, file_settings, st, facts))
    if progress is not None:
        progress(done, len(files))

    def finish(task, result: FileResult) -> None:
        nonlocal done
        path, display, data, file_settings, st, _facts = task
        result.original = data
        if not result.prefiltered:
            stats.analysed += 1
        results.append(result)
        if cache is not None:
            cache.store(path, file_settings, st, data, result)
        done += 1
        if progress is not None:
            progress(done, len(files))

    if jobs > 1 and len(todo) >= POOL_MIN_FILES:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork (Linux): workers inherit the imported modules; spawn elsewhere
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        mp = multiprocessing.get_context(method)
        # biggest first so one large file does not finish the run alone
        order = sorted(range(len(todo)), key=lambda i: -len(todo[i][2]))
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=mp, initializer=_init_worker, initargs=(project,)) as pool:
            futures = {pool.submit(_work, todo[i][:4] + todo[i][5:]): i for i in order}
            from concurrent.futures import as_completed

            for fut in as_completed(futures):
                finish(todo[futures[fut]], fut.result())
    else:
        for task in todo:
            path, display, data, file_settings, st, facts = task
            result = process_source(path, display, data, file_settings, project, facts)
            finish(task, _portable(result) if cache is not None else result)
    results.sort(key=lambda r: r.display_path)
    for r in results:
        if r.prefiltered and r.error is None:
            stats.prefiltered += 1
        if r.error:
            out.errors.append((r.display_path, r.error))
            stats.failed += 1
        if r.changed:
            stats.changed += 1
    stats.prefiltered -= stats.generated  # generated files are counted apart
    if cache is not None and cache_write:
        cache.save()
    out.results = results
    return out


def write_results(run_result: RunResult) -> int:
    """Write every changed file atomically; returns how many were written."""
    return write_changed(run_result.results, run_result.errors, lambda r: r.findings)


def run_summary(stats: RunStats) -> List[str]:
    """The closing line about the run itself (files, not findings)."""
    return [
        f"{stats.seen} file{'s' if stats.seen != 1 else ''} seen: {stats.prefiltered} skipped by the prefilter, "
        f"{stats.generated} generated, {stats.cached} cached, {stats.analysed} analysed, "
        f"{stats.changed} changed, {stats.failed} failed."
    ]
