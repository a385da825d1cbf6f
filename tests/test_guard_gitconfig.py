"""Forced pushes by configuration: git's own effective config decides, read with the
push's global options; unreadable config is asked; abbreviated long options count.
Remote commands with credentials (git_creds.py): options, variables and configuration
that name what git runs or loads, by class; the helpers git runs itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from guard_support import alive_with
from iac_kernel.guard.policy import git_creds
from iac_kernel.guard.policy.git_creds import (
    Placement,
    added_config,
    enclosing_run,
    env_reason,
    is_helper,
    option_reason,
    placement,
    remote_reason,
)
from iac_kernel.guard.policy.gitconfig import (
    GitConfigReader,
    config_options,
    forcing_reason,
    push_reason,
)
from iac_kernel.guard.policy.rules import CHANGE, OTHER, READ, Verdict, classify
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.guard.sandbox.processes import others_alive

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
    reader = GitConfigReader(GIT)
    forced = await push_reason(["git", "push"], str(repo), env, reader)
    assert forced is not None and "+refs/heads/main" in forced
    # the same push from the parent directory: -C picks the repository
    argv = ["git", "-C", "repo", "push"]
    assert await push_reason(argv, str(tmp_path), env, reader) is not None
    (tmp_path / "inc.cfg").write_text("")
    assert await push_reason(["git", "push"], str(repo), env, reader) is None


async def test_unreadable_config_is_asked(tmp_path):
    broken = tmp_path / "git"
    broken.write_text("#!/bin/sh\necho 'fatal: bad config line 3' >&2\nexit 128\n")
    broken.chmod(0o755)
    reader = GitConfigReader(str(broken))
    why = await push_reason(["git", "push"], str(tmp_path), {}, reader)
    assert why is not None and "could not be read" in why


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
        others = others_alive(pid)
        while others != [] and not background and time.monotonic() < deadline:
            time.sleep(0.05)
            others = others_alive(pid)
        assert (others != []) == background, others
    finally:
        proc.kill()
        proc.wait()


# -- remote commands with credentials: what they would run or load (git_creds.py)

PROGRAM_NAMING = [
    "git clone --upload-pack=x u",
    "git clone -u x u",
    "git clone -qu x u",
    "git clone --upload-p=x u",
    "git clone --templ /t u",
    "git fetch --upload-pack x o",
    "git pull --upload-pack=x o main",
    "git ls-remote --upload-pack=x u",
    "git push --receive-pack=x o",
    "git push --rec=x o",
    "git push --exec=x o",
    "git send-pack --exec=x u",
    "git fetch-pack --exec=x u",
    "git archive --remote=u --exec=x HEAD",
    "git --exec-path=/tmp/x fetch",
    "git -C r submodule foreach x",
    "git send-email --smtp-server=/tmp/x a.patch",
    "git-upload-pack --version",  # control below: a dashed form has no such option
]


@pytest.mark.parametrize("command", PROGRAM_NAMING[:-1])
def test_options_that_name_a_program_or_hooks(command):
    assert option_reason(command.split()) is not None


@pytest.mark.parametrize(
    "command",
    [
        "git push -u origin main",  # --set-upstream
        "git fetch -u origin",  # --update-head-ok
        "git clone -b main u",
        "git clone -bmain u",  # the rest of the word is -b's value
        "git clone --no-template u",
        "git clone --recurse-submodules u",
        "git fetch origin -- --upload-pack=x",
        "git --exec-path",
        PROGRAM_NAMING[-1],
    ],
)
def test_options_that_name_nothing_git_runs(command):
    assert option_reason(command.split()) is None


def test_clone_configuration_options_are_read_as_configuration():
    argv = "git clone -c a.b=1 -qcc.d=2 --conf e.f=3 --config=g.h=4 -bmain u -- -c x.y=5"
    assert added_config(argv.split()) == [
        "-c",
        "a.b=1",
        "-c",
        "c.d=2",
        "-c",
        "e.f=3",
        "-c",
        "g.h=4",
    ]
    assert added_config(["git", "fetch", "-c", "a.b=1"]) == []


def test_variables_the_call_set_are_judged_by_class():
    base = {"PATH": "/usr/bin", "PWD": "/a", "GIT_SSH_COMMAND": "ssh -4", "HOME": "/h"}
    same = {**base, "PWD": "/b", "OLDPWD": "/a", "SHLVL": "2", "_": "/usr/bin/git"}
    inert = {**same, "GIT_TERMINAL_PROMPT": "0", "LANG": "C", "TF_VAR_x": "1", "FOO": "1"}
    assert env_reason(inert, base) is None  # and the session's own GIT_SSH_COMMAND
    # judged by the configuration git then reads (the tests below), not by being set
    places = {"HOME": "/tmp/h", "GIT_CONFIG_GLOBAL": "/tmp/g", "GIT_CONFIG_KEY_0": "a.b"}
    places |= {"GIT_DIR": "/tmp/d", "XDG_CONFIG_HOME": "/tmp/x", "GIT_CONFIG_NOSYSTEM": "1"}
    assert env_reason({**inert, **places}, base) is None
    for name, value in [
        ("GIT_SSH_COMMAND", "sh -c x"),
        ("GIT_EXEC_PATH", "/tmp/x"),
        ("GIT_ALLOW_PROTOCOL", "ext"),
        ("GIT_SOMETHING_NEW", "1"),  # every GIT_* but the inert ones
        ("PATH", "/tmp/x:/usr/bin"),
        ("SSH_ASKPASS", "/tmp/x"),
        ("XDG_CACHE_HOME", "/tmp/x"),  # credential-cache's socket
        ("PERL5OPT", "-d"),
        ("PYTHONPATH", "/tmp"),
        ("OPENSSL_CONF", "/tmp/x"),
        ("LESSOPEN", "|/tmp/x %s"),
        ("MY_TOOL_COMMAND", "x"),
    ]:
        why = env_reason({**inert, name: value}, base)
        assert why is not None and name in why, name


def _remote_repo(root: Path, *config: str) -> tuple[Path, dict[str, str]]:
    """A repository in ``root/ws`` (the writable place) cloned from a local one, the
    user's home outside it; (repository, environment)."""
    home = root / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    ws = root / "ws"
    for args in (
        ["init", "-q", "--bare", str(root / "src.git")],
        ["clone", "-q", str(root / "src.git"), str(ws / "repo")],
    ):
        subprocess.run([GIT, *args], env=env, check=True, capture_output=True)
    for line in config:
        key, _, value = line.partition(" ")
        subprocess.run([GIT, "-C", str(ws / "repo"), "config", key, value], env=env, check=True)
    return ws / "repo", env


async def _judge(argv: list[str], repo: Path, env: dict, writable: list[str]) -> Verdict:
    reader = GitConfigReader(GIT)
    why = await remote_reason(argv, str(repo), env, reader, writable, lambda p: p, base_env=env)
    return Verdict(CHANGE, why) if why else Verdict(READ)


@needs_git
@pytest.mark.parametrize(
    ("config", "named"),
    [
        ([], None),
        (["user.name t", "branch.main.remote origin", "pull.rebase false"], None),
        (["remote.origin.uploadpack x"], "remote.origin.uploadpack"),
        (["core.fsmonitor x"], "core.fsmonitor"),
        (["init.templateDir /t"], "init.templatedir"),
        (["some.future.key x"], "some.future.key"),  # any key but the inert ones
        (["remote.x.url u", "remote.x.vcs evil"], "remote.x.vcs"),
    ],
)
async def test_repository_configuration_must_be_inert(tmp_path, config, named):
    repo, env = _remote_repo(tmp_path, *config)
    verdict = await _judge(["git", "fetch"], repo, env, [str(tmp_path / "ws"), "/tmp"])
    if named is None:
        assert verdict == Verdict(READ)
    else:
        assert (
            verdict.kind == CHANGE and named in verdict.reason and ".git/config" in verdict.reason
        )


@needs_git
def test_the_configuration_git_writes_itself_is_inert(tmp_path):
    """Clones (plain, partial, mirror, shared), remotes, upstreams, sparse checkouts,
    submodules, maintenance: what git writes into a repository never makes a remote
    command asked."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@e", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@e"}

    def git(*args: str) -> None:
        done = subprocess.run([GIT, *args], cwd=tmp_path, env=env, capture_output=True)
        assert done.returncode == 0, (args, done.stderr)

    git("init", "-q", "-b", "main", "seed")
    (tmp_path / "seed" / "f").write_text("x\n")
    git("-C", "seed", "add", "f")
    git("-C", "seed", "commit", "-qm", "s")
    git("clone", "-q", "--bare", "seed", "src.git")
    git("clone", "-q", "src.git", "a")
    git("-C", "a", "remote", "add", "up", "../src.git")
    git("-C", "a", "fetch", "-q", "up")
    git("-C", "a", "branch", "-q", "-u", "up/main")
    git("-C", "a", "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../src.git", "s")
    git("-C", "a", "sparse-checkout", "set", "--cone", "x")
    git("-C", "a", "config", "pull.rebase", "false")
    git("-C", "a", "config", "user.email", "a@e")
    git("-C", "a", "maintenance", "register")
    git("clone", "-q", "--filter=blob:none", f"file://{tmp_path}/src.git", "b")
    git("clone", "-q", "--mirror", "src.git", "c.git")
    git("init", "-q", "--shared", "d")
    found = []
    configs = ["a/.git/config", "a/.git/modules/s/config", "b/.git/config", "c.git/config"]
    for config in [*configs, "d/.git/config", "a/.git/config.worktree"]:
        if not (tmp_path / config).exists():
            continue
        text = subprocess.run(
            [GIT, "config", "--file", str(tmp_path / config), "--list", "--name-only"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found += [key for key in text.split() if not git_creds.INERT_KEYS.fullmatch(key)]
    assert found == []


@needs_git
async def test_command_line_configuration_is_judged_like_the_repository(tmp_path):
    repo, env = _remote_repo(tmp_path)
    writable = [str(tmp_path / "ws")]
    inert = ["git", "-c", "user.name=x", "-c", "protocol.version=2", "fetch"]
    assert await _judge(inert, repo, env, writable) == Verdict(READ)
    for argv in (
        ["git", "-c", "core.sshCommand=x", "fetch"],
        ["git", "clone", "-c", "core.hooksPath=/h", "u"],
        ["git", "--config-env=core.askPass=HOME", "ls-remote", "u"],
    ):
        verdict = await _judge(argv, repo, env, writable)
        assert verdict.kind == CHANGE and "command line" in verdict.reason, argv


@needs_git
async def test_the_users_own_configuration_may_not_point_into_the_workspace(tmp_path):
    repo, env = _remote_repo(tmp_path)
    writable = [str(tmp_path / "ws")]
    gitconfig = Path(env["HOME"]) / ".gitconfig"
    gitconfig.write_text("[credential]\n\thelper = store\n[core]\n\tpager = less -R\n")
    assert await _judge(["git", "fetch"], repo, env, writable) == Verdict(READ)
    for text, named in [
        (f"[core]\n\thooksPath = {tmp_path}/ws/hooks\n", "core.hookspath"),
        (f"[include]\n\tpath = {tmp_path}/ws/x.cfg\n", "include.path"),
        ("[include]\n\tpath = ../ws/x.cfg\n", "include.path"),  # from the file's folder
        (f'[includeIf "gitdir:/nowhere/"]\n\tpath = {tmp_path}/ws/x.cfg\n', "includeif"),
        ("[init]\n\ttemplateDir = ~/../ws/tpl\n", "init.templatedir"),
    ]:
        gitconfig.write_text(text)
        verdict = await _judge(["git", "clone", "u"], repo, env, writable)
        assert verdict.kind == CHANGE and named in verdict.reason, text


@needs_git
async def test_a_git_folder_that_is_no_repository_is_asked(tmp_path):
    """git reads ``$GIT_DIR/config`` of a folder that is no repository (no HEAD), which
    ``git config --list`` does not show."""
    repo, env = _remote_repo(tmp_path)
    fake = tmp_path / "ws" / "evil.git"
    fake.mkdir()
    (fake / "config").write_text("[core]\n\tsshCommand = /x\n")
    writable = [str(tmp_path / "ws")]
    for argv, extra in [
        (["git", "ls-remote", "u"], {"GIT_DIR": str(fake)}),
        (["git", f"--git-dir={fake}", "ls-remote", "u"], {}),
        (["git", "--git-dir", str(fake), "clone", "u"], {}),
    ]:
        verdict = await _judge(argv, repo, {**env, **extra}, writable)
        assert verdict.kind == CHANGE and "evil.git could not be read" in verdict.reason
    assert await _judge(["git", "ls-remote", "u"], repo, env, writable) == Verdict(READ)


@needs_git
async def test_hooks_are_asked_except_for_a_clone(tmp_path):
    repo, env = _remote_repo(tmp_path)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    writable = [str(tmp_path / "ws")]
    verdict = await _judge(["git", "fetch"], repo, env, writable)
    assert verdict.kind == CHANGE and "hooks" in verdict.reason
    # a clone's hooks come from its template (judged above), not from the folder it runs in
    assert await _judge(["git", "clone", "u", "c"], repo, env, writable) == Verdict(READ)


def test_the_helpers_git_runs_itself():
    for command in (
        "git remote-https origin https://h/r",
        "git send-pack --stateless-rpc --helper-status u",
        "git credential-store get",
        "git credential-manager get",
        "git credential fill",
        "git submodule--helper update",
        "git checkout--worker",
        "git upload-archive--writer x",
    ):
        assert is_helper(command.split()), command
    for command in ("git remote-evil origin x", "git fetch", "git receive-pack r", "git"):
        assert not is_helper(command.split()), command


def test_a_helper_is_part_of_the_run_it_runs_in():
    child = subprocess.Popen(["sleep", "30"])
    try:
        me = os.getpid()
        assert enclosing_run(child.pid, {}) is None
        assert enclosing_run(child.pid, {me: ("git", True, False)}) == ("git", True, False)
        get = ["git", "credential-store", "get"]
        store = ["git", "credential-store", "store"]
        fetch = ["git", "fetch"]
        # from the shell: judged like any command (its own need for credentials)
        assert placement("git", get, child.pid, {}) == Placement(False)
        assert placement("git", fetch, child.pid, {}) == Placement(True)
        # inside a guarded git's run: unasked, with what that run has
        run = {me: ("git", True, True)}
        assert placement("git", get, child.pid, run) == Placement(
            True, helper=True, nested=True, approved=True
        )
        assert placement("git", store, child.pid, run).skip
        assert placement("git", ["git", "credential", "reject"], child.pid, run).skip
        # a local git's run (no credentials) gives none to what it starts
        local = {me: ("git", False, False)}
        assert placement("git", get, child.pid, local) == Placement(False, True, True)
        assert placement("git", fetch, child.pid, local) == Placement(False, nested=True)
        # a helper only of a git run; other programs keep their own rule
        tf = {me: ("terraform", True, False)}
        assert not placement("git", get, child.pid, tf).helper
        assert placement("git", fetch, child.pid, tf) == Placement(True, nested=True)
        assert placement("aws", ["aws", "s3", "ls"], child.pid, local).reveal
    finally:
        child.kill()
        child.wait()


def test_the_remote_commands_are_known_after_global_options():
    assert git_creds.command(["git", "--config-env", "a.b=X", "-C", "d", "fetch"]) == "fetch"
    assert git_creds.needs_credentials(["git", "-c", "a.b=c", "ls-remote", "u"])
    assert not git_creds.needs_credentials(["git-upload-pack", "/r"])
