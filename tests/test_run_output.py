"""Issue 27: ``run --fix`` keeps fixes only if the command's output stays
(codemods/trace/command.py ``output_change``; codemods/modes/traced.py)."""

from __future__ import annotations

import sys

import pytest

from test_trace import copied  # noqa: F401 (a pytest fixture)

from codemods.modes import traced as traced_mode
from codemods.trace import read as tr
from codemods.trace.command import output_change, run_traced


@pytest.mark.parametrize(
    "before,after",
    [
        (b"GRAPHS 2\nOUT 1.0\n", b"GRAPHS 1\nOUT 1.0\n"),  # a count of graphs changes by design
        (b"step 1 | loss 2.0 | 120.5ms | 4512 tok/s | mfu 41.2\n", b"step 1 | loss 2.0 | 80.0ms | 5512 tok/s | mfu 51.0\n"),
        (b"epoch 0 took 5.1\nresult: 3.25\n", b"epoch 0 took 1.9\nresult: 3.25\n"),
        (b"result: 1.000001\n", b"result: 1.000002\n"),  # the last digits of a float
        (b"a\r\nb\n", b"a\nb\n"),
        (b"Recompiling function forward\nOUT 7\n", b"OUT 7\n"),
    ],
)
def test_the_same_results(before, after):
    assert output_change(before, after) is None


@pytest.mark.parametrize(
    "before,after,says",
    [
        (b"OUT 1.0\n", b"OUT 1.1\n", "`OUT 1.0` became `OUT 1.1`"),
        (b"step 1 | loss 3.2 | 12ms\n", b"step 1 | loss 3.3 | 9ms\n", "`step 1 | loss 3.2 | <time>` became `step 1 | loss 3.3 | <time>`"),
        (b"OUT 1.0\ndone\n", b"OUT 1.0\n", "`done` is no longer printed"),
        (b"OUT 1.0\n", b"OUT 1.0\nWarning: nan\n", "`Warning: nan` is printed in addition"),
        (b"label: cat\n", b"label: dog\n", "`label: cat` became `label: dog`"),
    ],
)
def test_other_results(before, after, says):
    assert output_change(before, after) == says


def test_a_run_stopped_at_the_limit_is_compared_as_a_prefix():
    assert output_change(b"step 0 loss 2.0\n", b"step 0 loss 2.0\nstep 1 loss 1.5\n", prefix=True) is None
    assert output_change(b"step 0 loss 2.0\n", b"step 0 loss 2.5\nstep 1 loss 1.5\n", prefix=True) is not None


def test_the_output_is_streamed_and_kept(tmp_path, capfd):
    captured = []
    code = run_traced([sys.executable, "-c", "print('OUT 1.5'); import sys; sys.stdout.flush(); print('x' * 100000)"], str(tmp_path), captured=captured)
    assert code == 0
    out = b"".join(captured)
    assert out.startswith(b"OUT 1.5\n") and len(out) == len(b"OUT 1.5\n") + 100001
    assert "OUT 1.5" in capfd.readouterr().out  # the user still sees it


def test_fixes_that_change_the_output_are_restored(copied, monkeypatch, capsys):  # noqa: F811
    """Fewer graphs, the same exit code, another printed result: the fix
    changed what the program computes; the file gets its bytes back."""
    script, trace = copied("loader_shapes")
    original = script.read_bytes()
    script.write_bytes(original.replace(b"dynamic=False", b""))  # what a fix wrote
    empty = tr.Trace(files=[], entries=[])
    monkeypatch.setattr(traced_mode, "traced_run", lambda cmd: (0, empty, b"result: 2.5\n"))
    code, _after = traced_mode._compare_after(["python", script.name], trace, 0, [(str(script), script.name, original)], 0, b"result: 2.25\n")
    assert code == 2
    assert script.read_bytes() == original
    assert "the command's output changed after the fixes (`result: 2.25` became `result: 2.5`)" in capsys.readouterr().err


def test_fixes_that_keep_the_output_are_kept(copied, monkeypatch, capsys):  # noqa: F811
    script, trace = copied("loader_shapes")
    original = script.read_bytes()
    fixed = original.replace(b"dynamic=False", b"")
    script.write_bytes(fixed)
    empty = tr.Trace(files=[], entries=[])
    monkeypatch.setattr(traced_mode, "traced_run", lambda cmd: (0, empty, b"result: 2.25\n"))
    code, _after = traced_mode._compare_after(["python", script.name], trace, 0, [(str(script), script.name, original)], 0, b"result: 2.25\n")
    assert code == 0
    assert script.read_bytes() == fixed
