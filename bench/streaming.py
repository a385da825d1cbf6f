"""Streaming figure: time per text delta of ``iac-kernel acp`` relaying a Claude answer,
above the bare Anthropic SDK reading the same stream from the same fake Messages API.

Both read ``DELTAS`` text deltas from ``tests/fake_anthropic.py`` (its own process, one
kept-alive connection, TCP_NODELAY). The bare SDK side is a process that times
``messages.create(stream=True)`` to the end; the agent side is timed from the
``session/prompt`` line to its answer, every ``session/update`` read by the client.
Each side warms up with one untimed request first (imports, TLS-less connection).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time

from common import acp_command, clean_env, fake_api, jsonl

DELTAS = 4000
CHUNK = 4
TEXT = ("word " * (DELTAS * CHUNK // 5 + 1))[: DELTAS * CHUNK]

BARE = """
import asyncio, sys, time, anthropic
async def main(url, runs):
    client = anthropic.AsyncAnthropic(base_url=url, api_key="bench", max_retries=0)
    out = []
    for i in range(runs + 1):
        start = time.perf_counter()
        stream = await client.messages.create(model="claude-sonnet-4-6", max_tokens=100000,
            messages=[{"role": "user", "content": "stream"}], stream=True)
        deltas = 0
        async with stream:
            async for event in stream:
                deltas += event.type == "content_block_delta"
        if i:
            out.append(time.perf_counter() - start)
    print(" ".join(map(str, out)), deltas)
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def bare_sdk(url: str, runs: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", BARE, url, str(runs)], capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    assert int(out[-1]) == DELTAS, out
    return [float(x) for x in out[:-1]]


def agent(url: str, runs: int) -> list[float]:
    """Prompt times of ``iac-kernel acp`` on Claude (the fake API); the first is a warm-up."""
    with tempfile.TemporaryDirectory() as sessions:
        env = clean_env(IAC_KERNEL_SESSIONS_DIR=sessions, ANTHROPIC_API_KEY="bench",
                        ANTHROPIC_BASE_URL=url, IAC_KERNEL_MAX_TOKENS="100000")  # fmt: skip
        proc = subprocess.Popen(acp_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env)  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        send = proc.stdin.write
        send(jsonl({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": 1}}))  # fmt: skip
        send(jsonl({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                    "params": {"cwd": sessions, "mcpServers": []}}))  # fmt: skip
        proc.stdin.flush()
        sid = None
        while sid is None:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == 2:
                sid = message["result"]["sessionId"]
        times = []
        for i in range(runs + 1):
            request_id = 10 + i
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]}
            start = time.perf_counter()
            send(jsonl({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                        "params": prompt}))  # fmt: skip
            proc.stdin.flush()
            chunks = 0
            marker = f'"id":{request_id},'.encode()
            while True:
                line = proc.stdout.readline()
                if marker in line and b'"result"' in line:
                    break
                chunks += b"agent_message_chunk" in line
            if i:
                times.append(time.perf_counter() - start)
                assert chunks == DELTAS, chunks
        proc.stdin.close()
        proc.wait(30)
        return times


def run(runs: int) -> dict[str, list[float]]:
    with fake_api(TEXT, CHUNK) as url:
        return {"bare SDK": bare_sdk(url, runs), "iac-kernel acp": agent(url, runs)}


if __name__ == "__main__":
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 2))


def relay_costs(n: int = 20_000) -> dict[str, float]:
    """CPU time per text delta of the ACP relay alone (in process, output to a null
    sink): the payload built as a dict (what turns use) and through the SDK's models."""
    import asyncio

    from acp.connection import Connection

    from iac_kernel.acp.channel import ClientChannel
    from iac_kernel.acp.transport import LineTransport
    from iac_kernel.acp.turn import TurnRelay
    from iac_kernel.acp.updates import to_update
    from iac_kernel.events import TextDelta

    class Null:
        def write(self, data: bytes) -> None:
            return None

        async def drain(self) -> None:
            return None

        def close(self) -> None:
            return None

    async def handler(*_: object) -> None:
        return None

    async def measure() -> dict[str, float]:
        transport = LineTransport(asyncio.StreamReader(), Null())
        channel = ClientChannel(Connection(handler, transport, listening=False))
        relay = TurnRelay(channel, "session-1")
        events = [TextDelta(f"word{i} ") for i in range(n)]
        start = time.process_time()
        for event in events:
            await relay(event)
        fast = (time.process_time() - start) / n
        start = time.process_time()
        for event in events:
            await channel.update("session-1", to_update(event))
        models = (time.process_time() - start) / n
        return {"dict payload": fast, "SDK models": models}

    return asyncio.run(measure())
