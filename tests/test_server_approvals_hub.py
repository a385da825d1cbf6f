"""The approvals API on JupyterHub: two hub users whose servers run as one OS user (the
SimpleLocalProcessSpawner), so only the hub can tell them apart. The approver is the hub
user behind the token, with the hub's groups: bob approves alice's record from his own
server, alice cannot approve her own from hers, and bob's token does not open alice's
server. The records are alice's, as her kernel makes them on a hub.

A real JupyterHub on loopback (tests/hub_support.py); skipped, saying which, when its
programs are missing (``bash .ci/jupyterhub`` installs them).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub_support import Hub, missing_programs
from iac_kernel.team.approvals import Approval, Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, open_store
from test_server_approvals import CARD, PLAN, api_call, refused

ALICE = Identity("alice", "jupyterhub")
ONE = Requirement(approvers=1, rules=("production needs a second person",))
PLATFORM = Requirement(approvers=1, groups={"platform": 1}, rules=("platform signs off",))


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hub, str, dict[str, str]]]:
    """A hub with alice's and bob's servers on one team store; bob is in ``platform``.
    Yields the hub, the store's URL and each user's token."""
    missing = missing_programs()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    directory = Path(os.path.realpath(tmp_path_factory.mktemp("approvals-hub")))
    url = f"sqlite:///{directory / 'team.sqlite'}"
    hub = Hub(directory, {"IAC_KERNEL_TEAM_STORE": url, "IAC_KERNEL_LOG_LEVEL": "INFO"})
    try:
        hub.start()
        hub.api("POST", "/hub/api/groups/platform", {"users": ["bob"]})
        tokens = {}
        for user in ("alice", "bob"):
            hub.add_user_with_server(user)
            tokens[user] = hub.token(user, [f"access:servers!user={user}"])
        yield hub, url, tokens
    finally:
        hub.stop()


@pytest.fixture
def book(hub) -> Iterator[Approvals]:
    store = open_store(hub[1])
    yield Approvals(store)
    store.close()


def call(hub: Hub, user: str, token: str, method: str, path: str, body: object = None):
    """A call to ``user``'s server behind the hub's proxy, with ``token``."""
    return api_call(f"{hub.http}/user/{user}", method, path, body, token)


def ask(book: Approvals, need: Requirement = ONE) -> Approval:
    binding = {
        "folder": "/home/alice/infra",
        "workspace": "prod",
        "data_dir": None,
        "cli_config": None,
        "var_files": [],
        "lineage": None,
    }
    return book.request(ALICE, secrets.token_hex(32), binding, PLAN["summary"], need, card=CARD)


def test_the_approver_is_the_hub_user_not_the_servers_os_user(hub, book) -> None:
    server, _, tokens = hub
    record = ask(book)
    status, listing = call(server, "bob", tokens["bob"], "GET", "")
    assert status == 200, listing
    assert listing["you"] == "bob"
    row = next(r for r in listing["approvals"] if r["id"] == record.id)
    assert row["requester"] == "alice" and row["yours"] is False
    # Alice, on her own server, is the requester: refused, nothing changed.
    status, mine = call(server, "alice", tokens["alice"], "GET", "")
    assert mine["you"] == "alice"
    assert next(r for r in mine["approvals"] if r["id"] == record.id)["yours"] is True
    message = refused(
        call(server, "alice", tokens["alice"], "POST", f"/{record.id}/approve", {}),
        409,
        "cannot approve",
    )
    assert "alice" in message
    assert book.get(record.id).votes == ()
    # Bob's token does not open alice's server.
    status, _ = call(server, "alice", tokens["bob"], "POST", f"/{record.id}/approve", {})
    assert status in (401, 403)
    assert book.get(record.id).votes == ()
    # Bob approves from his own server, as bob.
    body = {"note": "looks right", "plan_sha256": record.plan_sha256}
    status, answer = call(server, "bob", tokens["bob"], "POST", f"/{record.id}/approve", body)
    assert status == 200, answer
    stored = book.get(record.id)
    assert stored.status == "approved"
    assert [(v.approver, v.note) for v in stored.votes] == [("bob", "looks right")]


def test_a_group_rule_takes_the_hubs_groups(hub, book) -> None:
    server, _, tokens = hub
    record = ask(book, PLATFORM)
    status, answer = call(server, "bob", tokens["bob"], "POST", f"/{record.id}/approve", {})
    assert status == 200, answer
    stored = book.get(record.id)
    assert stored.status == "approved"
    assert "platform" in stored.votes[0].groups


def _identity_of(hub: Hub, token: str, **env: str) -> subprocess.CompletedProcess[str]:
    """What ``process_identity`` says in a process holding ``token``, as a kernel holds
    its server's (the rest of the environment as given)."""
    code = (
        "from iac_kernel.team.store import process_identity as p; i = p(); "
        "print(i.name, i.via, ','.join(sorted(i.groups)))"
    )
    environ = {
        **os.environ,
        "JUPYTERHUB_API_URL": f"{hub.http}/hub/api",
        "JUPYTERHUB_API_TOKEN": token,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60
    )


def test_a_kernel_on_the_hub_is_its_tokens_user_whatever_its_environment_says(hub) -> None:
    server, _, _ = hub
    alice = server.token("alice", ["read:users:groups!user=alice"])
    bob = server.token("bob", ["read:users:groups!user=bob"])
    forged = _identity_of(server, alice, JUPYTERHUB_USER="bob", USER="bob")
    assert forged.returncode == 0, forged.stderr
    assert forged.stdout.split() == ["alice", "jupyterhub"]  # not the OS user, not "bob"
    assert _identity_of(server, bob).stdout.split() == ["bob", "jupyterhub", "platform"]
    wrong = _identity_of(server, "not-a-token")
    assert wrong.returncode != 0
    assert "could not ask JupyterHub who this is" in wrong.stderr.strip().splitlines()[-1]
