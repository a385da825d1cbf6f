"""Git over HTTP with brokered basic auth: a loopback ``git http-backend`` that demands
the real password serves clone and push to a git holding only the placeholder (its
``~/.git-credentials`` is the broker's placeholder copy), through the broker - directly,
and through real sandboxed bash calls where git's own ``credential.helper store`` reads
that copy: fetch and clone run unasked, a push is asked at most once, the server gets the
real password and nothing in the sandbox ever holds it."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from egress_support import (
    ForgeHandler,
    ForgeState,
    broker_args,
    egress_ready,
    running_mitmdump,
)
from guard_support import Asker, Harness, make_fakes
from iac_kernel.agent.permissions import ALLOW_ONCE
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.guard.sandbox.bwrap import unusable_reason

PASSWORD = "realGitPassw0rd-5e6f7a8b9c"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")


@dataclass
class GitServer:
    """A running loopback git server: its port, its repositories' folder and the
    credentials it was sent."""

    port: int
    repos: Path
    seen: list[str] = field(default_factory=list)

    def url(self, name: str = "r.git") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


def _host_git(*args: str, cwd: Path | None = None, home: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(home)}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@e"
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def serve_git(repos: Path) -> tuple[ThreadingHTTPServer, GitServer]:
    """Start the stand-in forge's git server over ``repos`` (``git http-backend`` as CGI,
    behind basic auth for ``bob`` with the real password; every ``Authorization`` header
    it gets kept, decoded, in ``seen``) in a thread; stop it with ``shutdown``."""
    state = ForgeState(repos, git_password=PASSWORD)
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Git", (ForgeHandler,), {"state": state}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, GitServer(server.server_address[1], repos, state.git_seen)


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitServer]:
    """``r.git``: a bare repository with one commit on ``main``, pushes allowed."""
    repos = tmp_path / "repos"
    repos.mkdir()
    home = tmp_path
    _host_git("init", "-q", "--bare", "-b", "main", str(repos / "r.git"), home=home)
    _host_git("-C", str(repos / "r.git"), "config", "http.receivepack", "true", home=home)
    seed = tmp_path / "seed"
    _host_git("init", "-q", "-b", "main", str(seed), home=home)
    (seed / "README").write_text("seed\n")
    _host_git("add", "README", cwd=seed, home=home)
    _host_git("commit", "-qm", "seed", cwd=seed, home=home)
    _host_git("push", "-q", str(repos / "r.git"), "main", cwd=seed, home=home)
    server, found = serve_git(repos)
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def test_a_placeholder_from_outside_a_guarded_run_is_never_swapped(
    tmp_path: Path, git_server: GitServer
):
    """A git that is no guarded run of the agent (here: on the host, straight to the
    proxy) holding the placeholder copy of ``~/.git-credentials`` gets nothing: the
    server never sees the real password, directly or through the broker."""
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    port = git_server.port
    url = f"http://localhost:{port}/r.git"
    (real_home / ".git-credentials").write_text(f"http://bob:{PASSWORD}@localhost:{port}\n")
    made = broker.prepare({}, home=real_home, folder=tmp_path / "private")
    placeholder_file = made.mounts[real_home / ".git-credentials"]
    assert PASSWORD not in placeholder_file.read_text()
    assert made.swaps[PASSWORD] in placeholder_file.read_text()
    home = tmp_path / "client-home"
    home.mkdir()
    shutil.copy(placeholder_file, home / ".git-credentials")
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper() and "GIT" not in k}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")

    def clone(name: str) -> subprocess.CompletedProcess:
        shutil.copy(placeholder_file, home / ".git-credentials")  # a refusal erases it
        return subprocess.run(
            ["git", "clone", "-q", url, name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert clone("direct").returncode != 0
    with running_mitmdump(broker_args(made), tmp_path / "mitmdump.log") as proxy:
        env["http_proxy"] = f"http://127.0.0.1:{proxy}"
        assert clone("proxied").returncode != 0
    assert git_server.seen and f"bob:{PASSWORD}" not in git_server.seen


# -- through the sandbox: git is a guarded program, its helpers run through the guard


@pytest.fixture
def brokered_git(
    outside_tmp: Path, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict]:
    """A real home (outside every writable place) whose ``~/.gitconfig`` names the
    ``store`` helper, after a helper that copies what a guarded git sees of
    ``~/.git-credentials`` into the workspace; the broker prepared from it and active."""
    egress_ready()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    home = outside_tmp / "home"
    home.mkdir()
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    seen = workspace / "seen-by-the-helper.txt"
    (home / ".git-credentials").write_text(f"http://bob:{PASSWORD}@127.0.0.1:{git_server.port}\n")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = t\n\temail = t@example.com\n"
        "[credential]\n"
        '\thelper = "!f() { cat \\"$HOME/.git-credentials\\" >> \\"$HELPER_SEEN\\"; }; f"\n'
        "\thelper = store\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    # named by a variable of the session: a value naming a writable place is asked
    monkeypatch.setenv("HELPER_SEEN", str(seen))
    made = broker.prepare({}, home=home, folder=home / ".iac-code" / "egress")
    broker.activate(made)
    try:
        yield {"home": home, "workspace": workspace, "seen": seen, "made": made}
    finally:
        broker.activate(None)


def _git_harness(root: Path, workspace: Path, port: int) -> Harness:
    """Fake CLIs but the real git; the loopback git server allowed through the proxy."""
    bin_dir, log = make_fakes(root)
    (bin_dir / "git").unlink()
    harness = Harness(workspace, bin_dir, log, mode="bypass")
    harness.settings.egress_allow_private = f"127.0.0.1:{port}"
    return harness


@sandboxed
async def test_git_through_the_broker_in_a_sandboxed_call(
    outside_tmp: Path, git_server: GitServer, brokered_git: dict
):
    workspace, seen = brokered_git["workspace"], brokered_git["seen"]
    harness = _git_harness(outside_tmp, workspace, git_server.port)
    url = git_server.url()
    placeholder = brokered_git["made"].swaps[PASSWORD]
    outputs: list[str] = []

    async def run(command: str, ask: Asker) -> str:
        result = await harness.run(f"{command} 2>&1; echo rc=$?", ask, timeout=120)
        assert result is not None
        outputs.append(result.content)
        return result.content

    # clone, fetch, pull, ls-remote: never asked, and they work (the server demands the
    # real password; the store helper in the guarded run answered the placeholder)
    for command in (
        f"git clone -q {url} work",
        "git -C work fetch -q origin",
        "git -C work pull -q --ff-only",
        f"git ls-remote {url}",
    ):
        ask = Asker()
        out = await run(command, ask)
        assert out.rstrip().endswith("rc=0"), (command, out)
        assert not ask.requests, (command, [r.reason for r in ask.requests])
    assert "refs/heads/main" in outputs[-1]
    assert (workspace / "work" / "README").read_text() == "seed\n"
    # a push: asked at most once (never for the helpers git runs for it), and it lands
    ask = Asker(exec_answer=ALLOW_ONCE)
    out = await run(
        "cd work && echo pushed > f.txt && git add f.txt && git commit -qm p && "
        "git push -q origin HEAD:main",
        ask,
    )
    assert out.rstrip().endswith("rc=0"), out
    assert len(ask.requests) <= 1, [r.reason for r in ask.requests]
    assert not [q for q in ask.exec_questions() if "credential" in str(q.input.get("argv"))]
    pushed = subprocess.run(  # noqa: ASYNC221 (the server's repository, after the call)
        ["git", "--git-dir", str(git_server.repos / "r.git"), "show", "main:f.txt"],
        capture_output=True,
        text=True,
    )
    assert pushed.stdout == "pushed\n", pushed.stderr
    # the server got the real password; the helper in the guarded run saw the placeholder
    # copy only, and nothing the calls printed holds the real value
    assert f"bob:{PASSWORD}" in git_server.seen
    assert placeholder in seen.read_text() and PASSWORD not in seen.read_text()
    assert not any(PASSWORD in out for out in outputs)
    shell = await run("cat ~/.git-credentials; echo END", Asker())
    assert PASSWORD not in shell and placeholder not in shell  # the shell sees neither
    # a guarded run wrote nothing back into the store (store/erase are not run)
    assert (brokered_git["home"] / ".git-credentials").read_text().count(PASSWORD) == 1


@sandboxed
async def test_the_helper_is_asked_when_the_shell_runs_it(
    outside_tmp: Path, git_server: GitServer, brokered_git: dict
):
    """Control: the same helper run by the shell (not by a guarded git) is judged like
    any command - asked, and without the credentials when approved."""
    harness = _git_harness(outside_tmp, brokered_git["workspace"], git_server.port)
    ask = Asker(exec_answer=ALLOW_ONCE)
    request = f"protocol=http\\nhost=127.0.0.1:{git_server.port}\\n\\n"
    result = await harness.run(f"printf '{request}' | git credential-store get; echo END", ask)
    assert result is not None and [q.input["argv"][1] for q in ask.exec_questions()] == [
        "credential-store"
    ]
    placeholder = brokered_git["made"].swaps[PASSWORD]
    assert "password=" not in result.content and placeholder not in result.content
