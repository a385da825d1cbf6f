"""The exec-time verdict: one ordered list of steps decides what a guarded program's
request to run gets, like mitmproxy's addon chain.

Each step returns a verdict, which ends the chain, or None to pass; when every step
passes, what the program's rules said stands (a read, or a command that needs no
question) and it runs unasked. Each step catches what no earlier one does (its docstring
says what). Past the first three, a step only asks, so the order decides which reason a
question shows, never whether it is asked: cheap steps come first, git's reads of its
own configuration last.

1. :func:`own_call` refuses a process of another call;
2. :func:`terraform_writes` refuses a terraform that would write where masking fails;
3. :func:`git_helper` lets a helper of a guarded git run as part of that git's run;
4. :func:`redirected` asks for a command pointed elsewhere by options or variables;
5. :func:`by_rules` asks for what the program's rules call a change;
6. :func:`credential_store` asks for an argument naming a credential store;
7. :func:`push_config` asks for a plain push that git's configuration forces;
8. :func:`remote_git` asks for a git with credentials that would run what the call wrote;
9. :func:`racing` asks while other processes of the call could change git's files.

A new exec-time check is one more step here, in the place where what it catches is not
caught before it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from iac_kernel.guard.policy import git_creds, gitconfig, redirect
from iac_kernel.guard.policy.git_creds import Placement
from iac_kernel.guard.policy.gitconfig import GitConfigReader
from iac_kernel.guard.policy.grammar import CHANGE, READ, REFUSE, SKIP, Verdict
from iac_kernel.guard.policy.rules import classify
from iac_kernel.guard.sandbox import hidden, processes
from iac_kernel.guard.sandbox.bwrap import Layout
from iac_kernel.guard.tfcover import writes as tf_writes

#: The programs that read terraform's sensitive files themselves (the rest, and the
#: shell, see masked copies: ``Layout.overlays``).
ORIGINALS = frozenset({"terraform", "tofu"})


@dataclass
class Exec:
    """One guarded program's request to run, as the steps see it."""

    program: str
    #: The exact argv and the working folder, as the sandbox sees them.
    argv: list[str]
    cwd: str
    #: Its environment with the call's secrets (loader variables removed).
    env: dict[str, str]
    #: The environment it would run with (without the secrets when it runs without the
    #: credentials: a local git command).
    run_env: dict[str, str]
    #: What "set by the command" compares to: the call's starting environment, or that
    #: of the guarded run it was started from.
    base_env: Mapping[str, str]
    #: The run it belongs to and whether it gets the credentials (git_creds.placement).
    place: Placement
    layout: Layout | None
    #: The call's guard folder (its own processes see it at GUARD_MOUNT).
    guard_dir: Path
    #: The process asking: the launcher.
    peer: int | None
    #: Reads git's configuration as the real git would (git commands only).
    git: GitConfigReader | None = None

    @functools.cached_property
    def rules(self) -> Verdict:
        """What the program's own rules say of the argv (with its environment's
        ``TF_CLI_ARGS*``, ``PULUMI_SKIP_CONFIRMATIONS``)."""
        return classify(self.program, self.argv, self.env)

    @property
    def writable(self) -> list[str]:
        """The folders the call can write, as its processes see them."""
        if self.layout is None:
            return ["/tmp", self.cwd]
        return ["/tmp", str(self.layout.cwd), *map(str, self.layout.writable)]

    @property
    def push(self) -> bool:
        return self.git is not None and gitconfig.is_push(self.argv)


Step = Callable[[Exec], Awaitable[Verdict | None]]


async def own_call(x: Exec) -> Verdict | None:
    """A process of another call: another session's sandbox that can see this call's
    socket (through another TMPDIR) sees its own guard folder, not this one."""
    if await asyncio.to_thread(processes.same_call, x.peer, x.guard_dir, x.layout):
        return None
    return Verdict(REFUSE, "this guard serves the processes of its own call only")


async def terraform_writes(x: Exec) -> Verdict | None:
    """A terraform or tofu told to write a plan, a state or its log where it could not
    be masked in the shell (a FIFO, a device, ``/dev/stdout``, ``TF_LOG_PATH``)."""
    if x.program not in ORIGINALS or x.layout is None:
        return None
    problem = tf_writes.refusal(x.argv, x.cwd, x.env, x.layout.host_path)
    return Verdict(REFUSE, problem) if problem else None


async def git_helper(x: Exec) -> Verdict | None:
    """A helper that a guarded git runs for its own remote command (its transport, a
    credential helper, ``submodule--helper``): part of that run, unasked; the rules
    would ask ``git credential``. A credential store or erase is answered without
    running: the run holds only placeholder or hidden copies of the user's stores."""
    if x.place.skip:
        return Verdict(SKIP, "a credential helper's store or erase")
    return Verdict(READ, "run by git itself") if x.place.helper else None


async def redirected(x: Exec) -> Verdict | None:
    """A command that its options or the variables the call set point elsewhere: another
    endpoint, a proxy or CA that reads its traffic, plugins or code the call wrote
    (redirect.py). A read the rules let pass; for a change they ask about, this reason
    joins theirs."""
    why = redirect.reason(x.program, x.argv, x.run_env, x.base_env, x.writable)
    if why is None:
        return None
    return Verdict(CHANGE, f"{x.rules.reason}; {why}" if x.rules.changing else why)


async def by_rules(x: Exec) -> Verdict | None:
    """What the program's rules call a change (rules.py): changing verbs, reads that
    print credentials or run plugins, unknown commands and cloud verbs."""
    return x.rules if x.rules.changing else None


async def credential_store(x: Exec) -> Verdict | None:
    """An argument, or a value the command set, naming a credential store hidden from the
    shell (``git -C ~/.aws``, ``GIT_CONFIG_GLOBAL=~/.aws/credentials``): the guarded
    program runs with the real files."""
    if x.layout is None:
        return None
    words = [*x.argv[1:], *(v for k, v in x.run_env.items() if x.base_env.get(k) != v)]
    named = hidden.names_a_secret(words, x.layout.host_path(x.cwd), x.layout.secrets)
    return Verdict(CHANGE, f"{x.program} reads {named}: a credential store") if named else None


async def push_config(x: Exec) -> Verdict | None:
    """A plain ``git push`` that git's effective configuration forces (``+`` refspecs,
    ``mirror``), read from the real git right before (gitconfig.py)."""
    if not x.push:
        return None
    assert x.git is not None
    why = await gitconfig.push_reason(x.argv, x.cwd, x.run_env, x.git)
    return Verdict(CHANGE, f"git push: {why}") if why else None


async def remote_git(x: Exec) -> Verdict | None:
    """A git with the credentials that would run or load what the call wrote or set: by
    its options, variables, configuration or hooks (git_creds.py)."""
    if x.git is None or not x.place.reveal or x.layout is None:
        return None
    why = await git_creds.remote_reason(
        x.argv, x.cwd, x.run_env, x.git, x.writable, x.layout.host_path, x.base_env
    )
    return Verdict(CHANGE, why) if why else None


async def racing(x: Exec) -> Verdict | None:
    """A push, or a git with the credentials, while other processes of the call run:
    they could change its configuration or hooks between the reads above and git's own,
    which no read can catch (:func:`~iac_kernel.guard.sandbox.processes.others_alive`).
    Not for a git that a guarded program runs: the call's processes were counted when
    that program started."""
    if x.git is None or x.layout is None or x.place.nested or not (x.push or x.place.reveal):
        return None
    if processes.others_alive(x.peer) == []:
        return None
    if x.push:
        return Verdict(
            CHANGE,
            "git push: other processes of this command are running and could change the "
            "git configuration (a forced push refspec) before git reads it",
        )
    return Verdict(
        CHANGE,
        f"git {git_creds.command(x.argv)}: other processes of this command are running and "
        "could change its configuration or hooks before git reads them",
    )


#: The steps, in order (see the module doc).
STEPS: tuple[Step, ...] = (
    own_call,
    terraform_writes,
    git_helper,
    redirected,
    by_rules,
    credential_store,
    push_config,
    remote_git,
    racing,
)


async def decide(x: Exec) -> Verdict:
    """The verdict of the first step that gives one, else what the rules said."""
    for step in STEPS:
        verdict = await step(x)
        if verdict is not None:
            return verdict
    return x.rules
