"""The turn's displays without a kernel process: text stretches in order, the byte budget,
paragraph splits, live card output, pending questions and the console helpers."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from iac_kernel.agent.permissions import (
    ALL_OPTIONS,
    PER_CALL_OPTIONS,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)
from iac_kernel.events import (
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallOutput,
    ToolCallResult,
    ToolCallStarted,
    TurnEnded,
    Usage,
)
from iac_kernel.kernel import display
from iac_kernel.kernel.cards import CARD_MIME
from iac_kernel.kernel.console import console_cell, tool_output
from iac_kernel.kernel.display import ByteBudget, TextStream, split_point
from iac_kernel.kernel.publish import Publisher
from iac_kernel.kernel.questions import PendingQuestions, Question
from iac_kernel.kernel.turn import CARD_INTERVAL, TurnView
from kernel_support import FakeClock
from kernel_support import Recorder as BaseRecorder


class Recorder(BaseRecorder):
    def bytes(self) -> int:
        """Content bytes plus the per-message overhead the budget assumes."""
        return sum(
            len(json.dumps(c, ensure_ascii=False).encode()) + display.MESSAGE_OVERHEAD
            for _t, c in self.sent
        )

    def ids(self) -> list[str]:
        return [c["transient"]["display_id"] for t, c in self.sent if t == "display_data"]


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"\S+\s*|\s+", text)


LONG = "\n\n".join(f"Paragraph {n}: " + " ".join(f"w{n}x{i}" for i in range(60)) for n in range(60))


def _stream(pace: float) -> tuple[Recorder, TextStream]:
    sink, clock = Recorder(), FakeClock()
    stream = TextStream(
        Publisher(sink), ByteBudget(clock=clock), clock=clock, schedule=clock.schedule
    )
    for word in _words(LONG):
        stream.add(word)
        clock.advance(pace)
    stream.finish()
    return sink, stream


def test_bytes_stay_within_three_times_the_text_at_any_pace() -> None:
    size = len(LONG.encode())
    for pace in (0.0, 0.0005, 0.003, 0.02, 0.2):
        sink, stream = _stream(pace)
        assert stream.whole == LONG
        assert sink.bytes() <= 3 * size, (pace, sink.bytes() / size)
        # Streaming sends are at most one per 0.1 s of fake time.
        streaming = [c for t, c in sink.sent if set(c["data"]) == {"text/markdown"}]
        assert len(streaming) <= len(_words(LONG)) * pace / display.UPDATE_INTERVAL + 2


def test_a_long_stretch_is_split_at_blank_lines_and_plain_is_sent_once() -> None:
    sink, _ = _stream(0.003)
    ids = sink.ids()
    assert len(ids) >= 2 and len(set(ids)) == len(ids)
    finals = {}
    for _t, content in sink.sent:
        if "text/plain" in content["data"]:
            display_id = content["transient"]["display_id"]
            assert display_id not in finals, "text/plain sent twice for one display"
            finals[display_id] = content["data"]["text/plain"]
    assert "\n\n".join(finals[d] for d in ids) == LONG
    # Nothing is sent for a display after its final form.
    for display_id in ids:
        sends = [
            i for i, (_t, c) in enumerate(sink.sent) if c["transient"]["display_id"] == display_id
        ]
        assert "text/plain" in sink.sent[sends[-1]][1]["data"]


def _live(text: str, seconds: float) -> tuple[Recorder, TextStream, list[float]]:
    """``text`` streamed as deltas, word by word over ``seconds`` of fake time; also the
    fake time of every message sent."""
    sink, clock = Recorder(), FakeClock()
    times: list[float] = []

    def send(msg_type: str, content: dict[str, Any]) -> None:
        times.append(clock.now)
        sink(msg_type, content)

    stream = TextStream(
        Publisher(send), ByteBudget.live(), clock=clock, schedule=clock.schedule, deltas=True
    )
    words = _words(text)
    for word in words:
        stream.add(word)
        clock.advance(seconds / len(words))
    stream.finish()
    return sink, stream, times


def _short(size: int) -> str:
    return " ".join(f"w{i}" for i in range(size // 3))[:size]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(LONG, 7.0), (LONG, 0.0), (LONG, 60.0), (_short(700), 5.0), (_short(3000), 30.0)],
    ids=["fast-long", "at-once", "slow-long", "slow-short", "slower-short"],
)
def test_deltas_stay_within_three_times_the_text(text: str, seconds: float) -> None:
    sink, stream, _times = _live(text, seconds)
    assert stream.whole == text
    assert sink.bytes() <= 3 * len(text.encode()) + display.LIVE_ALLOWANCE
    updates = [c["data"][display.DELTA_MIME] for _t, c in sink.sent[:-1]]
    # Each update carries only the new text, at its offset; together they are a prefix.
    joined = ""
    for update in updates:
        assert update["offset"] == len(joined)
        joined += update["text"]
    assert text.startswith(joined)
    final = sink.sent[-1][1]["data"]
    assert final == {"text/markdown": text}, "the last update carries the whole Markdown"
    assert len({c["transient"]["display_id"] for _t, c in sink.sent}) == 1


@pytest.mark.parametrize(
    ("text", "seconds"), [(LONG, 7.0), (_short(700), 5.0)], ids=["fast-long", "slow-short"]
)
def test_deltas_never_stall_a_second_while_the_model_writes(text: str, seconds: float) -> None:
    _sink, _stream, times = _live(text, seconds)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= 1.0, gaps
    if len(text) > 10_000:  # a fast model's text moves every few hundred ms
        assert sum(gaps) / len(gaps) <= 0.3


def test_without_deltas_slow_text_still_moves_regularly() -> None:
    """The plain path spreads its budget over the answer: no burst and then a long stall."""
    text, seconds = _short(700), 5.0
    sink, clock = Recorder(), FakeClock()
    times: list[float] = []

    def send(msg_type: str, content: dict[str, Any]) -> None:
        times.append(clock.now)
        sink(msg_type, content)

    budget = ByteBudget(clock=clock)
    stream = TextStream(Publisher(send), budget, clock=clock, schedule=clock.schedule)
    words = _words(text)
    for word in words:
        stream.add(word)
        clock.advance(seconds / len(words))
    stream.finish()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) >= 4 and max(gaps) <= 1.6, gaps
    assert sink.bytes() <= 3 * len(text.encode()) + display.ALLOWANCE + display.MESSAGE_OVERHEAD


def test_thinking_deltas_say_so() -> None:
    sink, clock = Recorder(), FakeClock()
    stream = TextStream(Publisher(sink), ByteBudget.live(), "thinking", clock=clock, deltas=True)
    stream.add("Let me look.")
    stream.finish()
    assert sink.sent[0][1]["data"][display.DELTA_MIME]["kind"] == "thinking"
    assert "iac-thinking" in sink.sent[-1][1]["data"]["text/markdown"]


def test_status_comms_say_what_they_render() -> None:
    from iac_kernel.kernel.status import StatusChannel

    class Comm:
        def __init__(self) -> None:
            self.sent: list[Any] = []
            self.closers: list[Any] = []

        def send(self, data: Any) -> None:
            self.sent.append(data)

        def on_msg(self, _callback: Any) -> None:
            pass

        def on_close(self, callback: Any) -> None:
            self.closers.append(callback)

    channel = StatusChannel(dict, lambda _c: (None, None), lambda *_a: None)
    old, new = Comm(), Comm()
    channel._opened(old, {"content": {"data": {}}})
    assert not channel.renders(display.DELTA_MIME)
    channel._opened(new, {"content": {"data": {"renders": [display.DELTA_MIME, 3]}}})
    assert channel.renders(display.DELTA_MIME)
    new.closers[0]({})
    assert not channel.renders(display.DELTA_MIME) and channel.comms == [old]


def test_split_point_keeps_code_fences_whole() -> None:
    text = "intro\n\n```\ncode\n\nmore code\n```\n\nafter"
    assert split_point(text, 0) == text.index("after")
    assert split_point("```\na\n\nb\n", 0) is None
    assert split_point("a\n\nb", 10) is None


def _card_payloads(sink: Recorder) -> list[dict[str, Any]]:
    return [c["data"][CARD_MIME] for _t, c in sink.sent if CARD_MIME in c["data"]]


def test_text_after_a_call_is_a_new_display_below_its_card() -> None:
    sink, clock = Recorder(), FakeClock()
    view = TurnView(Publisher(sink), "s1", clock=clock, schedule=clock.schedule)
    view.emit(ThinkingDelta("Let me see."))
    view.emit(TextDelta("Reading the rule first:"))
    view.emit(ToolCallStarted("c1", "read_file", "read_file", "read"))
    view.emit(ToolCallResult("c1", "read_file", "completed", "rule"))
    view.emit(TextDelta("It says hi."))
    view.emit(TurnEnded("end_turn", Usage()))
    kinds = [d.split("-")[1] for d in sink.ids()]
    assert kinds == ["thinking", "text", "tool", "text"]
    text_ids = [d for d in sink.ids() if d.startswith("iac-text-")]
    first_card = next(i for i, (t, c) in enumerate(sink.sent) if CARD_MIME in c["data"])
    late = [i for i, (_t, c) in enumerate(sink.sent) if c["transient"]["display_id"] == text_ids[0]]
    assert max(late) < first_card, "the first text was updated after the card appeared"
    assert view.text == "Reading the rule first:\n\nIt says hi."


def test_live_output_is_coalesced_and_kept_on_interrupt() -> None:
    sink, clock = Recorder(), FakeClock()
    view = TurnView(Publisher(sink), "s1", clock=clock, schedule=clock.schedule)
    view.emit(ToolCallStarted("c1", "bash", "bash", "execute"))
    view.emit(ToolCallInput("c1", "bash", "bash: x", "execute", {"command": "x"}))
    before = len(_card_payloads(sink))
    for i in range(20):
        view.emit(ToolCallOutput("c1", f"tick{i}\n", ""))
        clock.advance(0.05)  # 1 s of output, 20 chunks
    live = _card_payloads(sink)[before:]
    assert 1 <= len(live) <= 1.0 / CARD_INTERVAL + 2
    assert live[0]["live"] is True and live[0]["output"].startswith("tick0")
    view.emit(ToolCallResult("c1", "bash", "failed", "Cancelled."))
    final = _card_payloads(sink)[-1]
    assert final["status"] == "cancelled"
    assert "tick19" in final["output"] and "interrupted" in final["output"]


async def test_pending_questions_answer_once_and_stale_ids_do_nothing() -> None:
    loop = asyncio.get_running_loop()
    questions = PendingQuestions()
    changes: list[int] = []
    questions.listeners.append(lambda: changes.append(len(questions)))
    request = PermissionRequest("c1", "bash", "bash: apply", "execute", {}, PER_CALL_OPTIONS, "x")
    request.danger = True
    future: asyncio.Future[str] = loop.create_future()
    questions.add(Question("q1", request, loop, future, "iac-permission-q1", True))
    assert "not an option" in (questions.answer("q1", "allow_always") or "")
    assert "reject_once only" in (questions.answer("q1", "allow_once", "why") or "")
    assert questions.answer("q1", REJECT_ONCE, "not on Friday") is None
    answer = await asyncio.wait_for(future, 5)
    assert answer == REJECT_ONCE and isinstance(answer, Answer) and answer.note == "not on Friday"
    questions.remove("q1")
    assert "no pending question" in (questions.answer("q1", REJECT_ONCE) or "")
    assert changes == [1, 0]


async def test_danger_buttons_put_reject_first() -> None:
    from iac_kernel.kernel.permission_ui import NOTE_BUTTON, WidgetPrompt

    request = PermissionRequest(
        "c1",
        "bash",
        "bash: terraform apply",
        "execute",
        {"command": "terraform apply"},
        PER_CALL_OPTIONS,
        "This command changes real infrastructure.",
        danger=True,
    )
    prompt = WidgetPrompt(request, asyncio.get_running_loop())
    assert prompt.danger
    assert [b.description for b in prompt.buttons] == ["Reject once", "Allow once", NOTE_BUTTON]
    assert prompt.buttons[0].button_style == "" and prompt.buttons[1].button_style == "danger"
    assert "iac-danger" in prompt.label.value and "terraform apply" in prompt.label.value
    prompt.note.value = "wait for the change window"
    prompt.buttons[-1].click()
    answer = await asyncio.wait_for(prompt.wait(), 5)
    assert answer == REJECT_ONCE and answer.note == "wait for the change window"
    prompt.close()
    routine = WidgetPrompt(
        PermissionRequest("c2", "w", "w", "edit", {}, ALL_OPTIONS, "It changes files."),
        asyncio.get_running_loop(),
    )
    assert not routine.danger and routine.buttons[0].description == "Allow once"
    routine.close()
    # A compound command gets only the once-options, but is not destructive.
    compound = WidgetPrompt(
        PermissionRequest("c3", "bash", "bash: a && b", "execute", {}, PER_CALL_OPTIONS, "x"),
        asyncio.get_running_loop(),
    )
    assert not compound.danger and compound.buttons[0].description == "Allow once"
    compound.close()


def test_console_cells_and_stored_outputs() -> None:
    assert console_cell("%permissions")
    assert console_cell("%output toolu_1\n\n%permissions\n")
    assert not console_cell("%permissions reset")
    assert not console_cell("%output")
    assert not console_cell("%permissions\nplease apply")
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "all of it"}],
        },
    ]
    assert tool_output(messages, "t1") == "all of it"
    assert tool_output(messages, "t2") is None


async def test_help_table_escapes_pipes_in_usages(workspace: Any) -> None:
    import re

    from iac_kernel.config import Settings
    from iac_kernel.kernel.magics import MagicCall, Magics
    from iac_kernel.kernel.state import KernelState

    state = KernelState(Settings.from_env(), str(workspace))
    output = await Magics(state).run(MagicCall("help", "", 1))
    rows = [line for line in output.markdown.splitlines() if line.startswith("| `%")]
    assert any("\\|" in row for row in rows), "a usage with | is in the table"
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 3 for row in rows)


async def test_a_restarted_kernel_does_not_reuse_the_notebook_title(workspace: Any) -> None:
    from iac_kernel.config import Settings
    from iac_kernel.kernel.state import KernelState

    titles = []
    for _run in range(3):  # three kernel starts of one notebook, one store
        state = KernelState(Settings.from_env(), str(workspace), notebook="infra.ipynb")
        titles.append(state.session().title)
        await state.close()
    assert titles == ["infra", "infra (2)", "infra (3)"]


@pytest.fixture
def in_checkout(tmp_path: Any, monkeypatch: Any) -> Any:
    """(checkout, notebooks): a git checkout with the notebook folder as the display base,
    HOME at ``tmp_path/home``."""
    from iac_kernel.kernel import paths

    checkout = tmp_path / "repo"
    notebooks = checkout / "notebooks"
    (checkout / ".git").mkdir(parents=True)
    notebooks.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    paths.set_base(str(notebooks))
    try:
        yield checkout, notebooks
    finally:
        paths.set_base(None)


def test_displayed_paths_are_relative_to_the_notebook(tmp_path: Any, in_checkout: Any) -> None:
    from iac_kernel.kernel import paths

    checkout, notebooks = in_checkout
    assert paths.shown(str(notebooks)) == "."
    assert paths.shown(str(notebooks / "ws" / "main.tf")) == "ws/main.tf"
    assert paths.shown(str(checkout / "README.md")) == "../README.md"
    assert paths.shown(str(tmp_path / "home" / ".local" / "s")) == "~/.local/s"
    assert paths.shown("/elsewhere/x") == "/elsewhere/x"
    assert paths.shown("relative/x") == "relative/x"
    script = f"scripted:{notebooks / 'scripts' / 'a.json'}"
    assert paths.shown_model(script) == "scripted:scripts/a.json"
    card = _card_with(str(notebooks / "ws" / "main.tf"))
    payload = card.payload()
    assert payload["locations"] == ["ws/main.tf"] and payload["diff"]["path"] == "ws/main.tf"
    assert str(notebooks) not in json.dumps(card.bundle())


def _card_with(path: str) -> Any:
    from iac_kernel.events import Diff
    from iac_kernel.kernel.cards import ToolCard

    card = ToolCard("c1", "edit_file", "edit_file: main.tf", "edit", "s1", status="done")
    card.locations = [path]
    card.diff = Diff(path, "a = 1\n", "a = 2\n")
    return card


def test_sanitize_writes_machine_folders_relatively(tmp_path: Any, in_checkout: Any) -> None:
    from iac_kernel.kernel import paths

    checkout, notebooks = in_checkout
    text = f"cd {notebooks} && cat {checkout}/README.md {checkout}2/x {tmp_path}/home/.rc"
    assert paths.sanitize({"a": [text]}) == {"a": [f"cd . && cat ../README.md {checkout}2/x ~/.rc"]}
    sink = Recorder()
    Publisher(sink).stream(f"{notebooks}/ws/main.tf: error\n")
    assert sink.sent[-1][1]["text"] == "./ws/main.tf: error\n"
    paths.set_base(None)  # no base: nothing is rewritten
    assert paths.sanitize(str(notebooks)) == str(notebooks)


def test_a_pending_destructive_question_marks_the_card() -> None:
    from iac_kernel.kernel.cards import ToolCard

    card = ToolCard("c1", "bash", "bash: terraform apply", "execute", "s1")
    card.status = "awaiting_permission"
    card.question = {"id": "q", "state": "pending", "danger": True}
    bundle = card.bundle()
    assert "iac-danger" in bundle["text/html"] and "#cf222e" in bundle["text/html"]
    assert bundle["text/plain"].startswith("[DESTRUCTIVE, asked for permission]")
    card.question = {"id": "q", "state": "pending", "danger": False}
    assert "iac-danger" not in card.bundle()["text/html"]
    card.question = {"id": "q", "state": "answered", "danger": True}
    assert "iac-danger" not in card.bundle()["text/html"]


def test_call_outcome_reads_the_history_of_a_saved_call() -> None:
    from types import SimpleNamespace

    from iac_kernel.kernel.console import history_outcome

    def use(call_id: str) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id}]}

    def result(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        return {"role": "user", "content": [{**block, "is_error": error}]}

    messages = [
        use("ok"),
        result("ok", "fine"),
        use("no"),
        result("no", "Permission denied. not on Friday", True),
        use("bad"),
        result("bad", "exit 1", True),
        use("open"),
    ]
    session = SimpleNamespace(session_id="s1", conversation=SimpleNamespace(messages=messages))

    class Store:
        def read(self, session_id: str) -> Any:
            raise ValueError(f"no session {session_id}")

    state = SimpleNamespace(current=session, manager=SimpleNamespace(store=Store()))
    assert history_outcome(state, "ok", "s1") == "done"
    assert history_outcome(state, "no", "s1") == "denied"
    assert history_outcome(state, "bad", "s1") == "failed"
    assert history_outcome(state, "open", "s1") == "not_run"
    assert history_outcome(state, "never", "s1") is None
    assert history_outcome(state, "ok", "../../etc/passwd") is None


def test_questions_say_what_always_covers_and_name_the_command() -> None:
    from iac_kernel.agent.permissions import ALLOW_ALWAYS, REJECT_ALWAYS
    from iac_kernel.kernel.question_text import button_label, reason_text

    bash = PermissionRequest(
        "c1",
        "bash",
        "bash: terraform plan",
        "execute",
        {"command": "terraform plan -out tfplan"},
        ALL_OPTIONS,
        "It runs a command or a sub-agent.",
    )
    bash.labels[ALLOW_ALWAYS] = "Allow always: `terraform plan`"
    bash.labels[REJECT_ALWAYS] = "Reject always: `terraform plan`"
    assert button_label(bash, ALLOW_ALWAYS) == "Always allow `terraform plan` …"
    assert button_label(bash, REJECT_ALWAYS) == "Always reject `terraform plan` …"
    assert reason_text(bash) == "It runs `terraform plan -out tfplan` in this folder."
    edit = PermissionRequest(
        "c2", "write_file", "w", "edit", {"path": "main.tf"}, ALL_OPTIONS, "It changes files."
    )
    assert button_label(edit, ALLOW_ALWAYS) == "Always allow edits in this folder"
    assert reason_text(edit) == "It changes `main.tf`."
    # A reason the gate wrote for this call is kept as it is.
    edit.reason = "It touches a path outside the working directory: /etc/hosts"
    assert reason_text(edit) == edit.reason


async def test_buttons_without_a_copy_of_the_question_when_the_card_shows_it() -> None:
    from iac_kernel.kernel.permission_ui import WidgetPrompt

    request = PermissionRequest(
        "c1", "bash", "bash: x", "execute", {"command": "x"}, ALL_OPTIONS, "r", danger=True
    )
    prompt = WidgetPrompt(request, asyncio.get_running_loop(), card_shown=True)
    assert prompt.label not in prompt.box.children
    assert "iac-question" in prompt.box._dom_classes
    assert all(b.layout.width == "auto" for b in prompt.buttons[:-1])
    prompt.close()
