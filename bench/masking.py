"""Masking cost on adversarial output: each credential-shape rule's trigger repeated, at
50 KB and 400 KB. Linear rules take about 8x longer on 8x the text; a rule that tried every
position against the rest of the text would take about 64x. Also the cost of masking 1 MB
of ordinary output and of an ``xxd`` dump (split forms) with 1,000 known values.

Run: ``python bench/masking.py``. Not a test.
"""

from __future__ import annotations

import secrets
import time

from iac_kernel.masking.shapes import mask_shapes
from iac_kernel.masking.values import ValueMasker

TRIGGERS = {
    "private key": "-----BEGIN PRIVATE KEY-----",
    "aws key id": "AKIA",
    "aws secret": "aws_secret_access_key=",
    "bare 40": "A1b/",
    "json secret": '"password": "',
    "kube": "token: ",
    "url password": "a://x:",
    "password=": "password=",
    "env secret": "A_TOKEN_",
    "github": "ghp_",
    "slack": "xoxb-",
    "jwt": "eyJ-",
    "netrc": "login a password ",
}


def seconds(fn, text: str) -> float:
    started = time.perf_counter()
    fn(text)
    return time.perf_counter() - started


def main() -> None:
    print("credential shapes on adversarial text (400 KB / 50 KB: ~8x is linear)")
    for name, trigger in TRIGGERS.items():
        small = trigger * (50_000 // len(trigger))
        big = trigger * (400_000 // len(trigger))
        a, b = seconds(mask_shapes, small), seconds(mask_shapes, big)
        print(f"  {name:<14} {a * 1000:8.1f} ms  {b * 1000:8.1f} ms  {b / max(a, 1e-6):6.1f}x")
    values = [f"val-{secrets.token_hex(8)}" for _ in range(1000)]
    started = time.perf_counter()
    masker = ValueMasker(values, "(sensitive)")
    built = time.perf_counter() - started
    text = "terraform_data.r[1]: Creation complete after 0s [id=abc]\n" * 18_000
    print("1,000 known values (every form)")
    print(f"  pattern built once     {built * 1000:8.0f} ms")
    print(f"  1 MB of output masked  {seconds(masker.sub, text) * 1000:8.0f} ms")
    # Split forms (issue 32): a dump's and wrapped text's splits are taken out first.
    dump = "".join(
        f"{i * 16:08x}: {secrets.token_hex(2)} {secrets.token_hex(2)} {secrets.token_hex(2)}"
        f" {secrets.token_hex(2)}  ........\n"
        for i in range(25_000)
    )
    print(f"  1 MB of xxd dump masked {seconds(masker.sub, dump) * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
