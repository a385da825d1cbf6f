"""Units of the remote attach: URL and token policy of ``--remote``, frames to lines,
resumable links and their outboxes, operation ids, the root_dir check, and the
bridge's start-up failures."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from iac_kernel.acp.remote.resume import ACK_EVERY, Outbox, ack_count, ack_frame, parse_count
from iac_kernel.acp.remote.target import RemoteError, target
from iac_kernel.acp.routes import Operations, operation_key
from iac_kernel.config import Settings
from iac_kernel.server.link import Link, Links
from iac_kernel.server.sessions import RootedManager, inside
from iac_kernel.server.stream import FrameReader
from server_support import bridge_command, bridge_env, free_port

TOKEN = "s3cr3t-token-value"


@pytest.mark.parametrize(
    "url",
    [
        "wss://hub.example.org/user/me/iac-kernel/acp",
        "https://hub.example.org/user/me/iac-kernel/acp",
        "ws://127.0.0.1:8888/iac-kernel/acp",
        "ws://localhost:8888/iac-kernel/acp",
        "ws://[::1]:8888/iac-kernel/acp",
    ],
)
def test_accepted_urls(url: str) -> None:
    where = target(url, env={"IAC_KERNEL_REMOTE_TOKEN": TOKEN})
    assert where.url.startswith(("ws://", "wss://"))
    assert where.headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert TOKEN not in where.url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ws://hub.example.org/iac-kernel/acp", "unencrypted"),
        ("ws://10.0.0.5:8888/iac-kernel/acp", "unencrypted"),
        ("http://hub.example.org/iac-kernel/acp", "unencrypted"),
        ("ws://127.0.0.1.evil.example/iac-kernel/acp", "unencrypted"),
        ("wss://hub.example.org/iac-kernel/acp?token=abc", "credentials"),
        ("wss://hub.example.org/iac-kernel/acp?a=1&TOKEN=abc", "credentials"),
        ("wss://me:pw@hub.example.org/iac-kernel/acp", "credentials"),
        ("ftp://hub.example.org/acp", "wss://"),
        ("hub.example.org/acp", "wss://"),
        ("wss:///acp", "wss://"),
        ("wss://hub.example.org:99999/acp", "invalid"),
    ],
)
def test_refused_urls(url: str, reason: str) -> None:
    with pytest.raises(RemoteError) as refused:
        target(url, env={})
    assert reason in str(refused.value)
    assert refused.value.final
    assert "abc" not in str(refused.value) and "pw" not in str(refused.value)


def test_insecure_only_when_allowed_and_token_sources() -> None:
    url = "ws://hub.internal:8000/user/me/iac-kernel/acp"
    assert target(url, allow_insecure=True, env={}).token is None
    hub = target(url, allow_insecure=True, env={"JUPYTERHUB_API_TOKEN": "hub"})
    assert hub.token == "hub"
    both = {"JUPYTERHUB_API_TOKEN": "hub", "IAC_KERNEL_REMOTE_TOKEN": "mine"}
    assert target(url, allow_insecure=True, env=both).token == "mine"


def test_root_dir_check_follows_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    real = os.path.realpath(root)
    assert inside(str(root / "work"), real)
    assert inside(str(root), real)
    assert not inside(str(root / "escape"), real)
    assert not inside(str(tmp_path / "root-sibling"), real)
    assert not inside(str(root / "work" / ".." / ".."), real)


async def test_one_frame_is_one_line_and_back() -> None:
    frames = FrameReader()
    frames.feed('{"jsonrpc": "2.0",\n "id": 1,\r\n "method": "initialize"}')
    frames.feed('{"a": "\\n"}')
    frames.end()
    first = await frames.reader.readline()
    assert first.count(b"\n") == 1 and b'"method": "initialize"' in first
    assert await frames.reader.readline() == b'{"a": "\\n"}\n'
    assert await frames.reader.readline() == b""


class Socket:
    """A WebSocket stand-in: what the link sends on it."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.closed: int | None = None

    def write_message(self, message: str, binary: bool = False) -> None:
        assert not binary
        self.sent.append(message)

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = code


async def test_a_resumable_link_keeps_numbered_frames_until_acknowledged() -> None:
    links = Links(window=60)
    link = links.new("me", resumable=True)
    served: list[Link] = []

    async def serve(served_link: Link) -> None:
        served.append(served_link)

    first = Socket()
    link.attach(first, 0, serve)
    link.write(b'{"id":1}\n{"id":2}\n')
    assert first.sent == ['{"id":1}', '{"id":2}']
    link.detach(first, clean=False)  # dropped: kept, frames wait in the outbox
    assert links.find(link.id, 1) is link and not link.ended
    link.write(b'{"id":3}\n')
    second = Socket()
    link.take_over()
    link.attach(second, 1, serve)  # the client has frame 1 only
    assert second.sent == ['{"id":2}', '{"id":3}']
    link.feed(second, ack_frame(3))
    assert link.outbox.after(3) == [] and link.outbox.after(2) is None
    assert links.find(link.id, 2) is None  # frame 3 is gone: not resumable from 2
    # Client frames are counted (acknowledged every ACK_EVERY); a stale socket's are not.
    link.feed(first, '{"jsonrpc":"2.0","method":"x"}')
    for _ in range(ACK_EVERY):
        link.feed(second, '{"jsonrpc":"2.0","method":"x"}')
    assert link.received == ACK_EVERY and second.sent[-1] == ack_frame(ACK_EVERY)
    link.detach(second, clean=True)  # closed with 1000: ends at once
    assert link.ended and links.find(link.id, 3) is None
    assert await link.frames.reader.read() == b'{"jsonrpc":"2.0","method":"x"}\n' * ACK_EVERY
    await asyncio.sleep(0)
    assert served == [link]


async def test_a_link_that_cannot_resume_fails_its_writes_once_dropped() -> None:
    link = Links().new("me", resumable=False)

    async def serve(_link: Link) -> None:
        return None

    socket = Socket()
    link.attach(socket, 0, serve)
    link.detach(socket, clean=False)
    assert link.ended
    with pytest.raises(ConnectionError):
        link.write(b'{"id":1}\n')


def test_outbox_and_acknowledgements() -> None:
    box = Outbox()
    for n in range(1, 5):
        assert box.add(f"f{n}") == n
    assert box.after(2) == ["f3", "f4"] and box.after(5) is None
    box.ack(2)
    assert box.after(2) == ["f3", "f4"] and box.after(1) is None and box.acked == 2
    assert ack_count(ack_frame(7)) == 7
    assert (
        ack_count('{"jsonrpc":"2.0","id":1,"method":"_iac/received","params":{"count":1}}') is None
    )
    assert ack_count('{"jsonrpc":"2.0","method":"session/update","params":{}}') is None
    assert parse_count(" 12 ") == 12 and parse_count("-1") is None and parse_count(None) is None


async def test_an_operation_runs_once_and_a_cut_one_runs_again() -> None:
    ops = Operations(keep=2)
    runs: list[str] = []
    gate = asyncio.Event()

    async def work() -> str:
        runs.append("ran")
        await gate.wait()
        return f"answer {len(runs)}"

    key = operation_key("session/prompt", {"sessionId": "s", "_meta": {"operationId": "a"}})
    assert key == ("session/prompt", "s", "a")
    assert operation_key("session/prompt", {"_meta": {"operationId": 3}}) is None
    first = asyncio.ensure_future(ops.run(key, work))
    retry = asyncio.ensure_future(ops.run(key, work))
    await asyncio.sleep(0)
    gate.set()
    assert await first == await retry == "answer 1" and runs == ["ran"]
    assert await ops.run(key, work) == "answer 1" and runs == ["ran"]
    gate.clear()
    other = ("session/prompt", "s", "b")
    cut = asyncio.ensure_future(ops.run(other, work))
    await asyncio.sleep(0)
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    gate.set()
    assert await ops.run(other, work) == "answer 3"  # not run to an answer: runs again


def test_bridge_start_failures_are_one_line_and_an_exit_status(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    unreachable = subprocess.run(
        bridge_command(f"ws://127.0.0.1:{port}/iac-kernel/acp"),
        env=bridge_env(TOKEN),
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert unreachable.returncode == 1
    lines = unreachable.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "cannot reach 127.0.0.1" in lines[0], lines
    assert TOKEN not in unreachable.stderr.decode()
    assert unreachable.stdout == b""

    bad = subprocess.run(
        bridge_command(f"wss://example.org/iac-kernel/acp?token={TOKEN}"),
        env=bridge_env(None),
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stderr.decode().strip().count("\n") == 0
    assert TOKEN not in bad.stderr.decode()


def test_bridge_refuses_plain_ws_to_another_host_before_connecting() -> None:
    refused = subprocess.run(
        bridge_command("ws://192.0.2.1:8888/iac-kernel/acp"),
        env=bridge_env(TOKEN),
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "unencrypted" in refused.stderr.decode()


async def test_sessions_are_let_go_when_the_last_connection_using_them_ends(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    manager = RootedManager(Settings.from_env(), str(root), holder="test server")

    async def connection(session_id: str | None = None) -> tuple[set[str], str]:
        claims = manager.connection()  # in this task's own context, as per WebSocket
        if session_id is None:
            return claims, manager.new(str(root / "work")).session_id
        return claims, manager.load(session_id).session_id

    first, sid = await asyncio.ensure_future(connection())
    second, _ = await asyncio.ensure_future(connection(sid))
    await manager.release(first)
    assert sid in manager.sessions  # the second connection still has it open
    assert manager.store.lock_holder(sid) is not None
    await manager.release(second)
    assert sid not in manager.sessions
    assert manager.store.lock_holder(sid) is None
    with pytest.raises(ValueError, match="root_dir"):
        manager.new(str(tmp_path))
    await manager.close_all()


async def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else() -> None:
    """A server answering the upgrade with a redirect (a hub whose user server is down,
    or a hostile one) does not get the bridge to send the token to another address.
    (tornado's WebSocket client never follows redirects: this guards a change of client.)"""
    from tornado.web import Application, RequestHandler

    from iac_kernel.acp.remote.target import connect

    seen: list[str] = []

    class Elsewhere(RequestHandler):
        def get(self) -> None:
            seen.append(self.request.headers.get("Authorization", ""))

    class Redirect(RequestHandler):
        def get(self) -> None:
            self.redirect(f"http://127.0.0.1:{other_port}/steal", status=302)

    other_port, port = free_port(), free_port()
    other = Application([(r"/steal", Elsewhere)]).listen(other_port, "127.0.0.1")
    first = Application([(r"/iac-kernel/acp", Redirect)]).listen(port, "127.0.0.1")
    try:
        where = target(
            f"ws://127.0.0.1:{port}/iac-kernel/acp", env={"IAC_KERNEL_REMOTE_TOKEN": TOKEN}
        )
        with pytest.raises(RemoteError) as refused:
            await connect(where)
        assert "redirected the connection (302)" in str(refused.value)
        assert not refused.value.final  # a hub's user server may come back: retried
        assert seen == []
    finally:
        first.stop()
        other.stop()
