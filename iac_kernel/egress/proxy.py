"""This process's egress proxy: one ``mitmdump`` (started on first use, stopped at exit),
the private socket its policy addon asks, and the per-sandbox relays.

Everything network-side runs on one background thread with its own event loop, so it
serves any number of agent loops (kernel, ACP, tests); a decision hops to the loop of the
call it belongs to (the permission gate lives there). A relay connection is told apart
by the TCP source port it opens to mitmdump (bound before connecting and registered, so
the addon's question finds it): no credential is needed from the sandboxed client, and
the sandbox cannot forge one (its network namespace cannot reach mitmdump at all).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from iac_kernel.control_paths import register
from iac_kernel.egress import addon_table, broker, ca, environment, inside
from iac_kernel.egress.decide import (
    AskEgress,
    AuditSink,
    Decision,
    EgressCall,
    GuardedRun,
    jupyter_ports,
)
from iac_kernel.peercred import peer_pid

log = logging.getLogger(__name__)

INSTALL_HINT = environment.INSTALL_HINT
#: Addon scripts mitmdump loads, in order: the policy's, then the broker's. They are
#: copied into the proxy's private folder at each start and loaded from there (mitmdump
#: reloads a script whose file changes: no sandbox may be able to write the file it
#: watches), with every ``addon_*.py`` beside them (helpers they import).
ADDONS = ("addon_policy.py", *broker.ADDONS)
#: Extra ``--set name=value`` options for mitmdump (the broker adds its own).
OPTIONS: dict[str, str] = {}
#: mitmproxy's onboarding app (http://mitm.it) would answer with no policy decision.
FIXED_OPTIONS = {"onboarding": "false"}
#: HTTP/2 off while the engine is older than the fix of its HTTP/2 to HTTP/1 request
#: smuggling (environment.HTTP2_FIXED).
OLD_ENGINE_OPTIONS = {"http2": "false"}
START_TIMEOUT = 30.0


class EgressProxy:
    """The process-wide proxy (see the module doc); use :func:`proxy`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}
        self.failure: str | None = None
        self.calls: dict[int, EgressCall] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir: Path | None = None
        self._ready = threading.Event()
        #: The credential broker mitmdump runs with, and the sandboxes' CA bundle (in
        #: the private folder; each call gets a link: :meth:`place_bundle`).
        self._broker: broker.Brokered | None = None
        self.bundle: Path | None = None
        #: mitmdump's start (True once it serves): relays wait for it (:meth:`ensure`).
        self._starting: Future[bool] | None = None
        #: A start :meth:`ensure` made but left to the first connection (:meth:`launch`);
        #: its own lock, as a relay on the loop launches it while ``ensure`` may wait.
        self._deferred: tuple[Path, broker.Brokered, Future[bool]] | None = None
        self._deferred_lock = threading.Lock()

    # -- life cycle -------------------------------------------------------------
    def ensure(self, wait: bool = True) -> bool:
        """Start the proxy if it is not running (again when the credential broker
        changed); False (see :attr:`failure`) when it cannot run. Blocking: call it from
        a thread. ``wait=False`` returns once the relays can be opened (the loop and the
        CA bundle are ready) and leaves mitmdump's start (about a second of CPU) to the
        first connection a relay gets: a call that never connects (an offline plan) never
        pays for it (after a failed start it waits: the call then knows it has no
        proxy)."""
        with self._lock:
            try:  # installed on first use (one progress line in the log)
                python = environment.ensure_environment(progress=log.warning)
            except environment.EgressInstallError as exc:
                self._stop_process()
                self.failure = f"{INSTALL_HINT}; {exc}"
                return False
            made = broker.current()
            starting = self._starting
            failed = starting is not None and starting.done() and not starting.result()
            if self._deferred is None and starting is not None and not starting.done():
                if made is not self._broker:
                    starting.result()  # one start at a time
            running = self.process is not None and self.process.poll() is None
            busy = starting is not None and not starting.done()
            serving = starting is not None and starting.done() and starting.result() and running
            if not ((busy or serving) and made is self._broker):
                self._stop_process()
                self._start_loop()
                self._trust(made)
                self._broker = made
                self._cancel_deferred()
                starting = self._starting = Future()
                self._deferred = (python.parent / "mitmdump", made, starting)
            if wait or failed:
                self.launch()
        return starting.result() if wait or failed else True  # a known failure: tell it

    def launch(self) -> None:
        """Launch the start :meth:`ensure` left for the first connection (if it did)."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, None
        if deferred is not None:
            threading.Thread(target=self._launch_all, args=deferred, daemon=True).start()

    def _cancel_deferred(self) -> None:
        """A start never launched answers its waiters as failed."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, None
        if deferred is not None and not deferred[2].done():
            deferred[2].set_result(False)

    def _launch_all(self, program: Path, made: broker.Brokered, done: Future[bool]) -> None:
        for _ in range(3):  # a port taken between choosing and binding: try again
            if self._starting is not done:
                break  # stopped meanwhile
            if self._launch(program, made):
                self.failure = None
                done.set_result(True)
                return
        done.set_result(False)

    def _trust(self, made: broker.Brokered) -> None:
        """Sandboxes trust the broker's CA: a bundle (certificates only) of this agent
        process alone, in its private folder; :meth:`place_bundle` shows it to a call."""
        assert self._dir is not None
        self.bundle = ca.write_bundle(ca.ensure_ca(made.confdir), self._dir / ca.BUNDLE_NAME)

    def place_bundle(self, folder: Path) -> None:
        """Link this proxy's CA bundle into ``folder`` (a call's folder, read-only in its
        sandbox), where the trust variables name it (:func:`_trust_env`)."""
        if self.bundle is None:
            return
        if not self.bundle.exists() and self._broker is not None:
            # Its temporary folder was cleaned away under a long-lived process: write it again.
            self.bundle.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._trust(self._broker)
        ca.link_bundle(self.bundle, folder / ca.BUNDLE_NAME)

    def _start_loop(self) -> None:
        if self._loop is not None:
            return
        self._dir = Path(tempfile.mkdtemp(prefix="iac-egress-"))
        os.chmod(self._dir, 0o700)
        register(self._dir)
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        threading.Thread(target=run, name="iac-egress", daemon=True).start()
        started.wait()
        self._loop = loop
        self._submit(self._serve_decisions()).result()
        atexit.register(self.stop)

    def _launch(self, program: Path, made: broker.Brokered) -> bool:
        assert self._dir is not None
        ports = {"http": _free_port(), "socks5": _free_port()}
        args = [str(program), "-q", "--listen-host", "127.0.0.1"]
        args += ["--mode", f"regular@{ports['http']}", "--mode", f"socks5@{ports['socks5']}"]
        for script in self._private_addons():
            args += ["-s", str(script)]
        engine = environment.installed()
        options = {
            **FIXED_OPTIONS,
            **({} if engine is not None and engine.http2_safe else OLD_ENGINE_OPTIONS),
            "iac_egress_socket": str(self._dir / "decide.sock"),
            # TLS is intercepted (with the broker's CA) only for the hosts a brokered
            # credential belongs to; the broker's addon tunnels the rest untouched.
            "iac_egress_intercept": "true",
            addon_table.TABLE_OPTION: str(made.table),
            "confdir": str(made.confdir),
            **OPTIONS,
        }
        for key, value in options.items():
            args += ["--set", f"{key}={value}"]
        self._ready.clear()
        self.process = process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.ports = ports
        self._broker = made
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._ready.wait(0.05):
                return True
            if self.process is not process:  # stopped meanwhile (:meth:`stop`)
                return False
            if process.poll() is not None:
                err = (process.stderr.read() if process.stderr else b"").decode()
                lines = err.strip().splitlines() or ["exited"]
                self.failure = f"the egress proxy did not start: {lines[-1]}"
                return False
        self.failure = "the egress proxy did not start in time"
        self._stop_process()
        return False

    def _private_addons(self) -> list[Path]:
        """Copies of every ``addon_*.py`` in the private folder; the scripts' copies."""
        assert self._dir is not None
        target = self._dir / "addons"
        target.mkdir(mode=0o700, exist_ok=True)
        for path in Path(__file__).parent.glob("addon_*.py"):
            tmp = target / f".{path.name}.tmp"
            shutil.copyfile(path, tmp)
            os.replace(tmp, target / path.name)
        return [target / name for name in ADDONS]

    def _stop_process(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
        self._ready.clear()

    def stop(self) -> None:
        with self._lock:
            self._cancel_deferred()
            self._starting = None
            self._stop_process()

    def protected_ports(self) -> set[int]:
        return set(self.ports.values()) | jupyter_ports()

    # -- the background loop ----------------------------------------------------
    def _submit(self, coro) -> Future:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _serve_decisions(self) -> None:
        assert self._dir is not None
        await asyncio.start_unix_server(self._decision, path=str(self._dir / "decide.sock"))

    async def _decision(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = writer.get_extra_info("socket")
            process = self.process
            if process is None or peer_pid(sock) != process.pid:
                return  # only our mitmdump asks
            message = json.loads(await reader.readline() or b"{}")
            if message.get("hello"):
                self._ready.set()
                await reader.read()  # held open: mitmdump stops when we go away
                return
            decision = await self._answer(message)
            writer.write(json.dumps(decision.wire()).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError) as exc:
            log.debug("egress decision failed: %s", exc)
        finally:
            writer.close()

    async def _answer(self, message: dict) -> Decision:
        """The call's answer to the policy addon's question (may this connection reach
        ``host:port``) or the broker's (may it use a credential for ``operation``)."""
        call = self.calls.get(int(message.get("peer", 0)))
        if call is None or call.loop is None:
            return Decision(False, reason="not a connection of a running sandboxed call")
        if "operation" not in message:
            host, port = str(message["host"]), int(message["port"])
            asked = call.decide(host, port, self.protected_ports())
        elif isinstance(message["operation"], dict):
            asked = call.judge(message["operation"])
        else:
            return Decision(False, reason="no operation named")
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(asked, call.loop))
        except Exception as exc:  # the call ended, its loop is gone
            return Decision(False, reason=f"refused: {exc or type(exc).__name__}")

    # -- relays -----------------------------------------------------------------
    def open_relay(self, path: Path, call: EgressCall) -> Future:
        """Serve ``path`` (a Unix socket the sandbox sees) for ``call``; the future's
        result is the server (pass it to :meth:`close_relay`)."""
        return self._submit(self._relay_server(path, call))

    def close_relay(self, server: asyncio.base_events.Server) -> Future:
        async def close() -> None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1)

        return self._submit(close())

    async def _relay_server(self, path: Path, call: EgressCall) -> asyncio.base_events.Server:
        connections: set[asyncio.Task] = set()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await self._relay(reader, writer, call)
            except asyncio.CancelledError:
                pass  # closed with its relay; a cancelled handler is logged as an error (3.11)
            finally:
                connections.discard(task)

        server = await asyncio.start_unix_server(handle, path=str(path))
        os.chmod(path, 0o666)  # the sandbox's processes are the user's, but be explicit
        original_close = server.close

        def close() -> None:
            original_close()
            for task in list(connections):
                task.cancel()

        server.close = close  # type: ignore[method-assign]
        return server

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, call: EgressCall
    ) -> None:
        upstream_writer = None
        source = 0
        try:
            first = await reader.read(1)
            if not first:
                return
            starting = self._starting  # shielded: a relay closing never cancels the start
            self.launch()
            if starting is None or not await asyncio.shield(asyncio.wrap_future(starting)):
                return  # mitmdump did not start (``failure`` says why)
            port = self.ports["socks5" if first == b"\x05" else "http"]
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            source = sock.getsockname()[1]
            self.calls[source] = call  # before connecting: the addon may ask at once
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            upstream_reader, upstream_writer = await asyncio.open_connection(sock=sock)
            upstream_writer.write(first)
            await asyncio.gather(_copy(reader, upstream_writer), _copy(upstream_reader, writer))
        except (OSError, KeyError):
            pass
        finally:
            self.calls.pop(source, None)
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_PROXY: EgressProxy | None = None


def _trust_env(mount: str) -> dict[str, str]:
    """The trust variables, naming the bundle :meth:`EgressProxy.place_bundle` put in the
    folder the sandbox sees at ``mount``."""
    if _PROXY is None or _PROXY.bundle is None:
        return {}
    return ca.trust_env(Path(mount) / ca.BUNDLE_NAME)


inside.ENV_HOOKS.append(_trust_env)


def proxy() -> EgressProxy:
    """This process's egress proxy (made on first use; started by ``ensure``)."""
    global _PROXY
    if _PROXY is None:
        _PROXY = EgressProxy()
    return _PROXY


def status_text() -> str:
    """One line: the proxy's engine (sandboxes reach allowed hosts), or that it is made
    on first use, or why it cannot be."""
    found = environment.installed()
    if found is None:
        problem = environment.install_problem()
        if problem is not None:
            return f"{INSTALL_HINT}; {problem}"
        engine = environment.choose_engine().describe()
        return f"egress proxy: {engine}, installed on first use (or now: iac-kernel egress install)"
    return (
        "network: own namespace per sandbox, egress through the proxy (egress_allow): "
        + found.describe()
    )


class Route:
    """One sandboxed call's way out: its relay socket and the forwarder's port inside."""

    def __init__(self, owner: EgressProxy, server: asyncio.base_events.Server) -> None:
        self.owner = owner
        self.server = server
        self.port = random.randint(20000, 60000)  # any port: the namespace is the call's

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(self.owner.close_relay(self.server))


async def open_route(
    path: Path,
    settings: object,
    ask: AskEgress | None,
    run: GuardedRun | None = None,
    audit: AuditSink | None = None,
) -> Route | None:
    """Start the proxy if needed and serve ``path`` for one call's shell, or for one
    guarded ``run`` (the only connections whose brokered credentials are swapped: give
    its socket to that run's sandbox alone); None when the proxy cannot run
    (:func:`status_text` and ``proxy().failure`` say why)."""
    owner = proxy()
    if not await asyncio.to_thread(owner.ensure, False):
        return None
    call = EgressCall(settings, ask, asyncio.get_running_loop(), run=run, audit=audit)
    server = await asyncio.wrap_future(owner.open_relay(path, call))
    route = Route(owner, server)
    script = path.with_name(inside.CONNECT_SCRIPT)
    script.write_text(inside.connect_script(route.port))
    script.chmod(0o755)
    owner.place_bundle(path.parent)  # this agent's CA bundle, beside the socket
    return route
