"""Git for a pull request, through the guard like every git a bash call runs.

Every command runs inside one :class:`~iac_kernel.guard.call.GuardedCall` (the sandbox,
its launchers and its approval server): local commands with the credentials hidden, the
push and ``ls-remote`` as guarded remote runs whose credentials are the broker's
placeholders, swapped on the remote's host by the egress proxy. There is no second
credential path: what ``git push`` in a bash call can do, this can, and no more.

The commit is made before the question and never touches the user's index or working
tree: a private index (``.git/iac-kernel-pr.index``) read from ``HEAD``, the session's
files added to it (and the session notebook as a blob), ``write-tree``, ``commit-tree``.
The question shows that commit's diff; the run points a new branch at exactly that commit
(``update-ref`` with an empty old value: it must not exist) and pushes it, so a file
changed while the question waited is not what gets pushed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.forge.remote import ForgeError, Remote, forge_of
from iac_kernel.guard.call import GuardedCall, SandboxRequired
from iac_kernel.guard.sandbox import processes

#: The private index, inside the repository's git folder (never the user's index).
INDEX_NAME = "iac-kernel-pr.index"
#: Where the session notebook is committed, beside the change.
RUNS_DIR = ".iac-kernel/runs"
GIT_TIMEOUT = 300.0
#: A branch name git and both forges accept (no spaces, no ``..``, no ``~^:?*[\``).
_BRANCH = re.compile(r"^(?!.*\.\.)(?!.*//)(?!/)(?!.*/$)(?!.*\.lock$)[A-Za-z0-9._/-]{1,200}$")


@dataclass
class GitResult:
    code: int
    out: str
    err: str


@dataclass
class Prepared:
    """A commit ready to push, as the question shows it."""

    root: Path
    remote: Remote
    head: str
    base: str
    branch: str
    commit: str
    files: list[str]
    diff: str
    #: Files the session changed that the commit leaves out, each with why.
    left_out: list[str] = field(default_factory=list)
    #: Other uncommitted changes in the repository that are not in the commit.
    others: list[str] = field(default_factory=list)
    notebook_path: str | None = None

    def push_argv(self) -> list[str]:
        """The one push, as the guard sees it (no ``+``, no force: a new branch only)."""
        ref = f"refs/heads/{self.branch}"
        return ["git", "push", "--porcelain", self.remote.name, f"{self.commit}:{ref}"]

    def delete_argv(self) -> list[str]:
        """Undo the push when the pull request could not be opened."""
        return ["git", "push", "--porcelain", self.remote.name, f":refs/heads/{self.branch}"]


def valid_branch(name: str) -> str:
    """``name`` when git and the forges accept it as a new branch; else ForgeError."""
    if not _BRANCH.match(name) or name.startswith("-") or "@{" in name:
        raise ForgeError(f"{name!r} is not a branch name git accepts")
    return name


class Git:
    """Runs git in ``root`` inside one guarded call (use as ``async with``)."""

    def __init__(
        self,
        root: Path,
        settings: Any,
        env: Mapping[str, str],
        ask_exec: Any,
        ask_egress: Any = None,
        audit: Any = None,
        overlays: Callable[..., list[tuple[Path, Path]]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.guard = GuardedCall(
            self.root,
            settings,
            dict(env),
            ask_exec,
            sandbox=True,
            audit=audit,
            overlays=overlays,
            ask_egress=ask_egress,
        )

    async def __aenter__(self) -> Git:
        try:
            await self.guard.__aenter__()
        except SandboxRequired as exc:
            raise ForgeError(f"git cannot run: {exc}") from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.guard.__aexit__(*exc)

    async def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        cwd: Path | None = None,
    ) -> GitResult:
        """``git ARGS`` through the guard (its launcher asks the approval server)."""
        run_env = {**self.guard.env, **(env or {})}
        proc = await asyncio.create_subprocess_exec(
            *self.guard.wrap(["git", *args]),
            cwd=str(cwd or self.root),
            env=run_env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        processes.started(proc.pid)  # the endpoint refuses this call's processes
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), GIT_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            raise
        finally:
            processes.ended(proc.pid)
        return GitResult(
            proc.returncode or 0, out.decode(errors="replace"), err.decode("utf-8", "replace")
        )

    async def check(self, *args: str, what: str, **kw: Any) -> str:
        """Output of ``git ARGS``; ForgeError naming ``what`` failed with git's last line."""
        done = await self.run(*args, **kw)
        if done.code != 0:
            raise ForgeError(f"{what} failed: {last_line(done.err) or f'git exit {done.code}'}")
        return done.out.strip()


def last_line(text: str) -> str:
    """git's own reason: its last non-empty line, without the ``guard:`` prefix noise."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def find_root(cwd: Path) -> Path:
    """The folder holding ``.git`` at or above ``cwd`` (read here, no git run on the
    host: a repository's configuration can make git run anything)."""
    here = Path(os.path.realpath(cwd))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    raise ForgeError(f"{cwd} is not in a git repository")


async def repository(git: Git, cwd: Path) -> tuple[Path, str, str | None]:
    """(top folder, HEAD commit, current branch or None) of the repository at ``cwd``."""
    top = await git.run("rev-parse", "--show-toplevel", cwd=cwd)
    if top.code != 0:
        raise ForgeError(f"{cwd} is not in a git repository")
    head = await git.run("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=cwd)
    if head.code != 0:
        raise ForgeError("the repository has no commit yet: a pull request needs a base")
    branch = await git.run("symbolic-ref", "-q", "--short", "HEAD", cwd=cwd)
    return Path(top.out.strip()), head.out.strip(), branch.out.strip() or None


async def find_remote(
    git: Git, branch: str | None, env: Mapping[str, str], name: str | None
) -> Remote:
    """The remote to push to: ``name``, else the branch's remote, else ``origin``."""
    if name is None and branch:
        configured = await git.run("config", "--get", f"branch.{branch}.remote")
        name = configured.out.strip() or None
    name = name or "origin"
    listed = (await git.run("remote")).out.split()
    if not listed:
        raise ForgeError("the repository has no remote: add one (git remote add origin URL)")
    if name not in listed:
        raise ForgeError(f"the repository has no remote {name!r} (it has {', '.join(listed)})")
    url = await git.check("remote", "get-url", "--push", name, what=f"reading remote {name}")
    return forge_of(name, url, env)


async def branch_taken(git: Git, remote: Remote, branch: str) -> str | None:
    """Why ``branch`` cannot be made (it exists here or on the remote), or None."""
    local = await git.run("show-ref", "--verify", "-q", f"refs/heads/{branch}")
    if local.code == 0:
        return f"the branch {branch} already exists in this repository"
    listed = await git.run("ls-remote", "--heads", remote.name, f"refs/heads/{branch}")
    if listed.code != 0:
        raise ForgeError(f"cannot reach the remote {remote.name}: {last_line(listed.err)}")
    if listed.out.strip():
        return f"the branch {branch} already exists on {remote.name} ({remote.host})"
    return None


async def changed_paths(git: Git, wanted: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(the ``wanted`` paths git sees as changed, those it does not with why, every other
    change in the repository) against HEAD; paths relative to the top folder."""
    status = await git.run("status", "--porcelain=v1", "-z", "--untracked-files=all")
    if status.code != 0:
        raise ForgeError(f"git status failed: {last_line(status.err)}")
    listed = status.out  # not stripped: a line starts with its two status letters
    changed: dict[str, str] = {}
    entries = listed.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename's source follows
            i += 1
        changed[path] = code
    ignored = set()
    if wanted:
        checked = await git.run("check-ignore", "--no-index", "--", *wanted)
        ignored = {line for line in checked.out.splitlines() if line}
    keep, left_out = [], []
    for path in wanted:
        if path in ignored:
            left_out.append(f"{path} (ignored by .gitignore)")
        elif path in changed:
            keep.append(path)
        else:
            left_out.append(f"{path} (no change against HEAD)")
    others = sorted(p for p in changed if p not in set(wanted))
    return keep, left_out, others


async def make_commit(
    git: Git,
    head: str,
    files: Sequence[str],
    message: str,
    extra: Mapping[str, bytes] | None = None,
) -> tuple[str, str]:
    """(commit, diff): ``files`` as they are now, plus ``extra`` (path -> bytes), on top
    of ``head``, in a private index; no ref, index or working file changes."""
    gitdir = await git.check("rev-parse", "--absolute-git-dir", what="finding the git folder")
    index = {"GIT_INDEX_FILE": str(Path(gitdir) / INDEX_NAME)}
    try:
        await git.check("read-tree", head, env=index, what="reading HEAD")
        if files:
            await git.check("add", "-A", "--", *files, env=index, what="adding the changed files")
        for path, data in (extra or {}).items():
            blob = await git.check(
                "hash-object", "-w", "--stdin", stdin=data, what="storing " + path
            )
            await git.check(
                "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}",
                env=index, what="adding " + path,
            )  # fmt: skip
        tree = await git.check("write-tree", env=index, what="writing the tree")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index["GIT_INDEX_FILE"])
    commit = await git.check(
        "commit-tree", tree, "-p", head, "-F", "-", stdin=message.encode(), what="committing"
    )
    diff = await git.check(
        "diff", "--no-color", "--no-ext-diff", "--stat", "--patch", head, commit,
        "--", *files, what="showing the diff",
    )  # fmt: skip
    return commit, diff


async def push(git: Git, prepared: Prepared) -> None:
    """Point the new branch at the reviewed commit (it must not exist) and push it."""
    ref = f"refs/heads/{prepared.branch}"
    await git.check(
        "update-ref", ref, prepared.commit, "", what=f"creating the branch {prepared.branch}"
    )
    done = await git.run(*prepared.push_argv()[1:])
    if done.code != 0:
        await git.run("update-ref", "-d", ref, prepared.commit)  # nothing left halfway
        why = last_line(done.err) or last_line(done.out) or f"git exit {done.code}"
        raise ForgeError(
            f"the push to {prepared.remote.name} ({prepared.remote.host}) failed: {why}"
        )


async def unpush(git: Git, prepared: Prepared) -> str | None:
    """Remove the pushed branch again (remote and local); why it could not, or None."""
    done = await git.run(*prepared.delete_argv()[1:])
    await git.run("update-ref", "-d", f"refs/heads/{prepared.branch}", prepared.commit)
    return None if done.code == 0 else last_line(done.err) or f"git exit {done.code}"
