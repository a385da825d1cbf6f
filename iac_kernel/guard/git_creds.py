"""Git and the user's credentials.

Git runs commands its configuration names (``core.fsmonitor``, ``core.sshCommand``,
``diff.external``, textconv and filter drivers, credential helpers, hooks ...), and a bash
call can write the repository's own configuration and hooks. So a git command the guard
runs gets the credential stores and secret variables only when it talks to a remote
(push, fetch, pull, clone, ls-remote ...); local commands (status, log, diff, commit ...)
run with them hidden like the shell. A remote command is asked per call when
configuration that runs or redirects something comes from a place the call can write (the
repository, ``-c``, a file under the working folder or /tmp), or the repository has hooks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from iac_kernel.guard.gitconfig import GitConfigReader, config_options, git_push_verdict, is_push
from iac_kernel.guard.racers import racing_verdict
from iac_kernel.guard.rules import CHANGE, Verdict
from iac_kernel.guard.sandbox import Layout

#: Git commands that talk to a remote (they need the user's credentials).
REMOTE = {"push", "fetch", "pull", "clone", "ls-remote", "remote", "submodule", "lfs"}
REMOTE |= {"archive", "send-email", "send-pack", "fetch-pack", "request-pull"}
#: Keys that run a program, load more configuration, or redirect a remote's traffic.
DANGER = (
    r"^(core\.(sshcommand|gitproxy|askpass|fsmonitor|hookspath|pager|editor)"
    r"|credential\..*|include\..*|includeif\..*|alias\..*|protocol\..*"
    r"|remote\..*\.(uploadpack|receivepack|vcs|proxy)|https?\..*"
    r"|diff\.external|diff\..*\.(command|textconv)|filter\..*|merge\..*\.driver"
    r"|pager\..*|gpg\..*|uploadpack\..*|ssh\..*|submodule\..*\.update"
    r"|sequence\.editor|lfs\.customtransfer\..*|sendemail\..*)$"
)
_GLOBAL_OPTS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}


def command(argv: Sequence[str]) -> str:
    """The git subcommand of ``argv`` (after global options), or ``""``."""
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in _GLOBAL_OPTS and rest:
            rest.pop(0)
    return rest[0] if rest else ""


def needs_credentials(argv: Sequence[str]) -> bool:
    return command(argv) in REMOTE


def writable_origin(origin: str, cwd: str, writable: Sequence[str]) -> bool:
    """A ``--show-origin`` origin the bash call could have written (a repository's own
    ``.git/config`` is shown relative to ``cwd``)."""
    kind, _, path = origin.partition(":")
    if kind != "file":
        return True  # command line, blob, standard input
    path = os.path.normpath(os.path.join(cwd, path))
    return any(path == w or path.startswith(w.rstrip("/") + "/") for w in writable)


async def remote_verdict(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    reader: GitConfigReader,
    writable: Sequence[str],
    host_path: Callable[[str], str],
    verdict: Verdict,
) -> Verdict:
    """``verdict``, or CHANGE when a remote git command would run configuration or hooks
    the call could have written (or that cannot be told)."""
    name = command(argv)
    options = config_options(argv)
    args = ["--no-pager", *options, "config", "-z", "--show-origin", "--get-regexp", DANGER]
    code, output = await reader(args, cwd, env)
    if code not in (0, 1) or (code == 1 and output):
        return Verdict(CHANGE, f"git {name}: its configuration could not be read")
    records = output.decode(errors="replace").split("\0")
    for origin, entry in zip(records[0::2], records[1::2], strict=False):
        key = entry.partition("\n")[0]
        if writable_origin(origin, cwd, writable):
            where = origin if not origin.startswith("file:") else origin[5:]
            return Verdict(
                CHANGE,
                f"git {name} with {key} from {where}: it could run code the command wrote "
                "with your credentials",
            )
    hooks_argv = ["--no-pager", *options, "rev-parse", "--git-path", "hooks"]
    code, output = await reader(hooks_argv, cwd, env)
    hooks = output.decode(errors="replace").strip() if code == 0 else ""
    if hooks and _has_hooks(host_path(os.path.join(cwd, hooks))):
        return Verdict(CHANGE, f"git {name}: the repository has hooks ({hooks}) that would run")
    return verdict


def _has_hooks(path: str) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(
        not n.endswith(".sample") and os.access(os.path.join(path, n), os.X_OK) for n in names
    )


async def git_verdict(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    reader: GitConfigReader,
    layout: Layout | None,
    reveal: bool,
    verdict: Verdict,
    peer: int | None,
) -> Verdict:
    """A git argv's verdict: a push forced by configuration (gitconfig.py, and asked while
    other processes of the call run, racers.py), and a remote command with credentials
    that would run what the call wrote (:func:`remote_verdict`)."""
    if is_push(argv):
        verdict = await git_push_verdict(argv, cwd, env, reader, verdict)
        if not verdict.changing and layout is not None:
            verdict = racing_verdict(peer, verdict)
    if reveal and not verdict.changing and layout is not None:
        writable = ["/tmp", str(layout.cwd), *map(str, layout.writable)]
        verdict = await remote_verdict(argv, cwd, env, reader, writable, layout.host_path, verdict)
    return verdict
