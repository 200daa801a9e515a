"""Issue 15, hardening: writes that never lose, caches that never inject,
inputs that never hang or kill the run, one set of settings.

Every test here failed before the change it covers.  Tests that need a
platform feature (FIFOs, symlinks, fork, a non-root user) skip with a reason
where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

import warm_python
from codemods.pipeline import runner, writer
from codemods.analysis.context import Settings
from test_cli import MARKER, MARKER_FIXED, REPO, SAFE, SAFE_FIXED, err, fr, out, read, write


def _run(tmp_path, *paths, **kw):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return runner.run(list(paths) or ["."], Settings(), **kw)
    finally:
        os.chdir(cwd)


# ------------------------------------------------------------- 3. edits during a run
def test_file_edited_between_read_and_write_is_not_overwritten(tmp_path):
    write(tmp_path, {"a.py": SAFE, "b.py": MARKER})
    result = _run(tmp_path)
    assert {r.display_path for r in result.results if r.changed} == {"a.py", "b.py"}
    edited = SAFE.replace("range(1, 4)", "range(1, 5)")  # the user saves while the run works
    write(tmp_path, {"a.py": edited})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        written = runner.write_results(result)
    finally:
        os.chdir(cwd)
    assert written == 1
    assert read(tmp_path, "a.py") == edited.encode()  # the edit survives
    assert read(tmp_path, "b.py") == MARKER_FIXED.encode()  # the rest is done
    assert [(p, r) for p, r in result.errors] == [("a.py", "changed on disk since it was read; fix not written (run again)")]
    assert not any(f.applied for r in result.results if r.display_path == "a.py" for f in r.findings)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_write_atomic_refuses_when_content_differs_from_expected(tmp_path):
    p = tmp_path / "x.py"
    p.write_bytes(b"new user text\n")
    with pytest.raises(writer.FileError, match="changed on disk"):
        writer.write_atomic(str(p), b"fixed\n", "x.py", expected=b"old text\n")
    assert p.read_bytes() == b"new user text\n"
    writer.write_atomic(str(p), b"fixed\n", "x.py", expected=b"new user text\n")
    assert p.read_bytes() == b"fixed\n"


# ------------------------------------------------------------- 4, 5. the cache
CACHE_ON = {"FIX_RECOMPILES_NO_CACHE": ""}
PAST = time.time() - 3600


def _age(path, when=PAST):
    os.utime(path, ns=(int(when * 1e9), int(when * 1e9)))


def _result_files(root):
    folder = os.path.join(str(root), ".fix_recompiles_cache")
    return [
        os.path.join(dp, n)
        for dp, _, names in os.walk(folder)
        for n in names
        if n.endswith(".json") and not n.startswith("index-") and os.path.basename(dp) != "runs"  # runs/: replay snapshots
    ]


def test_cache_never_writes_stale_fixed_text_over_a_user_edit(tmp_path):
    write(tmp_path, {"a.py": SAFE})
    _age(tmp_path / "a.py")
    first = fr(tmp_path, "a.py", env=CACHE_ON)  # report: the cache learns the file
    assert first.returncode == 1, err(first)
    # the user edits the file; same size, mtime put back (touch -d, a checkout, rsync -t)
    edited = SAFE.replace("x * 2", "x * 3")
    assert len(edited) == len(SAFE)
    write(tmp_path, {"a.py": edited})
    _age(tmp_path / "a.py")
    fixed = fr(tmp_path, "--fix", "a.py", env=CACHE_ON)
    assert fixed.returncode == 0, err(fixed)
    assert read(tmp_path, "a.py") == SAFE_FIXED.replace("x * 2", "x * 3").encode()


def test_edited_cache_entry_cannot_inject_code(tmp_path):
    write(tmp_path, {"a.py": SAFE})
    _age(tmp_path / "a.py")
    assert fr(tmp_path, "a.py", env=CACHE_ON).returncode == 1
    [cache_file] = _result_files(tmp_path)
    with open(cache_file) as fh:
        entries = json.load(fh)
    [entry] = entries.values()
    entry["result"]["new"] = "import os\nos.system('echo owned')\n"
    entry["result"]["fixable"] = True
    with open(cache_file, "w") as fh:
        json.dump(entries, fh)
    proc = fr(tmp_path, "--fix", "a.py", env=CACHE_ON)
    assert proc.returncode == 0, err(proc)
    assert read(tmp_path, "a.py") == SAFE_FIXED.encode()


@pytest.mark.parametrize(
    "bad",
    [
        {"size": 1},  # the wrong shape (KeyError: 'settings' before)
        ["not", "a", "dict"],
        None,
        {"size": "1", "mtime_ns": 0, "stored_ns": 0, "hash": "", "settings": "", "facts": "", "result": {}},
    ],
)
def test_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path, bad):
    write(tmp_path, {"a.py": MARKER, "clean.py": "x = 1\n"})
    _age(tmp_path / "clean.py")
    assert fr(tmp_path, ".", env=CACHE_ON).returncode == 1
    [cache_file] = _result_files(tmp_path)
    with open(cache_file) as fh:
        entries = json.load(fh)
    for key in entries:
        entries[key] = bad
    with open(cache_file, "w") as fh:
        json.dump(entries, fh)
    for _ in range(2):
        proc = fr(tmp_path, ".", env=CACHE_ON)
        assert proc.returncode == 1, err(proc)
        assert "Traceback" not in err(proc)
        assert "a.py:4:" in out(proc)


def test_cache_follows_no_symlink_in_its_folder(tmp_path):
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links on this platform")
    tree = tmp_path / "tree"
    outside = tmp_path / "outside"
    outside.mkdir()
    write(tree, {"a.py": MARKER})
    cache = tree / ".fix_recompiles_cache"
    cache.mkdir()
    os.symlink(str(outside / "planted"), str(cache / ".gitignore"))  # dangling
    proc = fr(tree, ".", env=CACHE_ON)
    assert proc.returncode == 1, err(proc)
    assert os.listdir(outside) == []  # nothing created outside the tree
    # a linked version folder is neither read nor written through
    shutil.rmtree(cache)
    cache.mkdir()
    os.symlink(str(outside), str(cache / "v2"))
    proc = fr(tree, ".", env=CACHE_ON)
    assert proc.returncode == 1, err(proc)
    assert os.listdir(outside) == []



def test_cache_folder_that_is_a_link_in_the_tree_is_not_used(tmp_path):
    # a cloned repository can hold `.fix_recompiles_cache -> ~/somewhere`:
    # nothing is read from or written to where it points
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links on this platform")
    tree = tmp_path / "tree"
    outside = tmp_path / "outside"
    outside.mkdir()
    write(tree, {"a.py": MARKER, "clean.py": "import torch\n@torch.compile\ndef g(x):\n    return x\n"})
    _age(tree / "clean.py")
    os.symlink(str(outside), str(tree / ".fix_recompiles_cache"))
    for args in ((".",), ("--fix", ".")):
        proc = fr(tree, *args, env=CACHE_ON)
        assert "Traceback" not in err(proc)
        assert os.listdir(outside) == [], args
    assert read(tree, "a.py") == MARKER_FIXED.encode()
    # a cache folder chosen by the user may be a link
    mine = tmp_path / "mine"
    mine.mkdir()
    os.symlink(str(mine), str(tmp_path / "cache-link"))
    assert fr(tree, ".", env=dict(CACHE_ON, FIX_RECOMPILES_CACHE_DIR=str(tmp_path / "cache-link"))).returncode == 0
    assert os.listdir(mine)


# ------------------------------------------------------------- 6. symlinked files
def test_fix_writes_through_a_symlink_and_keeps_the_link(tmp_path):
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links on this platform")
    write(tmp_path, {"outside/target.py": SAFE, "tree/plain.py": MARKER})
    os.symlink(os.path.join("..", "outside", "target.py"), str(tmp_path / "tree" / "link.py"))
    proc = fr(tmp_path / "tree", "--fix", ".")
    assert proc.returncode == 0, err(proc)
    assert os.path.islink(tmp_path / "tree" / "link.py")  # still a link
    assert read(tmp_path, "outside/target.py") == SAFE_FIXED.encode()  # the target is fixed
    assert read(tmp_path, "tree/plain.py") == MARKER_FIXED.encode()
    assert sorted(os.listdir(tmp_path / "outside")) == ["target.py"]  # no temp file left


# ------------------------------------------------------------- 7. stale temp files
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temp_files_of_a_killed_run_are_removed(tmp_path):
    # names as tempfile.mkstemp makes them: 8 characters of [a-z0-9_]
    stale_old = ".fix-recompiles-k3x_9a7q.tmp"  # an older version's name
    stale_dead = f".fix-recompiles-{_dead_pid()}-a1b2c3d4.tmp"  # its run was killed
    live = f".fix-recompiles-{os.getpid()}-zz9zz9zz.tmp"  # a run still going (this one)
    # not ours: the user's files, even with our prefix, are never removed
    others = ["other.tmp", ".fix-recompiles-notes.txt", "fix-recompiles-x.tmp", ".fix-recompiles-notes.tmp", ".fix-recompiles-12-backup_of_a.tmp"]
    files = {"w/a.py": SAFE, "untouched/b.py": "x = 1\n"}
    for name in [stale_old, stale_dead, live] + others:
        files[f"w/{name}"] = "partial"
    files[f"untouched/{stale_dead}"] = "partial"  # a folder the run does not write to
    write(tmp_path, files)
    for name in [stale_old, stale_dead] + others:
        _age(tmp_path / "w" / name, time.time() - 2 * 3600)
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 0, err(proc)
    assert read(tmp_path, "w/a.py") == SAFE_FIXED.encode()
    assert sorted(os.listdir(tmp_path / "w")) == sorted(["a.py", live] + others)
    assert stale_dead in os.listdir(tmp_path / "untouched")


def test_stale_temp_removal_never_follows_or_removes_a_symlink(tmp_path):
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links on this platform")
    (tmp_path / "keep.py").write_text("precious")
    link = tmp_path / f".fix-recompiles-{_dead_pid()}-abc_1234.tmp"
    os.symlink(str(tmp_path / "keep.py"), str(link))
    assert writer.remove_stale_temps(str(tmp_path)) == 0
    assert os.path.islink(link) and (tmp_path / "keep.py").read_text() == "precious"


# ------------------------------------------------------------- 8. FIFOs and other special files
@pytest.mark.parametrize("named", [False, True], ids=["found-in-folder", "named-on-command-line"])
def test_fifo_is_never_opened(tmp_path, named):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    write(tmp_path, {"good.py": SAFE})
    os.mkfifo(str(tmp_path / "x.py"))
    args = ["--fix", "x.py", "good.py"] if named else ["--fix", "."]
    proc = fr(tmp_path, *args)  # before: blocked forever opening x.py (the helper's timeout fired)
    assert proc.returncode == 2, err(proc)
    lines = [line for line in err(proc).splitlines() if line.startswith("error:")]
    assert lines == ["error: x.py: not a regular file (a FIFO); skipped"]
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()
    assert stat.S_ISFIFO(os.lstat(tmp_path / "x.py").st_mode)



def test_special_files_among_the_settings_are_never_opened(tmp_path):
    # a FIFO where a .gitignore or pyproject.toml is looked for is not read
    # (ignored, as a missing one); a FIFO given to --config is an error line
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    write(tmp_path, {"sub/good.py": SAFE})
    os.mkfifo(str(tmp_path / "sub" / ".gitignore"))
    os.mkfifo(str(tmp_path / "pyproject.toml"))
    os.mkfifo(str(tmp_path / "conf.toml"))
    proc = fr(tmp_path, ".")
    assert proc.returncode == 1, err(proc)
    proc = fr(tmp_path, "--config", "conf.toml", ".")
    assert proc.returncode == 2
    assert err(proc).strip() == "error: --config: conf.toml: not a regular file"


# ------------------------------------------------------------- 9. permission errors (as a non-root user)
def _as_nobody():
    """The command prefix running a process as ``nobody`` (tests run as root,
    who may write anywhere), or skip."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        pytest.skip("permissions are POSIX-only here")
    if os.geteuid() != 0:
        return []  # already a normal user
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and no setpriv to become a normal user")
    probe = subprocess.run([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot become nobody: {probe.stderr.decode().strip()}")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def shared_tmp():
    """A folder a normal user can reach (pytest's tmp_path is root-only)."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="fr-perm-", dir="/tmp")
    os.chmod(folder, 0o755)
    yield folder
    for dp, dn, _ in os.walk(folder):
        for d in dn:
            os.chmod(os.path.join(dp, d), 0o755)
    shutil.rmtree(folder, ignore_errors=True)


def _fr_as(prefix, cwd, *args):
    from test_cli import COMMAND

    env = dict(os.environ)
    env["PYTHONPATH"] = REPO
    env["HOME"] = cwd
    return subprocess.run(prefix + COMMAND + list(args), cwd=cwd, capture_output=True, env=env, timeout=120)


def test_read_only_folder_is_one_error_line_and_the_rest_is_fixed(shared_tmp):
    prefix = _as_nobody()
    write(shared_tmp, {"a_ro/a.py": SAFE, "b_rw/b.py": SAFE, "c_noread/c.py": SAFE})
    for dp, dn, fn in os.walk(shared_tmp):
        for name in dn + fn:
            os.chown(os.path.join(dp, name), 65534, 65534)
    os.chown(shared_tmp, 65534, 65534)
    os.chmod(os.path.join(shared_tmp, "a_ro"), 0o555)  # read-only folder: no temp file, no rename
    os.chmod(os.path.join(shared_tmp, "c_noread"), 0o000)  # cannot even be listed
    proc = _fr_as(prefix, shared_tmp, "--fix", ".")
    stderr = err(proc)
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = sorted(line for line in stderr.splitlines() if line.startswith("error:"))
    assert len(lines) == 2, stderr
    assert lines[0].startswith("error: a_ro/a.py: cannot write: Permission denied")
    assert lines[1] == "error: c_noread: cannot read folder: Permission denied"
    assert read(shared_tmp, "a_ro/a.py") == SAFE.encode()
    assert read(shared_tmp, "b_rw/b.py") == SAFE_FIXED.encode()


# ------------------------------------------------------------- 11. a form feed at the start of a line
FORM_FEED = SAFE.replace("@torch.compile", "\f@torch.compile")


def test_form_feed_at_the_start_of_a_code_line_is_fixed_and_kept(tmp_path):
    from codemods.pipeline.engine import process_source

    data = FORM_FEED.encode()
    compile(data, "a.py", "exec")  # valid Python
    result = process_source("a.py", "a.py", data, Settings())
    assert result.error is None, result.error
    assert result.new == SAFE_FIXED.replace("@torch.compile", "\f@torch.compile").encode()


def test_form_feed_in_an_indentation_is_one_clear_line_not_an_internal_error(tmp_path):
    """Issue 29, item 7: Python resets the column at a form feed; libcst's
    tokenizer does not ("no matching outer block for dedent").  The report
    still works; a fix says why it is not applied; exit 2; nothing written."""
    src = SAFE.replace("@torch.compile", "class M:\n\f    def g(self):\n        return 1\n\n\n@torch.compile", 1)
    compile(src, "a.py", "exec")  # valid Python
    write(tmp_path, {"a.py": src})
    report = fr(tmp_path, ".")
    assert report.returncode == 1 and "FR001" in out(report), err(report)
    for mode in (["--fix"], ["--diff"]):
        proc = fr(tmp_path, *mode, ".")
        assert proc.returncode == 2, err(proc)
        line = next(ln for ln in err(proc).splitlines() if ln.startswith("error:"))
        assert line.startswith("error: a.py: fixes not applied: a form feed in the indentation of line "), line
        assert "internal error" not in out(proc) + err(proc)
        assert read(tmp_path, "a.py") == src.encode()


# ------------------------------------------------------------- 13. summary and diff headers
@pytest.mark.parametrize("mode", [[], ["--fix"], ["--diff"]], ids=["report", "fix", "diff"])
def test_all_checks_passed_is_never_printed_next_to_errors(tmp_path, mode):
    write(tmp_path, {"bad.py": b"import torch\ntorch.compile(f, dynamic=False)\ndef f(:\n", "clean.py": "x = 1\n"})
    proc = fr(tmp_path, *mode, ".")
    assert proc.returncode == 2, err(proc)
    assert "All checks passed!" not in out(proc) + err(proc)
    assert "1 file could not be processed (see above)." in out(proc) + err(proc)
    clean = fr(tmp_path, *mode, "clean.py")
    assert clean.returncode == 0
    if not mode or mode == ["--fix"]:
        assert "All checks passed!" in out(clean)


def test_diff_of_a_path_outside_the_current_folder_applies(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    write(tmp_path, {"outside/a.py": MARKER, "cwd/b.py": MARKER})
    proc = fr(tmp_path / "cwd", "--diff", str(tmp_path / "outside" / "a.py"))
    assert proc.returncode == 1, err(proc)
    patch = proc.stdout
    header = ("--- a" + str(tmp_path / "outside" / "a.py")).encode()
    assert patch.startswith(header + b"\n"), patch[:200]
    check = subprocess.run(["git", "apply", "-"], input=patch, cwd="/", capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    assert read(tmp_path, "outside/a.py") == MARKER_FIXED.encode()


# ------------------------------------------------------------- 12. one set of settings
PYPROJECT = '[tool.fix-recompiles]\nignore = ["FR003"]\ntarget-torch = "2.8"\ndynamic-fix = "true"\n'


def test_run_resolves_settings_like_check(tmp_path, monkeypatch):
    import cli
    from codemods.modes import traced as traced_mode


    write(tmp_path, {"pyproject.toml": PYPROJECT, "train.py": "print(1)\n"})
    monkeypatch.chdir(tmp_path)
    seen = {}

    def fake_run(cmd, settings, **kw):
        seen["cmd"], seen["settings"] = cmd, settings
        return 0

    monkeypatch.setattr(traced_mode, "run", fake_run)
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--diff", "--", "python", "train.py"])
    assert exc.value.code == 0
    assert seen["cmd"] == ["python", "train.py"]
    expected, _cfg = cli.resolve_settings(["."])
    assert seen["settings"] == expected
    assert seen["settings"].ignore == frozenset({"FR003"})
    assert seen["settings"].target_torch == (2, 8)
    assert seen["settings"].dynamic_fix == "true"
    # the command line still overrides the file
    with pytest.raises(SystemExit):
        cli.main(["run", "--ignore", "FR002", "--target-torch", "2.5", "--", "python", "train.py"])
    assert seen["settings"].ignore == frozenset({"FR002"}) and seen["settings"].target_torch == (2, 5)


# ------------------------------------------------------------- 14. help and ruff's options
@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["run", "--help"], ["rules", "--help"]])
def test_help_has_no_type_placeholders(tmp_path, args):
    proc = fr(tmp_path, *args)
    assert proc.returncode == 0, err(proc)
    text = out(proc)
    for placeholder in ("<bool>", "<list[", "<str>", "<int>"):
        assert placeholder not in text, text
    if args[0] == "run":
        assert "Usage: fix-recompiles run [OPTIONS] -- CMD [ARGS]..." in text
    if args[0] == "check":
        for option in ("--stdin-filename PATH", "--quiet", "--exit-zero", "--exclude PATTERNS", "--config PATH", "--select CODES"):
            assert option in text


def _stdin(tmp_path, data, *args):
    from test_cli import COMMAND

    env = dict(os.environ, PYTHONPATH=REPO)
    # a fork of a process with the CLI imported where it can stand in for a new one
    warm = warm_python.try_run(
        (COMMAND[1:] if COMMAND[0] == sys.executable else COMMAND) + list(args), kind="cli", input=data.encode(), cwd=str(tmp_path), env=env, timeout=120
    )
    if warm is not None:
        return warm
    return subprocess.run(COMMAND + list(args), input=data.encode(), cwd=str(tmp_path), capture_output=True, env=env, timeout=120)


def test_stdin_report_fix_and_diff(tmp_path):
    proc = _stdin(tmp_path, SAFE, "-", "--stdin-filename", "pkg/a.py")
    assert proc.returncode == 1, err(proc)
    assert out(proc).startswith("pkg/a.py:2:")
    fixed = _stdin(tmp_path, SAFE, "--fix", "-", "--stdin-filename", "pkg/a.py")
    assert fixed.returncode == 0, err(fixed)
    assert out(fixed) == SAFE_FIXED  # the fixed source, nothing else, on stdout
    clean = _stdin(tmp_path, "x = 1\n", "--fix", "-")
    assert clean.returncode == 0 and out(clean) == "x = 1\n"
    diff = _stdin(tmp_path, MARKER, "--diff", "-", "--stdin-filename", "b.py")
    assert diff.returncode == 1
    assert out(diff).startswith("--- a/b.py\n+++ b/b.py\n")
    bad = _stdin(tmp_path, "import torch\ntorch.compile(f, dynamic=False)\ndef f(:\n", "--fix", "-", "--stdin-filename", "c.py")
    assert bad.returncode == 2
    assert [line for line in err(bad).splitlines() if line.startswith("error:")][0].startswith("error: c.py: syntax error")
    assert out(bad).startswith("import torch\n")  # the editor keeps its text
    assert os.listdir(tmp_path) == []  # nothing written to disk


def test_stdin_filename_picks_configuration_and_per_file_ignores(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.fix-recompiles]\nper-file-ignores = { "gen/*" = ["FR002"] }\n'})
    assert _stdin(tmp_path, MARKER, "-", "--stdin-filename", "gen/x.py").returncode == 0
    assert _stdin(tmp_path, MARKER, "-", "--stdin-filename", "src/x.py").returncode == 1


def test_quiet_prints_findings_and_errors_only(tmp_path):
    write(tmp_path, {"a.py": MARKER, "clean.py": "x = 1\n"})
    proc = fr(tmp_path, "-q", ".")
    assert proc.returncode == 1
    assert [line.split(":")[0] for line in out(proc).splitlines()] == ["a.py"]
    assert err(proc) == ""
    clean = fr(tmp_path, "--quiet", "clean.py")
    assert clean.returncode == 0 and out(clean) == "" and err(clean) == ""


def test_exit_zero_with_findings_but_not_with_errors(tmp_path):
    write(tmp_path, {"a.py": MARKER})
    assert fr(tmp_path, "--exit-zero", ".").returncode == 0
    assert fr(tmp_path, "--exit-zero", "--diff", ".").returncode == 0
    assert fr(tmp_path, "--exit-zero", "missing.py").returncode == 2


def test_exclude_replaces_the_configured_exclude(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.fix-recompiles]\nexclude = ["a.py"]\n', "a.py": MARKER, "b.py": MARKER, "gen/c.py": MARKER})
    assert [line.split(":")[0] for line in out(fr(tmp_path, ".")).splitlines() if ".py:" in line] == ["b.py", "gen/c.py"]
    proc = fr(tmp_path, "--exclude", "b.py,gen/", ".")
    assert [line.split(":")[0] for line in out(proc).splitlines() if ".py:" in line] == ["a.py"]


def test_config_path(tmp_path):
    write(tmp_path, {"conf/settings.toml": '[tool.fix-recompiles]\nignore = ["FR002"]\n', "a.py": MARKER, "pyproject.toml": '[tool.fix-recompiles]\nselect = ["FR002"]\n'})
    assert fr(tmp_path, ".").returncode == 1
    assert fr(tmp_path, "--config", "conf/settings.toml", ".").returncode == 0
    missing = fr(tmp_path, "--config", "nope.toml", ".")
    assert missing.returncode == 2 and err(missing).strip() == "error: --config: nope.toml: no such file"
    write(tmp_path, {"other.toml": "[tool.black]\n"})
    assert fr(tmp_path, "--config", "other.toml", ".").returncode == 2


# ------------------------------------------------------------- 10. a file that kills its worker, limits per file
def _tree(tmp_path, extra):
    files = {f"ok{i}.py": MARKER for i in range(6)}
    files.update(extra)
    write(tmp_path, files)


def test_worker_that_segfaults_is_that_files_error(tmp_path, monkeypatch):
    import signal

    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("needs fork: the workers must inherit the patched engine")
    _tree(tmp_path, {"crash.py": MARKER})
    real = runner.process_source

    def crashing(path, display, data, *args, **kw):
        if display == "crash.py":
            import faulthandler

            faulthandler.disable()  # no C traceback of the deliberate crash in the test output
            os.kill(os.getpid(), signal.SIGSEGV)  # what libcst did on a 20,000-term expression
        return real(path, display, data, *args, **kw)

    monkeypatch.setattr(runner, "process_source", crashing)
    result = _run(tmp_path, jobs=2)  # before: BrokenProcessPool, no result at all
    assert result.errors == [("crash.py", "the process analysing this file died (killed by SIGSEGV); skipped")]
    fixed = sorted(r.display_path for r in result.results if r.changed)
    assert fixed == [f"ok{i}.py" for i in range(6)]


def test_worker_mark_names_the_file_it_is_on(tmp_path):
    """A worker notes each file before it looks at it, in one file opened once
    (a shorter path written over a longer one, a path that is not UTF-8):
    the parent reads back exactly the last one."""
    marks = str(tmp_path)
    runner._W.pop("mark_fd", None)
    try:
        fd = runner._mark_fd(marks)
        assert fd is not None and runner._mark_fd(marks) == fd  # opened once per worker
        odd = os.fsdecode(b"dir/caf\xe9.py")
        for path in ("a/very/long/path/to/some/module.py", "b.py", odd, "c.py"):
            runner._write_mark(fd, path)
            assert runner._read_mark(os.path.join(marks, str(os.getpid()))) == path
    finally:
        fd = runner._W.pop("mark_fd", None)
        if fd is not None:
            os.close(fd)


def test_memory_error_is_that_files_error(tmp_path, monkeypatch):
    _tree(tmp_path, {"mem.py": MARKER.replace("import torch", "import torch  # compile")})
    real = runner.parse_for_index

    def exhausted(data, *args):
        if b"# compile" in data:
            raise MemoryError
        return real(data, *args)

    monkeypatch.setattr(runner, "parse_for_index", exhausted)
    result = _run(tmp_path, jobs=1)  # before: MemoryError ended the run
    assert result.errors == [("mem.py", "out of memory while analysing; skipped")]
    assert len([r for r in result.results if r.changed]) == 6


def test_file_over_the_size_limit_is_one_error_line(tmp_path):
    big = SAFE + "# " + "x" * 100 + "\n"
    big = big * (runner.MAX_FILE_BYTES // len(big) + 1)
    write(tmp_path, {"big.py": big, "a.py": MARKER, "data.py": "x" * (runner.MAX_FILE_BYTES + 10)})
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 2, err(proc)
    lines = [line for line in err(proc).splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: big.py: file too large to analyse (4.0 MiB, limit 4 MiB); skipped"), lines
    assert read(tmp_path, "a.py") == MARKER_FIXED.encode()
    assert read(tmp_path, "big.py") == big.encode()


def test_expression_over_the_depth_limit_is_one_error_line(tmp_path):
    deep = SAFE + "y = (" + " + ".join(["1"] * 1500) + ")\n"  # libcst needs seconds; 20,000 terms segfaulted it
    write(tmp_path, {"deep.py": deep, "a.py": MARKER})
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 2, err(proc)
    lines = [line for line in err(proc).splitlines() if line.startswith("error:")]
    assert lines == ["error: deep.py: expression too deeply nested to analyse (depth 1001, limit 1000); skipped"], lines
    assert read(tmp_path, "a.py") == MARKER_FIXED.encode()
    assert read(tmp_path, "deep.py") == deep.encode()



@pytest.mark.parametrize(
    "expr",
    [" + ".join(["1"] * 990), "f(" * 190 + "1" + ")" * 190, "a" + "[0]" * 990, "-" * 990 + "1"],
    ids=["sum", "calls", "subscripts", "unary"],
)
def test_expression_under_the_depth_limit_is_analysed_and_fixed(tmp_path, expr):
    # valid Python the interpreter compiles, nested less than the limit: the
    # analysis and libcst's rendering recurse a few frames per level, which
    # Python's default recursion limit (1000) cut at about 330 levels
    deep = SAFE + "y = " + expr + "\n"
    compile(deep, "deep.py", "exec")
    write(tmp_path, {"deep.py": deep})
    proc = fr(tmp_path, "--fix", "deep.py")
    assert proc.returncode == 0, err(proc)
    assert read(tmp_path, "deep.py") == (SAFE_FIXED + "y = " + expr + "\n").encode()


# ------------------------------------------------------------- 17. pathspec's gitignore patterns
def test_discovery_and_per_file_ignores_use_no_deprecated_pattern(tmp_path):
    import warnings

    from codemods.pipeline.config import PerFileIgnores
    from codemods.pipeline.discovery import discover

    write(tmp_path, {".gitignore": "gen/\n*.tmp.py\n!keep.tmp.py\n", "a.py": "", "gen/b.py": "", "c.tmp.py": "", "keep.tmp.py": ""})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # GitWildMatchPattern warns
        found = discover([str(tmp_path)], ["zz/"])
        pfi = PerFileIgnores([("tests/*", ["FR003"])], str(tmp_path))
    assert sorted(os.path.basename(f) for f in found.files) == ["a.py", "keep.tmp.py"]
    assert pfi.codes_for(str(tmp_path / "tests" / "t.py")) == frozenset({"FR003"})
    assert pfi.codes_for(str(tmp_path / "src" / "t.py")) == frozenset()


def test_exclude_patterns_use_no_deprecated_pattern(tmp_path):
    import warnings

    from codemods.pipeline.selection import filter_excludes as _filter_excludes

    write(tmp_path, {"a.py": "", "gen/b.py": "", "c.tmp.py": "", "keep.tmp.py": ""})
    files = [str(tmp_path / n) for n in ("a.py", "gen/b.py", "c.tmp.py", "keep.tmp.py")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # GitWildMatchPattern warns
        kept = _filter_excludes(files, ["gen/", "*.tmp.py", "!keep.tmp.py"], str(tmp_path), [], False)
    assert sorted(os.path.basename(f) for f in kept) == ["a.py", "keep.tmp.py"]


# ------------------------------------------------------------- 15. one namespace
def test_wheel_installs_one_package_and_runs_as_a_module(tmp_path):
    """The wheel holds fix_recompiles/ only (no top-level `cli` or `codemods`),
    and `python -m fix_recompiles` works -- even with another `codemods` on
    the path (here: this checkout's own source folder)."""
    import glob
    import zipfile

    wheels = tmp_path / "wheels"
    source = tmp_path / "src"  # a copy: the build leaves build/ and *.egg-info where it runs
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "tests", "benchmarks", "build", "*.egg-info", ".*cache*", "__pycache__"))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)],
        capture_output=True, cwd=str(tmp_path), timeout=600,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {build.stderr.decode()[-300:]}")
    [wheel] = glob.glob(str(wheels / "*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"fix_recompiles", "fix_recompiles-0.1.0.dist-info"}
    entry = zipfile.ZipFile(wheel).read("fix_recompiles-0.1.0.dist-info/entry_points.txt").decode()
    assert "fix-recompiles = fix_recompiles.__main__:main" in entry
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel], check=True, timeout=300)
    write(tmp_path, {"work/a.py": MARKER})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), REPO]))  # REPO: a foreign `codemods` and `cli`
    proc = subprocess.run([sys.executable, "-m", "fix_recompiles", "--fix", "a.py"], cwd=str(tmp_path / "work"), capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, err(proc)
    assert read(tmp_path, "work/a.py") == MARKER_FIXED.encode()
    # another package named `codemods` in the same process, imported before
    # or after ours: each keeps its own modules (ours were aliased over it)
    foreign = tmp_path / "foreign"
    write(foreign, {"codemods/__init__.py": "NAME = 'foreign'\n"})
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(foreign)])
    probe = (
        "import sys\n"
        "{first}\n"
        "{second}\n"
        "import codemods\n"
        "assert codemods.NAME == 'foreign', codemods\n"
        "assert not [m for m in sys.modules if m.startswith('codemods.')], sorted(sys.modules)\n"
        "from fix_recompiles.cli import main\n"
        "main(['--fix', 'a.py'])\n"
    )
    for first, second in (("import codemods", "import fix_recompiles.cli"), ("import fix_recompiles.cli", "import codemods")):
        write(tmp_path, {"work/a.py": MARKER})
        proc = subprocess.run(
            [sys.executable, "-c", probe.format(first=first, second=second)],
            cwd=str(tmp_path / "work"), capture_output=True, env=env, timeout=120,
        )
        assert proc.returncode == 0, err(proc)
        assert read(tmp_path, "work/a.py") == MARKER_FIXED.encode()


def test_index_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path):
    write(tmp_path, {"a.py": MARKER})
    _age(tmp_path / "a.py")
    assert fr(tmp_path, ".", env=CACHE_ON).returncode == 1
    folder = tmp_path / ".fix_recompiles_cache"
    [index] = [os.path.join(dp, n) for dp, _, names in os.walk(folder) for n in names if n.startswith("index-")]
    with open(index) as fh:
        entries = json.load(fh)
    for key in entries:
        entries[key] = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    with open(index, "w") as fh:
        json.dump(entries, fh)
    proc = fr(tmp_path, ".", env=CACHE_ON)
    assert "Traceback" not in err(proc)
    assert proc.returncode == 1, err(proc)


def test_exclude_with_force_exclude_drops_named_files(tmp_path):
    write(tmp_path, {"a.py": MARKER, "gen/b.py": MARKER})
    assert fr(tmp_path, "--exclude", "gen/", "gen/b.py").returncode == 1  # named: kept, as ruff does
    proc = fr(tmp_path, "--exclude", "gen/", "--force-exclude", "gen/b.py", "a.py")
    assert [line.split(":")[0] for line in out(proc).splitlines() if ".py:" in line] == ["a.py"]
    assert fr(tmp_path, "--exclude", "gen/", "--force-exclude", "gen/b.py").returncode == 0


# ------------------------------------------------------- 2. a fix shared by two findings
TWO_OPTIMIZERS = """import torch
a = torch.nn.Linear(4, 4)
b = torch.nn.Linear(4, 4)
opt_a = torch.optim.SGD(a.parameters(), lr=0.01)
opt_b = torch.optim.SGD(b.parameters(), lr=0.01)


def set_lr(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr


@torch.compile
def step():
    opt_a.step()
    opt_b.step()


for i in range(6):
    set_lr(opt_a, 0.01 / (i + 1))
    set_lr(opt_b, 0.01 / (i + 1))
    step()
"""


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_finding_fixed_by_another_findings_fix_is_not_left_remaining(tmp_path, fmt):
    # issue 15 item 2's script: the second optimizer's finding is fixed by the
    # first one's edits (one lr write serves both); after --fix nothing remains
    write(tmp_path, {"train.py": TWO_OPTIMIZERS})
    assert fr(tmp_path, "train.py").returncode == 1
    proc = fr(tmp_path, "--fix", "--format", fmt, "train.py")
    assert "Traceback" not in err(proc), err(proc)
    assert read(tmp_path, "train.py").count(b"torch.tensor(0.01)") == 2
    assert proc.returncode == 0, out(proc) + err(proc)
    if fmt == "text":
        assert "Found 2 findings (2 fixed in 1 file, 0 remaining)." in out(proc)
    proc = fr(tmp_path, "train.py")
    assert proc.returncode == 0 and "All checks passed!" in out(proc)
