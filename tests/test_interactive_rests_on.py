"""Interactive review of a fix split over two files (FR004: an optimizer's
tensor lr in one, the `.fill_` of its lr writes in another).  A `.fill_`
whose tensor lr was not applied would crash on the float, so it is offered
only after the other file's fix was accepted; the files are reviewed in that
order whatever their paths.  The programs are run after the review."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import pytest

from codemods.analysis.context import Settings
from codemods.findings import Finding, Fix, Safety
from codemods.modes.interactive import provider_order, run_interactive
from codemods.pipeline.engine import FileResult

REALWORLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "realworld")


def _review(folder: str, answers: str):
    out = io.StringIO()
    code = run_interactive([folder], Settings(), io.StringIO(answers), out, io.StringIO(), color=False)
    return code, out.getvalue()


def _runs(folder: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script], cwd=folder, capture_output=True, text=True, timeout=300)


def _copy(tmp_path, case: str) -> str:
    folder = str(tmp_path / case)
    shutil.copytree(os.path.join(REALWORLD, case), folder)
    return folder


# the writer (scheduler.py) rests on the constructor (main.py)
WRITER = "pos_cosine_lr_closure_cross_module"
# the user's writes (main.py) rest on the factory's construction (model.py),
# a file that sorts after it
FACTORY = "pos_optim_configure_cross_module"


@pytest.mark.parametrize("case, script, first, second", [
    (WRITER, "main.py", "main.py", "scheduler.py"),
    (FACTORY, "main.py", "model.py", "main.py"),
])
def test_rejecting_the_tensor_lr_withholds_the_fill(tmp_path, case, script, first, second):
    folder = _copy(tmp_path, case)
    before = {name: open(os.path.join(folder, name), "rb").read() for name in (first, second)}
    code, out = _review(folder, "n\ny\n")
    assert out.index(f"==> {os.path.join(folder, first)}") < out.index("not offered")
    assert f"not offered: {os.path.join(folder, second)}:" in out
    assert f"it needs the FR004 fix of {os.path.join(folder, first)}, which was not applied" in out
    assert "0 fixes accepted, 1 rejected, 1 left" in out
    assert code == 1
    for name, data in before.items():
        assert open(os.path.join(folder, name), "rb").read() == data
    done = _runs(folder, script)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("case, script, first, second", [
    (WRITER, "main.py", "main.py", "scheduler.py"),
    (FACTORY, "main.py", "model.py", "main.py"),
])
def test_accepting_both_halves_writes_both_and_runs(tmp_path, case, script, first, second):
    folder = _copy(tmp_path, case)
    expected = _runs(folder, script)
    code, out = _review(folder, "y\ny\n")
    assert out.index(f"==> {os.path.join(folder, first)}") < out.index(f"==> {os.path.join(folder, second)}")
    assert "not offered" not in out
    assert "2 fixes accepted, 0 rejected, 0 left (2 files written)" in out
    assert code == 0
    assert "lr=torch.tensor(" in open(os.path.join(folder, first)).read()
    assert ".fill_(" in open(os.path.join(folder, second)).read()
    done = _runs(folder, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == expected.stdout.splitlines()[-1]


def test_accepting_the_tensor_lr_alone_runs(tmp_path):
    folder = _copy(tmp_path, FACTORY)
    code, out = _review(folder, "y\nn\n")
    assert "1 fix accepted, 1 rejected, 0 left (1 file written)" in out
    assert code == 1
    assert _runs(folder, "main.py").returncode == 0


def _result(path: str, needs=()) -> FileResult:
    fix = Fix(edits=(), safety=Safety.SAFE, rests_on=tuple((p, "FR004") for p in needs))
    finding = Finding(code="FR004", message="", path=path, line=1, column=1, end_line=1, end_column=1, fix=fix)
    return FileResult(path=path, display_path=path, findings=[finding])


def test_provider_order_puts_what_a_fix_rests_on_first():
    results = [_result("a.py", ["c.py"]), _result("b.py"), _result("c.py", ["d.py"]), _result("d.py")]
    assert [r.path for r in provider_order(results)] == ["d.py", "c.py", "a.py", "b.py"]


def test_provider_order_keeps_a_cycle_and_unknown_paths_in_order():
    results = [_result("a.py", ["b.py"]), _result("b.py", ["a.py"]), _result("c.py", ["gone.py"])]
    assert [r.path for r in provider_order(results)] == ["b.py", "a.py", "c.py"]


def test_rests_on_survives_the_cache_and_a_process_boundary():
    from codemods.pipeline.cache import _valid_finding, finding_from_dict, finding_to_dict
    from codemods.pipeline.runner import _portable

    result = _result("a.py", ["b.py"])
    assert _portable(result).findings[0].fix.rests_on == (("b.py", "FR004"),)
    stored = finding_to_dict(result.findings[0])
    assert _valid_finding(stored)
    assert finding_from_dict(stored).fix.rests_on == (("b.py", "FR004"),)
    stored["fix"]["rests_on"] = [["b.py"]]
    assert not _valid_finding(stored)
