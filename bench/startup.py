"""Start-up figures: ``iac-kernel acp`` against a floor process, the kernel against
ipykernel's python3 kernel. Each is timed from spawn to the answer the client waits for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import FLOOR_SCRIPT, acp_command, clean_env, jsonl

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def _read_answer(proc: subprocess.Popen, request_id: int) -> None:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the process closed stdout")
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            if "error" in message:
                raise RuntimeError(message["error"])
            return


def floor_once() -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None
    proc.stdin.write(jsonl(INITIALIZE))
    proc.stdin.flush()
    _read_answer(proc, 1)
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait()
    return elapsed


def acp_once(sessions_dir: str) -> tuple[float, float]:
    """Spawn -> initialize answered, spawn -> session/new answered (sent on the answer)."""
    env = clean_env(IAC_KERNEL_SESSIONS_DIR=sessions_dir)
    start = time.perf_counter()
    proc = subprocess.Popen(acp_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(jsonl(INITIALIZE))
    proc.stdin.flush()
    _read_answer(proc, 1)
    initialized = time.perf_counter() - start
    new = {"jsonrpc": "2.0", "id": 2, "method": "session/new",
           "params": {"cwd": sessions_dir, "mcpServers": []}}  # fmt: skip
    proc.stdin.write(jsonl(new))
    proc.stdin.flush()
    _read_answer(proc, 2)
    created = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(30)
    return initialized, created


def kernel_once(argv: list[str]) -> float:
    """Spawn a kernel on a fresh connection file -> its kernel_info_reply."""
    from jupyter_client import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    folder = Path(tempfile.mkdtemp(prefix="iac-bench-kernel-"))
    conn_file, _ = write_connection_file(str(folder / "kernel.json"))
    command = [a.replace("{connection_file}", conn_file) for a in argv]
    client = BlockingKernelClient(connection_file=conn_file)
    client.load_connection_file()
    client.start_channels()
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=clean_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=folder)  # fmt: skip
    try:
        msg_id = client.kernel_info()
        while True:
            reply = client.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        return time.perf_counter() - start
    finally:
        client.stop_channels()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kernel_argvs() -> tuple[list[str], list[str]]:
    """ipykernel's python3 kernel and iac-kernel, as their kernelspecs launch them."""
    from iac_kernel.kernel.app import kernel_spec

    python3 = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    return python3, list(kernel_spec(sys.executable)["argv"])


def run(runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"floor": [], "initialize": [], "session/new": [],
                                       "python3 kernel": [], "iac-kernel": []}  # fmt: skip
    python3, iac = kernel_argvs()
    with tempfile.TemporaryDirectory() as sessions:
        for _ in range(runs):  # interleaved, so load changes hit both sides alike
            figures["floor"].append(floor_once())
            init, new = acp_once(sessions)
            figures["initialize"].append(init)
            figures["session/new"].append(new)
            figures["python3 kernel"].append(kernel_once(python3))
            figures["iac-kernel"].append(kernel_once(iac))
    return figures


if __name__ == "__main__":
    import argparse

    from run import startup

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    startup(parser.parse_args().runs)
