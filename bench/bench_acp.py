"""Benchmark ``iac-kernel acp`` through the official SDK's client side.

Prints: time from spawn to the initialize answer, session/new, session/load of a stored
5,000-message history (replay included), and session/update throughput for a long
streamed answer. Run: ``python bench/bench_acp.py [--runs N]``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import spawn_agent_process, text_block

from iac_kernel.sessions.store import SessionStore, now_iso

HISTORY_MESSAGES = 5_000
STREAM_WORDS = 20_000


class Counter:
    """A minimal client: counts updates, approves nothing (the bench runs no tools)."""

    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates += 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}


def command() -> list[str]:
    exe = shutil.which("iac-kernel")
    return [exe, "acp"] if exe else [sys.executable, "-m", "iac_kernel", "acp"]


def build_history(store: SessionStore, cwd: str) -> str:
    """A stored session of HISTORY_MESSAGES messages: prompts, answers with thinking,
    and tool calls with results (written as one file, not 5,000 fsyncs)."""
    meta = store.create(cwd, title="bench history")
    records = []
    for i in range(HISTORY_MESSAGES // 4):
        call = f"toolu_bench_{i}"
        messages = [
            {"role": "user", "content": [{"type": "text", "text": f"question {i}: the files?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should look.", "signature": ""},
                    {"type": "text", "text": f"Looking ({i})."},
                    {"type": "tool_use", "id": call, "name": "list_files", "input": {"path": "."}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": "main.tf"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "There is main.tf."}]},
        ]
        records += [{"type": "message", "ts": now_iso(), "message": m} for m in messages]
    path = store.root / f"{meta.session_id}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    meta.message_count = len(records)
    store.write_meta(meta)
    return meta.session_id


def stream_script(path: Path) -> None:
    text = " ".join(f"word{i}" for i in range(STREAM_WORDS))
    path.write_text(json.dumps({"exchanges": [{"match": "stream", "turns": [{"text": text}]}]}))


async def run_once(root: Path, history_id: str, cwd: str, script: Path) -> dict[str, float]:
    client = Counter()
    env = {
        "IAC_KERNEL_SESSIONS_DIR": str(root / "sessions"),
        "IAC_KERNEL_SCRIPT": str(script),
        "IAC_KERNEL_MAX_TOKENS": "100000",
    }
    cmd = command()
    figures: dict[str, float] = {}
    start = time.perf_counter()
    async with spawn_agent_process(
        client,
        cmd[0],
        *cmd[1:],
        env=env,
        transport_kwargs={"stderr": None, "limit": 64 * 1024 * 1024},
        use_unstable_protocol=True,
    ) as (conn, _process):
        await conn.initialize(protocol_version=1)
        figures["initialize (spawn to answer) s"] = time.perf_counter() - start

        t = time.perf_counter()
        session = await conn.new_session(cwd=cwd)
        figures["session/new s"] = time.perf_counter() - t

        client.updates = 0
        t = time.perf_counter()
        await conn.load_session(cwd=cwd, session_id=history_id)
        figures[f"session/load {HISTORY_MESSAGES} messages s"] = time.perf_counter() - t
        figures["  replayed updates"] = client.updates
        await conn.close_session(session_id=history_id)

        client.updates = 0
        t = time.perf_counter()
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("stream")])
        elapsed = time.perf_counter() - t
        assert answer.stop_reason == "end_turn", answer
        figures["streamed updates"] = client.updates
        figures["updates per second"] = client.updates / elapsed
    return figures


def prepare(root: Path) -> tuple[str, str, Path]:
    """The stored history's id, the workspace and the streaming script under ``root``."""
    cwd = root.resolve() / "workspace"
    cwd.mkdir()
    history_id = build_history(SessionStore(root / "sessions"), str(cwd))
    script = root / "stream.json"
    stream_script(script)
    return history_id, str(cwd), script


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        history_id, cwd, script = prepare(root)
        results = [await run_once(root, history_id, cwd, script) for _ in range(runs)]
    print(f"iac-kernel acp, {runs} run(s), median (min .. max)")
    for key in results[0]:
        values = [r[key] for r in results]
        print(
            f"  {key:<40} {statistics.median(values):>10.3f}"
            f"  ({min(values):.3f} .. {max(values):.3f})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args().runs))
