"""Running a command under ``TORCH_TRACE`` in its own process, and comparing
the graphs two traces compiled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Sequence, Tuple


from . import read as tr
from .match import entry_file


# -- running the command ---------------------------------------------------------


def run_traced(cmd: Sequence[str], trace_dir: str, stdout=None) -> int:
    """Run ``cmd`` with ``TORCH_TRACE=trace_dir``, its output streaming through
    (its stdout to ``stdout`` when given); its exit code (127 when it cannot
    start)."""
    env = dict(os.environ)
    env["TORCH_TRACE"] = trace_dir
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.call(list(cmd), env=env, stdout=stdout)
    except FileNotFoundError:
        print(f"error: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"error: cannot execute: {cmd[0]}", file=sys.stderr)
        return 126


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
