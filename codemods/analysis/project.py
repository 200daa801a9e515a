"""Project-wide facts gathered in one cheap pass before files are processed.

Passes that need to know about other modules (e.g. a function compiled in
``kernels.py`` and called in ``train.py``) read them from the
:class:`ProjectIndex` in ``ctx.project``.  The index must stay picklable (it is
sent to worker processes) and cheap to build.

Per file: skip those without ``b"compile"`` and ``b"torch"``; parse the
rest with the stdlib :mod:`ast` (much faster than libcst) and collect the
module-level functions compiled by a decorator (``@torch.compile``,
``@torch.compile(...)``) or by ``name = torch.compile(fn, ...)`` at module
level, each with a per-parameter summary (:func:`codemods.analysis.floats.summarize_function`).
Module names come from the file's path: the chain of folders holding an
``__init__.py`` plus the file's stem, rooted at the first folder without one.
A whole run (:func:`codemods.pipeline.runner.run`) does this inside each worker's
first look at a file, so the same ``ast`` parse and compile-site model serve
the rules too; :func:`build_project_index`
does it alone, for callers that need only the index.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..pipeline._jsonfile import write_json
from .floats import FunctionSummary, ParamUse, summarize_function

ModuleKey = Tuple[str, str]  # (root folder, dotted module name)


def module_token(name: str, key: ModuleKey) -> Tuple[bytes, bytes]:
    """(a function's name, the last part of its module's name), as bytes: what
    a file that may call it must mention (:func:`codemods.pipeline.prefilter.mentions_any`)."""
    return name.encode(), key[1].rpartition(".")[2].encode()


@dataclass
class ProjectIndex:
    #: (function name, last part of its module's name) of every compiled
    #: function, sorted, as bytes: a file of the run that contains no name
    #: together with its module's can never resolve one (see
    #: :func:`codemods.pipeline.prefilter.mentions_any`)
    names: Tuple[Tuple[bytes, bytes], ...] = ()
    #: path -> (root, dotted module name) for every file of the run
    modules: Dict[str, ModuleKey] = field(default_factory=dict)
    #: (root, module) -> {function name: summary} for module-level compiled functions
    compiled: Dict[ModuleKey, Dict[str, FunctionSummary]] = field(default_factory=dict)
    #: what the rules' declared :class:`ProjectFact` s proved over the run
    #: (each fact's ``prove`` fills its own): table name -> (root, module) ->
    #: {callable name: entry}; every name is a token of the prefilter
    #: (:meth:`prefilter_tokens`), every table is resolved by :meth:`resolve_in`
    tables: Dict[str, Dict[ModuleKey, dict]] = field(default_factory=dict)
    #: table name -> path of a file of the run -> entry: facts about one file
    per_file: Dict[str, Dict[str, dict]] = field(default_factory=dict)
    #: files the index concerns whatever names they mention (a fact's
    #: ``prove`` adds them: the modules of FR004's proven lr writers, the
    #: files of FR005's chains)
    always: Tuple[str, ...] = ()
    #: (how many modules it was built from, (root, module) -> path): built on
    #: first use (:meth:`path_of`)
    _homes: Tuple[int, Dict[ModuleKey, str]] = field(default=(-1, {}), repr=False, compare=False)
    #: (the :attr:`names` it was made for, every entry of the index as
    #: (token, module key, whether its (module, name) is unique in its table),
    #: the modules with entries, (roots, own key or None) -> the
    #: :meth:`prefilter_tokens` of a file there, and a file's folder -> that
    #: folder made absolute, each distinct tuple of tokens -> its one copy):
    #: built on first use
    _reach: tuple = field(default=((), (), frozenset(), {}, {}), repr=False, compare=False)

    def path_of(self, key: ModuleKey) -> Optional[str]:
        """The file of the run that is module ``key``."""
        if self._homes[0] != len(self.modules):
            self._homes = (len(self.modules), {k: path for path, k in self.modules.items()})
        return self._homes[1].get(key)

    def call_tokens(self, keys) -> Tuple[Tuple[bytes, bytes], ...]:
        """:attr:`names` of the compiled functions of the modules ``keys`` only."""
        return tuple(sorted(module_token(name, key) for key in keys for name in self.compiled.get(key, ())))

    def prefilter_tokens(self, path: str) -> Tuple[Tuple[bytes, bytes], ...]:
        """Byte strings one of which a file of the run must contain for the
        index to matter there (none for files outside the run): the tokens
        of the entries :func:`_resolve_in` can reach from ``path`` -- those
        of a module under one of its roots (its root, its script's folder),
        or unique in their table by (module, name) -- but never the file's
        own module's (the index never resolves a name to the module asking).
        A ``train_gpt`` defined in the folder of every record of a repo is
        then looked for only beside each one.  Files given the same tokens
        share one tuple (the cache key's memo is by identity)."""
        key = self.modules.get(path)
        if key is None:
            return ()
        if self._reach[0] is not self.names:
            entries = []
            for table in (self.compiled, *self.tables.values()):
                count: Dict[Tuple[str, str], int] = {}
                for module, found in table.items():
                    for name in found:
                        count[(module[1], name)] = count.get((module[1], name), 0) + 1
                for module, found in table.items():
                    for name in found:
                        entries.append((module_token(name, module), module, count[(module[1], name)] == 1))
            self._reach = (self.names, tuple(entries), frozenset(module for _, module, _ in entries), {}, {self.names: self.names})
        _, entries, owners, memo, copies = self._reach
        folder = os.path.dirname(path)
        absolute = memo.get(folder)  # the folder made absolute once (abspath asks the OS for the cwd)
        if absolute is None:
            absolute = memo[folder] = os.path.dirname(os.path.abspath(path))
        roots = (key[0], absolute)
        own = key if key in owners else None  # None: the one tuple of every module of these roots that defines none
        kept = memo.get((roots, own))
        if kept is None:
            reached = {token for token, module, unique in entries if module != key and (unique or module[0] in roots)}
            kept = tuple(sorted(reached))
            kept = memo[(roots, own)] = copies.setdefault(kept, kept)  # one object per content (the memo is by identity)
        return kept

    def concerns(self, path: str, data: bytes) -> bool:
        """Does the index matter for this file of the run (it may call a name
        of the index, or it holds a proven lr writer)?"""
        from ..pipeline.prefilter import mentions_any

        return path in self.always or mentions_any(data, self.prefilter_tokens(path))

    @classmethod
    def from_functions(
        cls,
        files: Sequence[str],
        functions: Dict[str, Optional[Dict[str, FunctionSummary]]],
        facts: Sequence[Tuple["ProjectFact", Dict[str, Optional[dict]]]] = (),
        reader: Optional[Callable[["ProjectFact", str], Optional[dict]]] = None,
    ) -> "ProjectIndex":
        """The index of ``files`` given each file's compiled functions
        (:func:`compiled_functions`; None or missing: unreadable, skipped)
        and, for each declared :class:`ProjectFact`, each file's facts
        (path -> what its ``gather`` gave); ``reader``: a fact's ``read`` of
        a file through the facts cache (default: the file itself)."""
        index = cls()
        folders: Dict[object, object] = {}
        for path in files:
            key = index.modules[path] = module_key(path, folders)
            found = functions.get(path)
            if found:
                index.compiled[key] = found
        for fact, found_facts in facts:
            if any(found_facts.values()):
                read = (lambda path, fact=fact: reader(fact, path)) if reader is not None else fact.read  # type: ignore[misc]
                fact.prove(index, files, found_facts, read)
        names = {module_token(name, key) for key, fns in index.compiled.items() for name in fns}
        for table in index.tables.values():
            names |= {module_token(name, key) for key, fns in table.items() for name in fns}
        index.names = tuple(sorted(names))
        return index

    def table(self, name: str) -> Dict[ModuleKey, dict]:
        """A table a :class:`ProjectFact` proved (empty when it proved none)."""
        return self.tables.get(name, {})

    def table_in(self, name: str, path: str) -> dict:
        """The entries of table ``name`` of the module that is ``path``."""
        key = self.modules.get(path)
        return self.tables.get(name, {}).get(key, {}) if key is not None else {}

    def of_file(self, name: str, path: str) -> dict:
        """The entry of per-file table ``name`` for ``path`` (empty: none)."""
        return self.per_file.get(name, {}).get(path, {})

    def resolve_in(self, name: str, path: str, qualified: str) -> Optional[Tuple[str, str]]:
        """(callable, module) of the entry of table ``name`` that ``qualified``
        (as seen in ``path``) names in another module of the run, or None."""
        hit = _resolve_in(self.modules, self.tables.get(name, {}), path, qualified)
        return (qualified.rpartition(".")[2], hit[0][1]) if hit is not None else None

    def lookup(self, name: str, path: str, qualified: str) -> Optional[Tuple[ModuleKey, dict]]:
        """(module, entry) of table ``name`` that ``qualified`` (as seen in
        ``path``) names in another module of the run, or None."""
        return _resolve_in(self.modules, self.tables.get(name, {}), path, qualified)

    def resolve(self, path: str, qualified: str) -> Optional[Tuple[ModuleKey, FunctionSummary]]:
        """The compiled function that ``qualified`` (a libcst qualified name as
        seen in ``path``: ``kernels.f``, ``.kernels.f``, ``pkg.kernels.f``) names."""
        return _resolve_in(self.modules, self.compiled, path, qualified)


def _reads_nothing(path: str, data: Optional[bytes] = None) -> Optional[dict]:
    """:attr:`ProjectFact.read` of a fact whose proof reads no other file."""
    return None


@dataclass(frozen=True)
class ProjectFact:
    """Facts of the other modules of the run that a rule needs, declared by
    the rule (:attr:`codemods.transforms.base.Rule.project_facts`): the run
    gathers them from each file's one parse and keeps them in the facts
    cache; the index proves them over the run.  A rule that needs a new
    cross-module fact declares one; nothing in the pipeline changes.

    ``gather``: a parsed file's facts (JSON-ready; None: nothing).
    ``valid``: has a fact read back from the cache folder the shape ``prove``
    reads (a damaged entry is a miss, never a crash)?  ``prove(index, files,
    found, read)``: fill the index's :attr:`ProjectIndex.tables`,
    :attr:`ProjectIndex.per_file` and :attr:`ProjectIndex.always` from
    ``found`` (path -> facts), reading other files' derived facts with
    ``read(path)`` (this fact's ``read``, through the facts cache)."""

    name: str
    gather: Callable[[object], Optional[dict]]
    valid: Callable[[object], bool]
    prove: Callable[["ProjectIndex", Sequence[str], Dict[str, Optional[dict]], Callable[[str], Optional[dict]]], None]
    #: a file's derived facts that ``prove`` reads for files it reaches
    #: (path, its bytes or None -> facts; kept in the facts cache by content)
    read: Callable[..., Optional[dict]] = _reads_nothing
    #: bytes of a file the first look does not parse (it can hold no compile
    #: site) whose facts may still matter: marked :data:`LATER`, and gathered
    #: only for the modules ``wanted`` names (:func:`settle_later`)
    later: Optional[Callable[[bytes], bool]] = None
    #: the dotted module names whose :data:`LATER` files must be gathered,
    #: given every file's facts and a path's module key
    wanted: Optional[Callable[[Dict[str, Optional[object]], Callable[[str], ModuleKey]], set]] = None


#: a file's facts for a :class:`ProjectFact` with ``later``, not gathered yet
LATER = "later"


def gather_facts(facts: Sequence["ProjectFact"], source, data: bytes, first: bool) -> Dict[str, object]:
    """Each fact's facts of one file: from its parse (``source``), or, not
    parsed, :data:`LATER` on a first look at bytes a fact's ``later`` takes."""
    out: Dict[str, object] = {}
    for fact in facts:
        if source is not None:
            try:
                found: object = fact.gather(source)
            except RecursionError:
                found = None
        else:
            found = LATER if first and fact.later is not None and fact.later(data) else None
        out[fact.name] = found
    return out


def _absolute(modules: Dict[str, ModuleKey], path: str, qualified: str) -> Optional[Tuple[List[str], str, str]]:
    """(roots to look in, dotted module, name) that ``qualified`` as seen in
    ``path`` names (relative imports made absolute), or None."""
    me = modules.get(path)
    if me is None or "." not in qualified:
        return None
    root, dotted = me
    if qualified.startswith("."):
        level = len(qualified) - len(qualified.lstrip("."))
        package = dotted.split(".")
        if not os.path.basename(path).startswith("__init__."):
            package = package[:-1]
        if level - 1 > len(package):
            return None
        base = package[: len(package) - (level - 1)]
        qualified = ".".join(base + [qualified.lstrip(".")])
        candidates_roots = [root]
    else:
        # a script's own folder is on sys.path when it runs; so is the root
        candidates_roots = [root, os.path.dirname(os.path.abspath(path))]
    module, _, name = qualified.rpartition(".")
    return candidates_roots, module, name


def _resolve_in(modules: Dict[str, ModuleKey], table: Dict[ModuleKey, dict], path: str, qualified: str):
    """(module key, entry) of what ``qualified`` as seen in ``path`` names in
    ``table`` ((root, module) -> {name: entry}), or None.  Never the module
    of ``path`` itself (a module's own functions are its own analysis's:
    the file is not looked at again for them, :meth:`ProjectIndex.prefilter_tokens`)."""
    found = _absolute(modules, path, qualified)
    if found is None:
        return None
    candidates_roots, module, name = found
    me = modules.get(path)
    for candidate_root in candidates_roots:
        functions = table.get((candidate_root, module))
        if functions and name in functions:
            return ((candidate_root, module), functions[name]) if (candidate_root, module) != me else None
    # unique match anywhere in the run
    matches = [(key, fns[name]) for key, fns in sorted(table.items()) if key[1] == module and name in fns]
    return matches[0] if len(matches) == 1 and matches[0][0] != me else None


def _read_bytes(path: str) -> Optional[bytes]:
    """The bytes of ``path``, None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def module_key(path: str, _cache: Optional[Dict[object, object]] = None) -> ModuleKey:
    """(root, dotted name) of a file: ``pkg/sub/mod.py`` with ``__init__.py`` in
    ``pkg`` and ``sub`` -> (parent of pkg, "pkg.sub.mod").  ``_cache``: what
    is known of folders, shared by the calls of one index (each folder is
    made absolute and climbed once)."""
    cache = _cache if _cache is not None else {}
    folder, filename = os.path.split(path)
    stem = filename[:-3] if filename.endswith(".py") else filename
    known = cache.get(("folder", folder))
    if known is None:
        known = cache[("folder", folder)] = _package_of(os.path.abspath(folder) if folder else os.getcwd(), cache)
    root, parts = known  # type: ignore[misc]
    if stem != "__init__":
        parts = parts + (stem,)
    return root, ".".join(parts)


def _package_of(folder: str, cache: Dict[object, object]) -> Tuple[str, Tuple[str, ...]]:
    """(root, package parts) of an absolute folder: the folders with an
    ``__init__.py`` above it, outermost first."""

    def is_package(here: str) -> bool:
        key = ("init", here)
        if key not in cache:
            cache[key] = os.path.isfile(os.path.join(here, "__init__.py"))
        return cache[key]  # type: ignore[return-value]

    parts: List[str] = []
    while is_package(folder) and os.path.dirname(folder) != folder:
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return folder, tuple(parts)


def compiled_functions(source) -> Dict[str, FunctionSummary]:
    """The file's module-level compiled functions (from the compile-site
    model: :meth:`CompileModel.module_compiled_functions`), each with the
    per-parameter summary FR003 reads."""
    from .compile_sites import model_of

    model = model_of(source)
    found = model.module_compiled_functions()
    if not found:
        return {}
    return {name: summarize_function(fn, model.torch_path, model.functions) for name, fn in found.items()}


def parse_for_index(data: bytes, display_path: str = "<file>", later: Optional[Callable[[bytes], bool]] = None):
    """(the compiled functions, the parsed :class:`~codemods.analysis.source.Source`) of
    a file's bytes: ({}, None) when the bytes rule a compiled function out
    (``torch`` and a ``compile`` that can be a site:
    :func:`codemods.pipeline.prefilter.mentions_compile`) and ``later`` does
    not take them (a fact's :attr:`ProjectFact.later`), or they do not parse."""
    from ..pipeline.prefilter import mentions_compile
    from .source import Source, decode, parse

    compiled = mentions_compile(data)
    if not compiled and not (later is not None and later(data)):
        return {}, None
    try:
        text, encoding = decode(data)
        tree = parse(text, data)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError, LookupError):
        return {}, None
    source = Source(display_path, display_path, data, tree, text, encoding)
    try:
        return (compiled_functions(source) if compiled else {}), source
    except RecursionError:  # too deeply nested: the engine reports it for the file
        return {}, None


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
    from ..pipeline.cache import content_hash

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
        from ..pipeline.cache import FORMAT, RACY_NS, _has_symlink, _tool_fingerprint

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
            from ..pipeline.cache import content_hash

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
            from ..pipeline.cache import content_hash

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
        from ..pipeline.cache import content_hash

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
