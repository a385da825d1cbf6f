"""The "IaC Agent" persona in Jupyter AI 3's chat, end to end and headless: a real chat
document, Jupyter AI's persona manager and ACP client, ``iac-kernel acp`` as the agent
(the scripted model). Needs the ``[jupyter-ai]`` extra (``.ci/jupyter-ai`` installs it
in a venv of its own: Jupyter AI's ACP client needs ACP SDK 0.11)."""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip(
    "jupyter_ai_acp_client",
    reason="needs Jupyter AI 3 + jupyter-ai-acp-client (pip install -e '.[jupyter-ai]'; "
    "CI: .ci/jupyter-ai)",
)

from iac_kernel.persona import AVATAR, NAME
from iac_kernel.persona.jupyter_ai import IacAgentPersona
from jupyter_ai_support import SCRIPT, ChatRoom, message_bodies
from test_acp_support import WAIT, acp_server, wait_until

FOUR = ["allow_once", "allow_always", "reject_once", "reject_always"]


@pytest.fixture
async def rooms(tmp_path, monkeypatch):
    """Opens chat rooms (``await rooms()``) and shuts every one down after the test."""
    monkeypatch.setenv("IAC_KERNEL_SCRIPT", str(SCRIPT))
    # Only our persona: the vendored ones (claude, codex, ...) are skipped.
    monkeypatch.setenv("JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY", "1")
    (tmp_path / "root" / "chats").mkdir(parents=True)
    opened: list[ChatRoom] = []

    async def open_room(content: str | None = None) -> ChatRoom:
        room = ChatRoom(tmp_path / "root", content)
        opened.append(room)
        return room

    yield open_room
    for room in opened:
        await room.close()


def test_entry_point_gives_the_persona_with_logo_and_own_agent():
    (point,) = [p for p in entry_points(group="jupyter_ai.personas") if p.name == "iac-agent"]
    assert point.load() is IacAgentPersona
    assert AVATAR.is_file() and AVATAR.name == "logo-svg.svg"
    persona = IacAgentPersona.__new__(IacAgentPersona)
    defaults = IacAgentPersona.defaults.fget(persona)
    assert defaults.name == NAME == "IaC Agent"
    assert Path(defaults.avatar_path) == AVATAR
    assert "Terraform" in defaults.description


def _cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]


async def test_persona_runs_the_agent_of_its_own_environment(rooms):
    room = await rooms()
    assert room.persona.name == "IaC Agent"
    await room.turn("first message")
    await room.wait_text("First answer from the agent.")
    process = await room.persona.get_agent_subprocess()
    cmdline = _cmdline(process.pid)
    assert [part.decode() for part in cmdline] == [sys.executable, "-m", "iac_kernel", "acp"]


async def test_edit_allowed_lands(rooms):
    room = await rooms()
    turn = room.send("write the file")
    call = await room.pending_question()
    assert call["kind"] == "edit"
    assert [o["option_id"] for o in call["permission_options"]] == FOUR
    assert [o["kind"] for o in call["permission_options"]] == FOUR
    assert call["diffs"][0]["new_text"] == "written by the agent\n"
    await room.click(call, "allow_once")
    await turn
    await room.wait_text("Done writing.")
    assert (room.folder / "out.txt").read_text() == "written by the agent\n"
    await wait_until(
        lambda: room.tool_calls()[0].get("status") == "completed", "the edit completed"
    )


async def test_edit_rejected_does_not_land(rooms):
    room = await rooms()
    turn = room.send("write the file")
    call = await room.pending_question()
    await room.click(call, "reject_once")
    await turn
    await room.wait_text("Done writing.")
    assert not (room.folder / "out.txt").exists()
    (final,) = room.tool_calls()
    assert final["status"] == "failed" and final["selected_option_id"] == "reject_once"


async def test_infrastructure_change_asks_every_call_with_once_options_only(rooms):
    room = await rooms()
    turn = room.send("apply the plan")
    call = await room.pending_question()
    assert "terraform apply" in call["title"]
    assert [(o["option_id"], o["kind"]) for o in call["permission_options"]] == [
        ("allow_once", "allow_once"),
        ("reject_once", "reject_once"),
    ]
    await room.click(call, "reject_once")
    await turn
    await room.wait_text("Not applied.")


async def test_stop_during_a_question_cancels_the_question_and_the_turn(rooms):
    room = await rooms()
    turn = room.send("write the file")
    call = await room.pending_question()
    await room.persona.cancel_response()
    await turn
    await wait_until(lambda: not room.persona.processing, "the persona idle")
    (final,) = room.tool_calls()
    assert final["permission_status"] == "resolved" and final["status"] == "failed"
    assert not (room.folder / "out.txt").exists()
    # The agent ended the turn: the next message is answered at once.
    await room.turn("second message")
    await room.wait_text("Second answer from the agent.")
    assert "Done writing." not in room.text()
    assert call["session_id"] == room.session_id()


async def test_stop_during_the_answer_ends_the_turn(rooms):
    room = await rooms()
    turn = room.send("slow answer")
    await room.wait_text("word2 ")
    await room.persona.cancel_response()
    # The script would stream for 40 s more: the turn ends long before, the agent stopped.
    await asyncio.wait_for(turn, WAIT)
    await wait_until(lambda: not room.persona.processing, "the persona idle")
    await room.turn("second message")
    await room.wait_text("Second answer from the agent.")
    assert "THE-END." not in room.text()


async def test_restart_continues_the_session_without_adding_history_twice(rooms):
    room = await rooms()
    await room.turn("first message")
    await room.wait_text("First answer from the agent.")
    session_id = room.session_id()
    saved = room.saved()
    before = message_bodies(saved)
    await room.close()

    # A new server: the chat file's content and the agent's store, nothing else.
    again = await rooms(saved)
    assert message_bodies(again.saved()) == before
    await again.turn("second message")
    await again.wait_text("Second answer from the agent.")
    assert again.session_id() == session_id
    after = message_bodies(again.saved())
    assert after[: len(before)] == before
    added = after[len(before) :]
    assert added[0] == "second message"
    assert sum("First answer from the agent." in body for body in after) == 1
    assert all("first message" != body for body in added)


async def test_chat_sessions_are_listed_for_editors_of_the_chats_folder(rooms, tmp_path):
    room = await rooms()
    await room.turn("first message")
    await room.wait_text("First answer from the agent.")
    session_id, folder = room.session_id(), str(room.folder)
    await room.close()
    async with acp_server(tmp_path) as (conn, _p, _c, _w):
        listed = await conn.list_sessions(cwd=folder)
    (info,) = [s for s in listed.sessions if s.session_id == session_id]
    assert info.title == "first message"


async def test_without_credentials_the_chat_says_how_to_set_them(rooms):
    room = await rooms()
    await room.turn("first message")
    await room.wait_text("First answer from the agent.")
    notices = [b for b in message_bodies(room.saved()) if "no model credentials" in b]
    assert len(notices) == 1 and "`ANTHROPIC_API_KEY`" in notices[0]
    assert "restart JupyterLab" in notices[0]
