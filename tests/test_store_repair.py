"""Store repair: torn records anywhere, tool calls without results anywhere, orphan
results, compaction indices, per-result records merged on load, stored tool output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iac_kernel.sessions.records import INTERRUPTED_RESULT
from iac_kernel.sessions.store import SessionStore
from store_support import dangling_tool_uses

PROMPT = {"role": "user", "content": [{"type": "text", "text": "plan the vpc"}]}


def tool_use(*ids: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids],
    }


def result(call_id: str, text: str = "ok") -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def new_writer(store: SessionStore, tmp_path: Path):
    meta = store.create(str(tmp_path))
    return store.open_writer(meta.session_id, "test")


def log_lines(store: SessionStore, session_id: str) -> list[dict]:
    text = (store.root / f"{session_id}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def reload(store: SessionStore, session_id: str):
    writer = store.open_writer(session_id, "test")
    try:
        return store.load(writer)
    finally:
        writer.close()


def test_results_are_own_records_merged_into_one_message_on_load(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.append_message(tool_use("a", "b"))
    writer.append_tool_result(result("a", "first"), name="bash", full="first, all of it")
    writer.append_tool_result(result("b", "second"), name="bash")
    writer.close()
    kinds = [r["type"] for r in log_lines(store, writer.session_id)]
    assert kinds == ["message", "message", "tool_result", "tool_result"]
    loaded = reload(store, writer.session_id)
    assert loaded.repairs == []
    assert loaded.messages[-1] == {
        "role": "user",
        "content": [result("a", "first"), result("b", "second")],
    }
    assert store.read_meta(writer.session_id).message_count == 3
    first, second = log_lines(store, writer.session_id)[2:]
    assert (first["name"], first["full"]) == ("bash", "first, all of it")
    assert "full" not in second  # the same as what the model was shown


def test_crash_after_first_result_keeps_it_and_interrupts_only_the_rest(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.append_message(tool_use("a", "b", "c"))
    writer.append_tool_result(result("a", "applied"))
    writer.close()  # as if the process died while b ran
    loaded = reload(store, writer.session_id)
    content = loaded.messages[-1]["content"]
    assert content[0] == result("a", "applied")
    assert [(b["tool_use_id"], b["content"]) for b in content[1:]] == [
        ("b", INTERRUPTED_RESULT),
        ("c", INTERRUPTED_RESULT),
    ]
    assert "closed 2 interrupted tool call(s)" in loaded.repairs
    assert reload(store, writer.session_id).repairs == []  # the repair was persisted
    assert any(r["type"] == "repaired" for r in log_lines(store, writer.session_id))


def test_torn_record_in_the_middle_is_dropped_and_the_rest_kept(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.close()
    path = store.root / f"{writer.session_id}.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"type": "message", "message": {"role": "assis')  # torn, no newline
        handle.write(
            b'{"type": "message", "ts": "x", "message": {"role": "assistant", "content": "hi"}}\n'
        )
        handle.write(b"\xff\xfe not json at all\n")
        handle.write(json.dumps({"type": "message", "message": PROMPT}).encode() + b"\n")
    loaded = reload(store, writer.session_id)
    assert [m["role"] for m in loaded.messages] == ["user", "user"]
    assert "dropped 2 unreadable or half-written line(s) in the log" in loaded.repairs
    lines = path.read_bytes().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)
    assert reload(store, writer.session_id).repairs == []


def test_dangling_tool_use_in_the_middle_is_answered_where_the_api_needs_it(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.append_message(tool_use("a"))  # crash: no result, then the user went on
    writer.append_message(PROMPT)
    writer.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    writer.close()
    before = store.read(writer.session_id)  # a non-owner read repairs in memory only
    assert dangling_tool_uses(before.messages) == []
    loaded = reload(store, writer.session_id)
    assert dangling_tool_uses(loaded.messages) == []
    assert loaded.messages[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "a",
                "content": INTERRUPTED_RESULT,
                "is_error": True,
            }
        ],
    }
    assert loaded.messages[3] == PROMPT


def test_orphan_results_are_dropped(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.append_tool_result(result("ghost"))  # its tool_use was lost
    writer.append_message(tool_use("a"))
    writer.append_tool_result(result("a"))
    writer.append_tool_result(result("a"))  # a duplicate
    writer.close()
    loaded = reload(store, writer.session_id)
    assert loaded.messages == [PROMPT, tool_use("a"), {"role": "user", "content": [result("a")]}]
    assert any("dropped 2" in note for note in loaded.repairs)


def test_compaction_index_follows_its_message_through_a_repair(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)  # 0
    writer.append_message(tool_use("a"))  # 1, result lost
    second = {"role": "user", "content": [{"type": "text", "text": "second prompt"}]}
    writer.append_message(second)  # 2
    writer.append_compaction("summary", 2)
    writer.close()
    loaded = reload(store, writer.session_id)
    assert loaded.summary == "summary"
    assert loaded.messages[loaded.keep_from] == second  # an answer was inserted before it


def test_old_logs_with_whole_result_messages_still_load(store, tmp_path):
    writer = new_writer(store, tmp_path)
    writer.append_message(PROMPT)
    writer.append_message(tool_use("a", "b"))
    writer.append_message({"role": "user", "content": [result("a")]}, kind="repair")
    writer.close()
    loaded = reload(store, writer.session_id)
    assert dangling_tool_uses(loaded.messages) == []
    ids = [b["tool_use_id"] for m in loaded.messages[2:] for b in m["content"]]
    assert sorted(ids) == ["a", "b"]
