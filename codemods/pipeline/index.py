"""Builds the project index over a run's files, its per-file facts kept in
the cache folder (:class:`FactsCache`) and its files parsed in a process
pool when there are enough of them.

What the index holds and how a file's facts are read is the analysis'
(:mod:`codemods.analysis.project`); this module only runs that over files,
keeps it between runs and settles the facts a fact asks for later
(:func:`settle_later`).  A whole run (:func:`codemods.pipeline.runner.run`)
builds the index as it goes, with the same cache and settling;
:func:`build_project_index` does it alone, for callers that need only the
index.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis.floats import FunctionSummary, ParamUse
from ..analysis.project import LATER, ModuleKey, ProjectFact, ProjectIndex, _read_bytes, gather_facts, module_key, parse_for_index
from ._jsonfile import write_json
from .cache import FORMAT, RACY_NS, _has_symlink, _tool_fingerprint, content_hash


def _file_functions(path: str, facts: Sequence[ProjectFact]) -> Tuple[Optional[Dict[str, FunctionSummary]], Dict[str, object]]:
    """(the compiled functions of one file ({} for none or unparsable; None:
    unreadable), each fact's facts of it (:func:`gather_facts`))."""
    data = _read_bytes(path)
    if data is None:
        return None, {}
    functions, source = parse_for_index(data, path)
    return functions, gather_facts(facts, source, data, True)


def _file_later(job: Tuple[str, ProjectFact]) -> Tuple[Optional[dict], Optional[str]]:
    """(one fact's facts of one file, the content hash of the bytes they
    come from (None: unreadable))."""
    path, fact = job
    data = _read_bytes(path)
    if data is None:
        return None, None
    _, source = parse_for_index(data, path, fact.later)
    return gather_facts((fact,), source, data, False)[fact.name], content_hash(data)  # type: ignore[return-value]


def settle_later(fact: ProjectFact, found: Dict[str, Optional[object]], jobs: int = 1, cache: Optional["FactsCache"] = None) -> None:
    """Replace each :data:`LATER` of ``found`` (path -> ``fact``'s facts) in
    place: by the file's facts when the file's module is one the fact's
    ``wanted`` names (FR004: some file passes an optimizer to a callable of
    that module), else by None.  The files to parse are parsed in a process
    pool when ``jobs > 1``; ``cache`` keeps what they give."""
    later = [path for path, facts in found.items() if facts == LATER]
    if not later:
        return
    folders: Dict[object, object] = {}

    def key_of(path: str) -> ModuleKey:
        return module_key(path, folders)

    wanted = fact.wanted(found, key_of) if fact.wanted is not None else set()
    todo = [path for path in later if key_of(path)[1] in wanted]
    for path in later:
        found[path] = None
    for path, (facts, digest) in zip(todo, _map_files(_file_later, [(path, fact) for path in todo], jobs)):
        found[path] = facts
        if cache is not None and digest is not None:
            cache.settle(fact, path, digest, facts)


def _summary_to_json(s: FunctionSummary):
    return dataclasses.asdict(s)


def _summary_from_json(d) -> FunctionSummary:
    uses = {
        k: ParamUse(safe=u["safe"], reason=u["reason"], needs=tuple((tuple(names), required) for names, required in u["needs"]), kind=u["kind"], cure=u["cure"])
        for k, u in d["uses"].items()
    }
    return FunctionSummary(
        name=d["name"], line=d["line"], positional=tuple(d["positional"]), kwonly=tuple(d["kwonly"]), has_varargs=d["has_varargs"], uses=uses,
        first_line=d.get("first_line", 0),
    )


class FactsCache:
    """Per-file index facts kept in the cache folder, keyed by (path, size,
    mtime_ns) and the tool's source fingerprint, so a warm run only stats
    files.  JSON, not pickle: a cache folder must never run code.  An entry
    is [size, mtime_ns, stored_ns, compiled functions, content hash, {fact
    name: facts}] for each declared :class:`ProjectFact`; a fact's derived
    facts of a file (:attr:`ProjectFact.read`) are kept under
    ``<fact name>:<path>`` (:meth:`derived`)."""

    def __init__(self, folder: str, facts: Sequence[ProjectFact] = ()) -> None:
        self.racy_ns = RACY_NS
        self.facts = {fact.name: fact for fact in facts}
        self.file = os.path.join(folder, f"v{FORMAT}", f"index-{_tool_fingerprint()}.json")
        self.entries: Dict[str, list] = {}
        self.dirty = False
        #: path -> its absolute form (the entries' key), made once per path
        self._keys: Dict[str, str] = {}
        if _has_symlink(folder, self.file):
            return  # never read through a link planted in the cache folder
        try:
            with open(self.file, "r", encoding="utf-8") as fh:
                loaded = json.load(fh)
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, ValueError):
            pass

    def _key(self, path: str) -> str:
        key = self._keys.get(path)
        if key is None:
            key = self._keys[path] = os.path.abspath(path)
        return key

    def _valid(self, name: str, found: object) -> bool:
        """Is ``found`` what fact ``name`` may hold (None, :data:`LATER` for a
        fact with ``later``, or facts of the shape its ``prove`` reads)?"""
        fact = self.facts.get(name)
        if fact is None:
            return False
        if found is None or (found == LATER and fact.later is not None):
            return True
        return fact.valid(found)

    def _entry(self, path: str) -> Optional[list]:
        entry = self.entries.get(self._key(path))
        return entry if isinstance(entry, list) and len(entry) == 6 and isinstance(entry[5], dict) else None

    def lookup(self, path: str):
        """(cached functions or None, stat or None): the stat is None when the
        file cannot be stat-ed (skipped), the functions None on a miss."""
        try:
            st = os.stat(path)
        except OSError:
            return None, None
        entry = self._entry(path)
        if entry is None or not isinstance(entry[3], dict) or entry[0] != st.st_size:
            return None, st  # missing, or of the wrong shape: a miss, never a crash
        # size + mtime decide, unless the file changed close to when it was
        # cached ("racily clean") or its mtime changed: then the content hash
        if not (entry[1] == st.st_mtime_ns and st.st_mtime_ns + self.racy_ns < entry[2]):
            data = _read_bytes(path)
            if data is None or content_hash(data) != entry[4]:
                return None, st
        if sorted(entry[5]) != sorted(self.facts) or not all(self._valid(name, found) for name, found in entry[5].items()):
            return None, st
        try:
            return {name: _summary_from_json(d) for name, d in entry[3].items()}, st
        except (KeyError, TypeError, ValueError, AttributeError):
            return None, st  # a damaged entry: recompute

    def facts_of(self, path: str) -> Dict[str, object]:
        """Each fact's facts kept with ``path``'s entry (after a :meth:`lookup` hit)."""
        entry = self._entry(path)
        return dict(entry[5]) if entry is not None else {}

    def settle(self, fact: ProjectFact, path: str, digest: str, found: Optional[dict]) -> None:
        """Keep ``found``, computed from bytes of content hash ``digest``, in
        place of the :data:`LATER` of ``fact`` in ``path``'s entry (made from
        the same bytes)."""
        entry = self._entry(path)
        if not (entry is not None and entry[4] == digest and entry[5].get(fact.name) == LATER):
            return
        if found is None or (fact.valid(found) and json.loads(json.dumps(found)) == found):
            entry[5][fact.name] = found
            self.dirty = True

    def store(self, path: str, st, functions: Optional[Dict[str, FunctionSummary]], digest: Optional[str] = None, facts: Optional[Dict[str, object]] = None) -> None:
        """Keep ``functions`` and ``facts`` (each fact's, by name) for
        ``path`` (``digest``: the content hash of the bytes they were
        computed from; without it the file is hashed now)."""
        if functions is None or st is None:
            return
        if digest is None:
            data = _read_bytes(path)
            if data is None:
                return
            digest = content_hash(data)
        key = self._key(path)
        encoded = {name: _summary_to_json(s) for name, s in functions.items()}
        kept = {name: (facts or {}).get(name) for name in self.facts}
        try:  # store only what reads back identically
            ok = all(_summary_from_json(encoded[name]) == s for name, s in functions.items())
            ok = ok and all(self._valid(name, found) for name, found in kept.items()) and json.loads(json.dumps(kept)) == kept
        except (KeyError, TypeError, ValueError):
            ok = False
        if ok:
            self.entries[key] = [st.st_size, st.st_mtime_ns, time.time_ns(), encoded, digest, kept]
            self.dirty = True

    def derived(self, fact: ProjectFact, path: str) -> Optional[dict]:
        """``fact.read(path)``, kept beside the file's other facts under the
        key ``<fact name>:<path>`` as [size, mtime_ns, stored_ns, content
        hash, facts]: a file a fact's proof reaches is parsed again only
        when it changed (size + mtime, else its hash, as :meth:`lookup`)."""
        key = f"{fact.name}:" + self._key(path)
        try:
            st = os.stat(path)
        except OSError:
            return fact.read(path)
        entry = self.entries.get(key)
        data = None
        if isinstance(entry, list) and len(entry) == 5 and entry[0] == st.st_size and isinstance(entry[3], str) and (entry[4] is None or isinstance(entry[4], dict)):
            if entry[1] == st.st_mtime_ns and st.st_mtime_ns + self.racy_ns < entry[2]:
                return entry[4]
            data = _read_bytes(path)
            if data is not None and content_hash(data) == entry[3]:
                return entry[4]
        if data is None:
            data = _read_bytes(path)
        if data is None:
            return None
        found = fact.read(path, data)
        try:  # keep only what reads back identically
            ok = found is None or json.loads(json.dumps(found)) == found
        except (TypeError, ValueError):
            ok = False
        if ok:
            self.entries[key] = [len(data), st.st_mtime_ns, time.time_ns(), content_hash(data), found]
            self.dirty = True
        return found

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            os.makedirs(os.path.dirname(self.file), exist_ok=True)
        except OSError:
            return  # a cache that cannot be written is only slower
        write_json(self.file, self.entries)


#: below this many files to parse, a pool costs more than it saves
POOL_MIN_PARSE = 16


def _map_files(fn, paths: List[str], jobs: int) -> list:
    """``fn`` of each path, in order, in a process pool when ``jobs > 1`` and
    there are enough files."""
    if jobs > 1 and len(paths) >= POOL_MIN_PARSE:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        workers = min(jobs, len(paths))
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            return list(pool.map(fn, paths, chunksize=max(1, len(paths) // (workers * 4))))
    return [fn(path) for path in paths]


def build_project_index(
    files: Sequence[str], settings, facts: Sequence[ProjectFact] = (), cache_dir: Optional[str] = None, cache_write: bool = True, jobs: int = 1
) -> ProjectIndex:
    """One cheap pass over ``files``; unreadable or unparsable files are skipped
    here (the engine reports them).  ``facts``: the rules' declared
    :class:`ProjectFact` s (:data:`codemods.transforms.PROJECT_FACTS`).  With
    ``cache_dir``, per-file facts are reused for files whose size and mtime
    did not change.  The files to parse are parsed in a process pool when
    ``jobs > 1``.  (A whole run builds the index as it goes instead:
    :func:`codemods.pipeline.runner.run`.)"""
    cache = FactsCache(cache_dir, facts) if cache_dir is not None else None
    found: Dict[str, Optional[Dict[str, FunctionSummary]]] = {}
    gathered: Dict[str, Dict[str, Optional[object]]] = {fact.name: {} for fact in facts}
    misses: List[str] = []
    stats: Dict[str, Optional[os.stat_result]] = {}
    for path in files:
        functions, st = cache.lookup(path) if cache is not None else (None, None)
        found[path] = functions
        stats[path] = st
        if functions is not None and cache is not None:
            for name, facts_of_file in cache.facts_of(path).items():
                gathered[name][path] = facts_of_file  # type: ignore[assignment]
        if functions is None and (cache is None or st is not None):
            misses.append(path)
    job = functools.partial(_file_functions, facts=tuple(facts))
    for path, (functions, file_facts) in zip(misses, _map_files(job, misses, jobs)):
        found[path] = functions
        for name, facts_of_file in file_facts.items():
            gathered[name][path] = facts_of_file  # type: ignore[assignment]
        if cache is not None:
            cache.store(path, stats[path], functions, facts=file_facts)
    for fact in facts:
        settle_later(fact, gathered[fact.name], jobs, cache)
    if cache is not None and cache_write:
        cache.save()
    return ProjectIndex.from_functions(files, found, [(fact, gathered[fact.name]) for fact in facts], cache.derived if cache is not None else None)
