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
