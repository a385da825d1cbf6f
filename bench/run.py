"""Every speed figure of issue 16, each beside its floor or peer measured in the same run.

Run: ``python bench/run.py [--runs N] [--only startup,streaming,search,clients,plan,load,acpload]``
(a few minutes; the 100,000-file tree is built once and cached in the temp dir).
Figures are medians of N interleaved runs; ratios compare medians. This is a benchmark,
not a test: nothing is asserted, the targets are printed beside the ratios.

* start-up: spawn -> ``initialize`` / ``session/new`` answered by ``iac-kernel acp``
  against a floor process (python importing pydantic, answering one JSON line);
* kernel: spawn -> ``kernel_info_reply`` against ipykernel's python3 kernel;
* streaming: µs per text delta above the bare Anthropic SDK reading the same stream;
* search: the grep and glob tools against plain ``rg`` on a 100,000-file tree;
* clients: a session's Anthropic client (shared) against building one;
* plan: ``terraform_plan`` on 10,000 ``terraform_data`` against terraform's own
  ``plan -out`` + ``show -json``, with the call's ACP bytes and its plan card's bytes
  (``bench/plan_scale.py``; one run per five of ``--runs``);
* load: ``SessionStore.read`` of a 50 MB session against ``json.loads`` of its lines,
  and its peak memory against the file's size (``bench/session_load.py``);
* acpload: ``session/load`` of a 50 MB session of varied text timed from ACP clients
  over stdio (the Python and TypeScript SDKs', a raw one; each SDK's floor), from kept
  replay lines and as whole replays, against ``json.loads`` of its lines
  (``bench/acp_load.py``).
* egress: added latency per request and per MB through a sandbox's egress proxy against
  a direct connection, and the operation gate's added latency per request carrying a
  brokered credential against the same relay without one (``bench/egress.py``).
* team: issue 43's change control on SQLite and PostgreSQL: an apply under a matched,
  approved rule against the same apply without rules; audit records per second with 20
  writers, checked; a pending record to its row in the approvals panel's API
  (``bench/team.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median


def line(name: str, value: str, peer: str, ratio: str, target: str) -> None:
    print(f"  {name:<34} {value:>11}  {peer:<34} {ratio:>8}  {target}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def startup(runs: int) -> None:
    import startup as bench

    f = bench.run(runs)
    floor, py3 = median(f["floor"]), median(f["python3 kernel"])
    print("start-up")
    line(
        "spawn -> initialize answered",
        ms(median(f["initialize"])),
        f"floor process {ms(floor)}",
        f"{median(f['initialize']) / floor:.2f}x",
        "target <= 4x",
    )
    line(
        "spawn -> session/new answered",
        ms(median(f["session/new"])),
        f"floor process {ms(floor)}",
        f"{median(f['session/new']) / floor:.2f}x",
        "target <= 6x",
    )
    line("kernel start -> kernel_info", ms(median(f["iac-kernel"])),
         f"ipykernel python3 {ms(py3)}", f"{median(f['iac-kernel']) / py3:.2f}x",
         "target <= 1.2x")  # fmt: skip


def streaming(runs: int) -> None:
    import streaming as bench

    f = bench.run(runs)
    bare, ours = median(f["bare SDK"]), median(f["iac-kernel acp"])
    # Runs alternate: the median of each pair's difference is steadier than the
    # difference of the medians when the machine's load moves.
    pairs = zip(f["iac-kernel acp"], f["bare SDK"], strict=True)
    per_delta = median([a - b for a, b in pairs]) / bench.DELTAS * 1e6
    print(f"streaming ({bench.DELTAS} text deltas through the fake Messages API)")
    line("iac-kernel acp prompt", ms(ours), f"bare Anthropic SDK {ms(bare)}", f"{ours / bare:.2f}x",
         "")  # fmt: skip
    line("per delta above the bare SDK", f"{per_delta:.1f} µs", "", "", "target <= 30 µs")
    relay = bench.relay_costs()
    line("ACP relay alone, CPU per delta", f"{relay['dict payload'] * 1e6:.1f} µs",
         f"via SDK models {relay['SDK models'] * 1e6:.1f} µs",
         f"{relay['dict payload'] / relay['SDK models']:.2f}x", "in process, no I/O")  # fmt: skip


def search(runs: int) -> None:
    import search as bench

    f = bench.run(runs)
    print("search (100,000-file tree)")
    for name, *_ in bench.CASES:
        tool, rg = median(f[f"tool {name}"]), median(f[f"rg {name}"])
        line(name, ms(tool), f"plain rg {ms(rg)}", f"{tool / rg:.2f}x", "target <= 1.3x")


def clients(runs: int) -> None:
    import asyncio
    import time

    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
    import anthropic

    from iac_kernel.models.anthropic import build_client, shared_client
    from iac_kernel.models.registry import create_model

    kwargs = {"max_retries": 0}
    build, shared = [], []

    async def measure() -> None:
        create_model("claude-sonnet-4-6")  # the first session builds the shared client
        for _ in range(runs * 5):
            t = time.perf_counter()
            build_client("anthropic", anthropic.AsyncAnthropic, dict(kwargs))
            build.append(time.perf_counter() - t)
            t = time.perf_counter()
            shared_client("anthropic", anthropic.AsyncAnthropic, dict(kwargs))
            shared.append(time.perf_counter() - t)

    asyncio.run(measure())
    print("model clients")
    line("client of a further session", f"{median(shared) * 1e6:.0f} µs",
         f"building one {ms(median(build))}", f"{median(shared) / median(build):.3f}x",
         "one client per configuration")  # fmt: skip


def plan(runs: int) -> None:
    import plan_scale as bench

    bench.report(bench.run(max(1, runs // 5)))  # about a minute a run


def load(runs: int) -> None:
    import session_load as bench

    bench.report(bench.run(runs))


def acpload(runs: int) -> None:
    import acp_load as bench

    bench.report(bench.run(max(1, runs // 2)))


def team(runs: int) -> None:
    import team as bench

    bench.report(bench.run(runs))


def egress(runs: int) -> None:
    import egress as bench

    bench.report(bench.run(runs))
    bench.report_scrub(bench.scrub(runs))
    bench.report_gate(bench.gate(runs))


PARTS = {
    "startup": startup,
    "streaming": streaming,
    "search": search,
    "clients": clients,
    "plan": plan,
    "load": load,
    "acpload": acpload,
    "egress": egress,
    "team": team,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=",".join(PARTS))
    args = parser.parse_args()
    print(f"iac-kernel speed, medians of {args.runs} runs (ratios: ours / floor or peer)")
    for name in args.only.split(","):
        PARTS[name.strip()](args.runs)


if __name__ == "__main__":
    main()
