"""The sandbox of a bash call: writes outside the cwd fail, nothing outlives the call,
the real binary of a guarded program is not reachable inside, reduced mode reports
itself, and the bash-level rules (sandbox: false, sandbox = required, timeouts)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from guard_support import PY_BIN, Asker, Harness, alive_with, logged, make_fakes
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE
from iac_kernel.egress import proxy as proxy_module
from iac_kernel.guard import call as guard_call
from iac_kernel.guard.approval import reviews
from iac_kernel.guard.approval.reviews import Review
from iac_kernel.guard.sandbox import bwrap as sandbox
from iac_kernel.guard.sandbox import reals
from iac_kernel.tools import tf_guard
from iac_kernel.tools.base import ToolError

pytestmark = pytest.mark.skipif(sandbox.unusable_reason() is not None, reason="no bwrap")


def exists(path: str) -> bool:
    return os.path.exists(path)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    bin_dir, log = make_fakes(tmp_path)
    return Harness(tmp_path / "ws", bin_dir, log)


@pytest.fixture
def outside() -> Path:
    """A directory outside the cwd that the sandbox sees (not under the private /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="iac-guard-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_writes_and_deletes_outside_the_cwd_fail(
    harness: Harness, tmp_path: Path, outside: Path
):
    (outside / "keep.txt").write_text("keep\n")
    hidden = tmp_path / "hidden"  # under the host's /tmp: not even visible inside
    hidden.mkdir()
    command = (
        f"echo x > {outside}/new.txt; echo rc=$?; rm -rf {outside}; echo rc=$?; "
        f"rm -rf {hidden}; "
        "echo inside > inside.txt; echo tmp > /tmp/private.txt && cat /tmp/private.txt; "
        f"echo w > {harness.log.parent}/allowed.txt && echo wrote-allowed"
    )
    result = await harness.run(command, Asker())
    assert result is not None and result.raw_output["sandbox"] == "bwrap"
    assert "Read-only file system" in result.content
    assert (outside / "keep.txt").read_text() == "keep\n" and hidden.is_dir()
    assert not (outside / "new.txt").exists()
    assert (harness.cwd / "inside.txt").read_text() == "inside\n"
    assert "tmp" in result.content and not exists("/tmp/private.txt")
    assert "wrote-allowed" in result.content  # sandbox_writable_paths


async def test_no_process_outlives_the_call(harness: Harness):
    marks = [f"6{random.randrange(10**8, 10**9)}.5" for _ in range(5)]
    command = (
        f"setsid sleep {marks[0]} & nohup sleep {marks[1]} >/dev/null 2>&1 & "
        f"( ( sleep {marks[2]} & ) & ) ; setsid -f sleep {marks[3]}; "
        f"git status >/dev/null; (trap '' TERM INT HUP; exec sleep {marks[4]}) & "
        "sleep 0.3; echo started"
    )
    result = await harness.run(command, Asker())
    assert result is not None and "started" in result.content
    await asyncio.sleep(0.2)
    assert {m: alive_with(m) for m in marks} == {m: [] for m in marks}


@pytest.mark.skipif(not sandbox.userns_disabled(), reason="bwrap < 0.8: no --disable-userns")
async def test_no_user_namespace_can_be_made_inside(harness: Harness):
    """In a namespace of its own a call could mount another call's guard folder at its
    own mount point and pass the approval socket's origin check."""
    result = await harness.run("unshare -Urm true; echo rc=$?", Asker())
    assert result is not None and result.raw_output["sandbox"] == "bwrap"
    # The namespace itself is refused (not only writing its uid map, as for root without
    # capabilities: a user that owns its uid could write that).
    assert "unshare failed" in result.content and "rc=0" not in result.content


async def test_guarded_program_left_running_is_stopped(tmp_path: Path):
    """A guarded program runs beside the sandbox; it still ends with the call."""
    bin_dir, log = make_fakes(tmp_path)
    sleepy = bin_dir / "sleepy"
    shutil.copy("/bin/sleep", sleepy)
    harness = Harness(tmp_path / "ws", bin_dir, log)
    harness.settings.guarded_programs = "sleepy"
    mark = f"7{random.randrange(10**8, 10**9)}"
    result = await harness.run(f"sleepy {mark} & sleep 0.5; echo bye", Asker())
    assert result is not None and "bye" in result.content
    await asyncio.sleep(0.2)
    assert alive_with(mark) == []


async def test_the_real_binary_is_not_reachable_inside(tmp_path: Path):
    """Copies, /proc/self/root, /proc/PID/exe of the running program, and a search of
    the filesystem give only launchers; the program's children cannot read it back."""
    bin_dir, log = make_fakes(tmp_path)
    shelly = bin_dir / "shelly"  # a real ELF binary (bash) with a unique hash
    shutil.copy("/bin/bash", shelly)
    with shelly.open("ab") as fh:
        fh.write(os.urandom(64))
    real_hash = hashlib.sha256(shelly.read_bytes()).hexdigest()
    harness = Harness(tmp_path / "ws", bin_dir, log)
    harness.settings.guarded_programs = "shelly,terraform"
    command = (
        'cp "$(command -v shelly)" c1; cat /proc/self/root"$(command -v shelly)" > c2; '
        f"cat {shelly} > c3; "
        "shelly -c 'cat /proc/$$/exe > c4; ls /proc/$$/fd > fds 2>&1; echo child-rc=$?' ; "
        "(shelly -c 'sleep 1' &) ; sleep 0.3; "
        "for p in /proc/[0-9]*; do cat $p/exe 2>/dev/null | sha256sum; done > hashes; "
        f"find / -xdev \\( -name 'shelly*' -o -path '{sandbox.state_dir()}/*' \\) "
        '-type f 2>/dev/null | while read f; do sha256sum "$f"; done >> hashes; '
        "sha256sum c1 c2 c3 c4 >> hashes 2>/dev/null; echo HEAD=$(head -c 2 c1)"
    )
    result = await harness.run(command, Asker())
    assert result is not None, result
    assert "child-rc=" in result.content  # the real program did run (its children too)
    hashes = (harness.cwd / "hashes").read_text()
    assert real_hash not in hashes
    assert "HEAD=#!" in result.content  # the copy is the launcher script
    assert "/exe: Permission denied" in result.content
    assert (harness.cwd / "c4").stat().st_size == 0  # /proc/PID/exe: permission denied


async def test_timeout_does_not_count_time_spent_waiting_for_the_user(harness: Harness):
    """The user answers after 6 s, the call's budget is 4 s (its own work takes well under
    a second, with room for a loaded machine): the wait is not counted."""

    class SlowAsker(Asker):
        async def __call__(self, request):
            await asyncio.sleep(6)
            return await super().__call__(request)

    tf_guard.register()  # as the agent's tools do: an apply runs where it was asked
    # The proxy's first start overlaps a first call (issue 42): not in this budget.
    await asyncio.to_thread(proxy_module.proxy().ensure)
    ask = SlowAsker(exec_answer=ALLOW_ONCE)
    result = await harness.run("t=terraform; $t apply", ask, timeout=4)
    assert result is not None and not result.raw_output["timed_out"], result.content
    folder = f"-chdir={harness.cwd.resolve()}"
    assert logged(harness.log) == [["terraform", folder, "apply"]]


async def test_outside_the_sandbox_is_a_per_call_question_that_says_so(harness: Harness):
    ask = Asker(danger_answer=REJECT_ONCE)
    result = await harness.run("echo hi", ask, sandbox=False)
    assert result is None
    assert ask.requests[0].options == [ALLOW_ONCE, REJECT_ONCE]
    assert "OUTSIDE the sandbox" in ask.requests[0].reason
    ask = Asker(danger_answer=ALLOW_ONCE)
    result = await harness.run("t=terraform; $t destroy", ask, sandbox=False)
    assert result is not None and result.raw_output["sandbox"] == "reduced"
    assert ask.exec_questions() and "outside the sandbox" in ask.exec_questions()[0].reason
    assert logged(harness.log) == []


@pytest.fixture
def reduced(monkeypatch: pytest.MonkeyPatch):
    """Pretend bubblewrap cannot create namespaces here."""
    why = "bwrap cannot create a sandbox here: No permissions to create new namespace"
    monkeypatch.setattr(sandbox, "unusable_reason", lambda: why)
    monkeypatch.setattr(guard_call, "unusable_reason", lambda: why)
    return why


async def test_reduced_mode_reports_itself_and_still_guards(harness: Harness, reduced):
    assert sandbox.status_text().startswith("guard: reduced, install bubblewrap")
    notice = sandbox.reduced_notice("session-x")
    assert notice and "guard: reduced, install bubblewrap" in notice
    assert sandbox.reduced_notice("session-x") is None  # once per session
    ask = Asker()
    result = await harness.run("t=terraform; $t apply; kubectl get pods", ask)
    assert result is not None and result.raw_output["sandbox"] == "reduced"
    assert [q.input["argv"] for q in ask.exec_questions()] == [["terraform", "apply"]]
    assert logged(harness.log) == [["kubectl", "get", "pods"]]


async def test_sandbox_required_refuses_bash_when_unusable(harness: Harness, reduced):
    harness.settings.sandbox = "required"
    with pytest.raises(ToolError, match="bash is refused: the sandbox setting is 'required'"):
        await harness.run("echo hi", Asker())


async def test_a_review_adds_text_rewrites_argv_and_rechecks(harness: Harness, tmp_path):
    seen = []

    def review(info):
        seen.append(info)
        (info.private_dir / "plan.copy").write_text("approved\n")
        inside = f"{info.sandbox_private_dir}/plan.copy"
        return Review(
            text="Plan: 0 to add, 1 to destroy.",
            summary={"destroy": 1},
            argv=[*info.argv, inside],
            recheck=lambda: None if len(seen) == 1 else "the plan changed",
        )

    reviews.register(["pulumi"], review)
    try:
        ask = Asker(exec_answer=ALLOW_ONCE)
        result = await harness.run("p=pulumi; $p up --yes", ask)
        question = ask.exec_questions()[0]
        assert "Plan: 0 to add, 1 to destroy." in question.reason
        assert question.review == {"destroy": 1}
        assert seen[0].cwd == str(harness.cwd)
        assert logged(harness.log)[0][:3] == ["pulumi", "up", "--yes"]
        assert logged(harness.log)[0][3].endswith("/plan.copy")
        second = await harness.run("p=pulumi; $p up --yes", Asker(exec_answer=ALLOW_ONCE))
        assert "the plan changed" in second.content and len(logged(harness.log)) == 1
    finally:
        reviews.unregister(["pulumi"], review)
    assert result is not None


def test_kernel_env_is_first_on_path_for_bash(tool_ctx):
    from iac_kernel.tools.bash import BashTool

    result = asyncio.run(BashTool().run({"command": "echo $PATH"}, tool_ctx))
    assert result.content.split(":")[1] == PY_BIN


async def test_loader_variables_do_not_reach_the_real_program(tmp_path: Path):
    """LD_PRELOAD & co. would run the caller's code inside the real program."""
    bin_dir, log = make_fakes(tmp_path)
    shutil.copy("/usr/bin/env", bin_dir / "envy")
    harness = Harness(tmp_path / "ws", bin_dir, log)
    harness.settings.guarded_programs = "envy"
    result = await harness.run("LD_LIBRARY_PATH=/nowhere GCONV_PATH=/x FOO=bar envy", Asker())
    assert result is not None and "FOO=bar" in result.content
    assert "LD_LIBRARY_PATH" not in result.content and "GCONV_PATH" not in result.content


def test_acp_session_meta_carries_the_guard_status_and_remembered_prefixes():
    from types import SimpleNamespace

    from iac_kernel.acp.session.state import answer_meta
    from iac_kernel.agent.permissions import PermissionGate

    gate = PermissionGate()
    gate.prefix_rules["bash"] = {"terraform plan": "allow"}
    meta = answer_meta(SimpleNamespace(mcp=None, gate=gate))["_meta"]["iac_kernel"]
    assert meta["guard"] == sandbox.status_text() == sandbox.SANDBOX_STATUS
    assert meta["rememberedPrefixes"] == [
        {"tool": "bash", "prefix": "terraform plan", "answer": "allow"}
    ]


async def test_cancel_while_the_question_waits_stops_at_once_and_nothing_runs(
    harness: Harness,
):
    """The turn is cancelled while an exec question is open: the call ends without
    waiting out the grace periods, and a late approval starts nothing."""
    harness.settings.bash_grace = 3.0
    asked = asyncio.Event()
    release = asyncio.Event()

    class LateAsker(Asker):
        async def __call__(self, request):
            self.requests.append(request)
            asked.set()
            await release.wait()
            return ALLOW_ONCE

    task = asyncio.create_task(harness.run("t=terraform; $t apply", LateAsker()))
    await asyncio.wait_for(asked.wait(), 30)
    loop = asyncio.get_running_loop()
    started = loop.time()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loop.time() - started < 2.5  # not SIGINT grace + SIGTERM grace
    release.set()
    await asyncio.sleep(0.3)
    assert logged(harness.log) == []


def _exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_find_real_covers_versioned_siblings_and_pyenv_shims(tmp_path: Path):
    """`kubectl.1.33` next to a real kubectl is guarded too; a pyenv shim's targets are
    guarded and listed first (an approved call runs the target, not the shim)."""
    kubectl = _exe(tmp_path / "sdk" / "kubectl")
    versioned = _exe(tmp_path / "sdk" / "kubectl.1.33")
    _exe(tmp_path / "sdk" / "kubectlx")  # another program, not a sibling
    shim = _exe(tmp_path / "pyenv" / "shims" / "aws", '#!/bin/sh\nexec "/r/libexec/pyenv" exec\n')
    target = _exe(tmp_path / "pyenv" / "versions" / "3.0" / "bin" / "aws")
    path = os.pathsep.join([str(tmp_path / "pyenv" / "shims"), str(tmp_path / "sdk")])
    found = reals.find_real(["kubectl", "aws"], path)
    assert found["kubectl"] == [str(kubectl), str(versioned)]
    assert found["aws"] == [str(target), str(shim)]
    assert reals.is_pyenv_shim(str(shim)) and not reals.is_pyenv_shim(str(target))


def _git(cwd: Path, *args: str) -> str:
    import subprocess

    git = ["git", "-c", "user.email=a@b", "-c", "user.name=n", *args]
    return subprocess.run(git, cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(sandbox.unusable_reason() is not None, reason="bubblewrap unusable")
@pytest.mark.parametrize("answer", [ALLOW_ONCE, REJECT_ONCE])
async def test_a_push_to_a_local_path_asks_for_git_receive_pack(tmp_path: Path, answer: str):
    """git runs `git-receive-pack '../remote.git'` (dashed argv[0]) for a local remote:
    asked under that name, and run as it when approved (git dispatches on argv[0])."""
    from redteam_support import real_harness

    ws = tmp_path / "ws"
    ws.mkdir()
    _git(ws, "init", "-q", "--bare", "remote.git")
    _git(ws, "init", "-q", "repo")
    _git(ws / "repo", "commit", "-q", "--allow-empty", "-m", "one")
    harness = real_harness(tmp_path / "h")
    ask = Asker(exec_answer=answer)
    command = "cd repo && git push -q ../remote.git HEAD:refs/heads/main; echo rc=$?"
    result = await harness.run(command, ask, cwd=ws, timeout=60)
    assert result is not None
    assert [q.input["argv"][0] for q in ask.exec_questions()] == ["git-receive-pack"]
    heads = _git(ws, "--git-dir=remote.git", "for-each-ref")
    assert ("refs/heads/main" in heads) == (answer == ALLOW_ONCE), result.content


async def test_the_private_tmp_is_the_temp_folder_whatever_the_host_tmpdir(
    harness: Harness, outside: Path, monkeypatch
):
    """A host TMPDIR is read-only inside the sandbox: commands get TMPDIR=/tmp, the
    call's private /tmp, so mktemp (and terraform, Python's tempfile) work."""
    monkeypatch.setenv("TMPDIR", str(outside))
    result = await harness.run('d=$(mktemp -d) && echo "made $d in $TMPDIR"', Asker())
    assert result is not None and result.raw_output["sandbox"] == "bwrap"
    assert "made /tmp/tmp." in result.content and "in /tmp" in result.content, result.content
    assert not os.listdir(outside)


def test_status_says_the_egress_proxy_is_installed_on_first_use(monkeypatch, tmp_path, capsys):
    """Missing is no news (the first call installs it): the guard's line is the same."""
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(tmp_path / "missing"))
    if sandbox.unusable_reason() is None:
        assert sandbox.status_text() == sandbox.SANDBOX_STATUS
    from iac_kernel.cli import main

    assert main(["egress", "status"]) == 0
    assert "installed on first use (or now: iac-kernel egress install)" in capsys.readouterr().out
