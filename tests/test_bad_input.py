"""Bad input: each kind gets one ``error: PATH: reason`` line on stderr (no
traceback), the run goes on with the other files, the bad file stays
byte-identical, and the exit code is 2.

Tests run as root, so unreadable files are simulated in-process (``open``
monkeypatched) and with dangling symlinks; files vanishing mid-run are
simulated by deleting them between discovery and reading, or before writing.
"""

from __future__ import annotations

import ast

import io
import os
import re
import stat
from typing import Iterable, List

import libcst as cst
import pytest

import cli
from codemods.pipeline import engine, runner, writer
from codemods.findings import Edit, Safety
from codemods.transforms import REGISTRY
from codemods.transforms.base import Rule
from test_cli import MARKER, MARKER_FIXED, SAFE, SAFE_FIXED, finding_lines, fr, read, snapshot, write

ERROR_LINE = re.compile(r"^error: (?P<path>[^:]+): (?P<reason>.+)$")

BAD_FILES = {
    "syntax.py": (b"import torch\n@torch.compile(dynamic=False)\ndef f(:\n    return x\n", "syntax error at line 3"),
    "indent.py": (b"import torch\ntorch.compile(f, dynamic=False)\n  x = 1\n", "syntax error"),
    "continuation.py": (b"import torch\ntorch.compile(f, dynamic=False)\nx = 1 \\", "syntax error"),
    "badutf8.py": (b"import torch\ns = 'caf\xe9'\ntorch.compile(f, dynamic=False)\n", "cannot decode"),
    "badascii.py": (b"# -*- coding: ascii -*-\nimport torch\ns = 'caf\xc3\xa9'\ntorch.compile(f, dynamic=False)\n", "cannot decode"),
    "badcookie.py": (b"# -*- coding: klingon -*-\nimport torch\ntorch.compile(f, dynamic=False)\n", "unknown encoding"),
    "binary.py": (b"\x7fELF\x02\x01\x01\x00\x00torch.compile\x00\x00\xff\xfe", "binary"),
    "utf16.py": ("import torch\ntorch.compile(f, dynamic=False)\n".encode("utf-16"), "binary"),
    "deep.py": (b"import torch\ntorch.compile(f, dynamic=False)\nx = " + b"-" * 1000 + b"1\n", "too deeply nested"),
}


def error_lines(stderr: str) -> List[re.Match]:
    return [m for m in (ERROR_LINE.match(line) for line in stderr.splitlines()) if m]


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_each_bad_file_is_named_with_a_reason(tmp_path, name):
    data, reason = BAD_FILES[name]
    write(tmp_path, {name: data, "good.py": SAFE})
    proc = fr(tmp_path, "--fix", ".")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    errors = error_lines(stderr)
    assert [e["path"] for e in errors] == [name]
    assert reason in errors[0]["reason"]
    assert read(tmp_path, name) == data
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()
    assert "1 file could not be processed" in proc.stdout.decode()


def test_dangling_symlink_is_reported(tmp_path):
    write(tmp_path, {"good.py": SAFE})
    os.symlink(str(tmp_path / "gone.py"), str(tmp_path / "link.py"))
    for args in (["."], ["link.py"]):
        proc = fr(tmp_path, *args)
        stderr = proc.stderr.decode()
        assert proc.returncode == 2
        assert "Traceback" not in stderr
        [e] = error_lines(stderr)
        assert e["path"] == "link.py" and "symbolic link" in e["reason"]


def test_must_show_folder_with_good_and_bad_files(tmp_path):
    """--fix fixes the good file, leaves the others byte-identical, names each
    on stderr without a traceback, exits 2."""
    bad = {
        "proj/broken.py": BAD_FILES["syntax.py"][0],
        "proj/latin.py": BAD_FILES["badutf8.py"][0],
        "proj/blob.py": BAD_FILES["binary.py"][0],
    }
    write(tmp_path, dict(bad, **{"proj/good.py": SAFE, "proj/plain.py": b"def f():\n    return 1\n"}))
    proc = fr(tmp_path, "--fix", "proj")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert sorted(e["path"] for e in error_lines(stderr)) == sorted(bad)
    assert len(stderr.strip().splitlines()) == len(bad)  # one line each, nothing else
    for rel, data in bad.items():
        assert read(tmp_path, rel) == data
    assert read(tmp_path, "proj/good.py") == SAFE_FIXED.encode()
    assert read(tmp_path, "proj/plain.py") == b"def f():\n    return 1\n"
    # the same with --diff: the good file's patch, nothing written, still 2
    write(tmp_path, {"proj/good.py": SAFE})
    before = snapshot(tmp_path)
    proc = fr(tmp_path, "--diff", "proj")
    assert proc.returncode == 2
    assert proc.stdout.decode().startswith("--- a/proj/good.py\n+++ b/proj/good.py\n")
    assert snapshot(tmp_path) == before
    # and a report run
    proc = fr(tmp_path, "proj")
    assert proc.returncode == 2
    assert [m["path"] for m in finding_lines(proc.stdout.decode())] == ["proj/good.py"]


def test_missing_path_exits_2(tmp_path):
    proc = fr(tmp_path, "missing.py", "missing_dir")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2
    assert sorted(e["path"] for e in error_lines(stderr)) == ["missing.py", "missing_dir"]
    assert "Traceback" not in stderr


# ------------------------------------------------------------ in-process cases


def run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def test_unreadable_file(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"locked.py": SAFE, "good.py": SAFE})
    monkeypatch.chdir(tmp_path)
    real_open = open

    def fake_open(path, *args, **kwargs):
        if os.path.basename(str(path)) == "locked.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(engine, "open", fake_open, raising=False)
    code, out, err = run_main(["--fix", "."], capsys)
    assert code == 2
    assert err.splitlines() == ["error: locked.py: cannot read: Permission denied"]
    assert read(tmp_path, "locked.py") == SAFE.encode()
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()


def test_file_vanishes_between_discovery_and_reading(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a_gone.py": SAFE, "good.py": SAFE})
    monkeypatch.chdir(tmp_path)
    from codemods.pipeline import selection

    real_discover = selection.discover

    def discover_then_delete(paths, excludes):
        found = real_discover(paths, excludes)
        os.unlink("a_gone.py")
        return found

    monkeypatch.setattr(selection, "discover", discover_then_delete)
    code, out, err = run_main(["--fix", "."], capsys)
    assert code == 2
    [e] = error_lines(err)
    assert e["path"] == "a_gone.py" and "vanished" in e["reason"]
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()


def test_file_vanishes_before_writing(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a_gone.py": SAFE, "good.py": SAFE})
    monkeypatch.chdir(tmp_path)
    real_write = writer.write_atomic

    def delete_then_write(path, data, display=None, **kw):
        if os.path.basename(path) == "a_gone.py":
            os.unlink(path)
        return real_write(path, data, display, **kw)

    monkeypatch.setattr(writer, "write_atomic", delete_then_write)
    code, out, err = run_main(["--fix", "."], capsys)
    assert code == 2
    [e] = error_lines(err)
    assert e["path"] == "a_gone.py" and "vanished" in e["reason"]
    assert not os.path.exists(tmp_path / "a_gone.py")  # not re-created
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()
    assert sorted(os.listdir(tmp_path)) == ["good.py"]  # no temp file left


def test_failed_rename_leaves_original_and_no_temp_file(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": SAFE})
    os.chmod(tmp_path / "a.py", 0o604)
    monkeypatch.chdir(tmp_path)

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, "replace", failing_replace)
    code, out, err = run_main(["--fix", "."], capsys)
    assert code == 2
    [e] = error_lines(err)
    assert e["path"] == "a.py" and "cannot write" in e["reason"]
    assert read(tmp_path, "a.py") == SAFE.encode()
    assert sorted(os.listdir(tmp_path)) == ["a.py"]
    assert stat.S_IMODE(os.stat(tmp_path / "a.py").st_mode) == 0o604
    # the finding was not fixed, so it is still reported
    assert [m["path"] for m in finding_lines(out)] == ["a.py"]


def test_write_goes_through_a_temp_file_in_the_same_folder(tmp_path, monkeypatch):
    write(tmp_path, {"sub/a.py": "old\n"})
    os.chmod(tmp_path / "sub" / "a.py", 0o755)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((os.path.dirname(os.path.abspath(src)), os.path.abspath(dst), stat.S_IMODE(os.stat(src).st_mode)))
        return real_replace(src, dst)

    monkeypatch.setattr(writer.os, "replace", spy)
    writer.write_atomic(str(tmp_path / "sub" / "a.py"), b"new\n")
    assert seen == [(str(tmp_path / "sub"), str(tmp_path / "sub" / "a.py"), 0o755)]
    assert read(tmp_path, "sub/a.py") == b"new\n"


# ------------------------------------------------------------ internal errors


class _Broken(Rule):
    """A deliberately buggy pass: rewrites every name ``BREAK_ME``."""

    code = "FR900"
    name = "broken"
    summary = what_it_does = why_it_recompiles = example = fix_safety = "test only"
    triggers = (b"BREAK_ME",)
    reads = "ast"
    needs_compile_site = False

    def __init__(self, how: str) -> None:
        self.how = how

    def replacement(self, node: cst.CSTNode) -> cst.CSTNode:
        if self.how == "unparsable":
            return cst.Name("def")  # a valid identifier to libcst, a syntax error to Python
        raise ValueError("edit exploded")

    def check(self, ctx) -> Iterable:
        if self.how == "check" and "BREAK_ME" in ctx.source.text:
            raise KeyError("pass exploded")
        names = [n for n in ast.walk(ctx.source.tree) if isinstance(n, ast.Name) and n.id == "BREAK_ME"]
        return [
            self.finding(ctx, n, "broken rewrite", edits=[Edit(ctx.source.target(n, "Name"), self.replacement)], safety=Safety.SAFE)
            for n in names
        ]


@pytest.mark.parametrize("how, reason", [
    ("unparsable", "internal error: the fixed code does not parse"),
    ("raise", "internal error: applying a fix failed"),
    ("check", "internal error: KeyError"),
])
@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_internal_error_writes_nothing(tmp_path, monkeypatch, capsys, how, reason, mode):
    victim = b"import torch\nBREAK_ME = 1\n@torch.compile(dynamic=False)\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n"
    write(tmp_path, {"victim.py": victim, "good.py": SAFE, "other.py": MARKER})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "REGISTRY", list(REGISTRY) + [_Broken(how)])
    code, out, err = run_main([mode, "."], capsys)
    assert code == 2
    assert "Traceback" not in err
    [e] = error_lines(err)
    assert e["path"] == "victim.py"
    assert e["reason"].startswith(reason), e["reason"]
    assert "left unchanged" in e["reason"]
    assert read(tmp_path, "victim.py") == victim
    if mode == "--fix":
        assert read(tmp_path, "good.py") == SAFE_FIXED.encode()
        assert sorted(os.listdir(tmp_path)) == ["good.py", "other.py", "victim.py"]
    else:
        assert read(tmp_path, "good.py") == SAFE.encode()
        assert "victim.py" not in out
        assert "--- a/good.py" in out and "--- a/other.py" in out


# Bad input is reported even in files no pass could touch (no torch, no
# compile): they are never parsed, but their bytes are checked (binary,
# undecodable); with --check-syntax the stdlib parser checks them too.
PLAIN_BAD_FILES = {
    "syntax.py": (b"def f(:\n    return 1\n", "syntax error at line 1"),
    "badutf8.py": (b"s = 'caf\xe9'\n", "cannot decode"),
    "badcookie.py": (b"# -*- coding: klingon -*-\nx = 1\n", "unknown encoding"),
    "binary.py": (b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe", "binary"),
    "utf16.py": ("x = 1\n".encode("utf-16"), "binary"),
}


@pytest.mark.parametrize("name", sorted(PLAIN_BAD_FILES))
def test_bad_file_without_torch_is_still_reported(tmp_path, name):
    data, reason = PLAIN_BAD_FILES[name]
    write(tmp_path, {name: data, "good.py": SAFE, "plain.py": b"def g():\n    return 2\n"})
    # a syntax error where no rule applies needs --check-syntax (see below)
    proc = fr(tmp_path, "--fix", *(["--check-syntax"] if name == "syntax.py" else []), ".")
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    errors = error_lines(stderr)
    assert [e["path"] for e in errors] == [name]
    assert reason in errors[0]["reason"]
    assert read(tmp_path, name) == data
    assert read(tmp_path, "good.py") == SAFE_FIXED.encode()
    assert read(tmp_path, "plain.py") == b"def g():\n    return 2\n"


def test_syntax_error_where_no_rule_applies_is_left_to_check_syntax(tmp_path):
    """By default a file the byte prefilter rules out (no `torch`, no
    `compile`, no marker, no name of a compiled function ...) is never
    parsed, so its syntax error is not reported (ruff and the interpreter
    report it); its bytes are still checked.  `--check-syntax` (or
    `check-syntax = true`) parses every file."""
    broken = b"def (:\n    return 1\n"
    # the good file compiles nothing at module level: no cross-module names
    write(tmp_path, {"broken.py": broken, "good.py": MARKER})
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 0, proc.stderr.decode()
    assert error_lines(proc.stderr.decode()) == []
    assert read(tmp_path, "good.py") == MARKER_FIXED.encode()
    write(tmp_path, {"good.py": MARKER, "pyproject.toml": b"[tool.fix-recompiles]\ncheck-syntax = true\n"})
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 2
    [e] = error_lines(proc.stderr.decode())
    assert e["path"] == "broken.py" and "syntax error at line 1" in e["reason"]
    assert read(tmp_path, "broken.py") == broken
    assert read(tmp_path, "good.py") == MARKER_FIXED.encode()
    proc = fr(tmp_path, "--fix", ".", "--check-syntax")  # the flag does the same
    assert proc.returncode == 2 and [e["path"] for e in error_lines(proc.stderr.decode())] == ["broken.py"]


def test_syntax_error_names_the_python_that_read_it_and_a_newer_requirement(tmp_path):
    """The tool parses with the Python running it, so a file written for a
    newer one (a `type` alias read by 3.11) is refused.  The error says which
    Python read it, and when the closest pyproject.toml that declares
    `requires-python` excludes that Python, it says so and what to do; a
    requirement the running Python meets adds nothing."""
    import sys

    broken = b"import torch\n\n@torch.compile\ndef f(x:\n    return x\n"
    running = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    write(tmp_path, {"pkg/m.py": broken, "pyproject.toml": b'[project]\nname = "p"\nrequires-python = ">=3.8"\n'})
    proc = fr(tmp_path, ".")
    assert proc.returncode == 2
    [e] = error_lines(proc.stderr.decode())
    assert e["path"] == "pkg/m.py" and e["reason"].startswith("syntax error at line 4")
    assert e["reason"].endswith(f"(as {running} reads it)"), e["reason"]
    # a sub-package's pyproject without the key does not hide the root's
    write(tmp_path, {"pkg/pyproject.toml": b'[project]\nname = "sub"\n', "pyproject.toml": b'[project]\nname = "p"\nrequires-python = ">= 99.1, <100"\n'})
    proc = fr(tmp_path, ".")
    assert proc.returncode == 2
    [e] = error_lines(proc.stderr.decode())
    assert e["reason"].endswith(
        f"(as {running} reads it; pyproject.toml requires Python >= 99.1, <100: run fix-recompiles with that Python)"
    ), e["reason"]
    assert read(tmp_path, "pkg/m.py") == broken


# -- bad configuration input: one line, exit 2 (issue 29, item 3) --------------------

DEEP = "[tool.fix-recompiles]\nexclude = " + "[" * 5000 + "]" * 5000 + "\n"
BAD_CONFIG = {
    # (pyproject.toml bytes or None, extra args, what the one line says)
    "exclude flag": (None, ["--exclude", "[z-a]"], "error: --exclude: invalid pattern '[z-a]'"),
    "exclude key": (b'[tool.fix-recompiles]\nexclude = ["[z-a]"]\n', [], "error: exclude (pyproject.toml): invalid pattern '[z-a]'"),
    "per-file-ignores key": (b'[tool.fix-recompiles]\nper-file-ignores = {"[z-a]" = ["FR001"]}\n', [], "error: per-file-ignores (pyproject.toml): invalid pattern '[z-a]'"),
    "long pattern": (None, ["--exclude", "a" * 5000], "is longer than 4096 characters"),
    "deep array": (DEEP.encode(), [], "pyproject.toml: invalid TOML: nested too deeply"),
    "utf-16": ('[tool.fix-recompiles]\nignore = ["FR001"]\n'.encode("utf-16"), [], "pyproject.toml: not UTF-8 (TOML files are UTF-8)"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIG))
def test_bad_configuration_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, case):
    pyproject, extra, said = BAD_CONFIG[case]
    files = {"good.py": SAFE}
    write(tmp_path, files)
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_bytes(pyproject)
    monkeypatch.chdir(tmp_path)
    for command in (["check", "."], ["check", "-", "--stdin-filename", "good.py"]):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SAFE.encode())))
        code, out, err = run_main(command + extra, capsys)
        assert code == 2, (command, err)
        assert "Traceback" not in err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and said in lines[0], (command, err)
    assert read(tmp_path, "good.py") == SAFE.encode()


def test_diff_quotes_file_names_as_git_does(tmp_path, monkeypatch, capsys):
    """A tab or a newline in a file name broke the whole `--diff` (issue 29,
    item 7): the names are quoted with C escapes as git writes them, and
    `git apply` takes the patch for every file."""
    import subprocess

    names = ["tab\there.py", "new\nline.py", 'quote"d.py', "plain.py"]
    write(tmp_path, {name: SAFE for name in names})
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["--diff", "."], capsys)
    assert code == 1, err
    assert '--- "a/tab\\there.py"' in out and '+++ "b/new\\nline.py"' in out and '"a/quote\\"d.py"' in out
    assert "--- a/plain.py" in out
    subprocess.run(["git", "init", "-q", "."], check=True)
    (tmp_path / "fix.patch").write_text(out)
    proc = subprocess.run(["git", "apply", "fix.patch"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in names:
        assert read(tmp_path, name) == SAFE_FIXED.encode(), name
