"""Git over HTTP with brokered basic auth: a loopback ``git http-backend`` that demands
the real password serves clone and push to a git holding only the placeholder (its
``~/.git-credentials`` is the broker's placeholder copy), through the broker."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from egress_support import running_mitmdump
from iac_kernel.egress import broker

PASSWORD = "realGitPassw0rd-5e6f7a8b9c"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


class GitBackend(BaseHTTPRequestHandler):
    """``git http-backend`` as CGI, behind basic auth with the real password."""

    root: Path

    def _serve(self) -> None:
        expected = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "bob",
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.root),
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[int]:
    repos = tmp_path / "repos"
    repos.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", "--bare", str(repos / "r.git")], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(repos / "r.git"), "config", "http.receivepack", "true"],
        check=True,
        env=env,
    )
    handler = type("Backend", (GitBackend,), {"root": repos})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_git_clone_and_push_with_brokered_basic_auth(tmp_path: Path, git_server: int):
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    url = f"http://localhost:{git_server}/r.git"
    (real_home / ".git-credentials").write_text(f"http://bob:{PASSWORD}@localhost:{git_server}\n")
    made = broker.prepare({}, home=real_home, folder=tmp_path / "private")
    placeholder_file = made.mounts[real_home / ".git-credentials"]
    assert PASSWORD not in placeholder_file.read_text()
    # the client: a home whose credential store is the placeholder copy
    home = tmp_path / "client-home"
    home.mkdir()
    shutil.copy(placeholder_file, home / ".git-credentials")
    (home / ".gitconfig").write_text(
        "[credential]\n\thelper = store\n[user]\n\tname = t\n\temail = t@example.com\n"
    )
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper() and "GIT" not in k}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")

    def git(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )

    # without the broker the placeholder is refused by the server (and git's store
    # helper then forgets it: put it back)
    assert git("clone", "-q", url, "direct").returncode != 0
    shutil.copy(placeholder_file, home / ".git-credentials")
    with running_mitmdump(made.mitmdump_args(), tmp_path / "mitmdump.log") as port:
        env["http_proxy"] = f"http://127.0.0.1:{port}"
        cloned = git("clone", "-q", url, "work")
        assert cloned.returncode == 0, cloned.stderr
        work = tmp_path / "work"
        (work / "f.txt").write_text("hello\n")
        assert git("add", "f.txt", cwd=work).returncode == 0
        assert git("commit", "-qm", "c", cwd=work).returncode == 0
        pushed = git("push", "-q", "origin", "HEAD:main", cwd=work)
        assert pushed.returncode == 0, pushed.stderr
        listed = git("ls-remote", url)
        assert "refs/heads/main" in listed.stdout, listed.stderr
    assert PASSWORD not in (home / ".git-credentials").read_text()
