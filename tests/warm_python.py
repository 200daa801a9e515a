"""Warm Pythons for the tests: modules imported once, a fresh fork per run.

Every runtime proof runs real torch in a child process, and a cold ``python``
spends seconds of CPU importing torch and the dynamo modules that the first
compile loads; every CLI test starts ``fix-recompiles``, which spends about a
second importing libcst, typer and the engine before it reads a file.  Here
each pytest process (each xdist worker) starts one server per *kind* the
first time a test needs one:

* ``torch``: imports torch, compiles a function of a tensor and a float and
  an optimizer step with a counting backend (pulling in what dynamo imports
  lazily), resets dynamo;
* ``cli``: imports the command line (``cli``) and what a run imports lazily.

The server then waits.  Each run forks it: the child is a fresh copy of that
warm process, so runs share no state with each other (nothing a run does --
config, globals, caches, files, seeds -- reaches the next run), and it
behaves as ``python ARGS`` would: its own ``sys.argv``, working folder,
environment and ``sys.path[0]``, stdin from a file or ``/dev/null``, stdout
and stderr captured, its exit status returned.

    run([script, arg, ...], env=..., cwd=..., timeout=...)   # or ["-c", code, ...], ["-m", module, ...]

has ``subprocess.run``'s shape and result (a ``CompletedProcess``;
``subprocess.TimeoutExpired`` on timeout).  It runs cold (a plain
``subprocess.run`` of ``sys.executable``) where a fork cannot stand in for
a fresh interpreter:

* no ``os.fork`` (not Linux);
* an environment that differs from the one the server started with (a few
  servers per kind, one per environment, then cold), except in
  pytest's per-test ``PYTEST_CURRENT_TEST`` and the variables a kind reads
  only when it runs (``CALL_TIME``): modules read their environment when
  imported (torch, the prefilter's switch), and Python reads ``PYTHON*`` at
  start -- so ``PYTHONHASHSEED=random`` asks for a cold run with its own
  hash seed (all forks of one server share the server's);
* ``FIX_RECOMPILES_COLD_PROBES=1`` (to check that warm and cold runs agree).

The server is single-threaded when it forks (checked at start; otherwise
every run is cold), and it exits when its pytest process closes the pipe (or
dies).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Sequence, Union

HERE = os.path.dirname(os.path.abspath(__file__))
COLD = "FIX_RECOMPILES_COLD_PROBES"
#: variables that change while a session runs and that nothing reads at import
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})
#: per kind: variables read only while running (cli.py reads the cache
#: switches per run), so a run that sets them differently is still warm
CALL_TIME = {
    "torch": frozenset(),
    "cli": frozenset({"FIX_RECOMPILES_NO_CACHE", "FIX_RECOMPILES_CACHE_DIR"}),
}


def _stable(env: Dict[str, str], kind: str) -> Dict[str, str]:
    return {k: v for k, v in env.items() if k not in VOLATILE and k not in CALL_TIME[kind]}


# --- the server (runs as ``python warm_python.py --serve KIND``) ---------------------


def _warm_torch() -> None:
    """Import what the proofs use and compile what they compile (a function of a
    tensor and a float, an optimizer step), then reset dynamo: a run starts
    with the modules loaded and nothing compiled."""
    import warnings

    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    import runtime_probe  # noqa: F401  (the probe and what it imports)

    def backend(gm, example_inputs):
        return gm.forward

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = torch.compile(lambda x, y: torch.nn.functional.relu(x) * y + 1, backend=backend)
        fn(torch.ones(3), 0.5)
        try:  # a compiled optimizer step loads most of torch._inductor
            model = torch.nn.Linear(3, 2)
            opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(0.01))
            model(torch.ones(1, 3)).sum().backward()
            torch.compile(opt.step, backend=backend)()
        except Exception:  # noqa: BLE001 - only a warm-up: the runs import what they need
            pass
    torch._dynamo.reset()
    counters.clear()


def _warm_cli() -> None:
    """Import the command line and the modules a run imports on first use (no
    run: nothing is cached or written)."""
    import importlib

    import cli  # noqa: F401

    for name in ("codemods.config", "typer._adapters", "pydantic", "tomllib", "pathspec", "difflib",
                 "concurrent.futures", "concurrent.futures.process", "multiprocessing", "importlib.metadata"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


WARM_UPS = {"torch": _warm_torch, "cli": _warm_cli}


def _child(request: dict) -> None:
    """In the forked child: become ``python ARGS`` and exit."""
    code = 1
    try:
        devnull = os.open(request.get("stdin") or os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out if request.get("merge") else err, 2)
        for fd in (devnull, out, err):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        args: List[str] = request["args"]
        import runpy
        import types

        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]  # runpy puts the module's path first
            sys.path[0] = os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = args[0]
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # noqa: BLE001 - as the interpreter does: traceback, status 1
        import traceback

        tb = exc.__traceback__
        # the frames of this module and runpy are not the script's (python shows none)
        while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code.co_filename == __file__ or "runpy" in tb.tb_frame.f_code.co_filename
        ):
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def serve(kind: str) -> None:
    # the protocol uses fds 0 and 1 directly (never sys.stdin/sys.stdout, whose
    # buffers a child would inherit); the warm-up writes nothing there
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    WARM_UPS[kind]()
    sys.stdout.flush()  # nothing buffered for a child to inherit
    sys.stderr.flush()
    # what the server holds now is never garbage: keep the collector of each
    # child off those pages (copy-on-write stays shared, forks stay cheap)
    import gc

    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    os.write(proto_out, (json.dumps({"ready": True, "threads": threads}) + "\n").encode())
    reader = _Lines(proto_in)
    while True:
        line = reader.readline(None)
        if not line:
            return
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.close(proto_in)
            os.close(proto_out)
            _child(request)
        os.write(proto_out, (json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        os.write(proto_out, (json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())


class _Lines:
    """Lines from a raw fd, with a timeout (no buffered reader under select)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def readline(self, timeout: Optional[float]) -> Optional[bytes]:
        """A line (b"" at EOF), or None on timeout."""
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return b""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line + b"\n"


# --- the client ------------------------------------------------------------------------


class _Server:
    def __init__(self, kind: str, env: Dict[str, str]) -> None:
        self.kind = kind
        self.env = dict(env)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=self.env,
            cwd=HERE,
            bufsize=0,
        )
        self.lines = _Lines(self.proc.stdout.fileno())
        ready = self._reply(600)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the warm {kind} server did not start:\n" + self._log_tail())
        # forking a multi-threaded process is not safe: then every run is cold
        self.usable = ready.get("threads", 1) == 1

    def serves(self, env: Dict[str, str]) -> bool:
        return self.usable and _stable(self.env, self.kind) == _stable(env, self.kind)

    def _log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:].decode(errors="replace")

    def _reply(self, timeout: Optional[float]) -> Optional[dict]:
        line = self.lines.readline(timeout)
        if line is None:
            return None
        if not line:
            return {}
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, args: Sequence[str], env: Dict[str, str], cwd: str, timeout: Optional[float], input: Optional[bytes], merge: bool):
        """(status, stdout bytes, stderr bytes, timed out)"""
        with tempfile.TemporaryDirectory(prefix="warm-run-") as tmp:
            out, err, stdin = (os.path.join(tmp, n) for n in ("out", "err", "in"))
            if input is not None:
                with open(stdin, "wb") as fh:
                    fh.write(input)
            request = {
                "args": list(args), "cwd": os.path.abspath(cwd), "env": env,
                "out": out, "err": err, "stdin": stdin if input is not None else None, "merge": merge,
            }
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            started = self._reply(60)
            if not started or "pid" not in started:
                raise _ServerGone(self._log_tail())
            done = self._reply(timeout)
            timed_out = done is None
            if timed_out:
                try:
                    os.kill(started["pid"], 9)
                except ProcessLookupError:
                    pass
                done = self._reply(60)
            if not done or "status" not in done:
                raise _ServerGone(self._log_tail())
            with open(out, "rb") as fh:
                stdout = fh.read()
            with open(err, "rb") as fh:
                stderr = fh.read()
        return done["status"], stdout, stderr, timed_out

    def close(self) -> None:
        if self.log.closed:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class _ServerGone(Exception):
    pass


_lock = threading.Lock()
#: (kind, its stable environment) -> server; a few environments per kind at most
_servers: Dict[tuple, _Server] = {}
_broken: set = set()
MAX_SERVERS_PER_KIND = 3


def _server_for(kind: str, env: Dict[str, str]) -> Optional[_Server]:
    if kind in _broken or os.environ.get(COLD) or not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return None
    key = (kind, tuple(sorted(_stable(env, kind).items())))
    server = _servers.get(key)
    if server is not None and not server.alive():
        del _servers[key]
        server = None
    if server is None:
        if sum(1 for k in _servers if k[0] == kind) >= MAX_SERVERS_PER_KIND:
            return None
        try:
            server = _servers[key] = _Server(kind, env)
        except (OSError, RuntimeError):
            _broken.add(kind)
            return None
        import atexit

        atexit.register(server.close)
    return server if server.serves(env) else None


def close_all() -> None:
    """Stop this process's servers (and wait for them: their CPU time is then
    counted as this process's children's, as a cold run's would be)."""
    with _lock:
        while _servers:
            _, server = _servers.popitem()
            server.close()


def try_run(
    args: Sequence[str],
    *,
    kind: str,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = None,
    input: Optional[Union[bytes, str]] = None,
    text: bool = False,
    stderr_to_stdout: bool = False,
) -> Optional[subprocess.CompletedProcess]:
    """``python ARGS`` in a fork of the ``kind`` server, as
    ``subprocess.run([sys.executable, *args], capture_output=True, ...)`` would
    return it (``stderr_to_stdout``: as with ``stderr=subprocess.STDOUT``);
    None where no server can stand in (then run it cold)."""
    env = dict(os.environ if env is None else env)
    cwd = os.getcwd() if cwd is None else cwd
    if isinstance(input, str):
        input = input.encode()
    with _lock:
        server = _server_for(kind, env)
        if server is None:
            return None
        try:
            status, stdout, stderr, timed_out = server.run(args, env, cwd, timeout, input, stderr_to_stdout)
        except _ServerGone:
            _broken.add(kind)  # never again in this process; this run goes cold
            return None
        except BaseException:
            # interrupted mid-request: the pipe is out of step, start afresh next time
            server.proc.kill()
            server.close()
            for key in [k for k, v in _servers.items() if v is server]:
                del _servers[key]
            raise
    if stderr_to_stdout:
        stderr = None
    if text:
        stdout = stdout.decode("utf-8", "replace")
        stderr = stderr if stderr is None else stderr.decode("utf-8", "replace")
    cmd = [sys.executable, *args]
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(cmd, status, stdout, stderr)


def run(
    args: Sequence[str],
    *,
    kind: str = "torch",
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = None,
    input: Optional[Union[bytes, str]] = None,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, *args], capture_output=True, text=text, ...)``,
    in a fork of the warm ``kind`` server when it can stand in for a fresh
    interpreter, else exactly that."""
    done = try_run(args, kind=kind, env=env, cwd=cwd, timeout=timeout, input=input, text=text)
    if done is not None:
        return done
    if text and isinstance(input, bytes):
        input = input.decode()
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=text, input=input,
        env=dict(os.environ if env is None else env), cwd=cwd, timeout=timeout,
    )


def subprocess_run(args: Sequence[str], *, kind: str, **kwargs) -> subprocess.CompletedProcess:
    """A drop-in for ``subprocess.run(args, **kwargs)`` where ``args`` starts with
    ``sys.executable``: warm (a fork of the ``kind`` server) when the call
    captures the output (``capture_output=True`` or ``stdout=PIPE`` with
    ``stderr`` ``PIPE`` or ``STDOUT``) and stdin is ``/dev/null`` (``DEVNULL``,
    unset) or ``input``; otherwise, or where no server can stand in, exactly
    ``subprocess.run``."""
    cmd = [str(c) for c in args]
    kw = dict(kwargs)
    check = kw.pop("check", False)
    capture = kw.pop("capture_output", False)
    stdout, stderr = kw.pop("stdout", None), kw.pop("stderr", None)
    stdin = kw.pop("stdin", None)
    text = bool(kw.pop("text", False) or kw.pop("universal_newlines", False))
    input = kw.pop("input", None)
    cwd, env, timeout = kw.pop("cwd", None), kw.pop("env", None), kw.pop("timeout", None)
    piped = capture or (stdout == subprocess.PIPE and stderr in (subprocess.PIPE, subprocess.STDOUT))
    done = None
    if cmd and cmd[0] == sys.executable and not kw and piped and stdin in (None, subprocess.DEVNULL):
        done = try_run(
            cmd[1:], kind=kind, env=env, cwd=None if cwd is None else str(cwd), timeout=timeout,
            input=input, text=text, stderr_to_stdout=stderr == subprocess.STDOUT,
        )
    if done is None:
        return subprocess.run(args, **kwargs)
    if check:
        done.check_returncode()
    return done


def cli_run(*args, **kwargs) -> subprocess.CompletedProcess:
    """:func:`subprocess_run` with the CLI warm (``kind="cli"``)."""
    return subprocess_run(*args, kind="cli", **kwargs)


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    sys.path[0] = HERE
    serve(sys.argv[2])
