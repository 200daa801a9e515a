"""Issue 28: a distributed run's trace (one file per rank) gives one row per
function and cause, with the ranks it was seen on, matched once for all
ranks.  The end-to-end test runs a real 2-process gloo job under torchrun."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile

from test_trace import CLI, SCRIPTS, _env

from codemods.trace import read as tr


def _entry(name, ranks, graphs, reasons=(), limit=False):
    e = tr.CodeEntry(name=name, filename="/w/train.py", firstlineno=9, graphs=graphs, limit_hit=limit, ranks=ranks)
    e.reasons = [tr.Reason(tr.TENSOR_SHAPE, "x", text) for text in reasons]
    return e


def test_the_processes_copies_of_a_code_object_are_merged():
    a = _entry("step", (0,), 3, ["tensor 'x' size mismatch at index 0. expected 4, actual 5"])
    b = _entry("step", (1,), 8, ["tensor 'x' size mismatch at index 0. expected 5, actual 6"], limit=True)
    other = _entry("other", (1,), 1)
    [step, rest] = tr._merge_processes([[a], [b, other]])
    assert step is b and rest is other  # the copy that compiled the most leads, in the first one's place
    assert step.ranks == (0, 1) and step.limit_hit and step.graphs == 8
    assert len(step.reasons) == 2  # the other rank's reason it lacked


def test_entries_of_one_file_are_not_merged():
    a, b = _entry("step", (0,), 2), _entry("step", (0,), 3)
    assert tr._merge_processes([[a, b]]) == [a, b]


def test_rank_labels():
    assert tr.rank_label([0, 1]) == "0-1"
    assert tr.rank_label([3, 0, 2, 5, 6, 7]) == "0,2-3,5-7"
    assert tr.rank_label([4]) == "4"


@contextlib.contextmanager
def _one_torchrun_at_a_time():
    """The two real two-rank runs below must not overlap (pytest -n 2 may
    start them together): their rendezvous and process-group ports, each
    picked free, can then collide and a rank fails to start (seen once in
    CI).  A lock file in the temp folder, shared by every xdist worker."""
    with open(os.path.join(tempfile.gettempdir(), "fix-recompiles-torchrun.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def test_a_real_two_rank_run_gives_one_row(tmp_path):
    shutil.copy(SCRIPTS / "ranks_train.py", tmp_path / "ranks_train.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "ranks_train.py"]
    with _one_torchrun_at_a_time():
        proc = subprocess.run(CLI + ["run", "--", *cmd], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), timeout=600)
    out = proc.stdout
    rows = [ln for ln in out.splitlines() if ln.startswith("step")]
    assert len(rows) == 1, out
    assert re.match(r"^step \(ranks 0-1\)\s+ranks_train\.py:12\s+8\s+yes\s+tensor shape `x`\s+FR001", rows[0]), out
    assert "FR001 [*] `dynamic=False` but inputs vary" in out
    assert "found nothing here" not in rows[0].split("FR001")[0]


def test_from_trace_reads_a_cluster_jobs_folder(tmp_path):
    """Several runs of a job, one file per rank each, in subfolders: one row."""
    shutil.copy(SCRIPTS / "ranks_train.py", tmp_path / "ranks_train.py")
    env = _env()
    env["TORCH_TRACE"] = str(tmp_path / "job" / "run1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "ranks_train.py"]
    with _one_torchrun_at_a_time():
        run = subprocess.run(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]  # why a rank failed, if one does
    assert len(list((tmp_path / "job" / "run1").iterdir())) == 2  # a file per rank
    shutil.copytree(tmp_path / "job" / "run1", tmp_path / "job" / "run2")
    proc = subprocess.run(CLI + ["check", ".", "--from-trace", "job"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), timeout=600)
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("step")]
    assert len(rows) == 1 and rows[0].startswith("step (ranks 0-1)"), proc.stdout
