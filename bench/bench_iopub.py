"""IOPub bytes of a long streamed answer, through a real kernel (jupyter_client).

A 20 KB Markdown answer (paragraphs, lists, code blocks) is streamed by the scripted model
at several paces, from "all at once" to a slow model. For each pace it prints the IOPub
bytes of the cell (every message with the cell's parent, as signed and sent: status,
execute_input, displays) divided by the answer's size, the floor (the answer sent once as
Markdown and once as plain text: 2.0×, plus the fixed messages of a cell), the number of
streaming updates and the mean seconds between them (how live the text looks).

Run: ``python bench/bench_iopub.py [--size BYTES]``. Not a test (the unit and kernel tests
assert the ≤ 3× bound).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from iac_kernel.kernel.testing import scripted_kernel, wire_bytes

#: Seconds between two chunks (words) of the answer.
PACES = (0.0, 0.0005, 0.002, 0.006)


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
    return "\n\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000)
    args = parser.parse_args()
    text = answer(args.size)
    size = len(text.encode())
    chunks = len(re.findall(r"\S+\s*|\s+", text))
    exchanges = [
        {"match": f"pace number {i}.", "turns": [{"text": text, "delay": pace}]}
        for i, pace in enumerate(PACES)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        script = root / "bench.json"
        script.write_text(json.dumps({"name": "bench-iopub", "exchanges": exchanges}))
        harness = scripted_kernel(root, Path(os.path.realpath(work)), script)
        try:
            print(f"answer: {size:,} bytes, {chunks:,} chunks")
            print(
                f"{'pace s/chunk':>12} {'seconds':>8} {'bytes':>9} {'ratio':>6} {'floor':>6} "
                f"{'updates':>8} {'s/update':>9}"
            )
            for i, pace in enumerate(PACES):
                started = time.monotonic()
                result = harness.execute(f"pace number {i}.")
                seconds = time.monotonic() - started
                if result.answer() != text:
                    print("the cell's text differs from the answer", file=sys.stderr)
                    return 1
                session = harness.kc.session
                messages = result.messages + result.statuses
                total = sum(wire_bytes(session, m) for m in messages)
                fixed = sum(
                    wire_bytes(session, m)
                    for m in messages
                    if m["msg_type"] in ("status", "execute_input")
                )
                streaming = [
                    m
                    for m in result.of_type("display_data", "update_display_data")
                    if set(m["content"]["data"]) == {"text/markdown"}
                ]
                between = seconds / max(len(streaming), 1)
                print(
                    f"{pace:>12} {seconds:>8.1f} {total:>9,} {total / size:>6.2f} "
                    f"{(2 * size + fixed) / size:>6.2f} {len(streaming):>8} {between:>9.2f}"
                )
        finally:
            harness.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
