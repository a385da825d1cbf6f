"""The approvals API of the server extension (iac_kernel/server/approvals.py) against a real
``jupyter server``: the records the approvals panel lists and opens, and the approver's
decision. Records are made here as ``alice`` (another person); the server decides as the
OS user it runs as, whatever the request says. Refusals are one line in a JSON error, and
change nothing in the store."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.kernel.render import plan_card
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, os_identity
from server_support import (
    SCRIPT,
    JupyterServer,
    book_fixture,  # noqa: F401 (the book fixture)
    server_env,
    team_fixture,  # noqa: F401 (the team fixture)
)
from team_support import new_record
from test_server_sandbox_peer import _bwrap_sharing_the_network

ALICE = Identity("alice", groups=frozenset({"dev"}))
ME = os_identity()
ONE = Requirement(approvers=1, rules=("production needs a second person",))
PLATFORM = Requirement(approvers=1, groups={"platform": 1}, rules=("platform signs off",))
PLAN = {
    "summary": "Plan: 1 to add, 0 to change, 1 to destroy.",
    "resources": [
        {"address": "aws_db_instance.main", "action": "delete", "why": "removed", "changes": []},
        {"address": "aws_s3_bucket.logs", "action": "create", "why": "new", "changes": []},
    ],
    "checks": [{"check_id": "CKV_AWS_18", "name": "logging", "address": "aws_s3_bucket.logs"}],
}
CARD = plan_card.bundle(PLAN, "toolu_apply_1", "s1")[plan_card.PLAN_MIME]


def ask(book: Approvals, who: Identity = ALICE, need: Requirement = ONE) -> Approval:
    """A new pending record of ``who`` (its own plan, so never an earlier one)."""
    return new_record(book, who, PLAN["summary"], need, card=CARD)


def call(
    server: JupyterServer, method: str, path: str, body: Any = None, token: str | None = ""
) -> tuple[int, Any]:
    """(HTTP status, decoded JSON) of an API call; ``token=None`` sends none."""
    token = server.token if token == "" else token
    return api_call(server.http, method, path, body, token)


def api_call(
    base: str, method: str, path: str, body: Any = None, token: str | None = None
) -> tuple[int, Any]:
    """(HTTP status, decoded JSON) of a call to the approvals API of the server at ``base``."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    request = urllib.request.Request(
        base + "/iac-kernel/approvals" + path, data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def refused(answer: tuple[int, Any], status: int, words: str) -> str:
    """The one-line message of a refusal with ``status`` that says ``words``."""
    code, body = answer
    assert code == status, answer
    message = body["message"]
    assert words in message, message
    assert "\n" not in message.strip(), message
    return message


def test_the_pending_records_are_listed_and_one_opens_on_its_plan_card(team, book) -> None:
    server, _ = team
    record = ask(book)
    status, listing = call(server, "GET", "")
    assert status == 200
    assert listing["you"] == ME.name
    mine = [r for r in listing["approvals"] if r["id"] == record.id]
    assert len(mine) == 1, listing
    row = mine[0]
    assert row["requester"] == "alice"
    assert row["status"] == "pending"
    assert row["summary"] == PLAN["summary"]
    assert row["rule"] == "production needs a second person"
    assert row["waiting"] == "waiting for 1 approval"
    assert row["expires_at"] == record.public()["expires_at"]
    assert row["yours"] is False and row["answered"] is False
    assert "card" not in row  # the list stays small: cards come one at a time
    status, shown = call(server, "GET", f"/{record.id}")
    assert status == 200
    assert shown["approval"]["card"] == CARD
    assert shown["approval"]["plan_sha256"] == record.plan_sha256
    # The panel's refresh of an open record asks without the card.
    status, again = call(server, "GET", f"/{record.id}?card=0")
    assert status == 200 and "card" not in again["approval"]
    assert again["approval"]["waiting"] == "waiting for 1 approval"
    # Decided records leave the pending list, and are there on asking for them.
    book.reject(record.id, Identity("bob"), note="not now")
    ids = [r["id"] for r in call(server, "GET", "")[1]["approvals"]]
    assert record.id not in ids
    rejected = call(server, "GET", "?status=rejected,approved")[1]["approvals"]
    assert record.id in [r["id"] for r in rejected]


def test_an_approval_is_the_servers_user_whatever_the_request_names(team, book) -> None:
    server, _ = team
    record = ask(book)
    body = {
        "note": "checked the destroy",
        "plan_sha256": record.plan_sha256,
        "approver": "mallory",  # a field no handler reads
        "by": "mallory",
    }
    status, answer = call(server, "POST", f"/{record.id}/approve", body)
    assert status == 200, answer
    assert answer["approval"]["status"] == "approved"
    stored = book.get(record.id)
    assert stored.status == "approved"
    assert [(v.approver, v.decision, v.note) for v in stored.votes] == [
        (ME.name, "approve", "checked the destroy")
    ]
    # A second decision on a closed record is refused, and changes nothing.
    refused(call(server, "POST", f"/{record.id}/reject", {"note": "late"}), 409, "not pending")
    assert len(book.get(record.id).votes) == 1


def test_a_rejection_keeps_its_note(team, book) -> None:
    server, _ = team
    record = ask(book)
    status, answer = call(server, "POST", f"/{record.id}/reject", {"note": "not in the freeze"})
    assert status == 200, answer
    stored = book.get(record.id)
    assert stored.status == "rejected"
    assert stored.public()["rejection"]["by"] == ME.name
    assert stored.public()["rejection"]["note"] == "not in the freeze"


def test_the_requester_cannot_approve_their_own_record(team, book) -> None:
    server, _ = team
    record = ask(book, who=ME)  # the server's own user asked for it
    listed = [r for r in call(server, "GET", "")[1]["approvals"] if r["id"] == record.id]
    assert listed[0]["yours"] is True
    message = refused(call(server, "POST", f"/{record.id}/approve", {}), 409, "cannot approve")
    assert ME.name in message
    refused(call(server, "POST", f"/{record.id}/reject", {}), 409, "cannot approve or reject")
    stored = book.get(record.id)
    assert stored.status == "pending" and stored.votes == ()


def test_refusals_are_one_line_and_change_nothing(team, book) -> None:
    server, _ = team
    record = ask(book)
    refused(call(server, "GET", "/0123456789ab"), 404, "no approval record")
    refused(call(server, "POST", "/0123456789ab/approve", {}), 404, "no approval record")
    refused(
        call(server, "POST", f"/{record.id}/approve", {"plan_sha256": "c" * 64}),
        409,
        "the plan changed",
    )
    refused(call(server, "POST", f"/{record.id}/approve", {"note": 5}), 400, "note")
    refused(call(server, "POST", f"/{record.id}/approve", b"{not json"), 400, "JSON")
    refused(call(server, "POST", f"/{record.id}/approve", ["x"]), 400, "JSON object")
    refused(call(server, "GET", "?status=bogus"), 400, "bogus")
    assert call(server, "POST", f"/{record.id}/cancel", {})[0] == 404  # no such route
    stored = book.get(record.id)
    assert stored.status == "pending" and stored.votes == ()


def test_a_group_rule_needs_a_member_of_the_group(team, book) -> None:
    server, _ = team
    assert "platform" not in ME.groups
    record = ask(book, need=PLATFORM)
    listed = [r for r in call(server, "GET", "")[1]["approvals"] if r["id"] == record.id]
    assert listed[0]["waiting"] == "waiting for 1 approval by platform"
    refused(call(server, "POST", f"/{record.id}/approve", {}), 409, "needs a member of platform")
    assert book.get(record.id).votes == ()


def test_nothing_is_read_or_decided_without_the_servers_authentication(team, book) -> None:
    server, _ = team
    record = ask(book)
    for token in (None, "not-the-token"):
        assert call(server, "GET", "", token=token)[0] == 403
        assert call(server, "GET", f"/{record.id}", token=token)[0] == 403
        assert call(server, "POST", f"/{record.id}/approve", {}, token=token)[0] == 403
    assert book.get(record.id).votes == ()


#: A POST by hand (argv: port, token, record id); prints the status line.
CLIENT = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
sock.sendall(
    b"POST /iac-kernel/approvals/" + sys.argv[3].encode() + b"/approve HTTP/1.1\\r\\n"
    b"Host: 127.0.0.1\\r\\nContent-Length: 0\\r\\nAuthorization: token "
    + sys.argv[2].encode() + b"\\r\\n\\r\\n"
)
print("status:", sock.recv(200).split(b"\\r\\n")[0].decode())
"""


@pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
def test_a_sandboxed_process_cannot_approve_even_with_the_token(
    team, book, outside_tmp: Path
) -> None:
    server, _ = team
    record = ask(book)
    client = outside_tmp / "client.py"
    client.write_text(CLIENT)
    argv = [sys.executable, str(client), str(server.port), server.token, record.id]

    def run(command: list[str]) -> str:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr

    boxed = run(_bwrap_sharing_the_network(argv))
    assert "status: HTTP/1.1 403" in boxed, boxed
    assert book.get(record.id).votes == ()
    # Control: the same client on the host approves.
    assert "status: HTTP/1.1 200" in run(argv)
    assert book.get(record.id).status == "approved"


def test_an_unreachable_store_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    missing = tmp_path / "no-such-folder"
    url = f"postgresql://nobody@/iac?host={missing}"
    env = server_env(tmp_path, tmp_path / "run", SCRIPT, IAC_KERNEL_TEAM_STORE=url)
    jupyter = JupyterServer(root, env).start()
    try:
        message = refused(call(jupyter, "GET", ""), 503, "team store")
        assert "unreachable" in message
        refused(call(jupyter, "POST", "/0123456789ab/approve", {}), 503, "team store")
    finally:
        jupyter.stop()
