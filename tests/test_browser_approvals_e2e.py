"""Issue 43 end to end on JupyterHub (headless Chromium): alice's notebook cell asks the
agent to apply a saved plan, she allows the call, and the apply waits on the team's rule;
bob logs in to the hub, opens his own Lab's Approvals panel, opens her record on its plan
card and approves it; alice's cell then goes on and terraform applies the plan.

One JupyterHub 6 on loopback (tests/hub_support.py) with alice and bob, whose servers run
as one OS user (SimpleLocalProcessSpawner): only the hub tells them apart, so the record
being alice's (her kernel asks the hub whose token it holds) and bob's vote being bob's
are what this proves. Both servers share one team store (SQLite) and the admin's rules
file, which asks one approver for a change of workspace ``default``. The model is the
scripted one; the workspace creates one ``terraform_data`` (real terraform, offline).
Alice's own record cannot be approved by her: its Approve is disabled in her Lab, and her
server's API refuses it (409).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import lab_page, our_errors, wait_kernel_idle
from hub_support import Hub, missing_programs
from iac_kernel.egress.environment import environment_dir
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import RULES_ENV
from iac_kernel.team.store import STORE_ENV, open_store
from terraform_support import needs_terraform, tf
from test_browser_approvals_hub import log_in
from test_server_approvals import refused
from test_server_approvals_hub import call

pytestmark = [
    *BROWSER_MARKS,
    needs_terraform,
    pytest.mark.skipif(unusable_reason() is not None, reason="no bubblewrap"),
]

RULES = """
[[rule]]
name = "default needs a second person"
when = { workspace = "default" }
approvers = 1
"""
SCRIPT = {
    "name": "e2e-apply",
    "exchanges": [
        {
            "match": "(?i)apply the plan",
            "turns": [
                {
                    "text": "Applying the reviewed plan:\n\n",
                    "tool_use": [{"name": "terraform_apply", "input": {"plan": "tfplan"}}],
                },
                {
                    "on": {
                        "done": {"text": "The plan is applied."},
                        "denied": {"text": "Nothing was applied."},
                        "failed": {"text": "The apply failed."},
                    }
                },
            ],
        }
    ],
}
PANEL = ".jp-SideBar [data-id='iac-kernel-approvals']"
WAITING = "waiting for 1 approval"


@dataclass
class Team:
    hub: Hub
    store: str
    #: alice's infra folder (her notebook, the configuration and its saved plan).
    infra: Path
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    """The hub, alice's planned workspace in her home, the shared store and rules."""
    missing = missing_programs()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    directory = Path(os.path.realpath(tmp_path_factory.mktemp("approvals-e2e")))
    admin = directory / "admin" / "approvals.toml"
    admin.parent.mkdir()
    admin.write_text(RULES)
    script = directory / "script.json"
    script.write_text(json.dumps(SCRIPT))
    infra = directory / "home" / "alice" / "infra"
    infra.mkdir(parents=True)
    (directory / "home" / "bob").mkdir()
    (infra / "main.tf").write_text('resource "terraform_data" "web" {\n  input = "v1"\n}\n')
    tf(infra, "plan", "-input=false", "-out=tfplan")
    write_notebook(infra / "apply.ipynb", "Please apply the plan")
    store = f"sqlite:///{directory / 'team.sqlite'}"
    environment = {
        STORE_ENV: store,
        RULES_ENV: str(admin),
        "IAC_KERNEL_SCRIPT": str(script),
        # Each server's home is its user's: the proxy's environment stays this machine's.
        "IAC_KERNEL_EGRESS_ENV": str(environment_dir()),
        "IAC_KERNEL_CHECKOV": "off",
        "IAC_KERNEL_LOG_LEVEL": "INFO",
        "TF_CLI_CONFIG_FILE": "/dev/null",
        "CHECKPOINT_DISABLE": "1",
    }
    hub = Hub(directory, environment)
    try:
        hub.start()
        tokens = {}
        for user in ("alice", "bob"):
            hub.add_user_with_server(user)
            tokens[user] = hub.token(user, [f"access:servers!user={user}"])
        yield Team(hub, store, infra, tokens)
    finally:
        hub.stop()


def records(url: str) -> list[Approval]:
    store = open_store(url)
    try:
        return Approvals(store).list(None)
    finally:
        store.close()


def show_panel(page) -> None:
    """Open the Approvals sidebar (its tab toggles it: click only when it is closed)."""
    from playwright.sync_api import expect

    if not page.locator(".iac-approvals").is_visible():
        page.locator(PANEL).click()
    expect(page.locator(".iac-approvals")).to_be_visible()


def open_record(page, record_id: str):
    """The record's view, opened from the Approvals panel's list."""
    from playwright.sync_api import expect

    show_panel(page)
    page.locator(".iac-approvals-refresh").click()
    item = page.locator(f".iac-approvals-item[data-id='{record_id}']")
    expect(item).to_be_visible()
    item.locator("button").click()
    view = page.locator(f"#iac-approval-{record_id}")
    expect(view.locator(".iac-plan")).to_be_visible()
    return view, item


def test_alices_cell_waits_bob_approves_in_his_lab_and_her_cell_applies(
    team: Team, browser, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    hub = team.hub
    with lab_page(browser) as alice, lab_page(browser) as bob:
        try:
            # alice runs her cell and allows the call: the apply now waits on the rule.
            log_in(alice, hub, "alice")
            alice.goto(f"{hub.http}/user/alice/lab/tree/infra/apply.ipynb")
            wait_kernel_idle(alice)
            alice.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            alice.keyboard.press("Shift+Enter")
            cell = alice.locator(".jp-Notebook .jp-Cell").first
            card = cell.locator(".iac-toolcard[data-kind='execute']")
            expect(card).to_have_attribute("data-status", "awaiting_permission")
            expect(cell).to_contain_text("Needs 1 approval from someone other than you")
            cell.get_by_role("button", name="Allow once").click()
            expect(card).to_have_attribute("data-status", "running")
            expect(card.locator(".iac-toolcard-output-text")).to_contain_text(WAITING)

            (record,) = records(team.store)
            assert record.status == "pending" and record.requester == "alice"
            assert record.rule == "default needs a second person"
            assert f"Approval {record.id}: {WAITING}" in card.inner_text()
            assert not (team.infra / "terraform.tfstate").exists()

            # alice cannot approve her own record: not in her Lab, not through her server.
            view, item = open_record(alice, record.id)
            expect(item.locator(".iac-approvals-yours")).to_have_text(" · your request")
            expect(view.get_by_role("button", name="Approve")).to_be_disabled()
            expect(view.locator(".iac-approval-result")).to_contain_text("another person must")
            answer = call(hub, "alice", team.tokens["alice"], "POST", f"/{record.id}/approve", {})
            assert "alice" in refused(answer, 409, "cannot approve")
            (still,) = records(team.store)
            assert still.status == "pending" and still.votes == ()
            alice.screenshot(path=str(screenshots / "alice-waiting.png"))
            alice.get_by_role("tab", name="apply.ipynb").click()
            expect(card).to_be_visible()

            # bob approves from his own Lab, on the plan card alice saw.
            log_in(bob, hub, "bob")
            bob.goto(f"{hub.http}/user/bob/lab")
            view, item = open_record(bob, record.id)
            expect(item.locator(".iac-approvals-who")).to_have_text("alice")
            expect(item.locator(".iac-approvals-wait")).to_have_text(WAITING)
            expect(view.locator(".iac-approval-title")).to_have_text("alice asks to apply")
            rows = view.locator(".iac-plan .iac-plan-vrow")
            expect(rows).to_have_count(1)
            expect(rows.first).to_have_attribute("data-action", "create")
            expect(rows.first).to_contain_text("terraform_data.web")
            view.locator(".iac-approval-note").fill("one data resource, fine")
            view.get_by_role("button", name="Approve").click()
            expect(view.locator(".iac-approval-result")).to_contain_text("approved by bob")
            bob.screenshot(path=str(screenshots / "bob-approved.png"))

            # alice's cell goes on by itself and applies the plan bob saw.
            # (The result replaces the live lines, "approved by bob; applying." among them.)
            expect(card).to_have_attribute("data-status", "done")
            output = card.locator(".iac-toolcard-output-text")
            expect(output).to_contain_text("Applied the reviewed plan tfplan")
            expect(output).to_contain_text("Apply complete! Resources: 1 added")
            expect(cell).to_contain_text("The plan is applied.")
            alice.screenshot(path=str(screenshots / "alice-applied.png"))
            assert our_errors(alice) == [] and our_errors(bob) == []
        finally:
            alice.screenshot(path=str(screenshots / "alice-last.png"))
            bob.screenshot(path=str(screenshots / "bob-last.png"))

    state = json.loads((team.infra / "terraform.tfstate").read_text())
    assert [r["type"] + "." + r["name"] for r in state["resources"]] == ["terraform_data.web"]
    (spent,) = records(team.store)
    assert spent.id == record.id and spent.status == "spent"
    assert spent.requester == "alice"
    assert [(v.approver, v.note) for v in spent.approvals] == [("bob", "one data resource, fine")]
    assert spent.plan_sha256 == record.plan_sha256
