"""A 50 MB session: how long ``SessionStore.read`` takes and how much memory it peaks at,
against the floor of ``json.loads`` of each of its lines, each in a fresh process.

Run: ``python bench/session_load.py [--mb 50] [--runs 3]``. Not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import main_runs_mb, median

#: Runs in a child process: prints seconds and the peak RSS growth (bytes) of the load.
CHILD = """
import json, sys, time
from pathlib import Path
root, sid, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
from iac_kernel.sessions.store import SessionStore
store = SessionStore(root)
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak (VmHWM) starts again from here
base = status("VmRSS")
t = time.perf_counter()
if mode == "floor":
    with open(root / f"{sid}.jsonl", "rb") as fh:
        records = [json.loads(line) for line in fh]
else:
    session = store.read(sid)
took = time.perf_counter() - t
peak = status("VmHWM") - base
print(json.dumps({"seconds": took, "peak": peak}))
"""


def build(root: Path, megabytes: int) -> tuple[str, int]:
    """A session of prompts, answers and tool results (a plan, file reads) of ~``mb``."""
    from iac_kernel.sessions.store import SessionStore

    store = SessionStore(root)
    meta = store.create(str(root), title="bench 50 MB")
    log = root / f"{meta.session_id}.jsonl"
    lines = []
    size, i = 0, 0
    body = 'resource "terraform_data" "r" { input = 1 }\n' * 200
    while size < megabytes * 1024 * 1024:
        call = f"toolu_{i}"
        for record in (
            {"type": "message", "ts": "t", "message": {"role": "user", "content": f"q {i}"}},
            {
                "type": "message",
                "ts": "t",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"Reading ({i})."},
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": "read_file",
                            "input": {"path": f"m{i}.tf"},
                        },
                    ],
                },
            },
            {
                "type": "tool_result",
                "ts": "t",
                "name": "read_file",
                "block": {"type": "tool_result", "tool_use_id": call, "content": body},
                "raw_output": {"lines": 200, "path": f"m{i}.tf"},
            },
        ):
            line = json.dumps(record) + "\n"
            lines.append(line)
            size += len(line)
        i += 1
    log.write_text("".join(lines))
    return meta.session_id, log.stat().st_size


def child(root: Path, sid: str, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), sid, mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def run(runs: int, megabytes: int = 50) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"floor s": [], "read s": [], "read peak": []}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        root = Path(tmp)
        sid, size = build(root, megabytes)
        figures["size"] = [float(size)]
        for _ in range(runs):  # interleaved: both see the same load
            floor = child(root, sid, "floor")
            ours = child(root, sid, "read")
            figures["floor s"].append(floor["seconds"])
            figures["read s"].append(ours["seconds"])
            figures["read peak"].append(ours["peak"])
    return figures


def report(f: dict[str, list[float]]) -> None:
    size = f["size"][0]
    floor, ours, peak = median(f["floor s"]), median(f["read s"]), median(f["read peak"])
    print(f"session load ({size / 1e6:.0f} MB log)")
    print(f"  store.read                  {ours * 1000:8.0f} ms  json.loads of its lines "
          f"{floor * 1000:.0f} ms  {ours / floor:.2f}x  target <= 3x")  # fmt: skip
    print(f"  peak memory of the load     {peak / 1e6:8.0f} MB  file {size / 1e6:.0f} MB  "
          f"{peak / size:.2f}x  target < 3x")  # fmt: skip


def main() -> None:
    main_runs_mb(__doc__, run, report)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
