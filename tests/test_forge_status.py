"""The requests a process opened, for the notebook's status item (issue 44, item 1: the
address "shown in the cell, the editor and the status item"): the pull_request tool notes
each request it opened in :func:`iac_kernel.forge.clients.opened_here` (only opened ones),
and a real kernel process puts them in its session info (``pullRequests``) and pushes
them to an open status comm as soon as the request is open, before the call's card
completes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from forge_support import (
    PR,
    PROJECT,
    Site,
    forge_kernel,
    needs_git_sandbox,
    run_session,
    site_fixture,  # noqa: F401 (the site fixture)
    spec_fixture,  # noqa: F401 (the spec fixture)
)
from guard_support import REJECT_ONCE, Asker
from iac_kernel.forge import clients
from iac_kernel.forge.clients import Opened
from iac_kernel.kernel.session.status import STATUS_TARGET
from iac_kernel.tools.pull_request import request_prompt
from kernel_harness import KernelHarness
from kernel_support import SecondClient


def sandboxed(test: Any) -> Any:
    """``test`` skipped where git or the guard's sandbox is missing."""
    for mark in needs_git_sandbox:
        test = mark(test)
    return test


@pytest.fixture
def fresh_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's record and listeners, empty for the test and put back after it."""
    monkeypatch.setattr(clients, "_opened", [])
    monkeypatch.setattr(clients, "listeners", [])


def test_the_record_keeps_the_newest_last_and_tells_every_listener(fresh_record):
    told: list[int] = []

    def broken() -> None:
        raise RuntimeError("a front end's bug")

    clients.listeners.extend([broken, lambda: told.append(len(clients.opened_here()))])
    extra = 3
    for number in range(1, clients.KEPT_OPENED + extra + 1):
        noun = "merge request" if number % 2 else "pull request"
        clients.note_opened(Opened(number, f"https://forge.test/o/r/pull/{number}", noun))
    record = clients.opened_here()
    assert [entry["number"] for entry in record] == list(
        range(extra + 1, clients.KEPT_OPENED + extra + 1)
    )
    assert record[-1] == {
        "number": clients.KEPT_OPENED + extra,
        "url": f"https://forge.test/o/r/pull/{clients.KEPT_OPENED + extra}",
        "noun": "merge request" if (clients.KEPT_OPENED + extra) % 2 else "pull request",
    }
    # each addition told the listeners once, the broken one did not stop the next
    assert told == [min(n, clients.KEPT_OPENED) for n in range(1, clients.KEPT_OPENED + extra + 1)]
    record.clear()  # a copy: the caller cannot change the record
    assert len(clients.opened_here()) == clients.KEPT_OPENED


class Rejects(Asker):
    """Rejects the pull request's question, allows everything else."""

    async def __call__(self, request: Any) -> Any:
        if request.tool_name == "pull_request" and "argv" not in request.input:
            self.requests.append(request)
            return REJECT_ONCE
        return await super().__call__(request)


@sandboxed
async def test_only_an_opened_request_is_recorded(site: Site, fresh_record):
    told: list[int] = []
    clients.listeners.append(lambda: told.append(1))
    edits = iter(("one", "two", "three", "four"))
    word = next(edits)

    def edit() -> dict[str, str]:
        nonlocal word
        old, word = word, next(edits)
        return {"path": "main.tf", "old_string": f'"{old}"', "new_string": f'"{word}"'}

    # the user rejects the call: nothing pushed, nothing opened
    rejected, ask, _ = await run_session(site, PR, ask=Rejects(), edit=edit())
    assert rejected.status != "completed" and ask.requests, rejected.output
    # the forge refuses the request after the push
    site.forge.refuse_pulls = 422
    refused, _, _ = await run_session(site, PR, edit=edit())
    assert refused.status != "completed" and "422" in refused.output, refused.output
    assert site.forge.pulls == [] and clients.opened_here() == [] and told == []
    site.forge.refuse_pulls = None
    result, _, _ = await run_session(site, PR, edit=edit())
    assert result.status == "completed", result.output
    url = f"http://{site.forge.host}/{PROJECT}/pull/1"
    assert clients.opened_here() == [{"number": 1, "url": url, "noun": "pull request"}]
    assert told == [1]


def comm_messages(client: SecondClient, comm_id: str) -> list[dict[str, Any]]:
    """Everything the status comm ``comm_id`` sent that ``client`` has not read yet."""
    found = []
    while client.kc.iopub_channel.msg_ready():
        msg = client.kc.get_iopub_msg(timeout=1)
        if msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == comm_id:
            found.append(msg["content"]["data"])
    return found


@sandboxed
def test_the_kernel_says_which_requests_it_opened_and_pushes_a_new_one(
    site: Site, outside_tmp: Path
):
    assert "open a pull request" in request_prompt("x").lower()  # what the script matches
    kernel: KernelHarness = forge_kernel(site, outside_tmp)
    other = SecondClient(kernel)
    try:
        info = other.reply(other.shell("kernel_info_request", {}), 10)["content"]["iac_kernel"]
        assert info["pullRequests"] == []
        comm_id = uuid.uuid4().hex
        other.shell("comm_open", {"comm_id": comm_id, "target_name": STATUS_TARGET, "data": {}})
        assert other.comm_data(comm_id, "session_info")["info"]["pullRequests"] == []
        assert kernel.execute("change the input").status == "ok"
        comm_messages(other, comm_id)  # the edit's turn
        result = kernel.execute("%pr Bump the input", allow_stdin=True, on_stdin=lambda _p: "1")
        assert result.status == "ok", result.reply["content"]
        url = f"http://{site.forge.host}/{PROJECT}/pull/1"
        assert url in result.markdown()
        opened = [{"number": 1, "url": url, "noun": "pull request"}]
        info = other.reply(other.shell("kernel_info_request", {}), 10)["content"]["iac_kernel"]
        assert info["pullRequests"] == opened
        sent = comm_messages(other, comm_id)
    finally:
        other.stop()
        kernel.stop()
    pushed = [
        i
        for i, m in enumerate(sent)
        if m.get("type") == "session_info" and m["info"]["pullRequests"]
    ]
    assert pushed and sent[pushed[0]]["info"]["pullRequests"] == opened
    done = [
        i
        for i, m in enumerate(sent)
        if m.get("type") == "card"
        and m["card"]["name"] == "pull_request"
        and m["card"]["status"] == "done"
    ]
    # at once: the request was pushed before its call's card completed (the turn's own
    # pushes come later)
    assert done and pushed[0] < done[0], [
        (m.get("type"), m.get("card", {}).get("status")) for m in sent
    ]
