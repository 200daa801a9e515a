"""Project-wide facts gathered in one cheap pass before files are processed.

Passes that need to know about other modules (e.g. a function compiled in
``kernels.py`` and called in ``train.py``) read them from the
:class:`ProjectIndex` in ``ctx.project``.  The index must stay picklable (it is
sent to worker processes) and cheap to build.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple


@dataclass
class ProjectIndex:
    #: extra byte strings that make the prefilter keep a file (per path), e.g.
    #: names of compiled functions defined in other modules
    tokens: Dict[str, Tuple[bytes, ...]] = field(default_factory=dict)

    def prefilter_tokens(self, path: str) -> Tuple[bytes, ...]:
        return self.tokens.get(path, ())


def build_project_index(files: Sequence[str], settings) -> ProjectIndex:
    """No cross-module facts are collected yet: an empty index."""
    return ProjectIndex()
