"""Test helpers for the egress proxy: a real ``mitmdump`` with our addons, a recording
HTTP(S) API, ``moto_server`` on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks" / "tools"))

from stand_in_forge import ForgeHandler, ForgeState  # noqa: F401  (the runbooks' git server)

from iac_kernel.egress import addon_table, broker, ca
from iac_kernel.egress import proxy as proxy_module
from iac_kernel.egress.decide import GuardedRun
from iac_kernel.egress.environment import ensure_environment

_LISTENING = re.compile(r"proxy listening at [^\s]*:(\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """Terminate ``proc``, killed when it does not exit within 10 seconds."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def egress_ready() -> Path:
    """The egress environment's mitmdump (installed once per machine, then cached)."""
    try:
        python = ensure_environment()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the egress environment cannot be installed here: {exc}")
    return python.parent / "mitmdump"


def broker_args(made: broker.Brokered) -> list[str]:
    """The ``mitmdump`` options that load the broker's addons with ``made``'s table and CA
    (no policy addon: no agent to ask, so every use of a credential is refused)."""
    args = []
    for name in broker.ADDONS:
        args += ["-s", str(Path(broker.__file__).with_name(name))]
    table = f"{addon_table.TABLE_OPTION}={made.table}"
    return [*args, "--set", table, "--set", f"confdir={made.confdir}"]


def trust_broker(made: broker.Brokered, dest: Path) -> dict[str, str]:
    """Make ``made``'s CA if needed, write the sandbox bundle to ``dest`` and return the
    variables that make clients trust it."""
    return ca.trust_env(ca.write_bundle(ca.ensure_ca(made.confdir), dest))


@contextlib.contextmanager
def running_mitmdump(args: list[str], log: Path) -> Iterator[int]:
    """Run ``mitmdump`` on a free loopback port with ``args``; yield its port."""
    program = egress_ready()
    command = [str(program), "--listen-host", "127.0.0.1", "--listen-port", "0", *args]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = _LISTENING.search(log.read_text())
            if found:
                break
            if proc.poll() is not None:
                raise AssertionError(f"mitmdump exited: {log.read_text()}")
            time.sleep(0.1)
        else:
            raise AssertionError(f"mitmdump did not start: {log.read_text()}")
        yield int(found.group(1))
    finally:
        stop(proc)


class Recorder(BaseHTTPRequestHandler):
    """Answers every request with 200 ``ok`` and records (method, path, headers)."""

    seen: list[tuple[str, str, dict[str, str]]]

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append((self.command, self.path, dict(self.headers.items())))  # type: ignore[attr-defined]
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _any

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def recording_api(context: ssl.SSLContext | None = None) -> Iterator[ThreadingHTTPServer]:
    """A loopback HTTP (or HTTPS with ``context``) server that records requests in
    ``.seen``; its port is ``.server_address[1]``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen = []  # type: ignore[attr-defined]
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def moto(env: dict[str, str] | None = None) -> Iterator[str]:
    """``moto_server`` (from the test environment, never the proxy's) on a free loopback
    port; yields its endpoint URL."""
    pytest.importorskip("moto.server")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert proc.poll() is None, "moto_server exited"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


ALLOW_ALL = (
    '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'
)


@contextlib.contextmanager
def aws_user(region: str = "us-east-1") -> Iterator[dict[str, str]]:
    """moto's server authenticating every request after the first three, which make a
    user allowed everything; yields its real keys and ``AWS_ENDPOINT_URL``."""
    boto3 = pytest.importorskip("boto3")
    with moto({"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as endpoint:
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id="AKIASETUPSETUPSETUP0",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="agent")
        iam.put_user_policy(UserName="agent", PolicyName="all", PolicyDocument=ALLOW_ALL)
        key = iam.create_access_key(UserName="agent")["AccessKey"]
        yield {
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            "AWS_ENDPOINT_URL": endpoint,
        }


class Answers:
    """The agent's egress asker for tests: every host allowed; each cloud operation
    answered ``operation_answer`` (allowed by default) and recorded."""

    def __init__(self, operation_answer: bool = True) -> None:
        self.operation_answer = operation_answer
        self.operations: list[dict] = []

    async def __call__(self, host: str, port: int) -> tuple[bool, str]:
        return True, ""

    async def operation(self, operation: dict, run: object) -> tuple[bool, str]:
        self.operations.append(operation)
        return self.operation_answer, "" if self.operation_answer else "rejected by the test"


#: A guarded run the user approved (its changes are not asked again).
APPROVED_RUN = GuardedRun("terraform", ("terraform", "apply"), approved=True)


@contextlib.contextmanager
def agent_proxy(
    made: broker.Brokered,
    run: GuardedRun | None = APPROVED_RUN,
    answers: Answers | None = None,
    options: dict[str, str] | None = None,
) -> Iterator[int]:
    """The agent's own egress proxy running with broker ``made`` (and extra mitmdump
    ``options``), and one relay (of a guarded ``run``, or of a shell with None) served on
    a loopback TCP port, as the run's forwarder serves it inside its sandbox; yields the
    port. The relay's decisions run on a loop of their own, so the test may block."""
    egress_ready()
    saved = dict(proxy_module.OPTIONS)
    proxy_module.OPTIONS.update(options or {})
    previous = broker.active()  # a module's world, whose relay outlives this one
    with broker.activated(made):
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        folder = Path(tempfile.mkdtemp(prefix="relay-"))
        socket_path = folder / "egress.sock"
        settings = SimpleNamespace(egress_allow="", egress_allow_private="127.0.0.0/8")

        async def splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_unix_connection(str(socket_path))

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(OSError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        async def start() -> tuple[object, asyncio.base_events.Server]:
            route = await proxy_module.open_route(
                socket_path, settings, answers or Answers(), run=run
            )
            assert route is not None, proxy_module.proxy().failure
            return route, await asyncio.start_server(splice, "127.0.0.1", 0)

        try:
            route, server = asyncio.run_coroutine_threadsafe(start(), loop).result(120)
            try:
                yield server.sockets[0].getsockname()[1]
            finally:
                loop.call_soon_threadsafe(server.close)  # the loop's object: closed on its thread
                asyncio.run_coroutine_threadsafe(route.close(), loop).result(30)  # type: ignore[attr-defined]
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            proxy_module.OPTIONS.clear()
            proxy_module.OPTIONS.update(saved)
            shutil.rmtree(folder, ignore_errors=True)
    if previous is not None:  # the proxy runs with that world's table again
        proxy_module.proxy().ensure()
