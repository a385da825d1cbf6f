"""Editors on JupyterHub: a user's token reaches that user's sessions through
``/user/NAME/iac-kernel/acp``; another user's token is refused.

A real JupyterHub on loopback (DummyAuthenticator, SimpleLocalProcessSpawner,
configurable-http-proxy). The tests skip, saying which, only when those programs are
missing (``bash .ci/jupyterhub`` installs them).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import text_block

from hub_support import Hub, missing_programs
from iac_kernel.sessions.store import SessionStore
from server_support import bridge, bridge_command, bridge_env, upgrade_status
from test_acp_support import WAIT

SCRIPT = Path(__file__).parent / "scripts" / "endpoint_main.json"


@pytest.fixture(autouse=True)
def hub_programs() -> None:
    """Skip, naming what is missing, when the hub's programs are not installed; under CI
    (which runs ``.ci/jupyterhub``) that is a failure, as for the other installed tools."""
    missing = missing_programs()
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(missing)
    pytest.skip(missing)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    directory = Path(os.path.realpath(tmp_path / "hub"))
    directory.mkdir()
    # The user servers keep their store on their home volume (the default location).
    hub = Hub(directory, {"IAC_KERNEL_SCRIPT": str(SCRIPT), "IAC_KERNEL_LOG_LEVEL": "INFO"})
    try:
        yield hub.start()
    finally:
        hub.stop()


async def one_turn(url: str, token: str, work: Path, log: Path) -> str:
    """Through the bridge: a new session in ``work`` and one turn; its id."""
    async with bridge(url, token, log) as (conn, *_rest):
        created = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), WAIT)
        answer = await asyncio.wait_for(
            conn.prompt(session_id=created.session_id, prompt=[text_block("editor follow-up")]),
            WAIT,
        )
        assert answer.stop_reason == "end_turn"
    return created.session_id


async def test_a_users_token_reaches_their_sessions_and_no_one_elses(
    hub: Hub, tmp_path: Path
) -> None:
    await asyncio.to_thread(hub.add_user_with_server, "alice")
    await asyncio.to_thread(hub.add_user_with_server, "bob")
    scope = "access:servers!user=alice"
    alice = await asyncio.to_thread(hub.token, "alice", [scope])
    bob = await asyncio.to_thread(hub.token, "bob", ["access:servers!user=bob"])
    home = hub.home("alice")
    work = home / "infra"
    work.mkdir()

    sid = await one_turn(hub.acp_url("alice"), alice, work, tmp_path / "alice.log")
    # Stored on alice's home volume; listed again from there by a new connection.
    store = SessionStore(home / ".iac-code" / "sessions")
    assert [m.session_id for m in store.list()] == [sid]
    async with bridge(hub.acp_url("alice"), alice, tmp_path / "alice2.log") as (conn, *_rest):
        listed = (await conn.list_sessions()).sessions
        assert [s.session_id for s in listed] == [sid]
    assert (
        not (hub.home("bob") / ".iac-code" / "sessions").exists()
        or not SessionStore(hub.home("bob") / ".iac-code" / "sessions").list()
    )

    # Bob's token does not open alice's endpoint, not even the upgrade.
    assert await upgrade_status(hub.acp_url("alice"), {"Authorization": f"Bearer {bob}"}) in (
        401,
        403,
    )
    assert await upgrade_status(hub.acp_url("alice"), {}) in (401, 403)
    assert await upgrade_status(hub.acp_url("bob"), {"Authorization": f"Bearer {bob}"}) == 101
    # Through the bridge: one clear line on stderr and a non-zero exit.
    refused = await asyncio.to_thread(
        subprocess.run,
        bridge_command(hub.acp_url("alice")),
        env=bridge_env(bob),
        input=b"",
        capture_output=True,
        timeout=WAIT * 3,
    )
    assert refused.returncode != 0
    lines = refused.stderr.decode().strip().splitlines()
    assert lines == [lines[-1]] and "refused" in lines[-1], lines
    assert bob not in refused.stderr.decode()
    for log in (tmp_path / "alice.log", tmp_path / "alice2.log"):
        assert alice not in log.read_text()
    assert refused.stdout == b""


async def test_a_named_server_under_jupyterhub_6_rules(hub: Hub, tmp_path: Path) -> None:
    """JupyterHub 6 takes only lowercase slugs as new server names; the endpoint of a
    named server is ``/user/NAME/SERVER/iac-kernel/acp`` and reaches that server's
    sessions, stored on the user's home volume."""
    from urllib.error import HTTPError

    with pytest.raises(HTTPError) as invalid:
        await asyncio.to_thread(hub.api, "POST", "/hub/api/users/alice/servers/Infra_Review")
    assert invalid.value.code == 400
    await asyncio.to_thread(hub.add_user_with_server, "alice", "infra-review")
    token = await asyncio.to_thread(hub.token, "alice", ["access:servers!user=alice"])
    work = hub.home("alice") / "named"
    work.mkdir(parents=True)
    url = hub.acp_url("alice", "infra-review")
    sid = await one_turn(url, token, work, tmp_path / "named.log")
    store = SessionStore(hub.home("alice") / ".iac-code" / "sessions")
    assert [m.session_id for m in store.list()] == [sid]
    # The default server is not running: its endpoint is not reached with that token.
    assert await upgrade_status(hub.acp_url("alice"), {"Authorization": f"Bearer {token}"}) != 101
