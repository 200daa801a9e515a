"""Run settings and the per-file context handed to every rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple

from .._lazy import cst

#: torch's default recompile limit (``torch._dynamo.config.recompile_limit``;
#: 2.2+, 64 on 2.1): the one number FR006, the variation evidence and the
#: trace compare with
DEFAULT_RECOMPILE_LIMIT = 8


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
    #: also report findings the source cannot prove (no varying call seen, a
    #: static compile that looks deliberate): off by default
    unproven: bool = False

    def selects(self, code: str) -> bool:
        def matches(codes) -> bool:
            return any(code.startswith(c) for c in codes)

        if self.select is not None and not matches(self.select):
            return False
        return not matches(self.ignore)


@dataclass(frozen=True)
class TraceEvidence:
    """What a run of the code showed (``fix-recompiles run``: the trace) that
    the source of one file cannot: for each compiled function of the file, by
    the first line of its code object, the arguments seen guarded on a Python
    float's value, as the guard names them (``temperature``,
    ``sampling_kwargs['temperature']``, ``args[1]``)."""

    float_args: Mapping[int, FrozenSet[str]] = field(default_factory=dict)


class FileContext:
    """One file as every rule sees it.  ``source`` (bytes, text, stdlib ``ast``)
    and ``model`` (the compile-site model, on ``ast``) are what rules read;
    ``module`` (libcst) is parsed only on first use: to render fixes, or for
    the one rule that reads comments (FR002).  No rule analyses the CST."""

    def __init__(self, path: str, display_path: str, settings: Settings, project=None, source=None, module: Optional[cst.Module] = None, evidence: Optional[TraceEvidence] = None) -> None:
        self.path = path
        self.display_path = display_path
        self.settings = settings
        #: project-wide facts (cross-module compiled functions), may be None
        self.project = project
        #: what a trace of a run observed (None outside ``fix-recompiles run``)
        self.evidence = evidence
        self.source = source
        #: per-rule scratch space so a rule can share work between its own helpers
        self.cache: Dict[str, Any] = {}
        self._module = module
        self._model = None

    def release(self) -> None:
        """The file is done (see :meth:`Source.release`)."""
        if self.source is not None:
            self.source.release()
        self._model = None
        self.cache.clear()
        self._module = None

    @property
    def model(self):
        """The compile-site model (:class:`codemods.analysis.compile_sites.CompileModel`)."""
        if self._model is None:
            from .compile_sites import model_of

            self._model = model_of(self.source)
        return self._model

    @property
    def module(self) -> cst.Module:
        if self._module is None:
            data = self.source.data
            self._module = cst.parse_module(data)
        return self._module
