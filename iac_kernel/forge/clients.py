"""The forge's API through its maintained client: PyGithub for GitHub and GitHub
Enterprise, python-gitlab for GitLab (the ``forge`` extra). No hand-written REST, no CLI.

Besides opening a request, a client reads one (:meth:`ForgeClient.pull`: its state, head,
merge commit, reviews, body and comments, and who the token belongs to, as
:class:`PullFacts`) and comments on it (:meth:`ForgeClient.comment`), for the apply of a
reviewed plan and the plans of others' requests (:mod:`iac_kernel.forge.review`), and
says which of a rule's groups an approver belongs to (:meth:`ForgeClient.groups_of`: on
GitHub the teams of the repository's owner organization by slug, on GitLab the groups by
full path, inherited membership included).

The token is the one the credential broker binds to the API's host
(:func:`api_token`): the broker's table already says which host each credential may be
sent to (``GITHUB_TOKEN`` to GitHub's hosts, ``GH_ENTERPRISE_TOKEN`` to ``GH_HOST``'s,
``GITLAB_TOKEN`` to ``GITLAB_HOST``'s or gitlab.com, a ``.git-credentials`` password or a
gh ``hosts.yml`` token to its own host), so the API client gets no token but that one
and sends it nowhere else: the clients talk to the API base only (PyGithub refuses a
redirect to another host; python-gitlab's session here refuses any request off it).

The requests this process opened are kept (:func:`note_opened`, :func:`opened_here`,
:data:`listeners`) for the notebook's status item, as the gate keeps the applies waiting
for approval.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from iac_kernel.egress import broker
from iac_kernel.egress.addon_table import host_matches
from iac_kernel.forge.remote import GITHUB, GITLAB, ForgeError, Remote

#: Preferred token names, first found wins (then any other credential bound to the host).
PREFERRED = (
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "GITLAB_PRIVATE_TOKEN",
)
TIMEOUT = 30
INSTALL_HINT = 'pip install "iac-kernel[forge]"'

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Token:
    """A brokered credential bound to the API host: its name (never its value) and value."""

    name: str
    value: str = ""

    def __repr__(self) -> str:
        return f"Token({self.name!r})"


@dataclass(frozen=True)
class Opened:
    number: int
    url: str
    #: ``pull request`` or ``merge request``
    noun: str


# -- the requests this process opened (the notebook's status item) ----------------------

#: How many opened requests :func:`opened_here` keeps (the newest).
KEPT_OPENED = 20
_opened: list[Opened] = []
#: Called (in the opening call's event loop) whenever a request is added to
#: :func:`opened_here`.
listeners: list[Callable[[], None]] = []


def opened_here() -> list[dict[str, Any]]:
    """The requests this process opened, newest last: ``{"number", "url", "noun"}``."""
    return [asdict(opened) for opened in _opened]


def note_opened(opened: Opened) -> None:
    """Record a request this process just opened and tell the listeners."""
    _opened.append(opened)
    del _opened[:-KEPT_OPENED]
    for listener in list(listeners):
        try:
            listener()
        except Exception:  # a front end's bug must not fail the opened request
            log.exception("opened request listener failed")


def api_host(api_url: str) -> tuple[str, int]:
    parts = urlsplit(api_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.hostname or "").lower(), port


def api_token(remote: Remote, made: broker.Brokered | None = None) -> Token:
    """The brokered token bound to ``remote``'s API host; ForgeError naming what to set
    when there is none (a token bound to another host is never taken)."""
    made = made if made is not None else broker.current()
    host, port = api_host(remote.api_url)
    found = [
        entry
        for entry in made.entries
        if entry.get("kind") == "token"
        and entry.get("real", {}).get("token")
        and any(host_matches(pattern, host, port) for pattern in entry.get("hosts", []))
    ]
    if not found:
        hint = {
            GITHUB: "GITHUB_TOKEN (github.com) or GH_ENTERPRISE_TOKEN with GH_HOST",
            GITLAB: "GITLAB_TOKEN (with GITLAB_HOST for your GitLab)",
        }[remote.forge]
        raise ForgeError(
            f"no {remote.forge_name} token is bound to {host}:{port}: set {hint}, or log in "
            "with gh / a git credential for that host"
        )
    rank = {name: i for i, name in enumerate(PREFERRED)}
    found.sort(key=lambda entry: rank.get(str(entry.get("name")), len(rank)))
    return Token(str(found[0].get("name")), found[0]["real"]["token"])


@dataclass(frozen=True)
class Note:
    """A text on a request: its body or a comment, with who wrote it."""

    author: str
    body: str


@dataclass(frozen=True)
class PullFacts:
    """A pull or merge request as its forge reports it now."""

    number: int
    url: str
    #: ``open``, ``merged`` or ``closed`` (closed without a merge).
    state: str
    author: str
    #: The head commit, and the branch it is on.
    head: str
    head_ref: str
    base: str
    #: The commit the merge made on the base (None until merged).
    merge_commit: str | None
    #: Whether the forge says it can be merged now (None: it has not computed it).
    mergeable: bool | None
    #: ``(login, commit)`` of each reviewer whose latest decision approves; the commit
    #: reviewed, or None where the forge does not say (GitLab).
    approvals: tuple[tuple[str, str | None], ...]
    #: Reviewers whose latest decision asks for changes.
    changes_requested: tuple[str, ...]
    #: The body first, then the comments, oldest first.
    notes: tuple[Note, ...]
    #: The login of the token's user (who comments and applies).
    viewer: str


@dataclass(frozen=True)
class Membership:
    """What the forge says of one user and the groups an approval record wants."""

    login: str
    #: The groups asked that the user is an active member of.
    groups: frozenset[str] = frozenset()
    #: Each other group asked -> why it does not count (not a member, or a team or group
    #: that does not exist or cannot be read: never counted).
    not_counted: Mapping[str, str] = field(default_factory=dict)


class ForgeClient:
    """One forge project, through its client (see the module doc)."""

    noun = "pull request"

    def __init__(self, remote: Remote, token: Token) -> None:
        self.remote = remote
        self.token = token

    def check(self) -> str:
        """The project's default branch; ForgeError when the token is refused or the
        project cannot be seen with it."""
        raise NotImplementedError

    def open(self, head: str, base: str, title: str, body: str, draft: bool) -> Opened:
        raise NotImplementedError

    def pull(self, number: int) -> PullFacts:
        """The request ``number`` now; ForgeError when it does not exist."""
        raise NotImplementedError

    def comment(self, number: int, text: str) -> str:
        """Comment ``text`` on request ``number``; the comment's address."""
        raise NotImplementedError

    def groups_of(self, login: str, groups: Iterable[str]) -> Membership:
        """Which of ``groups`` (the rules' group names) ``login`` is an active member of
        on the forge; one that cannot be read counts as not, with the reason. Never
        raises: each group is asked on its own."""
        member: set[str] = set()
        why: dict[str, str] = {}
        for group in sorted(set(groups)):
            try:
                # A "." or ".." segment would be resolved away in the API's path.
                if any(part in ("", ".", "..") for part in group.split("/")):
                    reason = f"{group!r} is not a team or group name (a path segment . or ..)"
                else:
                    reason = self._not_member(login, group)
            except ForgeError as exc:
                reason = str(exc)
            if reason is None:
                member.add(group)
            else:
                why[group] = reason
        return Membership(login, frozenset(member), why)

    def _not_member(self, login: str, group: str) -> str | None:
        """None when ``login`` is an active member of ``group``, else why not."""
        raise NotImplementedError


#: GitHub review states that decide (a later COMMENTED review leaves the decision).
_DECIDING = ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")
#: GitHub's ``mergeable_state`` values of a request that can be merged now.
_MERGEABLE = ("clean", "has_hooks", "unstable")
#: A GitHub team's slug (what a rule's ``group`` names on GitHub).
_SLUG = re.compile(r"^[A-Za-z0-9_.-]+$")


class GitHubClient(ForgeClient):
    noun = "pull request"

    def __init__(self, remote: Remote, token: Token) -> None:
        super().__init__(remote, token)
        github = _need("github", "PyGithub")
        self._errors = (github.GithubException,)
        self._gh = github.Github(
            base_url=remote.api_url,
            auth=github.Auth.Token(token.value),
            timeout=TIMEOUT,
            retry=2,
            seconds_between_writes=None,
            seconds_between_requests=None,
        )
        # Objects made without a request, so a membership is one request (PyGithub 2.1
        # has no lazy client: it reads the organization and the team first).
        lazy = getattr(self._gh, "withLazy", None)
        self._lazy_gh = lazy(True) if lazy is not None else self._gh
        self._repo: Any = None

    def _repository(self) -> Any:
        """The repository, read by :meth:`check` or made without a request."""
        if self._repo is None:
            if self._lazy_gh is not self._gh:
                self._repo = self._lazy_gh.get_repo(self.remote.project)
            else:  # PyGithub before the lazy client
                self._repo = self._gh.get_repo(self.remote.project, lazy=True)
        return self._repo

    def check(self) -> str:
        with self._api("reading the repository"):
            self._repo = self._gh.get_repo(self.remote.project)
            return str(self._repo.default_branch)

    def open(self, head: str, base: str, title: str, body: str, draft: bool) -> Opened:
        with self._api("opening the pull request"):
            repo = self._repository()
            pull = repo.create_pull(base=base, head=head, title=title, body=body, draft=draft)
            return Opened(int(pull.number), str(pull.html_url), self.noun)

    def pull(self, number: int) -> PullFacts:
        with self._api(f"reading pull request #{number}", number):
            repo = self._repository()
            pull = repo.get_pull(number)
            decided: dict[str, tuple[str, str | None]] = {}
            for review in pull.get_reviews():
                login = review.user.login if review.user is not None else ""
                if login and review.state in _DECIDING:
                    # No commit_id: the reviewed commit is gone, so not the head.
                    decided[login] = (str(review.state), review.commit_id or "")
            # As GitHub's required reviews: only those who may write to the repository
            # approve (anyone who can see it may submit an approving review).
            decided = {
                login: (st, commit)
                for login, (st, commit) in decided.items()
                if st != "APPROVED" or self._may_write(repo, login)
            }
            notes = [Note(pull.user.login, pull.body or "")]
            notes += [
                Note(c.user.login if c.user else "", c.body or "")
                for c in pull.get_issue_comments()
            ]
            viewer = self._gh.get_user().login
            state = "merged" if pull.merged else str(pull.state)
            mergeable = pull.mergeable and pull.mergeable_state in _MERGEABLE
            return PullFacts(
                number=number,
                url=str(pull.html_url),
                state=state,
                author=pull.user.login,
                head=pull.head.sha,
                head_ref=pull.head.ref,
                base=pull.base.ref,
                merge_commit=pull.merge_commit_sha if pull.merged else None,
                mergeable=None if pull.mergeable is None else bool(mergeable),
                approvals=tuple(
                    (login, commit) for login, (st, commit) in decided.items() if st == "APPROVED"
                ),
                changes_requested=tuple(
                    login for login, (st, _c) in decided.items() if st == "CHANGES_REQUESTED"
                ),
                notes=tuple(notes),
                viewer=str(viewer),
            )

    def _may_write(self, repo: Any, login: str) -> bool:
        """Whether ``login`` has write access (write, maintain or admin) to the repository;
        not when it cannot be read."""
        try:
            return str(repo.get_collaborator_permission(login)) in ("admin", "maintain", "write")
        except self._errors:
            return False

    def comment(self, number: int, text: str) -> str:
        with self._api(f"commenting on pull request #{number}", number):
            repo = self._repository()
            made = repo.get_pull(number).create_issue_comment(text)
            return str(made.html_url)

    def _not_member(self, login: str, group: str) -> str | None:
        """The team with slug ``group`` of the repository's owner organization:
        ``GET /orgs/{org}/teams/{team_slug}/memberships/{username}``, state active."""
        org = self.remote.project.partition("/")[0]
        team = f"the GitHub team {org}/{group}"
        if not _SLUG.match(group):
            return f"{group!r} is not a GitHub team's slug (the teams of {org} are named by slug)"
        try:
            state = str(self._team(org, group).get_team_membership(login).state)
        except self._errors as exc:
            status = getattr(exc, "status", None)
            if status != 404:
                return f"{team} cannot be read with the token {self.token.name} ({_status(exc)})"
            # Not a member, or no team the token can see: GitHub answers 404 to both.
            try:
                self._team(org, group).update()  # reads the team
            except self._errors as missing:
                return (
                    f"{team} does not exist or the token {self.token.name} cannot see it "
                    f"({_status(missing)})"
                )
            return f"{login} is not a member of {team}"
        except (OSError, RuntimeError) as exc:
            return f"reading {team} on {self.remote.api_url} failed: {exc}"
        if state != "active":
            return f"{login}'s membership of {team} is {state}, not active"
        return None

    def _team(self, org: str, slug: str) -> Any:
        return self._lazy_gh.get_organization(org).get_team_by_slug(slug)

    @contextlib.contextmanager
    def _api(self, what: str, number: int | None = None) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            if number is not None and getattr(exc, "status", None) == 404:
                raise ForgeError(
                    f"{self.remote.project} on {self.remote.api_url} has no pull request "
                    f"#{number} that the token {self.token.name} can see (404)"
                ) from None
            raise ForgeError(_github_line(exc, what, self.remote, self.token)) from None
        except (OSError, RuntimeError) as exc:  # connection refused, a redirect off the host
            raise ForgeError(f"{what} on {self.remote.api_url} failed: {exc}") from None


def _status(exc: Any) -> str:
    """``404 Not Found``: a PyGithub error's status and GitHub's message."""
    data = getattr(exc, "data", None)
    message = data.get("message") if isinstance(data, dict) else None
    return f"{getattr(exc, 'status', None)} {message or type(exc).__name__}"


def _github_line(exc: Any, what: str, remote: Remote, token: Token) -> str:
    status = getattr(exc, "status", None)
    data = getattr(exc, "data", None)
    message = data.get("message") if isinstance(data, dict) else None
    errors = data.get("errors") if isinstance(data, dict) else None
    if status == 401:
        why = message or "Bad credentials"
        return f"{remote.forge_name} refused the token {token.name} ({remote.api_url}: 401 {why})"
    if status == 404:
        return (
            f"{remote.project} is not visible on {remote.api_url} with the token {token.name} (404)"
        )
    detail = message or str(exc)
    if isinstance(errors, list) and errors:
        first = errors[0]
        detail += ": " + str(first.get("message") if isinstance(first, dict) else first)
    return f"{what} on {remote.api_url} failed ({status}): {detail}"


class GitLabClient(ForgeClient):
    noun = "merge request"

    def __init__(self, remote: Remote, token: Token) -> None:
        super().__init__(remote, token)
        gitlab = _need("gitlab", "python-gitlab")
        self._errors = (gitlab.exceptions.GitlabError,)
        self._gl = gitlab.Gitlab(
            remote.api_url,
            private_token=token.value,
            timeout=TIMEOUT,
            session=_one_host_session(remote.api_url),
            retry_transient_errors=False,
        )
        self._project: Any = None

    def check(self) -> str:
        with self._api("reading the project"):
            self._project = self._gl.projects.get(self.remote.project)
            return str(self._project.default_branch)

    def open(self, head: str, base: str, title: str, body: str, draft: bool) -> Opened:
        with self._api("opening the merge request"):
            project = self._project or self._gl.projects.get(self.remote.project, lazy=True)
            shown = f"Draft: {title}" if draft else title
            made = project.mergerequests.create(
                {"source_branch": head, "target_branch": base, "title": shown, "description": body}
            )
            return Opened(int(made.iid), str(made.web_url), self.noun)

    def pull(self, number: int) -> PullFacts:
        with self._api(f"reading merge request !{number}", number):
            project = self._project or self._gl.projects.get(self.remote.project, lazy=True)
            merge = project.mergerequests.get(number)
            approvals = merge.approvals.get()
            approvers = [
                str(entry["user"]["username"])
                for entry in getattr(approvals, "approved_by", None) or []
                if isinstance(entry, dict) and isinstance(entry.get("user"), dict)
            ]
            notes = [Note(_username(merge.author), merge.description or "")]
            for note in merge.notes.list(get_all=True, sort="asc", order_by="created_at"):
                if not getattr(note, "system", False):
                    notes.append(Note(_username(note.author), note.body or ""))
            self._gl.auth()
            state = {"opened": "open", "merged": "merged"}.get(str(merge.state), "closed")
            status = getattr(merge, "detailed_merge_status", None)
            merged_as = getattr(merge, "merge_commit_sha", None) or getattr(
                merge, "squash_commit_sha", None
            )
            return PullFacts(
                number=number,
                url=str(merge.web_url),
                state=state,
                author=_username(merge.author),
                head=str(merge.sha),
                head_ref=str(merge.source_branch),
                base=str(merge.target_branch),
                merge_commit=merged_as if state == "merged" else None,
                mergeable=None
                if status in (None, "checking", "unchecked")
                else status == "mergeable",
                approvals=tuple((login, None) for login in approvers),
                changes_requested=(),
                notes=tuple(notes),
                viewer=_username(self._gl.user),
            )

    def comment(self, number: int, text: str) -> str:
        with self._api(f"commenting on merge request !{number}", number):
            project = self._project or self._gl.projects.get(self.remote.project, lazy=True)
            merge = project.mergerequests.get(number, lazy=True)
            note = merge.notes.create({"body": text})
            return f"{self.remote.web_url}/-/merge_requests/{number}#note_{note.id}"

    def _not_member(self, login: str, group: str) -> str | None:
        """The group at full path ``group`` (a subgroup's ``a/b`` too), membership
        inherited from the groups above it included (``members/all``), state active."""
        where = f"the GitLab group {group}"
        user_id = self._user_id(login)
        try:
            member = self._gl.groups.get(group, lazy=True).members_all.get(user_id)
        except self._errors as exc:
            if getattr(exc, "response_code", None) != 404:
                return f"{where} cannot be read with the token {self.token.name} ({_code(exc)})"
            # Not a member, or no group the token can see: the group itself says which.
            try:
                self._gl.groups.get(group)
            except self._errors as missing:
                return (
                    f"{where} does not exist or the token {self.token.name} cannot see it "
                    f"({_code(missing)})"
                )
            return f"{login} is not a member of {where} (nor of a group above it)"
        except OSError as exc:
            return f"reading {where} on {self.remote.api_url} failed: {exc}"
        for name in ("state", "membership_state"):  # the user's, and the membership's
            state = getattr(member, name, None)
            if state not in (None, "active"):
                return f"{login}'s membership of {where} is {state}, not active"
        return None

    def _user_id(self, login: str) -> int:
        """The id of the user ``login`` (``GET /users?username=``); ForgeError when none."""
        try:
            found = self._gl.users.list(username=login, get_all=False)
        except self._errors as exc:
            raise ForgeError(
                f"GitLab's user {login} cannot be read with the token {self.token.name} "
                f"({_code(exc)})"
            ) from None
        except OSError as exc:
            raise ForgeError(f"reading GitLab's user {login} failed: {exc}") from None
        for user in found:
            if getattr(user, "username", None) == login:
                return int(user.id)
        raise ForgeError(f"GitLab has no user {login}")

    @contextlib.contextmanager
    def _api(self, what: str, number: int | None = None) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            code = getattr(exc, "response_code", None)
            message = getattr(exc, "error_message", None) or str(exc)
            remote, token = self.remote, self.token
            if code == 404 and number is not None:
                raise ForgeError(
                    f"{remote.project} on {remote.api_url} has no merge request !{number} that "
                    f"the token {token.name} can see (404)"
                ) from None
            if code == 401:
                line = f"GitLab refused the token {token.name} ({remote.api_url}: 401 {message})"
            elif code == 404:
                line = (
                    f"{remote.project} is not visible on {remote.api_url} with the token "
                    f"{token.name} (404)"
                )
            else:
                line = f"{what} on {remote.api_url} failed ({code}): {message}"
            raise ForgeError(line) from None
        except OSError as exc:
            raise ForgeError(f"{what} on {self.remote.api_url} failed: {exc}") from None


def _code(exc: Any) -> str:
    """``404 Group Not Found``: a python-gitlab error's code and GitLab's message."""
    message = getattr(exc, "error_message", None) or type(exc).__name__
    return f"{getattr(exc, 'response_code', None)} {message}"


def _username(user: Any) -> str:
    """A GitLab user's username, from the dict or object python-gitlab gives."""
    if isinstance(user, dict):
        return str(user.get("username") or "")
    return str(getattr(user, "username", "") or "")


def _one_host_session(api_url: str) -> Any:
    """A requests session that refuses any request off the API's host (a redirect too):
    the token goes to that host only."""
    import requests

    host = api_host(api_url)

    class OneHost(requests.Session):
        def send(self, request: Any, **kwargs: Any) -> Any:
            if api_host(request.url) != host:
                raise requests.exceptions.InvalidURL(
                    f"refused: {urlsplit(request.url).netloc} is not the API host {host[0]}"
                )
            return super().send(request, **kwargs)

    return OneHost()


def _need(module: str, package: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise ForgeError(f"{package} is not installed: {INSTALL_HINT}") from None


def client_for(remote: Remote, token: Token) -> ForgeClient:
    return GitHubClient(remote, token) if remote.forge == GITHUB else GitLabClient(remote, token)
