"""The approvals panel on JupyterHub (headless Chromium): bob logs in to the hub, follows the
webhook's hub link (``/hub/user-redirect/lab?iac-approval=ID``) to his own Lab, sees
alice's record on its plan card and approves it with the hub's login cookie (the XSRF
check included); the store records bob, the hub user, though every user server here runs
as one OS user. Alice's Lab shows her own record without live buttons.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from browser.jupyter import BROWSER_MARKS
from browser.lab import lab_page, our_errors
from hub_support import Hub
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.store import open_store
from iac_kernel.team.webhook import HUB_URL_ENV, panel_link
from test_server_approvals_hub import ask, hub  # noqa: F401 (the module's hub fixture)

pytestmark = BROWSER_MARKS


@pytest.fixture
def book(hub) -> Iterator[Approvals]:  # noqa: F811
    store = open_store(hub[1])
    yield Approvals(store)
    store.close()


def log_in(page, server: Hub, user: str) -> None:
    """The hub's login form (DummyAuthenticator: any password)."""
    page.goto(f"{server.http}/hub/login")
    page.locator("input[name='username']").fill(user)
    page.locator("input[name='password']").fill("any")
    page.locator("input[type='submit'], button[type='submit']").first.click()
    page.wait_for_url(f"{server.http}/**")


def test_bob_approves_alices_record_in_his_own_lab_on_the_hub(hub, book, browser) -> None:  # noqa: F811
    from playwright.sync_api import expect

    server = hub[0]
    record = ask(book)
    link = panel_link(record.id, {HUB_URL_ENV: f"{server.http}/hub/"})
    assert link is not None
    with lab_page(browser) as page:
        log_in(page, server, "bob")
        page.goto(link)
        page.wait_for_url(f"{server.http}/user/bob/lab**")
        view = page.locator(f"#iac-approval-{record.id}")
        expect(view.locator(".iac-plan")).to_be_visible()
        expect(view.locator(".iac-approval-title")).to_have_text("alice asks to apply")
        view.locator(".iac-approval-note").fill("approved from bob's Lab")
        view.get_by_role("button", name="Approve").click()
        expect(view.locator(".iac-approval-result")).to_contain_text("approved by bob")
        assert our_errors(page) == []
    stored = book.get(record.id)
    assert stored.status == "approved"
    assert [(v.approver, v.note) for v in stored.votes] == [("bob", "approved from bob's Lab")]

    own = ask(book)
    with lab_page(browser) as page:
        log_in(page, server, "alice")
        page.goto(f"{server.http}/hub/user-redirect/lab?iac-approval={own.id}")
        mine = page.locator(f"#iac-approval-{own.id}")
        expect(mine.locator(".iac-plan")).to_be_visible()
        expect(mine.get_by_role("button", name="Approve")).to_be_disabled()
        expect(mine.locator(".iac-approval-result")).to_contain_text("another person must")
        assert our_errors(page) == []
    assert book.get(own.id).votes == ()
