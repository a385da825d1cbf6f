"""The egress proxy's cost: per request and per MB through a sandbox's only way out
(forwarder -> relay -> mitmdump -> server) against the same client connecting directly
from the host, in the same run, to the same loopback server (allowed by a rule). Then the
operation gate's cost: requests carrying a brokered credential through a guarded run's
relay (checked, judged by the agent, swapped) against the same requests without one
through the same relay, and a direct connection.

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
from iac_kernel.egress import broker
from iac_kernel.egress.decide import GuardedRun
from iac_kernel.egress.proxy import open_route
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

    #: The Authorization headers received (the gate's figure checks the swap happened).
    seen_auth: set[str] = set()

    def do_GET(self) -> None:
        self.seen_auth.add(self.headers.get("Authorization", ""))
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


GATE_CLIENT = """
import json, sys, time, urllib.request
proxy, port, n, auth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
handler = urllib.request.ProxyHandler({"http": proxy} if proxy else {})
opener = urllib.request.build_opener(handler)
headers = {"Authorization": auth} if auth else {}
start = time.perf_counter()
for _ in range(n):
    opener.open(urllib.request.Request(f"http://127.0.0.1:{port}/small", headers=headers)).read()
print(json.dumps((time.perf_counter() - start) / n))
"""


async def _splice(path: Path, reader, writer) -> None:
    """A loopback TCP port in front of a relay socket (the forwarder's part)."""
    up_reader, up_writer = await asyncio.open_unix_connection(str(path))

    async def pipe(src, dst) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        dst.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


class _Always:
    async def __call__(self, host: str, port: int) -> tuple[bool, str]:
        return True, ""


async def _gate_once(script: Path, port: int, folder: Path, auth: str) -> dict[str, float]:
    settings = Settings()
    settings.egress_allow = "127.0.0.1"
    settings.egress_allow_private = f"127.0.0.1:{port}"
    run = GuardedRun("terraform", ("terraform", "plan"), approved=False)
    route = await open_route(folder / "egress.sock", settings, _Always(), run=run)
    if route is None:
        raise SystemExit("no egress proxy could be started")
    server = await asyncio.start_server(
        lambda r, w: _splice(folder / "egress.sock", r, w), "127.0.0.1", 0
    )
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    times = {}
    try:
        for name, via, header in (
            ("direct", "", ""),
            ("relay", proxy, ""),
            ("gate", proxy, auth),
        ):
            args = [sys.executable, str(script), via, str(port), str(REQUESTS), header]
            proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
            out, _ = await proc.communicate()
            times[name] = json.loads(out)
    finally:
        server.close()
        await route.close()
    return times


def gate(runs: int) -> dict[str, list[float]]:
    """Per request: direct, through a run's relay, and with a brokered credential."""
    import base64

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    figures: dict[str, list[float]] = {"direct": [], "relay": [], "gate": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        password = "bench-Passw0rd-0123456789"
        (home / ".git-credentials").write_text(f"http://bob:{password}@127.0.0.1:{port}\n")
        made = broker.prepare({}, home=home, folder=Path(tmp) / "private")
        fake = made.swaps[password]
        auth = "Basic " + base64.b64encode(f"bob:{fake}".encode()).decode()
        broker.activate(made)
        script = Path(tmp) / "gate_client.py"
        script.write_text(GATE_CLIENT)
        try:
            for _ in range(runs):
                times = asyncio.run(_gate_once(script, port, Path(tmp), auth))
                for name, value in times.items():
                    figures[name].append(value)
        finally:
            broker.activate(None)
    httpd.shutdown()
    real = "Basic " + base64.b64encode(f"bob:{password}".encode()).decode()
    if real not in _Handler.seen_auth or auth in _Handler.seen_auth:
        raise SystemExit("the gate's requests were not brokered: the figure would mean nothing")
    return figures


def report_gate(figures: dict[str, list[float]]) -> None:
    direct, relay, gated = (median(figures[k]) for k in ("direct", "relay", "gate"))
    print(f"operation gate ({REQUESTS} requests with a brokered credential, loopback server)")
    print(
        f"  per request  gate {gated * 1000:.2f} ms, same relay without a credential "
        f"{relay * 1000:.2f} ms, direct {direct * 1000:.2f} ms; "
        f"the gate adds {(gated - relay) * 1000:.2f} ms ({gated / relay:.2f}x the relay)"
        "   target: added <= 5 ms"
    )


#: Credentials in the broker's table for the scrub figure: one AWS key pair with a session
#: token, the rest bearer tokens.
SCRUB_CREDENTIALS = 10


def scrub(runs: int) -> dict[str, list[float]]:
    """Per MB through the proxy when every answer is scrubbed of a table of
    :data:`SCRUB_CREDENTIALS` credentials, against the same proxy with an empty table."""
    import secrets

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    figures: dict[str, list[float]] = {"empty": [], "table": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {
            "AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8).upper(),
            "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30)[:40],
            "AWS_SESSION_TOKEN": secrets.token_urlsafe(300),
        }
        for i in range(SCRUB_CREDENTIALS - 1):
            env[f"TF_TOKEN_bench{i}_example_com"] = secrets.token_urlsafe(40)
        brokers = {
            "empty": broker.prepare({}, home=home, folder=Path(tmp) / "empty"),
            "table": broker.prepare(env, home=home, folder=Path(tmp) / "table"),
        }
        script = Path(tmp) / "client.py"
        script.write_text(CLIENT)
        os.chmod(tmp, 0o755)
        try:
            for _ in range(runs):  # interleaved; the proxy restarts with each table
                for name, made in brokers.items():
                    broker.activate(made)
                    figures[name].append(asyncio.run(_proxied(script, port, Path(tmp)))["mb"])
        finally:
            broker.activate(None)
    httpd.shutdown()
    return figures


def report_scrub(figures: dict[str, list[float]]) -> None:
    empty, table = median(figures["empty"]), median(figures["table"])
    size = f"one {MEGABYTES} MB download, a table of {SCRUB_CREDENTIALS} credentials"
    print(f"answer scrubbing ({size})")
    print(
        f"  per MB       with the table {table * 1000:.2f} ms, empty table {empty * 1000:.2f} ms, "
        f"added {(table - empty) * 1000:.2f} ms ({table / empty:.2f}x)   target: added <= 5 ms/MB"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    report(run(runs))
    report_gate(gate(runs))
    report_scrub(scrub(runs))
