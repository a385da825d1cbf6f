"""Which word of a simple command is the program it runs (``env X=1 terraform apply``
runs terraform): for matching an approved literal command to the argv it execs."""

from __future__ import annotations

import os

#: Programs that run their arguments as a command (``env X=1 terraform apply``).
_WRAPPERS = {"env", "command", "exec", "nohup", "time", "nice", "setsid", "stdbuf", "sudo"}


def command_position(words: list[str]) -> int:
    """Index of the program a simple command runs: after ``NAME=value`` assignments and
    known wrappers with their options (``echo terraform apply`` runs echo, index 0)."""
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, _ = word.partition("=")
        if eq and name.isidentifier():
            i += 1
        elif os.path.basename(word) in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            return i
    return i
