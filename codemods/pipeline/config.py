"""``[tool.fix-recompiles]`` in ``pyproject.toml``: the closest one up from the
first path (or the current folder) that has the table wins.  Command-line
flags override it.  Unknown keys are an error naming the key (exit 2).

    [tool.fix-recompiles]
    select = ["FR001", "FR002"]       # rule codes or prefixes (default: all)
    ignore = ["FR006"]
    exclude = ["generated/"]          # gitignore-style patterns, relative to this file's folder
    extend-exclude = ["legacy/*.py"]  # more patterns (added to exclude)
    unsafe-fixes = false
    per-file-ignores = { "tests/*" = ["FR003"] }
    dynamic-fix = "remove"            # or "true"
    target-torch = "2.5"              # the torch release emitted code must run on
    check-syntax = false              # also parse files no pass applies to
    unproven = false                  # also report what the source cannot prove
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

TABLE = "fix-recompiles"
KNOWN_KEYS = (
    "select",
    "ignore",
    "exclude",
    "extend-exclude",
    "unsafe-fixes",
    "per-file-ignores",
    "dynamic-fix",
    "target-torch",
    "check-syntax",
    "unproven",
)


class ConfigError(Exception):
    """A bad configuration: one line, exit 2."""


@dataclass(frozen=True)
class Config:
    #: the pyproject.toml read, or None when there is none
    path: Optional[str] = None
    #: the folder patterns are relative to (the pyproject's folder, else the current one)
    root: str = "."
    select: Optional[Tuple[str, ...]] = None
    ignore: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = ()
    extend_exclude: Tuple[str, ...] = ()
    unsafe_fixes: Optional[bool] = None
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    dynamic_fix: Optional[str] = None
    target_torch: Optional[Tuple[int, int]] = None
    check_syntax: Optional[bool] = None
    unproven: Optional[bool] = None

    @property
    def excludes(self) -> Tuple[str, ...]:
        return self.exclude + self.extend_exclude


def parse_version(text: str, where: str = "--target-torch") -> Tuple[int, int]:
    match = re.match(r"^\s*(\d+)\.(\d+)(?:[.+\-].*)?\s*$", str(text))
    if not match:
        raise ConfigError(f"{where}: expected a torch version like 2.5, not {text!r}")
    return int(match.group(1)), int(match.group(2))


def dist_version(name: str) -> Optional[str]:
    """The installed version of distribution ``name``, or None.  The first
    ``<name>-<version>.dist-info`` folder on ``sys.path`` says it, as
    ``importlib.metadata`` would find it first; only where no such folder is
    found (an egg, an odd installer) is ``importlib.metadata`` asked, whose
    import and scan of every distribution cost a cold run about 20 ms."""
    import sys

    want = re.sub(r"[-_.]+", "_", name).lower()
    for folder in sys.path:
        try:
            entries = os.listdir(folder or ".")
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info"):
                project, dash, version = entry[: -len(".dist-info")].partition("-")
                if dash and "-" not in version and re.sub(r"[-_.]+", "_", project).lower() == want:
                    return version
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def installed_torch() -> Optional[Tuple[int, int]]:
    """The installed torch's (major, minor), read from package metadata (torch is
    never imported); None when torch is not installed (then no release is
    assumed: fixes take the forms that run on every release)."""
    version = dist_version("torch")
    if version is None:
        return None
    try:
        return parse_version(version)
    except (ConfigError, ValueError):
        return None


def _pyprojects_up(start: str) -> Iterator[Tuple[str, bytes]]:
    """(path, bytes) of each readable ``pyproject.toml`` from ``start`` (a file
    or folder) up to the filesystem root, closest first."""
    cur = os.path.abspath(start)
    if not os.path.isdir(cur):
        cur = os.path.dirname(cur)
    while True:
        candidate = os.path.join(cur, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as fh:
                    yield candidate, fh.read()
            except OSError:
                pass
        parent = os.path.dirname(cur)
        if parent == cur:
            return
        cur = parent


def _toml(path: str, data: bytes) -> dict:
    """The TOML document of ``data`` (the bytes of ``path``); every way it can
    be bad is one :class:`ConfigError` line: invalid TOML, not UTF-8 (TOML
    files are UTF-8: a UTF-16 file is not ignored but refused), nested too
    deeply for the parser."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (TOML files are UTF-8): {exc.reason} at byte {exc.start}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def _names_the_tool(data: bytes) -> bool:
    """Does a ``pyproject.toml`` mention the tool, in UTF-8 or (to refuse it
    with a reason, not skip it) in UTF-16/32?"""
    if b"fix-recompiles" in data:
        return True
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in data[:4096]:
        for encoding in ("utf-16", "utf-32"):
            try:
                if "fix-recompiles" in data.decode(encoding):
                    return True
            except UnicodeDecodeError:
                continue
    return False


def find_pyproject(start: str) -> Optional[str]:
    """The closest ``pyproject.toml`` with a ``[tool.fix-recompiles]`` table,
    from ``start`` (a file or folder) up to the filesystem root."""
    for candidate, data in _pyprojects_up(start):
        if _names_the_tool(data):
            doc = _toml(candidate, data)
            if TABLE in doc.get("tool", {}):
                return candidate
    return None


#: the lowest Python a ``requires-python`` specifier admits: ``>=3.12``,
#: ``>3.11``, ``~=3.12``, ``==3.12.*`` (the first such clause)
_LOWEST_PYTHON = re.compile(r"(>=|~=|==|>)\s*(\d+)\.(\d+)")


def python_required(start: str) -> Optional[Tuple[str, str, Tuple[int, int]]]:
    """(the ``requires-python`` text, the pyproject.toml declaring it, the lowest
    (major, minor) it admits) of the closest ``pyproject.toml`` up from
    ``start`` that declares one with a lower bound; None when none does.
    Read only to explain a syntax error (a file using newer syntax than the
    Python running the tool), never to change what is analysed."""
    for candidate, data in _pyprojects_up(start):
        if b"requires-python" not in data:
            continue
        try:
            spec = tomllib.loads(data.decode("utf-8", "replace")).get("project", {}).get("requires-python")
        except (tomllib.TOMLDecodeError, RecursionError):
            continue
        found = _LOWEST_PYTHON.search(spec) if isinstance(spec, str) else None
        if found is not None:
            # `>3.11` admits 3.11.1: its lowest minor is 3.11 too
            return spec.strip(), candidate, (int(found.group(2)), int(found.group(3)))
    return None


def _str_list(value, key: str, path: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.{TABLE}] {key} must be a list of strings")
    return tuple(value)


def load_config(path: Optional[str]) -> Config:
    """Read ``path`` (a pyproject.toml); ``None`` gives the empty configuration."""
    if path is None:
        return Config(root=os.getcwd())
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    doc = _toml(path, data)
    table = doc.get("tool", {}).get(TABLE, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{TABLE}] must be a table")
    for key in table:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"{path}: unknown key {key!r} in [tool.{TABLE}] (known: {', '.join(KNOWN_KEYS)})")
    values: Dict[str, object] = {"path": path, "root": os.path.dirname(os.path.abspath(path))}
    if "select" in table:
        values["select"] = tuple(c.upper() for c in _str_list(table["select"], "select", path))
    if "ignore" in table:
        values["ignore"] = tuple(c.upper() for c in _str_list(table["ignore"], "ignore", path))
    if "exclude" in table:
        values["exclude"] = _str_list(table["exclude"], "exclude", path)
    if "extend-exclude" in table:
        values["extend_exclude"] = _str_list(table["extend-exclude"], "extend-exclude", path)
    if "unsafe-fixes" in table:
        if not isinstance(table["unsafe-fixes"], bool):
            raise ConfigError(f"{path}: [tool.{TABLE}] unsafe-fixes must be true or false")
        values["unsafe_fixes"] = table["unsafe-fixes"]
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{path}: [tool.{TABLE}] per-file-ignores must be a table of pattern = [codes]")
        values["per_file_ignores"] = tuple(
            (pattern, tuple(c.upper() for c in _str_list(codes, f"per-file-ignores.{pattern}", path))) for pattern, codes in pfi.items()
        )
    if "dynamic-fix" in table:
        if table["dynamic-fix"] not in ("remove", "true"):
            raise ConfigError(f"{path}: [tool.{TABLE}] dynamic-fix must be \"remove\" or \"true\", not {table['dynamic-fix']!r}")
        values["dynamic_fix"] = table["dynamic-fix"]
    if "check-syntax" in table:
        if not isinstance(table["check-syntax"], bool):
            raise ConfigError(f"{path}: [tool.{TABLE}] check-syntax must be true or false")
        values["check_syntax"] = table["check-syntax"]
    if "unproven" in table:
        if not isinstance(table["unproven"], bool):
            raise ConfigError(f"{path}: [tool.{TABLE}] unproven must be true or false")
        values["unproven"] = table["unproven"]
    if "target-torch" in table:
        values["target_torch"] = parse_version(str(table["target-torch"]), f"{path}: [tool.{TABLE}] target-torch")
    return Config(**values)  # type: ignore[arg-type]


def config_for(paths: Sequence[str], config_file: Optional[str] = None) -> Config:
    """The configuration for a run over ``paths`` (the first path decides), or
    the one in ``config_file`` (``--config PATH``: a TOML file with a
    ``[tool.fix-recompiles]`` table; patterns are relative to its folder)."""
    if config_file is not None:
        if not os.path.isfile(config_file):  # never opened unless a regular file (a FIFO would block)
            raise ConfigError(f"--config: {config_file}: {'not a regular file' if os.path.exists(config_file) else 'no such file'}")
        try:
            with open(config_file, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise ConfigError(f"--config: {config_file}: cannot read: {exc.strerror or exc}") from None
        doc = _toml(config_file, data)
        if not isinstance(doc.get("tool"), dict) or TABLE not in doc["tool"]:
            raise ConfigError(f"--config: {config_file}: no [tool.{TABLE}] table")
        return load_config(config_file)
    start = paths[0] if paths else "."
    if start == "-" or not os.path.exists(start):
        start = "."
    return load_config(find_pyproject(start))


class PerFileIgnores:
    """``per-file-ignores``: extra ignored codes for files matching a pattern
    (gitignore-style, relative to the configuration's folder)."""

    def __init__(self, entries: Sequence[Tuple[str, Sequence[str]]], root: str) -> None:
        import pathspec

        self.root = os.path.abspath(root)
        self.entries: List[Tuple[object, frozenset]] = [
            (pathspec.GitIgnoreSpec.from_lines([pattern]), frozenset(codes)) for pattern, codes in entries
        ]

    def __bool__(self) -> bool:
        return bool(self.entries)

    def codes_for(self, path: str) -> frozenset:
        rel = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        out: frozenset = frozenset()
        for spec, codes in self.entries:
            if spec.match_file(rel):  # type: ignore[attr-defined]
                out = out | codes
        return out
