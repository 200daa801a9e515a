"""Running a command under ``TORCH_TRACE`` in its own process, and comparing
the graphs two traces compiled."""

from __future__ import annotations

import os
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Sequence, Tuple


from . import read as tr
from .match import entry_file


# -- running the command ---------------------------------------------------------


def run_traced(cmd: Sequence[str], trace_dir: str, stdout=None) -> int:
    """Run ``cmd`` with ``TORCH_TRACE=trace_dir``, its output streaming through
    (its stdout to ``stdout`` when given); its exit code (127 when it cannot
    start).  A SIGTERM to this process (what ``timeout`` and CI send) is
    passed on to the command, which is waited for; then this process exits
    143 through ``SystemExit``, so the caller's ``finally`` removes the trace
    folder: nothing keeps running, nothing is left behind."""
    env = dict(os.environ)
    env["TORCH_TRACE"] = trace_dir
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        child = subprocess.Popen(list(cmd), env=env, stdout=stdout)
    except FileNotFoundError:
        print(f"error: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"error: cannot execute: {cmd[0]}", file=sys.stderr)
        return 126
    terminated = []

    def on_term(signum, _frame) -> None:
        terminated.append(signum)
        child.send_signal(signal.SIGTERM)

    in_main = threading.current_thread() is threading.main_thread()  # signal handlers: main thread only
    previous = signal.signal(signal.SIGTERM, on_term) if in_main else None
    try:
        code = child.wait()
    except BaseException:
        child.terminate()
        child.wait()
        raise
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if terminated:
        print("fix-recompiles: terminated (SIGTERM): the command was stopped and waited for", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM)
    return code


def traced_run(cmd: Sequence[str]) -> Tuple[int, tr.Trace]:
    folder = tempfile.mkdtemp(prefix="fix-recompiles-trace-")
    try:
        code = run_traced(cmd, folder)
        return code, tr.read_trace(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)



def compare(before: tr.Trace, after: tr.Trace) -> List[Tuple[str, int, int]]:
    """(function, graphs before, graphs after) per code object, keyed by file and
    name (a fix may move the ``def`` line)."""

    def by_name(t: tr.Trace) -> Dict[Tuple[str, str], int]:
        out: Dict[Tuple[str, str], int] = {}
        for e in t.entries:
            # torch's own code (an optimizer's step, a compiled nn.Sequential)
            # is shown at the user's file that reached it
            internal = tr.is_library_file(e.filename) and e.user_frame is not None
            key = (entry_file(e) or e.filename, tr.display_name(e)) if internal else (e.filename, e.name)
            out[key] = out.get(key, 0) + e.graphs
        return out

    b, a = by_name(before), by_name(after)
    keys = list(b) + [k for k in a if k not in b]
    rows = []
    for key in keys:
        nb, na = b.get(key, 0), a.get(key, 0)
        if nb == 0 and na == 0:
            continue
        filename, name = key
        where = (
            os.path.relpath(filename)
            if filename and not os.path.relpath(filename).startswith("..")
            else filename
        )
        rows.append((f"{name} ({where})", nb, na))
    return rows
