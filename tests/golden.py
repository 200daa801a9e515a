"""Golden cases: discovery, running the engine on them, and the runtime proof.

Layout, one folder per pass (named like the pass module, e.g. ``dynamic_shapes``)::

    tests/golden/<pass>/<case>.in.py        input
    tests/golden/<pass>/<case>.out.py       expected output; absent = must stay unchanged
    tests/golden/<pass>/<case>/in/...       a multi-file case (a small package)
    tests/golden/<pass>/<case>/out/...      expected files; a file absent here = unchanged

Directives in comments on the first lines of the input (or of ``in/main.py``):

    # golden: --unsafe-fixes --dynamic-fix true   extra CLI options for this case
    # golden: runtime                             runnable: prove fewer graphs at runtime
    # golden: runtime=nodes                       ... fewer FX nodes (graph-break cases)
    # golden: runtime=limit_hits                  ... fewer recompile-limit hits (eager
                                                  fallbacks); for limit raises, which compile more graphs

Only the pass whose folder holds the case is selected.  Expected files are
only ever written by ``python tests/regen_golden.py`` (for review in git diff).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional

try:
    import fcntl
except ImportError:  # not on Windows: no cache shared between workers there
    fcntl = None

import typer.testing  # noqa: F401  (ensures typer is importable for the CLI parsing below)

import warm_python
from codemods.analysis.context import Settings
from codemods.pipeline.runner import run
from codemods.transforms import REGISTRY

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
PROBE = os.path.join(HERE, "runtime_probe.py")
_DIRECTIVE = re.compile(r"^#\s*golden:\s*(.*)$")


def rule_for_folder(folder: str):
    for rule in REGISTRY:
        module = type(rule).__module__.rsplit(".", 1)[-1]
        if module == folder:
            return rule
    raise LookupError(f"tests/golden/{folder}: no pass module named {folder!r}")


@dataclass
class Case:
    pass_folder: str
    name: str
    #: input path: a file, or a folder holding in/ and out/
    path: str
    is_dir: bool

    @property
    def id(self) -> str:
        return f"{self.pass_folder}/{self.name}"

    @property
    def main_input(self) -> str:
        return os.path.join(self.path, "in", "main.py") if self.is_dir else self.path

    def directives(self) -> List[str]:
        out: List[str] = []
        with open(self.main_input, encoding="utf-8") as fh:
            for line in fh.readlines()[:5]:
                m = _DIRECTIVE.match(line.strip())
                if m:
                    out.extend(shlex.split(m.group(1)))
        return out

    @property
    def runtime(self) -> Optional[str]:
        for d in self.directives():
            if d == "runtime":
                return "graphs"
            if d.startswith("runtime="):
                return d.split("=", 1)[1]
        return None

    def options(self) -> List[str]:
        return [d for d in self.directives() if d.startswith("--") or not d.startswith("runtime")]

    def settings(self) -> Settings:
        opts = self.options()
        dynamic_fix = "remove"
        if "--dynamic-fix" in opts:
            dynamic_fix = opts[opts.index("--dynamic-fix") + 1]
        target = None
        if "--target-torch" in opts:
            major, minor = opts[opts.index("--target-torch") + 1].split(".")[:2]
            target = (int(major), int(minor))
        return Settings(
            select=frozenset({rule_for_folder(self.pass_folder).code}),
            unsafe_fixes="--unsafe-fixes" in opts,
            dynamic_fix=dynamic_fix,
            target_torch=target,
            unproven="--unproven" in opts,
        )

    def input_files(self) -> Dict[str, str]:
        """relative path -> absolute input path"""
        if not self.is_dir:
            return {"case.py": self.path}
        root = os.path.join(self.path, "in")
        files = {}
        for dirpath, _, names in os.walk(root):
            for n in names:
                if n.endswith(".py"):
                    full = os.path.join(dirpath, n)
                    files[os.path.relpath(full, root)] = full
        return files

    def expected_path(self, rel: str) -> str:
        if not self.is_dir:
            return self.path[: -len(".in.py")] + ".out.py"
        return os.path.join(self.path, "out", rel)

    def expected(self, rel: str) -> bytes:
        path = self.expected_path(rel)
        src = path if os.path.exists(path) else self.input_files()[rel]
        with open(src, "rb") as fh:
            return fh.read()


def discover_cases() -> List[Case]:
    cases: List[Case] = []
    for folder in sorted(os.listdir(GOLDEN)):
        full = os.path.join(GOLDEN, folder)
        if not os.path.isdir(full) or folder.startswith(("_", ".")):
            continue
        for entry in sorted(os.listdir(full)):
            path = os.path.join(full, entry)
            if entry.endswith(".in.py"):
                cases.append(Case(folder, entry[: -len(".in.py")], path, False))
            elif os.path.isdir(path) and os.path.isdir(os.path.join(path, "in")):
                cases.append(Case(folder, entry, path, True))
    return cases


def read_inputs(case: Case) -> Dict[str, bytes]:
    out = {}
    for rel, src in case.input_files().items():
        with open(src, "rb") as fh:
            out[rel] = fh.read()
    return out


def run_tree(files: Dict[str, bytes], settings: Settings, workdir: str) -> Dict[str, bytes]:
    """Write ``files`` (rel -> bytes) under ``workdir``, run the engine there the
    way the CLI does, and return rel -> output bytes (input bytes if unchanged)."""
    write_tree(workdir, files)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        result = run(["."], settings)
    finally:
        os.chdir(cwd)
    assert not result.errors, result.errors
    by_path = {r.display_path: r for r in result.results}
    out: Dict[str, bytes] = {}
    for rel, data in files.items():
        r = by_path.get(rel.replace(os.sep, "/"))
        out[rel] = r.new if (r is not None and r.new is not None) else data
    return out


def run_case(case: Case, workdir: str) -> Dict[str, bytes]:
    return run_tree(read_inputs(case), case.settings(), workdir)


def write_tree(root: str, files: Dict[str, bytes]) -> None:
    for rel, data in files.items():
        dst = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as fh:
            fh.write(data)


def _tree_digest(folder: str) -> str:
    """Content of every file under ``folder`` (what a script there can import or read)."""
    h = hashlib.sha256()
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for n in sorted(names):
            full = os.path.join(dirpath, n)
            h.update(os.path.relpath(full, folder).encode("utf-8", "surrogateescape") + b"\0")
            with open(full, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


#: key -> probe result, for this process; FIX_RECOMPILES_PROBE_CACHE (a folder,
#: set by tests/conftest.py for one pytest session) shares them between xdist workers
_PROBE_RESULTS: Dict[str, dict] = {}
PROBE_CACHE_ENV = "FIX_RECOMPILES_PROBE_CACHE"


def _probe_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("TORCH_COMPILE_JOB_ID", None)
    env.pop(PROBE_CACHE_ENV, None)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _probe_uncached(script: str, mode: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        proc = warm_python.run([PROBE, "--one", mode, out, script], env=_probe_env(), timeout=600)
        if proc.returncode != 0:
            raise AssertionError(f"runtime probe failed ({mode} run of {script}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
        with open(out) as fh:
            return json.load(fh)


def probe(script: str, *, compiled: bool) -> dict:
    """One run of ``script`` under tests/runtime_probe.py (compiled with its
    counting backend, or eager with dynamo disabled), in a fresh fork of the warm
    torch process (tests/warm_python.py): {"graphs", "nodes", "limit_hits", "stdout"}.

    The result is a function of the script's folder (every file under it) and
    the mode, so a run is made once per pytest session, whichever test asks
    first: before/eager of the same input, a program and its fix when the fix
    is the same for two tests."""
    mode = "compiled" if compiled else "eager"
    script = os.path.abspath(script)
    folder = os.path.dirname(script)
    key = hashlib.sha256(f"{mode}\0{os.path.basename(script)}\0{_tree_digest(folder)}".encode()).hexdigest()
    if key in _PROBE_RESULTS:
        return dict(_PROBE_RESULTS[key])
    shared = os.environ.get(PROBE_CACHE_ENV)
    if shared and os.path.isdir(shared) and fcntl is not None:
        path = os.path.join(shared, key + ".json")
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker running it: wait for its result
            if os.path.exists(path):
                with open(path) as fh:
                    result = json.load(fh)
            else:
                result = _probe_uncached(script, mode)
                with open(path + ".tmp", "w") as fh:
                    json.dump(result, fh)
                os.replace(path + ".tmp", path)
    else:
        result = _probe_uncached(script, mode)
    _PROBE_RESULTS[key] = result
    return dict(result)


def runtime_report(before_main: str, after_main: str) -> dict:
    """The eager reference of ``before_main`` and both scripts compiled, each a
    :func:`probe` run (its own fresh process state); returns
    {"eager": ..., "before": ..., "after": ...}."""
    return {
        "eager": probe(before_main, compiled=False),
        "before": probe(before_main, compiled=True),
        "after": probe(after_main, compiled=True),
    }
