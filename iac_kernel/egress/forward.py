"""The sandbox's end of the egress route (stdlib only; run as ``python -IS forward.py``).

``forward.py PORT SOCKET -- COMMAND...``: listen on 127.0.0.1:PORT inside the sandbox's
own network namespace, hand the listener to a detached forwarder process (each accepted
connection is spliced to the Unix socket SOCKET, the agent's relay outside), then exec
COMMAND. The forwarder is reparented to the sandbox's init, so COMMAND never waits for it;
it dies with the sandbox.

``forward.py connect PORT HOST HOSTPORT``: a proxy command for clients that do not speak
HTTP proxies (git's ``git://`` through ``GIT_PROXY_COMMAND``, ssh's ``ProxyCommand``): an
HTTP CONNECT to HOST:HOSTPORT through the forwarder, then stdin/stdout spliced to it. The
egress policy judges the host like any other.
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


def connect(port: int, host: str, host_port: str) -> None:
    """Splice stdin/stdout to ``host:host_port`` through the forwarder's CONNECT."""
    sock = socket.create_connection(("127.0.0.1", port))
    target = f"{host}:{host_port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            sys.exit(f"egress proxy closed the connection to {target}")
        head += chunk
    head, _, rest = head.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode("latin-1")
    if status.split()[1:2] != ["200"]:
        sys.exit(f"egress proxy refused {target}: {status}")
    out = os.fdopen(1, "wb", buffering=0)
    out.write(rest)

    def upstream() -> None:
        while data := os.read(0, 65536):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    while data := sock.recv(65536):
        out.write(data)


def main(argv: list[str]) -> None:
    if argv[:1] == ["connect"] and len(argv) == 4:
        connect(int(argv[1]), argv[2], argv[3])
        return
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
