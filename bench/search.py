"""Search figures: the grep and glob tools against plain ``rg`` on a 100,000-file tree
(``bench/tree.py``, cached in the temp dir). Both sides search the same tree for the
same thing; the tools include everything they do (ripgrep, parsing, sorting, paths).
"""

from __future__ import annotations

import asyncio
import subprocess
import time

from tree import ensure_tree

from iac_kernel.config import Settings
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.glob import GlobTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.rg import rg_binary

#: (figure, tool, tool arguments, the plain rg command doing the same search)
CASES = [
    ("glob **/*.tf", GlobTool(), {"pattern": "**/*.tf"}, ["--files", "-g", "*.tf"]),
    ("grep files_with_matches", GrepTool(),
     {"pattern": "aws_s3_bucket", "output_mode": "files_with_matches"},
     ["--files-with-matches", "aws_s3_bucket"]),
    ("grep content", GrepTool(), {"pattern": "aws_s3_bucket"},
     ["--line-number", "aws_s3_bucket"]),
]  # fmt: skip


def plain_rg(root, args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([rg_binary(), "--no-config", *args], cwd=root, stdout=subprocess.DEVNULL,
                   check=False)  # fmt: skip
    return time.perf_counter() - start


def tool_time(loop: asyncio.AbstractEventLoop, ctx: ToolContext, tool, args: dict) -> float:
    """One tool call, timed inside ``loop`` (the agent's loop lives as long as it does)."""

    async def once() -> float:
        start = time.perf_counter()
        await tool.run(dict(args), ctx)
        return time.perf_counter() - start

    return loop.run_until_complete(once())


def run(runs: int) -> dict[str, list[float]]:
    root = ensure_tree()
    ctx = ToolContext(cwd=root, settings=Settings())
    figures: dict[str, list[float]] = {}
    loop = asyncio.new_event_loop()
    try:
        for name, tool, args, rg_args in CASES:
            plain_rg(root, rg_args)  # page cache warm for both
            tool_time(loop, ctx, tool, args)
            for _ in range(runs):
                figures.setdefault(f"rg {name}", []).append(plain_rg(root, rg_args))
                figures.setdefault(f"tool {name}", []).append(tool_time(loop, ctx, tool, args))
    finally:
        loop.close()
    return figures


if __name__ == "__main__":
    print(run(2))
