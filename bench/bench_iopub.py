"""IOPub bytes, lag and stalls of a streamed answer, through a real kernel (jupyter_client).

Three models, each seen by two clients:

* models: slow (1,000 bytes at 200 B/s), medium (6 KB at 1.5 KB/s) and fast (20 KB at
  5 KB/s) Markdown answers (paragraphs, lists, code blocks), and one 23 KB line with no
  paragraph break at 3 KB/s;
* clients: ``plain`` (no extension: nbclient, VS Code…; every update resends the open
  display's text) and ``extension`` (a client that opened the status comm saying it renders
  text deltas, as the JupyterLab extension does: updates carry only the new text).

For each it prints the bytes of the turn's text displays (their frames as received, i.e.
as the kernel packed and signed them; the cell's fixed messages aside: status,
execute_input, the status comm's info, the footer), their
excess over 3x the answer per second of streaming, the longest lag (how long a chunk took
from the model to the client: the scripted model writes when it yielded each chunk to a
trace file, on the same clock as the arrivals), the same for the chunks written after
the first second (``after 1 s``: in the first second a slow model's updates are
paced by that second's 6 KB, which the first update and the final's ~640 B share), and the longest
stall (the longest time without a text update while the model writes).

Targets (issue 33): bytes <= 3x the answer + 6 KB a second of streaming; with the
extension lag <= 150 ms; without it no stall over 1 s. ``check`` marks each row.

Run: ``python bench/bench_iopub.py`` (about two minutes; it is not part of ``bench/run.py``).
``--answer slow --client extension --repeat 5`` runs only those rows, five times (the
lags are timings: on a loaded machine, repeat them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from iac_kernel.kernel.render.display import CURSOR, DELTA_MIME
from iac_kernel.kernel.session.status import STATUS_TARGET

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the kernel harness
from kernel_harness import CellResult, KernelHarness, scripted_kernel, wire_bytes

#: (name, answer size in bytes, bytes a second the model writes, one line).
ANSWERS = (
    ("slow", 1_000, 200.0, False),
    ("medium", 6_000, 1_500.0, False),
    ("fast", 20_000, 5_000.0, False),
    ("one line", 23_000, 3_000.0, True),
)
CLIENTS = ("plain", "extension")
LAG_TARGET = 0.15
STALL_TARGET = 1.0
PER_SECOND_TARGET = 6000


def answer(size: int) -> str:
    parts: list[str] = []
    n = 0
    while sum(len(p) + 2 for p in parts) < size:
        n += 1
        if n % 7 == 0:
            parts.append(f'```hcl\nresource "null_resource" "r{n}" {{\n  count = {n}\n}}\n```')
        elif n % 5 == 0:
            parts.append("\n".join(f"- item {n}.{i}: check the plan" for i in range(4)))
        else:
            parts.append(f"Paragraph {n}: " + " ".join(f"word{n}x{i}" for i in range(45)) + ".")
    return "\n\n".join(parts)[:size]


def chunks(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def text_updates(result: CellResult) -> list[tuple[float, dict]]:
    """(arrival, message) of every display message of the turn's text."""
    return [
        (at, m)
        for at, m in zip(result.arrivals, result.messages, strict=True)
        if m["msg_type"] in ("display_data", "update_display_data")
        and str(m["content"].get("transient", {}).get("display_id", "")).startswith("iac-text-")
    ]


def one_line(size: int) -> str:
    return " ".join(f"word{i}" for i in range(size // 4))[:size]


def solid(text: str) -> int:
    """Characters of ``text`` that are not whitespace (displays split the answer at
    whitespace and may drop it, so progress is counted in these)."""
    return len("".join(text.split()))


def shown_after(updates: list[tuple[float, dict]]) -> list[tuple[float, int]]:
    """(arrival, non-blank characters of the answer the client shows) after each message:
    each display's text is rebuilt as a client does (a delta appends at its offset; a
    Markdown update replaces the text, less the streaming cursor)."""
    texts: dict[str, str] = {}
    shown = []
    for at, m in updates:
        display_id = m["content"]["transient"]["display_id"]
        data = m["content"]["data"]
        if DELTA_MIME in data:
            delta = data[DELTA_MIME]
            texts[display_id] = texts.get(display_id, "")[: delta["offset"]] + delta["text"]
        else:
            text = data.get("text/markdown", data.get("text/plain", ""))
            texts[display_id] = text.removesuffix(CURSOR)
        shown.append((at, sum(solid(t) for t in texts.values())))
    return shown


def measure(harness: KernelHarness, prompt: str, text: str, trace: Path) -> dict:
    result = harness.execute(prompt)
    if result.answer().split() != text.split():
        raise SystemExit("the cell's text differs from the answer")
    session = harness.kc.session
    updates = text_updates(result)
    total = sum(wire_bytes(session, m) for _at, m in updates)
    shown = shown_after(updates)
    first = updates[0][0]
    # When the model yielded each chunk (the scripted model's trace, same clock as the
    # arrivals), and the text written by then.
    written = [(float(at), int(n)) for at, n in (line.split() for line in trace.open())]
    lag = late_lag = 0.0
    for at, n in written:
        need = solid(text[:n])
        seen = next((t for t, count in shown if count >= need), shown[-1][0])
        lag = max(lag, seen - at)
        if at - written[0][0] >= 1.0:
            late_lag = max(late_lag, seen - at)
    seconds = updates[-1][0] - first
    times = [at for at, _m in updates]
    stall = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    size = len(text.encode())
    per_second = (total - 3 * size) / max(seconds, 1.0)
    return {
        "bytes": total,
        "ratio": total / size,
        "per_second": per_second,
        "updates": len(updates),
        "seconds": seconds,
        "lag": lag,
        "late_lag": late_lag,
        "stall": stall,
    }


def run(
    names: tuple[str, ...] = tuple(a[0] for a in ANSWERS), clients: tuple[str, ...] = CLIENTS
) -> list[dict]:
    answers = [a for a in ANSWERS if a[0] in names]
    texts = {n: one_line(size) if line else answer(size) for n, size, _r, line in ANSWERS}
    delays = {
        n: len(texts[n].encode()) / rate / len(chunks(texts[n])) for n, _s, rate, _l in ANSWERS
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        traces = {
            (c, n): root / f"{c}-{n.replace(' ', '-')}.trace" for n, *_ in ANSWERS for c in CLIENTS
        }
        exchanges = [
            {
                "match": f"{client} {name}.",
                "turns": [
                    {
                        "text": texts[name],
                        "delay": delays[name],
                        "trace": str(traces[client, name]),
                    }
                ],
            }
            for name, *_ in answers
            for client in clients
        ]
        work = root / "work"
        work.mkdir()
        script = root / "bench.json"
        script.write_text(json.dumps({"name": "bench-iopub", "exchanges": exchanges}))
        for client in clients:
            harness = scripted_kernel(root / client, Path(os.path.realpath(work)), script)
            try:
                deltas = client == "extension"
                if deltas:
                    harness.open_comm(STATUS_TARGET, {"renders": [DELTA_MIME]})
                for name, *_ in answers:
                    trace = traces[client, name]
                    row = measure(harness, f"{client} {name}.", texts[name], trace)
                    latency = row["lag"] <= LAG_TARGET if deltas else row["stall"] <= STALL_TARGET
                    ok = row["per_second"] <= PER_SECOND_TARGET and latency
                    rows.append({"answer": name, "client": client, **row, "ok": ok})
            finally:
                harness.stop()
    return rows


def report(rows: list[dict]) -> None:
    print(
        f"  {'answer':<9} {'client':<9} {'seconds':>7} {'bytes':>7} {'ratio':>5} "
        f"{'B/s over 3x':>11} {'updates':>7} {'lag s':>6} {'after 1 s':>9} {'stall s':>7}  target"
    )
    for r in rows:
        target = "lag <= 0.15 s" if r["client"] == "extension" else "stall <= 1 s"
        print(
            f"  {r['answer']:<9} {r['client']:<9} {r['seconds']:>7.1f} {r['bytes']:>7} "
            f"{r['ratio']:>5.2f} {r['per_second']:>11.0f} {r['updates']:>7} {r['lag']:>6.2f} "
            f"{r['late_lag']:>9.2f} "
            f"{r['stall']:>7.2f}  {target}, <= 6000 B/s: {'ok' if r['ok'] else 'MISSED'}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [a[0] for a in ANSWERS]
    parser.add_argument("--answer", action="append", choices=names, help="only these answers")
    parser.add_argument("--client", action="append", choices=CLIENTS, help="only these clients")
    parser.add_argument("--repeat", type=int, default=1, help="run it N times (noisy machines)")
    args = parser.parse_args()
    rows = []
    for _ in range(args.repeat):
        rows += run(tuple(args.answer or names), tuple(args.client or CLIENTS))
    print("IOPub of a streamed answer (text displays; chunk lag and stalls as received)")
    report(rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
