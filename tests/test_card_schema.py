"""The tool-card payload's one contract: ``card.schema.json`` beside the kernel's cards.

A real kernel runs a tool of every kind (read, edit, search, execute, fetch, and one the
card shows as "other") through every status (running, awaiting_permission with its
question, done, failed, denied, cancelled, and a question with a form); every card payload
it sends must match the schema. The schema in turn refuses what a reader could not rely on.
The extension's unit tests check their fixtures against the same file
(labextension/src/__tests__/schema.test.ts).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from core_support import write_script
from iac_kernel.kernel.render.cards import CARD_SCHEMA
from kernel_harness import KernelHarness, button_comm_id, scripted_kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SCHEMA = json.loads(CARD_SCHEMA.read_text())
VALIDATOR = Draft202012Validator(SCHEMA)

EVERY_KIND = [
    {"name": "read_file", "input": {"path": "notes.txt"}},
    {"name": "grep", "input": {"pattern": "hello"}},
    {"name": "bash", "input": {"command": "seq 1 300"}},
    {"name": "web_fetch", "input": {"url": "http://127.0.0.1:9/"}},
    {"name": "update_plan", "input": {"steps": [{"step": "check", "status": "pending"}]}},
    {"name": "write_file", "input": {"path": "new.txt", "content": "one\ntwo\n"}},
]
ASK = {
    "name": "ask_user",
    "input": {
        "question": "Which region?",
        "fields": [{"name": "region", "kind": "choice", "choices": ["eu-west-1", "us-east-1"]}],
    },
}


def exchange(match: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"match": match, "turns": [{"tool_use": list(calls)}, {"text": "Done."}]}


def clicking(label: str) -> Callable[[dict[str, Any], KernelHarness], None]:
    """An on_message hook: click the button ``label`` of every question as it displays."""
    opened: list[str] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        comm_id = button_comm_id(message, label)
        if comm_id:
            opened.append(comm_id)
        data = message["content"].get("data", {})
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and opened:
            harness.click(opened.pop())

    return on_message


def interrupting(message: dict[str, Any], harness: KernelHarness) -> None:
    """An on_message hook: interrupt the turn while its question waits."""
    if message["msg_type"] == "display_data" and WIDGET_VIEW in message["content"]["data"]:
        harness.interrupt()


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every card payload a real kernel sent for the cells below (each update counts)."""
    root = tmp_path_factory.mktemp("card-schema")
    work = root / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello from the notes\n")
    script = write_script(
        root / "cards.json",
        [
            exchange("every kind", *EVERY_KIND),
            exchange("a missing file", {"name": "read_file", "input": {"path": "missing.txt"}}),
            exchange(
                "write it", {"name": "write_file", "input": {"path": "x.txt", "content": "x"}}
            ),
            exchange("ask me", ASK),
        ],
    )
    harness = scripted_kernel(root, Path(os.path.realpath(work)), script)
    try:
        cells = [
            harness.execute("every kind", allow_stdin=True, on_message=clicking("Allow once")),
            harness.execute("a missing file"),
            harness.execute("write it", allow_stdin=True, on_message=clicking("Reject once")),
            harness.execute("write it", allow_stdin=True, on_message=interrupting),
            harness.execute("ask me", allow_stdin=True, on_message=clicking("Decline")),
        ]
    finally:
        harness.stop()
    return [payload for cell in cells for card in cell.cards() for payload in card]


def problems(payload: Any) -> list[str]:
    """The schema's complaints about ``payload``, one line each."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(card)'}: {e.message}"
        for e in VALIDATOR.iter_errors(payload)
    ]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_card_the_kernel_sends_matches_the_schema(sent: list[dict[str, Any]]) -> None:
    wrong = {p["callId"] + "/" + p["status"]: problems(p) for p in sent if problems(p)}
    assert not wrong, wrong
    kinds = {p["kind"] for p in sent}
    assert kinds == set(SCHEMA["properties"]["kind"]["enum"]), kinds
    statuses = {p["status"] for p in sent}
    assert statuses == set(SCHEMA["properties"]["status"]["enum"]), statuses
    questions = [p["question"] for p in sent if p["question"]]
    assert {q["state"] for q in questions} == {"pending", "answered", "cancelled"}
    assert any(q["form"] for q in questions), "the agent's question carries its form"
    assert any(p["diff"] and p["diff"]["oldText"] is None for p in sent), "a new file's diff"
    assert any(p["hidden"] for p in sent), "a long output is cut with its hidden lines"
    names = {p["name"] for p in sent}
    assert {call["name"] for call in [*EVERY_KIND, ASK]} <= names, names


@pytest.fixture
def card(sent: list[dict[str, Any]]) -> dict[str, Any]:
    """A real payload with a question and its form, to break in one place."""
    found = next(p for p in sent if p["question"] and p["question"]["form"])
    assert not problems(found)
    return copy.deepcopy(found)


@pytest.mark.parametrize("field", SCHEMA["required"])
def test_a_card_without_a_required_field_is_refused(card: dict[str, Any], field: str) -> None:
    del card[field]
    assert any(f"'{field}' is a required property" in p for p in problems(card))


BREAKAGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "an unknown field": lambda c: c.update(extra=1),
    "an unknown status": lambda c: c.update(status="paused"),
    "a tool kind the card does not show": lambda c: c.update(kind="think"),
    "an empty call id": lambda c: c.update(callId=""),
    "a newer version": lambda c: c.update(version=2),
    "a diff without its new text": lambda c: c.update(diff={"path": "a", "oldText": None}),
    "hidden lines from line 0": lambda c: c.update(hidden={"fromLine": 0, "toLine": 3}),
    "an unknown question state": lambda c: c["question"].update(state="maybe"),
    "a form field of an unknown kind": lambda c: c["question"]["form"]["fields"][0].update(
        kind="date"
    ),
    "a form without fields": lambda c: c["question"]["form"].update(fields=[]),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_card_is_refused(card: dict[str, Any], breakage: str) -> None:
    BREAKAGES[breakage](card)
    assert problems(card), f"{breakage} passed the schema"
