"""Atomic writes: a temp file in the same folder, renamed over the original,
keeping its permission bits.  A failed write leaves the original untouched.

* With ``expected`` (the bytes the fix was computed from), the file is read
  again after the temp file is written, just before the rename: a file that
  changed in the meantime (an editor, another tool) is not written.
* A symbolic link is written *through*: the fixed text replaces its target
  (atomically, in the target's folder), the link stays a link.
* Only regular files are written.
* Temp files are named ``.fix-recompiles-<pid>-<random>.tmp``; before writing
  into a folder, temp files of that pattern left there by a run that was
  killed (its process is gone, or the file is older than an hour) are removed.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from typing import Optional, Set

from ..findings import FileError

TMP_PREFIX = ".fix-recompiles-"
TMP_SUFFIX = ".tmp"
#: ``.fix-recompiles-<pid>-<random>.tmp`` (this version) or ``.fix-recompiles-<random>.tmp``
#: (older ones); ``<random>`` is what ``tempfile.mkstemp`` puts there: 8 characters
#: of ``[a-z0-9_]``, so a user's ``.fix-recompiles-notes.tmp`` is not ours
_TMP_RE = re.compile(r"^\.fix-recompiles-(?:(\d+)-)?[a-z0-9_]{8}\.tmp$")
#: a temp file older than this is stale whatever its pid says (pids are reused)
STALE_SECONDS = 3600
#: folders already cleaned of stale temp files by this process
_cleaned: Set[str] = set()


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True


def remove_stale_temps(folder: str) -> int:
    """Remove ``.fix-recompiles-*.tmp`` regular files in ``folder`` left by a
    killed run (never a symlink, never another pattern); returns how many."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    now = time.time()
    for name in names:
        match = _TMP_RE.match(name)
        if not match:
            continue
        full = os.path.join(folder, name)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        old = now - st.st_mtime > STALE_SECONDS
        pid = match.group(1)
        if pid is not None:
            stale = old or not _pid_alive(int(pid))
        else:  # an older version's name, without a pid: only by age
            stale = old or now - st.st_mtime > 60
        if stale:
            try:
                os.unlink(full)
                removed += 1
            except OSError:
                pass
    return removed


def _target(path: str, display: str) -> str:
    """The file to replace: ``path`` itself, or a symlink's final target."""
    if not os.path.islink(path):
        return path
    target = os.path.realpath(path)
    if not os.path.exists(target):
        raise FileError(display, "broken symbolic link (its target does not exist); nothing written")
    return target


def write_atomic(path: str, data: bytes, display_path: Optional[str] = None, expected: Optional[bytes] = None) -> None:
    """Replace ``path``'s content by ``data`` atomically (see the module doc).
    ``expected``: the content ``path`` must still have at the moment of the
    rename; otherwise nothing is written (FileError)."""
    display = display_path or path
    target = _target(path, display)
    folder = os.path.dirname(os.path.abspath(target))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise FileError(display, "file vanished before the fix could be written; nothing written") from None
    except OSError as exc:
        raise FileError(display, f"cannot write: {exc.strerror or exc}; file left unchanged") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileError(display, "not a regular file; nothing written")
    mode = stat.S_IMODE(st.st_mode)
    if folder not in _cleaned:
        _cleaned.add(folder)
        remove_stale_temps(folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=TMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise FileError(display, f"cannot write: {exc.strerror or exc} (folder {folder}); file left unchanged") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if expected is not None:
            try:
                with open(target, "rb") as fh:
                    current = fh.read()
            except FileNotFoundError:
                raise FileError(display, "file vanished before the fix could be written; nothing written") from None
            if current != expected:
                raise FileError(display, "changed on disk since it was read; fix not written (run again)")
        os.replace(tmp, target)
    except (OSError, FileError) as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, FileError):
            raise
        raise FileError(display, f"cannot write: {exc.strerror or exc}; file left unchanged") from None


def write_changed(files, errors, findings_of) -> int:
    """Write every file of ``files`` whose ``changed`` is true (each has ``path``,
    ``display_path``, ``new`` and ``original``: the bytes ``new`` was derived
    from, which the file must still hold), atomically.  A file that cannot be
    written keeps its content, gets ``(path, reason)`` appended to ``errors``,
    and the findings ``findings_of(file)`` are marked not applied.  Returns how
    many files were written."""
    written = 0
    for item in files:
        if not item.changed:
            continue
        try:
            write_atomic(item.path, item.new, item.display_path, expected=getattr(item, "original", None))
            written += 1
        except FileError as exc:
            errors.append((exc.path, exc.reason))
            for finding in findings_of(item):
                finding.applied = False
            item.new = None
    return written
