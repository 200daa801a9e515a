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
What the index holds and what one file gives it are decided here; running
that over a run's files, keeping it in the cache folder and settling the
facts that wait (:data:`LATER`) is the pipeline's
(:mod:`codemods.pipeline.index`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .floats import FunctionSummary, summarize_function

ModuleKey = Tuple[str, str]  # (root folder, dotted module name)


def module_token(name: str, key: ModuleKey) -> Tuple[bytes, bytes]:
    """(a function's name, the last part of its module's name), as bytes: what
    a file that may call it must mention (:func:`codemods.analysis.mentions.mentions_any`)."""
    return name.encode(), key[1].rpartition(".")[2].encode()


@dataclass
class ProjectIndex:
    #: (function name, last part of its module's name) of every compiled
    #: function, sorted, as bytes: a file of the run that contains no name
    #: together with its module's can never resolve one (see
    #: :func:`codemods.analysis.mentions.mentions_any`)
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
        """:attr:`names` of the modules ``keys`` only: their compiled
        functions and their entries in the rules' tables (a training loop
        that steps an optimizer it is given, compiled)."""
        names = {module_token(name, key) for key in keys for name in self.compiled.get(key, ())}
        names |= {module_token(name, key) for table in self.tables.values() for key in keys for name in table.get(key, ())}
        return tuple(sorted(names))

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
        from .mentions import mentions_any

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
    :func:`codemods.analysis.mentions.mentions_compile`) and ``later`` does
    not take them (a fact's :attr:`ProjectFact.later`), or they do not parse."""
    from .mentions import mentions_compile
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
