"""Replay of an unchanged report: the same command over the same files prints
what it printed last time, without importing the CLI or the engine.

A warm run (every file's result cached) still paid for the interpreter, the
command-line library, the engine's modules, discovery and the cache lookups:
0.44 s on the training corpus, against a goal of a tenth of ruff (0.07 s).
Make's answer: a run whose inputs did not change has the outputs it had.

The console script (``__main__.main``) asks :func:`replay` first, with the
standard library only.  A *snapshot* is keyed by everything the command line
and the process say before any parsing -- the arguments, the current folder,
the interpreter, the environment variables the tool or its output read,
which streams are terminals, and the tool's own source files (path, size,
mtime: an edited pass never replays) -- and holds:

- the *inputs* the run read, each with what ``os.stat`` said of it: every
  Python file it looked at, every folder it listed (a file added, removed or
  renamed changes the folder's mtime), every ``.gitignore`` and
  ``pyproject.toml`` it read or looked for (absent ones too: creating one is a
  change), the repository markers (``.git``: presence only), the
  ``__init__.py`` of the folders above the paths named, as far as they make
  packages (module names, hence what a call into another module resolves
  to, come from them), the modules a file run alone was looked for beside
  it (its note of unread imports), and the interpreter's import path (in
  the key) and its entries (installing another torch, or putting one ahead
  on ``PYTHONPATH``, changes the default ``--target-torch``);
- the bytes written to stdout and stderr, in order, and the exit code.

It is replayed only when every input stats the same (type and permissions, size, mtime in
nanoseconds, inode).  It is recorded only by the command itself
(``cli.check`` calls :func:`replayable`) and only for a report that wrote
nothing and needed nothing more: no ``--diff``/``--fix``/``-i``/
``--from-trace``, no stdin, no ``--files-from``, no ``--statistics`` and no
terminal on stderr (both print the run's own counts, which a replay would
misstate), no error, the result cache on, and its folder the one the
replay looks in (``$FIX_RECOMPILES_CACHE_DIR`` or ``./.fix_recompiles_cache``).
An input modified within two seconds of the run is "racily clean" (as git
says: a second change in the same timestamp tick is invisible), and the run
is then not recorded.

Snapshots live in ``<cache folder>/runs/`` (at most :data:`KEEP`, oldest
removed), are untrusted input like the rest of the cache (a wrong shape is a
miss, never a crash; no symbolic link followed) and are written atomically.
Each carries a keyed checksum (BLAKE2b) made with the user's own key, kept
outside any project (``$XDG_CACHE_HOME/fix-recompiles/replay.key``, else
``~/.cache/...``, mode 0600): a snapshot written with another key (another
machine or user, a CI cache restored into the folder) or edited by hand is a
miss, so no file put in the cache folder can make a run print "All checks
passed!".
Anything unexpected is a miss: the run then happens as usual.
"""

from __future__ import annotations

import json
import os
import stat as stat_mod
import sys
import time
import zlib

from ._jsonfile import write_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and hashlib cost milliseconds at import; a replay is all start-up
    from typing import List, Optional, Sequence, Tuple

FORMAT = 2
#: the snapshot's signature: a keyed BLAKE2b of its contents (the C module,
#: not ``hashlib``: 0.3 ms to import instead of 3-8)
try:
    from _blake2 import blake2b as _blake2b
except ImportError:  # an interpreter without it: nothing is recorded or replayed
    _blake2b = None
CACHE_DIR = ".fix_recompiles_cache"  # = codemods.pipeline.cache.CACHE_DIR (not imported: this module stays light)
RUNS = "runs"
KEEP = 32
#: an input modified less than this before the run makes it unrecordable
RACY_NS = 2_000_000_000
MAX_OUTPUT = 8 << 20
#: environment variables that change what a run prints (beyond FIX_RECOMPILES_*)
ENV = ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "PYTHONIOENCODING", "PYTHONUTF8", "LANG", "LC_ALL", "LC_CTYPE")

#: an input: (path, "stat" | "exists")
Input = "Tuple[str, str]"


def _signature(path: str, kind: str):
    """What ``kind`` compares of ``path``: its stat (type and permissions,
    size, mtime, inode) or None when absent; or for "exists" whether it exists."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False if kind == "exists" else None
    if kind == "exists":
        return True
    return [st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino]


def tool_sources() -> List[str]:
    """The tool's own source files: every ``.py`` of the ``codemods`` package
    (all its folders), sorted; the cache and the replay key on them."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out: List[str] = []
    for folder, subfolders, names in os.walk(package):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        out.extend(os.path.join(folder, name) for name in sorted(names) if name.endswith(".py"))
    return out


def _tool_stamp() -> List[object]:
    """(path, size, mtime) of the tool's own source files, ``cli.py`` and
    ``__main__.py`` beside the package included."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out: List[object] = []
    for path in tool_sources() + [os.path.join(top, "cli.py"), os.path.join(top, "__main__.py")]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return out


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - a closed or odd stream: not a terminal
        return False


def cache_folder() -> Optional[str]:
    """Where snapshots live, or None when the cache is off by environment."""
    if os.environ.get("FIX_RECOMPILES_NO_CACHE", "") not in ("", "0"):
        return None
    return os.path.abspath(os.environ.get("FIX_RECOMPILES_CACHE_DIR") or CACHE_DIR)


def run_key(args: Sequence[str]) -> Tuple[str, str]:
    """(the snapshot's file name, the whole key): the name is a checksum of
    the key, and the snapshot holds the key itself, compared on replay."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("FIX_RECOMPILES") or k in ENV)
    key = repr(
        (
            FORMAT,
            list(args),
            os.getcwd(),
            sys.executable,
            sys.version,
            list(sys.path),  # an entry added or moved ahead changes the torch (and tool) found
            env,
            [_isatty(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
            _tool_stamp(),
        )
    )
    raw = key.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(raw):08x}-{zlib.adler32(raw):08x}", key


def key_path() -> str:
    """The user's replay key: outside any project, so a snapshot another
    machine, user or a restored CI cache wrote (or one edited by hand) is
    never replayed."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fix-recompiles", "replay.key")


def _secret(create: bool) -> Optional[bytes]:
    """The 32-byte replay key (made, mode 0600, when ``create`` and absent);
    None when it cannot be read or made (then nothing is replayed)."""
    path = key_path()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(64)
        return data if len(data) == 32 else None
    except OSError:
        if not create:
            return None
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        data = os.urandom(32)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return data
    except OSError:
        return _secret(False)  # made by another run meanwhile, or not writable


def signature(snapshot: dict, secret: bytes) -> str:
    """The keyed checksum of a snapshot's contents (its ``"mac"`` left out)."""
    body = {k: v for k, v in snapshot.items() if k != "mac"}
    raw = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return _blake2b(raw, key=secret, digest_size=16).hexdigest()  # type: ignore[misc]


def _read(folder: str, path: str) -> Optional[bytes]:
    """The bytes of ``path`` inside ``folder``; None for a link on the way, a
    file that is not regular, or any error."""
    cur = path
    while cur != folder and os.path.dirname(cur) != cur:
        if os.path.islink(cur):
            return None
        cur = os.path.dirname(cur)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat_mod.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            return fh.read()
    except OSError:
        return None


def _valid(snapshot) -> bool:
    """Has ``snapshot`` exactly the shape :meth:`Recording.save` writes?"""
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        return False
    if not isinstance(snapshot.get("key"), str) or not isinstance(snapshot.get("mac"), str):
        return False
    code, inputs, output = snapshot.get("code"), snapshot.get("inputs"), snapshot.get("output")
    if not (isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 1):
        return False
    if not isinstance(inputs, list) or not isinstance(output, list):
        return False
    for entry in inputs:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and entry[1] in ("stat", "exists")):
            return False
        sig = entry[2]
        if entry[1] == "exists":
            if not isinstance(sig, bool):
                return False
        elif sig is not None and not (isinstance(sig, list) and len(sig) == 4 and all(isinstance(v, int) and not isinstance(v, bool) for v in sig)):
            return False
    return all(isinstance(c, list) and len(c) == 2 and c[0] in (1, 2) and isinstance(c[1], str) for c in output)


def replay(args: Sequence[str]) -> Optional[int]:
    """Print the snapshot of this exact command and return its exit code, or
    None (nothing printed) when there is none or any input changed."""
    try:
        folder = cache_folder()
        if folder is None or _blake2b is None:
            return None
        name, key = run_key(args)
        path = os.path.join(folder, RUNS, name + ".json")
        data = _read(folder, path)
        if data is None:
            return None
        snapshot = json.loads(data)
        if not _valid(snapshot) or snapshot["key"] != key:
            return None
        secret = _secret(False)
        if secret is None or snapshot["mac"] != signature(snapshot, secret):
            return None  # written elsewhere, or edited: never printed as this run's result
        for name, kind, sig in snapshot["inputs"]:
            if _signature(name, kind) != sig:
                return None
        streams = {1: sys.stdout, 2: sys.stderr}
        for fd, text in snapshot["output"]:
            stream = streams[fd]
            raw = text.encode("utf-8", "surrogateescape")
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                stream.flush()
                buffer.write(raw)
                buffer.flush()
            else:
                stream.write(raw.decode(getattr(stream, "encoding", None) or "utf-8", "replace"))
                stream.flush()
        return int(snapshot["code"])
    except Exception:  # noqa: BLE001 - a damaged snapshot, an odd stream: run as usual
        return None


# -- recording -------------------------------------------------------------------
class _Tee:
    """A binary stream that writes through to ``raw`` and logs what it wrote."""

    def __init__(self, raw, fd: int, log: List[Tuple[int, bytes]]) -> None:
        self.raw, self.fd, self.log = raw, fd, log

    def write(self, data) -> int:
        data = bytes(data)
        self.log.append((self.fd, data))
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


class Recording:
    """The output of one run, logged while it is written (see :func:`recording`)."""

    def __init__(self, args: Sequence[str]) -> None:
        self.args = list(args)
        self.folder = cache_folder()
        self.name, self.key = run_key(args) if self.folder is not None else ("", "")
        self.log: List[Tuple[int, bytes]] = []
        self.inputs: Optional[List[Input]] = None
        self.started_ns = time.time_ns()

    def start(self) -> bool:
        """Log everything written to sys.stdout and sys.stderr (text and
        ``.buffer``) from now on; False (nothing logged) for streams that are
        not standard text streams over a buffer."""
        import io

        swapped = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            stream = getattr(sys, name)
            if not isinstance(stream, io.TextIOWrapper):
                return False
            stream.flush()
            tee = _Tee(stream.buffer, fd, self.log)
            wrapper = io.TextIOWrapper(tee, encoding=stream.encoding, errors=stream.errors, line_buffering=stream.line_buffering, write_through=True)  # type: ignore[arg-type]
            swapped[name] = (stream, wrapper)
        for name, (stream, wrapper) in swapped.items():
            setattr(sys, name, wrapper)
        self._swapped = swapped
        return True

    def stop(self) -> None:
        for name, (stream, wrapper) in getattr(self, "_swapped", {}).items():
            try:
                wrapper.flush()
                wrapper.detach()
            except Exception:  # noqa: BLE001
                pass
            setattr(sys, name, stream)
        self._swapped = {}

    def save(self, code: object) -> bool:
        """Write the snapshot if the command marked the run replayable and
        nothing about it is racy; True when written."""
        if self.inputs is None or self.folder is None or not isinstance(code, int) or code not in (0, 1):
            return False
        if sum(len(b) for _, b in self.log) > MAX_OUTPUT:
            return False
        entries = []
        horizon = self.started_ns - RACY_NS
        for name, kind in dict.fromkeys(self.inputs):  # once each, in order
            sig = _signature(name, kind)
            if isinstance(sig, list) and sig[2] > horizon:
                return False  # modified just now: a change in the same tick would be invisible
            entries.append([name, kind, sig])
        output: List[List[object]] = []
        for fd, data in self.log:
            if output and output[-1][0] == fd:
                output[-1][1] += data.decode("utf-8", "surrogateescape")  # type: ignore[operator]
            else:
                output.append([fd, data.decode("utf-8", "surrogateescape")])
        snapshot = {"format": FORMAT, "key": self.key, "code": code, "inputs": entries, "output": output}
        secret = _secret(True) if _blake2b is not None else None
        if secret is None:
            return False
        snapshot["mac"] = signature(snapshot, secret)
        runs = os.path.join(self.folder, RUNS)
        try:
            if os.path.islink(self.folder) or os.path.islink(runs):
                return False
            os.makedirs(runs, exist_ok=True)
        except OSError:
            return False  # a cache that cannot be written is only slower
        if not write_json(os.path.join(runs, self.name + ".json"), snapshot):
            return False
        _prune(runs)
        return True


def _prune(runs: str) -> None:
    """Keep the :data:`KEEP` newest snapshots."""
    try:
        names = [n for n in os.listdir(runs) if n.endswith(".json") and not n.startswith(".")]
        if len(names) <= KEEP:
            return
        dated = sorted(names, key=lambda n: os.lstat(os.path.join(runs, n)).st_mtime_ns)
        for name in dated[: len(names) - KEEP]:
            os.unlink(os.path.join(runs, name))
    except OSError:
        pass


#: the recording of this process's run, if the console script started one
_ACTIVE: Optional[Recording] = None


def record(args: Sequence[str]) -> Optional[Recording]:
    """Start recording this process's output (the console script's run)."""
    global _ACTIVE
    rec = Recording(args)
    if rec.folder is None or not rec.start():
        return None
    _ACTIVE = rec
    return rec


def finish(rec: Optional[Recording], code: object) -> None:
    global _ACTIVE
    if rec is None:
        return
    rec.stop()
    _ACTIVE = None
    rec.save(code)


def replayable(cache_dir: Optional[str], inputs: Sequence[Input]) -> None:
    """Called by a command whose run may be replayed: ``inputs`` are what it
    read (see the module doc); ``cache_dir`` the result cache it used."""
    rec = _ACTIVE
    if rec is None or cache_dir is None or rec.folder != os.path.abspath(cache_dir):
        return
    rec.inputs = list(inputs)


def config_inputs(start: str, config_path: Optional[str]) -> List[Input]:
    """What finding the configuration read: the ``pyproject.toml`` of every
    folder from ``start`` up to the root (absent ones too), and the one used."""
    out: List[Input] = []
    cur = os.path.abspath(start)
    if not os.path.isdir(cur):
        cur = os.path.dirname(cur)
    while True:
        out.append((os.path.join(cur, "pyproject.toml"), "stat"))
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    if config_path is not None:
        out.append((os.path.abspath(config_path), "stat"))
    return out


def interpreter_inputs() -> List[Input]:
    """The interpreter's import path entries (another torch installed changes
    the default target release; another typer or pathspec, the tool), absent
    ones too: one made later can hold another torch's metadata."""
    cwd = os.getcwd()
    return [(os.path.abspath(p), "stat") for p in sys.path if isinstance(p, str) and p and os.path.abspath(p) != cwd]


def package_inputs(paths: Sequence[str]) -> List[Input]:
    """The ``__init__.py`` files that make the module names of a run over
    ``paths`` (:func:`codemods.analysis.project.module_key` climbs from each
    file's folder while one is there): from each path's folder up to the
    first folder without one (absent ones too: writing one renames every
    module below it).  Those of the folders walked are the run's own files,
    or their folders' listings say when one appears."""
    out: List[Input] = []
    seen = set()
    for raw in paths:
        cur = os.path.abspath(raw)
        if not os.path.isdir(cur):
            cur = os.path.dirname(cur)
        while cur not in seen:
            seen.add(cur)
            marker = os.path.join(cur, "__init__.py")
            out.append((marker, "stat"))
            parent = os.path.dirname(cur)
            if parent == cur or not os.path.isfile(marker):
                break
            cur = parent
    return out
