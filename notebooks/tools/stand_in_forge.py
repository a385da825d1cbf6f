"""A stand-in for the team's forge on loopback: one HTTP server that is a real git server
(``git http-backend`` as CGI, optionally behind basic auth) and the forge's API at the
same host, like GitHub Enterprise (``/api/v3``) and GitLab (``/api/v4``).

The runbook ``08-pull-request.ipynb`` opens its pull request here, and the forge tests
(``tests/forge_support.py``) run against the same server with GitHub's published OpenAPI
description checking every request and answer (an :class:`ApiCheck` they pass in).

The GitHub API implements only the calls the tools and the reviewers make: the
repository, opening, reading, closing and merging a pull request (a real merge commit in
the bare repository, ``git merge-tree``), its reviews, its comments and the token's user.
Each token is one user (:attr:`ForgeState.users`). A request it does not know is answered
500 and kept in ``problems``. Unlike GitHub it lets an author approve their own pull
request (GitLab may): the apply must not count it. The GitLab API implements the same
calls for merge requests (``/projects/:id``, ``merge_requests``, ``approvals``,
``approve``, ``notes``, ``merge``, ``/user``).

``python notebooks/tools/stand_in_forge.py [WORKSPACE]`` runs one until interrupted (its
state in ``notebooks/.scratch/forge``), project ``octo/infra`` seeded with WORKSPACE's
files (default: the runbook's sample), and prints the environment to start Jupyter with:
the host, the engineer's token and the egress settings that let the sandbox reach it.
``notebooks/conftest.py`` and ``tools/run_notebooks.py`` start it the same way for the
runbooks that need it (:func:`runbook_forge`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

#: The GitHub routes answered here (``{name}`` is one path segment).
GITHUB_ROUTES = (
    "/user",
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/pulls",
    "/repos/{owner}/{repo}/pulls/{pull_number}",
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews",
    "/repos/{owner}/{repo}/pulls/{pull_number}/merge",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
)
_ROUTES = [
    (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(t)) + "$"), t)
    for t in GITHUB_ROUTES
]
#: The project the runbook's forge serves.
PROJECT = "octo/infra"
#: When an answer says a request was merged or closed (fixed: recorded outputs stay put).
STAMP = "2026-01-02T00:00:00Z"


class ApiCheck(Protocol):
    """What a stricter caller adds to the GitHub API: checks of each request and answer
    against a description, and answers completed from it."""

    def request(self, method: str, path: str, template: str, body: Any) -> None:
        """Raise AssertionError when ``METHOD path`` (matched to ``template``) or its body
        is not what GitHub describes."""

    def shaped(self, schema: str, made: dict[str, Any], base: str) -> dict[str, Any]:
        """``made`` (an object of GitHub's ``schema``) completed to the full shape."""

    def answer(self, method: str, path: str, status: int, payload: Any) -> None:
        """Raise AssertionError when GitHub would never give this answer."""


@dataclass
class ForgeState:
    repos: Path
    #: Tokens the API accepts.
    tokens: set[str] = field(default_factory=set)
    #: The git server's basic-auth password for user ``bob`` (None: no auth).
    git_password: str | None = None
    #: Checks of the GitHub API's requests and answers (None: none).
    check: ApiCheck | None = None
    #: (method, path, credential header value) of every API request.
    api_seen: list[tuple[str, str, str]] = field(default_factory=list)
    git_seen: list[str] = field(default_factory=list)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Answer POST pulls with this status (a forge that refuses after the push).
    refuse_pulls: int | None = None
    #: token -> login; a token not here is :attr:`default_login`.
    users: dict[str, str] = field(default_factory=dict)
    default_login: str = "alice"
    #: Teams and groups -> {login: membership state}, for a handler that answers them.
    teams: dict[str, dict[str, str]] = field(default_factory=dict)
    #: login -> repository permission (``read``, ``write``, ...); anyone else may write.
    permissions: dict[str, str] = field(default_factory=dict)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, project: str) -> str:
        return f"http://127.0.0.1:{self.port}/{project}.git"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def login(self, token: str) -> str:
        return self.users.get(token, self.default_login)

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


def git_http_backend(handler: BaseHTTPRequestHandler, body: bytes, root: Path) -> None:
    """Answer ``handler``'s request (``body`` read) with ``git http-backend`` run as CGI
    over the repositories in ``root``, the user authenticated as ``bob``."""
    path, _, query = handler.path.partition("?")
    env = {
        "PATH": os.environ["PATH"],
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": unquote(path),
        "QUERY_STRING": query,
        "REQUEST_METHOD": handler.command,
        "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": "bob",
        "REMOTE_ADDR": "127.0.0.1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
    }
    done = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
    )
    head, _, payload = done.stdout.partition(b"\r\n\r\n")
    status, headers = 200, []
    for line in head.decode().split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.append((name, value.strip()))
    handler.send_response(status)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def github_route(method: str, path: str) -> str:
    """The template of ``path`` among :data:`GITHUB_ROUTES`; AssertionError when none."""
    matches = [t for regex, t in _ROUTES if regex.match(path)]
    if not matches:
        raise AssertionError(f"not implemented here: {method} {path}")
    return min(matches, key=lambda t: t.count("{"))


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
        raw = self._body()
        body = json.loads(raw) if raw else None
        credential = self.headers.get("Authorization") or ""
        with self.state.lock:
            self.state.api_seen.append((self.command, path, credential))
        template = github_route(self.command, path)
        if self.state.check is not None:
            self.state.check.request(self.command, path, template, body)
        token = credential.split(" ", 1)[1] if " " in credential else ""
        if token not in self.state.tokens:
            return self._answer(401, {"message": "Bad credentials", "documentation_url": "x"})
        login = self.state.login(token)
        if template == "/user" and self.command == "GET":
            user = {"login": login, "id": 1, "name": login, "type": "User"}
            user["user_view_type"] = "private"
            return self._answer(200, self._shaped("private-user", user))
        parts = path.strip("/").split("/")
        project = f"{parts[1]}/{parts[2]}"
        if not (self.state.repos / f"{project}.git").is_dir():
            return self._answer(404, {"message": "Not Found", "documentation_url": "x"})
        if template == "/repos/{owner}/{repo}" and self.command == "GET":
            return self._answer(200, self._repository(project))
        if template == "/repos/{owner}/{repo}/pulls" and self.command == "POST":
            return self._open_pull(project, body, login)
        if template == "/repos/{owner}/{repo}/collaborators/{username}/permission":
            name = parts[4]
            level = self.state.permissions.get(name, "write")
            made = {"permission": level, "role_name": level}
            made["user"] = {"login": name, "id": 7, "type": "User"}
            return self._answer(200, self._shaped("repository-collaborator-permission", made))
        pull = self.state.pull(project, int(parts[4])) if len(parts) > 4 else None
        if pull is None:
            return self._answer(404, {"message": "Not Found", "documentation_url": "x"})
        return self._pull_route(template, pull, body, login)

    def _pull_route(self, template: str, pull: dict[str, Any], body: Any, login: str) -> None:
        state, method = self.state, self.command
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}":
            if method == "PATCH" and body.get("state") == "closed" and pull["state"] == "open":
                pull.update(final_head=state.head_of(pull), state="closed")
            return self._answer(200, self._pull_json(pull))
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
                return self._answer(200, self._review_json(pull, review))
            return self._answer(200, [self._review_json(pull, r) for r in pull["reviews"]])
        if template == "/repos/{owner}/{repo}/issues/{issue_number}/comments":
            if method == "POST":
                comment = {"id": 5000 + len(pull["comments"]), "user": login, "body": body["body"]}
                pull["comments"].append(comment)
                return self._answer(201, self._comment_json(pull, comment))
            return self._answer(200, [self._comment_json(pull, c) for c in pull["comments"]])
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

    def _shaped(self, schema: str, made: dict[str, Any]) -> dict[str, Any]:
        check = self.state.check
        return made if check is None else check.shaped(schema, made, self._base())

    def _user(self, login: str) -> dict[str, Any]:
        return {"login": login, "id": 1, "type": "User", "html_url": f"{self._base()}/{login}"}

    def _pull_json(self, pull: dict[str, Any]) -> dict[str, Any]:
        state = self.state
        project, number = pull["project"], pull["number"]
        base = self._base()
        open_ = pull["state"] == "open"
        mergeable = state.mergeable(pull) if open_ else None
        api = f"{base}/api/v3/repos/{project}"
        made = {
            "id": number,
            "number": number,
            "title": pull["title"],
            "body": pull.get("body"),
            "draft": bool(pull.get("draft")),
            "state": "open" if open_ else "closed",
            "merged": pull["state"] == "merged",
            "merge_commit_sha": pull.get("merge_commit_sha"),
            "merged_at": STAMP if pull["state"] == "merged" else None,
            "closed_at": None if open_ else STAMP,
            "mergeable": mergeable,
            "mergeable_state": ("clean" if mergeable else "dirty") if open_ else "unknown",
            "html_url": f"{base}/{project}/pull/{number}",
            "url": f"{api}/pulls/{number}",
            "user": self._user(pull["user"]),
            "issue_url": f"{api}/issues/{number}",
            "comments_url": f"{api}/issues/{number}/comments",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "commits_url": f"{api}/pulls/{number}/commits",
            "head": {"ref": pull["head_ref"], "sha": state.head_of(pull)},
            "base": {
                "ref": pull["base_ref"],
                "sha": state.rev(project, f"refs/heads/{pull['base_ref']}"),
            },
        }
        return self._shaped("pull-request", made)

    def _review_json(self, pull: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
        made = {
            "id": review["id"],
            "state": review["state"],
            "commit_id": review["commit_id"],
            "body": review["body"],
            "user": self._user(review["user"]),
            "submitted_at": STAMP,
            "html_url": f"{self._base()}/{pull['project']}/pull/{pull['number']}"
            f"#review-{review['id']}",
        }
        return self._shaped("pull-request-review", made)

    def _comment_json(self, pull: dict[str, Any], comment: dict[str, Any]) -> dict[str, Any]:
        url = f"{self._base()}/{pull['project']}/pull/{pull['number']}#issuecomment-{comment['id']}"
        made = {
            "id": comment["id"],
            "body": comment["body"],
            "html_url": url,
            "user": self._user(comment["user"]),
            "created_at": STAMP,
            "updated_at": STAMP,
        }
        return self._shaped("issue-comment", made)

    def _answer(self, status: int, payload: Any) -> None:
        check = self.state.check
        if check is not None:
            path = self.path.partition("?")[0][len("/api/v3") :]
            check.answer(self.command, path, status, payload)
        self._send(status, payload)

    def _base(self) -> str:
        return f"http://{self.state.host}"

    def _repository(self, project: str) -> dict[str, Any]:
        owner, name = project.split("/")
        base = self._base()
        repo = {
            "id": 1,
            "name": name,
            "full_name": project,
            "private": True,
            "default_branch": "main",
            "html_url": f"{base}/{project}",
            "url": f"{base}/api/v3/repos/{project}",
            "clone_url": f"{base}/{project}.git",
            "owner": {"login": owner},
        }
        return self._shaped("full-repository", repo)

    def _open_pull(self, project: str, body: dict[str, Any], login: str = "alice") -> None:
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
        self._answer(201, self._pull_json(made))

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
        return {**made, "created_at": STAMP}

    def _projects(self) -> list[str]:
        repos = self.state.repos
        return [str(p.relative_to(repos))[: -len(".git")] for p in repos.glob("*/*.git")]


def host_git(*args: str, cwd: Path | None = None) -> str:
    """``git`` on the host with a fixed identity and no system config; its output."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t"}
    env.update(GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def seed_files(folder: Path) -> dict[str, str]:
    """The text files under ``folder`` (relative path -> text), for a project's seed."""
    skipped = {".git", ".terraform"}  # the seed's own git adds the rest as .gitignore says
    return {
        str(p.relative_to(folder)): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not skipped & set(p.relative_to(folder).parts)
    }


@contextmanager
def running_forge(
    root: Path,
    projects: tuple[str, ...],
    *,
    seed: Mapping[str, str],
    check: ApiCheck | None = None,
    users: Mapping[str, str] | None = None,
    handler: type[ForgeHandler] | None = None,
) -> Iterator[ForgeState]:
    """A forge over bare repositories ``projects`` under ``root/repos``, each with one
    commit on ``main`` holding ``seed`` (relative path -> text)."""
    repos = root / "repos"
    repos.mkdir()
    for project in projects:
        bare = repos / f"{project}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        host_git("init", "-q", "--bare", "-b", "main", str(bare))
        host_git("-C", str(bare), "config", "http.receivepack", "true")
        work = root / f"seed-{project.replace('/', '-')}"
        host_git("init", "-q", "-b", "main", str(work))
        for name, text in seed.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        host_git("add", "-A", cwd=work)
        host_git("commit", "-qm", "seed", cwd=work)
        host_git("push", "-q", str(bare), "main", cwd=work)
    state = ForgeState(repos, check=check, users=dict(users or {}))
    serving = type("Forge", (handler or ForgeHandler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), serving)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


#: This folder's notebooks (the runbooks).
NOTEBOOKS = Path(__file__).resolve().parent.parent
#: The runbooks that need the forge, and the sample their project is seeded with.
RUNBOOKS = {"08-pull-request.ipynb": NOTEBOOKS / "workspaces" / "pull-request"}
#: Where the runbooks' forge keeps its repositories and its people's tokens (git-ignored,
#: beside the runbooks' scratch copies; made afresh by every start).
RUNBOOK_ROOT = NOTEBOOKS / ".scratch" / "forge"
#: The engineer (the session's token) and the teammates who review.
ENGINEER, REVIEWERS = "alice", ("bob",)


@dataclass
class Team:
    """The runbook's people and their tokens (the engineer's is the session's)."""

    tokens: dict[str, str] = field(
        default_factory=lambda: {
            login: "ghp_" + secrets.token_hex(18) for login in (ENGINEER, *REVIEWERS)
        }
    )

    def write(self, folder: Path) -> None:
        """Each reviewer's token in ``folder/LOGIN.token``, where a stand-in for that person
        (``review_as.py``) finds it; the engineer's is only in the session's environment."""
        folder.mkdir(parents=True, exist_ok=True)
        for login in REVIEWERS:
            path = folder / f"{login}.token"
            path.write_text(self.tokens[login] + "\n")
            path.chmod(0o600)


def environment(forge: ForgeState, team: Team) -> dict[str, str]:
    """What a session sets to use ``forge`` as GitHub Enterprise as the engineer: the host,
    the engineer's token (the credential broker binds it to that host) and the forge's
    loopback address allowed through the egress proxy without a question."""
    from iac_kernel.egress.policy import DEFAULT_ALLOW

    return {
        "GH_HOST": forge.host,
        "GH_ENTERPRISE_TOKEN": team.tokens[ENGINEER],
        "IAC_KERNEL_EGRESS_ALLOW": f"{DEFAULT_ALLOW},127.0.0.1",
        "IAC_KERNEL_EGRESS_ALLOW_PRIVATE": forge.host,
    }


@contextmanager
def team_forge(
    root: Path, workspace: Path, project: str = PROJECT
) -> Iterator[tuple[ForgeState, Team]]:
    """The runbook's forge in ``root`` (emptied first): ``project`` seeded with
    ``workspace``'s files, the team's tokens accepted, the reviewers' written to
    ``root/people``."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    team = Team()
    users = {token: login for login, token in team.tokens.items()}
    with running_forge(root, (project,), seed=seed_files(workspace), users=users) as forge:
        forge.tokens.update(team.tokens.values())
        team.write(root / "people")
        yield forge, team


@contextmanager
def runbook_forge(notebook: Path) -> Iterator[dict[str, str]]:
    """For a runbook that needs it (:data:`RUNBOOKS`), its forge running, and the
    environment its kernel needs; for any other, nothing and ``{}``."""
    sample = RUNBOOKS.get(notebook.name)
    if sample is None:
        yield {}
        return
    with team_forge(RUNBOOK_ROOT, sample) as (forge, team):
        yield environment(forge, team)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "workspace",
        nargs="?",
        type=Path,
        default=RUNBOOKS["08-pull-request.ipynb"],
        help="the files of the project's first commit (default: the runbook's sample)",
    )
    args = parser.parse_args(argv)
    if not args.workspace.is_dir():
        print(f"stand_in_forge: no such folder: {args.workspace}", file=sys.stderr)
        return 2
    with team_forge(RUNBOOK_ROOT, args.workspace) as (forge, team):
        print("# Set these where you start Jupyter (the engineer's session), then open")
        print("# 08-pull-request.ipynb; the reviewers' tokens are in", RUNBOOK_ROOT / "people")
        for name, value in environment(forge, team).items():
            print(f"export {name}={shlex.quote(value)}")
        print(f"# the project: git clone {forge.url(PROJECT)}")
        print("# serving until interrupted (Ctrl-C)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
