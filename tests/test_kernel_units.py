"""Kernel building blocks without a kernel process: coalescing, cards, parsing, policy."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.agent.permissions import (
    ALL_OPTIONS,
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    PER_CALL_OPTIONS,
    REJECT_ALWAYS,
    REJECT_ONCE,
    PermissionRequest,
)
from iac_kernel.config import Settings
from iac_kernel.events import (
    Diff,
    Location,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    Usage,
)
from iac_kernel.kernel import completion
from iac_kernel.kernel.ask.permission_ui import (
    PermissionUI,
    choose_ui,
    parse_stdin_answer,
    policy_answer,
)
from iac_kernel.kernel.ask.widgets import NOTE_BUTTON
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.magics.cell import MagicCall, split_cell
from iac_kernel.kernel.magics.commands import MagicError, Magics
from iac_kernel.kernel.render import cards
from iac_kernel.kernel.render.turn import TurnView
from iac_kernel.kernel.session.state import KernelState, SessionError
from kernel_support import Recorder

SCRIPTS = Path(__file__).parent / "scripts"


# -- tool cards -----------------------------------------------------------------------------


def _card(**kw: Any) -> cards.ToolCard:
    base = {"call_id": "c1", "name": "read_file", "title": "read_file: a", "kind": "read"}
    return cards.ToolCard(session_id="s1", **{**base, **kw})


def test_card_payload_has_exactly_the_agreed_shape() -> None:
    card = _card(input={"path": "a"}, status="done", output="hi", locations=["/w/a"])
    card.diff = Diff("/w/a", None, "new\n")
    card.started_at, card.elapsed = 1000.0, 0.25
    payload = card.bundle()[cards.CARD_MIME]
    assert payload == {
        "version": 1,
        "callId": "c1",
        "name": "read_file",
        "title": "read_file: a",
        "kind": "read",
        "status": "done",
        "input": {"path": "a"},
        "output": "hi",
        "outputTruncated": False,
        "outputNote": None,
        "outputLines": 1,
        "hidden": None,
        "outputHead": None,
        "outputTail": None,
        "live": False,
        "elapsed": 0.2,
        "startedAt": 1000.0,
        "fullOutput": "%output c1",
        "question": None,
        "diff": {"path": "/w/a", "oldText": None, "newText": "new\n"},
        "locations": ["/w/a"],
        "sessionId": "s1",
    }
    assert set(card.bundle()) == {"text/plain", "text/html", cards.CARD_MIME}


def test_card_html_escapes_everything_the_model_or_tool_wrote() -> None:
    evil = "<script>alert(1)</script>"
    card = _card(title=evil, input={"path": evil}, output=evil)
    card.diff = Diff(evil, evil, evil + "2")
    text = card.bundle()["text/html"]
    assert "<script>" not in text
    assert html.escape(evil) in text


def test_long_output_shows_head_and_tail_with_an_honest_note() -> None:
    lines = [f"line {i}" for i in range(1, 4940)]
    card = _card(status="done", output="\n".join(lines) + "\n")
    payload = card.payload()
    assert payload["outputTruncated"] is True
    assert payload["outputLines"] == 4939  # a final newline is not a line
    hidden = payload["hidden"]
    assert hidden == {"fromLine": cards.HEAD_LINES + 1, "toLine": 4939 - cards.TAIL_LINES}
    note = f"lines {cards.HEAD_LINES + 1}–4,919 of 4,939 hidden; the agent saw all of it"
    assert payload["outputNote"] == note
    assert payload["outputHead"].splitlines()[-1] == f"line {cards.HEAD_LINES}"
    assert payload["outputTail"].splitlines() == lines[-cards.TAIL_LINES :]
    assert payload["output"].startswith("line 1\n") and payload["output"].endswith("line 4939\n")
    bundle = card.bundle()
    assert note in bundle["text/plain"] and note in bundle["text/html"]
    # Few but huge lines: cut by characters, said in characters.
    wide = _card(status="done", output="x" * 10_000).payload()
    assert wide["outputTruncated"] and wide["hidden"] is None
    assert wide["outputNote"].startswith("5,500 of 10,000 characters hidden")


def test_short_output_is_not_cut() -> None:
    text = "".join(f"{i}\n" for i in range(cards.HEAD_LINES + cards.TAIL_LINES))
    payload = _card(status="done", output=text).payload()
    assert payload["output"] == text and payload["outputTruncated"] is False
    assert payload["outputLines"] == cards.HEAD_LINES + cards.TAIL_LINES


def test_diff_renders_as_unified_diff() -> None:
    card = _card(name="edit_file", kind="edit", status="done")
    card.diff = Diff("/w/main.tf", "a = 1\nb = 2\n", "a = 1\nb = 3\n")
    plain = card.bundle()["text/plain"]
    assert "--- a/w/main.tf" in plain and "+++ b/w/main.tf" in plain
    assert "-b = 2" in plain and "+b = 3" in plain
    assert "iac-diff" in card.bundle()["text/html"]


def test_secrets_in_inputs_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "s3cr3t-value-123")
    card = _card(input={"command": "curl -H 'x: s3cr3t-value-123'"})
    bundle = card.bundle()
    assert "s3cr3t-value-123" not in str(bundle)


async def test_turn_view_moves_cards_through_their_statuses() -> None:
    sink = Recorder()
    view = TurnView(Publisher(sink), "s1")
    view.emit(TextDelta("Reading."))
    view.emit(ToolCallStarted("c1", "read_file", "read_file", "read"))
    view.emit(ToolCallInput("c1", "read_file", "read_file: a", "read", {}, [Location("/a", 1)]))
    view.emit(ToolCallResult("c1", "read_file", "completed", "text"))
    view.emit(ToolCallStarted("c2", "write_file", "write_file", "edit"))
    view.emit(ToolCallResult("c2", "write_file", "failed", "Permission denied.", denied=True))
    view.emit(ToolCallStarted("c3", "bash", "bash", "execute"))
    view.emit(ToolCallResult("c3", "bash", "failed", "Cancelled."))
    view.emit(TextDelta("Done."))
    view.emit(TurnEnded("end_turn", Usage()))
    statuses = {}
    for _msg_type, content in sink.sent:
        payload = content["data"].get(cards.CARD_MIME)
        if payload:
            statuses.setdefault(payload["callId"], []).append(payload["status"])
    assert statuses["c1"] == ["running", "running", "done"]
    assert statuses["c2"][-1] == "denied"
    assert statuses["c3"][-1] == "cancelled"
    assert view.text == "Reading.\n\nDone."


async def test_stop_reasons_other_than_end_turn_leave_a_note() -> None:
    sink = Recorder()
    view = TurnView(Publisher(sink), "s1")
    view.emit(ThinkingDelta("hmm"))
    view.emit(TurnEnded("max_tokens", Usage()))
    notes = [c["data"]["text/markdown"] for t, c in sink.sent if "transient" not in c]
    assert any("max_tokens" in n for n in notes)


# -- magics parsing -------------------------------------------------------------------------


def test_split_cell_separates_magics_from_the_prompt() -> None:
    magics, prompt = split_cell("%mode read_only\nReview main.tf\n  %model scripted\n")
    assert [(m.name, m.args) for m in magics] == [("mode", "read_only"), ("model", "scripted")]
    assert prompt == "Review main.tf"


def test_fenced_code_and_escapes_stay_in_the_prompt() -> None:
    code = "Explain:\n```\n%load something\n```\n%%timeit is a magic\n50% of hosts"
    magics, prompt = split_cell(code)
    assert magics == []
    assert "%load something" in prompt
    assert "%timeit is a magic" in prompt
    assert "50% of hosts" in prompt


def test_a_cell_of_only_magics_has_no_prompt() -> None:
    magics, prompt = split_cell("%help\n\n%session")
    assert len(magics) == 2 and prompt == ""


# -- completion -------------------------------------------------------------------------------


@pytest.fixture
def state(workspace: Path) -> KernelState:
    return KernelState(Settings.from_env(), str(workspace))


def test_complete_magic_names_and_arguments(state: KernelState) -> None:
    reply = completion.complete("%se", 3, state)
    assert set(reply["matches"]) == {"%session", "%sessions"}
    assert (reply["cursor_start"], reply["cursor_end"]) == (0, 3)
    reply = completion.complete("%mode re", 8, state)
    assert reply["matches"] == ["read_only"] and reply["cursor_start"] == 6
    reply = completion.complete("%config headless_policy a", 25, state)
    assert reply["matches"] == ["allow"]
    assert completion.complete("plain prompt", 5, state)["matches"] == []


def test_complete_session_ids(state: KernelState) -> None:
    session_id = state.session().session_id
    reply = completion.complete("%load " + session_id[:3], 9, state)
    assert reply["matches"] == [session_id]


def test_is_complete_rules() -> None:
    assert completion.is_complete("Review the module")["status"] == "complete"
    assert completion.is_complete("")["status"] == "complete"
    assert completion.is_complete("first line \\")["status"] == "incomplete"
    assert completion.is_complete("Look:\n```hcl\nresource {")["status"] == "incomplete"
    assert completion.is_complete("Look:\n```hcl\nx\n```")["status"] == "complete"
    assert completion.is_complete("%nosuchmagic")["status"] == "invalid"


def test_inspect_shows_the_magic_help() -> None:
    reply = completion.inspect("%fork", 3)
    assert reply["found"] and "%fork" in reply["data"]["text/plain"]
    assert completion.inspect("hello", 2)["found"] is False


# -- permission UI ------------------------------------------------------------------------------


def test_choose_ui_by_stdin_and_settings() -> None:
    assert choose_ui("auto", False, "deny") == "policy"
    assert choose_ui("auto", False, "stdin") == "policy"
    assert choose_ui("auto", True, "deny") == "widgets"
    assert choose_ui("auto", True, "stdin") == "stdin"
    assert choose_ui("policy", True, "deny") == "policy"
    assert choose_ui("widgets", False, "deny") == "widgets"
    assert choose_ui("stdin", False, "deny") == "policy"


def _request(options: list[str], danger: bool | None = None) -> PermissionRequest:
    request = PermissionRequest(
        "c1", "write_file", "write_file: a", "edit", {}, options, "It changes files."
    )
    request.danger = options == PER_CALL_OPTIONS if danger is None else danger
    return request


def test_policy_answers() -> None:
    answer, note = policy_answer("deny", _request(ALL_OPTIONS), False)
    assert answer == REJECT_ONCE and "Denied by policy" in note
    answer, note = policy_answer("allow", _request(ALL_OPTIONS), False)
    assert answer == ALLOW_ONCE and "Allowed" in note
    # Per-call approvals (terraform apply and the like) are never given by a policy.
    answer, note = policy_answer("allow", _request(PER_CALL_OPTIONS), False)
    assert answer == REJECT_ONCE and "per-call" in note
    answer, note = policy_answer("stdin", _request(ALL_OPTIONS), False)
    assert answer == REJECT_ONCE and "stdin" in note
    # A compound command offered without "always" is not destructive: policy allow approves.
    answer, note = policy_answer("allow", _request(PER_CALL_OPTIONS, danger=False), False)
    assert answer == ALLOW_ONCE and "Allowed by policy" in note


def test_parse_stdin_answers() -> None:
    assert parse_stdin_answer("1", ALL_OPTIONS) == ALLOW_ONCE
    assert parse_stdin_answer(" 4 ", ALL_OPTIONS) == REJECT_ALWAYS
    assert parse_stdin_answer("y", ALL_OPTIONS) == ALLOW_ONCE
    assert parse_stdin_answer("No", ALL_OPTIONS) == REJECT_ONCE
    assert parse_stdin_answer("allow always", ALL_OPTIONS) == ALLOW_ALWAYS
    assert parse_stdin_answer("allow_always", PER_CALL_OPTIONS) is None
    assert parse_stdin_answer("3", PER_CALL_OPTIONS) is None
    assert parse_stdin_answer("maybe", ALL_OPTIONS) is None


async def test_unrecognised_stdin_answer_rejects_and_says_so() -> None:
    sink = Recorder()

    async def ask_stdin(_prompt: str) -> str:
        return "perhaps"

    ui = PermissionUI(
        Publisher(sink), ui="auto", allow_stdin=True, policy=lambda: "stdin", ask_stdin=ask_stdin
    )
    assert await ui.ask(_request(ALL_OPTIONS)) == REJECT_ONCE
    assert any("not one of the options" in c["data"]["text/markdown"] for _, c in sink.sent)


# -- magics in process ---------------------------------------------------------------------------


async def test_magics_do_not_create_a_session_until_needed(state: KernelState) -> None:
    magics = Magics(state)
    await magics.run(MagicCall("mode", "accept_edits", 1))
    await magics.run(MagicCall("config", "max_tokens 1234", 1))
    assert state.current is None and state.sessions() == []
    session = state.session()
    assert session.mode == "accept_edits" and session.settings.max_tokens == 1234


async def test_magic_errors_are_readable(state: KernelState) -> None:
    magics = Magics(state)
    with pytest.raises(MagicError, match="Did you mean %session"):
        await magics.run(MagicCall("sesion", "", 1))
    with pytest.raises(MagicError, match="unknown setting"):
        await magics.run(MagicCall("config", "no_such_key 1", 1))
    with pytest.raises(MagicError, match="is not valid"):
        await magics.run(MagicCall("config", "max_tokens lots", 1))
    with pytest.raises(MagicError, match="no session matches"):
        await magics.run(MagicCall("load", "00000000", 1))


async def test_state_resolves_prefixes_and_refuses_ambiguity(state: KernelState) -> None:
    first = state.session().session_id
    with pytest.raises(SessionError, match="too short"):
        state.resolve(first[:2])
    assert state.resolve(first[:8]) == first
    await state.close()


async def test_a_click_on_another_thread_resolves_the_wait() -> None:
    import asyncio
    import threading

    from iac_kernel.kernel.ask.widgets import WidgetPrompt

    prompt = WidgetPrompt(_request(ALL_OPTIONS), asyncio.get_running_loop())
    labels = [b.description for b in prompt.buttons]
    assert labels == [
        "Allow once",
        "Always allow edits in this folder",
        "Reject once",
        "Always reject edits in this folder",
        NOTE_BUTTON,
    ]
    assert not prompt.danger
    thread = threading.Thread(target=prompt.buttons[2].click)  # as a subshell would
    thread.start()
    thread.join()
    assert await asyncio.wait_for(prompt.wait(), 10) == REJECT_ONCE
    prompt.close()


async def test_loading_a_session_held_elsewhere_is_a_readable_error(
    state: KernelState,
) -> None:
    from iac_kernel.agent.manager import SessionManager

    editor = SessionManager(state.settings, holder="an ACP editor")
    held = editor.new(state.cwd)
    with pytest.raises(SessionError, match="held by an ACP editor"):
        await state.load(held.session_id)
    await editor.close_all()
    assert (await state.load(held.session_id)).session_id == held.session_id
    await state.close()


async def test_without_widgets_the_policy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    from iac_kernel.kernel.ask import permission_ui

    def broken(*_args: Any) -> None:
        raise RuntimeError("no comm manager")

    monkeypatch.setattr(permission_ui, "WidgetPrompt", broken)

    async def never(_prompt: str) -> str:
        raise AssertionError("stdin must not be used for the widgets UI")

    sink = Recorder()
    ui = PermissionUI(
        Publisher(sink), ui="auto", allow_stdin=True, policy=lambda: "deny", ask_stdin=never
    )
    assert await ui.ask(_request(ALL_OPTIONS)) == REJECT_ONCE
    assert any("buttons are unavailable" in c["data"]["text/markdown"] for _, c in sink.sent)


def test_a_card_the_user_rejected_says_rejected_one_a_rule_refused_says_denied() -> None:
    from iac_kernel.kernel.render.cards import ToolCard, render_html, render_plain

    card = ToolCard("c1", "bash", "bash: terraform apply tfplan", "execute", "s1", "denied")
    card.question = {"id": "q", "state": "answered", "answer": "reject_once", "danger": True}
    assert render_plain(card).startswith("[rejected] bash: terraform apply tfplan")
    assert "⛔ rejected" in render_html(card) and "failed" not in render_html(card)
    card.question = None
    assert render_plain(card).startswith("[denied] ")
