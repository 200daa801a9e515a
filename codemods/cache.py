"""Per-file result cache under ``.fix_recompiles_cache/`` (self-ignoring: it
holds a ``.gitignore`` containing ``*``, like ruff's).

One JSON file per *run key*: the tool's version, a fingerprint of its own
source (so an edited pass never serves stale results), the effective settings
and the selected rules.  Inside, one entry per file (absolute path) holding
size + mtime, the content hash, the per-file settings, the project-index facts
that apply to the file, and the result (findings, fixed bytes, error).

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
import tempfile
import time
from typing import Any, Dict, Optional

from .findings import Finding, Fix, Safety

CACHE_DIR = ".fix_recompiles_cache"
FORMAT = 1
#: files modified less than this before being cached are re-hashed on lookup
RACY_NS = 2_000_000_000


def _tool_fingerprint() -> str:
    """Version + hash of this package's sources (edits to a pass change results)."""
    try:
        from importlib import metadata

        version = metadata.version("fix-recompiles")
    except Exception:  # noqa: BLE001 - not installed: the source hash still counts
        version = "0"
    h = hashlib.blake2b(version.encode(), digest_size=16)
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (here, os.path.join(here, "transforms")):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as fh:
                    h.update(name.encode() + b"\0" + fh.read())
    return h.hexdigest()


def settings_key(settings) -> str:
    return repr(
        (
            sorted(settings.select) if settings.select is not None else None,
            sorted(settings.ignore),
            settings.unsafe_fixes,
            settings.dynamic_fix,
            settings.target_torch,
            settings.check_syntax,
        )
    )


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
            blob = repr(sorted((key, sorted(fns.items())) for key, fns in facts.items())).encode()
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
    return hashlib.blake2b(repr((global_key, tokens, module)).encode(), digest_size=16).hexdigest()


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
        "fix": None if f.fix is None else {"safety": f.fix.safety.value if f.fix.safety else None, "needs_torch": f.fix.needs_torch, "title": f.fix.title},
    }


def finding_from_dict(d: Dict[str, Any]) -> Finding:
    fix = None
    if d["fix"] is not None:
        safety = Safety(d["fix"]["safety"]) if d["fix"]["safety"] else None
        # the edits are not kept: the fixed bytes are (FileResult.new)
        fix = Fix(edits=(), safety=safety, needs_torch=d["fix"]["needs_torch"], title=d["fix"]["title"])  # type: ignore[arg-type]
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
    return f


def result_to_dict(result) -> Dict[str, Any]:
    return {
        "findings": [finding_to_dict(f) for f in result.findings],
        "new": None if result.new is None else result.new.decode("latin-1"),
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
        self.hits = 0
        try:
            with open(self.file, "r", encoding="utf-8") as fh:
                loaded = json.load(fh)
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, ValueError):
            self.entries = {}

    def facts_key(self, path: str) -> str:
        return file_facts_key(self.project, path, self.global_key)

    def lookup(self, path: str, settings, stat: Optional[os.stat_result], data: Optional[bytes] = None) -> Optional[Dict[str, Any]]:
        """The cached result for ``path`` or None; may read the file to hash it
        (then ``entry['_data']`` holds the bytes read)."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or stat is None:
            return None
        if entry["settings"] != settings_key(settings) or entry["facts"] != self.facts_key(path):
            return None
        # size + mtime decide alone unless the file was modified close to the
        # moment it was cached ("racily clean", as git says): then hash it
        if entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns and stat.st_mtime_ns + RACY_NS < entry["stored_ns"]:
            self.hits += 1
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
        self.hits += 1
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
            os.makedirs(os.path.dirname(self.file), exist_ok=True)
            ignore = os.path.join(self.folder, ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w", encoding="utf-8") as fh:
                    fh.write("# Automatically created by fix-recompiles.\n*\n")
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(self.file))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.entries, fh, separators=(",", ":"))
            os.replace(tmp, self.file)
        except OSError:
            pass  # a cache that cannot be written is only slower
        self.dirty = False


def restore(entry: Dict[str, Any], path: str, display: str, original: Optional[bytes]):
    """A FileResult from a cache entry."""
    from .engine import FileResult

    r = entry["result"]
    result = FileResult(path=path, display_path=display, original=original)
    result.findings = [finding_from_dict(d) for d in r["findings"]]
    for f in result.findings:
        f.path = display
    result.new = None if r["new"] is None else r["new"].encode("latin-1")
    result.error = r["error"]
    result.prefiltered = r["prefiltered"]
    result.generated = r.get("generated", False)
    result.encoding = r["encoding"]
    return result
