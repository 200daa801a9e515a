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

    for name in ("codemods.pipeline.config", "typer._adapters", "pydantic", "tomllib", "pathspec", "difflib",
                 "concurrent.futures", "concurrent.futures.process", "multiprocessing", "importlib.metadata"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


WARM_UPS = {"torch": _warm_torch, "cli": _warm_cli}


def _child(request: dict, stdio: Optional[Sequence[int]] = None) -> None:
    """In the forked child: become ``python ARGS`` and exit.  ``stdio``: the
    caller's own fds 0, 1, 2 (an exec request, :func:`_serve_exec`), else the
    request's files."""
    code = 1
    try:
        if stdio is not None:
            for target, fd in enumerate(stdio):
                os.dup2(fd, target)
            for fd in set(stdio):
                if fd > 2:
                    os.close(fd)
        else:
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
        if stdio is not None:
            _torch_reads_its_environment_again()
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
            tb.tb_frame.f_code.co_filename in (__file__, EXEC_FILENAME) or "runpy" in tb.tb_frame.f_code.co_filename
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


def _torch_reads_its_environment_again() -> None:
    """In an exec child: torch set up its logging from the server's
    environment when it was imported; set it up again from this run's (its
    ``TORCH_TRACE``), with the structured trace's string table and dumped
    files empty, as in a new process."""
    if "torch" not in sys.modules:
        return
    import torch._logging._internal as logs
    import torch._logging.structured as structured

    structured.INTERN_TABLE.clear()
    structured.DUMPED_FILES.clear()
    logs.LOG_TRACE_HANDLER = None
    logs._init_logs()


def _serve_exec(listener, env: Dict[str, str], kind: str) -> None:
    """One exec request on ``listener`` (tests/warm_exec.py): a length, the
    caller's fds 0, 1, 2, then {"args", "cwd", "env"}.  A fork runs it with the
    caller's stdio; the reply is {"status": N} when it ends, or {"cold": true}
    (the caller then execs a new python) when its environment differs from
    the server's in more than TORCH_TRACE and the volatile variables."""
    import socket

    conn, _ = listener.accept()
    fds: List[int] = []
    try:
        head, fds, _flags, _addr = socket.recv_fds(conn, 8, 3)
        if len(head) != 8 or len(fds) != 3:
            return
        size = int.from_bytes(head, "big")
        body = b""
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                return
            body += chunk
        request = json.loads(body)
        same = {k: v for k, v in request["env"].items() if k not in EXEC_CALL_TIME}
        if _stable(same, kind) != _stable({k: v for k, v in env.items() if k not in EXEC_CALL_TIME}, kind):
            conn.sendall(b'{"cold": true}\n')
            return
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            _child(request, stdio=fds)
        for fd in fds:
            os.close(fd)
        fds = []
        _, status = os.waitpid(pid, 0)
        conn.sendall((json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())
    except (OSError, ValueError, KeyError):
        pass
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def serve(kind: str, listen: Optional[str] = None) -> None:
    # the protocol uses fds 0 and 1 directly (never sys.stdin/sys.stdout, whose
    # buffers a child would inherit); the warm-up writes nothing there
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    started_env = dict(os.environ)  # before the warm-up (torch sets TORCHINDUCTOR_CACHE_DIR)
    WARM_UPS[kind]()
    sys.stdout.flush()  # nothing buffered for a child to inherit
    sys.stderr.flush()
    # what the server holds now is never garbage: keep the collector of each
    # child off those pages (copy-on-write stays shared, forks stay cheap)
    import gc

    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    listener = None
    if listen is not None:  # exec requests too (tests/warm_exec.py)
        import socket

        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(listen)
        listener.listen(8)
    os.write(proto_out, (json.dumps({"ready": True, "threads": threads}) + "\n").encode())
    reader = _Lines(proto_in)
    while True:
        if listener is not None and not reader.buf:
            ready, _, _ = select.select([proto_in, listener], [], [])
            if listener in ready:
                _serve_exec(listener, started_env, kind)
                continue
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
    def __init__(self, kind: str, env: Dict[str, str], listen: Optional[str] = None) -> None:
        self.kind = kind
        self.env = dict(env)
        self.listen = listen
        self.log = tempfile.TemporaryFile()
        if listen:  # an exec server: its own frames under a name traces skip (see _EXEC_BOOT)
            argv = [sys.executable, "-c", _EXEC_BOOT, os.path.abspath(__file__), kind, "--listen", listen]
        else:
            argv = [sys.executable, os.path.abspath(__file__), "--serve", kind]
        self.proc = subprocess.Popen(
            argv,
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
        if self.listen:
            try:
                os.unlink(self.listen)
            except OSError:
                pass
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
        while _exec_servers:
            _, server = _exec_servers.popitem()
            server.close()
        while _exec_folder:
            import shutil

            shutil.rmtree(_exec_folder.pop(), ignore_errors=True)


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


#: the file name an exec server's own code runs under.  A script's compile
#: records the Python stack (the trace's ``dynamo_start``); a new ``python``
#: shows none of its callers there, a fork of a server would show the
#: server's frames, which a reader of the trace would take for user code
#: (its ``_user_frame``: the innermost frame outside the standard library and
#: site-packages, or ``<...>``).  Under ``<warm_python>`` they are skipped as
#: the interpreter's own.
EXEC_FILENAME = "<warm_python>"
_EXEC_BOOT = (
    "import os, sys\n"
    "path = sys.argv[1]\n"
    "sys.path[0] = os.path.dirname(path)\n"
    "with open(path) as fh:\n"
    "    source = fh.read()\n"
    "scope = {'__name__': '__warm_server__', '__file__': path}\n"
    f"exec(compile(source, {EXEC_FILENAME!r}, 'exec'), scope)\n"
    "scope['serve'](sys.argv[2], sys.argv[4])\n"
)
#: the client of exec requests: ``python warm_exec.py SOCKET ARGS``
WARM_EXEC = os.path.join(HERE, "warm_exec.py")
#: variables an exec request may set differently from its server's: torch
#: reads them again in the child (:func:`_torch_reads_its_environment_again`)
EXEC_CALL_TIME = frozenset({"TORCH_TRACE"})
#: stable environment -> exec server (a torch server listening on a socket)
_exec_servers: Dict[tuple, _Server] = {}
_exec_folder: List[str] = []


def python_command(env: Optional[Dict[str, str]] = None) -> List[str]:
    """The argv prefix to give a tool under test for ``python SCRIPT ARGS`` that
    the tool runs itself, as a real child process (``fix-recompiles run --
    python train.py``): ``[python, warm_exec.py, SOCKET]``, a small client
    that has a fork of a warm torch server run ``SCRIPT ARGS`` with the
    client's own stdin, stdout, stderr, folder and environment (torch reads
    ``TORCH_TRACE`` again there) and exits with its status; the script is
    compiled and traced by the same torch a new ``python`` would import.
    ``[python]`` itself where no fork can stand in (as for :func:`run`), and
    the client execs a new ``python`` when the environment it is given
    differs from ``env`` (the server's) in more than ``TORCH_TRACE``."""
    env = dict(os.environ if env is None else env)
    env.pop("TORCH_TRACE", None)
    if os.environ.get(COLD) or not hasattr(os, "fork") or not sys.platform.startswith("linux") or "torch" in _broken:
        return [sys.executable]
    key = tuple(sorted(_stable(env, "torch").items()))
    with _lock:
        server = _exec_servers.get(key)
        if server is not None and not server.alive():
            del _exec_servers[key]
            server = None
        if server is None:
            if len(_exec_servers) >= MAX_SERVERS_PER_KIND:
                return [sys.executable]
            if not _exec_folder:
                _exec_folder.append(tempfile.mkdtemp(prefix="warm-exec-"))
            path = os.path.join(_exec_folder[0], f"torch-{len(_exec_servers)}.sock")
            try:
                server = _exec_servers[key] = _Server("torch", env, listen=path)
            except (OSError, RuntimeError):
                _broken.add("torch")
                return [sys.executable]
            if not server.usable:
                return [sys.executable]
            import atexit

            atexit.register(server.close)
    return [sys.executable, WARM_EXEC, server.listen]


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    sys.path[0] = HERE
    serve(sys.argv[2], sys.argv[4] if sys.argv[3:4] == ["--listen"] else None)
