"""Harness for the JupyterHub tests (no tests here): a real JupyterHub on loopback with
its DummyAuthenticator and SimpleLocalProcessSpawner, ``configurable-http-proxy`` from
npm, and an admin service token to create users, start servers and issue user tokens.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from server_support import call_api, free_port, stop_group

#: Hang guard for the hub's and a user server's start (not a timing assertion).
START_WAIT = 120.0


def missing_programs() -> str | None:
    """Why the hub cannot run here, or ``None`` (install them with ``.ci/jupyterhub``)."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "PyPI jupyterhub is not installed (bash .ci/jupyterhub installs it)"
    if shutil.which("configurable-http-proxy") is None:
        return "npm configurable-http-proxy is not on PATH (bash .ci/jupyterhub installs it)"
    if shutil.which("jupyterhub-singleuser") is None:
        return "jupyterhub-singleuser is not on PATH"
    return None


CONFIG = """
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.ConfigurableHTTPProxy.pid_file = {dir!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {dir!r} + "/hub.sqlite"
c.JupyterHub.cookie_secret_file = {dir!r} + "/cookie_secret"
c.JupyterHub.pid_file = {dir!r} + "/hub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.JupyterHub.spawner_class = "simple"
c.JupyterHub.allow_named_servers = True
c.SimpleLocalProcessSpawner.home_dir_template = {dir!r} + "/home/{{username}}"
c.Spawner.args = ["--allow-root"]
c.Spawner.environment = {environment!r}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.JupyterHub.services = [{{"name": "test-admin", "api_token": {admin!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["test-admin"]}}]
"""


class Hub:
    """``jupyterhub`` in a subprocess, with an admin service token."""

    def __init__(self, directory: Path, environment: dict[str, str]) -> None:
        self.directory = directory
        self.port = free_port()
        self.admin = secrets.token_hex(16)
        self.log = directory / "hub.log"
        config = CONFIG.format(
            port=self.port,
            hub_port=free_port(),
            proxy_port=free_port(),
            dir=str(directory),
            environment=environment,
            admin=self.admin,
        )
        (directory / "jupyterhub_config.py").write_text(config)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def home(self, user: str) -> Path:
        return self.directory / "home" / user

    def acp_url(self, user: str, server: str = "") -> str:
        named = f"{server}/" if server else ""
        return f"ws://127.0.0.1:{self.port}/user/{user}/{named}iac-kernel/acp"

    def start(self) -> Hub:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "HOME", "USER")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env["CONFIGPROXY_AUTH_TOKEN"] = secrets.token_hex(16)
        command = [sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self._wait(lambda: self.api("GET", "/hub/api/") is not None, "the hub to start")
        return self

    def _wait(self, ready: Any, what: str) -> Any:
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"jupyterhub exited: {self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                value = ready()
                if value:
                    return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}: {self.log.read_text()[-3000:]}")

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return call_api(self.http + path, self.admin, method, body) or {}

    def add_user_with_server(self, user: str, server: str = "") -> None:
        """Start ``user``'s default server, or the named ``server``."""
        # Allowed users exist from the hub's start; this only starts the server.
        path = (
            f"/hub/api/users/{user}/servers/{server}" if server else f"/hub/api/users/{user}/server"
        )
        self.api("POST", path)

        def ready() -> bool:
            state = self.api("GET", f"/hub/api/users/{user}")["servers"].get(server, {})
            return bool(state.get("ready"))

        self._wait(ready, f"{user}'s server {server!r}")

    def token(self, user: str, scopes: list[str]) -> str:
        answer = self.api(
            "POST", f"/hub/api/users/{user}/tokens", {"scopes": scopes, "note": "iac-kernel test"}
        )
        return answer["token"]

    def stop(self) -> None:
        stop_group(self.process)
