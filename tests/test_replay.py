"""The replay of an unchanged report (codemods/replay.py), through the console
script as a user runs it: a new process per run.

A replayed run must print exactly what the recorded one printed and exit the
same; any change to what the run read -- a file's bytes, a file added, a
``.gitignore`` or ``pyproject.toml`` written, other arguments -- must run the
analysis again; runs that write, or whose output counts the run itself, are
never recorded; a damaged snapshot is a miss, never a crash.

Inputs younger than two seconds make a run unrecordable (racily clean), so
every tree here is dated one minute back before the first run (``age``).
To tell a replay from a run that printed the same, a test edits the
snapshot's recorded text (the cache folder is the test's own) and looks for
the edit in the output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "fix-recompiles")


def _installed_elsewhere() -> bool:
    """Is the installed ``fix_recompiles`` an editable install of another
    source tree (a clone's tests would run the other tree's code)?"""
    import importlib.util

    try:
        spec = importlib.util.find_spec("fix_recompiles")
    except (ImportError, ValueError):
        return False
    for location in list(getattr(spec, "submodule_search_locations", None) or []):
        if os.path.isfile(os.path.join(location, "pyproject.toml")) and os.path.realpath(location) != os.path.realpath(REPO):
            return True
    return False


#: the console script (what users run), else the checkout's __main__.py (the same main)
COMMAND = [_SCRIPT] if os.path.exists(_SCRIPT) and not _installed_elsewhere() else [sys.executable, os.path.join(REPO, "__main__.py")]

# FR001 with evidence the shapes vary: one default finding, exit 1
FINDING = (
    "import torch\n"
    "@torch.compile(dynamic=False)\n"
    "def f(x):\n"
    "    return x * 2\n"
    "for n in range(1, 4):\n"
    "    f(torch.ones(n))\n"
)
CLEAN = "import torch\n@torch.compile\ndef f(x):\n    return x + 1\n"


def fr(cwd, *args, env=None) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    for name in [k for k in full if k.startswith("FIX_RECOMPILES")]:
        del full[name]
    full["PYTHONPATH"] = REPO + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env or {})
    return subprocess.run(COMMAND + [str(a) for a in args], cwd=str(cwd), capture_output=True, env=full, timeout=120, stdin=subprocess.DEVNULL)


def age(root, seconds: float = 60.0) -> None:
    """Date every file and folder under ``root`` (and ``root``) ``seconds`` back."""
    then = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (then, then))
    for dirpath, dirnames, filenames in list(os.walk(root, topdown=False)):
        os.utime(dirpath, (then, then))


def snapshots(root) -> list:
    runs = root / ".fix_recompiles_cache" / "runs"
    return sorted(runs.glob("*.json")) if runs.is_dir() else []


def mark_snapshot(root) -> None:
    """Prefix the recorded stdout of the one snapshot with a marker line."""
    (path,) = snapshots(root)
    snap = json.loads(path.read_text())
    assert snap["output"], snap
    for chunk in snap["output"]:
        if chunk[0] == 1:
            chunk[1] = "REPLAYED\n" + chunk[1]
            break
    else:
        snap["output"].insert(0, [1, "REPLAYED\n"])
    resign(snap)
    path.write_text(json.dumps(snap))


def resign(snap: dict) -> None:
    """Sign an edited snapshot with this session's replay key (what only
    the key's owner can do: tests/conftest.py points XDG_CACHE_HOME here)."""
    from codemods.pipeline import replay

    with open(replay.key_path(), "rb") as fh:
        snap["mac"] = replay.signature(snap, fh.read())


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(FINDING)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    age(tmp_path)
    return tmp_path


def test_an_unchanged_report_is_replayed_byte_for_byte(tree):
    first = fr(tree, "pkg")
    assert first.returncode == 1 and b"FR001" in first.stdout
    assert len(snapshots(tree)) == 1
    second = fr(tree, "pkg")
    assert (second.returncode, second.stdout, second.stderr) == (first.returncode, first.stdout, first.stderr)
    mark_snapshot(tree)
    third = fr(tree, "pkg")
    assert third.stdout == b"REPLAYED\n" + first.stdout and third.returncode == 1


def test_stdout_and_stderr_keep_their_order_and_exit_code(tree):
    first = fr(tree, "pkg", "--format", "json")
    assert first.returncode == 1 and first.stderr  # the summary goes to stderr with a machine format
    mark_snapshot(tree)
    again = fr(tree, "pkg", "--format", "json")
    assert again.stdout == b"REPLAYED\n" + first.stdout and again.stderr == first.stderr and again.returncode == 1


def _replayed_after(tree, change) -> bool:
    first = fr(tree, "pkg")
    assert len(snapshots(tree)) == 1
    mark_snapshot(tree)
    change()
    return fr(tree, "pkg").stdout.startswith(b"REPLAYED")


def test_a_file_edited_runs_again(tree):
    def edit():
        path = tree / "pkg" / "train.py"
        path.write_text(FINDING.replace("x * 2", "x * 3"))  # same size
        os.utime(path, (time.time() - 30, time.time() - 30))

    assert not _replayed_after(tree, edit)


@pytest.mark.parametrize(
    "name, text",
    [
        ("pkg/new.py", CLEAN),  # a file added
        ("pkg/.gitignore", "train.py\n"),  # an ignore file written
        ("pyproject.toml", "[tool.fix-recompiles]\nignore = ['FR001']\n"),  # a configuration appears
    ],
)
def test_what_the_run_read_changing_runs_again(tree, name, text):
    assert not _replayed_after(tree, lambda: (tree / name).write_text(text))


def test_a_file_whose_permissions_change_runs_again(tree):
    # made unreadable, the run would report an error; the mode is compared
    # (ctime is not: mtime stays, and root could still read it here)
    path = tree / "pkg" / "train.py"
    assert not _replayed_after(tree, lambda: path.chmod(0o200))
    path.chmod(0o644)


def test_an_edited_configuration_runs_again(tree):
    (tree / "pyproject.toml").write_text("[tool.fix-recompiles]\nignore = []\n")
    age(tree)

    def edit():
        (tree / "pyproject.toml").write_text("[tool.fix-recompiles]\nignore = ['FR001']\n")

    assert not _replayed_after(tree, edit)
    assert fr(tree, "pkg").returncode == 0  # the new configuration counts


def test_other_arguments_are_another_snapshot(tree):
    fr(tree, "pkg")
    mark_snapshot(tree)
    assert not fr(tree, "pkg", "--ignore", "FR001").stdout.startswith(b"REPLAYED")


def test_a_tree_written_just_now_is_not_recorded(tmp_path):
    (tmp_path / "train.py").write_text(FINDING)
    assert fr(tmp_path, ".").returncode == 1
    assert snapshots(tmp_path) == []  # racily clean: a same-tick edit would go unseen


@pytest.mark.parametrize(
    "args",
    [
        ["--diff"],  # writes nothing, not even the cache
        ["--statistics"],  # counts the run itself
        ["--no-cache"],
        ["--fix"],
        ["--files-from", "list.txt"],
    ],
)
def test_runs_that_write_or_count_themselves_are_never_recorded(tree, args):
    (tree / "list.txt").write_text("pkg/train.py\n")
    age(tree)
    fr(tree, "pkg", *args)
    assert snapshots(tree) == []


def test_a_run_with_an_error_is_not_recorded(tree):
    (tree / "pkg" / "broken.py").write_bytes(b"import torch\nx = torch.compile(\n\x00")
    age(tree)
    assert fr(tree, "pkg").returncode == 2
    assert snapshots(tree) == []


def test_the_cache_switched_off_by_environment_neither_records_nor_replays(tree):
    fr(tree, "pkg")
    mark_snapshot(tree)
    assert not fr(tree, "pkg", env={"FIX_RECOMPILES_NO_CACHE": "1"}).stdout.startswith(b"REPLAYED")


@pytest.mark.parametrize("damage", ["{not json", "[]", '{"format": 1, "code": 7, "inputs": [], "output": []}', '{"format": 1, "code": 0, "inputs": [["x", "stat", "no"]], "output": []}'])
def test_a_damaged_snapshot_is_a_miss(tree, damage):
    first = fr(tree, "pkg")
    (path,) = snapshots(tree)
    path.write_text(damage)
    again = fr(tree, "pkg")
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)


def test_a_linked_runs_folder_is_never_read(tree, tmp_path_factory):
    fr(tree, "pkg")
    mark_snapshot(tree)
    runs = tree / ".fix_recompiles_cache" / "runs"
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "runs"
    runs.rename(elsewhere)
    runs.symlink_to(elsewhere, target_is_directory=True)
    assert not fr(tree, "pkg").stdout.startswith(b"REPLAYED")


def test_snapshots_are_bounded(tmp_path):
    from codemods.pipeline import replay

    for i in range(replay.KEEP + 3):
        path = tmp_path / f"{i:02d}.json"
        path.write_text("{}")
        os.utime(path, ns=(i * 10**9, i * 10**9))
    replay._prune(str(tmp_path))
    left = sorted(p.name for p in tmp_path.glob("*.json"))
    assert left == [f"{i:02d}.json" for i in range(3, replay.KEEP + 3)]  # the oldest went


def _forge(tree, text: str, code: int = 0) -> dict:
    """Rewrite the one snapshot to print ``text`` and exit ``code``, as
    someone without the replay key would: its signature left as it was."""
    (path,) = snapshots(tree)
    snap = json.loads(path.read_text())
    snap["output"], snap["code"] = [[1, text]], code
    path.write_text(json.dumps(snap))
    return snap


def test_a_forged_snapshot_is_never_replayed(tree):
    """Issue 29 item 7: a snapshot edited without the user's key (a file
    dropped into the cache folder) cannot make a run print "All checks
    passed!" and exit 0."""
    first = fr(tree, "pkg")
    assert first.returncode == 1
    _forge(tree, "All checks passed!\n")
    again = fr(tree, "pkg")
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)


def test_a_snapshot_signed_with_another_key_is_never_replayed(tree, tmp_path_factory):
    """One written on another machine or by another user (a CI cache
    restored into the folder): signed, but not with this user's key."""
    from codemods.pipeline import replay

    first = fr(tree, "pkg")
    snap = _forge(tree, "All checks passed!\n")
    snap["mac"] = replay.signature(snap, b"k" * 32)
    (path,) = snapshots(tree)
    path.write_text(json.dumps(snap))
    again = fr(tree, "pkg")
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
    # the same edit signed with this user's key is replayed: the key is what decides
    resign(snap)
    path.write_text(json.dumps(snap))
    assert fr(tree, "pkg").stdout == b"All checks passed!\n"


def test_without_a_readable_key_nothing_is_recorded(tree, tmp_path_factory):
    blocked = tmp_path_factory.mktemp("blocked")
    (blocked / "fix-recompiles").write_text("a file where the key's folder should be")
    assert fr(tree, "pkg", env={"XDG_CACHE_HOME": str(blocked)}).returncode == 1
    assert snapshots(tree) == []


# -- what a report reads beyond the files it takes ---------------------------------
KERNELS = "import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n"
CALLER = "import torch\nfrom proj.kernels import scale\n\nfor i in range(5):\n    scale(torch.ones(2), i / 7)\n"


def _same_as_a_fresh_run(cwd, *args, env=None) -> subprocess.CompletedProcess:
    """The run (replayed or not) and the same run without the cache agree."""
    again = fr(cwd, *args, env=env)
    fresh = fr(cwd, *args, "--no-cache", env=env)
    assert (again.returncode, again.stdout, again.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    return again


def test_a_package_marker_above_the_folder_run_on_runs_again(tmp_path):
    # module names (`proj.kernels`) come from the __init__.py files above a
    # file, beyond the folder the run walks: one written there renames every
    # module, and the call of a function compiled in another module is no
    # longer resolved
    proj = tmp_path / "x" / "proj"
    proj.mkdir(parents=True)
    (proj / "__init__.py").write_text("")
    (proj / "kernels.py").write_text(KERNELS)
    (proj / "train.py").write_text(CALLER)
    age(tmp_path)
    cwd = tmp_path / "x"
    first = fr(cwd, "proj")
    assert first.returncode == 1 and b"FR003" in first.stdout
    assert len(list((cwd / ".fix_recompiles_cache" / "runs").glob("*.json"))) == 1
    (cwd / "__init__.py").write_text("")
    os.utime(cwd / "__init__.py", (time.time() - 30, time.time() - 30))
    assert b"FR003" not in _same_as_a_fresh_run(cwd, "proj").stdout


def test_a_module_created_beside_a_file_run_alone_runs_again(tree):
    # a run on one file notes the modules of its project it imports and did
    # not read: `helper.py` written beside it adds the note
    (tree / "pkg" / "main.py").write_text("import helper\n" + FINDING)
    age(tree)
    first = fr(tree, "pkg/main.py")
    assert first.returncode == 1 and b"helper" not in first.stderr
    assert len(snapshots(tree)) == 1
    (tree / "pkg" / "helper.py").write_text("x = 1\n")
    os.utime(tree / "pkg" / "helper.py", (time.time() - 30, time.time() - 30))
    assert b"(helper)" in _same_as_a_fresh_run(tree, "pkg/main.py").stderr


def test_another_import_path_runs_again(tree, tmp_path_factory):
    # the default --target-torch is the first torch metadata on sys.path: a
    # folder put ahead of the installed torch (PYTHONPATH) changes it, and
    # before 2.10 ReduceLROnPlateau's finding is reported only
    (tree / "pkg" / "train.py").write_text(
        "import torch\n\nmodel = torch.nn.Linear(4, 1)\nopt = torch.optim.Adam(model.parameters(), lr=0.01)\n"
        "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, 'min', 0.5)\n\n\n@torch.compile\ndef train_step():\n    opt.step()\n\n\n"
        "def epoch(metric):\n    train_step()\n    sched.step(metric)\n"
    )
    (tree / "pkg" / "clean.py").unlink()
    old = tmp_path_factory.mktemp("oldtorch")
    (old / "torch-2.9.0.dist-info").mkdir()
    age(tree)
    age(old)
    first = fr(tree, "pkg")
    assert first.returncode == 1 and b"ReduceLROnPlateau" not in first.stdout
    assert len(snapshots(tree)) == 1
    env = {"PYTHONPATH": str(old) + os.pathsep + REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    assert b"ReduceLROnPlateau` puts a Python float back" in _same_as_a_fresh_run(tree, "pkg", env=env).stdout
