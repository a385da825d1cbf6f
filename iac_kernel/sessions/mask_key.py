"""The store's masking key: the per-install random key of the keyed fingerprints that
say which values a stored tool result was masked with (see
:mod:`iac_kernel.masking.marks`).

It lives in the store's root as ``mask.key`` (0600, never through a link, hidden from
every sandbox with the store). A missing or unreadable key makes every stored result be
masked again at load; a new key is made at the next write.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from iac_kernel.sessions import files

NAME = "mask.key"


def read_key(root: Path) -> bytes | None:
    """The key, or ``None`` when there is none (or it is not one)."""
    try:
        key = bytes.fromhex(files.read(root / NAME).decode("ascii").strip())
    except (OSError, ValueError):
        return None
    return key if len(key) == 32 else None


def install_key(root: Path) -> bytes:
    """The key, made first if there is none (two processes making one: the first wins)."""
    key = read_key(root)
    if key is not None:
        return key
    files.private_dir(root)
    made = secrets.token_bytes(32)
    try:
        files.create_file(root / NAME, made.hex().encode() + b"\n")
    except FileExistsError:
        with contextlib.suppress(OSError):  # another process's (or a bad one: replaced)
            key = read_key(root)
        if key is not None:
            return key
        files.replace(root / NAME, made.hex().encode() + b"\n")
    return made
