"""The pull request's address in JupyterLab's status item, in a real browser (headless
Chromium; issue 44, item 1): a cell asks the agent (scripted model) to change a file and
open a pull request, the user allows the call in the cell, the request is opened on the
loopback GitHub Enterprise (:mod:`forge_support`), and the status bar's item shows
``PR #1`` as a link that opens the request's page in a new tab without the item's own
click (go to the pending question) running; its tooltip names the request.

Waits are for conditions on the page, never a sleep followed by an assertion.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle
from forge_support import (
    PR,
    PROJECT,
    TOKEN,
    forge_site,
    host_git,
    needs_git_sandbox,
    script,
    spec_fixture,  # noqa: F401 (the spec fixture)
)

pytestmark = [*BROWSER_MARKS, *needs_git_sandbox]

ITEM = "#jp-main-statusbar .iac-status-item"
#: Records a click that reaches the status item (the link's must not).
WATCH_ITEM = """node => {
  window.iacItemClicks = 0;
  node.addEventListener('click', () => { window.iacItemClicks += 1; });
}"""


def test_the_status_item_links_the_request_the_kernel_opened(
    jupyter,
    page,
    spec,
    outside_tmp: Path,
    screenshots: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import expect

    with forge_site(outside_tmp, spec, monkeypatch) as site:
        steps = script(outside_tmp, PR)  # edit main.tf, then the pull_request call
        env = {
            **server_env(outside_tmp, steps),
            "IAC_KERNEL_MODEL": "scripted",
            "IAC_KERNEL_MODE": "accept_edits",
            "HOME": str(site.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GH_HOST": site.forge.host,
            "GH_ENTERPRISE_TOKEN": TOKEN,
            "IAC_KERNEL_EGRESS_ENV": os.environ["IAC_KERNEL_EGRESS_ENV"],
            "IAC_KERNEL_EGRESS_ALLOW": site.settings.egress_allow,
            "IAC_KERNEL_EGRESS_ALLOW_PRIVATE": site.forge.host,
        }
        server = jupyter("jupyterlab", env)
        # The folder the kernel runs in is a clone of the forge's project.
        host_git("clone", "-q", site.forge.url(PROJECT), str(server.root))
        write_notebook(server.root / "pr.ipynb")
        url = f"http://{site.forge.host}/{PROJECT}/pull/1"
        page.goto(server.notebook_url("pr.ipynb"))
        item = page.locator(ITEM)
        try:
            wait_kernel_idle(page)
            expect(item).to_have_attribute("data-state", "idle")
            expect(item.locator(".iac-status-pr")).to_have_count(0)

            run_prompt(page, "change the input and open a pull request")
            cell = page.locator(".jp-Notebook .jp-Cell").first
            cell.get_by_role("button", name="Allow once").click()
            done = cell.locator(".iac-toolcard[data-status='done']").filter(has_text=url)
            expect(done).to_have_count(1)  # the cell shows it too
            link = item.locator(".iac-status-pr a")
            expect(link).to_have_text("PR #1")
            expect(link).to_have_attribute("href", url)
            expect(link).to_have_attribute("target", "_blank")
            expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))
            expect(item.locator(".iac-status-pr")).not_to_contain_text("more")
            expect(item).to_have_attribute("title", re.compile(rf"Pull request #1: {url}"))
            page.screenshot(path=str(screenshots / "browser-pull-request-status.png"))

            item.evaluate(WATCH_ITEM)
            # the stand-in forge has an API, not web pages: the request's page is this
            page.context.route(url, lambda route: route.fulfill(body="pull request #1"))
            with page.expect_popup() as opened:
                link.click()
            tab = opened.value
            expect(tab).to_have_url(url)
            expect(tab.locator("body")).to_have_text("pull request #1")
            assert tab.evaluate("window.opener") is None  # rel=noopener
            tab.close()
            assert page.evaluate("window.iacItemClicks") == 0
            # the item's own click still reaches it
            item.locator(".iac-status-model").click()
            assert page.evaluate("window.iacItemClicks") == 1

            # a reloaded page reads the same from the kernel
            page.reload()
            expect(page.locator(ITEM).locator(".iac-status-pr a")).to_have_text("PR #1")
            assert our_errors(page) == []
        finally:
            page.screenshot(path=str(screenshots / "browser-pull-request-last.png"))
    assert [pull["number"] for pull in site.forge.pulls] == [1]
