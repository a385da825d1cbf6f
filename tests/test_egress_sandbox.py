"""Issue 31, item 1: every sandbox has its own network; the egress proxy is its only way
out. Real bash calls, a real mitmdump, loopback servers made reachable only by rules."""

from __future__ import annotations

import asyncio
import functools
import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.agent.permissions import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE
from iac_kernel.egress import environment
from iac_kernel.guard.sandbox.bwrap import unusable_reason

pytestmark = [
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
    pytest.mark.skipif(environment.egress_python() is None, reason="iac-kernel egress install"),
]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello-from-loopback"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def _harness(tmp_path: Path, mode: str = "bypass") -> Harness:
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(tmp_path / "ws", bin_dir, log, mode=mode)
    harness.settings.egress_allow = "allowed.test"
    return harness


async def _run(harness: Harness, command: str, ask: Asker | None = None) -> str:
    result = await harness.run(command, ask or Asker())
    assert result is not None
    return result.content


CURL = "curl -sS -m 10 "


class EgressAsker(Asker):
    """Allows the bash call itself; answers network questions with ``egress``."""

    def __init__(self, egress: str) -> None:
        super().__init__()
        self.egress = egress

    async def __call__(self, request):
        self.requests.append(request)
        return self.egress if "egress_host" in request.input else ALLOW_ONCE

    def egress_questions(self):
        return [r.input for r in self.requests if "egress_host" in r.input]


async def test_allowed_loopback_by_rule_through_connect_and_socks(tmp_path, server):
    harness = _harness(tmp_path)
    harness.settings.egress_allow = "127.0.0.1,localhost"
    harness.settings.egress_allow_private = f"127.0.0.1:{server}"
    url = f"http://127.0.0.1:{server}/"
    out = await _run(
        harness,
        f"{CURL}{url}; echo; {CURL}-p {url}; echo; "
        f'{CURL}--proxy "$ALL_PROXY" {url}; echo; '
        f"{CURL}--proxy socks5h://$(echo $ALL_PROXY | cut -d/ -f3) http://localhost:{server}/",
    )
    assert out.count("hello-from-loopback") == 4, out


async def test_loopback_is_unreachable_without_a_rule(tmp_path, server):
    harness = _harness(tmp_path)
    harness.settings.egress_allow = "127.0.0.1,localhost,127.1,2130706433,0x7f000001"
    routes = [
        f"{CURL}http://127.0.0.1:{server}/",
        f"{CURL}--noproxy '*' http://127.0.0.1:{server}/",
        f"{CURL}http://localhost.:{server}/",
        f"{CURL}http://2130706433:{server}/",
        f"{CURL}http://0x7f000001:{server}/",
        f"{CURL}http://127.1:{server}/",
        f"{CURL}-g 'http://[::1]:{server}/'",
        f"{CURL}-g 'http://[::ffff:127.0.0.1]:{server}/'",
        f"{CURL}-p http://127.0.0.1:{server}/",
        f'{CURL}--proxy "$ALL_PROXY" http://127.0.0.1:{server}/',
        f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{server}/',"
        ' timeout=5).read())"',
        f'env -u http_proxy -u HTTP_PROXY python3 -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{server}/', timeout=5).read())\"",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {server}), 5)"
        "; print('hello-from-loopback connected')\"",
        f"grep -qi ':{server:04X} ' /proc/net/tcp && echo hello-from-loopback-port-seen",
    ]
    for command in routes:
        out = await _run(harness, command + " 2>&1")
        assert "hello-from-loopback" not in out, (command, out)


async def test_metadata_and_private_ranges_refused(tmp_path):
    harness = _harness(tmp_path)
    harness.settings.egress_allow = "169.254.169.254,10.0.0.1,100.64.0.1,0.0.0.0"
    for target in ("169.254.169.254", "10.0.0.1", "100.64.0.1", "0.0.0.0"):
        out = await _run(harness, f"{CURL}-v http://{target}/latest/meta-data/ 2>&1")
        assert "refused" in out.lower() or "502" in out, out


async def test_unknown_host_is_asked_and_the_answer_obeyed(tmp_path, server):
    harness = _harness(tmp_path, mode="default")
    harness.settings.egress_allow_private = f"127.0.0.1:{server}"
    url = f"http://localhost:{server}/"
    rejecting = EgressAsker(REJECT_ONCE)
    out = await _run(harness, f"{CURL}{url}", rejecting)
    assert "hello-from-loopback" not in out
    assert rejecting.egress_questions() == [{"egress_host": "localhost", "port": server}]
    ask = EgressAsker(ALLOW_ONCE)
    out = await _run(harness, f"{CURL}{url}; {CURL}{url}", ask)
    assert out.count("hello-from-loopback") == 2
    assert len(ask.egress_questions()) == 1  # once covers the rest of the call
    again = EgressAsker(REJECT_ONCE)
    assert "hello-from-loopback" not in await _run(harness, f"{CURL}{url}", again)
    assert len(again.egress_questions()) == 1  # once was for that call only
    await _run(harness, f"{CURL}{url}", EgressAsker(ALLOW_ALWAYS))
    later = EgressAsker(REJECT_ONCE)
    out = await _run(harness, f"{CURL}{url}", later)
    assert "hello-from-loopback" in out and not later.egress_questions()


async def test_no_one_to_ask_refuses():
    from iac_kernel.agent.permissions import PermissionGate

    decision = await PermissionGate().check_egress("api.example.com", 443, "c", "bash", None)
    assert not decision.allowed and "No one is there" in decision.message


async def test_network_none_has_no_proxy(tmp_path, server):
    harness = _harness(tmp_path)
    harness.settings.sandbox_network = "none"
    harness.settings.egress_allow_private = f"127.0.0.1:{server}"
    command = f"env | grep -i '^[a-z_]*_proxy='; echo END; {CURL}http://127.0.0.1:{server}/"
    out = await _run(harness, command + " 2>&1")
    assert out.splitlines()[0] == "END" and "hello-from-loopback" not in out, out


def test_free_port_is_not_reachable_from_the_host_side_control():
    # A control: a loopback port the test opens is reachable from the host itself.
    with socket.create_server(("127.0.0.1", 0)) as sock:
        socket.create_connection(sock.getsockname(), 2).close()


@pytest.fixture
def dumb_git(tmp_path):
    """A bare repository served over plain HTTP (git's dumb protocol) on loopback."""
    repo = tmp_path / "srv" / "repo.git"
    work = tmp_path / "src"
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(tmp_path)}
    run = lambda *a, cwd=None: subprocess.run(a, cwd=cwd, env=env, check=True, capture_output=True)  # noqa: E731
    run("git", "init", "-q", "--bare", str(repo))
    run("git", "init", "-q", str(work))
    (work / "f").write_text("x")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m", "--allow-empty",
        cwd=work)  # fmt: skip
    run("git", "push", "-q", str(repo), "HEAD:refs/heads/main", cwd=work)
    run("git", "update-server-info", cwd=repo)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(repo.parent))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


async def test_git_reaches_an_allowed_http_remote_through_the_proxy(tmp_path, dumb_git):
    # git is a guarded program: it runs in a sibling sandbox with its own forwarder.
    harness = _harness(tmp_path)
    (harness.bin_dir / "git").unlink()  # the real git
    harness.settings.egress_allow = "127.0.0.1"
    url = f"http://127.0.0.1:{dumb_git}/repo.git"
    harness.settings.egress_allow_private = f"127.0.0.1:{dumb_git}"
    approve = Asker(exec_answer=ALLOW_ONCE)  # git's remote helper is asked at exec time
    out = await _run(harness, f"git ls-remote {url} 2>&1", approve)
    assert "refs/heads/main" in out, out
    harness.settings.egress_allow_private = ""
    out = await _run(harness, f"git ls-remote {url} 2>&1", Asker(exec_answer=ALLOW_ONCE))
    assert "refs/heads/main" not in out


async def test_a_real_jupyter_server_is_never_reachable(tmp_path, monkeypatch):
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(  # noqa: ASYNC220 (a server beside the test)
        [sys.executable, "-m", "jupyter_server", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", "--ServerApp.open_browser=False",
         f"--ServerApp.root_dir={tmp_path}", "--IdentityProvider.token=t0ken", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ},
    )  # fmt: skip
    try:
        for _ in range(200):  # control: the host can connect (its info file may come first)
            if list(runtime.glob("jpserver-*.json")):
                try:
                    socket.create_connection(("127.0.0.1", port), 5).close()
                    break
                except ConnectionRefusedError:
                    pass
            await asyncio.sleep(0.1)
        else:
            pytest.fail("jupyter server did not start listening")
        harness = _harness(tmp_path)
        harness.settings.egress_allow = "127.0.0.1,localhost"
        # Even a rule opening all of loopback leaves the server's port closed.
        harness.settings.egress_allow_private = "127.0.0.0/8,::1"
        for command in (
            f"{CURL}http://127.0.0.1:{port}/api/status?token=t0ken",
            f"{CURL}--noproxy '*' http://127.0.0.1:{port}/api/status?token=t0ken",
            f'{CURL}--proxy "$ALL_PROXY" http://localhost:{port}/api/status?token=t0ken',
            f"{CURL}-g http://[::1]:{port}/api/status?token=t0ken",
        ):
            out = await _run(harness, command + " 2>&1")
            assert "started" not in out and "version" not in out, (command, out)
    finally:
        server.terminate()
        server.wait(10)
