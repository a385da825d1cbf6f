"""Approvals from an editor (iac_kernel/acp/approvals.py): ``_iac/approvals/*`` on the
Jupyter server's ACP WebSocket, as the user behind the bearer token, and on ``iac-kernel
acp`` over stdio, as the process's user. Records are made here as ``alice`` (another
person); who votes is never read from the params. Refusals are one JSON-RPC error with
a one-line message, change nothing, and the connection goes on."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.acp.approvals import APPROVE, LIST, REFUSED, REJECT
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, open_store, os_identity
from server_support import (
    SCRIPT,
    WAIT,
    JupyterServer,
    WsClient,
    book_fixture,  # noqa: F401 (the book fixture)
    bridge,
    server_env,
    team_fixture,  # noqa: F401 (the team fixture)
)
from team_support import new_record

ALICE = Identity("alice", groups=frozenset({"dev"}))
ME = os_identity()
ONE = Requirement(approvers=1, rules=("production needs a second person",))
SUMMARY = "Plan: 0 to add, 0 to change, 1 to destroy."


@pytest.fixture
async def client(team: tuple[JupyterServer, str]) -> AsyncIterator[WsClient]:
    server = team[0]
    ws = await WsClient.open(server.acp_url, server.token)
    try:
        answer = await ws.call("initialize", {"protocolVersion": 1})
        assert "result" in answer, answer
        yield ws
    finally:
        ws.close()


def ask(book: Approvals, who: Identity = ALICE) -> Approval:
    """A new pending record of ``who`` (its own plan, so never an earlier one)."""
    return new_record(book, who, SUMMARY, ONE)


def refusal(answer: dict[str, Any], code: int, words: str) -> str:
    """The one-line message of an error answer with ``code`` that says ``words``."""
    assert "error" in answer, answer
    error = answer["error"]
    assert error["code"] == code, error
    assert words in error["message"], error
    assert "\n" not in error["message"].strip(), error
    return error["message"]


async def test_a_remote_client_approves_as_the_servers_user(team, book, client) -> None:
    record = ask(book)
    listed = await client.call(LIST, {})
    assert listed["result"]["you"] == ME.name
    mine = [r for r in listed["result"]["approvals"] if r["id"] == record.id]
    assert len(mine) == 1, listed
    assert mine[0]["requester"] == "alice" and mine[0]["status"] == "pending"
    assert mine[0]["plan_sha256"] == record.plan_sha256
    params = {
        "id": record.id,
        "note": "checked the destroy",
        "plan_sha256": record.plan_sha256,
        "approver": "mallory",  # never read: the vote is the token's user
        "by": "mallory",
    }
    answer = await client.call(APPROVE, params)
    assert answer["result"]["approval"]["status"] == "approved", answer
    stored = book.get(record.id)
    assert stored.status == "approved"
    assert [(v.approver, v.decision, v.note) for v in stored.votes] == [
        (ME.name, "approve", "checked the destroy")
    ]
    # Approved records are no longer pending: the list drops it.
    listed = await client.call(LIST, {})
    assert record.id not in [r["id"] for r in listed["result"]["approvals"]]
    # A second decision on the closed record is refused, and changes nothing.
    refusal(await client.call(REJECT, {"id": record.id}), REFUSED, "not pending")
    assert len(book.get(record.id).votes) == 1


async def test_a_rejection_keeps_its_note(team, book, client) -> None:
    record = ask(book)
    answer = await client.call(REJECT, {"id": record.id, "note": "not in the freeze"})
    assert answer["result"]["approval"]["status"] == "rejected", answer
    rejection = book.get(record.id).public()["rejection"]
    assert (rejection["by"], rejection["note"]) == (ME.name, "not in the freeze")


async def test_the_requester_cannot_approve_their_own_record(team, book, client) -> None:
    record = ask(book, who=ME)  # the token's user asked for it
    message = refusal(await client.call(APPROVE, {"id": record.id}), REFUSED, "cannot approve")
    assert ME.name in message
    stored = book.get(record.id)
    assert stored.status == "pending" and stored.votes == ()


async def test_refusals_are_one_line_and_the_connection_goes_on(team, book, client) -> None:
    record = ask(book)
    refusal(await client.call(APPROVE, {"id": "nosuchrecord"}), -32602, "nosuchrecord")
    refusal(await client.call(APPROVE, {"id": "../../etc"}), -32602, "id:")
    refusal(await client.call(APPROVE, {"note": "no id"}), -32602, "id:")
    refusal(await client.call(APPROVE, [record.id]), -32602, "params")
    refusal(await client.call(REJECT, {"id": record.id, "note": 5}), -32602, "note")
    changed = {"id": record.id, "plan_sha256": "0" * 64}
    refusal(await client.call(APPROVE, changed), REFUSED, "plan")
    stored = book.get(record.id)
    assert stored.status == "pending" and stored.votes == ()
    # The same connection still answers, and still decides.
    answer = await client.call(APPROVE, {"id": record.id, "plan_sha256": record.plan_sha256})
    assert answer["result"]["approval"]["status"] == "approved", answer


async def test_an_editor_through_the_bridge_approves_as_the_tokens_user(
    team, book, tmp_path: Path
) -> None:
    """``iac-kernel acp --remote``: the editor's request passes through to the server."""
    from acp import RequestError

    server = team[0]
    record, own = ask(book), ask(book, who=ME)
    async with bridge(server.acp_url, server.token, tmp_path / "bridge.log") as (conn, *_):
        answer = await asyncio.wait_for(
            conn.ext_method(APPROVE.removeprefix("_"), {"id": record.id, "note": "via zed"}),
            WAIT,
        )
        assert answer["approval"]["status"] == "approved", answer
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(conn.ext_method(APPROVE.removeprefix("_"), {"id": own.id}), WAIT)
        assert refused.value.code == REFUSED and "cannot approve" in str(refused.value)
    assert [(v.approver, v.note) for v in book.get(record.id).votes] == [(ME.name, "via zed")]
    assert book.get(own.id).votes == ()


async def test_a_local_editor_approves_as_the_process_user(tmp_path: Path) -> None:
    """``iac-kernel acp`` on stdio: the process's (OS) user votes."""
    url = f"sqlite:///{tmp_path / 'team.sqlite'}"
    store = open_store(url)
    try:
        book = Approvals(store)
        record, own = ask(book), ask(book, who=ME)
        env = server_env(tmp_path, tmp_path / "run", SCRIPT, IAC_KERNEL_TEAM_STORE=url)
        lines = [
            {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {"id": 2, "method": APPROVE, "params": {"id": record.id, "note": "ok"}},
            {"id": 3, "method": APPROVE, "params": {"id": own.id}},
            {"id": 4, "method": LIST, "params": {}},
        ]
        stdin = "".join(json.dumps({"jsonrpc": "2.0", **m}) + "\n" for m in lines).encode()
        answers = await asyncio.wait_for(_stdio(stdin, env, tmp_path, len(lines)), WAIT)
        assert answers[2]["result"]["you"] == ME.name, answers
        assert [(v.approver, v.note) for v in book.get(record.id).votes] == [(ME.name, "ok")]
        refusal(answers[3], REFUSED, "cannot approve")
        assert book.get(own.id).votes == ()
        # Requests run side by side: the list may come before or after the approval.
        assert own.id in [r["id"] for r in answers[4]["result"]["approvals"]]
    finally:
        store.close()


async def _stdio(stdin: bytes, env: dict[str, str], cwd: Path, count: int) -> dict[Any, Any]:
    """The answers of ``iac-kernel acp`` to ``stdin``'s ``count`` requests, by id (its
    input stays open until they came: at its end the server stops)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "iac_kernel",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    answers: dict[Any, Any] = {}
    try:
        process.stdin.write(stdin)
        await process.stdin.drain()
        while len(answers) < count:
            line = await process.stdout.readline()
            assert line, f"iac-kernel acp ended after {answers}"
            message = json.loads(line)
            if "id" in message and "method" not in message:
                answers[message["id"]] = message
        process.stdin.close()
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return answers
