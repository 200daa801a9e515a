"""Which files a run looks at.

Files named on the command line are always taken; folders are walked for
``*.py``, skipping hidden folders, virtualenvs, build output and what the
``.gitignore`` files (nested ones too) ignore.  Output order is sorted so runs
are reproducible.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import pathspec

DEFAULT_EXCLUDES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "env",
        ".env",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".fix_recompiles_cache",
        "__pycache__",
        "__pypackages__",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        ".eggs",
    }
)


@dataclass(frozen=True)
class Discovered:
    files: List[str]
    #: (path, reason) for command-line paths that do not exist, and for paths
    #: that are not regular files (a FIFO, socket or device: never opened)
    missing: List[Tuple[str, str]]
    #: what the answer depends on, for a replay (:mod:`codemods.pipeline.replay`):
    #: (path, "stat") for the files taken, the folders listed and the
    #: ``.gitignore`` files read or looked for; (path, "exists") for the
    #: repository markers and the virtualenv markers of folders skipped
    inputs: List[Tuple[str, str]] = field(default_factory=list)


def _not_regular(path: str, ids: Optional[Dict[str, Tuple[int, int]]] = None) -> Optional[str]:
    """Why ``path`` (which exists) must not be opened, or None for a regular
    file.  A FIFO would block the run forever, a device could be endless.
    ``ids``: where to note the file's (device, inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # a dangling link and the like: reading reports it
    if ids is not None:
        ids[path] = (st.st_dev, st.st_ino)
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = (
        "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special"
    )
    return f"not a regular file ({kind}); skipped"


def _is_venv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


class _GitIgnore:
    """Stack of .gitignore specs keyed by the folder that holds them."""

    def __init__(self) -> None:
        self._cache: Dict[str, Optional[pathspec.PathSpec]] = {}

    @property
    def files(self) -> List[str]:
        """The ``.gitignore`` files read or looked for."""
        return [os.path.join(folder, ".gitignore") for folder in self._cache]

    def spec_for(self, folder: str) -> Optional[pathspec.PathSpec]:
        if folder not in self._cache:
            spec = None
            path = os.path.join(folder, ".gitignore")
            if os.path.isfile(path):
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        spec = pathspec.GitIgnoreSpec.from_lines(fh)
                except OSError:
                    spec = None
            self._cache[folder] = spec
        return self._cache[folder]

    def ignored(self, path: str, is_dir: bool, parents: Sequence[str]) -> bool:
        for folder in parents:
            spec = self.spec_for(folder)
            if spec is None:
                continue
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if is_dir:
                rel += "/"
            if spec.match_file(rel):
                return True
        return False


def _repo_root(start: str, _known: Optional[Dict[str, Optional[str]]] = None) -> Optional[str]:
    """The nearest folder at or above ``start`` holding ``.git``; ``_known``
    remembers the answer for every folder on the way (a walk asks for each of
    its folders: their parents are asked once)."""
    cur = os.path.abspath(start)
    seen: List[str] = []
    found: Optional[str] = None
    while True:
        if _known is not None and cur in _known:
            found = _known[cur]
            break
        seen.append(cur)
        if os.path.exists(os.path.join(cur, ".git")):
            found = cur
            break
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    if _known is not None:
        for folder in seen:
            _known[folder] = found
    return found


def _ancestor_folders(folder: str, _known: Optional[Dict[str, Optional[str]]] = None) -> List[str]:
    """Folders from the repository root (or the folder itself) down to ``folder``."""
    folder = os.path.abspath(folder)
    root = _repo_root(folder, _known) or folder
    chain = [folder]
    while chain[-1] != root and os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    return list(reversed(chain))


def discover(paths: Iterable[str], extra_excludes: Sequence[str] = ()) -> Discovered:
    files: List[str] = []
    missing: List[Tuple[str, str]] = []
    gitignore = _GitIgnore()
    exclude_spec = pathspec.GitIgnoreSpec.from_lines(extra_excludes) if extra_excludes else None
    roots: Dict[str, Optional[str]] = {}
    ids: Dict[str, Tuple[int, int]] = {}  # (device, inode) of the files stat'ed on the way
    listed: List[str] = []
    venvs: List[str] = []
    for raw in paths:
        if not os.path.lexists(raw):
            missing.append((raw, "no such file or directory"))
            continue
        if os.path.isfile(raw) or not os.path.isdir(raw):
            why = _not_regular(raw)
            if why is not None:
                missing.append((raw, why))
            else:
                files.append(raw)
            continue
        for dirpath, dirnames, filenames in os.walk(raw, onerror=lambda exc: missing.append(_walk_error(exc))):
            listed.append(dirpath)
            parents = _ancestor_folders(dirpath, roots)
            keep = []
            for d in sorted(dirnames):
                full = os.path.join(dirpath, d)
                if d.startswith(".") or d in DEFAULT_EXCLUDES:
                    continue
                if _is_venv(full):
                    venvs.append(full)
                    continue
                if gitignore.ignored(full, True, parents):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(os.path.relpath(full).replace(os.sep, "/") + "/"):
                    continue
                keep.append(d)
            dirnames[:] = keep
            for name in sorted(filenames):
                if not name.endswith((".py", ".ipynb")):
                    continue
                full = os.path.join(dirpath, name)
                if gitignore.ignored(full, False, parents):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(os.path.relpath(full).replace(os.sep, "/")):
                    continue
                why = _not_regular(full, ids)
                if why is not None:
                    missing.append((display_path(full), why))
                    continue
                files.append(full)
    # stable, duplicate-free order
    seen = set()
    unique = []
    for f in sorted(files, key=lambda p: os.path.normpath(p)):
        key: object = ids.get(f)
        if key is None:  # one file reached twice (a link, overlapping arguments): by identity
            try:
                st = os.stat(f)
                key = (st.st_dev, st.st_ino)
            except OSError:
                key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    inputs = [(os.path.abspath(p), "stat") for p in unique + listed + gitignore.files]
    inputs += [(os.path.join(folder, ".git"), "exists") for folder in roots]
    inputs += [(os.path.abspath(os.path.join(v, "pyvenv.cfg")), "exists") for v in venvs]
    return Discovered(unique, missing, inputs)


def _walk_error(exc: OSError) -> Tuple[str, str]:
    """A folder that cannot be listed (no permission): its one error line."""
    return (display_path(exc.filename) if exc.filename else "?", f"cannot read folder: {exc.strerror or exc}")


def display_path(path: str) -> str:
    """Path relative to the current folder when below it, with forward slashes."""
    cwd = os.getcwd()
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))  # abspath without a second getcwd
    if full.startswith(cwd) and full[len(cwd) : len(cwd) + 1] == os.sep:
        rel = full[len(cwd) + 1 :]  # below the current folder: the common case, no relpath
    else:
        rel = os.path.relpath(full)
        if rel == ".." or rel.startswith(".." + os.sep):
            rel = full
    return rel.replace(os.sep, "/")


def unread_imports(path: str, data: bytes, read: Sequence[str], looked: Optional[List[str]] = None) -> List[str]:
    """The modules of its own project that the file at ``path`` imports and
    the run did not read (``read``: the paths it did): a relative import, or
    a top-level name with a ``NAME.py`` or ``NAME/__init__.py`` beside the
    file.  A run on one file (or stdin) cannot see what they define: a
    class compiled here and defined there, an lr written there.
    ``looked``: where to note every path looked for (a replay's inputs)."""
    import ast

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    folder = os.path.dirname(os.path.abspath(path))
    seen = {os.path.realpath(p) for p in read}
    found: List[str] = []
    for node in ast.walk(tree):
        names: List[Tuple[str, int]] = []
        if isinstance(node, ast.Import):
            names = [(a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "", node.level)]
        for name, level in names:
            head = name.split(".")[0]
            base = folder
            for _ in range(max(level - 1, 0)):
                base = os.path.dirname(base)
            candidates = [os.path.join(base, head + ".py"), os.path.join(base, head, "__init__.py")] if head else [os.path.join(base, "__init__.py")]
            if looked is not None:
                looked.extend(candidates)
            hit = next((c for c in candidates if os.path.isfile(c)), None)
            if hit is None or os.path.realpath(hit) in seen:
                continue
            shown = ("." * level) + name
            if shown not in found:
                found.append(shown)
    return found
