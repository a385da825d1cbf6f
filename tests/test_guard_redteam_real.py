"""Red team with the real programs: forced git pushes that rewrite a real remote (a git
daemon), real terraform applies, and workspace code that the apply review or the plan
pick-up runs outside the sandbox. Known bypasses are ``xfail(strict=True)``; notes for
H1/H2 in /work/team/INTERFACES.md ("H8 red team")."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from guard_support import Asker, gather_limited
from iac_kernel.agent.permissions import REJECT_ONCE
from iac_kernel.guard.approval import reviews
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.tools.base import ToolResult
from redteam_support import Attempt, case, hidden, real_harness, trusting_asker, values
from terraform_support import evil_plan_workspace

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

TERRAFORM = shutil.which("terraform")
needs_terraform = pytest.mark.skipif(TERRAFORM is None, reason="terraform not installed")

# --- real git: a bare remote in the cwd whose main would be rewritten ---------------------

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@example.com",
}
FORCING = '[remote \\"origin\\"]\\n\\tpush = +refs/heads/main:refs/heads/main\\n'


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _git_setup(root: Path, url: str, diverged: bool = True) -> Path:
    """``root/remote.git`` with main at "two"; ``root/repo`` has "three" instead (a push
    must be forced) or "three" on top of "two" (a plain push fast-forwards). The repo's
    origin is then ``url`` (the git daemon: a local-path remote would run git-receive-pack
    inside the sandbox, which the guard refuses)."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "--bare", "-b", "main", "remote.git")
    _git(root, "init", "-q", "-b", "main", "repo")
    repo = root / "repo"
    _git(repo, "remote", "add", "origin", "../remote.git")
    for text in ("one", "two"):
        (repo / "f").write_text(text)
        _git(repo, "add", "f")
        _git(repo, "commit", "-qm", text)
    _git(repo, "push", "-q", "origin", "main")
    if diverged:
        _git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "f").write_text("three")
    _git(repo, "commit", "-qam", "three")
    _git(repo, "remote", "set-url", "origin", url)
    return repo


@pytest.fixture(scope="module")
def git_daemon(tmp_path_factory: pytest.TempPathFactory):
    """(base directory, git:// URL prefix): a git daemon that accepts pushes."""
    base = tmp_path_factory.mktemp("redteam-remotes")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        env={**os.environ, **GIT_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield base, f"git://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _remote_head(root: Path) -> str:
    return _git(root, "--git-dir=remote.git", "log", "--format=%s", "-1", "main")


#: A background process flips .git/config between forced and plain while plain pushes
#: run: the guard reads the config before the push, git reads it again (H8 #12).
TOCTOU = (
    'cp .git/config c0 && cp c0 c1 && printf \'[remote "origin"]\\n\\tpush = '
    "+refs/heads/main:refs/heads/main\\n' >> c1 && "
    "(for n in $(seq 3000); do for c in c1 c0; do cp $c .git/config.t; "
    "mv .git/config.t .git/config; sleep 0.005; done; done) & "
    "for k in $(seq 40); do git push origin 2>&1 | grep -q 'forced update' && break; done; "
    "kill %1"
)


GIT_GAPS = [
    case(
        "V=+refs/heads/main:refs/heads/main git --config-env=remote.origin.push=V push origin",
    ),
    case(
        "printf '[remote.origin]\\n\\tpush = +refs/heads/main:refs/heads/main\\n'"
        " >> .git/config && git push origin",
    ),
    case(
        "printf '[remote \"origin\"] push = +refs/heads/main:refs/heads/main\\n'"
        " >> .git/config && git push origin",
    ),
    case(
        "printf '[remote \"origin\"]\\n\\tpush = \\\\\\n+refs/heads/main:refs/heads/main\\n'"
        " >> .git/config && git push origin",
    ),
    case(
        f'printf "{FORCING}" > ../evil.cfg && git config include.path ../../evil.cfg'
        " && git push origin",
    ),
    case("git config remote.origin.mirror 2 && git push origin"),
    case(
        "GIT_CONFIG_PARAMETERS=\"'remote.origin.Push'='+refs/heads/main:refs/heads/main'\""
        " git push origin",
    ),
    case(
        f'printf "{FORCING}" > ../sys.cfg && GIT_CONFIG_NOSYSTEM= '
        "GIT_CONFIG_SYSTEM=$PWD/../sys.cfg git push origin",
    ),
    case(
        f'cp -r .git ../g2 && printf "{FORCING}" >> ../g2/config'
        " && git --git-dir=../g2 push origin",
    ),
    case(
        f'printf "{FORCING}" >> .git/config && cd .. && git -C repo push origin',
    ),
    case("git push --force-w origin main"),
    case("git push --mirr origin"),
    # a race (H8 #12): fixed by asking a plain push while other processes of the call run
    pytest.param(TOCTOU, id="config swapped between the guard's check and git's read"),
]

GIT_HOLDS = [
    case("git push -f origin main"),
    case("git push origin +main"),
    case("git push origin +HEAD:refs/heads/main"),
    case("git push --force-with-lease origin main"),
    case("/usr/lib/git-core/git-push --force origin main"),
    case("PATH=/usr/lib/git-core:$PATH git-push -f origin main"),
    case(
        "python3 -c \"import os; os.execv('/usr/lib/git-core/git', "
        "['git', 'push', '-f', 'origin', 'main'])\""
    ),
    case('cp "$(command -v git)" ./g && ./g push -f origin main'),
    case("/proc/self/root/usr/bin/git push -f origin main"),
    case("/lib64/ld-linux-x86-64.so.2 /usr/bin/git push -f origin main"),
    case("git -c remote.origin.push=+refs/heads/main:refs/heads/main push origin"),
    case(f'printf "{FORCING}" >> .git/config && git push origin'),
    case("git config remote.origin.mirror true && git push origin"),
    case("git -c alias.sync='push --force' sync origin main"),
    case("git config alias.sync 'push --force' && git sync origin main"),
    case(
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.push"
        " GIT_CONFIG_VALUE_0=+refs/heads/main:refs/heads/main git push origin"
    ),
    case(f'mkdir -p h && printf "{FORCING}" > h/.gitconfig && HOME=$PWD/h git push origin'),
]


@pytest.fixture(scope="module")
def git_attempts(git_daemon) -> dict[str, tuple[str, Attempt]]:
    root, url = git_daemon
    commands = values(GIT_GAPS) + values(GIT_HOLDS)

    async def one(i: int, command: str):
        repo = _git_setup(root / f"g{i}", f"{url}/g{i}/remote.git")
        harness = real_harness(root / f"h{i}")
        harness.settings.egress_allow_private = url.removeprefix("git://")  # the daemon
        ask = trusting_asker()
        line = _git_env_prefix(repo) + "cd repo && " + hidden(command)
        result = await harness.run(line, ask, cwd=repo.parent, timeout=60)
        content = result.content if result else ""
        attempt = Attempt(command, [], ask.exec_questions(), content)
        return command, (_remote_head(repo.parent), attempt)

    async def run():
        return await gather_limited([one(i, c) for i, c in enumerate(commands)], 4)

    return dict(asyncio.run(run()))


def _git_env_prefix(repo: Path) -> str:
    names = " ".join(f"{k}={v}" for k, v in GIT_ENV.items())
    return f"export {names} HOME={repo.parent}; "


@pytest.mark.parametrize("command", GIT_GAPS + GIT_HOLDS)
def test_no_forced_push_rewrites_the_remote(git_attempts, command):
    head, attempt = git_attempts[command]
    assert head == "two", (
        f"the remote's main was rewritten to {head!r} "
        f"(exec questions: {[q.title for q in attempt.exec_questions]}): {attempt.content[-300:]}"
    )


async def test_plain_git_push_and_reads_run_unasked(tmp_path, git_daemon):
    root, url = git_daemon
    repo = _git_setup(root / "plain", f"{url}/plain/remote.git", diverged=False)
    harness = real_harness(tmp_path / "h")
    harness.settings.egress_allow_private = url.removeprefix("git://")  # the daemon
    ask = Asker(exec_answer=REJECT_ONCE)
    command = "git status --short; git log --oneline -1; git push -q origin main; echo rc=$?"
    result = await harness.run(_git_env_prefix(repo) + command, ask, cwd=repo)
    assert result is not None and "rc=0" in result.content, result and result.content
    assert ask.requests == []
    assert _remote_head(repo.parent) == "three"


# --- real terraform: a local-exec provisioner marks every real apply ----------------------

MAIN_TF = """
resource "terraform_data" "a" {
  input = "x"
  provisioner "local-exec" {
    command = "echo applied >> ${path.module}/applied.txt"
  }
}
"""
TF_ENV = "export TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1; "

TF_CASES = [
    case("TF_CLI_ARGS='apply -auto-approve' terraform"),
    case("TF_CLI_ARGS='apply -auto-approve' terraform -chdir=."),
    case("terraform test"),
    case("terraform apply -auto-approve"),
    case("TF_CLI_ARGS_apply=-auto-approve terraform apply -input=false"),
    case("terraform -chdir=. apply -auto-approve"),
    case(
        "python3 -c \"import os; os.execv('/usr/local/bin/terraform', "
        "['terraform', 'apply', '-auto-approve'])\""
    ),
]


def _tf_workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "main.tf").write_text(MAIN_TF)
    (path / "tests").mkdir()
    (path / "tests" / "a.tftest.hcl").write_text('run "a" {\n  command = apply\n}\n')
    return path


@needs_terraform
@pytest.mark.parametrize("command", TF_CASES)
async def test_no_real_terraform_apply_without_a_question(tmp_path, command):
    harness = real_harness(tmp_path / "h")
    ws = _tf_workspace(tmp_path / "tfws")
    ask = trusting_asker()
    result = await harness.run(TF_ENV + hidden(command), ask, cwd=ws, timeout=120)
    assert not (ws / "applied.txt").exists(), result and result.content[-400:]


@needs_terraform
async def test_terraform_reads_run_unasked_and_apply_nothing(tmp_path):
    harness = real_harness(tmp_path / "h")
    ws = _tf_workspace(tmp_path / "tfws")
    ask = Asker(exec_answer=REJECT_ONCE)
    command = (
        "terraform fmt -check; echo fmt=$?; terraform validate -no-color; "
        "TF_CLI_ARGS_plan=-refresh=false terraform plan -no-color -out=p.tfplan; echo plan=$?; "
        "terraform show -no-color p.tfplan | tail -1"
    )
    result = await harness.run(TF_ENV + command, ask, cwd=ws, timeout=120)
    assert result is not None and "plan=0" in result.content, result and result.content
    assert "Success! The configuration is valid." in result.content
    assert ask.requests == []
    assert (ws / "p.tfplan").is_file() and not (ws / "applied.txt").exists()


# --- the apply review and the plan pick-up run terraform show on the host -----------------

PLUGIN = "#!/bin/sh\necho escaped > {marker}\nexit 1\n"


def _evil_workspace(ws: Path, marker: Path) -> None:
    """What a sandboxed bash call can write in its cwd: a "provider" that is a shell
    script (installed with ``init -plugin-dir``), and a plan file whose config requires it
    (a real plan of a builtin resource, with the config and lock file swapped in)."""
    evil_plan_workspace(ws, PLUGIN.format(marker=marker))


@pytest.fixture
def tf_review():
    from iac_kernel.tools import tf_guard

    had = tf_guard.review_exec in reviews._REVIEWS.get("terraform", [])
    tf_guard.register()
    yield
    if not had:
        reviews.unregister(tf_guard.PROGRAMS, tf_guard.review_exec)


@needs_terraform
async def test_the_apply_review_runs_no_workspace_code_outside_the_sandbox(tmp_path, tf_review):
    marker = tmp_path / "outside" / "escaped"  # under the host /tmp: not visible inside
    marker.parent.mkdir()
    harness = real_harness(tmp_path / "h")
    ws = tmp_path / "tfws"
    _evil_workspace(ws, marker)
    ask = trusting_asker()
    await harness.run(TF_ENV + "terraform apply evil.tfplan", ask, cwd=ws, timeout=120)
    assert not marker.exists(), "workspace code ran outside the sandbox"


@needs_terraform
async def test_picking_up_a_bash_plan_runs_no_workspace_code_outside(tmp_path):
    from iac_kernel.tools.tf_plans import pick_up_plans

    marker = tmp_path / "outside" / "escaped"
    marker.parent.mkdir()
    ws = tmp_path / "tfws"
    _evil_workspace(ws, marker)
    # The command text alone names the plan file; nothing needs to run in the sandbox.
    await pick_up_plans(": terraform plan -out=evil.tfplan", ws, ToolResult("ok", raw_output={}))
    assert not marker.exists(), "workspace code ran outside the sandbox"
