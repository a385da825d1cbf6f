"""A load's replay stream without an SDK: a raw client that records it, and a trivial
agent that only writes it back (the floor of a client reading that stream).

:func:`raw_load` speaks JSON-RPC over the agent's stdio by hand (``json.loads`` of each
line, nothing else) and saves the ``session/update`` lines of the load. :data:`WRITER`
is a process that answers every request at once and, for ``session/load``, first writes
those lines as they were recorded: an SDK client timed against it costs what reading
the stream costs that client, the agent's work left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: The trivial agent: ``python -c WRITER STREAM_FILE``.
WRITER = r"""
import json, sys
stream = open(sys.argv[1], "rb").read()
answers = {"initialize": {"protocolVersion": 1, "agentCapabilities": {}},
           "session/list": {"sessions": []}}
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = json.loads(line)
    if "id" not in request:
        continue
    if request.get("method") == "session/load":
        out.write(stream)
    answer = {"jsonrpc": "2.0", "id": request["id"],
              "result": answers.get(request.get("method"), {})}
    out.write(json.dumps(answer).encode() + b"\n")
    out.flush()
"""


def writer_command(stream: Path) -> list[str]:
    return [sys.executable, "-c", WRITER, str(stream)]


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raw_load(
    cmd: list[str], env: dict[str, str], cwd: str, sid: str, save: Path | None = None
) -> dict[str, float]:
    """The load timed from a client that only reads and ``json.loads`` the lines (the
    update lines saved to ``save``): the same figures as the SDK clients give. ``env``
    is the agent's whole environment."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(rid: int, method: str, params: dict) -> list[bytes]:
        request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        proc.stdin.write(json.dumps(request).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        seen = []
        for line in proc.stdout:  # type: ignore[union-attr]
            message = json.loads(line)
            if message.get("id") == rid and "method" not in message:
                return seen
            if message.get("method") == "session/update":
                seen.append(line)
        raise RuntimeError(f"the agent stopped before answering {method}")

    try:
        ask(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        t = time.perf_counter()
        ask(2, "session/list", {"cwd": cwd})
        started = time.perf_counter() - t
        agent, cpu, t = _cpu(proc.pid), time.process_time(), time.perf_counter()
        lines = ask(3, "session/load", {"cwd": cwd, "sessionId": sid, "mcpServers": []})
        took = time.perf_counter() - t
        cpu, agent = time.process_time() - cpu, _cpu(proc.pid) - agent
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    if save is not None:
        save.write_bytes(b"".join(lines))
    return {"s": took, "start s": started, "client cpu": cpu, "agent cpu": agent,
            "updates": len(lines), "stream MB": sum(map(len, lines)) / 1e6}  # fmt: skip


def node_load(script: Path, cmd: list[str], env: dict[str, str], cwd: str, sid: str) -> dict:
    """The figures of ``acp_load_node.mjs`` (the TypeScript SDK's client)."""
    config = {"command": cmd, "env": env, "cwd": cwd, "sessionId": sid}
    done = subprocess.run(
        ["node", str(script), json.dumps(config)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
