"""The guard launcher: mounted over every copy of a guarded program inside the sandbox.

It runs nothing itself. It sends its exact argv, cwd, environment and stdio to the
agent's approval server over the call's socket; the server classifies the argv, asks
the user for changing commands, and runs the real program (in a sibling sandbox) with
the launcher's stdio. The launcher relays signals and exits with the program's status;
a refusal or a lost server exits 126 with a message the model reads.

Standard library only; it runs as ``python -I -S`` and is written out per program by
:func:`write_launchers` with ``PROGRAM`` filled in, behind a ``/bin/sh`` line that says
why it cannot start when that Python is missing (so no ``__future__`` import: that line
is the file's first statement).
"""

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
NOT_FOUND = 127


def _fail(message: str, start: bool = False, code: int = REFUSED) -> None:
    """One line on stderr, then exit: a refusal, or (``start``) why it cannot start."""
    line = f"cannot start {PROGRAM}: {message}" if start else f"{PROGRAM} was not run: {message}"
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    os.write(2, f"guard: {line}\n".encode(errors="replace"))
    sys.exit(code if code in (REFUSED, NOT_FOUND) else REFUSED)


def main() -> None:
    path = SOCKET_MOUNT if os.path.exists(SOCKET_MOUNT) else os.environ.get(SOCKET_ENV, "")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        why = f"{path}: {exc.strerror or exc}" if path else "there is none here"
        _fail(
            f"the guard's approval socket is not reachable ({why}); "
            "guarded programs run only in the agent's bash calls",
            True,
        )
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
    if answer.get("cannot_start"):
        _fail(answer["cannot_start"], True, int(answer.get("exit", REFUSED)))
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


#: Both shell and Python: sh runs the interpreter on this file or says in one line why it
#: cannot; Python reads the line as a string. ``$0`` is the path the launcher was run by,
#: as ``sys.argv[0]`` is with a ``#!python`` line.
_HEAD = (
    "#!/bin/sh\n"
    + "'" * 4
    + '[ -x {py} ] && exec {py} -IS "$0" "$@"; if [ -e {py} ]; then '
    + 'W="not executable"; C=126; else W=missing; C=127; fi; '
    + 'echo "guard: cannot start {program}: the guard\'s Python {py} is $W here" >&2; '
    + "exit $C # "
    + "'" * 3
    + "\n"
)


def head(program: str, python: str) -> str:
    """The launcher's first lines: the ``/bin/sh`` line, or a plain ``#!`` line for a
    path that line cannot hold unquoted."""
    if all(c.isalnum() or c in "/._+-@" for c in python + program):
        return _HEAD.format(py=python, program=program)
    return f"#!{python} -IS\n"


def write_launchers(directory: Path, programs: list[str], python: str) -> None:
    """Write one launcher per program into ``directory`` (skipping unchanged ones)."""
    source = Path(__file__).read_text()
    body = source.split("\n\n#: Both shell and Python", 1)[0]
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    for program in programs:
        text = head(program, python)
        text += body.replace('PROGRAM = "?"', f"PROGRAM = {program!r}", 1)
        text += '\n\nif __name__ == "__main__":\n    main()\n'
        target = directory / program
        if target.exists() and target.read_text() == text:
            continue
        tmp = directory / f".{program}.tmp"
        tmp.write_text(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
