"""``session/load`` sends the lines kept from an earlier load (``iac_kernel/acp/
history_cache.py``) only when they are what a replay would send now: the same bytes as
a whole replay, the messages written since replayed after them, and a whole replay
again for anything that changes what a replay shows (a value learned, the log edited or
repaired, another home or code), a cache that is torn or linked, or a client that left.

Loads run in-process over a real pipe (the lines go out from a thread while the log is
read) and over a writer without a descriptor (a WebSocket's: one frame per line)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from iac_kernel.acp import replay_key
from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.history_cache import KeptReplay, send_history
from iac_kernel.acp.keep import keep_replay
from iac_kernel.acp.stdio import open_writer
from iac_kernel.acp.transport import LineTransport
from iac_kernel.config import Settings
from iac_kernel.redact import secret_values
from iac_kernel.sessions.manager import SessionManager
from iac_kernel.sessions.store import SessionStore
from iac_kernel.sessions.writer import SessionWriter
from iac_kernel.terraform.workspace import sensitive_values
from test_acp_support import RawServer, server_env

#: A word in every stored result: tests change it in the kept lines (same length) to
#: see whether a load sent them.
MARKER = "kept-marker-word"
FORGED = "FORGED-marker-wd"
SECRET = "Learned-Secret-Value-8812"


def _store() -> SessionStore:
    return SessionStore(Path(os.environ["IAC_KERNEL_SESSIONS_DIR"]))


def _append_turns(
    sid: str, workspace: Path, first: int, count: int, writer: SessionWriter | None = None
) -> None:
    """``count`` exchanges (prompt, answer with a tool call, its result), stored as the
    agent stores them (by ``writer``, a live session's, or a writer of their own)."""
    masked_with = frozenset(secret_values()) | sensitive_values(workspace)
    own = writer is None
    writer = writer or _store().open_writer(sid, "test")
    try:
        for i in range(first, first + count):
            call = f"call-{i}"
            use = {
                "type": "tool_use",
                "id": call,
                "name": "read_file",
                "input": {"path": f"m{i}.tf"},
            }
            text = {"type": "text", "text": f"answer {i}"}
            writer.append_message({"role": "user", "content": [{"type": "text", "text": f"q{i}"}]})
            writer.append_message({"role": "assistant", "content": [text, use]})
            output = f"result {i} {MARKER} {SECRET if i == 1 else 'plain'}"
            block = {"type": "tool_result", "tool_use_id": call, "content": output}
            writer.append_tool_result(block, name="read_file", masked_with=masked_with)
    finally:
        if own:
            writer.close()


def _session(workspace: Path, turns: int = 4) -> str:
    meta = _store().create(str(workspace), title="kept")
    _append_turns(meta.session_id, workspace, 0, turns)
    return meta.session_id


class _FrameWriter:
    """A writer with no descriptor (as a WebSocket link is); ``on_drain`` runs at its
    first wait."""

    def __init__(self, on_drain: Callable[[], None] | None = None) -> None:
        self.data = bytearray()
        self.on_drain = on_drain

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        if self.on_drain is not None:
            self.on_drain, run = None, self.on_drain
            run()

    def close(self) -> None:
        return None


async def _load(
    sid: str, kind: str = "pipe", *, read_bytes: int | None = None, meanwhile: bool = False
) -> bytes:
    """What one ``session/load`` sends (as ``iac_kernel/acp/agent.py`` does it), then
    an answer; ``read_bytes``: the client reads that much, then closes its end;
    ``meanwhile``: a notification is sent while the kept lines go out."""
    manager = SessionManager(Settings(), holder="test")
    got = bytearray()
    if kind == "pipe":
        read_end, write_end = os.pipe()
        if read_bytes == 0:  # a client that is gone before the load
            os.close(read_end)
        writer = await open_writer(write_end)

        def drain_pipe() -> None:
            if read_bytes == 0:
                return
            while chunk := os.read(read_end, 1 << 16):
                got.extend(chunk)
                if read_bytes is not None and len(got) >= read_bytes:
                    break
            os.close(read_end)

        reader = threading.Thread(target=drain_pipe)
        reader.start()
    else:
        writer = _FrameWriter()
    channel = ClientChannel(None, LineTransport(asyncio.StreamReader(), writer))  # type: ignore[arg-type]
    try:
        async with KeptReplay(channel) as kept:
            session = manager.load(sid, kept.on_lock)
            if meanwhile:
                note = {"jsonrpc": "2.0", "method": "x/other", "params": {"n": 1}}
                await channel.transport.send(note)  # type: ignore[union-attr]
            await send_history(channel, session, kept)
            assert channel.gone == (read_bytes is not None)
            if not channel.gone:
                await channel.transport.send({"jsonrpc": "2.0", "id": 9, "result": {}})  # type: ignore[union-attr]
                channel.transport.flush()  # type: ignore[union-attr]
    finally:
        await manager.close_all()
        if kind == "pipe":
            writer.close()
            await asyncio.to_thread(reader.join)
    return bytes(got) if kind == "pipe" else bytes(writer.data)  # type: ignore[attr-defined]


async def _whole(sid: str) -> bytes:
    """A whole replay (nothing kept before or after)."""
    _store().replay_cache(sid).drop()
    sent = await _load(sid, "frames")
    _store().replay_cache(sid).drop()
    return sent


def _forge(sid: str) -> None:
    """Change the marker word in the kept lines (same length: the head still holds)."""
    path = _store().root / f"{sid}.replay"
    data = path.read_bytes()
    assert MARKER.encode() in data
    path.write_bytes(data.replace(MARKER.encode(), FORGED.encode()))


def _updates(sent: bytes) -> list[dict]:
    messages = [json.loads(line) for line in sent.splitlines()]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 9, "result": {}}  # the answer: last
    return messages[:-1]


@pytest.mark.parametrize("kind", ["pipe", "frames"])
async def test_a_second_load_sends_the_kept_lines_which_are_a_whole_replay(workspace, kind):
    sid = _session(workspace)
    whole = await _whole(sid)
    assert len(_updates(whole)) == 12  # prompt, answer, call per exchange
    first = await _load(sid, kind)
    assert first == whole
    assert (_store().root / f"{sid}.replay").stat().st_mode & 0o777 == 0o600
    assert await _load(sid, kind) == whole
    _forge(sid)
    assert await _load(sid, kind) == whole.replace(MARKER.encode(), FORGED.encode())


@pytest.mark.parametrize("kind", ["pipe", "frames"])
async def test_messages_written_since_are_replayed_after_the_kept_lines(workspace, kind):
    sid = _session(workspace)
    kept = await _load(sid, kind)
    _forge(sid)
    _append_turns(sid, workspace, 4, 2)
    sent = await _load(sid, kind)
    again = await _load(sid, kind)  # the new lines were kept after the old ones
    whole = await _whole(sid)
    answer = len(b'{"jsonrpc":"2.0","id":9,"result":{}}\n')
    prefix = len(kept) - answer
    assert sent[:prefix] == kept[:prefix].replace(MARKER.encode(), FORGED.encode())
    assert sent[prefix:] == whole[prefix:]
    assert len(_updates(sent)) == 18
    assert again == sent


def _learn_secret(monkeypatch, workspace: Path, sid: str) -> None:
    monkeypatch.setenv("DEPLOY_API_TOKEN", SECRET)


def _sensitive_state(monkeypatch, workspace: Path, sid: str) -> None:
    output = {"value": SECRET, "type": "string", "sensitive": True}
    state = {"version": 4, "serial": 1, "lineage": "l", "resources": [], "outputs": {"p": output}}
    (workspace / "terraform.tfstate").write_text(json.dumps(state))


def _edit_log_end(monkeypatch, workspace: Path, sid: str) -> None:
    path = _store().root / f"{sid}.jsonl"
    data = path.read_bytes()
    at = data.rindex(b"plain")
    path.write_bytes(data[:at] + b"PLAIN" + data[at + 5 :])  # same size, same inode


def _torn_log(monkeypatch, workspace: Path, sid: str) -> None:
    with (_store().root / f"{sid}.jsonl").open("ab") as log:
        log.write(b'{"type": "message", "ts": "x", "mess')  # a crash's torn line


def _other_home(monkeypatch, workspace: Path, sid: str) -> None:
    monkeypatch.setenv("HOME", str(workspace))


def _other_code(monkeypatch, workspace: Path, sid: str) -> None:
    monkeypatch.setattr(replay_key, "code_version", lambda: "another-version")


def _truncated_lines(monkeypatch, workspace: Path, sid: str) -> None:
    path = _store().root / f"{sid}.replay"
    path.write_bytes(path.read_bytes()[:-40])


def _torn_last_line(monkeypatch, workspace: Path, sid: str) -> None:
    path = _store().root / f"{sid}.replay"
    path.write_bytes(path.read_bytes()[:-1] + b" ")  # same length, no newline at its end


def _bad_head_types(monkeypatch, workspace: Path, sid: str) -> None:
    head = _store().root / f"{sid}.replay-head"
    data = json.loads(head.read_bytes())
    data["log"]["size"] = str(data["log"]["size"])
    data["fields"]["numbering"]["index"] = "7"
    head.write_text(json.dumps(data))


def _forged_head_link(monkeypatch, workspace: Path, sid: str) -> None:
    head = _store().root / f"{sid}.replay-head"
    outside = workspace / "head.json"
    outside.write_bytes(head.read_bytes())
    head.unlink()
    head.symlink_to(outside)


def _hard_linked_lines(monkeypatch, workspace: Path, sid: str) -> None:
    lines = _store().root / f"{sid}.replay"
    os.link(lines, workspace / "lines-copy")


CHANGES = [
    _learn_secret,
    _sensitive_state,
    _edit_log_end,
    _other_home,
    _other_code,
    _truncated_lines,
    _torn_last_line,
    _bad_head_types,
    _forged_head_link,
    _hard_linked_lines,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("kind", ["pipe", "frames"])
async def test_a_change_the_kept_lines_do_not_show_means_a_whole_replay(
    workspace, monkeypatch, change, kind
):
    sid = _session(workspace)
    await _load(sid, kind)
    _forge(sid)
    change(monkeypatch, workspace, sid)
    outside = {p: p.read_bytes() for p in workspace.iterdir() if p.suffix != ".tfstate"}
    sent = await _load(sid, kind)
    whole = await _whole(sid)
    assert sent == whole
    assert FORGED.encode() not in sent
    if change in (_learn_secret, _sensitive_state):
        assert SECRET.encode() not in sent  # masked again, as a whole replay does
    for path, data in outside.items():  # a link's target is never written
        assert path.read_bytes() == data


@pytest.mark.parametrize("kind", ["pipe", "frames"])
async def test_a_log_repaired_after_a_crash_is_replayed_as_it_now_reads(workspace, kind):
    """A torn last line (a crash mid-write) is dropped by the load's repair, which
    rewrites the log: the kept lines replay its first bytes, which the new file starts
    with, so they are kept for it."""
    sid = _session(workspace)
    await _load(sid, kind)
    _forge(sid)
    _torn_log(None, workspace, sid)
    sent = await _load(sid, kind)
    assert FORGED.encode() in sent
    assert await _load(sid, kind) == sent
    whole = await _whole(sid)
    assert sent.replace(FORGED.encode(), MARKER.encode()) == whole


async def test_a_repair_that_changes_what_the_kept_lines_replay_drops_them(workspace):
    """A log re-encoded by its repair (another writer's spacing) no longer starts with
    the bytes the kept lines replay: they are dropped, the load is a whole replay."""
    sid = _session(workspace)
    await _load(sid, "frames")
    _forge(sid)
    log = _store().root / f"{sid}.jsonl"
    respaced = [
        json.dumps(json.loads(line), indent=None, separators=(", ", ": "))
        for line in log.read_text().splitlines()
    ]
    log.write_text("\n".join(respaced) + "\n")
    _torn_log(None, workspace, sid)
    assert await _load(sid, "frames") == await _whole(sid)


async def test_a_client_that_is_gone_harms_nothing(workspace):
    sid = _session(workspace)
    whole = await _whole(sid)
    await _load(sid, "pipe")  # kept
    _forge(sid)
    assert await _load(sid, "pipe", read_bytes=0) == b""  # no reader: EPIPE
    _append_turns(sid, workspace, 4, 1)
    assert await _load(sid, "pipe", read_bytes=0) == b""  # nothing kept meanwhile
    sent = await _load(sid, "pipe")
    assert sent.startswith(
        whole[: whole.rindex(b"\n", 0, -1) + 1].replace(MARKER.encode(), FORGED.encode())
    )
    assert len(_updates(sent)) == 15


async def test_a_live_session_with_new_records_is_replayed_whole_and_not_kept(workspace):
    sid = _session(workspace)
    manager = SessionManager(Settings(), holder="test")
    session = manager.load(sid)
    session.writer.append_message({"role": "user", "content": [{"type": "text", "text": "new"}]})
    session.conversation.messages.append({"role": "user", "content": "new"})
    writer = _FrameWriter()
    channel = ClientChannel(None, LineTransport(asyncio.StreamReader(), writer))  # type: ignore[arg-type]
    await send_history(channel, session)
    channel.transport.flush()  # type: ignore[union-attr]
    await manager.close_all()
    assert not (_store().root / f"{sid}.replay-head").exists()
    assert b'"text":"new"' in bytes(writer.data)


async def test_messages_sent_while_the_kept_lines_go_out_follow_them_whole(workspace):
    sid = _session(workspace, turns=300)
    whole = await _load(sid, "pipe")
    sent = await _load(sid, "pipe", meanwhile=True)
    messages = [json.loads(line) for line in sent.splitlines()]  # every line whole
    assert messages[-2] == {"jsonrpc": "2.0", "method": "x/other", "params": {"n": 1}}
    assert messages[:-2] == _updates(whole)


async def test_removing_a_session_removes_its_kept_lines(workspace):
    sid = _session(workspace)
    await _load(sid, "pipe")
    root = _store().root
    assert (root / f"{sid}.replay").exists()
    _store().remove(sid)
    assert not list(root.glob(f"{sid}.replay*"))


def _head(sid: str) -> dict:
    return json.loads((_store().root / f"{sid}.replay-head").read_bytes())


async def test_a_session_written_live_keeps_its_lines_when_it_closes(workspace):
    manager = SessionManager(Settings(), holder="test", on_settled=keep_replay)
    session = manager.new(str(workspace))
    sid = session.session_id
    _append_turns(sid, workspace, 0, 3, writer=session.writer)
    await manager.close(sid)
    assert _head(sid)["fields"]["messages"] == 9
    _forge(sid)
    sent = await _load(sid, "pipe")  # its first load: the lines kept at close
    assert sent == (await _whole(sid)).replace(MARKER.encode(), FORGED.encode())


async def test_turns_written_since_a_load_are_kept_after_its_lines_at_close(workspace):
    sid = _session(workspace)
    kept = await _load(sid, "pipe")
    _forge(sid)
    manager = SessionManager(Settings(), holder="test", on_settled=keep_replay)
    session = manager.load(sid)
    _append_turns(sid, workspace, 4, 2, writer=session.writer)
    await manager.close(sid)
    assert _head(sid)["fields"]["messages"] == 18
    sent = await _load(sid, "pipe")
    whole = await _whole(sid)
    prefix = kept.rindex(b"\n", 0, -1) + 1  # the updates, without the answer
    assert sent[:prefix] == kept[:prefix].replace(MARKER.encode(), FORGED.encode())
    assert sent[prefix:] == whole[prefix:]


async def test_closing_with_nothing_new_or_after_a_change_keeps_what_a_load_would_send(
    workspace, monkeypatch
):
    sid = _session(workspace)
    await _load(sid, "pipe")
    head = _head(sid)
    manager = SessionManager(Settings(), holder="test", on_settled=keep_replay)
    manager.load(sid)
    await manager.close(sid)
    assert _head(sid) == head  # nothing written
    monkeypatch.setenv("DEPLOY_API_TOKEN", SECRET)
    manager.load(sid)
    await manager.close(sid)
    assert _head(sid)["fields"]["inputs"] != head["fields"]["inputs"]
    kept = (_store().root / f"{sid}.replay").read_bytes()
    assert SECRET.encode() not in kept
    assert await _load(sid, "pipe") == await _whole(sid)


async def test_two_loads_on_one_connection_send_whole_lines_each_in_order(workspace):
    """The second load finds the pipe held by the first's thread: its lines wait and
    follow, whole; each session's updates are its whole replay."""
    first, second = _session(workspace, turns=300), _session(workspace, turns=200)
    wholes = {sid: await _whole(sid) for sid in (first, second)}
    for sid in (first, second):
        await _load(sid, "pipe")  # kept
    manager = SessionManager(Settings(), holder="test")
    read_end, write_end = os.pipe()
    writer = await open_writer(write_end)
    got = bytearray()

    def drain_pipe() -> None:
        while chunk := os.read(read_end, 1 << 16):
            got.extend(chunk)

    reader = threading.Thread(target=drain_pipe)
    reader.start()
    channel = ClientChannel(None, LineTransport(asyncio.StreamReader(), writer))  # type: ignore[arg-type]

    async def load(sid: str) -> None:
        async with KeptReplay(channel) as kept:
            session = manager.load(sid, kept.on_lock)
            await asyncio.sleep(0)
            await send_history(channel, session, kept)

    await asyncio.gather(load(first), load(second))
    channel.transport.flush()  # type: ignore[union-attr]
    await manager.close_all()
    writer.close()
    await asyncio.to_thread(reader.join)
    lines = bytes(got).splitlines(keepends=True)
    for sid in (first, second):
        mine = b"".join(line for line in lines if json.loads(line)["params"]["sessionId"] == sid)
        assert mine == wholes[sid][: wholes[sid].rindex(b"\n", 0, -1) + 1]


async def test_a_turn_during_a_load_is_not_claimed_by_the_kept_lines(workspace):
    """Records written while a load replays (a prompt on the loaded session) are not in
    what it keeps: the next load still shows them."""
    sid = _session(workspace)
    await _load(sid, "frames")
    _append_turns(sid, workspace, 4, 1)  # the load below replays it after the kept lines
    manager = SessionManager(Settings(), holder="test")
    session = manager.load(sid)

    def a_turn() -> None:
        _append_turns(sid, workspace, 5, 1, writer=session.writer)
        session.conversation.messages.append({"role": "user", "content": "q5"})

    channel = ClientChannel(None, LineTransport(asyncio.StreamReader(), _FrameWriter(a_turn)))  # type: ignore[arg-type]
    await send_history(channel, session)
    await manager.close_all()
    assert _head(sid)["fields"]["messages"] == 12  # not the load's: the turn came between
    sent = await _load(sid, "frames")
    assert sent == await _whole(sid)
    assert len(_updates(sent)) == 18


async def test_a_session_keeps_its_lines_after_each_turn(tmp_path, workspace):
    """Over ACP (``iac-kernel acp``, the scripted model): the lines are kept when the
    turn ends, before any load or close."""
    env = server_env()
    async with RawServer.start(env, tmp_path / "agent.log") as server:
        await server.initialize()
        new = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = new["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
        head: dict = {}
        for _ in range(40):  # the first turns may end before the replay code is in
            assert "result" in await server.call("session/prompt", prompt)
            if (_store().root / f"{sid}.replay-head").exists():
                head = _head(sid)
                break
            await asyncio.sleep(0.05)
        assert head["fields"]["messages"] >= 2
        assert (await server.call("session/prompt", prompt))["result"]
        assert _head(sid)["fields"]["messages"] > head["fields"]["messages"]
    _forge_any(sid)  # the agent's own environment is the one the lines were kept with
    sent = await _server_load(env, tmp_path / "kept.log", str(workspace), sid)
    _store().replay_cache(sid).drop()
    whole = await _server_load(env, tmp_path / "whole.log", str(workspace), sid)
    assert b"HELLO" in sent
    assert sent == whole.replace(b"hello", b"HELLO")


async def _server_load(env: dict, log: Path, cwd: str, sid: str) -> bytes:
    """The history lines of a ``session/load`` by ``iac-kernel acp``."""
    async with RawServer.start(env, log) as server:
        await server.initialize()
        params = {"cwd": cwd, "sessionId": sid, "mcpServers": []}
        await server.call("session/load", params)
    after = (b'"session_info_update"', b'"available_commands_update"')  # not history
    updates = [line for line in server.lines if b'"session/update"' in line]
    return b"".join(line for line in updates if not any(kind in line for kind in after))


def _forge_any(sid: str) -> None:
    path = _store().root / f"{sid}.replay"
    data = path.read_bytes()
    assert b"hello" in data
    path.write_bytes(data.replace(b"hello", b"HELLO"))


async def test_two_loads_of_one_session_at_once_keep_one_whole_set_of_lines(workspace):
    """Both replay it; one of them keeps its lines (one writer per session at a time),
    and neither fails."""
    sid = _session(workspace)
    whole = await _whole(sid)
    _append_turns(sid, workspace, 4, 1)
    await _load(sid, "frames")  # kept, then a turn written since: both loads extend
    _append_turns(sid, workspace, 5, 1)
    manager = SessionManager(Settings(), holder="test")
    writer = _FrameWriter()
    channel = ClientChannel(None, LineTransport(asyncio.StreamReader(), writer))  # type: ignore[arg-type]
    session = manager.load(sid)
    await asyncio.gather(send_history(channel, session), send_history(channel, session))
    channel.transport.flush()  # type: ignore[union-attr]
    await manager.close_all()
    updates = _updates(bytes(writer.data) + b'{"jsonrpc":"2.0","id":9,"result":{}}\n')
    assert len(updates) == 2 * 18
    assert await _load(sid, "frames") == await _whole(sid)
    assert len(whole) < len(await _whole(sid))
