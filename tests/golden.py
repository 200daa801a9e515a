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

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional

import typer.testing  # noqa: F401  (ensures typer is importable for the CLI parsing below)

from codemods.context import Settings
from codemods.runner import run
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


def runtime_report(before_main: str, after_main: str) -> dict:
    """Run the probe on the two scripts; returns its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        env = dict(os.environ)
        env.pop("TORCH_COMPILE_JOB_ID", None)
        env.setdefault("OMP_NUM_THREADS", "1")
        proc = subprocess.run(
            [sys.executable, PROBE, out, before_main, after_main],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode != 0:
            raise AssertionError(f"runtime probe failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
        with open(out) as fh:
            data = json.load(fh)
    return {"eager": data["eager"], "before": data[before_main], "after": data[after_main]}
