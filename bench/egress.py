"""The egress proxy's cost: per request and per MB through a sandbox's only way out
(forwarder -> relay -> mitmdump -> server) against the same client connecting directly
from the host, in the same run, to the same loopback server (allowed by a rule).

Run: ``python bench/egress.py [--runs N]`` (or ``bench/run.py --only egress``).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import median

from iac_kernel.config import Settings
from iac_kernel.guard.call import GuardedCall

REQUESTS = 50
MEGABYTES = 20

CLIENT = """
import json, os, sys, time, urllib.request
port, n, mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
opener = urllib.request.build_opener()  # proxies from the environment, if any
start = time.perf_counter()
for _ in range(n):
    opener.open(f"http://127.0.0.1:{port}/small").read()
per_request = (time.perf_counter() - start) / n
start = time.perf_counter()
size = len(opener.open(f"http://127.0.0.1:{port}/big").read())
per_mb = (time.perf_counter() - start) / (size / 1e6)
print(json.dumps({"request": per_request, "mb": per_mb}))
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        body = b"x" * (MEGABYTES * 1_000_000 if self.path == "/big" else 100)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _direct(script: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    args = [sys.executable, str(script), str(port), str(REQUESTS), str(MEGABYTES)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


async def _proxied(script: Path, port: int, cwd: Path) -> dict:
    settings = Settings()
    settings.egress_allow = "127.0.0.1"
    settings.egress_allow_private = f"127.0.0.1:{port}"
    async with GuardedCall(cwd, settings, dict(os.environ), None) as call:
        if call.route is None:
            raise SystemExit("no egress proxy: run `iac-kernel egress install`")
        argv = [sys.executable, str(script), str(port), str(REQUESTS), str(MEGABYTES)]
        proc = await asyncio.create_subprocess_exec(
            *call.wrap(argv), env=call.env, cwd=cwd, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
    return json.loads(out)


def run(runs: int) -> dict[str, list[float]]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    figures: dict[str, list[float]] = {
        k: [] for k in ("direct rq", "proxy rq", "direct mb", "proxy mb")
    }
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "client.py"
        script.write_text(CLIENT)
        os.chmod(tmp, 0o755)
        for _ in range(runs):  # interleaved
            direct = _direct(script, port)
            proxied = asyncio.run(_proxied(script, port, Path(tmp)))
            figures["direct rq"].append(direct["request"])
            figures["proxy rq"].append(proxied["request"])
            figures["direct mb"].append(direct["mb"])
            figures["proxy mb"].append(proxied["mb"])
    httpd.shutdown()
    return figures


def report(figures: dict[str, list[float]]) -> None:
    rq_d, rq_p = median(figures["direct rq"]), median(figures["proxy rq"])
    mb_d, mb_p = median(figures["direct mb"]), median(figures["proxy mb"])
    print(f"egress proxy ({REQUESTS} requests, one {MEGABYTES} MB download, loopback server)")
    for name, ours, floor, target in (
        ("per request", rq_p, rq_d, "target: added <= 10 ms"),
        ("per MB", mb_p, mb_d, "target: added <= 20 ms/MB"),
    ):
        print(
            f"  {name:<12} proxy {ours * 1000:.2f} ms, direct {floor * 1000:.2f} ms, "
            f"added {(ours - floor) * 1000:.2f} ms ({ours / floor:.1f}x)   {target}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    report(run(parser.parse_args().runs))
