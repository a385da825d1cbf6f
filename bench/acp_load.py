"""``session/load`` of a 50 MB session with varied text, timed from a real ACP client
(the official Python SDK's client side over stdio, the agent in its own process) until
the load's answer arrived and every replayed update was read, against the floor of
``json.loads`` of each of the log's lines in this process.

The agent's start-up (the SDK import that follows its early ``initialize`` answer) is
timed apart, before the load. A second load gives the agent three secret-named
environment variables, as an editor passing its own environment does: every replayed
result is then searched for their values too.

Run: ``python bench/acp_load.py [--mb 50] [--runs 3]``. Not a test. Target: <= 3x.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from acp import spawn_agent_process
from acp_stream import node_load, raw_load, writer_command
from bench_acp import Counter
from common import acp_command, main_runs_mb, median

from iac_kernel.sessions.store import SessionStore, now_iso

NODE_SCRIPT = Path(__file__).with_name("acp_load_node.mjs")
NODE_SDK = Path(__file__).parent.parent / "tests/node/node_modules/@agentclientprotocol/sdk"

TOOLS = ("read_file", "bash", "grep", "list_files", "terraform_plan", "write_file")
#: What an editor that passes its own environment may give the agent: secret-named
#: variables, whose values every replayed result is searched for (made-up values).
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "Xq7" * 30,
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYBENCHKEY01",
    "GITHUB_TOKEN": "ghp_" + "b3nch" * 7 + "x",
}


def words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choices(vocabulary, k=n))


def build(store: SessionStore, cwd: str, megabytes: int) -> tuple[str, Path]:
    """A session of prompts, answers, tool calls (varied tools and inputs) and tool
    outputs (varied text of varied length) of about ``megabytes``."""
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(5000)]
    meta = store.create(cwd, title="bench acp load")
    path = store.root / f"{meta.session_id}.jsonl"
    size, i, count = 0, 0, 0
    with path.open("w") as out:
        while size < megabytes * 1024 * 1024:
            call, tool = f"toolu_{i:06d}", rng.choice(TOOLS)
            output = "\n".join(words(rng, vocabulary, rng.randint(4, 16)) for _ in range(60))
            messages = [
                {"role": "user", "content": [{"type": "text", "text": words(rng, vocabulary, 20)}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": words(rng, vocabulary, rng.randint(10, 80))},
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": tool,
                            "input": {"path": f"{rng.choice(vocabulary)}/{i}.tf", "n": i},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": output}],
                },
            ]
            for message in messages:
                line = json.dumps({"type": "message", "ts": now_iso(), "message": message}) + "\n"
                out.write(line)
                size += len(line)
                count += 1
            i += 1
    meta.message_count = count
    store.write_meta(meta)
    return meta.session_id, path


def floor(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``json.loads`` of each of the log's lines."""
    t, cpu = time.perf_counter(), time.process_time()
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - t, time.process_time() - cpu


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load_once(
    root: Path, sid: str, cwd: str, cmd: list[str], secrets: bool = False
) -> dict[str, float]:
    """The load's time from the client's side once the agent has started (the SDK import
    that follows an early ``initialize`` answer is timed apart: ``start s``), the CPU
    seconds the client and the agent spent on it (what a busy machine does not inflate
    as much) and the number of updates."""
    client = Counter()
    env = {"IAC_KERNEL_SESSIONS_DIR": str(root / "sessions"), **(SECRETS if secrets else {})}
    async with spawn_agent_process(
        client,
        cmd[0],
        *cmd[1:],
        env=env,
        transport_kwargs={"stderr": None, "limit": 64 * 1024 * 1024},
        use_unstable_protocol=True,
    ) as (conn, process):
        await conn.initialize(protocol_version=1)
        t = time.perf_counter()
        await conn.list_sessions(cwd=cwd)  # answered once the agent's SDK is imported
        started = time.perf_counter() - t
        agent, cpu, t = cpu_seconds(process.pid), time.process_time(), time.perf_counter()
        await conn.load_session(cwd=cwd, session_id=sid)
        took = time.perf_counter() - t
        cpu, agent = time.process_time() - cpu, cpu_seconds(process.pid) - agent
        await conn.close_session(session_id=sid)
    return {"s": took, "start s": started, "client cpu": cpu, "agent cpu": agent,
            "updates": client.updates}  # fmt: skip


def run(runs: int, megabytes: int = 50) -> dict[str, list[float]]:
    """Client-side load figures and floors (seconds), interleaved; the size and updates.

    Clients: the Python SDK's (``py``), the TypeScript SDK's (``node``, when node and
    ``tests/node/node_modules`` are there) and a raw one that only ``json.loads`` each
    line (``raw``); ``... floor`` rows are the SDK clients reading the same stream from
    a process that only writes it (:mod:`acp_stream`)."""
    figures: dict[str, list[float]] = defaultdict(list)
    node = NODE_SCRIPT if shutil.which("node") and NODE_SDK.is_dir() else None
    with tempfile.TemporaryDirectory(prefix="bench-acp-load-") as tmp:
        root = Path(tmp)
        cwd = root.resolve() / "workspace"
        cwd.mkdir()
        sid, path = build(SessionStore(root / "sessions"), str(cwd), megabytes)
        env = {"IAC_KERNEL_SESSIONS_DIR": str(root / "sessions")}
        stream = root / "stream.jsonl"
        raw_load(acp_command(), env, str(cwd), sid, save=stream)
        writer = writer_command(stream)
        for _ in range(runs):  # interleaved: all see the same machine load
            wall, cpu = floor(path)
            figures["floor s"].append(wall)
            figures["floor cpu"].append(cpu)
            rows = {
                "py": lambda: asyncio.run(load_once(root, sid, str(cwd), acp_command())),
                "py secrets": lambda: asyncio.run(
                    load_once(root, sid, str(cwd), acp_command(), True)
                ),
                "py floor": lambda: asyncio.run(load_once(root, sid, str(cwd), writer)),
                "raw": lambda: raw_load(acp_command(), env, str(cwd), sid),
            }
            if node is not None:
                rows["node"] = lambda: node_load(node, acp_command(), env, str(cwd), sid)
                rows["node secrets"] = lambda: node_load(
                    node, acp_command(), {**env, **SECRETS}, str(cwd), sid
                )
                rows["node floor"] = lambda: node_load(node, writer, env, str(cwd), sid)
            for name, once in rows.items():
                for key, value in once().items():
                    figures[f"{name} {key}"].append(value)
        figures["size"] = [float(path.stat().st_size)]
        figures["stream"] = [float(stream.stat().st_size)]
    return figures


def report(f: dict[str, list[float]]) -> None:
    base, base_cpu = median(f["floor s"]), median(f["floor cpu"])
    print(
        f"session/load over ACP ({f['size'][0] / 1e6:.0f} MB log, {f['py updates'][0]:.0f} "
        f"updates, {f['stream'][0] / 1e6:.0f} MB stream); load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"  json.loads of its lines {base * 1000:.0f} ms ({base_cpu * 1000:.0f} ms CPU)")
    labels = {
        "py": "Python SDK client",
        "py secrets": f"  with {len(SECRETS)} secrets",
        "py floor": "  its floor (writer)",
        "node": "TypeScript SDK",
        "node secrets": f"  with {len(SECRETS)} secrets",
        "node floor": "  its floor (writer)",
        "raw": "raw json.loads client",
    }
    for name, label in labels.items():
        if f"{name} s" not in f:
            continue
        ours = median(f[f"{name} s"])
        client, agent = median(f[f"{name} client cpu"]), median(f[f"{name} agent cpu"])
        spread = f"{min(f[f'{name} s']) / base:.1f}-{max(f[f'{name} s']) / base:.1f}x"
        print(
            f"  {label:24s} {ours * 1000:6.0f} ms {ours / base:5.2f}x ({spread}); CPU: "
            f"client {client / base_cpu:.2f}x, agent {agent / base_cpu:.2f}x"
        )
    start = median(f["py start s"])
    print(f"  target <= 3x; before the load, not counted: start-up {start * 1000:.0f} ms")


def main() -> None:
    main_runs_mb(__doc__, run, report)


if __name__ == "__main__":
    main()
