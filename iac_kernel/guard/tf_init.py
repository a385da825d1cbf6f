"""``terraform init`` that was not asked runs with ``-input=false``.

Init asks on stdin before it migrates or overwrites state (a local state moving into a
new backend); a bash call can answer that prompt itself (``printf 'yes\\n' | terraform
init``). Appended last, ``-input=false`` wins over ``TF_CLI_ARGS_init`` and an earlier
``-input=true``: the prompt never comes, init stops, and the program's stderr says why.
A migration on purpose is ``init -migrate-state`` or ``-force-copy``: asked per call.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable

INIT_NOTE = (
    "guard: `{program} init` ran with -input=false: it never answers a prompt to migrate "
    "or overwrite state. To migrate, run `{program} init -migrate-state` (asked per call).\n"
)


def is_init(program: str, argv: list[str]) -> bool:
    """A terraform/tofu/terragrunt ``init`` (``terragrunt run-all init`` too)."""
    if program not in ("terraform", "tofu", "terragrunt"):
        return False
    words = [a for a in argv[1:] if not a.startswith("-")]
    return "init" in words[:2]


async def without_input(
    program: str,
    argv: list[str],
    numbers: list,
    fds: list[int],
    run: Callable[[list[str]], Awaitable[int]],
) -> int:
    """``run`` ``argv`` plus ``-input=false``; on failure, say why on its stderr (the
    launcher's descriptor number 2 among ``numbers``/``fds``)."""
    stderr = dict(zip(numbers, fds, strict=False)).get(2)
    note_fd = os.dup(stderr) if stderr is not None else None
    try:
        code = await run([*argv, "-input=false"])
        if code != 0 and note_fd is not None:
            with contextlib.suppress(OSError):
                os.write(note_fd, INIT_NOTE.format(program=program).encode())
        return code
    finally:
        if note_fd is not None:
            os.close(note_fd)
