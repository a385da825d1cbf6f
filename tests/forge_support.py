"""A loopback forge for the pull-request tests: the runbooks' stand-in forge
(``notebooks/tools/stand_in_forge.py``: a real git server, ``git http-backend`` as CGI, and
the GitHub Enterprise ``/api/v3`` and GitLab ``/api/v4`` subsets at the same host) held to
GitHub's published OpenAPI description (:mod:`forge_openapi`) by :class:`OpenApiCheck`.

Every GitHub request and answer is validated against the description, and answers are
completed from its examples; a request it does not know, or one the description refuses,
is answered 500 and kept in ``problems`` (a test asserts there are none). The GitLab API is
checked by hand (no GitLab description is pinned here).

:class:`TeamsHandler` adds who belongs to a team or group (``ForgeState.teams``: a GitHub
team as ``org/slug``, a GitLab group by its full path): GitHub's ``/orgs/{org}``,
``/orgs/{org}/teams/{team_slug}`` and its ``memberships/{username}`` (validated like the
rest), GitLab's ``/users?username=``, ``/groups/:id`` and ``/groups/:id/members/all/:id``
(a group's members are members of its subgroups too).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks" / "tools"))

import stand_in_forge
from stand_in_forge import ForgeHandler, ForgeState, host_git

from core_support import make_loop, write_script
from egress_support import egress_ready
from forge_openapi import GitHubSpec, Unavailable, github_description, pointer
from guard_support import Asker
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.events import ToolCallResult
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.tools.registry import build_tools
from terraform_support import tf

TOKEN = "ghp_" + "Ent3rpr1seT0ken" * 2 + "abcdef"
#: The reviewer's token (user ``bob``) and another author's (``carol``).
BOB_TOKEN = "ghp_" + "B0bReviewerT0ken" * 2 + "abcd"
CAROL_TOKEN = "ghp_" + "C4rolAuthorT0ken" * 2 + "abcd"
#: Who each token is (any other accepted token is ``alice``, the engineer).
USERS = {BOB_TOKEN: "bob", CAROL_TOKEN: "carol"}
PROJECT = "octo/infra"
EDIT = {"path": "main.tf", "old_string": '"one"', "new_string": '"two"'}
PR = {"title": "Bump the input", "summary": "The input goes from one to two."}


#: The seed commit of every project the tests' forge serves.
SEED = {"main.tf": 'resource "terraform_data" "a" {\n  input = "one"\n}\n'}
#: GitHub's example of a schema, where its name differs from the schema's.
EXAMPLES = {
    "full-repository": "full-repository-default-response",
    "repository-collaborator-permission": (
        "repository-collaborator-permission-response-if-user-has-admin-permissions"
    ),
}


def _merged(example: Any, made: Any) -> Any:
    """``made`` laid over ``example``: objects merged member by member, the rest replaced."""
    if not (isinstance(example, dict) and isinstance(made, dict)):
        return made
    return {**example, **{k: _merged(example.get(k), v) for k, v in made.items()}}


class OpenApiCheck:
    """The stand-in forge's GitHub API held to GitHub's description: requests and answers
    validated, answers laid over GitHub's examples and completed."""

    def __init__(self, spec: GitHubSpec) -> None:
        self.spec = spec

    def request(self, method: str, path: str, template: str, body: Any) -> None:
        try:
            found, _op = self.spec.operation(method, path)
        except LookupError as exc:
            raise AssertionError(f"not implemented here: {exc}") from None
        assert found == template, f"{method} {path} is GitHub's {found}, not {template}"
        problems = self.spec.request_errors(method, path, body)
        if problems:
            raise AssertionError(f"request refused by GitHub's description: {problems[:3]}")

    def shaped(self, schema: str, made: dict[str, Any], base: str) -> dict[str, Any]:
        example = self.spec.example(EXAMPLES.get(schema, schema))
        # The example's addresses on this server (PyGithub follows them, on its host only).
        text = json.dumps(example).replace("https://api.github.com", f"{base}/api/v3")
        example = json.loads(text.replace("https://github.com", base))
        return self.spec.complete(pointer("components", "schemas", schema), _merged(example, made))

    def answer(self, method: str, path: str, status: int, payload: Any) -> None:
        ref = self.spec.response_ref(method, path, status)
        if ref is None:  # 401: GitHub answers every operation so, without describing it
            ref = pointer("components", "schemas", "basic-error")
        problems = self.spec.errors(ref, payload)
        if problems:
            raise AssertionError(f"answer refused by GitHub's description: {problems[:3]}")


#: The GitHub routes :class:`TeamsHandler` answers (all ``GET``).
TEAM_ROUTES = {
    2: "/orgs/{org}",
    4: "/orgs/{org}/teams/{team_slug}",
    6: "/orgs/{org}/teams/{team_slug}/memberships/{username}",
}
NOT_FOUND = {"message": "Not Found", "documentation_url": "x"}


def user_id(login: str) -> int:
    """A GitLab user id for ``login`` (stable within a run)."""
    return 200 + zlib.crc32(login.encode()) % 1_000_000


def member_state(teams: dict[str, dict[str, str]], group: str, login: str) -> str | None:
    """``login``'s state in GitLab ``group`` or a group above it (``members/all``)."""
    parts = group.split("/")
    for depth in range(len(parts), 0, -1):
        state = teams.get("/".join(parts[:depth]), {}).get(login)
        if state is not None:
            return state
    return None


class TeamsHandler(ForgeHandler):
    """The stand-in forge, and who belongs to its teams and groups (see the module doc)."""

    def _github(self, path: str) -> None:
        parts = path.strip("/").split("/")
        template = TEAM_ROUTES.get(len(parts))
        if parts[0] != "orgs" or template is None or self.command != "GET":
            return super()._github(path)
        credential = self.headers.get("Authorization") or ""
        with self.state.lock:
            self.state.api_seen.append((self.command, path, credential))
        if self.state.check is not None:
            self.state.check.request(self.command, path, template, None)
        if credential.partition(" ")[2] not in self.state.tokens:
            return self._answer(401, {"message": "Bad credentials", "documentation_url": "x"})
        org, base = unquote(parts[1]), f"{self._base()}/api/v3/orgs/{parts[1]}"
        if not (self.state.repos / org).is_dir():
            return self._answer(404, NOT_FOUND)
        if len(parts) == 2:
            made = {"login": org, "url": base, "html_url": f"{self._base()}/{org}"}
            return self._answer(200, self._shaped("organization-full", made))
        slug = unquote(parts[3])
        members = self.state.teams.get(f"{org}/{slug}")
        if members is None:
            return self._answer(404, NOT_FOUND)
        url = f"{base}/teams/{slug}"
        if len(parts) == 4:
            made = {"slug": slug, "name": slug, "url": url, "members_url": f"{url}/members"}
            made.update(html_url=f"{self._base()}/orgs/{org}/teams/{slug}")
            made["organization"] = {"login": org, "url": base}
            return self._answer(200, self._shaped("team-full", made))
        state = members.get(unquote(parts[5]))
        if state is None:  # GitHub: "if user has no team membership"
            return self._answer(404, NOT_FOUND)
        made = {"url": f"{url}/memberships/{parts[5]}", "role": "member", "state": state}
        return self._answer(200, made)

    def _gitlab(self, path: str) -> None:
        parts = path.strip("/").split("/")
        if parts[0] not in ("users", "groups") or self.command != "GET":
            return super()._gitlab(path)
        state, credential = self.state, self.headers.get("PRIVATE-TOKEN") or ""
        with state.lock:
            state.api_seen.append((self.command, path, credential))
        if credential not in state.tokens:
            return self._send(401, {"message": "401 Unauthorized"})
        known = {state.default_login, *state.users.values()}
        known |= {login for members in state.teams.values() for login in members}
        if parts == ["users"]:
            asked = parse_qs(urlsplit(self.path).query).get("username", [])
            users = [
                {"id": user_id(u), "username": u, "name": u, "state": "active"}
                for u in asked[:1]
                if u in known
            ]
            return self._send(200, users)
        group = unquote(parts[1]) if len(parts) > 1 else ""
        if not any(name == group or name.startswith(f"{group}/") for name in state.teams):
            return self._send(404, {"message": "404 Group Not Found"})
        if len(parts) == 2:
            name = group.rpartition("/")[2]
            info = {"id": 300 + user_id(group) % 1000, "full_path": group, "path": name}
            return self._send(200, {**info, "name": name, "web_url": f"{self._base()}/{group}"})
        if parts[2:4] != ["members", "all"] or len(parts) != 5:
            raise AssertionError(f"not implemented here: {self.command} {path}")
        login = next((u for u in known if str(user_id(u)) == parts[4]), None)
        membership = member_state(state.teams, group, login) if login else None
        if membership is None:
            return self._send(404, {"message": "404 Not found"})
        made = {"id": int(parts[4]), "username": login, "name": login, "state": "active"}
        return self._send(200, {**made, "access_level": 30, "membership_state": membership})


@contextmanager
def running_forge(
    root: Path, spec: GitHubSpec | None, projects: tuple[str, ...]
) -> Iterator[ForgeState]:
    """A forge over bare repositories ``projects`` (each with a commit on ``main``), its
    GitHub API checked against ``spec`` when given, that answers who is in its teams."""
    check = OpenApiCheck(spec) if spec is not None else None
    with stand_in_forge.running_forge(
        root, projects, seed=SEED, check=check, users=USERS, handler=TeamsHandler
    ) as forge:
        yield forge


@dataclass
class Site:
    """A forge, a clone of its project (the session's cwd), the home and the settings."""

    forge: ForgeState
    workspace: Path
    home: Path
    settings: Settings
    env: dict[str, str] = field(default_factory=dict)

    def prepare_broker(self) -> None:
        made = broker.prepare(os.environ, home=self.home, folder=self.home / ".iac-code" / "eg")
        broker.activate(made)

    def branch_file(self, branch: str, path: str) -> str:
        bare = self.forge.repos / f"{PROJECT}.git"
        return host_git("--git-dir", str(bare), "show", f"{branch}:{path}")


def github_spec() -> GitHubSpec:
    """GitHub's description, or the test is skipped saying why it cannot be had."""
    try:
        return GitHubSpec(github_description())
    except Unavailable as exc:
        pytest.skip(f"GitHub's OpenAPI description is unavailable: {exc}")


#: The pull-request tests run git on the host and in the guard's sandbox.
needs_git_sandbox = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
]


@pytest.fixture(scope="module", name="spec")
def spec_fixture() -> GitHubSpec:
    """GitHub's description, read once a module (import it to use ``spec``)."""
    return github_spec()


@contextmanager
def forge_site(
    outside_tmp: Path, spec: GitHubSpec, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Site]:
    """A GitHub Enterprise forge on loopback (``GH_HOST``, ``GH_ENTERPRISE_TOKEN``), a
    clone of its project, a home with a git identity, the broker prepared from it."""
    egress_ready()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    home = outside_tmp / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for name in ("GH_HOST", "GITHUB_API_URL", "GITHUB_TOKEN", "GH_TOKEN", "GITLAB_HOST"):
        monkeypatch.delenv(name, raising=False)
    with running_forge(outside_tmp, spec, (PROJECT,)) as forge:
        forge.tokens.add(TOKEN)
        workspace = outside_tmp / "ws"
        host_git("clone", "-q", forge.url(PROJECT), str(workspace))
        monkeypatch.setenv("GH_HOST", forge.host)
        monkeypatch.setenv("GH_ENTERPRISE_TOKEN", TOKEN)
        settings = Settings()
        settings.egress_allow = f"{settings.egress_allow},127.0.0.1"
        settings.egress_allow_private = forge.host
        made = Site(forge, workspace, home, settings)
        made.prepare_broker()
        try:
            yield made
        finally:
            broker.activate(None)


@pytest.fixture(name="site")
def site_fixture(
    outside_tmp: Path, spec: GitHubSpec, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Site]:
    """:func:`forge_site` as a fixture (import it to use ``site``)."""
    with forge_site(outside_tmp, spec, monkeypatch) as made:
        yield made


@contextmanager
def team_site(
    outside_tmp: Path,
    spec: GitHubSpec,
    monkeypatch: pytest.MonkeyPatch,
    rules: str | None = None,
) -> Iterator[Site]:
    """:func:`forge_site` for applies: terraform offline, a team store of its own, the
    admin's ``rules`` (none: no rule), and the reviewers' tokens accepted."""
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    # A folder of its own: the sandboxes hide it whole (a journal file hidden on its own
    # can vanish between the sandbox's layout and its mount while another process writes).
    (outside_tmp / "store").mkdir()
    store = outside_tmp / "store" / "team.sqlite"
    monkeypatch.setenv("IAC_KERNEL_TEAM_STORE", f"sqlite:///{store}")
    if rules is None:
        monkeypatch.delenv("IAC_KERNEL_APPROVAL_RULES", raising=False)
    else:
        path = outside_tmp / "rules.toml"
        path.write_text(rules)
        monkeypatch.setenv("IAC_KERNEL_APPROVAL_RULES", str(path))
    with forge_site(outside_tmp, spec, monkeypatch) as made:
        made.forge.tokens |= {BOB_TOKEN, CAROL_TOKEN}
        yield made


@pytest.fixture(name="site")
def team_site_fixture(
    outside_tmp: Path, spec: GitHubSpec, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Site]:
    """:func:`team_site` without rules as the ``site`` fixture (import it to use it)."""
    with team_site(outside_tmp, spec, monkeypatch) as made:
        yield made


#: main.tf as the forge's project starts, and as the engineer's change makes it.
ONE = 'resource "terraform_data" "a" {\n  input = "one"\n}\n'
TWO = ONE.replace('"one"', '"two"')


def sha_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def opened_with_plan(site: Site) -> str:
    """The engineer plans the change (main.tf "two") into tfplan and opens pull request #1
    of it with that plan; the plan's SHA-256."""
    ws = site.workspace
    (ws / "main.tf").write_text(TWO)
    tf(ws, "init", "-input=false")
    tf(ws, "plan", "-input=false", "-out=tfplan")
    (ws / "main.tf").write_text(ONE)  # the session's edit makes it "two" again
    result, _, _ = await run_session(site, {**PR, "plan": "tfplan"})
    assert result.status == "completed", result.output
    return sha_of(ws / "tfplan")


def kernel_script(path: Path) -> Path:
    """A scripted model for a kernel: "change the input" edits main.tf, "open a pull
    request" calls ``pull_request`` with :data:`PR`."""
    exchanges = [
        {
            "match": "open a pull request",
            "turns": [
                {"tool_use": [{"name": "pull_request", "input": PR}]},
                {"text": "The pull request is open."},
            ],
        },
        {
            "match": "change the input",
            "turns": [{"tool_use": [{"name": "edit_file", "input": EDIT}]}, {"text": "Changed."}],
        },
    ]
    path.write_text(json.dumps({"name": "pr", "exchanges": exchanges}))
    return path


def forge_kernel(site: Site, outside_tmp: Path) -> Any:
    """A scripted kernel (:func:`kernel_script`) in the site's clone, talking to its forge
    through the egress proxy, that asks for no edit and answers questions on stdin."""
    from kernel_harness import scripted_kernel

    script = kernel_script(outside_tmp / "pr.json")
    env = {
        name: os.environ.get(name)
        for name in ("HOME", "GH_HOST", "GH_ENTERPRISE_TOKEN", "GIT_CONFIG_NOSYSTEM")
    }
    env.update(
        IAC_KERNEL_EGRESS_ENV=os.environ["IAC_KERNEL_EGRESS_ENV"],
        IAC_KERNEL_EGRESS_ALLOW=site.settings.egress_allow,
        IAC_KERNEL_EGRESS_ALLOW_PRIVATE=site.forge.host,
        IAC_KERNEL_MODE="accept_edits",
        IAC_KERNEL_HEADLESS_POLICY="stdin",
    )
    return scripted_kernel(outside_tmp / "k", site.workspace, script, env)


def script(tmp: Path, pr: dict[str, Any], edit: dict[str, Any] | None = EDIT) -> Path:
    turns: list[dict[str, Any]] = []
    if edit is not None:
        turns.append({"tool_use": [{"name": "edit_file", "input": edit}]})
    turns += [{"tool_use": [{"name": "pull_request", "input": pr}]}, {"text": "Done."}]
    return write_script(tmp / "script.json", [{"turns": turns}])


async def run_session(site: Site, pr: dict[str, Any], ask: Asker | None = None, **kw: Any):
    """One turn of a scripted session in the clone; the pull_request call's result."""
    ask = ask or Asker()
    path = script(site.workspace.parent, pr, **kw)
    loop, persist = make_loop(path, site.workspace, build_tools(), site.settings, PermissionGate())
    events: list[Any] = []
    prompt = [{"type": "text", "text": "change the input and open a pull request"}]
    await loop.run_turn(prompt, events.append, ask)
    results = [e for e in events if isinstance(e, ToolCallResult) and e.name == "pull_request"]
    assert len(results) == 1, [e for e in events if isinstance(e, ToolCallResult)]
    return results[0], ask, persist


async def run_calls(
    site: Site, calls: list[tuple[str, dict[str, Any]]], ask: Asker | None = None
) -> tuple[list[ToolCallResult], Asker]:
    """One turn of a scripted session in the clone making ``calls`` in order; their results."""
    ask = ask or Asker()
    turns: list[dict[str, Any]] = [{"tool_use": [{"name": n, "input": a}]} for n, a in calls]
    count = len(list(site.workspace.parent.glob("calls-*.json")))
    path = write_script(
        site.workspace.parent / f"calls-{count}.json", [{"turns": [*turns, {"text": "Done."}]}]
    )
    loop, _ = make_loop(path, site.workspace, build_tools(), site.settings, PermissionGate())
    events: list[Any] = []
    await loop.run_turn([{"type": "text", "text": "go"}], events.append, ask)
    return [e for e in events if isinstance(e, ToolCallResult)], ask


def reviewer(site: Site, token: str = BOB_TOKEN) -> Any:
    """The project as another user sees it through PyGithub (a reviewer's own client)."""
    import github

    client = github.Github(
        base_url=f"http://{site.forge.host}/api/v3",
        auth=github.Auth.Token(token),
        retry=None,
        lazy=True,
    )
    return client.get_repo(PROJECT)


def push_commit(site: Site, branch: str, path: str, text: str, message: str = "later") -> str:
    """Someone else's commit on ``branch`` of the remote; its id."""
    bare = site.forge.bare(PROJECT)
    work = site.workspace.parent / f"pusher-{len(list(site.workspace.parent.glob('pusher-*')))}"
    host_git("clone", "-q", "-b", branch, str(bare), str(work))
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text)
    host_git("add", path, cwd=work)
    host_git("commit", "-qm", message, cwd=work)
    host_git("push", "-q", "origin", branch, cwd=work)
    return host_git("rev-parse", "HEAD", cwd=work).strip()


def pr_question(ask: Asker):
    return next(r for r in ask.requests if r.tool_name == "pull_request" and "argv" not in r.input)
