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
import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..pipeline._jsonfile import write_json
from .floats import FunctionSummary, ParamUse, summarize_function, torch_aliases

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
    #: (root, module) -> {callable: callers} for the module's lr writers whose
    #: writes become ``.fill_`` (FR004): every optimizer passed to them, in
    #: every file of the run, gets a tensor lr from plain --fix; callers are
    #: (module, line of the optimizer) pairs (:func:`prove_lr_writers`)
    lr_proven: Dict[ModuleKey, Dict[str, Tuple[Tuple[str, int], ...]]] = field(default_factory=dict)
    #: (root, module) -> the names of all its lr writers, proven or not: an
    #: optimizer passed to one has an lr that changes (FR004's evidence)
    lr_writers: Dict[ModuleKey, Dict[str, bool]] = field(default_factory=dict)
    #: files the index concerns whatever names they mention (the modules of
    #: proven lr writers, the files of FR005's chains)
    always: Tuple[str, ...] = ()
    #: FR005: path of a file compiling an imported class one by one ->
    #: {qualified class name as seen there: (class, method, attribute, line,
    #: module, proven) of the first int attribute change its forward reaches;
    #: proven False: the chain goes through a submodule known only from a
    #: parameter's annotation}
    #: (:func:`prove_int_chains`)
    int_chains: Dict[str, Dict[str, Tuple[str, str, str, int, str, bool]]] = field(default_factory=dict)
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
            for table in (self.compiled, self.lr_proven, self.lr_writers):
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
        lr: Optional[Dict[str, Optional[dict]]] = None,
        ints: Optional[Dict[str, Optional[dict]]] = None,
        class_facts_of: Optional[Callable[[str], Optional[dict]]] = None,
    ) -> "ProjectIndex":
        """The index of ``files`` given each file's compiled functions
        (:func:`compiled_functions`; None or missing: unreadable, skipped),
        FR004's facts (:func:`lr_facts`) and FR005's (:func:`int_facts`);
        ``class_facts_of``: FR005's class facts of a file on a chain (default
        :func:`class_facts_of_file`; the runner's reads the facts cache)."""
        index = cls()
        folders: Dict[object, object] = {}
        for path in files:
            key = index.modules[path] = module_key(path, folders)
            found = functions.get(path)
            if found:
                index.compiled[key] = found
        if lr:
            prove_lr_writers(index, files, lr)
        if ints:
            prove_int_chains(index, ints, class_facts_of or class_facts_of_file)
        names = {module_token(name, key) for key, fns in index.compiled.items() for name in fns}
        names |= {module_token(name, key) for key, fns in index.lr_proven.items() for name in fns}
        names |= {module_token(name, key) for key, fns in index.lr_writers.items() for name in fns}
        index.names = tuple(sorted(names))
        return index

    def lr_proven_in(self, path: str) -> Dict[str, Tuple[Tuple[str, int], ...]]:
        """The proven lr writers defined in ``path`` -> their callers."""
        key = self.modules.get(path)
        return self.lr_proven.get(key, {}) if key is not None else {}

    def resolve_lr_writer(self, path: str, qualified: str) -> Optional[Tuple[str, str]]:
        """(callable, module) of the proven lr writer ``qualified`` names in ``path``."""
        hit = _resolve_in(self.modules, self.lr_proven, path, qualified)
        return (qualified.rpartition(".")[2], hit[0][1]) if hit is not None else None

    def writes_lr(self, path: str, qualified: str) -> Optional[Tuple[str, str]]:
        """(callable, module) of the lr writer of another module, proven or
        not, that ``qualified`` names in ``path``: what it is passed has an
        lr that changes."""
        hit = _resolve_in(self.modules, self.lr_writers, path, qualified)
        return (qualified.rpartition(".")[2], hit[0][1]) if hit is not None else None

    def resolve(self, path: str, qualified: str) -> Optional[Tuple[ModuleKey, FunctionSummary]]:
        """The compiled function that ``qualified`` (a libcst qualified name as
        seen in ``path``: ``kernels.f``, ``.kernels.f``, ``pkg.kernels.f``) names."""
        return _resolve_in(self.modules, self.compiled, path, qualified)


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


def prove_lr_writers(index: ProjectIndex, files: Sequence[str], lr: Dict[str, Optional[dict]]) -> None:
    """Fill ``index.lr_proven``: an lr writer of one module (a function or
    class whose parameter's ``param_groups`` get ``["lr"] = v``, FR004's
    ``_writers``) is proven when its writes are clean (nothing else of the
    optimizer is used there, no lr read back), it is called from other
    modules only with optimizers that plain --fix makes tensors (each call
    passes it where the writer expects it, leaves the key's default "lr",
    and is every use of the name in its file), every other optimizer those
    calls pass is handed only to proven writers, and no other file of the
    run mentions the writer (a call the index has not seen)."""
    writers: Dict[ModuleKey, Dict[str, dict]] = {}
    for path, facts in lr.items():
        if facts and facts.get("writers") and path in index.modules:
            writers[index.modules[path]] = facts["writers"]
    if not writers:
        return
    index.lr_writers = {key: dict.fromkeys(sorted(found), True) for key, found in sorted(writers.items())}
    callers: Dict[Tuple[ModuleKey, str], List[Tuple[str, dict]]] = {}
    bad: set = set()
    for path, facts in sorted(lr.items()):
        passes = (facts or {}).get("passes") or {}
        complete = passes.get("complete", {})
        for opt in passes.get("optimizers", ()):
            for q, slot, nargs, kws, star, _line in opt["calls"]:
                hit = _resolve_in(index.modules, writers, path, q)
                if hit is None:
                    continue
                (key, entry), name = hit, q.rpartition(".")[2]
                callers.setdefault((key, name), []).append((path, opt))
                passed_key = any(k in kws or 0 <= at < nargs for k, at in entry["keys"])
                if not (entry["clean"] and opt["fixed"] and complete.get(q) and not star and not passed_key and slot in (entry["param"], entry["index"])):
                    bad.add((key, name))
    proven = {w for w in callers if w not in bad}
    if proven:  # a file that mentions a writer and was not seen calling it
        tokens = {w: [module_token(w[1], w[0])] for w in proven}
        seen = {w: {p for p, _ in callers[w]} for w in proven}
        from ..pipeline.prefilter import mentions_any

        for path in files:
            todo = [w for w in proven if path not in seen[w] and index.path_of(w[0]) != path]
            if not todo:
                continue
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                data = None
            for w in todo:
                if data is None or mentions_any(data, tokens[w]):
                    proven.discard(w)
    changed = True
    while changed:  # every writer an optimizer is passed to must be proven
        changed = False
        for w in sorted(proven):
            for path, opt in callers[w]:
                hits = [_resolve_in(index.modules, writers, path, call[0]) for call in opt["calls"]]
                if any(h is None or (h[0], call[0].rpartition(".")[2]) not in proven for h, call in zip(hits, opt["calls"])):
                    proven.discard(w)
                    changed = True
                    break
    for key, name in sorted(proven):
        index.lr_proven.setdefault(key, {})[name] = tuple((index.modules[p][1], opt["line"]) for p, opt in callers[(key, name)])
    index.always = tuple(sorted(p for p in map(index.path_of, index.lr_proven) if p is not None))


def prove_int_chains(index: ProjectIndex, ints: Dict[str, Optional[dict]], class_facts_of: Optional[Callable[[str], Optional[dict]]] = None) -> None:
    """Fill ``index.int_chains`` (FR005 across modules): for each imported
    class a file compiles one by one (:func:`int_facts`), follow the calls of
    its ``forward`` through the classes of the run (``self.method()``,
    ``self.sub.method()`` and ``self.sub(...)`` where ``self.sub`` is built
    from a class the analysis can see, imports and re-exports followed, at
    most ``MAX_PROJECT_HOPS`` submodule hops) to the first change of an int
    attribute.  Only the files on a chain are read, here, once per run
    (:func:`codemods.analysis.modules.class_facts`)."""
    from .modules import MAX_PROJECT_HOPS

    wanted = {path: facts["compiled"] for path, facts in sorted(ints.items()) if facts and facts.get("compiled") and path in index.modules}
    if not wanted:
        return
    homes = {key: path for path, key in index.modules.items()}
    by_module: Dict[str, List[ModuleKey]] = {}
    for key in sorted(homes):
        by_module.setdefault(key[1], []).append(key)
    loaded: Dict[str, Optional[dict]] = {}

    read = class_facts_of or class_facts_of_file

    def facts_of(path: str) -> Optional[dict]:
        if path not in loaded:
            loaded[path] = read(path)
        return loaded[path]

    def find_class(path: str, ref: str, depth: int = 0) -> Optional[Tuple[str, str, dict]]:
        """(file, class name, its facts) of the class ``ref`` names in ``path``."""
        if depth > 4:
            return None
        if "." not in ref:  # a class of the same module
            facts = facts_of(path)
            found = facts["classes"].get(ref) if facts else None
            return (path, ref, found) if found is not None else None
        absolute = _absolute(index.modules, path, ref)
        if absolute is None:
            return None
        roots, module, name = absolute
        keys = [(r, module) for r in roots if (r, module) in homes]
        if not keys:
            keys = by_module.get(module, [])
            if len(keys) != 1:
                return None  # not in the run, or ambiguous
        target = homes[keys[0]]
        facts = facts_of(target)
        if not facts:
            return None
        if name in facts["classes"]:
            return target, name, facts["classes"][name]
        again = facts["reexports"].get(name)
        return find_class(target, again, depth + 1) if again is not None and again != ref else None

    for path, compiled in wanted.items():
        for q, _line in compiled:
            start = find_class(path, q)
            if start is None or "forward" not in start[2]["methods"]:
                continue
            # a chain through a submodule known only from a parameter's
            # annotation is not proven (a subclass may be passed): seen chains
            # are searched first, so a proven one wins
            order = [(start, "forward", 0, True)]
            seen = {(start[0], start[1], "forward")}
            hit = None
            i = 0
            while i < len(order):
                (where, cls_name, cls_facts), method, hops, proven = order[i]
                i += 1
                entry = cls_facts["methods"][method]
                if entry["muts"]:
                    attr, line = entry["muts"][0]
                    if hit is None or (proven and not hit[5]):
                        hit = (cls_name, method, attr, line, index.modules[where][1], proven)
                    if proven:
                        break
                for sub, called in entry["calls"]:
                    target: Optional[Tuple[str, str, dict]] = (where, cls_name, cls_facts)
                    next_hops, next_proven = hops, proven
                    if sub is not None:
                        if hops >= MAX_PROJECT_HOPS:
                            continue
                        target = find_class(where, cls_facts["subs"][sub])
                        next_hops = hops + 1
                        next_proven = proven and sub not in cls_facts.get("hinted", ())
                    if target is None or called not in target[2]["methods"] or (target[0], target[1], called) in seen:
                        continue
                    seen.add((target[0], target[1], called))
                    order.append((target, called, next_hops, next_proven))
            if hit is not None:
                index.int_chains.setdefault(path, {})[q] = hit
    if index.int_chains:
        index.always = tuple(sorted(set(index.always) | set(index.int_chains)))


def _read_bytes(path: str) -> Optional[bytes]:
    """The bytes of ``path``, None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def class_facts_of_file(path: str, data: Optional[bytes] = None) -> Optional[dict]:
    """FR005's class facts of one file (None: unreadable, unparsable, no
    class or import); ``data``: its bytes when already read."""
    from .source import Source, decode, parse
    from .modules import class_facts

    if data is None:
        data = _read_bytes(path)
    if data is None:
        return None
    if b"class" not in data and b"import" not in data:
        return None
    try:
        text, encoding = decode(data)
        tree = parse(text, data)
        return class_facts(Source(path, path, data, tree, text, encoding))
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError, LookupError):
        return None


def int_facts(source) -> Optional[dict]:
    """FR005's per-file facts for the index (JSON-ready; None: nothing): the
    imported classes the file compiles one by one."""
    from .modules import index_facts

    if b"isinstance" not in source.data:
        return None
    try:
        return index_facts(source)
    except RecursionError:
        return None


def lr_facts(source) -> Optional[dict]:
    """FR004's per-file facts for the index (JSON-ready; None: nothing),
    from the file's parsed :class:`~codemods.analysis.source.Source`."""
    from ..transforms.optimizer_scalars import index_facts

    try:
        return index_facts(source)
    except RecursionError:
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
    aliases = torch_aliases(source.tree)
    return {name: summarize_function(fn, aliases, model.functions) for name, fn in found.items()}


#: FR004's facts (:func:`lr_facts`) of a file that can hold no compile site
#: but writes ``param_groups`` (:func:`lr_later`), not computed yet: only
#: its lr writers could matter, and only to a file that passes an optimizer
#: to them (:func:`settle_lr_facts` computes the few that do)
LR_LATER = "later"


def lr_later(data: bytes) -> bool:
    """Is this a file whose FR004 facts wait (:data:`LR_LATER`): the bytes
    rule a compile site out (:func:`codemods.pipeline.prefilter.mentions_compile`) but
    it writes ``param_groups`` (an lr writer, maybe)?"""
    from ..pipeline.prefilter import mentions_compile

    return b"param_groups" in data and not mentions_compile(data)


def parse_for_index(data: bytes, display_path: str = "<file>", writers: bool = True):
    """(the compiled functions, the parsed :class:`~codemods.analysis.source.Source`) of
    a file's bytes: ({}, None) when the bytes rule a compiled function out
    (``torch`` and a ``compile`` that can be a site:
    :func:`codemods.pipeline.prefilter.mentions_compile`) and, with ``writers``, an
    lr writer too (:func:`lr_later`), or they do not parse."""
    from ..pipeline.prefilter import mentions_compile
    from .source import Source, decode, parse

    compiled = mentions_compile(data)
    if not compiled and not (writers and b"param_groups" in data):  # FR004's lr writers: see lr_facts
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


def _file_functions(path: str) -> Tuple[Optional[Dict[str, FunctionSummary]], Optional[object], Optional[dict]]:
    """(the compiled functions of one file ({} for none or unparsable; None:
    unreadable), its FR004 facts (:func:`lr_facts`, or :data:`LR_LATER`),
    its FR005 facts (:func:`int_facts`))."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None, None, None
    functions, source = parse_for_index(data, path, False)
    if source is None:
        return functions, LR_LATER if lr_later(data) else None, None
    return functions, lr_facts(source), int_facts(source)


def _file_lr(path: str) -> Tuple[Optional[dict], Optional[str]]:
    """(FR004's facts of one file, the content hash of the bytes they come
    from (None: unreadable))."""
    from ..pipeline.cache import content_hash

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None, None
    _, source = parse_for_index(data, path)
    return (lr_facts(source) if source is not None else None), content_hash(data)


def settle_lr_facts(lr: Dict[str, Optional[object]], jobs: int = 1, facts: Optional["FactsCache"] = None) -> None:
    """Replace each :data:`LR_LATER` of ``lr`` (path -> FR004's facts) in
    place: by the file's facts when some file of the run passes an optimizer
    to a callable of the file's module (FR004's ``passes``: the only way its
    lr writers can matter, :func:`prove_lr_writers`), else by None.  The
    files to parse are parsed in a process pool when ``jobs > 1``; ``facts``
    keeps what they give."""
    later = [path for path, found in lr.items() if found == LR_LATER]
    if not later:
        return
    folders: Dict[object, object] = {}
    callers: Dict[str, ModuleKey] = {}
    wanted = set()  # the modules a call of a passed optimizer can resolve to
    for path, found in lr.items():
        optimizers = (found.get("passes") or {}).get("optimizers") if isinstance(found, dict) else None
        if optimizers:
            callers[path] = module_key(path, folders)
            for opt in optimizers:
                for call in opt["calls"]:
                    target = _absolute(callers, path, call[0])
                    if target is not None:
                        wanted.add(target[1])
    todo = [path for path in later if module_key(path, folders)[1] in wanted]
    for path in later:
        lr[path] = None
    for path, (found, digest) in zip(todo, _map_files(_file_lr, todo, jobs)):
        lr[path] = found
        if facts is not None and digest is not None:
            facts.settle_lr(path, digest, found)


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


def _lr_shape_ok(lr) -> bool:
    """Has ``lr`` (FR004's facts of one file, maybe read from the cache
    folder) the shape :func:`prove_lr_writers` reads?  A damaged entry is a
    miss, never a crash."""
    try:
        if not isinstance(lr, dict) or not isinstance(lr.get("writers", {}), dict) or not isinstance(lr.get("passes", {}), dict):
            return False
        for entry in lr.get("writers", {}).values():
            if not (isinstance(entry["param"], str) and isinstance(entry["index"], int) and isinstance(entry["clean"], bool)):
                return False
            if not all(isinstance(k, str) and isinstance(i, int) for k, i in entry["keys"]) or not all(isinstance(n, int) for n in entry["lines"]):
                return False
        passes = lr.get("passes", {})
        if not isinstance(passes.get("complete", {}), dict):
            return False
        for opt in passes.get("optimizers", ()):
            if not (isinstance(opt["line"], int) and isinstance(opt["fixed"], bool)):
                return False
            for q, slot, nargs, kws, star, line in opt["calls"]:
                if not (isinstance(q, str) and isinstance(slot, (int, str, type(None))) and isinstance(nargs, int) and isinstance(kws, list) and isinstance(star, bool)):
                    return False
        return True
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _ints_shape_ok(ints) -> bool:
    """Has ``ints`` (FR005's facts of one file) the shape :func:`prove_int_chains` reads?"""
    try:
        return isinstance(ints, dict) and all(isinstance(q, str) and isinstance(line, int) for q, line in ints["compiled"])
    except (KeyError, TypeError, ValueError):
        return False


class FactsCache:
    """Per-file index facts kept in the cache folder, keyed by (path, size,
    mtime_ns) and the tool's source fingerprint, so a warm run only stats
    files.  JSON, not pickle: a cache folder must never run code."""

    def __init__(self, folder: str) -> None:
        from ..pipeline.cache import FORMAT, RACY_NS, _has_symlink, _tool_fingerprint

        self.racy_ns = RACY_NS
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

    def lookup(self, path: str):
        """(cached functions or None, stat or None): the stat is None when the
        file cannot be stat-ed (skipped), the functions None on a miss."""
        try:
            st = os.stat(path)
        except OSError:
            return None, None
        entry = self.entries.get(self._key(path))
        if not isinstance(entry, list) or len(entry) != 7 or not isinstance(entry[3], dict) or entry[0] != st.st_size:
            return None, st  # missing, or of the wrong shape: a miss, never a crash
        # size + mtime decide, unless the file changed close to when it was
        # cached ("racily clean") or its mtime changed: then the content hash
        if not (entry[1] == st.st_mtime_ns and st.st_mtime_ns + self.racy_ns < entry[2]):
            from ..pipeline.cache import content_hash

            data = _read_bytes(path)
            if data is None or content_hash(data) != entry[4]:
                return None, st
        if (entry[5] is not None and entry[5] != LR_LATER and not _lr_shape_ok(entry[5])) or (entry[6] is not None and not _ints_shape_ok(entry[6])):
            return None, st
        try:
            return {name: _summary_from_json(d) for name, d in entry[3].items()}, st
        except (KeyError, TypeError, ValueError, AttributeError):
            return None, st  # a damaged entry: recompute

    def lr_facts(self, path: str) -> Optional[object]:
        """The FR004 facts kept with ``path``'s entry (after a :meth:`lookup`
        hit), or :data:`LR_LATER`."""
        entry = self.entries.get(self._key(path))
        return entry[5] if isinstance(entry, list) and len(entry) == 7 and (isinstance(entry[5], dict) or entry[5] == LR_LATER) else None

    def settle_lr(self, path: str, digest: str, lr: Optional[dict]) -> None:
        """Keep ``lr``, computed from bytes of content hash ``digest``, in
        place of the :data:`LR_LATER` of ``path``'s entry (made from the same bytes)."""
        entry = self.entries.get(self._key(path))
        if not (isinstance(entry, list) and len(entry) == 7 and entry[4] == digest and entry[5] == LR_LATER):
            return
        if lr is None or (_lr_shape_ok(lr) and json.loads(json.dumps(lr)) == lr):
            entry[5] = lr
            self.dirty = True

    def int_facts(self, path: str) -> Optional[dict]:
        """The FR005 facts kept with ``path``'s entry (after a :meth:`lookup` hit)."""
        entry = self.entries.get(self._key(path))
        return entry[6] if isinstance(entry, list) and len(entry) == 7 and isinstance(entry[6], dict) else None

    def store(
        self, path: str, st, functions: Optional[Dict[str, FunctionSummary]], digest: Optional[str] = None, lr: Optional[object] = None, ints: Optional[dict] = None
    ) -> None:
        """Keep ``functions`` for ``path`` (``digest``: the content hash of the
        bytes they were computed from; without it the file is hashed now)."""
        if functions is None or st is None:
            return
        if digest is None:
            from ..pipeline.cache import content_hash

            try:
                with open(path, "rb") as fh:
                    digest = content_hash(fh.read())
            except OSError:
                return
        key = self._key(path)
        encoded = {name: _summary_to_json(s) for name, s in functions.items()}
        try:  # store only what reads back identically
            ok = all(_summary_from_json(encoded[name]) == s for name, s in functions.items())
        except (KeyError, TypeError, ValueError):
            ok = False
        if ok and lr is not None and lr != LR_LATER:
            ok = _lr_shape_ok(lr) and json.loads(json.dumps(lr)) == lr
        if ok and ints is not None:
            ok = _ints_shape_ok(ints) and json.loads(json.dumps(ints)) == ints
        if ok:
            self.entries[key] = [st.st_size, st.st_mtime_ns, time.time_ns(), encoded, digest, lr, ints]
            self.dirty = True

    def class_facts(self, path: str) -> Optional[dict]:
        """:func:`class_facts_of_file`, kept beside the file's other facts
        under the key ``classes:<path>`` as [size, mtime_ns, stored_ns,
        content hash, facts]: a file on an FR005 chain is parsed again only
        when it changed (size + mtime, else its hash, as :meth:`lookup`)."""
        from ..pipeline.cache import content_hash

        key = "classes:" + self._key(path)
        try:
            st = os.stat(path)
        except OSError:
            return class_facts_of_file(path)
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
        facts = class_facts_of_file(path, data)
        try:  # keep only what reads back identically
            ok = facts is None or json.loads(json.dumps(facts)) == facts
        except (TypeError, ValueError):
            ok = False
        if ok:
            self.entries[key] = [len(data), st.st_mtime_ns, time.time_ns(), content_hash(data), facts]
            self.dirty = True
        return facts

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


def build_project_index(files: Sequence[str], settings, cache_dir: Optional[str] = None, cache_write: bool = True, jobs: int = 1) -> ProjectIndex:
    """One cheap pass over ``files``; unreadable or unparsable files are skipped
    here (the engine reports them).  With ``cache_dir``, per-file facts are
    reused for files whose size and mtime did not change.  The files to parse
    are parsed in a process pool when ``jobs > 1``.  (A whole run builds the
    index as it goes instead: :func:`codemods.pipeline.runner.run`.)"""
    facts = FactsCache(cache_dir) if cache_dir is not None else None
    found: Dict[str, Optional[Dict[str, FunctionSummary]]] = {}
    lr: Dict[str, Optional[object]] = {}
    ints: Dict[str, Optional[dict]] = {}
    misses: List[str] = []
    stats: Dict[str, Optional[os.stat_result]] = {}
    for path in files:
        functions, st = facts.lookup(path) if facts is not None else (None, None)
        found[path] = functions
        stats[path] = st
        if functions is not None and facts is not None:
            lr[path] = facts.lr_facts(path)
            ints[path] = facts.int_facts(path)
        if functions is None and (facts is None or st is not None):
            misses.append(path)
    for path, (functions, file_lr, file_ints) in zip(misses, _map_files(_file_functions, misses, jobs)):
        found[path] = functions
        lr[path] = file_lr
        ints[path] = file_ints
        if facts is not None:
            facts.store(path, stats[path], functions, lr=file_lr, ints=file_ints)
    settle_lr_facts(lr, jobs, facts)
    if facts is not None and cache_write:
        facts.save()
    return ProjectIndex.from_functions(files, found, lr, ints)
