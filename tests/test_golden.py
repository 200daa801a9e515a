"""Golden tests: each case's output matches its expected file, a second run
changes nothing, and runnable cases prove at runtime that the fix compiles
fewer graphs (or FX nodes) with the same printed values as eager."""

from __future__ import annotations

import pytest

from golden import Case, discover_cases, read_inputs, run_case, run_tree, runtime_report, write_tree

CASES = discover_cases()
RUNTIME = [c for c in CASES if c.runtime]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden(case: Case, tmp_path):
    out = run_case(case, str(tmp_path / "first"))
    for rel, data in out.items():
        assert data == case.expected(rel), f"{case.id}:{rel} differs from {case.expected_path(rel)} (run `python tests/regen_golden.py {case.pass_folder}` and review)"
    # idempotence: running again over the output changes nothing
    assert run_tree(out, case.settings(), str(tmp_path / "second")) == out, f"{case.id}: a second run changed the output"


def _installed_torch():
    """(major, minor) of the installed torch, read from its metadata (no import)."""
    from importlib.metadata import version

    major, minor = version("torch").split(".")[:2]
    return int(major), int(minor)


@pytest.mark.runtime
@pytest.mark.parametrize("case", RUNTIME, ids=[c.id for c in RUNTIME])
def test_runtime_proof(case: Case, tmp_path):
    target = case.settings().target_torch
    if target is not None and _installed_torch() < target:
        pytest.skip(f"written for torch {target[0]}.{target[1]} and later (`--target-torch`); torch {_installed_torch()} is installed")
    before_dir = tmp_path / "before"
    after_dir = tmp_path / "after"
    inputs = read_inputs(case)
    main = "main.py" if case.is_dir else "case.py"
    write_tree(str(before_dir), inputs)
    write_tree(str(after_dir), {rel: case.expected(rel) for rel in inputs})
    assert inputs != {rel: case.expected(rel) for rel in inputs}, f"{case.id}: runtime case whose expected output is unchanged"
    report = runtime_report(str(before_dir / main), str(after_dir / main))
    metric = case.runtime
    eager, before, after = report["eager"], report["before"], report["after"]
    assert before["stdout"] == eager["stdout"], "the input itself differs from eager (bad case)"
    assert after["stdout"] == eager["stdout"], f"fixed code prints different values:\n{after['stdout']}\nvs eager:\n{eager['stdout']}"
    assert after[metric] < before[metric], f"{case.id}: {metric} before={before[metric]} after={after[metric]}: the fix did not reduce compiles"
