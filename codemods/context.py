"""Run settings and the per-file context handed to every pass."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Optional, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper

from .analysis import ModuleAnalysis


@dataclass(frozen=True)
class Settings:
    """Everything that changes what a run finds or emits (part of the cache key)."""

    select: Optional[FrozenSet[str]] = None  # None: every rule
    ignore: FrozenSet[str] = frozenset()
    unsafe_fixes: bool = False
    #: how FR001 cures ``dynamic=False``: "remove" (default) or "true" (``dynamic=True``)
    dynamic_fix: str = "remove"
    #: the torch release emitted code must run on, as (major, minor); None: any from 2.1
    target_torch: Optional[Tuple[int, int]] = None
    #: also parse files no pass applies to, so a syntax error anywhere is
    #: reported (by default such files only get the byte-level checks:
    #: binary, undecodable)
    check_syntax: bool = False

    def selects(self, code: str) -> bool:
        def matches(codes) -> bool:
            return any(code.startswith(c) for c in codes)

        if self.select is not None and not matches(self.select):
            return False
        return not matches(self.ignore)


@dataclass
class FileContext:
    path: str
    display_path: str
    module: cst.Module
    wrapper: MetadataWrapper
    analysis: ModuleAnalysis
    settings: Settings
    #: project-wide facts (cross-module compiled functions), may be None
    project: Any = None
    #: per-pass scratch space so a pass can share work between its own helpers
    cache: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, path: str, display_path: str, module: cst.Module, settings: Settings, project=None) -> "FileContext":
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        analysis = ModuleAnalysis(wrapper)
        return cls(path, display_path, module, wrapper, analysis, settings, project)
