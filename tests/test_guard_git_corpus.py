"""Issue 41, the git class of the gate: options, variables and configuration that make a
remote git command (clone, fetch, pull, ls-remote, archive, push, submodule) run or load
something the call wrote or set are asked per call, whatever their name - and plain
remote commands from the user's own configuration still run unasked.

Real git in real sandboxed bash calls, a real git server over HTTP on loopback (basic
auth, the password in ``~/.git-credentials`` behind the credential broker) and a local
bare repository. Each dangerous form carries a payload that creates a marker file: the
form must be asked at exec time (the command hidden from the text check, so only the
exec-time guard can stop it) and the marker must not appear when the question is
rejected; for the forms marked live, the marker does appear when the same command runs
without the guard (the form really runs what it names)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from egress_support import egress_ready
from guard_support import Asker, Harness, gather_limited, make_fakes
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from redteam_support import hidden
from test_egress_broker_git import PASSWORD, GitServer, serve_git

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
]


@dataclass(frozen=True)
class Form:
    """A dangerous command (``{ws}``: the workspace, ``{mark}``: the marker file,
    ``{url}``/``{port}``: the HTTP server), what its question must name, and whether
    its payload runs when approved."""

    command: str
    names: str
    live: bool = True


UPLOAD = "'touch {mark}; git-upload-pack'"
SSH = "ls-remote ssh://nowhere.invalid/r"
ALICE = "ls-remote http://alice@127.0.0.1:{port}/r.git"  # no stored password: askpass runs
PULL = "-C work pull -q lcl main"
CATEGORIES: dict[str, list[Form]] = {
    "options that name a program or hooks": [
        Form(f"git clone -q --upload-pack={UPLOAD} L.git c", "--upload-pack"),
        Form(f"git clone -q -u {UPLOAD} L.git c", "-u"),
        Form(f"git clone -q --upload-pa={UPLOAD} L.git c", "--upload-pa"),
        Form("git clone -q --template={ws}/tpl L.git c", "--template"),
        Form(f"git -C work fetch -q --upload-pack={UPLOAD} lcl", "--upload-pack"),
        Form(f"git -C work pull -q --upload-pack={UPLOAD} lcl main", "--upload-pack"),
        Form(f"git ls-remote --upload-pack={UPLOAD} L.git", "--upload-pack"),
        Form(f"git -C work fetch-pack --exec={UPLOAD} ../L.git refs/heads/main", "--exec"),
        Form(
            "git archive --remote={ws}/L.git --exec='touch {mark}; git-upload-archive' "
            "-o /dev/null HEAD",
            "--exec",
        ),
        Form(
            "git -C work push -q --receive-pack='touch {mark}; git-receive-pack' lcl "
            "HEAD:refs/heads/x",
            "--receive-pack",
        ),
        Form("git -C work push -q --exec='touch {mark}; git-receive-pack' lcl HEAD:y", "--exec"),
        Form("git --exec-path={ws}/ex ls-remote L.git", "--exec-path"),
        Form(f"git --git-dir={{ws}}/evil.git {SSH}", "evil.git"),
        Form("git -C super submodule foreach 'touch {mark}'", "foreach"),
    ],
    "configuration on the command line": [
        Form(f"git -c core.sshCommand={{ws}}/evil.sh {SSH}", "core.sshcommand"),
        Form(f"git -c core.askPass={{ws}}/evil.sh {ALICE}", "core.askpass"),
        Form("git -c credential.helper='!{ws}/evil.sh' ls-remote {url}", "credential.helper"),
        Form("git -c protocol.ext.allow=always ls-remote 'ext::sh -c touch% {mark}'", "protocol"),
        Form("git -c core.hooksPath={ws}/hooks -C work fetch -q lcl", "core.hookspath"),
        Form("git -c init.templateDir={ws}/tpl clone -q L.git c", "init.templatedir"),
        Form("git -c filter.x.smudge={ws}/evil.sh clone -q L.git c", "filter.x.smudge"),
        Form("git -c filter.x.process={ws}/evil.sh clone -q L.git c", "filter.x.process"),
        Form(f"git -c core.fsmonitor={{ws}}/evil.sh {PULL}", "core.fsmonitor"),
        Form(
            "git -c uploadpack.packObjectsHook={ws}/hook.sh clone -q --no-local L.git c",
            "uploadpack.packobjectshook",
            live=False,
        ),
        Form(
            f"git -c remote.lcl.uploadpack={UPLOAD} -C work fetch -q lcl",
            "remote.lcl.uploadpack",
        ),
        Form(f"git -c diff.external={{ws}}/evil.sh {PULL}", "diff.external", live=False),
        Form("git -c include.path={ws}/evil.cfg " + SSH, "include.path"),
        Form("git clone -q -c core.hooksPath={ws}/hooks L.git c", "core.hookspath"),
        Form("git clone -q --config core.hooksPath={ws}/hooks L.git c", "core.hookspath"),
        Form("git clone -q --config=filter.x.smudge={ws}/evil.sh L.git c", "filter.x.smudge"),
        Form(f"EVIL={{ws}}/evil.sh git --config-env=core.sshCommand=EVIL {SSH}", "sshcommand"),
    ],
    "programs and configuration named by variables": [
        Form(f"GIT_SSH_COMMAND={{ws}}/evil.sh git {SSH}", "GIT_SSH_COMMAND"),
        Form(f"GIT_SSH={{ws}}/evil.sh git {SSH}", "GIT_SSH"),
        Form(f"GIT_ASKPASS={{ws}}/evil.sh git {ALICE}", "GIT_ASKPASS"),
        Form(f"SSH_ASKPASS={{ws}}/evil.sh git {ALICE}", "SSH_ASKPASS"),
        Form("GIT_EXEC_PATH={ws}/ex git ls-remote L.git", "GIT_EXEC_PATH"),
        Form("GIT_TEMPLATE_DIR={ws}/tpl git clone -q L.git c", "GIT_TEMPLATE_DIR"),
        Form(
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.sshCommand "
            f"GIT_CONFIG_VALUE_0={{ws}}/evil.sh git {SSH}",
            "core.sshcommand",
        ),
        Form(
            f"GIT_CONFIG_PARAMETERS=\"'core.sshcommand'='{{ws}}/evil.sh'\" git {SSH}",
            "core.sshcommand",
        ),
        Form(f"GIT_CONFIG_GLOBAL={{ws}}/evil.cfg git {SSH}", "evil.cfg"),
        Form(f"HOME={{ws}}/home2 git {SSH}", "home2/.gitconfig"),
        Form(f"XDG_CONFIG_HOME={{ws}}/xdg git {SSH}", "xdg/git/config"),
        Form(f"GIT_DIR={{ws}}/evil.git git {SSH}", "evil.git"),
        Form(f"GIT_EXTERNAL_DIFF={{ws}}/evil.sh git {PULL}", "GIT_EXTERNAL_DIFF", live=False),
        Form("GIT_ALLOW_PROTOCOL=ext git ls-remote 'ext::sh -c touch% {mark}'", "GIT_ALLOW"),
        Form("PATH={ws}/ex:$PATH git ls-remote L.git", "PATH", live=False),
        Form("PERL5OPT=-d git -C work fetch -q lcl", "PERL5OPT", live=False),
    ],
    "repository configuration, hooks and files the call wrote": [
        Form(
            f"git -C work config core.sshCommand {{ws}}/evil.sh && git -C work {SSH}",
            "core.sshcommand",
        ),
        Form(f"git -C work config include.path {{ws}}/evil.cfg && git -C work {SSH}", "include"),
        Form(
            f"git -C work config remote.lcl.uploadpack {UPLOAD} && git -C work fetch -q lcl",
            "remote.lcl.uploadpack",
        ),
        Form(
            "git -C work config credential.helper '!{ws}/evil.sh' && git -C work fetch -q origin",
            "credential.helper",
        ),
        Form(f"git -C work config core.hooksPath {{ws}}/hooks && git {PULL}", "core.hookspath"),
        Form(f"git -C work config filter.x.smudge {{ws}}/evil.sh && git {PULL}", "filter.x"),
        Form(
            "cp hooks/reference-transaction work/.git/hooks/ && git -C work fetch -q lcl", "hooks"
        ),
        Form(
            "git -C work config uploadpack.packObjectsHook {ws}/hook.sh && "
            "git -C work fetch -q lcl",
            "uploadpack",
            live=False,
        ),
        Form(
            "git -C work config extensions.worktreeConfig true && "
            "git -C work config --worktree core.sshCommand {ws}/evil.sh && git -C work " + SSH,
            "core.sshcommand",
        ),
        Form(
            "git -C work config protocol.ext.allow always && "
            "git -C work ls-remote 'ext::sh -c touch% {mark}'",
            "protocol",
        ),
    ],
    "submodules": [
        Form(
            "git -C super2 submodule init -q && "
            "git -C super2 config submodule.sub.update '!{ws}/evil.sh' && "
            "git -C super2 submodule update -q",
            "submodule.sub.update",
        ),
        Form(
            "git -c protocol.file.allow=always clone -q --recurse-submodules superL.git c",
            "protocol.file.allow",
            live=False,
        ),
        Form(
            "git clone -q --recurse-submodules -c protocol.file.allow=always superL.git c",
            "protocol.file.allow",
            live=False,
        ),
        Form(
            "GIT_ALLOW_PROTOCOL=file git clone -q --recurse-submodules superL.git c",
            "GIT_ALLOW_PROTOCOL",
            live=False,
        ),
        Form(
            "git -C super -c submodule.recurse=true -c core.hooksPath={ws}/hooks fetch -q",
            "core.hookspath",
            live=False,
        ),
    ],
}
CORPUS = [form for forms in CATEGORIES.values() for form in forms]
#: Plain remote commands from the user's own configuration: unasked, and they work.
CONTROLS: list[tuple[str, str]] = [
    ("git clone -q {url} c", "c/a.txt"),
    ("git -C work fetch -q origin", ""),
    ("git -C work pull -q --ff-only origin main", ""),
    ("cd work && git pull -q --rebase origin main", ""),
    ("git ls-remote {url}", "refs/heads/main"),
    ("git -C work fetch -q lcl", ""),
    ("git -C work remote update", ""),
    ("git clone -q L.git c", "c/a.txt"),
    ("git clone -q --recurse-submodules {super_url} s", "s/sub/s.txt"),
    ("git -C super2 submodule update -q --init", "super2/sub/s.txt"),
    ("git -c user.name=x -c protocol.version=2 -C work fetch -q origin", ""),
    ("GIT_TERMINAL_PROMPT=0 GIT_PROGRESS_DELAY=0 git -C work fetch origin", ""),
    ("git archive --remote={ws}/L.git -o out.tar HEAD", "out.tar"),
]

#: Files every workspace gets (``{mark}``, ``{ws}`` filled in).
SCRIPTS = {
    "evil.sh": "#!/bin/sh\ntouch {mark}\nexit 1\n",
    "hook.sh": '#!/bin/sh\ntouch {mark}\nexec "$@"\n',
    "ex/git-upload-pack": '#!/bin/sh\ntouch {mark}\nexec /usr/lib/git-core/git-upload-pack "$@"\n',
    "tpl/hooks/post-checkout": "#!/bin/sh\ntouch {mark}\n",
    "hooks/post-checkout": "#!/bin/sh\ntouch {mark}\n",
    "hooks/post-merge": "#!/bin/sh\ntouch {mark}\n",
    "hooks/reference-transaction": "#!/bin/sh\ntouch {mark}\n",
}
CONFIGS = {
    "evil.cfg": "[core]\n\tsshCommand = {ws}/evil.sh\n",
    "home2/.gitconfig": "[core]\n\tsshCommand = {ws}/evil.sh\n",
    "xdg/git/config": "[core]\n\tsshCommand = {ws}/evil.sh\n",
    "evil.git/config": "[core]\n\tbare = true\n\tsshCommand = {ws}/evil.sh\n",
}


def _git(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (args, done.stderr)


@pytest.fixture(scope="module")
def world() -> Iterator[dict]:
    """The user's home (trusted: outside every writable place), the HTTP server and a
    template workspace: ``L.git`` (local bare, two commits, ``*.txt filter=x``), ``work``
    (one commit behind; remotes ``origin`` over HTTP and ``lcl``), ``super`` (submodule
    populated), ``super2`` (not), ``superL.git`` (a submodule by local path)."""
    # outside /tmp: a sandbox's private /tmp would hide the home (see outside_tmp)
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="iac-git-world-", dir="/var/tmp")))
    home = root / "home"
    home.mkdir()
    repos = root / "repos"
    repos.mkdir()
    server, found = serve_git(repos)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n"
        "[credential]\n\thelper = store\n"
    )
    (home / ".git-credentials").write_text(f"http://bob:{PASSWORD}@127.0.0.1:{found.port}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("GIT_TERMINAL_PROMPT", "0")
        for name in [n for n in os.environ if n.startswith("GIT_") and n != "GIT_CONFIG_NOSYSTEM"]:
            patch.delenv(name)
        _serve_repos(root, repos, found)
        template = root / "template"
        _template(template, repos, found)
    # again: git's store helper rewrote it while the repositories were made (its own
    # spelling of a port, 127.0.0.1%3a1234, is not one the broker reads today)
    (home / ".git-credentials").write_text(f"http://bob:{PASSWORD}@127.0.0.1:{found.port}\n")
    try:
        yield {"root": root, "home": home, "server": found, "template": template}
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(root, ignore_errors=True)


def _serve_repos(root: Path, repos: Path, server: GitServer) -> None:
    src = root / "src"
    _git("init", "-q", str(src))
    (src / ".gitattributes").write_text("*.txt filter=x\n")
    (src / "a.txt").write_text("one\n")
    _git("add", ".", cwd=src)
    _git("commit", "-qm", "one", cwd=src)
    (src / "a.txt").write_text("two\n")
    _git("commit", "-qam", "two", cwd=src)
    _git("clone", "-q", "--bare", str(src), str(repos / "r.git"))
    sub = root / "sub"
    _git("init", "-q", str(sub))
    (sub / "s.txt").write_text("s\n")
    _git("add", ".", cwd=sub)
    _git("commit", "-qm", "s", cwd=sub)
    _git("clone", "-q", "--bare", str(sub), str(repos / "sub.git"))
    sup = root / "super"
    _git("init", "-q", str(sup))
    _git("-C", str(sup), "submodule", "add", "-q", server.url("sub.git"), "sub")
    _git("commit", "-qm", "super", cwd=sup)
    _git("clone", "-q", "--bare", str(sup), str(repos / "super.git"))
    for name in ("r.git", "sub.git", "super.git"):
        _git("-C", str(repos / name), "config", "http.receivepack", "true")


def _template(ws: Path, repos: Path, server: GitServer) -> None:
    ws.mkdir()
    _git("clone", "-q", "--bare", str(repos / "r.git"), str(ws / "L.git"))
    _git("clone", "-q", server.url(), str(ws / "work"))
    _git("-C", str(ws / "work"), "reset", "-q", "--hard", "HEAD~1")
    _git("-C", str(ws / "work"), "remote", "add", "lcl", "../L.git")
    _git("clone", "-q", "--recurse-submodules", server.url("super.git"), str(ws / "super"))
    _git("clone", "-q", server.url("super.git"), str(ws / "super2"))
    local = ws / "superL"
    _git("init", "-q", str(local))
    _git("-c", "protocol.file.allow=always", "-C", str(local), "submodule", "add", "-q",
         str(ws / "L.git"), "sub")  # fmt: skip
    _git("commit", "-qm", "local", cwd=local)
    _git("clone", "-q", "--bare", str(local), str(ws / "superL.git"))
    shutil.rmtree(local)


def _workspace(world: dict, root: Path) -> tuple[Path, Path]:
    """A fresh copy of the template workspace under ``root`` with its scripts; (the
    workspace, its marker file)."""
    ws = root / "ws"
    shutil.copytree(world["template"], ws, symlinks=True)
    mark = ws / "PWNED"
    for rel, text in {**SCRIPTS, **CONFIGS}.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(mark=mark, ws=ws))
        if rel in SCRIPTS:
            path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return ws, mark


@pytest.fixture
def brokered(world: dict, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """The world's home as the user's, its credentials behind the broker."""
    egress_ready()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    monkeypatch.setenv("HOME", str(world["home"]))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for name in [n for n in os.environ if n.startswith("GIT_") and n != "GIT_CONFIG_NOSYSTEM"]:
        if name != "GIT_TERMINAL_PROMPT":
            monkeypatch.delenv(name)
    made = broker.prepare({}, home=world["home"], folder=world["home"] / ".iac-code" / "egress")
    broker.activate(made)
    try:
        yield world
    finally:
        broker.activate(None)


def _fill(text: str, ws: Path, mark: Path, server: GitServer) -> str:
    return text.format(
        ws=ws, mark=mark, url=server.url(), super_url=server.url("super.git"), port=server.port
    )


async def _attempt(world: dict, root: Path, form: Form, answer: str) -> tuple:
    """Run ``form`` hidden from the text check, exec questions answered ``answer``:
    (form, exec questions, whether the marker appeared, output)."""
    root.mkdir(parents=True)  # noqa: ASYNC240 (a few files, before the call)
    ws, mark = _workspace(world, root)
    bin_dir, log = make_fakes(root)
    (bin_dir / "git").unlink()  # the real git
    harness = Harness(ws, bin_dir, log, mode="bypass")
    harness.settings.egress_allow_private = f"127.0.0.1:{world['server'].port}"
    ask = Asker(exec_answer=answer, danger_answer=ALLOW_ONCE)
    command = _fill(form.command, ws, mark, world["server"])
    result = await harness.run(hidden(command) + " 2>&1", ask, timeout=120)
    return form, ask.exec_questions(), mark.exists(), result.content if result else ""


def test_corpus_is_grown_by_category():
    assert len(CATEGORIES) == 5 and all(len(forms) >= 4 for forms in CATEGORIES.values())
    assert len({f.command for f in CORPUS}) == len(CORPUS) >= 50
    assert sum(f.live for f in CORPUS) >= 40


async def test_each_dangerous_form_is_asked_and_never_runs_when_rejected(
    brokered: dict, outside_tmp: Path
):
    outcomes = await gather_limited(
        [_attempt(brokered, outside_tmp / f"r{i}", f, REJECT_ONCE) for i, f in enumerate(CORPUS)],
        6,
    )
    problems = []
    for form, questions, ran, out in outcomes:
        if not questions:
            problems.append(f"never asked: {form.command!r}: {out[-300:]!r}")
        elif not any(form.names.lower() in q.reason.lower() for q in questions):
            problems.append(f"question does not name {form.names}: {questions[0].reason!r}")
        if ran:
            problems.append(f"the payload ran: {form.command!r}")
    assert not problems, "\n".join(problems)


def test_each_live_form_runs_its_payload_without_the_guard(world: dict, tmp_path: Path):
    """The corpus is real: run by plain bash and git on the host (no guard), each live
    form runs what it names."""
    home = tmp_path / "home"  # a copy: git's store helper rewrites the store
    shutil.copytree(world["home"], home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
    dead = []
    for index, form in enumerate(f for f in CORPUS if f.live):
        root = tmp_path / f"h{index}"
        root.mkdir()
        ws, mark = _workspace(world, root)
        command = _fill(form.command, ws, mark, world["server"])
        done = subprocess.run(
            ["bash", "-c", command], cwd=ws, env=env, capture_output=True, text=True, timeout=60
        )
        if not mark.exists():
            dead.append(f"{form.command!r}: {done.stderr[-300:]!r}")
    assert not dead, "\n".join(dead)


async def test_plain_remote_commands_run_unasked(brokered: dict, outside_tmp: Path):
    async def one(index: int, command: str, expect: str) -> str | None:
        root = outside_tmp / f"c{index}"
        root.mkdir()
        ws, mark = _workspace(brokered, root)
        bin_dir, log = make_fakes(root)
        (bin_dir / "git").unlink()
        harness = Harness(ws, bin_dir, log, mode="bypass")
        harness.settings.egress_allow_private = f"127.0.0.1:{brokered['server'].port}"
        ask = Asker()
        filled = _fill(command, ws, mark, brokered["server"])
        result = await harness.run(f"{filled} 2>&1; echo rc=$?", ask, timeout=120)
        out = result.content if result else ""
        if ask.requests:
            return f"asked: {command!r}: {[r.reason for r in ask.requests]}"
        if not out.rstrip().endswith("rc=0"):
            return f"failed: {command!r}: {out[-400:]!r}"
        if expect and not ((ws / expect).exists() or expect in out):
            return f"did not work: {command!r}: {out[-400:]!r}"
        return None

    problems = await gather_limited([one(i, c, e) for i, (c, e) in enumerate(CONTROLS)], 6)
    assert not [p for p in problems if p], "\n".join(p for p in problems if p)
