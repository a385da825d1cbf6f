"""Locate and run ripgrep for the glob and grep tools."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.tools.base import SKIP_DIRS, Category, Tool, ToolError, short


class SearchTool(Tool):
    """What glob and grep share: a pattern searched below an optional path."""

    kind = "search"
    category = Category.READ
    path_arg = "path"
    path_default = "."

    def title(self, args: dict[str, Any]) -> str:
        where = f" in {short(args['path'])}" if args.get("path") else ""
        return f"{self.name}: {short(args.get('pattern', ''))}{where}"


#: A search that runs longer than this is stopped (a runaway search over a huge tree).
RG_TIMEOUT = 60.0
#: Bytes of rg's output buffered and read at a time.
READ_SIZE = 1 << 20

#: Flags every search gets: .gitignore respected even outside a git repo, hidden files
#: searched (``.github/``, ``.tflint.hcl``) but never ``.git`` or tool caches, no user
#: config file changing the output format.
BASE_FLAGS = (
    "--no-config",
    "--no-require-git",
    "--hidden",
    "--color=never",
    "--no-messages",
    *(f"--glob=!{name}" for name in sorted(SKIP_DIRS)),
)


@functools.cache
def rg_binary() -> str:
    """Path of the ``rg`` binary: on PATH, else beside the running interpreter."""
    found = shutil.which("rg")
    if found:
        return found
    bindir = Path(sys.executable).parent
    for name in ("rg", "rg.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise ToolError("ripgrep (rg) is not installed; install the 'ripgrep' Python package")


@dataclass
class RgOutput:
    returncode: int
    stdout: str
    stderr: str
    #: Output was longer than the cap and rg was stopped early.
    truncated: bool


async def run_rg(args: list[str], cwd: Path, max_bytes: int) -> RgOutput:
    """Run ``rg BASE_FLAGS args`` in ``cwd``, reading at most ``max_bytes`` of stdout."""
    try:
        proc = await asyncio.create_subprocess_exec(
            rg_binary(),
            *BASE_FLAGS,
            *args,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=READ_SIZE,  # fewer pauses of rg on a full pipe (64 KiB by default)
        )
    except OSError as exc:
        raise ToolError(f"could not run ripgrep: {exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    chunks: list[bytes] = []
    size = 0
    truncated = False
    stderr_task = asyncio.ensure_future(_drain(proc.stderr, 64_000))
    try:
        async with asyncio.timeout(RG_TIMEOUT):
            while True:
                chunk = await proc.stdout.read(READ_SIZE)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size >= max_bytes:
                    truncated = True
                    break
            if truncated:
                _kill(proc)
            returncode = await proc.wait()
            stderr = await stderr_task
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        raise ToolError(
            f"search took longer than {RG_TIMEOUT:.0f}s and was stopped; narrow the path or pattern"
        ) from None
    finally:
        # Cancelled or failed: never leave rg running.
        if proc.returncode is None:
            _kill(proc)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
        stderr_task.cancel()
    data = b"".join(chunks)[:max_bytes]
    return RgOutput(
        returncode=returncode,
        stdout=data.decode("utf-8", errors="surrogateescape"),  # lossless names
        stderr=stderr.decode("utf-8", errors="replace").strip(),
        truncated=truncated,
    )


async def _drain(stream: asyncio.StreamReader, keep: int) -> bytes:
    """Read ``stream`` to its end (so the writer never blocks), keeping the first bytes."""
    kept = bytearray()
    while chunk := await stream.read(65_536):
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return bytes(kept)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def search_root(base: Path) -> tuple[Path, list[str]]:
    """Where to run rg and which path arguments to pass, so output paths come out relative."""
    if base.is_dir():
        return base, []
    return base.parent, [base.name]
