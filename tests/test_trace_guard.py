"""Issue 13: the CI guard, ``fix-recompiles run --max-recompiles N -- CMD``.

Unit tests read recorded traces (tests/trace_fixtures); the end-to-end tests
really run a recompiling, a clean and a failing script under torch 2.13."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import warm_python
from test_trace import CLI, PYTHON, SCRIPTS, _env, fixture

from codemods.modes import guard as guard_mode
from codemods.analysis.context import Settings

# -- which code objects are over the limit ----------------------------------------


def test_max_recompiles_counts_recompiles_after_the_first_compile():
    trace = fixture("anneal_float")  # 2 graphs: compiled once, recompiled once
    [entry] = trace.entries
    assert entry.recompiles == 1
    assert guard_mode.over_limit(trace, 0) == [entry]
    assert guard_mode.over_limit(trace, 1) == []


def test_a_limit_hit_is_always_over():
    trace = fixture("growing_inputs")  # 8 graphs, 8 attempts, limit hit
    [entry] = [e for e in trace.entries if e.name == "normalize"]
    assert entry.limit_hit and entry.recompiles == 8
    assert guard_mode.over_limit(trace, 100) == [entry]


def test_functions_that_compiled_once_are_never_over():
    trace = fixture("python_values")
    over = {e.name for e in guard_mode.over_limit(trace, 0)}
    assert "maybe_bias" not in over
    assert {"stack_sum", "by_name", "apply", "scaled", "call"} <= over
    assert {e.name for e in guard_mode.over_limit(trace, 1)} == {"stack_sum", "by_name", "apply"}


def test_one_finding_per_cause_with_its_cure(monkeypatch):
    monkeypatch.chdir(SCRIPTS.parent.parent)
    findings = guard_mode.guard_findings(fixture("int_global"), 2, Settings())
    assert [(f.code, f.path, f.line) for f in findings] == [
        ("RECOMPILES", "tests/trace_scripts/int_global.py", 8),
        ("RECOMPILES", "tests/trace_scripts/int_global.py", 13),
    ]
    assert findings[0].message == (
        "`add_n` recompiled 3 times (allowed: 2), 4 graphs: cause: int argument `n`; cure: FR001"
    )
    assert findings[1].message.endswith(
        "cause: global `SHIFT`; cure: FR011, pass `SHIFT` as an argument (an int: FR011's fix, unsafe), or keep it in a tensor updated with .fill_()"
    )


def test_machine_formats_reuse_the_check_formats(monkeypatch):
    monkeypatch.chdir(SCRIPTS.parent.parent)
    findings = guard_mode.guard_findings(fixture("growing_inputs"), 0, Settings())
    [f] = findings
    assert "hit the recompile limit" in f.message and "maybe_mark_dynamic(x, 0)" in f.message
    data = json.loads(guard_mode._guard_output(findings, "json", "1.0"))
    assert data == [
        {
            "path": "tests/trace_scripts/growing_inputs.py",
            "line": 6,
            "column": 1,
            "end": {"line": 6, "column": 1},
            "code": "RECOMPILES",
            "name": "max-recompiles",
            "message": f.message,
            "safety": None,
            "fix": None,
        }
    ]
    sarif = json.loads(guard_mode._guard_output(findings, "sarif", "1.0"))
    run = sarif["runs"][0]
    assert sarif["version"] == "2.1.0"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["RECOMPILES"]
    [result] = run["results"]
    assert result["ruleId"] == "RECOMPILES" and result["ruleIndex"] == 0
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "tests/trace_scripts/growing_inputs.py"
    assert loc["region"]["startLine"] == 6
    github = guard_mode._guard_output(findings, "github", "1.0")
    assert github.startswith(
        "::warning file=tests/trace_scripts/growing_inputs.py,line=6,col=1,endLine=6,endColumn=1,title=RECOMPILES::RECOMPILES `normalize` recompiled 8 times"
    )
    assert github.count("\n") == 1


# -- end to end: really run the scripts -------------------------------------------


def guard_cli(tmp_path, name, *flags, stderr=subprocess.STDOUT):
    # the command: a fork of a warm torch process (tests/test_trace.py run_cli)
    (tmp_path / f"{name}.py").write_text((SCRIPTS / f"{name}.py").read_text())
    return warm_python.cli_run(
        CLI + ["run", *flags, "--", *warm_python.python_command(_env()), f"{name}.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=_env(),
        timeout=600,
        check=False,
    )


def test_guard_fails_on_a_recompiling_script(tmp_path):
    proc = guard_cli(tmp_path, "growing_inputs", "--max-recompiles", "0")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert re.search(
        r"^normalize\s+growing_inputs\.py:6\s+8\s+yes\s+tensor shape `x`\s+FR001, FR007, torch\._dynamo\.maybe_mark_dynamic\(x, 0\)$",
        out,
        re.MULTILINE,
    ), out
    assert "1 compiled function recompiled more than 0 times (--max-recompiles):" in out
    assert "  normalize (growing_inputs.py:6): 8 recompiles, hit the recompile limit" in out
    # each recompile's cure, or why there is none (issue 27)
    assert "    cause: tensor shape `x`; cure: FR001, FR007, torch._dynamo.maybe_mark_dynamic(x, 0)\n" in out
    assert "result:" in out  # the command's output streamed through
    assert (tmp_path / "growing_inputs.py").read_text() == (SCRIPTS / "growing_inputs.py").read_text()


def test_guard_passes_a_clean_script_and_json_stays_parseable(tmp_path):
    proc = guard_cli(
        tmp_path, "clean", "--max-recompiles", "0", "--format", "json", stderr=subprocess.PIPE
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []  # the script's prints went to stderr
    assert "result:" in proc.stderr
    assert "No compiled function recompiled more than 0 times (1 compiled, 1 graph)." in proc.stderr


def test_guard_allows_n_recompiles_and_annotates_for_github(tmp_path):
    # anneal_float recompiles once: allowed with N=1 ...
    proc = guard_cli(tmp_path, "anneal_float", "--max-recompiles", "1", "--format", "github", stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert re.search(r"^scaled_softmax\s+anneal_float\.py:5\s+2\s+no\s+float argument `temperature`", proc.stderr, re.MULTILINE)


def test_guard_on_a_failing_command_keeps_its_exit_code(tmp_path):
    proc = guard_cli(tmp_path, "fails", "--max-recompiles", "0")
    assert proc.returncode == 2, proc.stdout
    assert "error: the command failed with exit code 3" in proc.stdout
    assert re.search(r"^scale\s+fails\.py:7\s+4\s+no\s+tensor shape `x`", proc.stdout, re.MULTILINE), proc.stdout


def test_guard_on_a_command_that_fails_at_the_recompile_limit_reports_the_storm(tmp_path):
    """fullgraph=True raises FailOnRecompileLimitHit at the limit: the failure
    is the storm the guard checks for, so it is over the limit (exit 1), not
    "not conclusive" (exit 2)."""
    proc = guard_cli(tmp_path, "fullgraph_float_storm", "--max-recompiles", "2")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "failed with exit code 1 at the recompile limit" in out and "not conclusive" not in out
    assert "  ema_ (fullgraph_float_storm.py:9): 8 recompiles, hit the recompile limit" in out


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--max-recompiles", "-1"], "must be 0 or more"),
        (["--max-recompiles", "0", "--fix"], "exclusive"),
        (["--format", "json"], "needs --max-recompiles"),
        (["--max-recompiles", "0", "--format", "xml"], "--format must be one of"),
    ],
)
def test_guard_option_errors(tmp_path, flags, message):
    marker = tmp_path / "ran"
    proc = warm_python.cli_run(
        CLI + ["run", *flags, "--", PYTHON, "-c", f"open({str(marker)!r}, 'w')"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not marker.exists()
