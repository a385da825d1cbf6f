"""The approvals webhook (iac_kernel/team/webhook.py): a new pending record posts
Slack-compatible JSON to a loopback HTTP server, with the summary, what it waits for and
a link that opens the record in the approvals panel; once per record, from a thread the
caller never waits on; a failure is logged once, without the URL (a secret)."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from iac_kernel.team import webhook
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, open_store
from team_support import new_record

ALICE = Identity("alice")
RULE = Requirement(approvers=1, groups={"platform": 1}, rules=("prod needs platform",))
SUMMARY = "Plan: 0 to add, 0 to change, 2 to destroy. <db> & <cache>"
#: The webhook's secret part, which no log line may show.
SECRET = "T000/B000/" + secrets.token_hex(8)


class Hook:
    """A loopback HTTP server that keeps what is posted to it; ``status`` is its answer
    and ``hold`` (set: answer at once) keeps a request waiting."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        self.status = 200
        self.hold = threading.Event()
        self.hold.set()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hook.posts.append((self.path, dict(self.headers), body))
                hook.hold.wait(30)
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/{SECRET}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test as a new process: nothing posted, no failure logged yet."""
    monkeypatch.setattr(webhook, "_posted", set())
    monkeypatch.setattr(webhook, "_failure_logged", False)


@pytest.fixture
def book(tmp_path: Path) -> Iterator[Approvals]:
    store = open_store(f"sqlite:///{tmp_path / 'team.sqlite'}")
    yield Approvals(store)
    store.close()


def ask(book: Approvals) -> Approval:
    return new_record(book, ALICE, SUMMARY, RULE)


def test_a_pending_record_posts_its_summary_wait_and_panel_link(hook: Hook, book) -> None:
    record = ask(book)
    env = {webhook.WEBHOOK_ENV: hook.url, webhook.PANEL_ENV: "https://lab.example.org/lab?x=1"}
    thread = webhook.notify_pending(record, env)
    assert thread is not None
    thread.join(30)
    assert len(hook.posts) == 1
    path, headers, body = hook.posts[0]
    assert path == f"/services/{SECRET}"
    assert headers["Content-Type"] == "application/json"
    text = json.loads(body)["text"]
    assert "alice asks to apply" in text
    # Slack's control characters escaped in the summary; the link left as Slack links it.
    assert "2 to destroy. &lt;db&gt; &amp; &lt;cache&gt;" in text
    assert "waiting for 1 approval by platform (rule: prod needs platform)" in text
    assert f"<https://lab.example.org/lab?x=1&iac-approval={record.id}>" in text
    # Once per record: the same apply finding its record again posts nothing.
    assert webhook.notify_pending(record, env) is None
    assert len(hook.posts) == 1


def test_the_link_on_a_hub_goes_to_whoever_clicks_own_lab(book) -> None:
    record = ask(book)
    env = {webhook.HUB_URL_ENV: "https://hub.example.org/hub/"}
    assert webhook.panel_link(record.id, env) == (
        f"https://hub.example.org/hub/user-redirect/lab?iac-approval={record.id}"
    )
    assert webhook.panel_link(record.id, {}) is None
    text = webhook.message(record, {})["text"]
    assert f"iac-kernel approvals show {record.id}" in text


def test_nothing_is_posted_without_a_webhook_or_for_a_decided_record(hook: Hook, book) -> None:
    record = ask(book)
    assert webhook.notify_pending(record, {}) is None
    approved = book.approve(record.id, Identity("bob", groups=frozenset({"platform"})))
    assert approved.status == "approved"
    assert webhook.notify_pending(approved, {webhook.WEBHOOK_ENV: hook.url}) is None
    assert hook.posts == []


def test_the_caller_never_waits_and_a_failure_is_logged_once_without_the_url(
    hook: Hook, book, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(webhook, "TIMEOUT", 1.0)
    hook.hold.clear()  # the webhook takes longer than the timeout
    env = {webhook.WEBHOOK_ENV: hook.url}
    caplog.set_level(logging.WARNING, logger=webhook.__name__)
    first = webhook.notify_pending(ask(book), env)
    assert first is not None
    # Returned while the post is still in flight.
    assert first.is_alive()
    first.join(30)
    hook.hold.set()
    hook.status = 500
    second = webhook.notify_pending(ask(book), env)
    assert second is not None
    second.join(30)
    assert len(hook.posts) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "could not be reached" in warnings[0]
    assert SECRET not in caplog.text


def test_a_webhook_that_is_not_a_url_is_one_warning(book, caplog) -> None:
    caplog.set_level(logging.WARNING, logger=webhook.__name__)
    record = ask(book)
    assert webhook.notify_pending(record, {webhook.WEBHOOK_ENV: "hooks.example/x"}) is None
    assert webhook.notify_pending(ask(book), {webhook.WEBHOOK_ENV: "ftp://x/y"}) is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and webhook.WEBHOOK_ENV in warnings[0], warnings
