"""The approver's side in JupyterLab (headless Chromium): the Approvals sidebar lists the
team's pending records (requester, summary, rule, what it waits for, expiry) and picks up a
new one by itself; a record opens on the plan card its requester saw (deletes before
creates, a row's diff on demand, the policy findings), and Approve with a note approves it
in the store as the server's user. The webhook's link (``?iac-approval=ID``) opens its
record at once; the requester's own record has no live buttons.

Records are made here as ``alice`` in the team store of the shared JupyterLab server (its
default store: ``team.sqlite`` in the session store it was started with).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, Folder
from browser.lab import our_errors
from browser.plans import SECRET, synthetic_show
from iac_kernel.kernel.render import plan_card
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import DEFAULT_FILE, Identity, open_store, os_identity
from iac_kernel.team.webhook import LINK_PARAM
from iac_kernel.terraform.plan import parse_plan
from iac_kernel.terraform.summary import card_rows
from team_support import new_record

pytestmark = BROWSER_MARKS

ALICE = Identity("alice")
ME = os_identity()
ONE = Requirement(approvers=1, rules=("production needs a second person",))
PLAN = {
    "summary": "Plan: 1 to add, 0 to change, 1 to destroy.",
    "resources": [
        {
            "address": "aws_s3_bucket.logs",
            "action": "create",
            "why": "new in the configuration",
            "changes": [{"path": "bucket", "before": None, "after": "logs"}],
        },
        {
            "address": "aws_db_instance.main",
            "action": "delete",
            "why": "deleted from the configuration",
            "changes": [{"path": "engine", "before": "postgres", "after": None}],
        },
    ],
    "checks": [
        {"check_id": "CKV_AWS_18", "name": "access logging", "address": "aws_s3_bucket.logs"}
    ],
}
CARD = plan_card.bundle(PLAN, "toolu_apply_1", "s1")[plan_card.PLAN_MIME]
#: The other form a record's card takes: the apply question's review (tools/tf_apply.py
#: keeps ``ApprovedPlan.summary()``), a bigger plan with every row in compact form.
BIG = parse_plan(synthetic_show(300))
REVIEW = {"kind": "terraform_apply", "text": "…", "plan": BIG.to_dict(), "rows": card_rows(BIG)}
PANEL = ".jp-SideBar [data-id='iac-kernel-approvals']"


@pytest.fixture
def lab(jupyter) -> Folder:
    return jupyter("jupyterlab")


@pytest.fixture
def book(lab: Folder) -> Iterator[Approvals]:
    """The team store the server reads (its session store's default file)."""
    store = open_store(f"sqlite:///{lab.server.base / 'sessions' / DEFAULT_FILE}")
    yield Approvals(store)
    store.close()


def ask(book: Approvals, who: Identity = ALICE, card: dict = CARD) -> Approval:
    return new_record(book, who, PLAN["summary"], ONE, card=card)


def show_panel(page) -> None:
    """Open the Approvals sidebar (its tab toggles it: click only when it is closed)."""
    from playwright.sync_api import expect

    if not page.locator(".iac-approvals").is_visible():
        page.locator(PANEL).click()
    expect(page.locator(".iac-approvals")).to_be_visible()


def lab_url(lab: Folder, query: str = "") -> str:
    """This test's own JupyterLab workspace (nothing another test opened)."""
    extra = f"&{query}" if query else ""
    return f"{lab.url}/lab/workspaces/{lab.root.name}?reset{extra}&token={lab.token}"


def test_the_approver_sees_the_pending_record_on_its_plan_card_and_approves_it(
    lab: Folder, book: Approvals, page, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    record = ask(book)
    page.goto(lab_url(lab))
    try:
        show_panel(page)
        item = page.locator(f".iac-approvals-item[data-id='{record.id}']")
        expect(item).to_be_visible()
        expect(item.locator(".iac-approvals-who")).to_have_text("alice")
        expect(item.locator(".iac-approvals-summary")).to_have_text(PLAN["summary"])
        expect(item.locator(".iac-approvals-rule")).to_have_text(
            "rule: production needs a second person"
        )
        expect(item.locator(".iac-approvals-wait")).to_have_text("waiting for 1 approval")
        expect(item.locator(".iac-approvals-when")).to_contain_text("expires in 24 h")
        # A record made while the panel is open shows up without a click.
        later = ask(book)
        expect(page.locator(f".iac-approvals-item[data-id='{later.id}']")).to_be_visible()

        item.locator("button").click()
        view = page.locator(f"#iac-approval-{record.id}")
        card = view.locator(".iac-plan")
        expect(card).to_be_visible()
        expect(view.locator(".iac-approval-state")).to_have_text("waiting for 1 approval")
        rows = card.locator(".iac-plan-vrow")
        expect(rows).to_have_count(2)
        # The destroy first, though the plan listed it second.
        expect(rows.first).to_have_attribute("data-action", "delete")
        expect(card.locator(".iac-plan-checks")).to_contain_text("CKV_AWS_18")
        rows.first.locator(".iac-plan-address").click()
        expect(rows.first.locator("pre.iac-plan-diff")).to_have_text('- engine = "postgres"')
        page.screenshot(path=str(screenshots / "approval.png"))

        view.locator(".iac-approval-note").fill("checked the destroy with the DBA")
        view.get_by_role("button", name="Approve").click()
        expect(view.locator(".iac-approval-result")).to_contain_text(f"approved by {ME.name}")
        expect(view.get_by_role("button", name="Approve")).to_be_disabled()
        stored = book.get(record.id)
        assert stored.status == "approved"
        assert [(v.approver, v.note) for v in stored.approvals] == [
            (ME.name, "checked the destroy with the DBA")
        ]
        # The approved record leaves the pending list.
        show_panel(page)
        page.locator(".iac-approvals-refresh").click()
        expect(page.locator(f".iac-approvals-item[data-id='{record.id}']")).to_have_count(0)
        assert book.get(later.id).status == "pending"
        assert our_errors(page) == []
    finally:
        page.screenshot(path=str(screenshots / "last.png"))


def test_the_webhook_link_opens_the_record_and_the_requester_cannot_answer_it(
    lab: Folder, book: Approvals, page
) -> None:
    from playwright.sync_api import expect

    record = ask(book, card=REVIEW)
    page.goto(lab_url(lab, f"{LINK_PARAM}={record.id}"))
    view = page.locator(f"#iac-approval-{record.id}")
    card = view.locator(".iac-plan")
    expect(card).to_be_visible()
    # Every row of the plan is reachable (the list draws those in view), replacements first.
    expect(card.locator(".iac-plan-status")).to_have_text("300 rows")
    expect(card.locator(".iac-plan-vrow").first).to_have_attribute("data-action", "replace")
    card.locator(".iac-plan-search").fill("r[299]")
    expect(card.locator(".iac-plan-vrow")).to_have_count(1)
    assert SECRET not in view.inner_text()
    expect(view.get_by_role("button", name="Approve")).to_be_enabled()

    own = ask(book, who=ME)
    show_panel(page)
    page.locator(".iac-approvals-refresh").click()
    item = page.locator(f".iac-approvals-item[data-id='{own.id}']")
    expect(item.locator(".iac-approvals-yours")).to_have_text(" · your request")
    item.locator("button").click()
    mine = page.locator(f"#iac-approval-{own.id}")
    expect(mine.locator(".iac-plan")).to_be_visible()
    expect(mine.get_by_role("button", name="Approve")).to_be_disabled()
    expect(mine.get_by_role("button", name="Reject")).to_be_disabled()
    expect(mine.locator(".iac-approval-result")).to_contain_text("another person must")
    assert book.get(own.id).votes == ()
    assert our_errors(page) == []
