"""``session/load`` of a 50 MB session with varied text, timed from real ACP clients
(the official Python and TypeScript SDKs' client sides, and a raw one, over stdio, the
agent in its own process) until the load's answer arrived and every replayed update was
read, against the floor of ``json.loads`` of each of the log's lines in this process.

Each client loads (every load is a whole replay): with no secret in the agent's
environment, with the three secrets every result was masked with, with one more learned
since they were written (each result masked again with that value only), and a log of
the same text written before results were marked (each masked again in full). The
agent's start-up (the SDK import that follows its early ``initialize`` answer) is timed
apart, before the load.

Run: ``python bench/acp_load.py [--mb 50] [--runs 3]``. Not a test. Targets: <= 6x
``json.loads`` from the raw client, <= 2x its own floor from each SDK client.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from acp import spawn_agent_process
from acp.transports import default_environment
from acp_stream import node_load, raw_load, writer_command
from bench_acp import Counter
from common import acp_command, main_runs_mb, median

from iac_kernel.masking import marks
from iac_kernel.sessions.store import SessionStore, install_key, now_iso

NODE_SCRIPT = Path(__file__).with_name("acp_load_node.mjs")
NODE_SDK = Path(__file__).parent.parent / "tests/node/node_modules/@agentclientprotocol/sdk"

TOOLS = ("read_file", "bash", "grep", "list_files", "terraform_plan", "write_file")
#: What an editor that passes its own environment may give the agent: secret-named
#: variables, whose values every replayed result is searched for (made-up values). Not
#: ``ANTHROPIC_API_KEY``: with it the agent imports and builds the model's client in the
#: background once its SDK is in, which overlapped the load and was counted in it.
SECRETS = {
    "DEPLOY_API_KEY": "sk-ant-api03-" + "Xq7" * 30,
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYBENCHKEY01",
    "GITHUB_TOKEN": "ghp_" + "b3nch" * 7 + "x",
}
#: A secret the log's marks do not cover (learned since it was written): every stored
#: result is masked again with it.
LATER = {"LATER_API_TOKEN": "later-" + "Zq9" * 10}


def agent_env(root: Path) -> dict[str, str]:
    """What the agent gets beyond the SDK's trimmed environment: the store, and this
    process's ``PYTHONPATH`` (the code under test, when run from a worktree)."""
    env = {"IAC_KERNEL_SESSIONS_DIR": str(root / "sessions")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choices(vocabulary, k=n))


def vocabulary_of(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(5000)]


def exchange(rng: random.Random, vocabulary: list[str], key: bytes | None, i: int) -> list[dict]:
    """One exchange's records: a prompt, an answer with a tool call (varied tools and
    inputs) and its output (varied text of varied length), marked as masked with
    :data:`SECRETS` (an editor that always passes them; see
    ``iac_kernel/masking/marks.py``; the first exchange's records start with the set),
    or not marked (``key`` ``None``: a log from before marks)."""
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
    ]
    records = [{"type": "message", "ts": now_iso(), "message": m} for m in messages]
    block = {"type": "tool_result", "tool_use_id": call, "content": output}
    records.append({"type": "tool_result", "ts": now_iso(), "name": tool, "block": block})
    if key is not None:
        records[-1]["mask"], known = marks.mark(key, SECRETS.values(), output)
        if i == 0:
            records.insert(0, {"type": "mask_set", "id": records[-1]["mask"]["set"],
                               "known": known})  # fmt: skip
    return records


def build(store: SessionStore, cwd: str, megabytes: int, marked: bool = True) -> tuple[str, Path]:
    """A session of about ``megabytes`` of :func:`exchange`s, as the agent writes them
    (``marked=False``: as it wrote them before results were marked)."""
    key = install_key(store.root) if marked else None
    rng = random.Random(7)
    vocabulary = vocabulary_of(rng)
    meta = store.create(cwd, title="bench acp load")
    path = store.root / f"{meta.session_id}.jsonl"
    size, i = 0, 0
    with path.open("w") as out:
        while size < megabytes * 1024 * 1024:
            for record in exchange(rng, vocabulary, key, i):
                line = json.dumps(record) + "\n"
                out.write(line)
                size += len(line)
            i += 1
    meta.message_count = 3 * i
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
    root: Path, sid: str, cwd: str, cmd: list[str], extra: dict[str, str] | None = None
) -> dict[str, float]:
    """The load's time from the client's side once the agent has started (the SDK import
    that follows an early ``initialize`` answer is timed apart: ``start s``), the CPU
    seconds the client and the agent spent on it (what a busy machine does not inflate
    as much) and the number of updates."""
    client = Counter()
    env = {**agent_env(root), **(extra or {})}
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


#: Each client's loads: no secret known, the three every result was masked with, one
#: more learned since (each result masked again with it), and the unmarked log (each
#: result masked again in full).
ROWS = ("whole", "secrets", "later", "unmarked")


def run(runs: int, megabytes: int = 50) -> dict[str, list[float]]:
    """Client-side load figures and floors (seconds), interleaved; the size and updates.

    Clients: the Python SDK's (``py``), the TypeScript SDK's (``node``, when node and
    ``tests/node/node_modules`` are there) and a raw one that only ``json.loads`` each
    line (``raw``), each through :data:`ROWS`; ``... floor`` rows are the SDK clients
    reading the same stream from a process that only writes it (:mod:`acp_stream`)."""
    figures: dict[str, list[float]] = defaultdict(list)
    node = NODE_SCRIPT if shutil.which("node") and NODE_SDK.is_dir() else None
    with tempfile.TemporaryDirectory(prefix="bench-acp-load-") as tmp:
        root = Path(tmp)
        cwd = root.resolve() / "workspace"
        cwd.mkdir()
        store = SessionStore(root / "sessions")
        sid, path = build(store, str(cwd), megabytes)
        old, _ = build(store, str(cwd), megabytes, marked=False)
        env = {**default_environment(), **agent_env(root)}
        stream = root / "stream.jsonl"
        raw_load(acp_command(), env, str(cwd), sid, save=stream)
        writer = writer_command(stream)
        for _ in range(runs):  # interleaved: all see the same machine load
            wall, cpu = floor(path)
            figures["floor s"].append(wall)
            figures["floor cpu"].append(cpu)
            clients = {
                "py": lambda extra, sid: _py(root, sid, cwd, acp_command(), extra),
                "raw": lambda extra, sid: raw_load(acp_command(), {**env, **extra}, str(cwd), sid),
            }
            if node is not None:
                clients["node"] = lambda extra, sid: node_load(
                    node, acp_command(), {**env, **extra}, str(cwd), sid
                )
            for client, load in clients.items():
                for row in ROWS:
                    extra = {"whole": {}, "later": {**SECRETS, **LATER}}.get(row, SECRETS)
                    loaded = load(extra, old if row == "unmarked" else sid)
                    for key, value in loaded.items():
                        figures[f"{client} {row}".strip() + f" {key}"].append(value)
            figures_floor = {"py floor": functools.partial(_py, root, sid, cwd, writer, {})}
            if node is not None:
                figures_floor["node floor"] = functools.partial(
                    node_load, node, writer, env, str(cwd), sid
                )
            for name, once in figures_floor.items():
                for key, value in once().items():
                    figures[f"{name} {key}"].append(value)
        figures["size"] = [float(path.stat().st_size)]
        figures["stream"] = [float(stream.stat().st_size)]
    return figures


def _py(root: Path, sid: str, cwd: Path, cmd: list[str], extra: dict[str, str]) -> dict:
    return asyncio.run(load_once(root, sid, str(cwd), cmd, extra))


def report(f: dict[str, list[float]]) -> None:
    base, base_cpu = median(f["floor s"]), median(f["floor cpu"])
    print(
        f"session/load over ACP ({f['size'][0] / 1e6:.0f} MB log, {f['py whole updates'][0]:.0f} "
        f"updates, {f['stream'][0] / 1e6:.0f} MB stream); load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"  json.loads of its lines {base * 1000:.0f} ms ({base_cpu * 1000:.0f} ms CPU)")
    labels = {}
    for client, label in (
        ("py", "Python SDK client"),
        ("node", "TypeScript SDK client"),
        ("raw", "raw json.loads client"),
    ):
        labels[f"{client} whole"] = f"{label}: no secret known"
        labels[f"{client} secrets"] = f"  {len(SECRETS)} secrets, all masked with"
        labels[f"{client} later"] = "  + 1 learned later"
        labels[f"{client} unmarked"] = "  unmarked log (all again)"
        labels[f"{client} floor"] = "  its floor (writer)"
    for name, label in labels.items():
        if f"{name} s" not in f:
            continue
        ours = median(f[f"{name} s"])
        client, agent = median(f[f"{name} client cpu"]), median(f[f"{name} agent cpu"])
        spread = f"{min(f[f'{name} s']) / base:.1f}-{max(f[f'{name} s']) / base:.1f}x"
        floor_s = f.get(f"{name.split()[0]} floor s")
        own = (
            f", {ours / median(floor_s):.2f}x its floor" if floor_s and "floor" not in name else ""
        )
        print(
            f"  {label:36s} {ours * 1000:6.0f} ms {ours / base:5.2f}x ({spread}{own}); CPU: "
            f"client {client / base_cpu:.2f}x, agent {agent / base_cpu:.2f}x"
        )
    start = median(f["py whole start s"])
    print(
        "  targets: <= 6x json.loads (raw client), <= 2x its floor (SDK clients); before "
        f"the load, not counted: start-up {start * 1000:.0f} ms"
    )


def main() -> None:
    main_runs_mb(__doc__, run, report)


if __name__ == "__main__":
    main()
