"""Runs inside the sibling sandbox: exec the real program from a file descriptor.

Usage: ``python -I -S exec_helper.py FD SCRIPT ARGV...``. The real program is never
reachable by path in the sandbox; for a binary the descriptor is close-on-exec, so the
program and its children do not inherit it. Standard library only.
"""

import os
import sys


def main() -> None:
    fd, script, argv = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
    if not script:
        os.set_inheritable(fd, False)
    try:
        os.execve(fd, argv, dict(os.environ))
    except OSError as exc:
        os.write(2, f"guard: cannot start {argv[0]}: {exc.strerror or exc}\n".encode())
        sys.exit(127)


if __name__ == "__main__":
    main()
