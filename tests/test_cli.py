"""The command line, run as a real process in temporary folders.

Every test builds its own small tree, runs the installed ``fix-recompiles``
console script (or ``python -c "import cli; cli.main()"`` when the script is
not installed) with the tree as the current folder, and checks exit codes,
stdout/stderr and the bytes on disk.  Each run is its own process: a fork of
a process that has imported the CLI already (tests/warm_python.py; the
same ``sys.argv``, folder, environment and stdio as a new one), or a new
process where a fork cannot stand in (an environment the imports would read
differently, ``PYTHONHASHSEED`` set).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from typing import Dict, List

import pytest

import warm_python
from codemods.transforms import REGISTRY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "fix-recompiles")
COMMAND = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-c", "import cli; cli.main()"]

# FR001 with evidence that the inputs vary: a safe fix (line 2 changes)
SAFE = (
    "import torch\n"
    "@torch.compile(dynamic=False)\n"
    "def f(x):\n"
    "    return x * 2\n"
    "for n in range(1, 4):\n"
    "    f(torch.ones(n))\n"
)
SAFE_FIXED = SAFE.replace("@torch.compile(dynamic=False)", "@torch.compile()")
# FR001 without evidence: only an unsafe fix
UNSAFE = "import torch\ndef g(x):\n    return x\nh = torch.compile(g, dynamic=False)\n"
UNSAFE_FIXED = UNSAFE.replace("torch.compile(g, dynamic=False)", "torch.compile(g)")
# FR002 marker: a safe fix
MARKER = "import torch\ndef k(x):\n    y = x + 1\n    # fix-recompiles: graph-break\n    return y\n"
MARKER_FIXED = MARKER.replace("# fix-recompiles: graph-break", "torch._dynamo.graph_break()")
CLEAN_TORCH = "import torch\n@torch.compile\ndef f(x):\n    return x + 1\n"
NO_TORCH = "def add(a, b):\n    return a + b\n"

FINDING_LINE = re.compile(r"^(?P<path>[^:\s]+\.py):(?P<line>\d+):(?P<col>\d+): (?P<code>FR\d{3})(?P<mark> \[\*\]| \[unsafe fix\])? (?P<msg>\S.*)$")


def fr(cwd, *args, env=None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("PYTHONHASHSEED", None)
    full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    # a fork of a process with the CLI imported (tests/warm_python.py) where it
    # can stand in for a fresh one; else (and with PYTHONHASHSEED set) a new process
    warm = warm_python.try_run(
        (COMMAND[1:] if COMMAND[0] == sys.executable else COMMAND) + [str(a) for a in args],
        kind="cli",
        cwd=str(cwd),
        env=full_env,
        timeout=120,
    )
    if warm is not None:
        return warm
    return subprocess.run(
        COMMAND + [str(a) for a in args],
        cwd=str(cwd),
        capture_output=True,
        env=full_env,
        timeout=120,
    )


def out(proc) -> str:
    return proc.stdout.decode("utf-8")


def err(proc) -> str:
    return proc.stderr.decode("utf-8")


def write(root, files: Dict[str, object]) -> None:
    for rel, content in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        with open(path, "wb") as fh:
            fh.write(data)


def read(root, rel) -> bytes:
    with open(os.path.join(str(root), rel), "rb") as fh:
        return fh.read()


def snapshot(root) -> Dict[str, bytes]:
    """Every file below root (relative path -> bytes), .git excluded."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(str(root)):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as fh:
                result[os.path.relpath(full, str(root))] = fh.read()
    return result


def finding_lines(text: str) -> List[re.Match]:
    return [m for m in (FINDING_LINE.match(line) for line in text.splitlines()) if m]


def git_init(root) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


# ---------------------------------------------------------------- exit codes


def test_exit_0_when_nothing_found(tmp_path):
    write(tmp_path, {"a.py": CLEAN_TORCH, "b.py": NO_TORCH})
    proc = fr(tmp_path, ".")
    assert proc.returncode == 0, err(proc)
    assert finding_lines(out(proc)) == []
    assert "All checks passed!" in out(proc)
    assert err(proc) == ""


def test_exit_1_with_findings_and_report_format(tmp_path):
    write(tmp_path, {"pkg/safe.py": SAFE, "pkg/unsafe.py": UNSAFE, "marker.py": MARKER})
    proc = fr(tmp_path, "--unproven", ".")
    assert proc.returncode == 1, err(proc)
    lines = out(proc).splitlines()
    found = finding_lines(out(proc))
    assert [(m["path"], int(m["line"]), m["code"], m["mark"]) for m in found] == [
        ("marker.py", 4, "FR002", " [*]"),
        ("pkg/safe.py", 2, "FR001", " [*]"),
        ("pkg/unsafe.py", 4, "FR001", " [unsafe fix]"),
    ]
    # the finding lines come first, then the summary
    assert lines[: len(found)] == [m.group(0) for m in found]
    assert "Found 3 findings." in lines
    assert "[*] 2 fixable with `--fix`." in lines
    assert "1 unsafe fix held back (enable with `--unsafe-fixes`)." in lines
    # columns point at the text in the file
    src_line = SAFE.splitlines()[1]
    col = int(found[1]["col"])
    assert src_line[col - 1 :].startswith("dynamic=False")


def test_unproven_findings_are_quiet_by_default(tmp_path):
    # `dynamic=False` with no varying call seen: often deliberate, so only --unproven reports it
    write(tmp_path, {"unsafe.py": UNSAFE})
    proc = fr(tmp_path, ".")
    assert proc.returncode == 0, out(proc)
    assert finding_lines(out(proc)) == []
    proc = fr(tmp_path, ".", "--unproven")
    assert proc.returncode == 1
    assert [m["code"] for m in finding_lines(out(proc))] == ["FR001"]
    write(tmp_path, {"pyproject.toml": "[tool.fix-recompiles]\nunproven = true\n"})
    assert fr(tmp_path, ".").returncode == 1


def test_unsafe_fixes_removes_held_back_line(tmp_path):
    write(tmp_path, {"unsafe.py": UNSAFE})
    proc = fr(tmp_path, "--unproven", ".", "--unsafe-fixes")
    assert proc.returncode == 1
    assert "held back" not in out(proc) + err(proc)
    assert [m["mark"] for m in finding_lines(out(proc))] == [" [unsafe fix]"]


def test_report_is_sorted_and_identical_across_runs(tmp_path):
    files = {}
    for i, folder in enumerate(["zeta", "alpha", "alpha/inner", "Mid"]):
        files[f"{folder}/m{i}.py"] = SAFE + "\n" + MARKER.replace("def k", f"def k{i}")
        files[f"{folder}/u{i}.py"] = UNSAFE
    write(tmp_path, files)
    # each run a new process with its own hash seed (set order differs between them)
    fresh = {"PYTHONHASHSEED": "random"}
    first = fr(tmp_path, "--unproven", ".", env=fresh)
    second = fr(tmp_path, "--unproven", "zeta", "alpha", "Mid", env=fresh)  # order of PATHs does not matter either
    third = fr(tmp_path, "--unproven", ".", env=fresh)
    assert first.returncode == second.returncode == third.returncode == 1
    assert out(first) == out(third) == out(second)
    assert err(first) == err(third)
    found = finding_lines(out(first))
    keys = [(m["path"], int(m["line"]), int(m["col"]), m["code"]) for m in found]
    assert len(keys) == 4 * 3
    assert keys == sorted(keys)


def test_missing_path_exits_2_and_wins_over_findings(tmp_path):
    write(tmp_path, {"safe.py": SAFE})
    proc = fr(tmp_path, "does_not_exist.py")
    assert proc.returncode == 2
    assert "does_not_exist.py" in err(proc)
    assert "Traceback" not in err(proc)
    both = fr(tmp_path, "safe.py", "nope/")
    assert both.returncode == 2  # findings (1) and an error (2): 2 wins
    assert len(finding_lines(out(both))) == 1
    assert "nope" in err(both)


def test_diff_and_fix_together_is_an_error(tmp_path):
    write(tmp_path, {"safe.py": SAFE})
    proc = fr(tmp_path, "--diff", "--fix", ".")
    assert proc.returncode == 2
    assert "--diff" in err(proc) and "--fix" in err(proc)
    assert read(tmp_path, "safe.py") == SAFE.encode()


def test_bad_option_exits_2(tmp_path):
    write(tmp_path, {"safe.py": SAFE})
    proc = fr(tmp_path, "--no-such-option", ".")
    assert proc.returncode == 2
    assert "Traceback" not in err(proc)
    proc = fr(tmp_path, "--dynamic-fix", "maybe", ".")
    assert proc.returncode == 2


# ---------------------------------------------------------------- --select / --ignore


def test_select_and_ignore(tmp_path):
    write(tmp_path, {"both.py": SAFE + MARKER.replace("import torch\n", "")})
    all_codes = [m["code"] for m in finding_lines(out(fr(tmp_path, ".")))]
    assert sorted(all_codes) == ["FR001", "FR002"]
    for args, expected in [
        (["--select", "FR002"], ["FR002"]),
        (["--select", "fr001"], ["FR001"]),
        (["--ignore", "FR001"], ["FR002"]),
        (["--select", "FR001,FR002", "--ignore", "FR002"], ["FR001"]),
        (["--select", "FR"], ["FR001", "FR002"]),
        (["--select", "ALL"], ["FR001", "FR002"]),
    ]:
        proc = fr(tmp_path, *args, ".")
        assert sorted(m["code"] for m in finding_lines(out(proc))) == expected, args
        assert proc.returncode == 1, args
    proc = fr(tmp_path, "--ignore", "FR001,FR002", ".")
    assert proc.returncode == 0
    # --fix only applies fixes of selected rules
    fr(tmp_path, "--fix", "--select", "FR002", ".")
    text = read(tmp_path, "both.py").decode()
    assert "dynamic=False" in text and "torch._dynamo.graph_break()" in text


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_rule_code_exits_2(tmp_path, option):
    write(tmp_path, {"safe.py": SAFE})
    proc = fr(tmp_path, option, "FR999", ".")
    assert proc.returncode == 2
    assert "FR999" in err(proc)
    assert finding_lines(out(proc)) == []
    assert read(tmp_path, "safe.py") == SAFE.encode()


# ---------------------------------------------------------------- rules


def test_rules_lists_every_rule(tmp_path):
    proc = fr(tmp_path, "rules")
    assert proc.returncode == 0
    lines = out(proc).splitlines()
    assert len(lines) == len(REGISTRY) + 1
    for rule, line in zip(REGISTRY, lines[:-1], strict=True):
        assert line.startswith(rule.code) and rule.name in line
    assert lines[-1].startswith("TRACE ") and "`fix-recompiles rules TRACE`" in lines[-1]


def test_rules_trace_lists_and_explains_the_trace_s_own_fixes(tmp_path):
    """The fixes `run` makes from the trace (code TRACE) are explained as a
    rule is: `rules TRACE` lists them, `rules NAME` prints one's documentation."""
    from codemods.trace.registry import TRACE_CURES

    proc = fr(tmp_path, "rules", "TRACE")
    assert proc.returncode == 0
    listed = [ln.split()[0] for ln in out(proc).splitlines()[2:]]
    assert listed == [c.name for c in TRACE_CURES]
    for cure in TRACE_CURES:
        proc = fr(tmp_path, "rules", cure.name)
        assert proc.returncode == 0
        text = out(proc)
        assert text.startswith(f"TRACE ({cure.name})\n")
        for heading in ("## What it does", "## Why it recompiles", "## Example", "## Fix safety"):
            assert heading in text
        assert ("Unsafe" in text) == ("Unsafe" in cure.fix_safety)


def test_rules_unknown_code_exits_2(tmp_path):
    proc = fr(tmp_path, "rules", "FR999")
    assert proc.returncode == 2
    assert "FR999" in err(proc)


# ---------------------------------------------------------------- --diff


def test_diff_writes_nothing_and_git_applies(tmp_path):
    files = {"src/safe.py": SAFE, "src/unsafe.py": UNSAFE, "marker.py": MARKER, "clean.py": CLEAN_TORCH}
    write(tmp_path, files)
    git_init(tmp_path)
    before = snapshot(tmp_path)
    proc = fr(tmp_path, "--diff", ".")
    assert proc.returncode == 1, err(proc)
    assert snapshot(tmp_path) == before  # writes nothing
    patch = proc.stdout
    text = patch.decode()
    headers = [line for line in text.splitlines() if line.startswith(("--- ", "+++ "))]
    assert headers == ["--- a/marker.py", "+++ b/marker.py", "--- a/src/safe.py", "+++ b/src/safe.py"]
    assert "unsafe.py" not in text  # unsafe fix not shown without --unsafe-fixes
    # three lines of context: the marker hunk covers lines 1-5 (marker on line 4)
    assert "@@ -1,5 +1,5 @@" in text
    (tmp_path / "fix.patch").write_bytes(patch)
    check = subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True)
    assert read(tmp_path, "src/safe.py") == SAFE_FIXED.encode()
    assert read(tmp_path, "marker.py") == MARKER_FIXED.encode()
    # nothing left to do: empty diff, exit 0
    again = fr(tmp_path, "--diff", ".")
    assert again.returncode == 0
    assert again.stdout == b""


def test_diff_paths_relative_to_current_folder(tmp_path):
    write(tmp_path, {"proj/pkg/safe.py": SAFE})
    git_init(tmp_path / "proj")
    proc = fr(tmp_path / "proj" / "pkg", "--diff", "safe.py")
    assert out(proc).splitlines()[:2] == ["--- a/safe.py", "+++ b/safe.py"]
    proc = fr(tmp_path, "--diff", "proj")
    assert out(proc).splitlines()[:2] == ["--- a/proj/pkg/safe.py", "+++ b/proj/pkg/safe.py"]
    (tmp_path / "p.patch").write_bytes(proc.stdout)
    git_init(tmp_path)
    check = subprocess.run(["git", "apply", "--check", "p.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()


def test_diff_with_unsafe_fixes(tmp_path):
    write(tmp_path, {"unsafe.py": UNSAFE})
    proc = fr(tmp_path, "--unproven", "--diff", ".")
    assert proc.returncode == 0 and proc.stdout == b""
    assert "1 unsafe fix held back" in err(proc)
    proc = fr(tmp_path, "--unproven", "--diff", "--unsafe-fixes", ".")
    assert proc.returncode == 1
    assert "-h = torch.compile(g, dynamic=False)\n+h = torch.compile(g)\n" in out(proc)
    assert read(tmp_path, "unsafe.py") == UNSAFE.encode()


# ---------------------------------------------------------------- --fix


def test_fix_applies_safe_fixes_only(tmp_path):
    write(tmp_path, {"safe.py": SAFE, "unsafe.py": UNSAFE, "marker.py": MARKER, "none.py": NO_TORCH})
    proc = fr(tmp_path, "--unproven", "--fix", ".")
    assert proc.returncode == 1  # the unsafe finding remains
    assert read(tmp_path, "safe.py") == SAFE_FIXED.encode()
    assert read(tmp_path, "marker.py") == MARKER_FIXED.encode()
    assert read(tmp_path, "unsafe.py") == UNSAFE.encode()
    assert read(tmp_path, "none.py") == NO_TORCH.encode()
    # only the remaining finding is printed, and the summary says what happened
    assert [m["path"] for m in finding_lines(out(proc))] == ["unsafe.py"]
    assert "2 fixed in 2 files" in out(proc)
    assert "1 unsafe fix held back" in out(proc)
    proc = fr(tmp_path, "--unproven", "--fix", "--unsafe-fixes", ".")
    assert proc.returncode == 0
    assert read(tmp_path, "unsafe.py") == UNSAFE_FIXED.encode()
    # a second run over the fixed files changes nothing
    before = snapshot(tmp_path)
    proc = fr(tmp_path, "--unproven", "--fix", "--unsafe-fixes", ".")
    assert proc.returncode == 0
    assert snapshot(tmp_path) == before


def test_fix_keeps_mode_and_leaves_no_temp_files(tmp_path):
    write(tmp_path, {"tool.py": "#!/usr/bin/env python\n" + SAFE, "lib/marker.py": MARKER})
    os.chmod(tmp_path / "tool.py", 0o751)
    os.chmod(tmp_path / "lib" / "marker.py", 0o640)
    names_before = sorted(os.listdir(tmp_path)), sorted(os.listdir(tmp_path / "lib"))
    ino_untouched = os.stat(tmp_path / "lib").st_ino
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 0, out(proc) + err(proc)
    assert read(tmp_path, "tool.py") == ("#!/usr/bin/env python\n" + SAFE_FIXED).encode()
    assert stat.S_IMODE(os.stat(tmp_path / "tool.py").st_mode) == 0o751
    assert stat.S_IMODE(os.stat(tmp_path / "lib" / "marker.py").st_mode) == 0o640
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(tmp_path / "lib"))) == names_before
    assert os.stat(tmp_path / "lib").st_ino == ino_untouched


def test_unchanged_files_are_not_rewritten(tmp_path):
    write(tmp_path, {"clean.py": CLEAN_TORCH, "none.py": NO_TORCH, "unsafe.py": UNSAFE})
    stats = {n: os.stat(tmp_path / n) for n in ("clean.py", "none.py", "unsafe.py")}
    proc = fr(tmp_path, "--unproven", "--fix", ".")
    assert proc.returncode == 1
    for name, st in stats.items():
        now = os.stat(tmp_path / name)
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), name


# ---------------------------------------------------------------- suppression


def test_suppression_comments(tmp_path):
    safe_lines = SAFE.splitlines(keepends=True)
    files = {
        "all.py": "".join(safe_lines[:1] + ["@torch.compile(dynamic=False)  # fix-recompiles: ignore\n"] + safe_lines[2:]),
        "code.py": "".join(safe_lines[:1] + ["@torch.compile(dynamic=False)  # fix-recompiles: ignore[FR001]\n"] + safe_lines[2:]),
        "other.py": "".join(safe_lines[:1] + ["@torch.compile(dynamic=False)  # fix-recompiles: ignore[FR002]\n"] + safe_lines[2:]),
        "list.py": "".join(safe_lines[:1] + ["@torch.compile(dynamic=False)  # fix-recompiles: ignore[FR002, FR001]\n"] + safe_lines[2:]),
        "nextline.py": "".join(safe_lines[:1] + ["# fix-recompiles: ignore\n"] + safe_lines[1:]),
    }
    write(tmp_path, files)
    proc = fr(tmp_path, ".")
    assert [m["path"] for m in finding_lines(out(proc))] == ["nextline.py", "other.py"]
    before = snapshot(tmp_path)
    fr(tmp_path, "--fix", "--unsafe-fixes", "all.py", "code.py", "list.py")
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- discovery


def test_discovery_skips_hidden_venv_and_gitignored(tmp_path):
    write(
        tmp_path,
        {
            "keep/a.py": SAFE,
            "keep/notes.txt": SAFE,
            "keep/script.pyw": SAFE,
            ".hidden/h.py": SAFE,
            "keep/.cache/c.py": SAFE,
            "venv/lib/v.py": SAFE,
            ".venv/lib/v.py": SAFE,
            "myenv/pyvenv.cfg": "home = /usr/bin\n",
            "myenv/lib/site.py": SAFE,
            "keep/__pycache__/p.py": SAFE,
            "generated/g.py": SAFE,
            "keep/skip_me.py": SAFE,
            "keep/sub/.gitignore": "local_*.py\n",
            "keep/sub/local_x.py": SAFE,
            "keep/sub/b.py": SAFE,
            ".gitignore": "generated/\nskip_me.py\n",
        },
    )
    git_init(tmp_path)
    proc = fr(tmp_path, ".")
    assert sorted({m["path"] for m in finding_lines(out(proc))}) == ["keep/a.py", "keep/sub/b.py"]
    # a file named on the command line is always taken
    proc = fr(tmp_path, "generated/g.py")
    assert [m["path"] for m in finding_lines(out(proc))] == ["generated/g.py"]


def test_directory_named_like_a_module_is_walked(tmp_path):
    write(tmp_path, {"weird.py/inner.py": SAFE})
    proc = fr(tmp_path, ".")
    assert proc.returncode == 1, err(proc)
    assert [m["path"] for m in finding_lines(out(proc))] == ["weird.py/inner.py"]


# ---------------------------------------------------------------- byte identity


def _changed_lines(before: bytes, after: bytes, sep: bytes):
    a, b = before.split(sep), after.split(sep)
    assert len(a) == len(b), (a, b)
    return [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def test_bom_crlf_tabs_no_final_newline_keep_their_bytes(tmp_path):
    src = (
        b"\xef\xbb\xbfimport torch\r\n"
        b"\r\n"
        b"@torch.compile(dynamic=False)\r\n"
        b"def f(x):\r\n"
        b"\tif x.sum() > 0:\r\n"
        b"\t\treturn x * 2  \r\n"
        b"\treturn x\r\n"
        b"for n in range(1, 4):\r\n"
        b"\tf(torch.ones(n))"
    )
    write(tmp_path, {"crlf.py": src})
    git_init(tmp_path)
    diff = fr(tmp_path, "--diff", "crlf.py")
    assert diff.returncode == 1
    assert b"\\ No newline at end of file" not in diff.stdout  # the last line is outside the hunk
    (tmp_path / "d.patch").write_bytes(diff.stdout)
    check = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    proc = fr(tmp_path, "--fix", "crlf.py")
    assert proc.returncode == 0, out(proc) + err(proc)
    after = read(tmp_path, "crlf.py")
    assert after.startswith(b"\xef\xbb\xbf")
    assert _changed_lines(src, after, b"\r\n") == [(2, b"@torch.compile(dynamic=False)", b"@torch.compile()")]
    assert after.count(b"\n") == after.count(b"\r\n")
    # git apply of the --diff output gives the same bytes as --fix
    (tmp_path / "fixed.py").write_bytes(after)
    (tmp_path / "crlf.py").write_bytes(src)
    subprocess.run(["git", "apply", "d.patch"], cwd=tmp_path, check=True)
    assert read(tmp_path, "crlf.py") == after


def test_no_final_newline_in_the_hunk(tmp_path):
    src = b"import torch\n@torch.compile(dynamic=False)\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))"
    write(tmp_path, {"nonl.py": src})
    git_init(tmp_path)
    diff = fr(tmp_path, "--diff", "nonl.py")
    assert diff.returncode == 1
    (tmp_path / "d.patch").write_bytes(diff.stdout)
    check = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    subprocess.run(["git", "apply", "d.patch"], cwd=tmp_path, check=True)
    applied = read(tmp_path, "nonl.py")
    (tmp_path / "nonl.py").write_bytes(src)
    assert fr(tmp_path, "--fix", "nonl.py").returncode == 0
    fixed = read(tmp_path, "nonl.py")
    assert fixed == applied
    assert not fixed.endswith(b"\n")
    assert _changed_lines(src, fixed, b"\n") == [(1, b"@torch.compile(dynamic=False)", b"@torch.compile()")]


def test_marker_in_last_line_without_newline_diff_applies(tmp_path):
    src = b"import torch\ndef k(x):\n    y = x + 1\n    # fix-recompiles: graph-break\n    return y"
    write(tmp_path, {"m.py": src})
    git_init(tmp_path)
    diff = fr(tmp_path, "--diff", "m.py")
    assert diff.returncode == 1
    assert b"\\ No newline at end of file" in diff.stdout
    (tmp_path / "d.patch").write_bytes(diff.stdout)
    check = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    subprocess.run(["git", "apply", "d.patch"], cwd=tmp_path, check=True)
    assert read(tmp_path, "m.py") == src.replace(b"# fix-recompiles: graph-break", b"torch._dynamo.graph_break()")


def test_latin1_declared_file_keeps_its_encoding(tmp_path):
    src = (
        b"# -*- coding: latin-1 -*-\n"
        b"import torch\n"
        b"GREETING = 'caf\xe9 cr\xe8me'  # \xa9\n"
        b"@torch.compile(dynamic=False)\n"
        b"def f(x):\n"
        b"    return x\n"
        b"for n in range(3):\n"
        b"    f(torch.ones(n))\n"
    )
    write(tmp_path, {"lat.py": src})
    git_init(tmp_path)
    diff = fr(tmp_path, "--diff", "lat.py")
    assert diff.returncode == 1
    (tmp_path / "d.patch").write_bytes(diff.stdout)
    check = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    proc = fr(tmp_path, "--fix", "lat.py")
    assert proc.returncode == 0, out(proc) + err(proc)
    after = read(tmp_path, "lat.py")
    assert _changed_lines(src, after, b"\n") == [(3, b"@torch.compile(dynamic=False)", b"@torch.compile()")]
    subprocess.run(["git", "apply", "-R", "d.patch"], cwd=tmp_path, check=True)
    assert read(tmp_path, "lat.py") == src


@pytest.mark.parametrize("tail", [b"\n\n ", b"\n\n\t", b"\n \n\n  ", b"\n\n    # trailing indented comment\n", b"\n\n #"])
def test_trailing_whitespace_lines_survive_a_fix(tmp_path, tail):
    """libcst prints ``"x\\n\\n "`` back as ``"x\\n "``: the fix must keep the file's own tail."""
    src = SAFE.encode() + tail
    write(tmp_path, {"t.py": src})
    proc = fr(tmp_path, "--fix", "t.py")
    assert proc.returncode == 0, out(proc) + err(proc)
    assert read(tmp_path, "t.py") == SAFE_FIXED.encode() + tail


def test_insertion_keeps_crlf_and_tabs(tmp_path):
    src = b"import torch\r\ndef k(x):\r\n\ty = x + 1\r\n\t# fix-recompiles: graph-break\r\n\treturn y\r\n"
    write(tmp_path, {"m.py": src})
    assert fr(tmp_path, "--fix", "m.py").returncode == 0
    assert read(tmp_path, "m.py") == src.replace(b"# fix-recompiles: graph-break", b"torch._dynamo.graph_break()")


def test_import_torch_added_when_missing(tmp_path):
    src = "import os\n\ndef k(x):\n    y = x + 1\n    # fix-recompiles: graph-break\n    return y\n"
    write(tmp_path, {"m.py": src})
    assert fr(tmp_path, "--fix", "m.py").returncode == 0
    text = read(tmp_path, "m.py").decode()
    assert "import torch\n" in text and "    torch._dynamo.graph_break()\n" in text
    compile(text, "m.py", "exec")
    # idempotent
    assert fr(tmp_path, "--diff", "m.py").stdout == b""


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbfdef f():\r\n\treturn 1",  # BOM, CRLF, tab, no final newline
        b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
        b"x = 1\r\ny = 2\nz = 3",  # mixed line ends
        b"",
        b"\n\n\n",
        b"import torch\nprint(torch.ones(2))\n",
    ],
)
def test_files_without_findings_stay_byte_identical(tmp_path, data):
    write(tmp_path, {"x.py": data})
    st = os.stat(tmp_path / "x.py")
    proc = fr(tmp_path, "--fix", "--unsafe-fixes", ".")
    assert proc.returncode == 0, out(proc) + err(proc)
    assert read(tmp_path, "x.py") == data
    assert os.stat(tmp_path / "x.py").st_mtime_ns == st.st_mtime_ns


def test_in_process_main_matches_script(tmp_path, monkeypatch, capsys):
    """``cli.main`` (what the console script calls) gives the same report in-process."""
    import cli

    write(tmp_path, {"safe.py": SAFE, "marker.py": MARKER})
    expected = fr(tmp_path, ".")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main(["."])
    assert exc.value.code == expected.returncode == 1
    assert capsys.readouterr().out == out(expected)


def test_version(tmp_path):
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    proc = fr(tmp_path, "--version")
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"fix-recompiles {version}"


def test_check_version_as_ruff_check_version(tmp_path, capsys):
    """`fix-recompiles check --version` (issue 29, item 7) printed 'No such
    option' and exited 2; like `ruff check --version` it prints the version."""
    import cli

    cli.main(["--version"])
    expected = capsys.readouterr().out
    assert re.fullmatch(r"fix-recompiles \S+\n", expected)
    for args in (["check", "--version"], ["check", "-V"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(args)
        assert exc.value.code == 0, args
        assert capsys.readouterr().out == expected, args


def test_trace_is_a_code_select_and_ignore_accept(tmp_path, capsys, monkeypatch):
    """`--ignore TRACE` turns the trace's own fixes off (issue 29, item 4); it
    was refused as an unknown rule code, so they could not be turned off."""
    import cli

    (tmp_path / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    for args in (["check", "--ignore", "TRACE", "."], ["check", "--select", "FR001,TRACE", "."]):
        with pytest.raises(SystemExit) as exc:
            cli.main(args)
        assert exc.value.code == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_single_file_run_says_which_project_modules_it_did_not_read(tmp_path):
    """Issue 29, item 7: a run on one file (or stdin) cannot see what the
    modules it imports define; it says so, and a run that read them is quiet."""
    write(tmp_path, {"main.py": "import torch\nimport os\nfrom models import Net\nfrom .utils import helper\nm = torch.compile(Net())\n", "models.py": "class Net:\n    pass\n", "utils.py": "def helper():\n    pass\n", "__init__.py": ""})
    single = fr(tmp_path, "main.py")
    notes = [ln for ln in err(single).splitlines() if ln.startswith("note:")]
    assert notes == [
        "note: main.py imports modules of its project that this run did not read (models, .utils): findings that need them "
        "(a class compiled here and defined there, an lr written there) are not looked for; run on their folder to include them"
    ], err(single)
    assert not [ln for ln in err(fr(tmp_path, "main.py", "models.py", "utils.py")).splitlines() if ln.startswith("note:")]
    assert not [ln for ln in err(fr(tmp_path, ".")).splitlines() if ln.startswith("note:")]
    from test_hardening import _stdin

    stdin = _stdin(tmp_path, (tmp_path / "main.py").read_text(), "-", "--stdin-filename", "main.py")
    assert "note: main.py imports modules of its project that this run did not read (models, .utils)" in err(stdin)
    assert not [ln for ln in err(fr(tmp_path, "-q", "main.py")).splitlines() if ln.startswith("note:")]
