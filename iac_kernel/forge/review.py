"""Pull requests as the review of an apply (issue 44, items 2 and 3).

**Apply after review** (:class:`PullRequestApply`): ``terraform_apply`` given a request
binds the apply to it. Through the same client and token as ``pull_request``
(:mod:`.clients`) and git through the guard (:mod:`.gitrun`), before the question and
again once the user allowed it (before the wait for approvals, after it, and right before
the approval is spent), in this order, the first that fails being the one reason:

1. the request is not closed without a merge;
2. it carries a plan: the latest plan marker (:func:`~.body.plan_markers`) written by the
   token's user (the body of a request they opened, or a comment of ``%pr review``), and
   that marker's SHA-256 is this plan file's;
3. no commit came after the plan: the marker's commit is the request's head;
4. nobody's latest review asks for changes, and someone other than the request's author
   and the one applying approved that head (GitHub: an APPROVED review of the head
   commit; GitLab: its approvals, kept across pushes as the project's settings say);
5. it is merged, or (the ``pr_apply_before_merge`` setting) the forge says it can be;
6. the merged commit (the head, before a merge) holds the configuration the plan was
   made from: a plan file carries that configuration (``tfconfig/`` in its zip), and every
   ``.tf``/``.tf.json`` file of the root module and of each local module, as a git blob
   id, is the commit's in the plan's folder, as are the var files terraform reads by
   itself that the commit holds.

The request's approvals count as the team's: the plan's approval record (the same
:class:`~iac_kernel.terraform.gate.Gate`, record and audit trail as approvals given in a
terminal or the panel) gets one vote per approver, ``Identity(login, via=forge)``, and
the apply needs at least one of them besides what the team's rules ask; while it waits
for more, the request's approvals are read again every :data:`FORGE_POLL_SECONDS` (of the
same head). When the record
wants approvers from groups, the forge says (:meth:`~.clients.ForgeClient.groups_of`, the
record's groups only) which of them each approver belongs to: the vote carries those,
and an approver in none of them does not vote; why (not a member, a team that does not
exist or cannot be read) is said while the apply waits and in its refusal. The result
(applied, failed, or refused once the user had allowed the apply, with the plan's hash
and the record's id) is posted to the request as a comment; a refusal before the
question is only the call's one line (nothing the user approved speaks to the team).

**Plans for others' requests** (:func:`checkout`, :func:`plan_comment`): a request's head
is fetched and checked out (``git worktree add --detach``, through the guard) in a
scratch folder inside the repository's git folder, :data:`REVIEWS_DIR`;
``terraform_plan`` plans there and the plan is posted as a comment with its marker, so an
apply of that plan file is bound the same way. A request's scratch worktrees are removed
(:func:`remove_scratch`, git through the guard) once the request is applied through one's
plan, and when a later review finds the request closed or merged (an older head's, when
it plans a new one); each checkout forgets the scratch worktrees whose folder
vanished (:func:`prune_scratch`: never the user's own). A worktree
holding what neither the request nor its plan made (a local state above all) is kept,
and the result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import json
import os
import re
import stat
import time
import zipfile
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from iac_kernel.forge import body as bodies
from iac_kernel.forge import gitrun
from iac_kernel.forge.clients import ForgeClient, PullFacts, Token, api_token, client_for
from iac_kernel.forge.remote import GITHUB, GITLAB, ForgeError, Remote
from iac_kernel.redact import redact
from iac_kernel.team.rules import Requirement
from iac_kernel.terraform import gate
from iac_kernel.terraform.cli import errors_of, is_plan_file
from iac_kernel.terraform.plan import Plan, summary_line
from iac_kernel.terraform.review import ApprovedPlan, counts_line
from iac_kernel.terraform.sensitive import mask_text
from iac_kernel.terraform.workspace import sensitive_values

#: Seconds between readings of a request's approvals while its apply waits for more.
FORGE_POLL_SECONDS = 10.0
#: Where the heads of reviewed requests are checked out, inside the git folder.
REVIEWS_DIR = "iac-kernel/reviews"
#: What ``terraform init`` leaves in a scratch worktree (a saved plan besides): anything
#: else git does not track keeps the worktree (:func:`leftovers`).
MADE_BY_INIT = (".terraform", ".terraform.lock.hcl")
#: What ``pull_request`` accepts: the number (``7``, ``"#7"``, ``"!7"``) or its address.
PULL_REQUEST_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "minLength": 1}],
    "description": "A pull/merge request of this repository's remote: its number or address.",
}
#: The files of a module terraform reads (and a plan's snapshot holds).
CONFIG_SUFFIXES = (".tf", ".tf.json", ".tofu", ".tofu.json")
#: The var files terraform reads by itself in the root module's folder.
AUTO_VAR_FILES = (
    "terraform.tfvars",
    "terraform.tfvars.json",
    "*.auto.tfvars",
    "*.auto.tfvars.json",
)
#: Outcomes as the result comment words them.
OUTCOMES = {"applied": "Applied", "failed": "Failed", "stale": "Failed", "refused": "Refused"}
_NUMBER = re.compile(r"^[#!]?(\d+)$")
_PATHS = {
    GITHUB: re.compile(r"^/pull/(\d+)/?$"),
    GITLAB: re.compile(r"^/-/merge_requests/(\d+)/?$"),
}


# -- which request ---------------------------------------------------------------------


def number_of(value: Any, remote: Remote) -> int:
    """The request's number from what the call gave; ForgeError (one line) when it names
    none of ``remote``'s project."""
    noun = _noun(remote)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ForgeError(f"pull_request must be a {noun}'s number or address, not {value!r}")
    if isinstance(value, int):
        number = value
    else:
        text = value.strip()
        found = _NUMBER.match(text)
        if found:
            number = int(found[1])
        elif "://" in text:
            number = _number_in_url(text, remote)
        else:
            raise ForgeError(f"{text!r} is not a {noun}'s number (7) or address")
    if number < 1:
        raise ForgeError(f"{number} is not a {noun}'s number (they start at 1)")
    return number


def _number_in_url(url: str, remote: Remote) -> int:
    parts = urlsplit(url)
    web = urlsplit(remote.web_url)
    rest = parts.path
    if parts.netloc.lower() != web.netloc.lower() or not rest.startswith(web.path + "/"):
        raise ForgeError(f"{url} is not a {_noun(remote)} of {remote.project} ({remote.web_url})")
    found = _PATHS[remote.forge].match(rest[len(web.path) :])
    if found is None:
        raise ForgeError(f"{url} is not the address of a {_noun(remote)} of {remote.project}")
    return int(found[1])


def _noun(remote: Remote) -> str:
    return "merge request" if remote.forge == GITLAB else "pull request"


def shown(remote: Remote, number: int) -> str:
    """``pull request #7`` or ``merge request !7``."""
    return f"{_noun(remote)} {'!' if remote.forge == GITLAB else '#'}{number}"


@dataclass
class Where:
    """How git runs for a request: the call's settings, environment and askers."""

    settings: Any
    env: dict[str, str]
    ask_exec: Any = None
    ask_egress: Any = None

    @classmethod
    def of(cls, ctx: Any) -> Where:
        """From a tool call's context (its settings, env, ask_exec and ask_egress)."""
        return cls(ctx.settings, {**os.environ, **ctx.env}, ctx.ask_exec, ctx.ask_egress)


@dataclass
class PullRequest:
    """One request of the repository at :attr:`root` (its main worktree), through its
    forge's client."""

    root: Path
    remote: Remote
    client: ForgeClient
    token: Token
    number: int
    where: Where

    @property
    def name(self) -> str:
        return shown(self.remote, self.number)

    def git(self) -> gitrun.Git:
        """Git in the repository, through the guard (use as ``async with``)."""
        where = self.where
        return gitrun.Git(self.root, where.settings, where.env, where.ask_exec, where.ask_egress)

    async def facts(self) -> PullFacts:
        return await asyncio.to_thread(self.client.pull, self.number)

    async def comment(self, text: str) -> str:
        return await asyncio.to_thread(self.client.comment, self.number, text)

    def refs(self, facts: PullFacts) -> list[str]:
        """Refs that hold the request's commits, for a server that fetches no bare id."""
        head = "merge-requests" if self.remote.forge == GITLAB else "pull"
        return [f"refs/{head}/{self.number}/head", f"refs/heads/{facts.base}"]


def main_top(top: Path) -> Path:
    """The main worktree of the repository whose worktree is ``top`` (a scratch worktree
    is a linked one): git writes fetched objects under its git folder, so the guarded
    call is that folder's, the sandbox's writable place (read here, no git run)."""
    dotgit = top / ".git"
    if not dotgit.is_file():
        return top
    try:
        gitdir = Path(dotgit.read_text().partition("gitdir:")[2].strip())
        gitdir = gitdir if gitdir.is_absolute() else top / gitdir
        shared = gitdir / "commondir"
        common = (gitdir / shared.read_text().strip()) if shared.is_file() else gitdir
    except OSError:
        return top
    common = Path(os.path.realpath(common))
    return common.parent if common.name == ".git" else top


async def open_pull_request(ref: Any, folder: Path, where: Where) -> PullRequest:
    """The request ``ref`` names, of the repository holding ``folder`` (its push remote:
    the current branch's, else ``origin``), with the token bound to its API host."""
    top = main_top(gitrun.find_root(folder))
    git = gitrun.Git(top, where.settings, where.env, where.ask_exec, where.ask_egress)
    async with git:
        root, _head, branch = await gitrun.repository(git, top)
        remote = await gitrun.find_remote(git, branch, where.env, None)
    number = number_of(ref, remote)
    token = api_token(remote)
    client = await asyncio.to_thread(client_for, remote, token)
    return PullRequest(root, remote, client, token, number, where)


def folder_in(root: Path, folder: Path) -> str:
    """``folder`` relative to the repository's top (``.`` for the top); ForgeError when
    it is not in the repository."""
    relative = os.path.relpath(os.path.realpath(folder), os.path.realpath(root))
    if relative == ".." or relative.startswith(".." + os.sep):
        raise ForgeError(f"{folder} is not in the repository at {root}")
    return relative


# -- what the request says --------------------------------------------------------------


def carried_plan(facts: PullFacts) -> tuple[str, str] | None:
    """``(sha256, commit)`` of the plan marker of the latest note the token's user wrote
    (the body counts only when they opened the request): anyone can comment, and only this
    user's markers say which plan their reviewed request carries. In a note only its first
    marker counts: ours comes before anything the note quotes (a resource key, terraform's
    error text), which could carry one of its own."""
    found = None
    for note in facts.notes:
        if note.author == facts.viewer:
            found = next(iter(bodies.plan_markers(note.body)), found)
    return found


def approvers(facts: PullFacts) -> list[str]:
    """Who approved the head: neither the author nor the token's user (the one who
    applies), and on GitHub only a review of the head commit."""
    return [
        login
        for login, commit in facts.approvals
        if login not in (facts.author, facts.viewer) and commit in (None, facts.head)
    ]


def judge(
    facts: PullFacts, remote: Remote, sha256: str, allow_unmerged: bool
) -> tuple[str | None, str]:
    """(why an apply of the plan ``sha256`` is refused, or None; the commit whose
    configuration must be the plan's): checks 1 to 5 of the module doc."""
    name = shown(remote, facts.number)
    number = facts.number
    if facts.state == "closed":
        return f"{name} is closed without being merged: nothing of it is applied", ""
    carried = carried_plan(facts)
    if carried is None:
        return (
            f"{name} carries no plan: neither its body nor a comment by {facts.viewer} has an "
            f"iac-kernel plan marker (make one with `%pr review {number}`)",
            "",
        )
    planned, made_from = carried
    if planned != sha256:
        return (
            f"this plan file (sha256 {sha256[:12]}) is not the plan {name} carries "
            f"(sha256 {planned[:12]}): apply that one, or plan again with `%pr review {number}`",
            "",
        )
    if made_from != facts.head:
        return (
            f"commit {facts.head[:12]} came to {name} after its plan was made (from "
            f"{made_from[:12]}): plan it again with `%pr review {number}` and have it reviewed",
            "",
        )
    if facts.changes_requested:
        return f"{', '.join(facts.changes_requested)} asked for changes on {name}", ""
    if not approvers(facts):
        others = facts.author if facts.author == facts.viewer else f"{facts.author} or you"
        return (
            f"{name} has no approval of its head {facts.head[:12]} by anyone but {others}: "
            f"another person must approve it on {remote.forge_name}",
            "",
        )
    if facts.state == "merged":
        if not facts.merge_commit:
            return f"{remote.forge_name} names no merge commit of {name}", ""
        return None, facts.merge_commit
    if not allow_unmerged:
        return (
            f"{name} is not merged yet (applying before the merge is off: the "
            "pr_apply_before_merge setting)",
            "",
        )
    if facts.mergeable is not True:
        said = "has not said yet" if facts.mergeable is None else "says no"
        return f"{name} is not merged and {remote.forge_name} {said} whether it can be", ""
    return None, facts.head


# -- the configuration at the commit ------------------------------------------------------


@dataclass(frozen=True)
class PlanConfig:
    """The configuration a plan was made from: each module's folder (relative to the
    root module's, ``.`` for it) and its files' bytes."""

    modules: Mapping[str, Mapping[str, bytes]]


def plan_config(path: Path) -> PlanConfig:
    """The root and local modules of the plan file ``path`` (its ``tfconfig/``); the
    modules from a registry or a remote source are pinned by the root's text."""
    try:
        with zipfile.ZipFile(path) as archive:
            listed = json.loads(archive.read("tfconfig/modules.json"))
            by_key: dict[str, dict[str, bytes]] = {}
            for info in archive.infolist():
                name = info.filename
                if name.startswith("tfconfig/m-") and not name.endswith("/"):
                    key, _, file = name[len("tfconfig/m-") :].partition("/")
                    by_key.setdefault(key, {})[file] = archive.read(info)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ForgeError(f"the plan file holds no configuration to compare ({exc})") from None
    modules: dict[str, dict[str, bytes]] = {}
    for entry in listed if isinstance(listed, list) else []:
        key, source, folder = entry.get("Key"), entry.get("Source") or "", entry.get("Dir") or ""
        if key == "":
            modules["."] = by_key.get("", {})
        elif source.startswith(("./", "../")) and not _installed(folder):
            modules[os.path.normpath(folder)] = by_key.get(str(key), {})
    if "." not in modules:
        raise ForgeError("the plan file names no root module")
    return PlanConfig(modules)


def _installed(folder: str) -> bool:
    """A module folder terraform installed (a local module inside a remote one)."""
    return os.path.isabs(folder) or os.path.normpath(folder).split(os.sep)[0] == ".terraform"


def repository_folders(config: PlanConfig, folder: str) -> dict[str, str]:
    """Each module folder of ``config`` -> its folder in the repository (``folder``: the
    root module's); ForgeError for one outside the repository."""
    found = {}
    for module in config.modules:
        place = os.path.normpath(os.path.join(folder, module))
        if place == ".." or place.startswith(".." + os.sep):
            raise ForgeError(
                f"the module folder {module} is outside the repository: no commit can show it"
            )
        found[module] = place
    return found


def is_config_file(name: str) -> bool:
    """A file terraform reads as configuration (not one it ignores: ``.x``, ``x~``, ``#x#``)."""
    ignored = name.startswith(".") or name.endswith("~") or (name[:1] == name[-1:] == "#")
    return name.endswith(CONFIG_SUFFIXES) and not ignored


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """The git blob id of ``data`` (``sha1`` or ``sha256`` repositories)."""
    return hashlib.new(object_format, b"blob %d\0" % len(data) + data).hexdigest()


def difference(
    config: PlanConfig,
    places: Mapping[str, str],
    listing: Mapping[str, Mapping[str, str]],
    workdir: Path,
    object_format: str,
) -> str | None:
    """The first file the commit (``listing``: repository folder -> name -> blob id)
    does not hold as the plan did, in words; None when it holds the configuration."""
    for module, files in sorted(config.modules.items()):
        place = places[module]
        prefix = "" if place == "." else f"{place}/"
        committed = {n: i for n, i in listing.get(place, {}).items() if is_config_file(n)}
        planned = {n: blob_id(d, object_format) for n, d in files.items() if is_config_file(n)}
        for name in sorted(set(planned) | set(committed)):
            if name not in committed:
                return f"{prefix}{name} is in the plan, not in the commit"
            if name not in planned:
                return f"{prefix}{name} is in the commit, not in the plan"
            if planned[name] != committed[name]:
                return f"{prefix}{name} differs"
    root = places["."]
    for name, object_id in sorted(listing.get(root, {}).items()):
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in AUTO_VAR_FILES):
            continue
        try:
            local = (workdir / name).read_bytes()
        except OSError:
            return f"{name} is in the commit, not in the folder the plan was made in"
        if blob_id(local, object_format) != object_id:
            return f"{name} differs from the folder's, which the plan was made with"
    return None


async def fetch_commit(git: gitrun.Git, pull: PullRequest, commit: str, facts: PullFacts) -> None:
    """Make ``commit`` present in the repository (``git fetch`` of its id, else of the
    request's refs): objects only, no ref and no FETCH_HEAD written."""

    async def present() -> bool:
        return (await git.run("cat-file", "-e", f"{commit}^{{commit}}")).code == 0

    if await present():
        return
    remote = pull.remote.name
    quiet = ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote)
    done = await git.run(*quiet, commit)
    for ref in pull.refs(facts):
        if await present():
            return
        await git.run(*quiet, ref)
    if not await present():
        why = gitrun.last_line(done.err) or f"git exit {done.code}"
        raise ForgeError(f"commit {commit[:12]} cannot be fetched from {remote}: {why}")


async def tree(git: gitrun.Git, commit: str, folder: str) -> dict[str, str]:
    """The files directly in ``folder`` at ``commit``: name -> blob id."""
    args = ["ls-tree", "-z", "--full-tree", commit]
    if folder != ".":
        args += ["--", f"{folder}/"]
    listed = await git.check(*args, what=f"reading commit {commit[:12]}")
    found = {}
    for entry in listed.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            found[path.rpartition("/")[2]] = parts[2]
    return found


# -- an apply bound to a request ----------------------------------------------------------


def with_review(requirement: Requirement, label: str) -> Requirement:
    """The rules' requirement, and at least one approval: the request's review."""
    return Requirement(
        max(requirement.approvers, 1), dict(requirement.groups), (*requirement.rules, label)
    )


@dataclass
class PullRequestApply:
    """An apply bound to a reviewed request (see the module doc)."""

    pull: PullRequest
    #: The plan's folder, relative to the repository's top.
    folder: str
    requirement: Requirement
    allow_unmerged: bool = False
    #: What the last check found: the request, the commit compared, its approvers.
    facts: PullFacts | None = None
    commit: str = ""
    approvers: tuple[str, ...] = ()
    held: PullRequestGate | None = None
    #: The address of the result's comment, once posted.
    posted: str | None = None
    #: The request's scratch worktree the plan was made in (:func:`checkout`), if it was.
    scratch: Path | None = None

    @classmethod
    async def bind(
        cls, ref: Any, approved: ApprovedPlan, requirement: Requirement, where: Where
    ) -> PullRequestApply:
        """Check the request before the question; ForgeError (one line) refuses."""
        workdir = approved.binding.host_workdir
        pull = await open_pull_request(ref, workdir, where)
        label = f"{pull.remote.forge_name} review of {pull.name}"
        allow = bool(getattr(where.settings, "pr_apply_before_merge", False))
        top = gitrun.find_root(workdir)  # the worktree the plan was made in
        made = cls(pull, folder_in(top, workdir), with_review(requirement, label), allow)
        made.scratch = scratch_of(top, pull)
        refusal = await made.check(approved)
        if refusal:
            raise ForgeError(refusal)
        return made

    async def check(self, approved: ApprovedPlan) -> str | None:
        """Why the apply is refused now (checks 1 to 6 of the module doc), or None."""
        facts = await self.pull.facts()
        refusal, commit = judge(facts, self.pull.remote, approved.sha256, self.allow_unmerged)
        if refusal:
            return refusal
        config = await asyncio.to_thread(plan_config, approved.copy)
        places = repository_folders(config, self.folder)
        async with self.pull.git() as git:
            await fetch_commit(git, self.pull, commit, facts)
            listing = {place: await tree(git, commit, place) for place in set(places.values())}
        shape = "sha256" if len(commit) == 64 else "sha1"
        workdir = Path(approved.binding.host_workdir)
        why = difference(config, places, listing, workdir, shape)
        if why:
            merged = "merged commit" if facts.state == "merged" else "head commit"
            return (
                f"the {merged} {commit[:12]} of {self.pull.name} does not hold the "
                f"configuration the plan was made from ({why})"
            )
        self.facts, self.commit, self.approvers = facts, commit, tuple(approvers(facts))
        return None

    def question(self) -> str:
        """What the apply's question adds: what it is bound to, and the comment."""
        facts = self.facts
        assert facts is not None
        forge = self.pull.remote.forge_name
        state = (
            f"merged as {self.commit[:12]}"
            if facts.state == "merged"
            else f"not merged yet ({forge} says it can be; applying before the merge is on)"
        )
        return (
            f"Bound to {self.pull.name} ({facts.url}): its plan of commit {facts.head[:12]}, "
            f"approved on {forge} by {', '.join(self.approvers)}; {state}; the configuration "
            f"of {self.commit[:12]} is the plan's. The result is posted there as a comment."
        )

    def gate(self, approved: ApprovedPlan, card: Mapping[str, Any] | None) -> PullRequestGate:
        """The team's gate for this apply, with the request's approvals as votes."""
        self.held = PullRequestGate(approved, self.requirement, card, bound=self)
        return self.held

    def audit(self) -> dict[str, Any]:
        """For the apply's audit record."""
        facts = self.facts
        return {
            "forge": self.pull.remote.forge,
            "project": self.pull.remote.project,
            "number": self.pull.number,
            "url": facts.url if facts else None,
            "head": facts.head if facts else None,
            "commit": self.commit,
            "approved_by": list(self.approvers),
        }

    async def reported(self, running: Awaitable[Any], approved: ApprovedPlan) -> Any:
        """Await the apply (a ``ToolResult``) and post its outcome to the request; a
        refusal raised by the apply is posted too, and raised again."""
        try:
            result = await running
        except Exception as exc:
            text = str(exc)
            outcome = "refused" if text.startswith(("Not applied", "Refused")) else "failed"
            await self.report(outcome, text, approved)
            raise
        raw = result.raw_output if isinstance(result.raw_output, dict) else {}
        outcome = str(raw.get("outcome") or ("failed" if result.is_error else "applied"))
        problem = await self.report(outcome, result.content, approved)
        where = self.posted or ""
        said = f"The result was posted to {self.pull.name}: {where}" if not problem else problem
        if outcome == "applied" and self.scratch is not None:
            said += f"\n\n{await self.tidy_scratch(self.scratch)}"
        result.content = f"{result.content}\n\n{said}"
        return result

    async def tidy_scratch(self, scratch: Path) -> str:
        """After an apply of a plan made in ``scratch``: remove it; what became of it."""
        try:
            async with self.pull.git() as git:
                why = await remove_scratch(git, scratch)
        except ForgeError as exc:
            why = f"the scratch worktree {scratch} is kept: {exc}"
        if why is None:
            return f"The scratch worktree {scratch} was removed."
        return f"{why[:1].upper()}{why[1:]}."

    async def report(self, outcome: str, text: str, approved: ApprovedPlan) -> str | None:
        """Post the comment of ``outcome``; why it could not be posted, or None."""
        comment = self.result_comment(outcome, text, approved)
        try:
            self.posted = await self.pull.comment(comment)
        except ForgeError as exc:
            return f"The result could not be posted to {self.pull.name}: {exc}"
        return None

    def result_comment(self, outcome: str, text: str, approved: ApprovedPlan) -> str:
        """The result as a comment: outcome, plan hash, record id, masked."""
        record = self.held.record if self.held is not None else None
        word = OUTCOMES.get(outcome, outcome.capitalize())
        sha = approved.sha256
        lines = [f"**{word}** by iac-kernel: the plan with SHA-256 `{sha}`"]
        if self.commit:
            lines[0] += f" (configuration of `{self.commit[:12]}`)"
        lines[0] += "."
        if outcome == "applied":
            lines.append(summary_line(approved.plan))
        elif outcome in ("failed", "stale"):
            lines += [f"- {error}" for error in _errors(text)[:5]]
            lines.append("Terraform's whole output is in the session that ran the apply.")
        else:
            lines.append(_first_line(text))
            lines.append("Nothing was applied.")
        if record is not None:
            voters = ", ".join(vote.approver for vote in record.approvals) or "nobody yet"
            lines.append(f"Approval record `{record.id}` ({record.status}; approved by {voters}).")
        values = approved.sensitive | set(sensitive_values(approved.binding.host_workdir))
        return mask_text(redact("\n\n".join(lines)), values)


def _errors(text: str) -> list[str]:
    return errors_of(text) or [_first_line(text)]


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no reason given)"


@dataclass
class PullRequestGate(gate.Gate):
    """The team's gate, bound to a request: its checks run again before the wait, after
    it and before the spend, and its approvers vote on the record first."""

    bound: PullRequestApply | None = field(default=None, kw_only=True)
    #: When the request's approvals were last read (:meth:`look`).
    _read_at: float = field(default=0.0, init=False)

    async def wait(self, say: gate.Say) -> str | None:
        bound = self.bound
        assert bound is not None
        refusal = await self._check(bound)
        if refusal:
            return refusal
        self._read_at = time.monotonic()
        refusal, waits, uncounted = await asyncio.to_thread(self._vote, bound)
        if refusal:
            return refusal
        if uncounted:
            say(f"Not counted: {'; '.join(uncounted)}.\n")
        refusal = await super().wait(say)
        if refusal and uncounted:
            refusal = f"{refusal} Not counted: {'; '.join(uncounted)}."
        # After a wait (it may have been long) the request is read again.
        return refusal or (await self._check(bound) if waits else None)

    async def _check(self, bound: PullRequestApply) -> str | None:
        try:
            refusal = await bound.check(self.approved)
        except ForgeError as exc:
            refusal = str(exc)
        return f"Not applied: {refusal}. Nothing was run." if refusal else None

    def look(self, book: Any, record_id: str) -> Any:
        """While the apply waits, every :data:`FORGE_POLL_SECONDS` the request's approvals
        are read again and vote (of the same head only: a new commit is refused after the
        wait), then the record as it is now."""
        bound = self.bound
        if bound is not None and time.monotonic() - self._read_at >= FORGE_POLL_SECONDS:
            self._read_at = time.monotonic()
            try:
                facts = bound.pull.client.pull(bound.pull.number)
            except ForgeError:
                facts = None  # read again next time; the wait goes on
            if facts is not None and bound.facts is not None and facts.head == bound.facts.head:
                bound.approvers = tuple(approvers(facts))
                self._vote(bound)
        return super().look(book, record_id)

    def _vote(self, bound: PullRequestApply) -> tuple[str | None, bool, list[str]]:
        """The request's approvers approve the plan's record (made here if it is new),
        each with the record's groups the forge says they belong to; (why not, whether
        the record still waits for someone, why approvals did not count)."""
        from iac_kernel.team.approvals import ApprovalError, Approvals
        from iac_kernel.team.store import Identity, TeamStoreError, open_store, process_identity

        approved = self.approved
        try:
            store = open_store()
        except TeamStoreError as exc:
            return f"Not applied: the approval record needs the team store, and {exc}.", False, []
        uncounted: list[str] = []
        try:
            book = Approvals(store)
            record = book.request(
                process_identity(),
                approved.sha256,
                approved.binding.approval_inputs(),
                counts_line(approved.plan, approved.shown_path).removeprefix("⚠️ "),
                self.requirement,
                self.card,
            )
            remote = bound.pull.remote
            head = bound.facts.head[:12] if bound.facts else ""
            note = f"approved {bound.pull.name} ({head}) on {remote.forge_name}"
            voted = {vote.approver for vote in record.votes}
            for login in bound.approvers:
                if record.status != "pending" or login in voted:
                    continue
                groups: frozenset[str] = frozenset()
                if record.groups:  # the forge is asked of the record's groups only
                    membership = bound.pull.client.groups_of(login, record.groups)
                    groups = membership.groups
                    uncounted += [
                        f"{login}'s approval on {remote.forge_name} does not count for {group} "
                        f"({why})"
                        for group, why in sorted(membership.not_counted.items())
                    ]
                    if not groups:
                        continue  # in none of them: not a vote the record would count
                # A record decided meanwhile: it says what it still waits for.
                with contextlib.suppress(ApprovalError):
                    book.approve(
                        record.id,
                        Identity(login, via=remote.forge, groups=groups),
                        note=note,
                        plan_sha256=approved.sha256,
                    )
            waits = book.get(record.id).status == "pending"
        except (ApprovalError, TeamStoreError) as exc:
            return f"Not applied: {exc}. Nothing was run.", False, uncounted
        finally:
            store.close()
        return None, waits, uncounted

    def spend(self) -> str | None:
        bound = self.bound
        assert bound is not None
        try:  # right before: the request as the forge says it is now
            facts = bound.pull.client.pull(bound.pull.number)
        except ForgeError as exc:
            return f"Not applied: {exc}. Nothing was run."
        remote = bound.pull.remote
        refusal, commit = judge(facts, remote, self.approved.sha256, bound.allow_unmerged)
        if not refusal and commit != bound.commit:
            refusal = f"{bound.pull.name} now names commit {commit[:12]}, not {bound.commit[:12]}"
        if refusal:
            return f"Not applied: {refusal}. Nothing was run."
        return super().spend()

    def audit(self) -> dict[str, Any]:
        assert self.bound is not None
        return {**super().audit(), "pull_request": self.bound.audit()}


# -- a plan of a request's head -----------------------------------------------------------


@dataclass
class Checkout:
    """A request's head, checked out in a scratch worktree."""

    pull: PullRequest
    facts: PullFacts
    #: The worktree, and the plan's folder in it.
    root: Path
    folder: Path


async def checkout(ref: Any, folder: Path, where: Where) -> Checkout:
    """Fetch request ``ref``'s head and check it out (detached) in the scratch folder of
    the repository holding ``folder``; the same folder in it is where the plan is made.
    A worktree of the same head is reused (its ``.terraform`` too)."""
    pull = await open_pull_request(ref, folder, where)
    relative = folder_in(gitrun.find_root(folder), folder)
    facts = await pull.facts()
    async with pull.git() as git:
        common = await git.check(
            "rev-parse", "--path-format=absolute", "--git-common-dir", what="finding the git folder"
        )
        reviews = Path(common) / REVIEWS_DIR
        name = f"{scratch_prefix(pull)}{facts.head[:12]}"
        # Another head's worktree (all of them once the request is closed) is done with.
        removed, kept = await tidy(git, reviews, pull, name if facts.state == "open" else None)
        if facts.state != "open":
            said = [f"its scratch worktree {p.name} was removed" for p in removed] + kept
            more = f" ({'; '.join(said)})" if said else ""
            raise ForgeError(f"{pull.name} is {facts.state}: only an open one is planned{more}")
        await fetch_commit(git, pull, facts.head, facts)
        scratch = reviews / name
        current = (
            await git.run("-C", str(scratch), "rev-parse", "HEAD")
            if scratch.is_dir() and not scratch.is_symlink()
            else None
        )
        if current is None or current.code != 0 or current.out.strip() != facts.head:
            if scratch.exists() or scratch.is_symlink():
                why = await remove_scratch(git, scratch)
                if why:
                    raise ForgeError(why)
            await prune_scratch(git, reviews)
            await git.check(
                "worktree", "add", "--detach", "--quiet", str(scratch), facts.head,
                what=f"checking out {pull.name}",
            )  # fmt: skip
    target = scratch / relative
    if not target.is_dir():
        raise ForgeError(f"the head {facts.head[:12]} of {pull.name} has no folder {relative}")
    return Checkout(pull, facts, scratch, target)


def scratch_prefix(pull: PullRequest) -> str:
    """The start of the name of each of ``pull``'s scratch worktrees (the head follows)."""
    return f"{pull.remote.forge}-{pull.number}-"


def scratch_of(top: Path, pull: PullRequest) -> Path | None:
    """``top`` when it is one of ``pull``'s scratch worktrees (in :data:`REVIEWS_DIR` of
    the repository at ``pull.root``), else None (read here, no git run)."""
    top = Path(os.path.realpath(top))
    inside = tuple(REVIEWS_DIR.split("/"))
    if top.parent.parts[-len(inside) :] != inside or not top.name.startswith(scratch_prefix(pull)):
        return None
    main = main_top(top)
    if main == top or os.path.realpath(main) != os.path.realpath(pull.root):
        return None
    return top


def leftovers(status: str, top: Path) -> list[str]:
    """What keeps the scratch worktree ``top``, from its ``git status --porcelain=v1 -z
    --ignored`` (``status``): a changed tracked file, or an untracked or ignored one that
    neither ``terraform init`` (:data:`MADE_BY_INIT`) nor a plan (a saved plan file)
    made: a local state, above all, is the only copy of what an apply did."""
    kept: list[str] = []
    entries = iter(status.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            next(entries, None)  # the path it was renamed or copied from
        parts = Path(path.rstrip("/")).parts
        if any(part in MADE_BY_INIT for part in parts):
            continue
        if code in ("??", "!!") and _saved_plan(top / path):
            continue
        kept.append(path)
    return kept


def _saved_plan(path: Path) -> bool:
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)  # never a link's target
    except OSError:
        return False
    return regular and is_plan_file(path)


async def remove_scratch(git: gitrun.Git, scratch: Path) -> str | None:
    """Remove the scratch worktree ``scratch`` (``git worktree remove --force``, which
    also forgets one whose folder vanished) unless :func:`leftovers` keep it; None once it
    is gone, else why it stays (one line)."""
    if await asyncio.to_thread(scratch.is_symlink):  # git would remove what it points to
        return f"the scratch worktree {scratch} is kept: it is a symbolic link, left alone"
    if await asyncio.to_thread(scratch.is_dir):
        listed = await git.run("-C", str(scratch), "status", "--porcelain=v1", "-z", "--ignored")
        if listed.code != 0:
            why = gitrun.last_line(listed.err) or f"git exit {listed.code}"
            return f"the scratch worktree {scratch} is kept: git cannot read its status ({why})"
        kept = leftovers(listed.out, scratch)
        if kept:
            more = f" and {len(kept) - 1} more" if len(kept) > 1 else ""
            return (
                f"the scratch worktree {scratch} is kept: it holds {kept[0]}{more}, which "
                "neither the request nor its plan made (`git worktree remove --force "
                f"{scratch}` removes it)"
            )
        done = await git.run("worktree", "remove", "--force", str(scratch))
        if done.code != 0:
            why = gitrun.last_line(done.err) or f"git exit {done.code}"
            return f"the scratch worktree {scratch} could not be removed ({why})"
    else:  # gone by hand: git forgets it (nothing else, unlike `git worktree prune`)
        await git.run("worktree", "remove", "--force", str(scratch))
    return None


async def prune_scratch(git: gitrun.Git, reviews: Path) -> None:
    """Forget the worktrees in ``reviews`` whose folder vanished. Never ``git worktree
    prune``: in the sandbox the user's own linked worktrees elsewhere look vanished too,
    and pruning them would drop their index and break their checkout."""
    listed = await git.run("worktree", "list", "--porcelain", "-z")
    if listed.code == 0:
        for path in await asyncio.to_thread(_vanished_in, reviews, listed.out):
            await git.run("worktree", "remove", "--force", str(path))


def _vanished_in(reviews: Path, listed: str) -> list[Path]:
    """The worktrees of ``git worktree list --porcelain -z`` (``listed``) directly in
    ``reviews`` whose folder is gone."""
    inside = os.path.realpath(reviews)
    paths = [
        Path(e.removeprefix("worktree ")) for e in listed.split("\0") if e.startswith("worktree ")
    ]
    return [p for p in paths if os.path.realpath(p.parent) == inside and not os.path.lexists(p)]


async def tidy(
    git: gitrun.Git, reviews: Path, pull: PullRequest, keep: str | None
) -> tuple[list[Path], list[str]]:
    """Remove ``pull``'s scratch worktrees in ``reviews`` but the one named ``keep``, and
    forget every scratch worktree whose folder vanished; (those removed, why others stay)."""
    removed: list[Path] = []
    kept: list[str] = []
    prefix = scratch_prefix(pull)
    for folder in await asyncio.to_thread(_listed, reviews):
        if not folder.name.startswith(prefix) or folder.name == keep:
            continue
        why = await remove_scratch(git, folder)
        if why is None:
            removed.append(folder)
        else:
            kept.append(why)
    await prune_scratch(git, reviews)
    return removed, kept


def _listed(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def plan_comment(made: Checkout, plan: Plan, values: set[str]) -> str:
    """The plan as a comment on the request: its marker (so an apply of this plan file is
    bound to the request), counts, hash and table (destroys first), masked."""
    assert plan.file is not None
    pull, facts = made.pull, made.facts
    relative = folder_in(made.root, made.folder)
    where = "the top folder" if relative == "." else f"`{relative}`"
    number = pull.number
    lines = [
        bodies.plan_marker(plan.file.sha256, facts.head),
        f"### Plan of {pull.name} at `{facts.head[:12]}`",
        "",
        f"Made by iac-kernel for {facts.viewer} in {where} of a checkout of the head commit.",
        "",
        *bodies.plan_section(plan, bodies.MAX_BODY - 2_000, None),
        "",
        f"An apply bound to {pull.name} (`terraform_apply` with `pull_request: {number}`, "
        f"or `%pr apply {number}`) applies exactly this plan file, once another person "
        f"approved commit `{facts.head[:12]}` and the {_noun(pull.remote)} is merged.",
    ]
    text = "\n".join(lines)
    if len(text) > bodies.MAX_BODY:
        text = text[: bodies.MAX_BODY - 40].rstrip() + "\n\n… (cut to the forge's limit)\n"
    return mask_text(redact(text), values)
