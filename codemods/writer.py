"""Atomic writes: a temp file in the same folder, renamed over the original,
keeping its permission bits.  A failed write leaves the original untouched."""

from __future__ import annotations

import os
import stat
import tempfile

from .findings import FileError


def write_atomic(path: str, data: bytes, display_path: str | None = None) -> None:
    display = display_path or path
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        raise FileError(display, "file vanished before the fix could be written; nothing written") from None
    fd, tmp = tempfile.mkstemp(prefix=".fix-recompiles-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise FileError(display, f"cannot write: {exc.strerror or exc}; file left unchanged") from None


def write_changed(files, errors, findings_of) -> int:
    """Write every file of ``files`` whose ``changed`` is true (each has ``path``,
    ``display_path`` and ``new``), atomically.  A file that cannot be written
    keeps its original, gets ``(path, reason)`` appended to ``errors``, and the
    findings ``findings_of(file)`` are marked not applied.  Returns how many
    files were written."""
    written = 0
    for item in files:
        if not item.changed:
            continue
        try:
            write_atomic(item.path, item.new, item.display_path)
            written += 1
        except FileError as exc:
            errors.append((exc.path, exc.reason))
            for finding in findings_of(item):
                finding.applied = False
            item.new = None
    return written
