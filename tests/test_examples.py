"""The demo scripts in ``examples/``: the CLI's safe fixes must make each
changed example compile fewer graphs (or fewer FX nodes) and print exactly
what eager prints; ``--diff`` must write nothing and produce a patch that
``git apply --check`` accepts.

Generic over every ``examples/*.py``: an example added for another pass is
covered without touching this file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

import warm_python
from golden import runtime_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
NAMES = sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".py")) if os.path.isdir(EXAMPLES) else []


def cli(args, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return warm_python.cli_run([sys.executable, "-m", "cli", *args], cwd=cwd, capture_output=True, env=env, timeout=300)


def digest(folder):
    out = {}
    for dirpath, _, names in os.walk(folder):
        for n in sorted(names):
            full = os.path.join(dirpath, n)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    """(original copy, fixed copy) of examples/, fixed by `fix-recompiles --fix`."""
    base = tmp_path_factory.mktemp("examples")
    before, after = base / "before", base / "after"
    shutil.copytree(EXAMPLES, before)
    shutil.copytree(EXAMPLES, after)
    proc = cli([str(after), "--fix"], cwd=str(base))
    # 0 (all fixed) or 1 (findings without a safe fix remain); 2 is an error
    assert proc.returncode in (0, 1), proc.stdout.decode() + proc.stderr.decode()
    return before, after


def test_examples_exist():
    assert len(NAMES) >= 3, "examples/ should hold the demo scripts"


@pytest.mark.runtime
@pytest.mark.parametrize("name", NAMES)
def test_example_fix_reduces_compiles(name, fixed):
    before, after = fixed
    original = (before / name).read_bytes()
    new = (after / name).read_bytes()
    if original == new:
        pytest.skip(f"{name}: no safe fix applies")
    report = runtime_report(str(before / name), str(after / name))
    eager, b, a = report["eager"], report["before"], report["after"]
    assert eager["stdout"].strip(), f"{name} prints nothing: nothing to compare"
    assert b["stdout"] == eager["stdout"], f"{name} itself differs from eager"
    assert a["stdout"] == eager["stdout"], f"{name}: fixed code prints\n{a['stdout']}\nvs eager\n{eager['stdout']}"
    assert a["graphs"] < b["graphs"] or a["nodes"] < b["nodes"], (
        f"{name}: graphs {b['graphs']} -> {a['graphs']}, nodes {b['nodes']} -> {a['nodes']}: no fewer compiles"
    )


def test_fix_is_idempotent(fixed, tmp_path):
    _, after = fixed
    again = tmp_path / "again"
    shutil.copytree(after, again)
    proc = cli([str(again), "--fix"], cwd=str(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert digest(str(again)) == digest(str(after)), "a second --fix changed the examples"


def test_diff_writes_nothing_and_applies(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo / "examples")
    state = digest(str(repo))
    proc = cli(["examples/", "--diff"], cwd=str(repo))
    assert proc.returncode == 1, (proc.returncode, proc.stderr.decode())
    assert digest(str(repo)) == state, "--diff wrote files"
    patch = proc.stdout
    assert patch.startswith(b"--- "), patch[:200]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (tmp_path / "fix.patch").write_bytes(patch)
    check = subprocess.run(["git", "apply", "--check", str(tmp_path / "fix.patch")], cwd=repo, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    # applying the patch gives the same files as --fix
    subprocess.run(["git", "apply", str(tmp_path / "fix.patch")], cwd=repo, check=True)
    fixed_copy = tmp_path / "fixed"
    shutil.copytree(EXAMPLES, fixed_copy / "examples")
    assert cli(["examples/", "--fix"], cwd=str(fixed_copy)).returncode in (0, 1)
    assert digest(str(repo / "examples")) == digest(str(fixed_copy / "examples"))
