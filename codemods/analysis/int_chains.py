"""FR005's facts across modules: for an imported class a file compiles one
by one, the chain of calls from its ``forward`` to the first change of an
int attribute, through the classes of other modules of the run.

The rule declares them (:data:`codemods.transforms.unspec_int_attrs.INT_CHAINS`,
a :class:`~codemods.analysis.project.ProjectFact`); each file gives the
imported classes it compiles (:func:`gather`), the files on a chain give
their class facts (:func:`class_facts_of_file`, through the facts cache);
this module proves the chains.  Index table (per file): ``int_chains``.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .project import ModuleKey, ProjectIndex, _absolute, _read_bytes


def gather(source) -> Optional[dict]:
    """FR005's per-file facts for the index (JSON-ready; None: nothing): the
    imported classes the file compiles one by one."""
    from .modules import index_facts

    if b"isinstance" not in source.data:
        return None
    return index_facts(source)


def valid(ints) -> bool:
    """Has ``ints`` (FR005's facts of one file) the shape :func:`prove` reads?"""
    try:
        return isinstance(ints, dict) and all(isinstance(q, str) and isinstance(line, int) for q, line in ints["compiled"])
    except (KeyError, TypeError, ValueError):
        return False


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


def prove(index: ProjectIndex, files: Sequence[str], ints: Dict[str, Optional[dict]], read: Optional[Callable[[str], Optional[dict]]] = None) -> None:
    """Fill the index's per-file table ``int_chains`` (FR005 across modules): for each imported
    class a file compiles one by one (:func:`gather`), follow the calls of
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

    read = read or class_facts_of_file

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
                index.per_file.setdefault("int_chains", {}).setdefault(path, {})[q] = hit
    if index.per_file.get("int_chains"):
        index.always = tuple(sorted(set(index.always) | set(index.per_file["int_chains"])))
