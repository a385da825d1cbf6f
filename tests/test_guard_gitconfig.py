"""Forced pushes by configuration: git's own effective config decides, read with the
push's global options; unreadable config is asked; abbreviated long options count."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from guard_support import alive_with
from iac_kernel.guard.gitconfig import (
    GitConfigReader,
    config_options,
    forcing_reason,
    git_push_verdict,
)
from iac_kernel.guard.racers import racing_verdict
from iac_kernel.guard.rules import CHANGE, OTHER, Verdict, classify
from iac_kernel.guard.sandbox import unusable_reason

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git not installed")


def test_config_output_is_judged_like_git():
    assert forcing_reason(1, b"") is None
    assert forcing_reason(0, b"remote.origin.push\nrefs/heads/main:refs/heads/main\0") is None
    assert forcing_reason(0, b"remote.o.mirror\nfalse\0remote.o.mirror\noff\0") is None
    assert "forced refspec" in forcing_reason(0, b"remote.origin.push\n+refs/heads/*\0")
    assert "forced refspec" in forcing_reason(0, b"remote.origin.push\n:refs/heads/main\0")
    assert "mirror" in forcing_reason(0, b"remote.origin.mirror\n2\0")
    assert "mirror" in forcing_reason(0, b"remote.a.b.mirror\0")  # no value: true
    assert "could not be read" in forcing_reason(128, b"")
    assert "could not be read" in forcing_reason(0, b"remote.origin.mirror\nmaybe\0")
    assert "could not be read" in forcing_reason(0, b"trace: noise\nremote.origin.push\n+x\0")
    assert "could not be read" in forcing_reason(0, b"remote.origin.push\n+x")


def test_only_config_picking_global_options_are_kept():
    argv = ["git", "-C", "repo", "--git-dir=../g", "-cfoo.x=1", "--config-env=a.b=V", "-p"]
    argv += ["--namespace", "n", "--config-env", "c.d=W", "--bare", "push", "-C", "x"]
    assert config_options(argv) == [
        *("-C", "repo", "--git-dir=../g", "-c", "foo.x=1", "--config-env=a.b=V"),
        *("--config-env", "c.d=W", "--bare"),
    ]
    assert config_options(["git-push", "-C", "x"]) == []


@pytest.mark.parametrize("arg", ["--force-w", "--force-wi=main:abc", "--mirr", "--forc", "--del"])
def test_abbreviated_forcing_options_are_changes(arg):
    assert classify("git", ["git", "push", arg, "origin", "main"]).kind == CHANGE


@pytest.mark.parametrize("arg", ["--dry-run", "--porcelain", "--no-force-with-lease", "-u"])
def test_other_push_options_are_not(arg):
    assert classify("git", ["git", "push", arg, "origin", "main"]).kind == OTHER


def _repo(path: Path, *config: str) -> Path:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path)}
    subprocess.run([GIT, "init", "-q", str(path / "repo")], check=True, env=env)
    for line in config:
        subprocess.run([GIT, "-C", str(path / "repo"), "config", *line.split()], check=True)
    return path / "repo"


@needs_git
async def test_real_git_reads_the_effective_config(tmp_path):
    repo = _repo(tmp_path, "remote.origin.url x", "include.path ../../inc.cfg")
    (tmp_path / "inc.cfg").write_text('[remote "origin"] push = \\\n+refs/heads/main\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    plain = Verdict(OTHER)
    reader = GitConfigReader(GIT)
    forced = await git_push_verdict(["git", "push"], str(repo), env, reader, plain)
    assert forced.kind == CHANGE and "+refs/heads/main" in forced.reason
    # the same push from the parent directory: -C picks the repository
    argv = ["git", "-C", "repo", "push"]
    assert (await git_push_verdict(argv, str(tmp_path), env, reader, plain)).kind == CHANGE
    (tmp_path / "inc.cfg").write_text("")
    assert await git_push_verdict(["git", "push"], str(repo), env, reader, plain) == plain


async def test_unreadable_config_is_asked(tmp_path):
    broken = tmp_path / "git"
    broken.write_text("#!/bin/sh\necho 'fatal: bad config line 3' >&2\nexit 128\n")
    broken.chmod(0o755)
    reader = GitConfigReader(str(broken))
    verdict = await git_push_verdict(["git", "push"], str(tmp_path), {}, reader, Verdict(OTHER))
    assert verdict.kind == CHANGE and "could not be read" in verdict.reason


def _sandboxed(script: str, marker: str) -> tuple[subprocess.Popen, int]:
    """``script`` in a bwrap PID namespace; the host PID of its ``sleep 31.MARKER``."""
    args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    proc = subprocess.Popen([*args, "--unshare-pid", "--die-with-parent", "sh", "-c", script])
    for _ in range(200):
        for pid in alive_with(f"31.{marker}"):
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"):
                return proc, pid
        time.sleep(0.02)
    raise AssertionError("sandboxed sleep not found")


@pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
@pytest.mark.parametrize("background", [False, True])
def test_a_push_with_other_processes_of_the_call_alive_is_asked(background):
    marker = f"{os.getpid()}{int(background)}"
    script = f"sleep 31.{marker}; true"
    if background:
        script = f"sleep 32.{marker} & {script}"
    proc, pid = _sandboxed(script, marker)
    try:
        # The shell reaches wait() a moment after starting sleep (later on a loaded machine):
        # until then it could still act, and the verdict rightly asks.
        deadline = time.monotonic() + 10
        verdict = racing_verdict(pid, Verdict(OTHER))
        while verdict.kind == CHANGE and not background and time.monotonic() < deadline:
            time.sleep(0.05)
            verdict = racing_verdict(pid, Verdict(OTHER))
        assert verdict.kind == (CHANGE if background else OTHER), verdict
    finally:
        proc.kill()
        proc.wait()
