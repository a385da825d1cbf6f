"""``terraform_plan`` on 10,000 ``terraform_data`` resources, through ``iac-kernel acp``,
against terraform's own ``plan -out`` + ``show -json`` measured in the same run; the
bytes of that call's ACP messages; the bytes of its notebook plan card; the plan card an
apply's question shows (every row in compact form: ``summary.card_rows``), its bytes and the
time to build it against the time to parse the plan.

The browser side of that card (rendered within 1 s, no main-thread task over 100 ms)
is tests/test_browser_big_plan.py, on a synthetic plan of the same size.

Run: ``python bench/plan_scale.py [--resources 10000] [--runs 1] [--calls-only]`` (about a
minute a run at 10,000; ``--calls-only``: the timings alone). Each run measures both
sides back to back (which one first alternates), so each ratio is of one load; the
report gives the median of the runs' ratios and the load average around them. Targets
(issue 42): the first call within 1.0x at 2,000 resources, 1.3x at 10,000. Checkov is
off (``IAC_KERNEL_CHECKOV=off``): the policy check is its own cost, not the plan's. Not
a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import acp_command, clean_env, median

CONFIG = """
resource "terraform_data" "r" {
  count = %d
  input = { name = "r-${count.index}", size = count.index }
}
"""


def tf_env() -> dict[str, str]:
    return {**os.environ, "TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1"}  # fmt: skip


def workspace(resources: int) -> Path:
    """An initialised root module with ``resources`` terraform_data (cached in TMPDIR)."""
    root = Path(tempfile.gettempdir()) / f"bench-plan-{resources}"
    if not (root / ".terraform").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        (root / "main.tf").write_text(CONFIG % resources)
        subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=root,
                       env=tf_env(), check=True, capture_output=True)  # fmt: skip
    return root


def floor(root: Path, tmp: Path) -> float:
    """terraform plan -out + show -json, as the tool needs them (the plan file is written
    outside the workspace: it is not the agent's to scan)."""
    out = str(tmp / "floor.tfplan")
    started = time.perf_counter()
    subprocess.run(["terraform", "plan", "-input=false", "-no-color", f"-out={out}"],
                   cwd=root, env=tf_env(), check=True, capture_output=True)  # fmt: skip
    subprocess.run(["terraform", "show", "-json", out], cwd=root, env=tf_env(),
                   check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - started


def question_card(root: Path, tmp: Path) -> dict[str, float]:
    """The apply question's plan card of the floor's plan file: seconds to parse the
    ``show -json`` document, seconds to build the card from it, and its bytes."""
    from iac_kernel.kernel.render.plan_card import bundle
    from iac_kernel.terraform.plan import parse_plan
    from iac_kernel.terraform.summary import card_rows

    shown = subprocess.run(["terraform", "show", "-json", str(tmp / "floor.tfplan")],
                           cwd=root, env=tf_env(), check=True, capture_output=True)  # fmt: skip
    doc = json.loads(shown.stdout)
    started = time.perf_counter()
    plan = parse_plan(doc)
    parsed = time.perf_counter()
    card = bundle(plan.to_dict(), "c1", rows=card_rows(plan))
    built = time.perf_counter()
    size = len(json.dumps(card, ensure_ascii=False).encode())
    return {"parse": parsed - started, "card": built - parsed, "bytes": size}


def script(path: Path) -> Path:
    call = {"name": "terraform_plan", "input": {"out": "ours.tfplan"}}
    turns = [{"tool_use": [call]}, {"text": "Planned."}]
    path.write_text(json.dumps({"name": "plan", "exchanges": [{"match": "plan", "turns": turns}]}))
    return path


def ours(root: Path, tmp: Path) -> dict[str, float]:
    """Seconds from the call's start to its result (the first call of a new agent process,
    which starts the egress proxy, and a further call of the same session), and the bytes
    of its ACP messages."""
    env = clean_env(
        IAC_KERNEL_SCRIPT=str(script(tmp / "plan.json")),
        IAC_KERNEL_SESSIONS_DIR=str(tmp / "sessions"),
        IAC_KERNEL_CHECKOV="off",
        TF_CLI_CONFIG_FILE="/dev/null",
    )
    proc = subprocess.Popen(acp_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=root)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def until(request_id: int) -> dict:
        while True:
            line = proc.stdout.readline()
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    until(1)
    send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
          "params": {"cwd": str(root), "mcpServers": []}})  # fmt: skip
    sid = until(2)["result"]["sessionId"]
    prompt = [{"type": "text", "text": "plan it"}]
    took: list[float] = []
    call_bytes, plan = 0, None
    for request_id in (3, 4):  # the first call of the process, then a further one
        send({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
              "params": {"sessionId": sid, "prompt": prompt}})  # fmt: skip
        call_bytes, started = 0, 0.0
        while True:
            line = proc.stdout.readline()
            message = json.loads(line)
            if message.get("method") == "session/request_permission":
                call_bytes += len(line)
                allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                send({"jsonrpc": "2.0", "id": message["id"], "result": allow})
                continue
            update = (message.get("params") or {}).get("update") or {}
            if update.get("toolCallId"):
                call_bytes += len(line)
                if update.get("sessionUpdate") == "tool_call":
                    started = time.perf_counter()
                if update.get("status") in ("completed", "failed"):
                    took.append(time.perf_counter() - started)
                    plan = ((update.get("_meta") or {}).get("iac_kernel") or {}).get("plan")
            if message.get("id") == request_id:
                break
    proc.stdin.close()
    proc.wait(30)
    from iac_kernel.kernel.render.plan_card import bundle

    card = len(json.dumps(bundle(plan or {}), ensure_ascii=False).encode())
    return {"seconds": took[0], "further": took[1], "acp bytes": call_bytes, "card bytes": card,
            "rows": (plan or {}).get("rows_total", 0)}  # fmt: skip


def iopub(root: Path, tmp: Path) -> int:
    """Bytes of every IOPub message of a notebook cell whose turn runs terraform_plan."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the kernel harness
    from kernel_harness import scripted_kernel

    env = {"IAC_KERNEL_HEADLESS_POLICY": "allow", "IAC_KERNEL_CHECKOV": "off",
           "TF_CLI_CONFIG_FILE": "/dev/null"}  # fmt: skip
    kernel = scripted_kernel(tmp, root, script(tmp / "plan.json"), env)
    try:
        cell = kernel.execute("plan it", timeout=1800)
    finally:
        kernel.stop()
    return sum(len(json.dumps(m["content"], ensure_ascii=False).encode()) for m in cell.messages)


def run(runs: int, resources: int = 10_000, calls_only: bool = False) -> dict[str, list[float]]:
    root = workspace(resources)
    figures: dict[str, list[float]] = {key: [] for key in ("floor", "ours", "further", "acp")}
    figures.update(card=[], parse=[], question=[], question_bytes=[], load=[os.getloadavg()[0]])
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        for n in range(runs):  # interleaved, the order alternating: both see the same load
            result = ours(root, Path(tmp)) if n % 2 else None
            figures["floor"].append(floor(root, Path(tmp)))
            result = result or ours(root, Path(tmp))
            figures["ours"].append(result["seconds"])
            figures["further"].append(result["further"])
            figures["acp"].append(result["acp bytes"])
            figures["card"].append(result["card bytes"])
            assert result["rows"] == resources, result
            if calls_only:
                continue
            question = question_card(root, Path(tmp))
            figures["parse"].append(question["parse"])
            figures["question"].append(question["card"])
            figures["question_bytes"].append(question["bytes"])
        figures["load"].append(os.getloadavg()[0])
        if not calls_only:
            figures["iopub"] = [float(iopub(root, Path(tmp)))]
    return figures


def report(f: dict[str, list[float]], resources: int = 10_000) -> None:
    floor_s = median(f["floor"])
    target = 1.0 if resources <= 2_000 else 1.3
    print(f"terraform_plan at scale ({resources} terraform_data resources, {len(f['floor'])} "
          f"runs, load average {f['load'][0]:.1f} before, {f['load'][-1]:.1f} after)")  # fmt: skip
    for key, label in (("ours", "first call of an agent "), ("further", "a further call       ")):
        ratios = [ours / floor for ours, floor in zip(f[key], f["floor"], strict=True)]
        print(f"  terraform_plan, {label}{median(f[key]):7.1f} s   plan -out + show -json "
              f"{floor_s:.1f} s   {median(ratios):.2f}x (runs: "
              f"{', '.join(f'{r:.2f}' for r in ratios)})"
              + (f"  target <= {target}x" if key == "ours" else ""))  # fmt: skip
    print(f"  ACP bytes of the call         {median(f['acp']) / 1024:7.0f} KB  "
          "target < 256 KB")  # fmt: skip
    print(f"  notebook plan card bundle     {median(f['card']) / 1024:7.0f} KB")
    if not f["parse"]:
        return
    print(f"  IOPub bytes of the plan cell  {median(f['iopub']) / 1024:7.0f} KB  "
          "target < 1 MB")  # fmt: skip
    parse_s, question_s = median(f["parse"]), median(f["question"])
    print(f"  apply question's plan card    {median(f['question_bytes']) / 1024:7.0f} KB  "
          f"built in {question_s:.2f} s, {question_s / parse_s:.2f}x parsing the plan "
          "(every row; target <= 2x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--resources", type=int, default=10_000)
    parser.add_argument("--calls-only", action="store_true", help="the timings alone")
    args = parser.parse_args()
    report(run(args.runs, args.resources, args.calls_only), args.resources)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
