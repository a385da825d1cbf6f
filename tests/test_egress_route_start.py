"""A sandboxed call need not wait for the egress proxy's first start (issue 42: the
first ``terraform_plan`` of an agent waited about a second for mitmdump): a route opens
at once, mitmdump starts at its first connection (a call that never connects never starts
it), and a connection made meanwhile is served once it is up, or closed (not left
hanging) when it cannot start. Real mitmdump, a loopback API."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from egress_support import Answers, egress_ready, recording_api
from iac_kernel.egress import proxy as proxy_module

SETTINGS = SimpleNamespace(egress_allow="", egress_allow_private="127.0.0.0/8")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):
    """A proxy of this test's own, not started yet; stopped at the end."""
    egress_ready()
    monkeypatch.setattr(proxy_module, "_PROXY", None)
    owner = proxy_module.proxy()
    try:
        yield owner
    finally:
        owner.stop()


def _get(path: Path, port: int) -> bytes:
    """A plain HTTP request through the relay at ``path``, as a sandbox's forwarder
    sends it; everything the relay answers until it closes."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(str(path))
        url = f"http://127.0.0.1:{port}/started"
        request = f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


async def test_a_route_opens_while_mitmdump_starts_and_its_connection_is_served(
    fresh, tmp_path: Path
):
    path = tmp_path / "egress.sock"
    with recording_api() as api:
        started = time.monotonic()
        route = await proxy_module.open_route(path, SETTINGS, Answers())
        opened = time.monotonic() - started
        assert route is not None
        assert fresh._starting is not None and not fresh._starting.done(), opened
        answer = await asyncio.to_thread(_get, path, api.server_address[1])
        await route.close()
    assert answer.split(b"\r\n")[0].endswith(b" 200 OK") and answer.endswith(b"ok\n"), answer
    assert [seen[1] for seen in api.seen] == ["/started"]
    assert fresh._starting.result() is True and fresh.failure is None


async def test_a_route_closed_while_its_connection_waits_leaves_the_start_alone(
    fresh, tmp_path: Path
):
    """A call that ends while mitmdump starts (its relay's waiting connection is
    cancelled) must not cancel the start the next calls wait for."""
    first = tmp_path / "first.sock"
    with recording_api() as api:
        route = await proxy_module.open_route(first, SETTINGS, Answers())
        assert route is not None and not fresh._starting.done()
        waiting = socket.socket(socket.AF_UNIX)
        waiting.connect(str(first))
        waiting.sendall(b"GET http://127.0.0.1:1/ HTTP/1.1\r\n")  # held until it starts
        await asyncio.sleep(0.1)
        await route.close()
        waiting.close()
        second = tmp_path / "second.sock"
        again = await proxy_module.open_route(second, SETTINGS, Answers())
        assert again is not None
        answer = await asyncio.to_thread(_get, second, api.server_address[1])
        await again.close()
    assert answer.endswith(b"ok\n") and fresh._starting.result() is True


async def test_a_connection_is_closed_when_mitmdump_cannot_start(
    fresh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    broken = tmp_path / "engine" / "mitmdump"  # an engine that cannot start
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'engine broken here' >&2\nexit 3\n")
    broken.chmod(0o755)
    python = broken.with_name("python")
    monkeypatch.setattr(proxy_module.environment, "ensure_environment", lambda **_: python)
    path = tmp_path / "egress.sock"
    with recording_api() as api:
        route = await proxy_module.open_route(path, SETTINGS, Answers())
        assert route is not None  # opened before the start could fail
        answer = await asyncio.to_thread(_get, path, api.server_address[1])
        await route.close()
    assert answer == b"" and api.seen == []
    assert fresh._starting.result() is False and "engine broken here" in (fresh.failure or "")
    # The next route knows it at once: no route (the bash card says why).
    assert await proxy_module.open_route(tmp_path / "again.sock", SETTINGS, Answers()) is None


async def test_a_call_that_never_connects_never_starts_mitmdump(fresh, tmp_path: Path):
    """An offline call (a plan of local resources) pays no mitmdump start; the first
    connection of a later call starts it."""
    quiet = await proxy_module.open_route(tmp_path / "quiet.sock", SETTINGS, Answers())
    assert quiet is not None
    await asyncio.sleep(0.5)
    await quiet.close()
    pending = fresh._starting
    assert fresh.process is None and pending is not None and not pending.done()
    path = tmp_path / "busy.sock"
    with recording_api() as api:
        route = await proxy_module.open_route(path, SETTINGS, Answers())
        assert route is not None and fresh._starting is pending  # the same start
        answer = await asyncio.to_thread(_get, path, api.server_address[1])
        await route.close()
    assert answer.endswith(b"ok\n") and pending.result() is True and fresh.process is not None


async def test_a_start_left_for_a_connection_is_answered_when_the_proxy_stops(fresh, tmp_path):
    route = await proxy_module.open_route(tmp_path / "quiet.sock", SETTINGS, Answers())
    assert route is not None
    pending = fresh._starting
    await route.close()
    fresh.stop()
    assert pending is not None and pending.result(timeout=1) is False
