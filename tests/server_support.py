"""Harness for the remote-attach tests (no tests here): a real ``jupyter server`` on
loopback with a token, and ``iac-kernel acp --remote`` driven by the ACP SDK's client.

Waits poll with a generous deadline; no test asserts on timing.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process

from iac_kernel.sessions.store import SessionStore
from iac_kernel.team.store import STORE_ENV
from test_acp_support import STREAM_LIMIT, WAIT, RecordingClient, Wire

SCRIPTS = Path(__file__).parent / "scripts"
#: Hang guard for a server's start (not a timing assertion).
START_WAIT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterServer:
    """``jupyter server`` in a subprocess, on 127.0.0.1 with a random port and token."""

    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        port: int | None = None,
        args: tuple[str, ...] = (),
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.root = root
        self.args = args
        #: (certificate, key): serve https/wss.
        self.tls = tls
        self.env = env
        self.port = port or free_port()
        self.token = secrets.token_hex(16)
        self.log = root.parent / f"jupyter-server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def acp_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/iac-kernel/acp"

    def start(self) -> JupyterServer:
        command = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--ServerApp.root_dir={self.root}",
            "--allow-root",
            "--IdentityProvider.token=" + self.token,
            *self.args,
        ]
        if self.tls:
            command += [f"--certfile={self.tls[0]}", f"--keyfile={self.tls[1]}"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"jupyter server exited: {self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                self.api("GET", "/api/status")
                return self
            time.sleep(0.1)
        raise AssertionError(f"jupyter server did not start: {self.log.read_text()[-3000:]}")

    def api(self, method: str, path: str, body: Any = None) -> Any:
        context = ssl.create_default_context(cafile=str(self.tls[0])) if self.tls else None
        return call_api(self.http + path, self.token, method, body, context)

    def login_cookie(self) -> str:
        """The Cookie header of a browser logged in with the token (the login form)."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(self.http + "/login", timeout=WAIT).read()
        xsrf = next(c.value for c in jar if c.name == "_xsrf")
        form = urllib.parse.urlencode({"password": self.token, "_xsrf": xsrf}).encode()
        opener.open(self.http + "/login", data=form, timeout=WAIT).read()
        return "; ".join(f"{c.name}={c.value}" for c in jar)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_group(self.process, sig)


def call_api(
    url: str, token: str, method: str, body: Any = None, context: ssl.SSLContext | None = None
) -> Any:
    """A Jupyter (or JupyterHub) REST call with ``token``; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT, context=context) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def stop_group(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    """Stop a server started in its own process group, and its children."""
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl), for a wss:// server."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def server_env(root: Path, run_dir: Path, script: Path, **extra: str) -> dict[str, str]:
    """The server's environment: its own store, runtime dir and Jupyter dirs, the
    scripted model; the kernels it starts inherit it."""
    keep = ("PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TMPDIR")
    keep += ("IAC_KERNEL_EGRESS_ENV",)  # the machine's egress proxy, not one per fake home
    env = {k: v for k, v in os.environ.items() if k in keep}
    home = root / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        IAC_KERNEL_SESSIONS_DIR=str(root / "sessions"),
        IAC_KERNEL_RUNTIME_DIR=str(run_dir),
        IAC_KERNEL_SCRIPT=str(script),
        IAC_KERNEL_LOG_LEVEL="INFO",
        JUPYTER_RUNTIME_DIR=str(root / "jupyter-runtime"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.update(extra)
    return env


def bridge_command(url: str, *extra: str) -> list[str]:
    exe = shutil.which("iac-kernel")
    base = [exe] if exe else [sys.executable, "-m", "iac_kernel"]
    return [*base, "acp", "--remote", url, *extra]


def bridge_env(token: str | None, **extra: str) -> dict[str, str]:
    keep = ("HOME", "PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    if token is not None:
        env["IAC_KERNEL_REMOTE_TOKEN"] = token
    env["IAC_KERNEL_LOG_LEVEL"] = "INFO"
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def bridge(
    url: str,
    token: str | None,
    stderr_path: Path,
    client: RecordingClient | None = None,
    initialize: bool = True,
    **env: str,
) -> AsyncIterator[tuple[Any, Any, RecordingClient, Wire]]:
    """``iac-kernel acp --remote URL`` with the SDK's client side connected to it; its
    stderr goes to ``stderr_path``."""
    import asyncio

    client = client or RecordingClient()
    wire = Wire()
    command = bridge_command(url)
    with _log_file(stderr_path) as stderr:
        async with spawn_agent_process(
            client,
            command[0],
            *command[1:],
            env=bridge_env(token, **env),
            transport_kwargs={"stderr": stderr, "limit": STREAM_LIMIT},
            use_unstable_protocol=True,
            observers=[wire],
        ) as (conn, process):
            if initialize:
                await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            try:
                yield conn, process, client, wire
            finally:
                if client.held is not None and not client.held.done():
                    client.held.set_result("reject_once")


def _log_file(path: Path) -> Any:
    return open(path, "wb")  # closed by the caller's with


async def upgrade_status(url: str, headers: dict[str, str]) -> int:
    """The HTTP status a WebSocket upgrade to ``url`` gets (101 when accepted)."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    try:
        conn = await websocket_connect(HTTPRequest(url, headers=headers))
    except HTTPClientError as exc:
        return exc.code
    conn.close()
    return 101


# -- fixtures shared by tests/test_server_*.py (imported there) ---------------------------

SCRIPT = SCRIPTS / "endpoint_main.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The server's root_dir (resolved, as sessions store their cwd)."""
    path = tmp_path / "root"
    path.mkdir()
    return Path(os.path.realpath(path))


@pytest.fixture
def work(root: Path) -> Path:
    path = root / "work"
    path.mkdir()
    return path


@pytest.fixture
def server(root: Path, tmp_path: Path, isolated_runtime_dir: Path) -> Iterator[JupyterServer]:
    env = server_env(tmp_path, isolated_runtime_dir, SCRIPT)
    jupyter = JupyterServer(root, env)
    try:
        yield jupyter.start()
    finally:
        jupyter.stop()


def store_of(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def user_texts(store: SessionStore, sid: str) -> list[str]:
    out = []
    for message in store.read(sid).messages:
        if message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if text:
            out.append(text)
    return out


class WsClient:
    """A raw ACP client on the endpoint's WebSocket: requests by hand, every message
    the server sends kept in :attr:`seen` (answers also resolve their call)."""

    def __init__(self, conn: Any) -> None:
        import asyncio

        self.conn = conn
        self.seen: list[dict[str, Any]] = []
        self._next = 0
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.ensure_future(self._read())
        self._sending: set[asyncio.Task[None]] = set()

    @classmethod
    async def open(cls, url: str, token: str) -> WsClient:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        request = HTTPRequest(url, headers={"Authorization": f"Bearer {token}"})
        return cls(await websocket_connect(request))

    async def _read(self) -> None:
        while True:
            frame = await self.conn.read_message()
            if frame is None:
                return
            message = json.loads(frame)
            self.seen.append(message)
            waiting = (
                self._waiting.pop(message.get("id"), None) if "method" not in message else None
            )
            if waiting is not None and not waiting.done():
                waiting.set_result(message)

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.write_message(json.dumps({"jsonrpc": "2.0", **message}))

    def start(self, method: str, params: Any) -> Any:
        """Send a request; the future of its answer (result or error, as sent)."""
        import asyncio

        self._next += 1
        request_id = f"c{self._next}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        sending = asyncio.ensure_future(
            self.send({"id": request_id, "method": method, "params": params})
        )
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)
        return future

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        import asyncio

        return await asyncio.wait_for(self.start(method, params), WAIT)

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Requests the server made of this client (``session/request_permission``)."""
        return [m for m in self.seen if m.get("method") == method and "id" in m]

    def close(self) -> None:
        self._reader.cancel()
        self.conn.close()


@contextlib.contextmanager
def team_server(base: Path) -> Iterator[tuple[JupyterServer, str]]:
    """A started ``jupyter server`` in ``base`` on a SQLite team store of its own; the
    store's URL."""
    root = base / "root"
    root.mkdir()
    url = f"sqlite:///{base / 'team.sqlite'}"
    jupyter = JupyterServer(root, server_env(base, base / "run", SCRIPT, **{STORE_ENV: url}))
    try:
        yield jupyter.start(), url
    finally:
        jupyter.stop()


@pytest.fixture(scope="module", name="team")
def team_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, str]]:
    """:func:`team_server` for a module, each test its own records (import it to use
    ``team``)."""
    with team_server(tmp_path_factory.mktemp("team-server")) as made:
        yield made


@pytest.fixture(name="book")
def book_fixture(team: tuple[JupyterServer, str]) -> Iterator[Any]:
    """The ``team`` server's approval records (``team.approvals.Approvals``)."""
    from iac_kernel.team.approvals import Approvals
    from iac_kernel.team.store import open_store

    store = open_store(team[1])
    yield Approvals(store)
    store.close()
