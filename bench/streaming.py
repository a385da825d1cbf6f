"""Streaming figure: time per text delta of ``iac-kernel acp`` relaying a Claude answer,
above the bare Anthropic SDK reading the same stream from the same fake Messages API.

Both read ``DELTAS`` text deltas from ``tests/fake_anthropic.py`` (its own process, one
kept-alive connection, TCP_NODELAY). The bare SDK side is a process that times
``messages.create(stream=True)`` to the end; the agent side is timed from the
``session/prompt`` line to its answer, every ``session/update`` read by the client.
Each side warms up with one untimed request first (imports, TLS-less connection); then
their requests alternate, so a change of load on this 2-core machine hits both alike.
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
async def main(url):
    client = anthropic.AsyncAnthropic(base_url=url, api_key="bench", max_retries=0)
    while sys.stdin.readline():  # one timed request per line read
        start = time.perf_counter()
        stream = await client.messages.create(model="claude-sonnet-4-6", max_tokens=100000,
            messages=[{"role": "user", "content": "stream"}], stream=True)
        deltas = 0
        async with stream:
            async for event in stream:
                deltas += event.type == "content_block_delta"
        print(time.perf_counter() - start, deltas, flush=True)
asyncio.run(main(sys.argv[1]))
"""


class BareSDK:
    """The bare SDK in its own process, one timed request per :meth:`once`."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", BARE, url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip

    def once(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        elapsed, deltas = self.proc.stdout.readline().split()
        assert int(deltas) == DELTAS, deltas
        return float(elapsed)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


class Agent:
    """``iac-kernel acp`` on Claude (the fake API) with one session; :meth:`once` times
    one prompt from its line to its answer, reading every text update on the way (deltas
    that reach the agent together arrive as one chunk) and checking the whole text."""

    def __init__(self, url: str, sessions: str) -> None:
        env = clean_env(IAC_KERNEL_SESSIONS_DIR=sessions, ANTHROPIC_API_KEY="bench",
                        ANTHROPIC_BASE_URL=url, IAC_KERNEL_MAX_TOKENS="100000")  # fmt: skip
        self.proc = subprocess.Popen(acp_command(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)  # fmt: skip
        self.request_id = 10
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": 1}})  # fmt: skip
        self.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": sessions, "mcpServers": []}})  # fmt: skip
        assert self.proc.stdout is not None
        self.session_id = None
        while self.session_id is None:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == 2:
                self.session_id = message["result"]["sessionId"]

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(jsonl(message))
        self.proc.stdin.flush()

    def once(self) -> float:
        self.request_id += 1
        prompt = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": "stream"}]}
        marker = f'"id":{self.request_id},'.encode()
        out = self.proc.stdout
        assert out is not None
        start = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": self.request_id, "method": "session/prompt",
                   "params": prompt})  # fmt: skip
        text = []
        while True:
            line = out.readline()
            if marker in line and b'"result"' in line:
                break
            if b"agent_message_chunk" in line:
                text.append(json.loads(line)["params"]["update"]["content"]["text"])
        elapsed = time.perf_counter() - start
        assert "".join(text) == TEXT, "the answer arrived changed"
        return elapsed

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def run(runs: int) -> dict[str, list[float]]:
    """Bare SDK and agent requests interleaved (after one untimed warm-up each), so a
    change of load hits both sides alike."""
    figures: dict[str, list[float]] = {"bare SDK": [], "iac-kernel acp": []}
    with fake_api(TEXT, CHUNK) as url, tempfile.TemporaryDirectory() as sessions:
        bare, agent = BareSDK(url), Agent(url, sessions)
        try:
            bare.once(), agent.once()
            for _ in range(runs):
                figures["bare SDK"].append(bare.once())
                figures["iac-kernel acp"].append(agent.once())
        finally:
            bare.close()
            agent.close()
    return figures


if __name__ == "__main__":
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 2))


def relay_costs(n: int = 20_000) -> dict[str, float]:
    """CPU time per text delta of the ACP relay alone (in process, output to a null
    sink), each delta alone in its loop iteration (none coalesced, the worst case; the
    cost of the loop turning is measured alone and taken off): the payload built as a
    dict (what turns use) and through the SDK's models."""
    import asyncio

    from iac_kernel.acp.protocol.updates import to_update
    from iac_kernel.acp.session.turn import TurnRelay
    from iac_kernel.acp.wire.channel import ClientChannel
    from iac_kernel.acp.wire.connection import Connection
    from iac_kernel.acp.wire.transport import LineTransport
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
        channel = ClientChannel(Connection(handler, transport))
        relay = TurnRelay(channel, "session-1")
        events = [TextDelta(f"word{i} ") for i in range(n)]
        start = time.process_time()
        for _event in events:
            await asyncio.sleep(0)
        turns = time.process_time() - start  # the loop turning alone, taken off below
        start = time.process_time()
        for event in events:
            await relay(event)
            await asyncio.sleep(0)  # the loop turns: the held delta is sent
        await relay.finish()
        fast = (time.process_time() - start - turns) / n
        start = time.process_time()
        for event in events:
            await channel.update("session-1", to_update(event))
            await asyncio.sleep(0)
        models = (time.process_time() - start - turns) / n
        return {"dict payload": fast, "SDK models": models}

    return asyncio.run(measure())
