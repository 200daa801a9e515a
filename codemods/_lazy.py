"""``cst``: libcst, imported on first use.

libcst is needed only to render fixes (and by the one rule that reads
comments); importing it was about a third of the start-up that a warm run
(everything cached) or a run without findings paid for nothing.  The modules
write ``from ._lazy import cst`` and use ``cst.Name`` etc. as usual; each name
is looked up in libcst once and then kept on the object.  (The standard
library's ``LazyLoader`` does not help here: ``import libcst as cst`` reads the
module's ``__spec__``, which loads it.)
"""

from __future__ import annotations


class _LazyLibcst:
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        import libcst

        value = getattr(libcst, name)
        setattr(self, name, value)  # later look-ups skip __getattr__
        return value


cst = _LazyLibcst()
