"""A loopback forge for the pull-request tests: one HTTP server that is a real git server
(``git http-backend`` as CGI, optionally behind basic auth) and the forge's API at the
same host, like GitHub Enterprise (``/api/v3``) and GitLab (``/api/v4``).

The GitHub API implements only the calls the tools and the tests' reviewers make: the
repository, opening, reading, closing and merging a pull request (a real merge commit
in the bare repository, ``git merge-tree``), its reviews, its comments and the token's
user. Each token is one user (:attr:`ForgeState.users`). It validates every request and
every answer it gives against GitHub's published OpenAPI description
(:mod:`forge_openapi`); a request it does not know, or one the description refuses, is
answered 500 and kept in ``problems`` (a test asserts there are none). Unlike GitHub it
lets an author approve their own pull request (GitLab may): the apply must not count it.
The GitLab API implements the same calls for merge requests (``/projects/:id``,
``merge_requests``, ``approvals``, ``approve``, ``notes``, ``merge``, ``/user``), checked
by hand (no GitLab description is pinned here).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from core_support import make_loop, write_script
from egress_support import egress_ready, git_http_backend
from forge_openapi import GitHubSpec, Unavailable, github_description, pointer
from guard_support import Asker
from iac_kernel.agent.permissions import PermissionGate
from iac_kernel.config import Settings
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.events import ToolCallResult
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.tools.registry import build_tools

TOKEN = "ghp_" + "Ent3rpr1seT0ken" * 2 + "abcdef"
#: The reviewer's token (user ``bob``) and another author's (``carol``).
BOB_TOKEN = "ghp_" + "B0bReviewerT0ken" * 2 + "abcd"
CAROL_TOKEN = "ghp_" + "C4rolAuthorT0ken" * 2 + "abcd"
#: Who each token is (any other accepted token is ``alice``, the engineer).
USERS = {BOB_TOKEN: "bob", CAROL_TOKEN: "carol"}
PROJECT = "octo/infra"
EDIT = {"path": "main.tf", "old_string": '"one"', "new_string": '"two"'}
PR = {"title": "Bump the input", "summary": "The input goes from one to two."}


@dataclass
class ForgeState:
    repos: Path
    #: Tokens the API accepts.
    tokens: set[str] = field(default_factory=set)
    #: The git server's basic-auth password for user ``bob`` (None: no auth).
    git_password: str | None = None
    spec: GitHubSpec | None = None
    #: (method, path, credential header value) of every API request.
    api_seen: list[tuple[str, str, str]] = field(default_factory=list)
    git_seen: list[str] = field(default_factory=list)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Answer POST pulls with this status (a forge that refuses after the push).
    refuse_pulls: int | None = None
    #: token -> login; a token not here is ``alice``.
    users: dict[str, str] = field(default_factory=lambda: dict(USERS))
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, project: str) -> str:
        return f"http://127.0.0.1:{self.port}/{project}.git"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def login(self, token: str) -> str:
        return self.users.get(token, "alice")

    def bare(self, project: str) -> Path:
        return self.repos / f"{project}.git"

    def rev(self, project: str, ref: str) -> str:
        return host_git("--git-dir", str(self.bare(project)), "rev-parse", ref).strip()

    def pull(self, project: str, number: int) -> dict[str, Any] | None:
        key = "iid" if any("iid" in p for p in self.pulls) else "number"
        return next(
            (p for p in self.pulls if p["project"] == project and p.get(key) == number), None
        )

    def head_of(self, pull: dict[str, Any]) -> str:
        """A request's head: its branch's commit while open, the last one after."""
        if pull.get("final_head"):
            return str(pull["final_head"])
        return self.rev(pull["project"], f"refs/heads/{pull['head_ref']}")

    def mergeable(self, pull: dict[str, Any]) -> bool:
        bare = str(self.bare(pull["project"]))
        done = subprocess.run(
            ["git", "--git-dir", bare, "merge-tree", "--write-tree",
             f"refs/heads/{pull['base_ref']}", self.head_of(pull)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.returncode == 0

    def merge(self, pull: dict[str, Any]) -> str:
        """A real merge commit of the head into the base, in the bare repository."""
        bare = str(self.bare(pull["project"]))
        base_ref = f"refs/heads/{pull['base_ref']}"
        base, head = self.rev(pull["project"], base_ref), self.head_of(pull)
        tree = host_git("--git-dir", bare, "merge-tree", "--write-tree", base, head).split()[0]
        message = f"Merge pull request {pull.get('number') or pull.get('iid')}"
        commit = host_git(
            "--git-dir", bare, "commit-tree", tree, "-p", base, "-p", head, "-m", message
        ).strip()
        host_git("--git-dir", bare, "update-ref", base_ref, commit, base)
        pull.update(final_head=head, merged=True, merge_commit_sha=commit, state="merged")
        return commit

    def branches(self, project: str) -> list[str]:
        done = subprocess.run(
            ["git", "--git-dir", str(self.repos / f"{project}.git"), "for-each-ref",
             "--format=%(refname:short)", "refs/heads"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.stdout.split()


class ForgeHandler(BaseHTTPRequestHandler):
    state: ForgeState

    def log_message(self, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _serve(self) -> None:
        path = self.path.partition("?")[0]
        try:
            if path.startswith("/api/v3/"):
                self._github(path[len("/api/v3") :])
            elif path.startswith("/api/v4/"):
                self._gitlab(path[len("/api/v4") :])
            else:
                self._git()
        except Exception as exc:  # the test sees it in problems, the client a 500
            with self.state.lock:
                self.state.problems.append(f"{self.command} {path}: {type(exc).__name__}: {exc}")
            self._send(500, {"message": str(exc)})

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    # -- git ---------------------------------------------------------------------------
    def _git(self) -> None:
        header = self.headers.get("Authorization") or ""
        if header.startswith("Basic "):
            self.state.git_seen.append(base64.b64decode(header[6:]).decode(errors="replace"))
        password = self.state.git_password
        if password is not None:
            expected = "Basic " + base64.b64encode(f"bob:{password}".encode()).decode()
            if header != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        body = self._body()
        git_http_backend(self, body, self.state.repos)

    # -- GitHub ------------------------------------------------------------------------
    def _github(self, path: str) -> None:
        spec = self.state.spec
        assert spec is not None, "no OpenAPI description loaded"
        raw = self._body()
        body = json.loads(raw) if raw else None
        credential = self.headers.get("Authorization") or ""
        with self.state.lock:
            self.state.api_seen.append((self.command, path, credential))
        try:
            template, _op = spec.operation(self.command, path)
        except LookupError as exc:
            raise AssertionError(f"not implemented here: {exc}") from None
        problems = spec.request_errors(self.command, path, body)
        if problems:
            raise AssertionError(f"request refused by GitHub's description: {problems[:3]}")
        token = credential.split(" ", 1)[1] if " " in credential else ""
        if token not in self.state.tokens:
            return self._answer(401, {"message": "Bad credentials", "documentation_url": "x"})
        login = self.state.login(token)
        if template == "/user" and self.command == "GET":
            user = spec.example("private-user")
            user.update(login=login, name=login, user_view_type="private")
            return self._answer(
                200, spec.complete(pointer("components", "schemas", "private-user"), user)
            )
        parts = path.strip("/").split("/")
        project = f"{parts[1]}/{parts[2]}"
        if not (self.state.repos / f"{project}.git").is_dir():
            return self._answer(404, {"message": "Not Found", "documentation_url": "x"})
        if template == "/repos/{owner}/{repo}" and self.command == "GET":
            return self._answer(200, self._repository(spec, project))
        if template == "/repos/{owner}/{repo}/pulls" and self.command == "POST":
            return self._open_pull(spec, project, body, login)
        pull = self.state.pull(project, int(parts[4])) if len(parts) > 4 else None
        if pull is None:
            return self._answer(404, {"message": "Not Found", "documentation_url": "x"})
        return self._pull_route(spec, template, pull, body, login)

    def _pull_route(
        self, spec: GitHubSpec, template: str, pull: dict[str, Any], body: Any, login: str
    ) -> None:
        state, method = self.state, self.command
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}":
            if method == "PATCH" and body.get("state") == "closed" and pull["state"] == "open":
                pull.update(final_head=state.head_of(pull), state="closed")
            return self._answer(200, self._pull_json(spec, pull))
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}/reviews":
            if method == "POST":
                review = {
                    "id": 1000 + len(pull["reviews"]),
                    "user": login,
                    "state": {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(
                        body.get("event"), "COMMENTED"
                    ),
                    "commit_id": body.get("commit_id") or state.head_of(pull),
                    "body": body.get("body") or "",
                }
                pull["reviews"].append(review)
                return self._answer(200, self._review_json(spec, pull, review))
            return self._answer(200, [self._review_json(spec, pull, r) for r in pull["reviews"]])
        if template == "/repos/{owner}/{repo}/issues/{issue_number}/comments":
            if method == "POST":
                comment = {"id": 5000 + len(pull["comments"]), "user": login, "body": body["body"]}
                pull["comments"].append(comment)
                return self._answer(201, self._comment_json(spec, pull, comment))
            return self._answer(200, [self._comment_json(spec, pull, c) for c in pull["comments"]])
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}/merge" and method == "PUT":
            if pull["state"] != "open" or not state.mergeable(pull):
                return self._answer(
                    405, {"message": "Pull Request is not mergeable", "documentation_url": "x"}
                )
            sha = state.merge(pull)
            return self._answer(
                200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
            )
        raise AssertionError(f"not implemented here: {method} {template}")

    def _here(self, made: Any) -> Any:
        """An example's addresses on this server (PyGithub follows them, on its host only)."""
        text = json.dumps(made).replace("https://api.github.com", f"{self._base()}/api/v3")
        return json.loads(text.replace("https://github.com", self._base()))

    def _user(self, spec: GitHubSpec, login: str) -> dict[str, Any]:
        user = spec.example("pull-request")["user"]
        user.update(login=login, html_url=f"{self._base()}/{login}")
        return user

    def _pull_json(self, spec: GitHubSpec, pull: dict[str, Any]) -> dict[str, Any]:
        state = self.state
        project, number = pull["project"], pull["number"]
        made = spec.example("pull-request")
        base = self._base()
        open_ = pull["state"] == "open"
        mergeable = state.mergeable(pull) if open_ else None
        made.update(
            number=number,
            title=pull["title"],
            body=pull.get("body"),
            draft=bool(pull.get("draft")),
            state="open" if open_ else "closed",
            merged=pull["state"] == "merged",
            merge_commit_sha=pull.get("merge_commit_sha"),
            merged_at="2026-01-02T00:00:00Z" if pull["state"] == "merged" else None,
            closed_at=None if open_ else "2026-01-02T00:00:00Z",
            mergeable=mergeable,
            mergeable_state=("clean" if mergeable else "dirty") if open_ else "unknown",
            html_url=f"{base}/{project}/pull/{number}",
            url=f"{base}/api/v3/repos/{project}/pulls/{number}",
            user=self._user(spec, pull["user"]),
        )
        api = f"{base}/api/v3/repos/{project}"
        made.update(
            issue_url=f"{api}/issues/{number}",
            comments_url=f"{api}/issues/{number}/comments",
            review_comments_url=f"{api}/pulls/{number}/comments",
            commits_url=f"{api}/pulls/{number}/commits",
        )
        made = self._here(made)
        made["head"].update(ref=pull["head_ref"], sha=state.head_of(pull))
        made["base"].update(
            ref=pull["base_ref"], sha=state.rev(project, f"refs/heads/{pull['base_ref']}")
        )
        return spec.complete(pointer("components", "schemas", "pull-request"), made)

    def _review_json(
        self, spec: GitHubSpec, pull: dict[str, Any], review: dict[str, Any]
    ) -> dict[str, Any]:
        made = spec.example("pull-request-review")
        made.update(
            id=review["id"],
            state=review["state"],
            commit_id=review["commit_id"],
            body=review["body"],
            user=self._user(spec, review["user"]),
            html_url=f"{self._base()}/{pull['project']}/pull/{pull['number']}#review-{review['id']}",
        )
        made = self._here(made)
        return spec.complete(pointer("components", "schemas", "pull-request-review"), made)

    def _comment_json(
        self, spec: GitHubSpec, pull: dict[str, Any], comment: dict[str, Any]
    ) -> dict[str, Any]:
        made = spec.example("issue-comment")
        url = f"{self._base()}/{pull['project']}/pull/{pull['number']}#issuecomment-{comment['id']}"
        made.update(
            id=comment["id"],
            body=comment["body"],
            html_url=url,
            user=self._user(spec, comment["user"]),
        )
        made = self._here(made)
        return spec.complete(pointer("components", "schemas", "issue-comment"), made)

    def _answer(self, status: int, payload: Any) -> None:
        spec = self.state.spec
        assert spec is not None
        path = self.path.partition("?")[0][len("/api/v3") :]
        ref = spec.response_ref(self.command, path, status)
        if ref is None:  # 401: GitHub answers every operation so, without describing it
            ref = pointer("components", "schemas", "basic-error")
        problems = spec.errors(ref, payload)
        if problems:
            raise AssertionError(f"answer refused by GitHub's description: {problems[:3]}")
        self._send(status, payload)

    def _base(self) -> str:
        return f"http://{self.state.host}"

    def _repository(self, spec: GitHubSpec, project: str) -> dict[str, Any]:
        repo = spec.example("full-repository-default-response")
        owner, name = project.split("/")
        base = self._base()
        repo.update(
            name=name,
            full_name=project,
            default_branch="main",
            html_url=f"{base}/{project}",
            url=f"{base}/api/v3/repos/{project}",
            clone_url=f"{base}/{project}.git",
        )
        repo["owner"]["login"] = owner
        return spec.complete(pointer("components", "schemas", "full-repository"), repo)

    def _open_pull(
        self, spec: GitHubSpec, project: str, body: dict[str, Any], login: str = "alice"
    ) -> None:
        if self.state.refuse_pulls is not None:
            error = {"resource": "PullRequest", "code": "custom", "message": "refused"}
            message = {"message": "Validation Failed", "errors": [error]}
            message["documentation_url"] = "x"
            return self._answer(self.state.refuse_pulls, message)
        branches = self.state.branches(project)
        if body["head"] not in branches or body["base"] not in branches:
            error = {"resource": "PullRequest", "code": "invalid", "field": "head"}
            return self._answer(
                422, {"message": "Validation Failed", "errors": [error], "documentation_url": "x"}
            )
        with self.state.lock:
            number = len(self.state.pulls) + 1
            made = {"project": project, "number": number, **body, "user": login}
            made.update(head_ref=body["head"], base_ref=body["base"], state="open")
            made.update(reviews=[], comments=[])
            self.state.pulls.append(made)
        self._answer(201, self._pull_json(spec, made))

    # -- GitLab ------------------------------------------------------------------------
    def _gitlab(self, path: str) -> None:
        raw = self._body()
        body = json.loads(raw) if raw else None
        credential = self.headers.get("PRIVATE-TOKEN") or ""
        with self.state.lock:
            self.state.api_seen.append((self.command, path, credential))
        if credential not in self.state.tokens:
            return self._send(401, {"message": "401 Unauthorized"})
        login = self.state.login(credential)
        if path.rstrip("/") == "/user" and self.command == "GET":
            return self._send(200, {"id": 7, "username": login, "name": login})
        parts = path.strip("/").split("/")
        if parts[0] != "projects" or len(parts) < 2:
            raise AssertionError(f"not implemented here: {self.command} {path}")
        ids = {str(100 + i): p for i, p in enumerate(sorted(self._projects()))}
        project = ids.get(parts[1]) or unquote(parts[1])  # a numeric id, or the path
        if not (self.state.repos / f"{project}.git").is_dir():
            return self._send(404, {"message": "404 Project Not Found"})
        base = self._base()
        if len(parts) == 2 and self.command == "GET":
            number = next(int(i) for i, p in ids.items() if p == project)
            info = {"id": number, "path_with_namespace": project, "default_branch": "main"}
            return self._send(200, {**info, "web_url": f"{base}/{project}"})
        if parts[2:] == ["merge_requests"] and self.command == "POST":
            assert isinstance(body, dict), "a merge request needs a JSON body"
            wanted = {"source_branch", "target_branch", "title"}
            assert wanted <= set(body), f"missing {wanted - set(body)}"
            assert all(isinstance(body[k], str) for k in wanted), body
            if body["source_branch"] not in self.state.branches(project):
                return self._send(409, {"message": ["Source branch does not exist"]})
            with self.state.lock:
                iid = len(self.state.pulls) + 1
                made = {"project": project, "iid": iid, **body, "user": login, "state": "open"}
                made.update(head_ref=body["source_branch"], base_ref=body["target_branch"])
                made.update(approvals=[], comments=[])
                self.state.pulls.append(made)
            return self._send(201, self._merge_json(made))
        if len(parts) >= 4 and parts[2] == "merge_requests":
            merge = self.state.pull(project, int(parts[3]))
            if merge is None:
                return self._send(404, {"message": "404 Not found"})
            return self._merge_route(merge, parts[4:], body, login)
        raise AssertionError(f"not implemented here: {self.command} {path}")

    def _merge_route(self, merge: dict[str, Any], rest: list[str], body: Any, login: str) -> None:
        method, state = self.command, self.state
        if rest == [] and method == "GET":
            return self._send(200, self._merge_json(merge))
        if rest == [] and method == "PUT":
            assert isinstance(body, dict) and body.get("state_event") == "close", body
            if merge["state"] == "open":
                merge.update(final_head=state.head_of(merge), state="closed")
            return self._send(200, self._merge_json(merge))
        if rest == ["approvals"] and method == "GET":
            return self._send(200, self._approvals_json(merge))
        if rest == ["approve"] and method == "POST":
            if login in merge["approvals"]:
                return self._send(401, {"message": "401 Unauthorized"})
            merge["approvals"].append(login)
            return self._send(201, self._approvals_json(merge))
        if rest == ["notes"] and method == "GET":
            return self._send(200, [self._note_json(n) for n in merge["comments"]])
        if rest == ["notes"] and method == "POST":
            assert isinstance(body, dict) and isinstance(body.get("body"), str), body
            note = {"id": 9000 + len(merge["comments"]), "user": login, "body": body["body"]}
            merge["comments"].append(note)
            return self._send(201, self._note_json(note))
        if rest == ["merge"] and method == "PUT":
            if merge["state"] != "open" or not state.mergeable(merge):
                return self._send(405, {"message": "405 Method Not Allowed"})
            state.merge(merge)
            return self._send(200, self._merge_json(merge))
        raise AssertionError(f"not implemented here: {method} merge request {rest}")

    def _merge_json(self, merge: dict[str, Any]) -> dict[str, Any]:
        state, project, iid = self.state, merge["project"], merge["iid"]
        opened = merge["state"] == "open"
        status = ("mergeable" if state.mergeable(merge) else "conflict") if opened else "not_open"
        return {
            "id": 100 + iid,
            "iid": iid,
            "project_id": 100,
            "title": merge["title"],
            "description": merge.get("description"),
            "state": {"open": "opened"}.get(merge["state"], merge["state"]),
            "author": {"id": 1, "username": merge["user"]},
            "source_branch": merge["head_ref"],
            "target_branch": merge["base_ref"],
            "sha": state.head_of(merge),
            "merge_commit_sha": merge.get("merge_commit_sha"),
            "squash_commit_sha": None,
            "detailed_merge_status": status,
            "web_url": f"{self._base()}/{project}/-/merge_requests/{iid}",
        }

    def _approvals_json(self, merge: dict[str, Any]) -> dict[str, Any]:
        approved_by = [{"user": {"id": 1, "username": u}} for u in merge["approvals"]]
        made = {"id": 100 + merge["iid"], "iid": merge["iid"], "approved": bool(approved_by)}
        return {**made, "approvals_required": 0, "approvals_left": 0, "approved_by": approved_by}

    def _note_json(self, note: dict[str, Any]) -> dict[str, Any]:
        author = {"id": 1, "username": note["user"]}
        made = {"id": note["id"], "body": note["body"], "system": False, "author": author}
        return {**made, "created_at": "2026-01-02T00:00:00Z"}

    def _projects(self) -> list[str]:
        repos = self.state.repos
        return [str(p.relative_to(repos))[: -len(".git")] for p in repos.glob("*/*.git")]


def host_git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t"}
    env.update(GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def running_forge(
    root: Path, spec: GitHubSpec | None, projects: tuple[str, ...]
) -> Iterator[ForgeState]:
    """A forge over bare repositories ``projects`` (each with a commit on ``main``)."""
    repos = root / "repos"
    repos.mkdir()
    for project in projects:
        bare = repos / f"{project}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        host_git("init", "-q", "--bare", "-b", "main", str(bare))
        host_git("-C", str(bare), "config", "http.receivepack", "true")
        seed = root / f"seed-{project.replace('/', '-')}"
        host_git("init", "-q", "-b", "main", str(seed))
        (seed / "main.tf").write_text('resource "terraform_data" "a" {\n  input = "one"\n}\n')
        host_git("add", "main.tf", cwd=seed)
        host_git("commit", "-qm", "seed", cwd=seed)
        host_git("push", "-q", str(bare), "main", cwd=seed)
    state = ForgeState(repos, spec=spec)
    handler = type("Forge", (ForgeHandler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


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
        base_url=f"http://{site.forge.host}/api/v3", auth=github.Auth.Token(token), retry=None
    )
    return client.get_repo(PROJECT, lazy=True)


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
