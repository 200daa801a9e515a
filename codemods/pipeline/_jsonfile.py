"""Writing a JSON file of the cache folder atomically (the per-file cache,
the index facts, the replay snapshots).  Imports nothing of the engine: the
replay (:mod:`codemods.pipeline.replay`) runs before it is loaded."""

from __future__ import annotations

import json
import os


def write_json(path: str, value: object) -> bool:
    """Write ``value`` to ``path`` as compact JSON, atomically: a temporary
    file in the same folder, then ``os.replace`` (which replaces a link
    itself, never its target).  A failure leaves no temporary file behind.
    False when the file could not be written (a cache that cannot be
    written is only slower)."""
    import tempfile

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path) or ".")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            # dumps, not dump: dump streams through the pure-Python encoder
            # (0.15 s for the training corpus' cache entries; dumps is C)
            fh.write(json.dumps(value, separators=(",", ":")))
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
