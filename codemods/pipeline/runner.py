"""A whole run over many files: discover, process each file, gather results in a
stable order.  The CLI and the interactive mode both start here.

For a monorepo the work is staged, cheapest first, and each file is read and
parsed as few times as possible:

1. discovery (gitignore, default and configured excludes);
2. with a cache: ``stat`` each file; the project index's per-file facts and
   the results of files whose size and mtime did not change come from the
   cache folder (no read);
3. **first look** at every other file, in chunks, in a process pool when
   ``jobs > 1``: read it once; if it mentions both ``torch`` and ``compile``,
   ``ast``-parse it once and build its compile-site model, which gives the
   project index its compiled functions *and* the rules their analysis; then
   the engine: the byte prefilter, the rules, and libcst only to render
   fixes.  Cross-module facts are not known yet, so this result holds for
   every file that mentions none of the index's names;
4. the project index is built from every file's compiled functions and the
   facts the rules declare (:class:`~codemods.analysis.project.ProjectFact`);
   a file that can hold no compile site but writes ``param_groups`` (FR004's
   lr writers) is parsed for them only now, and only when another file
   passes an optimizer to its module (:func:`~codemods.pipeline.index.settle_later`);
5. **second look**, only when the index lists compiled functions: the files
   that mention one of their names are processed again with the index (rare:
   they call a function compiled in another module; in a report only the
   rules that read the index run again, and their findings replace those
   of the first look: :func:`~codemods.pipeline.engine.merge_project_findings`),
   and cached files whose result was stored under other cross-module facts
   are processed afresh;
6. results are merged sorted by display path, so ``-j1`` and ``-jN`` print the
   same thing, and stored in the cache.

Workers read files themselves (paths go to them, not bytes) and send back
small results: the original bytes only where a finding or a fix needs them.
With ``jobs == 1`` and no cache (the defaults of :func:`run`), findings keep
their fixes' CST edits; results from workers or the cache carry the fix's
safety and title and the fixed bytes, but no edits.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .cache import content_hash
from ..analysis.context import Settings
from .discovery import display_path
from .selection import FileSelection
from .engine import FileResult, merge_project_findings, process_source, read_file
from .notebook import Notebook, is_notebook
from ..findings import FileError, Finding, Fix
from ..analysis.project import ProjectIndex, gather_facts, parse_for_index
from .index import FactsCache, settle_later
from ..transforms import PROJECT_FACTS
from .writer import write_changed

#: the project facts the rules declare (:data:`codemods.transforms.PROJECT_FACTS`)
_FACTS = tuple(fact for _, fact in PROJECT_FACTS)

GENERATED_MARKER = b"@generated"
#: how far into a file the ``@generated`` marker is looked for
GENERATED_HEAD = 2048
#: below this many files to look at, a pool costs more than it saves
POOL_MIN_FILES = 4
#: a report with less source than this to look at needs no pool (:func:`_look_all`)
SERIAL_MAX_BYTES = 1024 * 1024
#: a chunk of work sent to a worker: at most this many files ...
CHUNK_FILES = 32
#: ... or about this many bytes (a big file goes alone)
CHUNK_BYTES = 256 * 1024
#: a file mentioning torch above this size is not analysed (libcst needs
#: minutes and gigabytes for a multi-megabyte data table): one error line
MAX_FILE_BYTES = 4 * 1024 * 1024
#: an expression nested deeper than this (a 20,000-term ``1 + 1 + ...``) is
#: not analysed: libcst's time grows with the square of the depth and it can
#: overflow the C stack (a segfault)
MAX_EXPRESSION_DEPTH = 1000


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
    #: the project index the run used (cross-module facts)
    project: Optional[ProjectIndex] = None
    #: what discovery read (see :attr:`codemods.pipeline.discovery.Discovered.inputs`)
    inputs: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def findings(self) -> List[Finding]:
        return [f for r in self.results for f in r.findings]


def _portable(result: FileResult) -> FileResult:
    """The result without CST objects (fix edits hold nodes and closures), so it
    can cross a process boundary or go into the cache."""
    for f in result.findings:
        if f.fix is not None and f.fix.edits:
            f.fix = Fix(edits=(), safety=f.fix.safety, needs_torch=f.fix.needs_torch, title=f.fix.title, rests_on=f.fix.rests_on)
    return result


def _is_generated(data: bytes) -> bool:
    return GENERATED_MARKER in data[:GENERATED_HEAD]


# -- the work on one file -----------------------------------------------------
@dataclass
class _Options:
    """What a worker needs besides the file (the same for the whole run)."""

    skip_generated: bool = True
    #: results cross a process boundary or go into the cache: no CST edits
    portable: bool = False
    #: the cache needs each file's content hash
    want_hash: bool = False
    #: make the fixed text (diff, fix); a report only needs the findings
    render: bool = True


@dataclass
class _Looked:
    """One file after a look: its result, and what the run needs to know."""

    path: str
    result: FileResult
    #: its compiled functions (None: unreadable), first look only
    functions: Optional[dict] = None
    stat: Optional[os.stat_result] = None
    content_hash: Optional[str] = None
    #: each declared project fact's facts of the file, by name (first look
    #: only; :data:`~codemods.analysis.project.LATER`: not parsed for them,
    #: :func:`~codemods.pipeline.index.settle_later`)
    facts: Optional[Dict[str, object]] = None
    #: only the rules that read the index ran (a report's second look): the
    #: result is merged with the first look's
    partial: bool = False


#: per-process state of the worker pool: options and (second look) the index
_W: Dict[str, object] = {}


def _init_worker(options: _Options, project: Optional[ProjectIndex], marks: Optional[str] = None) -> None:
    _tune_worker_collector()
    _W["options"] = options
    _W["project"] = project
    _W["marks"] = marks
    _W.pop("mark_fd", None)  # a forked worker opens its own (see _mark_fd)


def _look(path: str, display: str, settings: Settings, mode: str, options: _Options, project: Optional[ProjectIndex]) -> Optional[_Looked]:
    """``mode``: "first" (no index yet; also the file's compiled functions),
    "full" (with the index), or "mentions" (with the index, only if the file
    contains one of its names; None otherwise)."""
    try:
        st: Optional[os.stat_result] = os.stat(path)
    except OSError:
        st = None
    try:
        data = read_file(path, display)
        notebook = Notebook(display, data) if is_notebook(path) else None
    except FileError as exc:
        if mode == "mentions":
            return None  # the first look reported it
        return _Looked(path, FileResult(path=path, display_path=display, error=exc.reason), None, st)
    if notebook is not None:
        # the analysis reads the code cells as one module (codemods/pipeline/notebook.py)
        looked = _look_source(path, display, notebook.python, settings, mode, options, project, st)
        if looked is not None:
            _as_notebook(looked.result, notebook, data)
            looked.content_hash = content_hash(data) if options.want_hash else None
        return looked
    return _look_source(path, display, data, settings, mode, options, project, st)


def _as_notebook(result: FileResult, notebook: "Notebook", data: bytes) -> None:
    """The result of a notebook's module, given back in the notebook's terms:
    its findings placed in their cells, its fixed bytes the notebook's JSON."""
    for f in result.findings:
        notebook.place(f)
    if result.new is not None:
        try:
            result.new = notebook.with_python(result.new) if result.new != notebook.python else data
        except FileError as exc:
            result.new, result.error = None, exc.reason
    result.original = data


def _look_source(path: str, display: str, data: bytes, settings: Settings, mode: str, options: _Options, project: Optional[ProjectIndex], st) -> Optional[_Looked]:
    """:func:`_look` of the bytes the analysis reads."""
    if mode == "mentions" and not project.concerns(path, data):  # type: ignore[union-attr]
        return None
    too_much = _over_size(data)  # before any parse: a huge file is not parsed at all
    if too_much is not None:
        return _Looked(path, FileResult(path=path, display_path=display, error=too_much), None, st)
    # a file no compile can be in is not parsed now for a fact (FR004's lr
    # writers): its facts matter only if another file's ask for them
    functions, source = parse_for_index(data, display) if mode == "first" else (None, None)
    facts = gather_facts(_FACTS, source, data, mode == "first") if mode == "first" else None
    too_much = _over_limits(data, source.tree if source is not None else None)
    if too_much is not None:
        return _Looked(path, FileResult(path=path, display_path=display, error=too_much), functions, st)
    if options.skip_generated and _is_generated(data):
        result = FileResult(path=path, display_path=display, prefiltered=True, generated=True)
    else:
        # a report's second look runs only the rules that read the index: the
        # others' findings from the first look stand (merge_project_findings)
        partial = mode == "mentions" and not options.render
        result = process_source(path, display, data, settings, project if mode != "first" else None, source, options.render, partial)
        if options.portable:
            _portable(result)
    if source is not None:
        source.release()  # the file is done: its tree goes by reference counting
    # the bytes go back only where a diff or a fix needs them (all of them in
    # process: the interactive review re-analyses files with findings)
    result.original = data if (result.new is not None or not options.portable) else None
    digest = content_hash(data) if options.want_hash else None
    return _Looked(path, result, functions, st, digest, facts, mode == "mentions" and not options.render)


def _may_hold_a_finding(data: bytes) -> bool:
    return b"torch" in data and (b"compile" in data or b"optim" in data or b"fix-recompiles" in data)


def _over_size(data: bytes) -> Optional[str]:
    """Why a file that may hold a finding is too large to analyse, or None."""
    if len(data) > MAX_FILE_BYTES and _may_hold_a_finding(data):
        return f"file too large to analyse ({len(data) / 2**20:.1f} MiB, limit {MAX_FILE_BYTES / 2**20:.0f} MiB); skipped"
    return None


def _over_limits(data: bytes, tree) -> Optional[str]:
    """Why the file is not analysed (too big, too deeply nested), or None.
    Only files that mention torch can reach the analysis; the others pass."""
    if not _may_hold_a_finding(data):
        return None  # no rule's trigger: never parsed beyond the byte tests
    too_big = _over_size(data)
    if too_big is not None:
        return too_big
    if tree is None:
        from ..analysis.mentions import mentions_compile

        if not mentions_compile(data):
            return None
        try:  # the index parse failed: a syntax error (reported later) or too deep
            tree = ast.parse(data)
        except RecursionError:
            return f"expression too deeply nested to analyse (limit {MAX_EXPRESSION_DEPTH}); skipped"
        except Exception:  # noqa: BLE001 - a syntax error: the engine reports it
            return None
    depth = _deepest_expression(data, tree)
    if depth > MAX_EXPRESSION_DEPTH:
        return f"expression too deeply nested to analyse (depth {depth}, limit {MAX_EXPRESSION_DEPTH}); skipped"
    return None


def _deepest_expression(data: bytes, tree) -> int:
    """How deep the deepest expression of ``tree`` nests (as ``ast.iter_child_nodes``
    counts levels: a name's context is one), measured only in statements
    long enough to nest beyond the limit (depth needs at least one byte per
    level), so ordinary files cost a statement-level walk; past the limit,
    the limit plus one.  Inside a long expression, a part too short to reach
    the limit from where it is is not walked either (a part of ``n`` bytes
    nests at most ``n`` levels and a few more: allowed twice that and 16)."""
    from itertools import accumulate

    from ..analysis.source import _CHILDREN, SINGLETON_HOLDERS, children

    limit = MAX_EXPRESSION_DEPTH
    #: where each line starts (lines split at b"\n" only)
    starts = list(accumulate(map((1).__add__, map(len, data.split(b"\n")[:-1])), initial=0))

    def span(node) -> int:
        try:
            return starts[node.end_lineno - 1] + node.end_col_offset - starts[node.lineno - 1] - node.col_offset
        except (AttributeError, IndexError, TypeError):
            return 1 << 30  # unknown: measure it

    def depth_of(node) -> int:
        best = 0
        stack = [(node, 1)]
        pop, push = stack.pop, stack.append
        table, leaves = _CHILDREN, SINGLETON_HOLDERS
        while stack:
            cur, d = pop()
            kind = type(cur)
            deepest = d + 1 if kind in leaves else d  # its context / operator nodes one level down
            if deepest > best:
                best = deepest
                if best > limit:
                    return limit + 1
            fn = table.get(kind)
            for child in fn(cur) if fn is not None else children(cur):
                size = span(child)
                if 0 < size and d + 1 + 2 * size + 16 <= limit:
                    continue  # too short to nest past the limit
                push((child, d + 1))
        return best

    best = 0
    statements = list(getattr(tree, "body", ()))
    while statements:
        stmt = statements.pop()
        if span(stmt) <= MAX_EXPRESSION_DEPTH:
            continue
        for name, value in ast.iter_fields(stmt):
            if name in ("body", "orelse", "finalbody"):
                statements.extend(v for v in value if isinstance(v, ast.stmt))
            elif name in ("handlers", "cases"):
                for h in value:
                    statements.extend(getattr(h, "body", ()))
                    for sub_name, sub in ast.iter_fields(h):
                        if sub_name != "body" and isinstance(sub, ast.AST) and span(sub) > MAX_EXPRESSION_DEPTH:
                            best = max(best, depth_of(sub))
            else:
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, ast.AST) and span(v) > MAX_EXPRESSION_DEPTH:
                        best = max(best, depth_of(v))
        if best > MAX_EXPRESSION_DEPTH:
            return best
    return best


def _look_safe(path: str, display: str, settings: Settings, mode: str, options: _Options, project: Optional[ProjectIndex]) -> Optional[_Looked]:
    """:func:`_look`, with any exception (MemoryError, RecursionError, a bug)
    turned into that file's error: one file never ends the run."""
    try:
        return _look(path, display, settings, mode, options, project)
    except Exception as exc:  # noqa: BLE001
        reason = "out of memory while analysing; skipped" if isinstance(exc, MemoryError) else f"internal error: {type(exc).__name__}: {exc}; file left unchanged"
        return _Looked(path, FileResult(path=path, display_path=display, error=reason))


def _look_chunk(chunk: List[Tuple[str, str, Settings, str]]) -> List[Optional[_Looked]]:
    options = _W["options"]
    project = _W.get("project")
    marks = _W.get("marks")
    out = []
    mark = _mark_fd(marks) if marks is not None else None
    for path, display, settings, mode in chunk:
        if mark is not None:  # if this process dies, the parent knows on which file
            try:
                _write_mark(mark, path)
            except OSError:
                pass
        out.append(_look_safe(path, display, settings, mode, options, project))  # type: ignore[arg-type]
    return out


def _mark_fd(marks: str) -> Optional[int]:
    """This worker's mark file (``<marks>/<pid>``), opened once: a file
    opened and closed per file cost 0.1 ms each (0.2 s of a 2,000-file pool)."""
    fd = _W.get("mark_fd")
    if fd is None:
        try:
            fd = os.open(os.path.join(marks, str(os.getpid())), os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            return None
        _W["mark_fd"] = fd
    return fd  # type: ignore[return-value]


def _write_mark(fd: int, path: str) -> None:
    """The path a worker is on, NUL-ended, over the previous one (:func:`_read_mark`)."""
    data = os.fsencode(path) + b"\0"
    if hasattr(os, "pwrite"):
        os.pwrite(fd, data, 0)
    else:  # pragma: no cover - no pwrite
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)


def _read_mark(file: str) -> str:
    """The path a mark file names (up to its first NUL: a longer earlier path may follow)."""
    with open(file, "rb") as fh:
        return os.fsdecode(fh.read().split(b"\0", 1)[0])


def _isolated_main(conn, task, options, project) -> None:
    path, display, settings, mode = task
    conn.send(_look_safe(path, display, settings, mode, options, project))
    conn.close()


def _signal_name(code: Optional[int]) -> str:
    if code is not None and code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _look_isolated(task: Tuple[str, str, Settings, str], options: _Options, project: Optional[ProjectIndex], context) -> Optional[_Looked]:
    """One file in a process of its own: a crash is that file's error."""
    path, display = task[0], task[1]
    receive, send = context.Pipe(duplex=False)
    proc = context.Process(target=_isolated_main, args=(send, task, options, project))
    proc.start()
    send.close()
    item = None
    try:
        item = receive.recv()
    except (EOFError, OSError):
        pass
    proc.join()
    receive.close()
    if item is not None or proc.exitcode == 0:
        return item
    return _Looked(path, FileResult(path=path, display_path=display, error=f"the process analysing this file died ({_signal_name(proc.exitcode)}); skipped"))


def _total_size(tasks: List[Tuple[str, str, Settings, str]]) -> int:
    """Bytes of the tasks' files (an unreadable one counts 0), stopping
    once past :data:`SERIAL_MAX_BYTES`."""
    total = 0
    for task in tasks:
        try:
            total += os.path.getsize(task[0])
        except OSError:
            pass
        if total >= SERIAL_MAX_BYTES:
            break
    return total


def _chunks(tasks: List[Tuple[str, str, Settings, str]]) -> List[List[Tuple[str, str, Settings, str]]]:
    """Tasks grouped so each chunk is a few hundred KB of source, biggest files
    first (one large file should not finish the run alone)."""
    sizes = {}
    for task in tasks:
        try:
            sizes[task[0]] = os.path.getsize(task[0])
        except OSError:
            sizes[task[0]] = 0
    ordered = sorted(tasks, key=lambda t: -sizes[t[0]])
    chunks: List[List[Tuple[str, str, Settings, str]]] = []
    current: List[Tuple[str, str, Settings, str]] = []
    weight = 0
    for task in ordered:
        if current and (len(current) >= CHUNK_FILES or weight + sizes[task[0]] > CHUNK_BYTES):
            chunks.append(current)
            current, weight = [], 0
        current.append(task)
        weight += sizes[task[0]]
    if current:
        chunks.append(current)
    return chunks


def _look_all(
    tasks: List[Tuple[str, str, Settings, str]], jobs: int, options: _Options, project: Optional[ProjectIndex], tick: Callable[[int], None]
) -> Iterator[_Looked]:
    """Every task looked at, in a pool (forked: workers inherit the index)
    when ``jobs > 1`` and there are enough files; ``tick(n)`` after each chunk.

    A report (no fix rendered: libcst only for FR002's marker lines, on
    expressions :func:`_over_limits` let through) of less than
    :data:`SERIAL_MAX_BYTES` of source is looked at in this process: a pool
    would cost more than it saves (-j2 was 15-25% slower than -j1 on
    nanochat, gpt-fast and litgpt)."""
    if jobs > 1 and len(tasks) >= POOL_MIN_FILES and not options.render and _total_size(tasks) < SERIAL_MAX_BYTES:
        jobs = 1
    if jobs > 1 and len(tasks) >= POOL_MIN_FILES:
        yield from _look_in_pool(tasks, jobs, options, project, tick)
        return
    for path, display, settings, mode in tasks:
        item = _look_safe(path, display, settings, mode, options, project)
        if item is not None:
            yield item
        tick(1)


def _look_in_pool(
    tasks: List[Tuple[str, str, Settings, str]], jobs: int, options: _Options, project: Optional[ProjectIndex], tick: Callable[[int], None]
) -> Iterator[_Looked]:
    """The pool part of :func:`_look_all`.  A worker that dies (a segfault in
    a parser, the kernel's OOM killer) breaks the pool: the chunks that came
    back are kept, the files the workers were on (each notes its current file)
    are looked at again one process each -- the one that dies again gets its
    error line -- and the rest go to a new pool."""
    import multiprocessing
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    context = multiprocessing.get_context(method)
    pending = list(tasks)
    while pending:
        chunks = _chunks(pending)
        finished = set()
        broken = False
        marks = tempfile.mkdtemp(prefix="fix-recompiles-workers-")
        try:
            with ProcessPoolExecutor(
                max_workers=min(jobs, len(chunks)), mp_context=context, initializer=_init_worker, initargs=(options, project, marks)
            ) as pool:
                futures = {pool.submit(_look_chunk, chunk): chunk for chunk in chunks}
                for fut in as_completed(futures):
                    try:
                        looked = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    finished.update(task[0] for task in futures[fut])
                    yield from (item for item in looked if item is not None)
                    tick(len(looked))
            suspects = set()
            if broken:
                for name in os.listdir(marks):
                    try:
                        suspects.add(_read_mark(os.path.join(marks, name)))
                    except OSError:
                        pass
        finally:
            shutil.rmtree(marks, ignore_errors=True)
        if not broken:
            return
        remaining = [task for task in pending if task[0] not in finished]
        alone = [task for task in remaining if task[0] in suspects] or remaining[:1]
        for task in alone:
            item = _look_isolated(task, options, project, context)
            if item is not None:
                yield item
            tick(1)
        pending = [task for task in remaining if task not in alone]


# -- the run ----------------------------------------------------------------------
#: the cyclic collector's generation-0 threshold during a run.  Each file's
#: tree is freed by reference counting (``Source.release`` breaks the cycles),
#: so the collector finds little; at the default (700) it spent a third of a
#: cold run on the training corpus rescanning live trees and the interpreter's
#: own objects.  The imports' objects are frozen out of its view as well.
GC_THRESHOLD = 50_000


@contextlib.contextmanager
def _quiet_collector() -> Iterator[None]:
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def _tune_worker_collector() -> None:
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 20)


def run(*args, **kwargs) -> "RunResult":
    """Every file of ``paths`` analysed (see :func:`_run`), with the cyclic
    collector quieted for the run."""
    with _quiet_collector():
        return _run(*args, **kwargs)


def _run(
    paths: Sequence[str],
    settings: Settings,
    *,
    selection: FileSelection = FileSelection(),
    jobs: int = 1,
    cache_dir: Optional[str] = None,
    cache_write: bool = True,
    skip_generated: bool = True,
    progress: Optional[Callable[[int, int], None]] = None,
    render: bool = True,
) -> RunResult:
    """Every file of ``paths`` analysed; with ``render`` (the default) the
    fixed text of files with fixes too (``render=False``: a report)."""
    found = selection.discover(paths)
    out = RunResult(inputs=found.inputs)
    for path, reason in found.missing:
        out.errors.append((path, reason))
    files = found.files
    stats = out.stats
    stats.seen = len(files)
    displays = {path: display_path(path) for path in files}
    file_settings: Dict[str, Settings] = {path: selection.settings_for(path, settings) for path in files}
    options = _Options(skip_generated=skip_generated, portable=jobs > 1 or cache_dir is not None, want_hash=cache_dir is not None, render=render)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, len(files))

    # 2. what the cache already knows: index facts (and stats) of unchanged files
    facts_cache = FactsCache(cache_dir, _FACTS) if cache_dir is not None else None
    functions: Dict[str, Optional[dict]] = {}
    #: fact name -> path -> that file's facts
    gathered: Dict[str, Dict[str, Optional[object]]] = {fact.name: {} for fact in _FACTS}
    stat_of: Dict[str, Optional[os.stat_result]] = {}
    first: List[str] = []
    for path in files:
        known, st = facts_cache.lookup(path) if facts_cache is not None else (None, None)
        if known is not None:
            functions[path] = known
            for name, found in facts_cache.facts_of(path).items():  # type: ignore[union-attr]
                gathered[name][path] = found
            stat_of[path] = st
        else:
            first.append(path)

    # 3. first look at every other file
    looked: Dict[str, _Looked] = {}
    for item in _look_all([(p, displays[p], file_settings[p], "first") for p in first], jobs, options, None, tick):
        looked[item.path] = item
        functions[item.path] = item.functions
        for name, found in (item.facts or {}).items():
            gathered[name][item.path] = found
        if facts_cache is not None and item.functions is not None:
            facts_cache.store(item.path, item.stat, item.functions, item.content_hash, item.facts)

    # 4. the index
    for code, fact in PROJECT_FACTS:
        found = gathered[fact.name]
        for path, facts in list(found.items()):
            if facts and not file_settings[path].selects(code):  # per-file ignores: the rule finds and fixes nothing there
                found[path] = None
        settle_later(fact, found, jobs, facts_cache)  # FR004: the lr writers some file may pass an optimizer to
    project = ProjectIndex.from_functions(files, functions, [(fact, gathered[fact.name]) for fact in _FACTS], facts_cache.derived if facts_cache is not None else None)
    out.project = project
    cache = None
    if cache_dir is not None:
        from .cache import Cache

        cache = Cache(cache_dir, settings, project)

    # 5. cached results, and the files that need a (second) look with the index
    results: Dict[str, FileResult] = {}
    second: List[Tuple[str, str, Settings, str]] = []
    for path in files:
        item = looked.get(path)
        if item is not None:
            results[path] = item.result
            if (project.names or project.always) and item.result.error is None and not item.result.generated:
                second.append((path, displays[path], file_settings[path], "mentions"))
            continue
        entry = cache.lookup(path, file_settings[path], stat_of.get(path)) if cache is not None else None
        if entry is not None:
            from .cache import restore

            original = None
            if entry["result"]["new"] is not None:  # diff and fix need the original bytes
                try:
                    original = read_file(path, displays[path])
                except FileError:
                    original = None
            if entry["result"]["new"] is None or original is not None:
                results[path] = restore(entry, path, displays[path], original)
                stats.cached += 1
                tick(1)
                continue
        second.append((path, displays[path], file_settings[path], "full"))
    if second:
        for item in _look_all(second, jobs, options, project, lambda n: None):
            if item.partial:
                item.result = merge_project_findings(results[item.path], item.result)
            looked[item.path] = item
            results[item.path] = item.result
    if cache is not None:
        for path in files:
            item = looked.get(path)
            if item is not None:
                cache.store(path, file_settings[path], item.stat, item.content_hash, item.result)
    if progress is not None:
        progress(len(files), len(files))

    # 6. merge
    ordered = sorted(results.values(), key=lambda r: r.display_path)
    for r in ordered:
        if r.generated:
            stats.generated += 1
        elif r.prefiltered and r.error is None:
            stats.prefiltered += 1
        elif r.path in looked and not r.prefiltered:
            stats.analysed += 1
        if r.error:
            out.errors.append((r.display_path, r.error))
            stats.failed += 1
        if r.changed or r.pending:
            stats.changed += 1
    if facts_cache is not None and cache_write:
        facts_cache.save()
    if cache is not None and cache_write:
        cache.save()
    out.results = ordered
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
