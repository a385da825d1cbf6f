"""Sizes that must not grow with a plan or a session (issue 23 point 5); the times are
in bench/plan_scale.py and bench/session_load.py."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from iac_kernel.acp.protocol.updates import result_update
from iac_kernel.events import ToolCallResult
from iac_kernel.kernel.render import plan_card
from iac_kernel.terraform.plan import DICT_BYTES, parse_plan
from iac_kernel.terraform.summary import model_text

ROWS = 10_000


def show_json(rows: int, attributes: int = 2, value_chars: int = 20) -> dict:
    """A ``show -json`` of ``rows`` created terraform_data (and a few deletes)."""
    changes = []
    for i in range(rows):
        after = {f"a{j}": f"v{i}-" + "x" * value_chars for j in range(attributes)}
        actions = ["delete"] if i % 1000 == 0 else ["create"]
        changes.append(
            {
                "address": f"terraform_data.r[{i}]",
                "type": "terraform_data" if i % 3 else "null_resource",
                "name": "r",
                "mode": "managed",
                "change": {
                    "actions": actions,
                    "before": after if actions == ["delete"] else None,
                    "after": None if actions == ["delete"] else after,
                    "after_unknown": {"id": True},
                    "before_sensitive": {},
                    "after_sensitive": {},
                },
            }
        )
    return {"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": changes}


def acp_bytes(plan_dict: dict, text: str) -> int:
    event = ToolCallResult("call", "terraform_plan", "completed", text, {"plan": plan_dict})
    update = result_update(event).model_dump(by_alias=True, exclude_none=True)
    return len(json.dumps(update, ensure_ascii=False).encode())


def test_a_plan_of_10000_rows_stays_small_everywhere():
    plan = parse_plan(show_json(ROWS))
    data = plan.to_dict()
    assert len(json.dumps(data, ensure_ascii=False).encode()) <= DICT_BYTES
    assert data["rows_total"] == ROWS and data["truncated"] is True
    assert sum(g["count"] for g in data["groups"]) == ROWS
    assert data["resources"][0]["action"] == "delete"  # deletes first
    assert acp_bytes(data, model_text(plan)) < 256 * 1024
    card = json.dumps(plan_card.bundle(data), ensure_ascii=False).encode()
    assert len(card) < 1024 * 1024
    html = plan_card.render_html(data)
    assert "iac-plan-page" in html and "of 10000 changing resources" in html
    assert "null_resource" in html  # the groups table


def test_huge_attribute_values_are_bounded_too():
    plan = parse_plan(show_json(100, attributes=60, value_chars=3000))
    data = plan.to_dict()
    assert len(json.dumps(data, ensure_ascii=False).encode()) <= DICT_BYTES
    assert data["resources"] and any("changes_total" in r for r in data["resources"])
    assert acp_bytes(data, model_text(plan)) < 256 * 1024


def test_a_small_plan_is_whole():
    data = parse_plan(show_json(5)).to_dict()
    assert data["truncated"] is False and len(data["resources"]) == 5
    assert plan_card.more_note(data) == ""


def test_loading_a_session_peaks_under_three_times_its_size(tmp_path: Path):
    from iac_kernel.sessions.store import SessionStore

    store = SessionStore(tmp_path / "s")
    meta = store.create(str(tmp_path))
    body = 'resource "terraform_data" "r" { input = 1 }\n' * 200
    lines = []
    for i in range(600):
        call = f"toolu_{i}"
        lines.append({"type": "message", "ts": "t", "message": {"role": "user", "content": "q"}})
        tool_use = {"type": "tool_use", "id": call, "name": "read_file", "input": {}}
        lines.append(
            {"type": "message", "ts": "t", "message": {"role": "assistant", "content": [tool_use]}}
        )
        block = {"type": "tool_result", "tool_use_id": call, "content": body}
        lines.append({"type": "tool_result", "ts": "t", "name": "read_file", "block": block})
    log = store.root / f"{meta.session_id}.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    size = log.stat().st_size
    tracemalloc.start()
    try:
        session = store.read(meta.session_id)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(session.messages) == 1800
    assert peak < 3 * size, (peak, size)


def test_one_enormous_value_is_clipped_not_dropped():
    plan = parse_plan(show_json(1, attributes=1, value_chars=500_000))
    data = plan.to_dict()
    (row,) = data["resources"]
    assert row["changes"] and len(row["changes"][0]["before"]) <= 1000
    whole = plan.resources[0].changes[0].before
    assert len(whole) > 500_000  # the plan itself keeps it
