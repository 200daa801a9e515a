"""``python warm_exec.py SOCKET ARGS...``: run ``python ARGS...`` in a fork of
the warm torch server listening on SOCKET (tests/warm_python.py,
``python_command``), as a real child of whoever started this client.

The client sends its own stdin, stdout and stderr (the fds), its folder and its
environment; the fork runs ARGS with them, and the client exits with the
fork's status (or dies of the same signal).  When the server cannot stand in
(no server, an environment that differs from the server's), the client
becomes ``python ARGS...`` itself (exec).  It imports only the standard
library's json, os, socket and sys, so it starts in a few milliseconds.
"""

import json
import os
import socket
import sys


def main() -> None:
    path, args = sys.argv[1], sys.argv[2:]
    reply = {"cold": True}
    try:
        body = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            socket.send_fds(conn, [len(body).to_bytes(8, "big")], [0, 1, 2])
            conn.sendall(body)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        if data.endswith(b"\n"):
            reply = json.loads(data)
    except (OSError, ValueError):
        reply = {"cold": True}
    if reply.get("cold"):
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, *args])
    status = int(reply["status"])
    if status < 0:  # killed by a signal: die of it too
        os.kill(os.getpid(), -status)
    sys.exit(status & 0xFF)


if __name__ == "__main__":
    main()
