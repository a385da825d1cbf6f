"""A guarded program's own stdout and stderr, masked before any pipe or file sees them.

For a program with a registered output filter (:func:`.reviews.filter_output`: terraform
and tofu), the guard gives the program pipes instead of the launcher's
descriptors and copies what it prints through the filter to them, one thread per
stream: ``terraform output -json | base64`` only ever encodes ``(sensitive)``.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import threading
from typing import Protocol


class Filter(Protocol):
    def feed(self, chunk: str) -> str: ...
    def flush(self) -> str: ...


class Relay:
    """Pipes for the descriptors ``numbers`` (1, 2) of ``stdio`` and their copy threads."""

    def __init__(self, stdio: dict[int, int], make: object) -> None:
        self.child: dict[int, int] = {}  # number -> the write end the program gets
        self._ends: list[tuple[int, int, Filter]] = []
        self._threads: list[threading.Thread] = []
        for number in (1, 2):
            target = stdio.get(number)
            if target is None:
                continue
            read, write = os.pipe()
            self.child[number] = write
            self._ends.append((read, os.dup(target), make()))  # type: ignore[operator]

    def start(self) -> None:
        """Start copying; the program holds the write ends now (closed here)."""
        for fd in self.child.values():
            os.close(fd)
        for ends in self._ends:
            thread = threading.Thread(target=_copy, args=ends, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """The program never started: close every descriptor."""
        for fd in [*self.child.values(), *(e[i] for e in self._ends for i in (0, 1))]:
            with contextlib.suppress(OSError):
                os.close(fd)

    def join(self, timeout: float = 10.0) -> None:
        for thread in self._threads:
            thread.join(timeout)


def _copy(read: int, out: int, masker: Filter) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    broken = False
    try:
        while True:
            if getattr(masker, "holding", False) and not select.select([read], [], [], 0.1)[0]:
                text = masker.feed("")  # quiet: what a finished scan lets out goes now
            elif chunk := os.read(read, 65536):
                text = masker.feed(decoder.decode(chunk))
            else:
                break
            broken = broken or not _write(out, text)
        text = masker.feed(decoder.decode(b"", final=True)) + masker.flush()
        if not broken:
            _write(out, text)
    finally:
        for fd in (read, out):
            with contextlib.suppress(OSError):
                os.close(fd)


def _write(fd: int, text: str) -> bool:
    """Write all of ``text``; False when the reader went away (the rest is dropped, and
    the program keeps running as it would with a closed pipe it ignores)."""
    data = text.encode("utf-8", "surrogateescape")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return False
    return True
