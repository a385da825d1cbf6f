"""Session lifecycle over a real ACP client: new, load (with replay), resume, fork,
close, list paging, and load after the server was killed mid-turn."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from acp import RequestError, text_block

from iac_kernel.sessions.store import INTERRUPTED_RESULT, SessionStore
from test_acp_support import RecordingClient, acp_server, wait_until


def store() -> SessionStore:
    return SessionStore(os.environ["IAC_KERNEL_SESSIONS_DIR"])


async def test_new_session_needs_an_absolute_existing_cwd(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        for cwd in ("relative/dir", str(workspace / "missing")):
            with pytest.raises(RequestError) as bad:
                await conn.new_session(cwd=cwd)
            assert bad.value.code == -32602 and "cwd" in bad.value.data
        session = await conn.new_session(cwd=str(workspace))
    assert store().read_meta(session.session_id).cwd == str(workspace)


async def test_load_replays_the_history_before_answering(tmp_path, workspace):
    (workspace / "main.tf").write_text('resource "null_resource" "x" {}\n')
    client = RecordingClient()
    client.answers.append("reject_once")
    async with acp_server(tmp_path, client) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        for prompt in ("hello", "read the file", "write the file"):
            await conn.prompt(session_id=sid, prompt=[text_block(prompt)])
        read_id, write_id = client.tool_ids(sid)

    replay = RecordingClient()
    async with acp_server(tmp_path, replay) as (conn, _p, _c, wire):
        loaded = await conn.load_session(cwd=str(workspace), session_id=sid)
        assert loaded.modes.current_mode_id == "default"
        assert {o.id for o in loaded.config_options} >= {"model", "mode", "max_tokens"}
        await wait_until(lambda: replay.of(sid, "session_info_update"), "the title")

    answer_at = wire.index_of_answer(lambda m: "modes" in m.get("result", {}))
    kinds = [(i, u["sessionUpdate"]) for i, u in wire.updates_of(sid)]
    replayed = [k for i, k in kinds if i < answer_at]
    # Nothing of the load follows its answer: the title and commands come before it.
    assert [k for i, k in kinds if i > answer_at] == []
    assert replayed[-2:] == ["session_info_update", "available_commands_update"]
    assert replayed.count("user_message_chunk") == 3
    assert [u.content.text for u in replay.of(sid, "user_message_chunk")] == [
        "hello",
        "read the file",
        "write the file",
    ]
    assert replay.text(sid, "agent_thought_chunk") == "The user greets me."
    assert replay.text(sid).startswith("Hello from the script.")
    assert replay.tool_ids(sid) == [read_id, write_id]
    assert replay.final_status(sid, read_id) == "completed"
    assert replay.final_status(sid, write_id) == "failed"
    # A call whose result follows it is replayed as one tool_call in its final state.
    (read_input,) = replay.tool_updates(sid, read_id)
    assert read_input.session_update == "tool_call" and read_input.status == "completed"
    assert read_input.title == "read_file: main.tf"
    assert read_input.raw_input == {"path": "main.tf"}
    assert [loc.path for loc in read_input.locations] == [str(workspace / "main.tf")]
    title = replay.of(sid, "session_info_update")[0]
    assert title.title == "hello"


async def test_load_after_the_server_was_killed_mid_turn(tmp_path, workspace):
    client = RecordingClient()
    client.answers.append("hold")
    async with acp_server(tmp_path, client) as (conn, process, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        turn = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[text_block("write the file")])
        )
        await wait_until(lambda: client.held is not None, "the permission request")
        (call_id,) = client.tool_ids(sid)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        with pytest.raises(Exception):  # noqa: B017 - the connection dies with the server
            await asyncio.wait_for(turn, 20)

    replay = RecordingClient()
    async with acp_server(tmp_path, replay) as (conn, _p, _c, _w):
        await conn.load_session(cwd=str(workspace), session_id=sid)
        final = replay.tool_updates(sid, call_id)[-1]
        assert final.status == "failed"
        assert final.content[0].content.text == INTERRUPTED_RESULT
        # The repaired history is valid for the model: the next turn works.
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello again")])
        assert answer.stop_reason == "end_turn"
    assert not (workspace / "out.txt").exists()


async def test_two_concurrent_loads_share_one_runtime(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        await conn.close_session(session_id=sid)
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        first, second = await asyncio.gather(
            conn.load_session(cwd=str(workspace), session_id=sid),
            conn.load_session(cwd=str(workspace), session_id=sid),
        )
        # A second runtime would have failed to take the session's lock.
        assert first.modes.current_mode_id == second.modes.current_mode_id == "default"
        assert len(client.of(sid, "user_message_chunk")) == 2
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert answer.stop_reason == "end_turn"
    assert [m["role"] for m in store().read(sid).messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_load_of_a_session_held_by_another_server_is_refused(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        async with acp_server(tmp_path) as (other, _p2, _c2, _w2):
            with pytest.raises(RequestError) as held:
                await other.load_session(cwd=str(workspace), session_id=sid)
            assert held.value.code == -32602
            assert "in use" in held.value.data["session_id"]


async def test_resume_continues_without_replay(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
    async with acp_server(tmp_path) as (conn, _p, client, _w):
        resumed = await conn.resume_session(cwd=str(workspace), session_id=sid)
        assert resumed.modes.current_mode_id == "default"
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert answer.stop_reason == "end_turn"
        assert client.of(sid, "user_message_chunk") == []
    assert len(store().read(sid).messages) == 4


async def test_fork_is_an_independent_branch(tmp_path, workspace):
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        fork = await conn.fork_session(session_id=sid, cwd=str(workspace))
        fid = fork.session_id
        assert fid != sid and fork.modes.current_mode_id == "default"
        await conn.prompt(session_id=fid, prompt=[text_block("refuse")])
        await conn.prompt(session_id=sid, prompt=[text_block("cut off")])
        with pytest.raises(RequestError) as missing:
            await conn.fork_session(session_id="not-a-session", cwd=str(workspace))
        assert missing.value.data == {"session_id": "Session not found"}

    def prompts(session_id: str) -> list[str]:
        return [
            m["content"][0]["text"]
            for m in store().read(session_id).messages
            if m["role"] == "user"
        ]

    assert prompts(sid) == ["hello", "cut off"]
    assert prompts(fid) == ["hello", "refuse"]
    assert store().read_meta(fid).forked_from == sid


async def test_list_filters_by_exact_cwd_and_pages(tmp_path, workspace):
    other = workspace / "sub"
    other.mkdir()
    made = {store().create(str(workspace), title=f"session {i}").session_id for i in range(120)}
    store().create(str(other), title="elsewhere")
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await conn.list_sessions(cwd=str(workspace), cursor=cursor)
            pages += 1
            assert len(page.sessions) <= 50
            for info in page.sessions:
                assert info.cwd == str(workspace)
                assert info.title.startswith("session ") and info.updated_at
            seen += [info.session_id for info in page.sessions]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert len(seen) == len(set(seen)) == 120 and set(seen) == made
        elsewhere = await conn.list_sessions(cwd=str(other))
        assert [s.title for s in elsewhere.sessions] == ["elsewhere"]
        assert len((await conn.list_sessions()).sessions) == 50
        with pytest.raises(RequestError) as bad:
            await conn.list_sessions(cwd=str(workspace), cursor="!!not-a-cursor")
        assert bad.value.code == -32602 and "cursor" in bad.value.data


async def test_unknown_session_ids_are_invalid_params(tmp_path, workspace):
    not_found = {"session_id": "Session not found"}
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        calls = [
            conn.prompt(session_id="nope", prompt=[text_block("hello")]),
            conn.load_session(cwd=str(workspace), session_id="nope"),
            conn.load_session(
                cwd=str(workspace), session_id="6f1c9a52-0000-4000-8000-000000000000"
            ),
            conn.resume_session(cwd=str(workspace), session_id="nope"),
            conn.close_session(session_id="nope"),
            conn.set_session_mode(session_id="nope", mode_id="default"),
        ]
        for call in calls:
            with pytest.raises(RequestError) as error:
                await call
            assert (error.value.code, error.value.data) == (-32602, not_found)
        await conn.cancel(session_id="nope")  # a notification: ignored, no crash
        assert (await conn.new_session(cwd=str(workspace))).session_id
