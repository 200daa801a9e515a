"""Which files a run takes and the settings of each: the configuration's
``exclude`` / ``extend-exclude``, ``--exclude``, ``--force-exclude`` and
``per-file-ignores``, resolved once by the command line and applied the same
way by every mode (report, diff, fix, interactive, trace-guided)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from ..analysis.context import Settings
from .config import PerFileIgnores
from .discovery import DEFAULT_EXCLUDES, Discovered, discover


#: a longer gitignore-style pattern is refused: pathspec's regex for a
#: 50 MB pattern ran for over 15 minutes
MAX_PATTERN = 4096


def pattern_error(patterns: Sequence[str]) -> Optional[str]:
    """Why one of ``patterns`` (gitignore-style) cannot be used, or None."""
    import pathspec

    for pattern in patterns:
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        if len(pattern) > MAX_PATTERN:
            return f"pattern {shown!r} is longer than {MAX_PATTERN} characters"
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except Exception as exc:  # noqa: BLE001 - re.error, ValueError ...: a bad pattern, one line
            return f"invalid pattern {shown!r}: {exc}"
    return None


def _excluded_by_default(path: str) -> bool:
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)[:-1]
    return any(p in DEFAULT_EXCLUDES for p in parts)


def filter_excludes(files: Sequence[str], patterns: Sequence[str], root: str, explicit: Sequence[str], force: bool) -> List[str]:
    """Drop files matching ``patterns`` (gitignore-style, relative to ``root``).
    Files named on the command line (``explicit``) are kept unless ``force``."""
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
    explicit_set = {os.path.abspath(p) for p in explicit}
    root = os.path.abspath(root)
    out = []
    for path in files:
        ab = os.path.abspath(path)
        if ab in explicit_set and not force:
            out.append(path)
            continue
        if force and ab in explicit_set and _excluded_by_default(path):
            continue
        if spec is not None:
            rel = os.path.relpath(ab, root).replace(os.sep, "/")
            if not rel.startswith("../") and spec.match_file(rel):
                continue
        out.append(path)
    return out


@dataclass(frozen=True)
class FileSelection:
    """The file half of a run's settings.  ``excludes``: ``--exclude`` (relative
    to the current folder, applied during discovery); ``config_excludes``: the
    configuration's (relative to ``config_root``, applied after it, so a file
    named on the command line is kept unless ``force_exclude``)."""

    excludes: Sequence[str] = ()
    config_excludes: Sequence[str] = ()
    config_root: str = "."
    force_exclude: bool = False
    per_file_ignores: Optional[PerFileIgnores] = None

    def discover(self, paths: Sequence[str]) -> Discovered:
        """The files of ``paths`` this run takes (missing paths and discovery's
        inputs as :func:`~codemods.pipeline.discovery.discover` gives them)."""
        found = discover(paths, self.excludes)
        files = found.files
        if self.config_excludes or self.force_exclude:
            explicit = [p for p in paths if os.path.isfile(p)]
            files = filter_excludes(files, self.config_excludes, self.config_root, explicit, self.force_exclude)
        return Discovered(files=files, missing=found.missing, inputs=found.inputs)

    def takes(self, path: str) -> bool:
        """Would a run over the current folder take ``path`` (a file a trace
        names, not one named on the command line)?"""
        if self.excludes and not filter_excludes([path], self.excludes, ".", (), False):
            return False
        return not self.config_excludes or bool(filter_excludes([path], self.config_excludes, self.config_root, (), False))

    def settings_for(self, path: str, settings: Settings) -> Settings:
        """``settings`` with the ``per-file-ignores`` of ``path`` added."""
        extra = self.per_file_ignores.codes_for(path) if self.per_file_ignores else frozenset()
        return replace(settings, ignore=frozenset(settings.ignore | extra)) if extra else settings
