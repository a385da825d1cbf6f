"""Runs inside the sibling sandbox: exec the real program from a file descriptor.

Usage: ``python -I -S exec_helper.py FD SCRIPT ARGV...``. The real program is never
reachable by path in the sandbox; for a binary the descriptor is close-on-exec, so the
program and its children do not inherit it. Standard library only: the approval server
imports :func:`cannot_start` too, for the programs it runs without a sandbox.

A program that cannot start gets one line on stderr naming it and why, and the shell's
status for it: 127 when something is not found, 126 when it is found but cannot run.
"""

import errno
import os
import sys

NOT_FOUND = 127
CANNOT_RUN = 126


def interpreter(head: bytes | None) -> str | None:
    """The program a script's ``#!`` line names (None for a binary)."""
    if not head or not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return words[0].decode(errors="replace") if words else ""


def cannot_start(err: int, head: bytes | None) -> tuple[int, str]:
    """The shell's status and the reason an exec failed with ``err`` (``head``: the
    first bytes of a script, None for a binary), judged in this process's view."""
    shebang = interpreter(head)
    if err == errno.ENOENT:
        if shebang == "":
            return NOT_FOUND, "its #! line names no interpreter"
        if shebang is not None and not os.path.exists(shebang):
            return NOT_FOUND, f"its interpreter {shebang} (the #! line) is not found"
        if shebang is not None:
            return NOT_FOUND, f"its interpreter {shebang} (the #! line) cannot start"
        return NOT_FOUND, "its dynamic loader (the ELF interpreter it names) is not found"
    if err == errno.EACCES:
        if shebang and os.path.exists(shebang) and not os.access(shebang, os.X_OK):
            return CANNOT_RUN, f"its interpreter {shebang} (the #! line) is not executable"
        return CANNOT_RUN, "permission denied (not executable, or on a noexec file system)"
    if err == errno.ENOEXEC:
        return CANNOT_RUN, "not a program this system can run (exec format error)"
    return CANNOT_RUN, os.strerror(err)


def one_line(program: str, why: str) -> str:
    """``guard: cannot start PROGRAM: WHY`` on one line (control characters shown escaped)."""
    text = f"guard: cannot start {program}: {why}"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "\n"


def main() -> None:
    fd, script, argv = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
    if not script:
        os.set_inheritable(fd, False)
    try:
        os.execve(fd, argv, dict(os.environ))
    except OSError as exc:
        head = None
        if script:
            try:
                head = os.pread(fd, 512, 0)
            except OSError:
                head = b"#!?"
        code, why = cannot_start(exc.errno or 0, head)
        os.write(2, one_line(argv[0], why).encode(errors="replace"))
        sys.exit(code)


if __name__ == "__main__":
    main()
