"""Issue 33, the destructive question on a big plan: every row in review order
(replacements and deletes first, then updates, then creates), grouped by module and
resource type, addresses in natural order; the whole plan's rows in compact form for the
notebook's plan card (and kept out of ACP); a fallback that lists every replacement and
delete up to a cap with an honest note of the rest."""

from __future__ import annotations

import json
from typing import Any

from browser.plans import SECRET, synthetic_show
from iac_kernel.acp.session.permissions import request_params
from iac_kernel.agent.permissions import PER_CALL_OPTIONS, REJECT_ONCE, PermissionRequest
from iac_kernel.kernel.ask.permission_ui import PermissionUI
from iac_kernel.kernel.io.publish import Publisher
from iac_kernel.kernel.render import plan_card
from iac_kernel.terraform.plan import ROWS_SHOWN, PlanFile, module_of, natural_key, parse_plan
from iac_kernel.terraform.summary import (
    DIFF_BYTES,
    card_rows,
    expand_rows,
    model_text,
    question_text,
)
from kernel_support import Recorder


def _item(address: str, actions: list[str], type_: str = "terraform_data") -> dict[str, Any]:
    return {
        "address": address,
        "mode": "managed",
        "type": type_,
        "name": address.rsplit(".", 1)[-1].split("[")[0],
        "change": {"actions": actions, "before": {"a": 1}, "after": {"a": 2}},
    }


def _plan(items: list[dict[str, Any]]):
    return parse_plan({"resource_changes": items})


def test_natural_order_and_module_of():
    names = ["old[10]", "old[2]", "old[1]", 'x["b10"]', 'x["b9"]']
    assert sorted(names, key=natural_key) == ["old[1]", "old[2]", "old[10]", 'x["b9"]', 'x["b10"]']
    assert module_of("module.a[3].aws_s3_bucket.b[0]", "aws_s3_bucket") == "module.a[3]"
    assert module_of('module.a["k.v"].data.aws_ami.u', "aws_ami", "data") == 'module.a["k.v"]'
    assert module_of("aws_s3_bucket.b", "aws_s3_bucket") == ""
    assert module_of("module.a.module.b[2].x.y") == "module.a.module.b[2]"


def test_review_order_replace_delete_update_create_by_module_type_and_number():
    plan = _plan(
        [
            _item("terraform_data.new", ["create"]),
            _item("terraform_data.old[10]", ["delete"]),
            _item("module.a[12].terraform_data.x", ["delete"]),
            _item("terraform_data.old[2]", ["delete"]),
            _item("module.a[3].terraform_data.x", ["delete"]),
            _item("null_resource.z[1]", ["delete"], "null_resource"),
            _item("terraform_data.app", ["update"]),
            _item("terraform_data.cache", ["delete", "create"]),
            _item("terraform_data.same", ["no-op"]),
        ]
    )
    assert [r.address for r in plan.changed] == [
        "terraform_data.cache",
        "null_resource.z[1]",  # root module: its types in order, then module.a[3], a[12]
        "terraform_data.old[2]",
        "terraform_data.old[10]",
        "module.a[3].terraform_data.x",
        "module.a[12].terraform_data.x",
        "terraform_data.app",
        "terraform_data.new",
    ]
    groups = plan.to_dict()["groups"]
    assert [g["action"] for g in groups] == ["replace", "delete", "delete", "update", "create"]


def test_replacements_survive_when_deletes_fill_the_row_limit():
    deletes = [_item(f"terraform_data.old[{i}]", ["delete"]) for i in range(ROWS_SHOWN + 100)]
    replaces = [_item(f"terraform_data.db[{i}]", ["delete", "create"]) for i in range(3)]
    plan = _plan(deletes + replaces)
    shown = plan.to_dict()["resources"]
    assert [r["action"] for r in shown[:3]] == ["replace"] * 3
    assert [r["address"] for r in shown[3:6]] == [f"terraform_data.old[{i}]" for i in range(3)]
    assert f"Changes: 3 replace · {ROWS_SHOWN + 100} delete;" in question_text(plan)
    assert "| -/+ replace | terraform_data.db[2] |" in model_text(plan)


def test_compact_rows_carry_every_row_in_order_with_masked_diffs():
    plan = parse_plan(synthetic_show(3000))
    rows = card_rows(plan)
    listed = expand_rows(rows)
    changing = [r for r in plan.resources if r.action != "no-op"]
    assert len(listed) == len(changing) == 3000
    assert [r["address"] for r in listed] == [r.address for r in plan.changed]
    order = {"replace": 0, "delete": 1, "update": 2, "create": 3}
    ranks = [order[r["action"]] for r in listed]
    assert ranks == sorted(ranks)
    groups = {(r["module"], r["type"]) for r in listed}
    assert groups >= {
        ("", "terraform_data"),
        ("", "null_resource"),
        ("module.app[2]", "null_resource"),
    }
    # Each group's prefix is said once: a row carries the rest of its address.
    assert ["module.app[2].null_resource."] == [
        g[2] for g in rows["groups"] if g[:2] == ["module.app[2]", "null_resource"]
    ]
    assert listed[0]["why"].startswith("an attribute that cannot be updated")
    text = json.dumps(rows)
    assert SECRET not in text and "(sensitive)" in text
    assert rows["diffs_left_out"] == 0 and all(r["diff"] for r in listed)
    deleted = next(r for r in listed if r["action"] == "delete")
    assert deleted["diff"][-1] == "- token = (sensitive)"


def test_compact_rows_at_ten_thousand_stay_compact_and_bound_their_diffs():
    plan = parse_plan(synthetic_show(10_000))
    rows = card_rows(plan)
    size = len(json.dumps(rows, ensure_ascii=False).encode())
    assert len(rows["name"]) == 10_000
    # Short columns plus bounded diffs: far from HTML (or JSON objects) for 10k rows.
    assert size < 600_000, size
    diffs = sum(len(d) + 4 for d in rows["diff"] if d)
    assert diffs <= DIFF_BYTES
    # The rows left without a diff are the last ones (creates), and are counted.
    missing = [i for i, d in enumerate(rows["diff"]) if d is None]
    assert len(missing) == rows["diffs_left_out"] > 0
    assert {rows["actions"][rows["action"][i]] for i in missing} == {"create"}


def test_fallback_lists_counts_and_every_destroying_row_first_with_an_honest_note():
    show = synthetic_show(10_000)
    plan = parse_plan(show, PlanFile("tfplan", "ab" * 32, 1, 0.0))
    summary = {"plan": plan.to_dict(), "rows": card_rows(plan)}
    bundle = plan_card.bundle(summary["plan"], "c1", rows=summary["rows"])
    plain = bundle["text/plain"].splitlines()
    counts = plan.counts
    assert plain[2] == (
        f"changes: {counts['replace']} replace · {counts['delete']} delete · "
        f"{counts['update']} update · {counts['create']} create"
    )
    listed = [line.split()[1:3] for line in plain[3 : 3 + plan_card.MAX_ROWS]]
    assert [a for a, _ in listed[: counts["replace"]]] == ["replace"] * counts["replace"]
    assert all(a in ("replace", "delete") for a, _ in listed)
    left = len(plan.changed) - plan_card.MAX_ROWS
    destroying = counts["replace"] + counts["delete"] - plan_card.MAX_ROWS
    assert plain[3 + plan_card.MAX_ROWS] == (
        f"{left} more rows not shown here ({destroying} of them replacements or deletes); "
        "`terraform show tfplan` lists every change."
    )
    html = bundle["text/html"]
    assert html.count('class="iac-plan-row"') == plan_card.HTML_ROWS
    assert f"{len(plan.changed) - plan_card.HTML_ROWS} more rows not shown here" in html
    assert "<details>" not in html  # a whole plan's diffs are the extension's
    # The extension's form carries every row; the HTML is bounded.
    assert len(bundle[plan_card.PLAN_MIME]["rows"]["name"]) == 10_000
    assert len(html) < 60_000, len(html)


def test_fallback_of_a_small_plan_lists_everything_in_natural_order():
    plan = _plan([_item(f"terraform_data.old[{i}]", ["delete"]) for i in (10, 2, 1)])
    # With the whole plan's rows (an apply's question) the HTML keeps each row's diff.
    html = plan_card.render_html(plan.to_dict(), card_rows(plan))
    assert html.count("<details>") == 3 and "- a = 1" in html
    plain = plan_card.render_plain(plan.to_dict())
    assert [line.split()[2] for line in plain.splitlines()[2:]] == [
        "terraform_data.old[1]",
        "terraform_data.old[2]",
        "terraform_data.old[10]",
    ]
    assert "more rows" not in plain


def _apply_request(review: dict[str, Any]) -> PermissionRequest:
    request = PermissionRequest(
        "c9", "bash", "bash: terraform apply tfplan", "execute", {"command": "terraform apply"},
        list(PER_CALL_OPTIONS), "apply", review=review,
    )  # fmt: skip
    request.danger = True
    return request


def test_acp_question_keeps_the_bounded_plan_and_leaves_the_rows_out():
    plan = parse_plan(synthetic_show(2000))
    review = {
        "kind": "terraform_apply",
        "text": "t",
        "plan": plan.to_dict(),
        "rows": card_rows(plan),
    }
    meta = request_params("s1", _apply_request(review))["toolCall"]["_meta"]["iac_kernel"]
    assert "rows" not in meta["review"] and meta["review"]["plan"]["rows_total"] == 2000


async def test_the_notebook_shows_the_whole_plan_with_the_question():
    plan = parse_plan(synthetic_show(1000))
    review = {
        "kind": "terraform_apply",
        "text": "t",
        "plan": plan.to_dict(),
        "rows": card_rows(plan),
    }
    sink = Recorder()
    ui = PermissionUI(
        Publisher(sink), ui="auto", allow_stdin=False, policy=lambda: "deny", ask_stdin=None
    )
    assert await ui.ask(_apply_request(review)) == REJECT_ONCE
    cards = [c["data"] for _, c in sink.sent if plan_card.PLAN_MIME in c.get("data", {})]
    (card,) = cards
    assert card[plan_card.PLAN_MIME]["callId"] == "c9"
    listed = expand_rows(card[plan_card.PLAN_MIME]["rows"])
    assert [r["address"] for r in listed] == [r.address for r in plan.changed]


def test_a_row_left_out_of_the_card_is_asked_for_by_its_address():
    from iac_kernel.kernel.session.status import StatusChannel

    plan = parse_plan(synthetic_show(10_000), PlanFile("tfplan", "cd" * 32, 1, 0.0))
    rows = card_rows(plan)
    last = expand_rows(rows)[-1]
    assert last["diff"] is None and rows["key"] == "cd" * 32
    sent: list[Any] = []

    class Comm:
        def send(self, data: Any) -> None:
            sent.append(data)

    channel = StatusChannel(dict, lambda _c: (None, None), lambda *_a: None)
    for address in (last["address"], "no.such[1]"):
        message = {"request": "plan_row", "key": rows["key"], "address": address}
        channel._received(Comm(), {"content": {"data": message}})
    found, missing = sent
    number = int(last["address"].rsplit("[", 1)[1].rstrip("]"))
    assert found["type"] == "plan_row" and found["address"] == last["address"]
    assert found["diff"] == [
        f'+ input.name = "r-{number}"',
        f"+ input.size = {number + 1}",
        "+ token = (sensitive)",
    ]
    assert SECRET not in json.dumps(found)
    assert missing["diff"] is None
