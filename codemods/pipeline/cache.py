"""Per-file result cache under ``.fix_recompiles_cache/`` (self-ignoring: it
holds a ``.gitignore`` containing ``*``, like ruff's).

One JSON file per *run key*: the tool's version, a fingerprint of its own
source (so an edited pass never serves stale results), the effective settings
and the selected rules.  Inside, one entry per file (absolute path) holding
size + mtime, the content hash, the per-file settings, the project-index facts
that apply to the file, and the result (findings, error) -- never the fixed
text: an entry whose file has a fix is a miss, so ``--diff`` and ``--fix``
always derive what they show or write from the file as it is now, and an
edited cache entry cannot put code into a file.

The cache is untrusted input: an entry of the wrong shape is a miss, never a
crash, and no symbolic link inside the cache folder is followed (read or
written).

A hit needs the same size and mtime (no read) or, failing that, the same
content hash (one read).  Cross-module facts are part of every entry's key:
when the project index changes (a compiled function defined in another file
changed), entries made under the old facts are misses.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat as stat_mod
import time
from typing import Any, Dict, Optional, Tuple

from ._jsonfile import write_json
from ..findings import Finding, Fix, Safety

CACHE_DIR = ".fix_recompiles_cache"
FORMAT = 2
#: files modified less than this before being cached are re-hashed on lookup
RACY_NS = 2_000_000_000


def _tool_fingerprint() -> str:
    """Version + hash of this package's sources (edits to a rule change results)."""
    from .config import dist_version
    from .replay import tool_sources

    version = dist_version("fix-recompiles") or "0"  # not installed: the source hash still counts
    h = hashlib.blake2b(version.encode(), digest_size=16)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in tool_sources():
        with open(path, "rb") as fh:
            h.update(os.path.relpath(path, package).encode() + b"\0" + fh.read())
    return h.hexdigest()


def settings_key(settings) -> str:
    """Every field of the settings, by name: a result holds for the settings
    it was made with, and a field added later counts with no change here
    (``unproven`` was once left out: ``check --unproven`` after ``check``
    replayed the default findings)."""
    from dataclasses import fields

    def plain(value):
        return sorted(value) if isinstance(value, (set, frozenset)) else value

    return repr(tuple((f.name, plain(getattr(settings, f.name))) for f in fields(settings)))


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def project_key(project) -> str:
    """The part of the project index every file's result may depend on."""
    if project is None:
        return ""
    facts = getattr(project, "compiled", None)
    if isinstance(facts, dict):
        # by value (dataclass reprs): equal facts give equal keys whether they
        # were just computed or read back from the index cache (pickle bytes
        # differ with object sharing)
        try:
            tables = sorted((name, sorted((key, sorted(found.items())) for key, found in table.items())) for name, table in getattr(project, "tables", {}).items())
            per_file = sorted((name, sorted(table.items())) for name, table in getattr(project, "per_file", {}).items())
            blob = repr((sorted((key, sorted(fns.items())) for key, fns in facts.items()), tables, per_file)).encode()
            return hashlib.blake2b(blob, digest_size=16).hexdigest()
        except TypeError:
            pass
    try:
        blob = pickle.dumps(facts if facts is not None else project, protocol=4)
    except Exception:  # noqa: BLE001 - unpicklable index: never reuse results
        return os.urandom(8).hex()
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def file_facts_key(project, path: str, global_key: str) -> str:
    if project is None:
        return ""
    own = getattr(project, "cache_key", None)
    if callable(own):
        return str(own(path))
    tokens = project.prefilter_tokens(path) if hasattr(project, "prefilter_tokens") else ()
    module = getattr(project, "modules", {}).get(path)
    return _facts_digest(global_key, tokens, module)


_TOKENS_REPR: Dict[int, Tuple[object, str]] = {}


def _facts_digest(global_key: str, tokens, module) -> str:
    """The digest of (global key, the index's tokens, the file's module).
    The tokens are one tuple shared by every file of a run: its ``repr`` is
    made once (memo keyed by identity, checked, bounded)."""
    held = _TOKENS_REPR.get(id(tokens))
    if held is None or held[0] is not tokens:
        if len(_TOKENS_REPR) > 64:
            _TOKENS_REPR.clear()
        held = _TOKENS_REPR[id(tokens)] = (tokens, repr(tokens))
    blob = "\x00".join((global_key, held[1], repr(module)))
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


# -- (de)serialising results ---------------------------------------------------
def finding_to_dict(f: Finding) -> Dict[str, Any]:
    return {
        "code": f.code,
        "message": f.message,
        "path": f.path,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "rule_name": f.rule_name,
        "applied": f.applied,
        "fix": None if f.fix is None else {"safety": f.fix.safety.value if f.fix.safety else None, "needs_torch": f.fix.needs_torch, "title": f.fix.title, "rests_on": [list(r) for r in f.fix.rests_on]},
        **({"cell": f.cell} if f.cell is not None else {}),
    }


def finding_from_dict(d: Dict[str, Any]) -> Finding:
    fix = None
    if d["fix"] is not None:
        safety = Safety(d["fix"]["safety"]) if d["fix"]["safety"] else None
        # the edits are not kept: the fixed bytes are (FileResult.new)
        rests_on = tuple((path, code) for path, code in d["fix"]["rests_on"])
        fix = Fix(edits=(), safety=safety, needs_torch=d["fix"]["needs_torch"], title=d["fix"]["title"], rests_on=rests_on)  # type: ignore[arg-type]
    f = Finding(
        code=d["code"],
        message=d["message"],
        path=d["path"],
        line=d["line"],
        column=d["column"],
        end_line=d["end_line"],
        end_column=d["end_column"],
        fix=fix,
        rule_name=d["rule_name"],
    )
    f.applied = d["applied"]
    if _is_int(d.get("cell")):
        f.cell = d["cell"]
    return f


def result_to_dict(result) -> Dict[str, Any]:
    return {
        "findings": [finding_to_dict(f) for f in result.findings],
        # never the text: a result with a fix is re-derived (see the module doc)
        "new": None,
        "fixable": result.new is not None or result.pending,
        "error": result.error,
        "prefiltered": result.prefiltered,
        "generated": result.generated,
        "encoding": result.encoding,
    }


class Cache:
    def __init__(self, folder: str, settings, project=None) -> None:
        self.folder = folder
        self.key = hashlib.blake2b(
            repr((FORMAT, _tool_fingerprint(), settings_key(settings))).encode(), digest_size=16
        ).hexdigest()
        self.file = os.path.join(folder, f"v{FORMAT}", f"{self.key}.json")
        self.project = project
        self.global_key = project_key(project)
        self.entries: Dict[str, Dict[str, Any]] = {}
        self.dirty = False
        try:
            loaded = json.loads(_read_no_symlinks(self.folder, self.file))
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, ValueError, RecursionError):
            self.entries = {}

    def facts_key(self, path: str) -> str:
        return file_facts_key(self.project, path, self.global_key)

    def lookup(self, path: str, settings, stat: Optional[os.stat_result], data: Optional[bytes] = None) -> Optional[Dict[str, Any]]:
        """The cached result for ``path`` or None; may read the file to hash it
        (then ``entry['_data']`` holds the bytes read)."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or stat is None or not _valid_entry(entry):
            return None  # unknown, or of the wrong shape (damaged, edited): a miss
        if entry["result"].get("fixable", True) or entry["result"]["new"] is not None:
            return None  # a fix is always derived from the file as it is now
        if entry["settings"] != settings_key(settings) or entry["facts"] != self.facts_key(path):
            return None
        # size + mtime decide alone unless the file was modified close to the
        # moment it was cached ("racily clean", as git says): then hash it
        if entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns and stat.st_mtime_ns + RACY_NS < entry["stored_ns"]:
            return entry
        if entry["size"] != stat.st_size:
            return None
        if data is None:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                return None
        if content_hash(data) != entry["hash"]:
            return None
        entry["mtime_ns"] = stat.st_mtime_ns
        entry["stored_ns"] = time.time_ns()
        self.dirty = True
        return entry

    def store(self, path: str, settings, stat: Optional[os.stat_result], digest: Optional[str], result) -> None:
        """Keep ``result`` for ``path`` (``digest``: :func:`content_hash` of the
        bytes the result was computed from)."""
        if stat is None or digest is None or result.error is not None and "vanished" in result.error:
            return
        self.entries[os.path.abspath(path)] = {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "hash": digest,
            "stored_ns": time.time_ns(),
            "settings": settings_key(settings),
            "facts": self.facts_key(path),
            "result": result_to_dict(result),
        }
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            folder = os.path.dirname(self.file)
            os.makedirs(folder, exist_ok=True)
            if _has_symlink(self.folder, self.file):
                return  # never write through a link planted in the cache folder
            ignore = os.path.join(self.folder, ".gitignore")
            if not os.path.lexists(ignore):
                fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write("# Automatically created by fix-recompiles.\n*\n")
        except OSError:
            self.dirty = False
            return  # a cache that cannot be written is only slower
        write_json(self.file, self.entries)
        self.dirty = False


def _has_symlink(folder: str, path: str) -> bool:
    """True when ``path`` or a folder between ``folder`` (itself not tested:
    it may be a configured link) and it is a symbolic link."""
    folder = os.path.abspath(folder)
    cur = os.path.abspath(path)
    while cur != folder and os.path.dirname(cur) != cur:
        if os.path.islink(cur):
            return True
        cur = os.path.dirname(cur)
    return False


def unlink_planted_links(folder: str) -> int:
    """Remove symbolic links inside the cache ``folder`` where the cache keeps
    its files (the ``.gitignore``, the version folder, the JSON files in it):
    the links themselves, never what they point to.  Called before a run that
    may write the cache, so neither this module nor the index-facts cache
    (:class:`codemods.pipeline.index.FactsCache`) writes through one.  Returns how
    many were removed."""
    removed = 0
    version = os.path.join(folder, f"v{FORMAT}")
    candidates = [os.path.join(folder, ".gitignore"), version]
    if os.path.isdir(version) and not os.path.islink(version):
        try:
            candidates += [os.path.join(version, n) for n in os.listdir(version)]
        except OSError:
            pass
    for path in candidates:
        if os.path.islink(path):
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
    return removed


def _read_no_symlinks(folder: str, path: str) -> str:
    """The text of ``path`` inside the cache ``folder``; OSError when it (or a
    folder on the way) is a symbolic link, or is not a regular file."""
    if _has_symlink(folder, path):
        raise OSError(f"{path}: symbolic link in the cache folder")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat_mod.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path}: not a regular file")
        return fh.read().decode("utf-8")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid_finding(d) -> bool:
    if not isinstance(d, dict):
        return False
    try:
        if not all(isinstance(d[k], str) for k in ("code", "message", "path", "rule_name")):
            return False
        if not all(_is_int(d[k]) for k in ("line", "column", "end_line", "end_column")):
            return False
        if not isinstance(d["applied"], bool):
            return False
        fix = d["fix"]
        if fix is None:
            return True
        return (
            isinstance(fix, dict)
            and fix.get("safety") in (None, "safe", "unsafe")
            and isinstance(fix.get("needs_torch"), bool)
            and isinstance(fix.get("title"), str)
            and isinstance(fix.get("rests_on"), list)
            and all(isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in fix["rests_on"])
        )
    except KeyError:
        return False


def _valid_entry(entry) -> bool:
    """Does ``entry`` have exactly the shape :meth:`Cache.store` writes?"""
    if not isinstance(entry, dict):
        return False
    try:
        if not all(_is_int(entry[k]) for k in ("size", "mtime_ns", "stored_ns")):
            return False
        if not all(isinstance(entry[k], str) for k in ("hash", "settings", "facts")):
            return False
        r = entry["result"]
        return (
            isinstance(r, dict)
            and r["new"] is None
            and isinstance(r.get("fixable"), bool)
            and isinstance(r["findings"], list)
            and all(_valid_finding(d) for d in r["findings"])
            and (r["error"] is None or isinstance(r["error"], str))
            and isinstance(r["prefiltered"], bool)
            and isinstance(r.get("generated", False), bool)
            and isinstance(r["encoding"], str)
        )
    except KeyError:
        return False


def restore(entry: Dict[str, Any], path: str, display: str, original: Optional[bytes]):
    """A FileResult from a cache entry."""
    from .engine import FileResult

    r = entry["result"]
    result = FileResult(path=path, display_path=display, original=original)
    result.findings = [finding_from_dict(d) for d in r["findings"]]
    for f in result.findings:
        f.path = display
    result.new = None  # never text from the cache: lookup() misses entries with a fix
    result.error = r["error"]
    result.prefiltered = r["prefiltered"]
    result.generated = r.get("generated", False)
    result.encoding = r["encoding"]
    return result
