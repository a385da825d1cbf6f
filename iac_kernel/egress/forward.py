"""The sandbox's end of the egress route (stdlib only; run as ``python -IS forward.py``).

``forward.py PORT SOCKET -- COMMAND...``: listen on 127.0.0.1:PORT inside the sandbox's
own network namespace, hand the listener to a detached forwarder process (each accepted
connection is spliced to the Unix socket SOCKET, the agent's relay outside), then exec
COMMAND. The forwarder is reparented to the sandbox's init, so COMMAND never waits for it;
it dies with the sandbox.
"""

from __future__ import annotations

import os
import socket
import sys
import threading


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _serve_one(conn: socket.socket, path: str) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
    back.start()
    _pipe(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(conn, path), daemon=True).start()


def main(argv: list[str]) -> None:
    port, path, sep, command = int(argv[0]), argv[1], argv[2], argv[3:]
    if sep != "--" or not command:
        sys.exit("usage: forward.py PORT SOCKET -- COMMAND...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = listener.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 65536)
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    os.wait()  # the first child exits at once (its child is the forwarder)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.exit(f"{command[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
