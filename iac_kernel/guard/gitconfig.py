"""Git configuration that turns a plain ``git push`` into a forced or mirror push.

``git push`` with no force flag is still forced when a remote's ``push`` refspec starts
with ``+`` or ``mirror = true`` is set - in the repository's ``.git/config`` (which the
sandbox can write), in the global config the command's environment points at, or in
``GIT_CONFIG_*`` variables. Read on the agent's side, never by running git.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

from iac_kernel.guard.rules import CHANGE, Verdict

_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"([^"]*)")?\s*\]')
_ENTRY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")


def git_config_forces_push(text: str) -> str | None:
    """Why a repository's config makes a plain ``git push`` forced or a mirror (a remote
    ``push`` refspec starting with ``+``, ``mirror = true``), or None."""
    section = ""
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0]
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            continue
        entry = _ENTRY.match(line)
        if section != "remote" or not entry:
            continue
        key, value = entry.group(1).lower(), (entry.group(2) or "true").strip().strip('"')
        if key == "push" and value.startswith("+"):
            return f"the git configuration pushes with a forced refspec ({value})"
        if key == "mirror" and value.lower() in ("true", "yes", "on", "1"):
            return "the git configuration makes every push a mirror push"
    return None


def git_push_verdict(
    cwd: str, env: dict[str, str], host: Callable[[str], str], verdict: Verdict
) -> Verdict:
    """A plain ``git push`` is forced when git's configuration says so: the repository's
    config, the global one the command's environment points at, or ``GIT_CONFIG_*``."""
    pairs = [
        (env.get(f"GIT_CONFIG_KEY_{i}", ""), env.get(f"GIT_CONFIG_VALUE_{i}", ""))
        for i in range(min(_int(env.get("GIT_CONFIG_COUNT")), 100))
    ]
    texts = [
        "\n".join(
            f"[{k.rpartition('.')[0].split('.')[0]}]\n{k.rpartition('.')[2]} = {v}"
            for k, v in pairs
            if k.lower().startswith("remote.")
        )
    ]
    if "push" in env.get("GIT_CONFIG_PARAMETERS", "") or "mirror" in env.get(
        "GIT_CONFIG_PARAMETERS", ""
    ):
        return Verdict(CHANGE, "git push: GIT_CONFIG_PARAMETERS configures the push")
    files = [_repo_config(Path(cwd))]
    home = env.get("HOME")
    files += [Path(host(home)) / ".gitconfig"] if home else []
    for key, tail in (("XDG_CONFIG_HOME", "git/config"), ("GIT_CONFIG_GLOBAL", "")):
        if env.get(key):
            files.append(Path(host(env[key])) / tail if tail else Path(host(env[key])))
    for path in files:
        if path is not None and path.is_file():
            with contextlib.suppress(OSError):
                texts.append(path.read_text(errors="replace"))
    for text in texts:
        why = git_config_forces_push(text)
        if why:
            return Verdict(CHANGE, f"git push: {why}")
    return verdict


def _repo_config(path: Path) -> Path | None:
    for directory in [path, *path.parents]:
        git = directory / ".git"
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            text = git.read_text(errors="replace").strip()
            git = (directory / text.partition("gitdir:")[2].strip()).resolve()
        if (git / "config").is_file():
            return git / "config"
    return None


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
