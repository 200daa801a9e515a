"""Running a command under ``TORCH_TRACE`` in its own process, and comparing
the graphs two traces compiled."""

from __future__ import annotations

import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Sequence, Tuple


from . import read as tr
from .match import entry_file


# -- running the command ---------------------------------------------------------


def run_traced(cmd: Sequence[str], trace_dir: str, stdout=None, captured: Optional[List[bytes]] = None) -> int:
    """Run ``cmd`` with ``TORCH_TRACE=trace_dir``, its output streaming through
    (its stdout to ``stdout`` when given; with ``captured``, its stdout is
    also kept there, chunk by chunk); its exit code (127 when it cannot
    start).  A SIGTERM to this process (what ``timeout`` and CI send) is
    passed on to the command, which is waited for; then this process exits
    143 through ``SystemExit``, so the caller's ``finally`` removes the trace
    folder: nothing keeps running, nothing is left behind."""
    env = dict(os.environ)
    env["TORCH_TRACE"] = trace_dir
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        child = subprocess.Popen(list(cmd), env=env, stdout=subprocess.PIPE if captured is not None else stdout)
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

    tee = None
    if captured is not None:
        tee = threading.Thread(target=_tee, args=(child.stdout, stdout if stdout is not None else sys.stdout, captured), daemon=True)
        tee.start()
    in_main = threading.current_thread() is threading.main_thread()  # signal handlers: main thread only
    previous = signal.signal(signal.SIGTERM, on_term) if in_main else None
    try:
        code = child.wait()
        if tee is not None:
            tee.join()
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


def _tee(pipe, out, captured: List[bytes]) -> None:
    """Copy the child's stdout to ``out`` as it comes, keeping every chunk."""
    sink = getattr(out, "buffer", None)
    for chunk in iter(lambda: pipe.read1(65536), b""):
        captured.append(chunk)
        if sink is not None:
            sink.write(chunk)
            sink.flush()
        else:
            out.write(chunk.decode("utf-8", "replace"))
            out.flush()
    pipe.close()


def traced_run(cmd: Sequence[str]) -> Tuple[int, tr.Trace, bytes]:
    """(exit code, trace, stdout) of ``cmd`` run under ``TORCH_TRACE``."""
    folder = tempfile.mkdtemp(prefix="fix-recompiles-trace-")
    captured: List[bytes] = []
    try:
        code = run_traced(cmd, folder, captured=captured)
        return code, tr.read_trace(folder), b"".join(captured)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- comparing what the command printed before and after the fixes -------------------
#
# A fix must keep the program's results.  What the command printed to stdout
# is compared line by line: the text must be the same and every number
# within a relative 1e-4 (compiled graphs of another shape may round the
# last digits differently), except what changes by design or by the clock: a
# line that counts graphs, compiles or recompiles (the fix is meant to change
# it) is skipped, and a timing or a rate within a line (``12.3 ms``, ``1.5
# it/s``, ``took 3.1``, ``dt: 80``, ``mfu 41.2``) is not compared.

_NUM = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
#: lines that count what the fix changes
_COMPILE_LINE = re.compile(r"graph|recompil|compil", re.IGNORECASE)
#: a number that is a duration or a rate: with a unit, or after a timing word
_TIMING = re.compile(
    rf"{_NUM}\s*(?:ms|us|µs|s|sec|secs|seconds|min|mins|h|hours)\b"
    rf"|{_NUM}\s*(?:it|its|tok|toks|tokens|samples|img|imgs|images|steps|batches)/s\b"
    rf"|{_NUM}\s*s/it\b"
    rf"|\b(?:time|timing|elapsed|took|duration|throughput|speed|mfu|eta|dt|tps|fps|lat|latency)\b\W{{0,3}}{_NUM}",
    re.IGNORECASE,
)

_NUMBER = re.compile(_NUM)


def _kept_lines(output: bytes) -> List[str]:
    text = output.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return [_TIMING.sub("<time>", ln.rstrip()) for ln in text.split("\n") if ln.strip() and not _COMPILE_LINE.search(ln)]


def _same_line(a: str, b: str) -> bool:
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        fx, fy = float(x), float(y)
        if fx != fy and abs(fx - fy) > 1e-4 * max(abs(fx), abs(fy)):
            return False
    return True


def output_change(before: bytes, after: bytes, *, prefix: bool = False) -> Optional[str]:
    """None when the command printed the same results before and after the
    fixes (as above); else the first difference, for a message.  With
    ``prefix`` (the first run stopped at the recompile limit) the second run
    may print more after what the first printed."""
    a, b = _kept_lines(before), _kept_lines(after)
    for x, y in zip(a, b):
        if not _same_line(x, y):
            return f"`{x.strip()[:120]}` became `{y.strip()[:120]}`"
    if len(a) != len(b) and not (prefix and len(b) > len(a)):
        extra = a[len(b)] if len(a) > len(b) else b[len(a)]
        which = "is no longer printed" if len(a) > len(b) else "is printed in addition"
        return f"`{extra.strip()[:120]}` {which}"
    return None



def function_key(entry: tr.CodeEntry) -> Tuple[str, str]:
    """(file, function) a code object's graphs are counted under when two
    runs are compared: a fix may move the ``def`` line; torch's own code (an
    optimizer's step, a compiled nn.Sequential) counts at the user's file
    that reached it."""
    internal = tr.is_library_file(entry.filename) and entry.user_frame is not None
    return (entry_file(entry) or entry.filename, tr.display_name(entry)) if internal else (entry.filename, entry.name)


def graphs_by_function(trace: tr.Trace) -> Dict[Tuple[str, str], int]:
    """Graphs compiled per :func:`function_key`, in trace order."""
    out: Dict[Tuple[str, str], int] = {}
    for e in trace.entries:
        key = function_key(e)
        out[key] = out.get(key, 0) + e.graphs
    return out


def compare(before: tr.Trace, after: tr.Trace) -> List[Tuple[str, int, int]]:
    """(function, graphs before, graphs after) per code object, keyed by file and
    name (:func:`function_key`)."""
    b, a = graphs_by_function(before), graphs_by_function(after)
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
