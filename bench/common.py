"""Helpers shared by the benchmarks: medians, subprocess timing, the fake Messages API."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Floor: a python process that imports pydantic and answers one JSON line.
FLOOR_SCRIPT = (
    "import sys, json, pydantic\n"
    "line = sys.stdin.readline()\n"
    "answer = {'jsonrpc': '2.0', 'id': json.loads(line)['id'], 'result': {}}\n"
    "sys.stdout.write(json.dumps(answer) + '\\n'); sys.stdout.flush()\n"
)


def main_runs_mb(doc: str, run: Callable, report: Callable) -> None:
    """A ``--runs N --mb M`` benchmark's command line: ``report(run(runs, mb))``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    report(run(args.runs, args.mb))


def median(values: list[float]) -> float:
    return statistics.median(values)


def acp_command() -> list[str]:
    """The ``iac-kernel`` entry point of this interpreter, spawned directly as the floor
    process is (a version manager's shim on PATH, e.g. pyenv's bash script, adds ~70 ms
    that is not the agent's)."""
    beside = Path(sys.executable).parent / "iac-kernel"
    exe = str(beside) if os.access(beside, os.X_OK) else shutil.which("iac-kernel")
    return [exe, "acp"] if exe else [sys.executable, "-m", "iac_kernel", "acp"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without Anthropic credentials, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "IAC_KERNEL_"))}
    env.update(extra)
    return env


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


@contextmanager
def fake_api(text: str, chunk_size: int) -> Iterator[str]:
    """The fake Messages API (tests/fake_anthropic.py) in its own process, answering
    every request with one streamed text; yields its base URL."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from fake_anthropic import FakeAnthropicServer, StreamedMessage, text\n"
        "server = FakeAnthropicServer().start()\n"
        "server.repeat = StreamedMessage([text(sys.argv[2])], chunk_size=int(sys.argv[3]))\n"
        "print(server.url, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(ROOT / "tests"), text, str(chunk_size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def jsonl(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()
