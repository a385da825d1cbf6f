"""The verdict a guarded program gets before anyone is asked.

The rules classify its argv; then a git command that would give credentials to what the
call wrote (git_creds.py), an environment that retargets the command (redirect.py) and a
credential store named by its words (hidden.py) each make it a changing command.
"""

from __future__ import annotations

from collections.abc import Mapping

from iac_kernel.guard import git_creds, hidden, redirect
from iac_kernel.guard.gitconfig import GitConfigReader
from iac_kernel.guard.rules import CHANGE, Verdict, classify
from iac_kernel.guard.sandbox import Layout


async def exec_verdict(
    program: str,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    *,
    run_env: dict[str, str],
    reveal: bool,
    base_env: Mapping[str, str],
    layout: Layout | None,
    git_reader: GitConfigReader | None,
    peer: int | None,
    nested: bool = False,
) -> Verdict:
    """Classify ``argv`` (with ``env``, secrets included), then tighten the verdict by
    what it would do with ``run_env``, the environment it runs with (``reveal``: with the
    call's credentials). ``git_reader`` reads git's configuration for a git command;
    ``nested``: asked for from inside a program the guard runs (git_creds.placement)."""
    verdict = classify(program, argv, env)
    if git_reader is not None and not verdict.changing:
        verdict = await git_creds.git_verdict(
            argv, cwd, run_env, git_reader, layout, reveal, verdict, peer, base_env, nested
        )
    writable = ["/tmp", str(layout.cwd), *map(str, layout.writable)] if layout else ["/tmp", cwd]
    redirected = redirect.reason(program, argv, run_env, base_env, writable)
    if redirected:
        shown = f"{verdict.reason}; {redirected}" if verdict.changing else redirected
        verdict = Verdict(CHANGE, shown)
    if not verdict.changing and layout is not None:
        # Values the command set itself count too (`GIT_CONFIG_GLOBAL=~/.aws/...`).
        words = [*argv[1:], *(v for k, v in run_env.items() if base_env.get(k) != v)]
        named = hidden.names_a_secret(words, layout.host_path(cwd), layout.secrets)
        if named is not None:
            verdict = Verdict(CHANGE, f"{program} reads {named}: a credential store")
    return verdict
