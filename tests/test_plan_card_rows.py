"""Issue 43 item 4: the card fits what it shows. Every plan card reaches every row (the
``terraform_plan`` result's card too, not only an apply question's), in compact form, and
an apply's question keeps to the summary and the counts (the plan table has the rows).

The display bytes of a 10,000-change ``terraform_plan`` card are printed (``-s``), before
(the bounded plan: 125 rows) and after (every row); the figures are in the report.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from browser.plans import SECRET as SYNTHETIC_SECRET
from browser.plans import synthetic_show
from core_support import make_loop, write_script
from iac_kernel.acp.protocol.updates import result_update
from iac_kernel.agent.forms import typed_confirmation
from iac_kernel.agent.permissions import ALLOW_ONCE
from iac_kernel.events import ToolCallResult, ToolCallStarted
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render import plan_card
from iac_kernel.kernel.render.turn import TurnView
from iac_kernel.terraform.plan import parse_plan
from iac_kernel.terraform.review import counts_line
from iac_kernel.terraform.summary import card_rows, expand_rows, question_text
from iac_kernel.tools.tf_plans import TerraformPlanTool
from terraform_support import (
    SECRET,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)

RESOURCES = 10_000
#: What a 10,000-change plan card may cost the browser (the whole plan, diffs within
#: summary.DIFF_BYTES), and its HTML fallback (JupyterLab's table of contents parses it
#: again on every change of the cell).
CARD_BYTES = 640 * 1024
HTML_BYTES = 64 * 1024
#: Lines of an apply question's plan part (counts line, summary, identity, counts by action).
QUESTION_LINES = 5


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _plan_display(raw: dict[str, Any], rows: dict[str, Any] | None) -> dict[str, Any]:
    """The plan card the kernel displays for a terraform_plan result (in a running loop:
    the view arms its timers)."""
    sent: list[tuple[str, dict[str, Any]]] = []
    view = TurnView(Publisher(lambda kind, content: sent.append((kind, content))), "s1")
    view.emit(ToolCallStarted("c1", "terraform_plan", "terraform_plan", "execute"))
    view.emit(ToolCallResult("c1", "terraform_plan", "completed", "x", raw, plan_rows=rows))
    (data,) = [c["data"] for kind, c in sent if plan_card.PLAN_MIME in c.get("data", {})]
    return data


async def test_a_terraform_plan_card_of_10000_changes_holds_every_row() -> None:
    plan = parse_plan(synthetic_show(RESOURCES))
    raw = {"plan": plan.to_dict(), "exit_code": 0}
    before = _plan_display(raw, None)  # what the card was: the bounded plan
    after = _plan_display(raw, card_rows(plan))
    bounded = before[plan_card.PLAN_MIME]["plan"]["resources"]
    assert len(bounded) < RESOURCES and {r["action"] for r in bounded} < set(plan.counts)

    payload = after[plan_card.PLAN_MIME]
    listed = expand_rows(payload["rows"])
    assert [r["address"] for r in listed] == [r.address for r in plan.changed]
    by_action = {a: sum(1 for r in listed if r["action"] == a) for a in plan.counts}
    assert by_action == plan.counts and by_action["create"] > 7000
    assert payload["plan"]["resources"] == []  # the rows stand for the bounded list
    sizes = {
        "before": _size(before),
        "after": _size(after),
        "html after": _size(after["text/html"]),
    }
    print(f"10,000-change terraform_plan card bytes: {sizes}")
    assert sizes["after"] < CARD_BYTES and sizes["html after"] < HTML_BYTES
    assert after["text/html"].count('<tr class="iac-plan-row"') <= plan_card.HTML_ROWS
    assert SYNTHETIC_SECRET not in json.dumps(after)


def test_an_apply_question_keeps_to_the_summary_and_the_counts() -> None:
    plan = parse_plan(synthetic_show(RESOURCES))
    text = f"{counts_line(plan, 'tfplan')}\n{question_text(plan)}"
    lines = text.splitlines()
    assert len(lines) <= QUESTION_LINES, lines
    counts = " · ".join(f"{plan.counts[a]} {a}" for a in ("replace", "delete", "update", "create"))
    assert f"Changes: {counts};" in text
    assert not any(r.address in text for r in plan.changed[:50] + plan.changed[-50:])
    # The typed confirmation of such a destroy says what it does, and nothing it does not.
    form = typed_confirmation({"kind": "terraform_apply", "plan": plan.to_dict()}, True)
    assert form is not None and "rejects" not in form.fields[0].description


@needs_terraform
def test_the_agent_gives_the_card_every_row_masked_and_keeps_them_out_of_acp_and_the_store(
    applied: Path, tmp_path: Path
) -> None:
    ws = stage2_copy(applied, tmp_path / "ws")
    (ws / "terraform.tfvars").write_text('db_password = "RotatedSecret-0c1d"\n')
    script = write_script(
        tmp_path / "plan.json",
        [
            {
                "match": "plan",
                "turns": [{"tool_use": [{"name": "terraform_plan", "input": {}}]}, {"text": "ok"}],
            }
        ],
    )
    loop, persist = make_loop(script, ws, [TerraformPlanTool()])
    events: list[Any] = []

    async def allow(_request: Any) -> str:
        return ALLOW_ONCE

    asyncio.run(loop.run_turn([{"type": "text", "text": "plan it"}], events.append, allow))
    (result,) = [e for e in events if isinstance(e, ToolCallResult)]
    assert result.status == "completed", result.output
    listed = expand_rows(result.plan_rows)
    plan = result.raw_output["plan"]
    assert len(listed) == plan["rows_total"] == 5
    assert [r["action"] for r in listed] == ["replace", "delete", "update", "update", "create"]
    shown = json.dumps(result.plan_rows)
    assert "RotatedSecret-0c1d" not in shown and SECRET not in shown
    assert "(sensitive)" in shown
    # Front ends that draw no plan card never get the rows: ACP, the session store.
    update = result_update(result).model_dump(by_alias=True, exclude_none=True)
    stored = json.dumps([persist.results, persist.messages], default=str)
    for elsewhere in (json.dumps(update), stored):
        assert '"whys"' not in elsewhere
        assert json.dumps(result.plan_rows["name"]) not in elsewhere
