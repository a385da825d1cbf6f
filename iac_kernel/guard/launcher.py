"""The guard launcher: mounted over every copy of a guarded program inside the sandbox.

It runs nothing itself. It sends its exact argv, cwd, environment and stdio to the
agent's approval server over the call's socket; the server classifies the argv, asks
the user for changing commands, and runs the real program (in a sibling sandbox) with
the launcher's stdio. The launcher relays signals and exits with the program's status;
a refusal or a lost server exits 126 with a message the model reads.

Standard library only; it runs as ``python -I -S`` and is written out per program by
:func:`write_launchers` with ``PROGRAM`` filled in.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path

PROGRAM = "?"
SOCKET_MOUNT = "/tmp/.iac-guard/sock"
SOCKET_ENV = "IAC_GUARD_SOCKET"
REFUSED = 126


def _fail(message: str) -> None:
    os.write(2, f"guard: {PROGRAM} was not run: {message}\n".encode(errors="replace"))
    sys.exit(REFUSED)


def main() -> None:
    path = SOCKET_MOUNT if os.path.exists(SOCKET_MOUNT) else os.environ.get(SOCKET_ENV, "")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        _fail("the approval channel is not reachable (guarded programs only run in bash calls)")
    fds = [fd for fd in (0, 1, 2) if _valid(fd)]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = os.environ.get("PWD", "/")
    request = {
        "program": PROGRAM,
        "argv": sys.argv,
        "cwd": cwd,
        "env": dict(os.environ),
        "fds": fds,
    }
    data = json.dumps(request).encode()
    header = struct.pack("!I", len(data))
    sock.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    sock.sendall(data)

    started = False

    def relay(signum: int, _frame: object) -> None:
        try:
            sock.sendall(json.dumps({"signal": signum}).encode() + b"\n")
        except OSError:
            pass
        if not started:  # still waiting for the answer: stop now, nothing ran
            os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, relay)
    buffer = b""
    answer: dict = {}
    while not answer:
        try:
            chunk = sock.recv(65536)
        except InterruptedError:
            continue
        if not chunk:
            _fail("the agent went away before answering")
        buffer += chunk
        while b"\n" in buffer and not answer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("started"):
                started = True
            else:
                answer = message
    if answer.get("refused"):
        _fail(answer["refused"])
    code = int(answer.get("exit", REFUSED))
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    sys.exit(code)


def _valid(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def write_launchers(directory: Path, programs: list[str], python: str) -> None:
    """Write one launcher per program into ``directory`` (skipping unchanged ones)."""
    source = Path(__file__).read_text()
    body = source.split("\n\ndef write_launchers", 1)[0]
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    for program in programs:
        text = f"#!{python} -IS\n" + body.replace('PROGRAM = "?"', f"PROGRAM = {program!r}", 1)
        text += '\n\nif __name__ == "__main__":\n    main()\n'
        target = directory / program
        if target.exists() and target.read_text() == text:
            continue
        tmp = directory / f".{program}.tmp"
        tmp.write_text(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
