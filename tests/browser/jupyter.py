"""Start a Jupyter server (JupyterLab or Notebook 7) for the browser tests, and stop it.

The server only listens on 127.0.0.1, with a random token, a temporary root directory,
its own config/runtime/settings/workspace directories (so the machine's user settings
cannot change what the test sees) and the iac-kernel kernelspec installed under a
temporary prefix that JUPYTER_PATH points at.

A server starts in seconds but far slower on a loaded machine, so the tests share one per
front end and test process (:class:`Servers`, the ``jupyter`` fixture): each test gets a
:class:`Folder` of its own under the server's root, where its notebooks live, its kernels
run and whose kernels get the test's environment (the kernelspec starts the kernel
through :data:`WITH_ENV`, which reads the environment the test wrote for the kernel's
working folder). A folder's kernels are shut down when its test ends.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from browser.themes import set_theme

CHROMIUM = "/usr/bin/chromium"

#: The marks of every browser test module: ``pytestmark = BROWSER_MARKS``.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing (apt-get install chromium)"
    ),
]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Seconds a server may take to answer /api/status.
START_TIMEOUT = 90.0
#: The page-visible option that exposes ``window.jupyterapp`` (themes are switched in
#: place with its commands: browser/themes.py), per front end.
EXPOSE_APP = {
    "jupyterlab": "--LabApp.expose_app_in_browser=True",
    "notebook": "--JupyterNotebookApp.expose_app_in_browser=True",
}
#: The variables tests/conftest.py gives each test its own value of (its kernels get them).
ISOLATED = ("IAC_KERNEL_SESSIONS_DIR", "IAC_KERNEL_RUNTIME_DIR")
#: The folder (in a server's base) of the environments tests wrote for their kernels.
KERNEL_ENVS = "kernel-envs"
#: The kernelspec's launcher: the environment a test wrote for the kernel's working folder
#: (``<envs>/<folder name>``, shell ``export`` lines), then the real kernel command.
WITH_ENV = """#!/bin/sh
env_file="{envs}/$(basename "$PWD")"
if [ -f "$env_file" ]; then . "$env_file"; fi
exec "$@"
"""


@dataclass
class Server:
    url: str
    token: str
    root: Path
    log: Path
    app: str = "jupyterlab"
    #: The folder given to :func:`jupyter_server` (settings, kernel environments, log).
    base: Path = field(default_factory=Path)
    process: subprocess.Popen[bytes] | None = None

    def page_url(self, path: str) -> str:
        return f"{self.url}/{path.lstrip('/')}?token={self.token}"

    def notebook_url(self, name: str) -> str:
        """The page showing notebook ``name`` (a path under the root)."""
        return self.page_url(
            f"lab/tree/{name}" if self.app == "jupyterlab" else f"notebooks/{name}"
        )

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def api(self, method: str, path: str) -> object:
        """Call the server's REST API; the decoded JSON answer (``None`` when empty)."""
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as resp:
            body = resp.read()
        return json.loads(body) if body else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def install_kernelspec(prefix: Path) -> Path:
    """Install the kernelspec with the real ``iac-kernel install --prefix``; returns its dir."""
    subprocess.run(
        [sys.executable, "-m", "iac_kernel", "install", "--prefix", str(prefix)],
        check=True,
        capture_output=True,
        text=True,
    )
    spec = prefix / "share" / "jupyter" / "kernels" / "iac-kernel"
    if not (spec / "kernel.json").is_file():
        raise RuntimeError(f"iac-kernel install --prefix did not write {spec}/kernel.json")
    return spec


def launch_with_env(spec: Path, envs: Path) -> None:
    """Make the kernelspec in ``spec`` start its kernel through :data:`WITH_ENV` (the
    installed command unchanged after it; the shell ``exec``s it, so signals reach the
    kernel itself)."""
    envs.mkdir(parents=True, exist_ok=True)
    launcher = envs.parent / "with-env.sh"
    launcher.write_text(WITH_ENV.format(envs=envs))
    kernel = json.loads((spec / "kernel.json").read_text())
    kernel["argv"] = ["/bin/sh", str(launcher), *kernel["argv"]]
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=2))


def write_settings(settings_dir: Path, app: str = "jupyterlab") -> None:
    """The user settings of a test's server, and nothing else (no theme a test switched
    to): quiet JupyterLab, no news or update toasts over the notebook (Notebook 7 has no
    notification plugin to configure)."""
    shutil.rmtree(settings_dir, ignore_errors=True)
    settings_dir.mkdir(parents=True)
    if app != "jupyterlab":
        return
    notification = settings_dir / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


def write_notebook(path: Path, source: str = "") -> Path:
    """A notebook for the iac-kernel kernelspec, with one code cell."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "iac-kernel",
        "display_name": "IaC Agent",
        "language": "markdown",
    }
    nb.metadata["language_info"] = {"name": "markdown"}
    nb.cells.append(nbformat.v4.new_code_cell(source))
    nbformat.write(nb, path)
    return path


def _wait_ready(proc: subprocess.Popen[bytes], url: str, token: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"jupyter exited with {proc.returncode}:\n{log.read_text(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"jupyter did not start in {START_TIMEOUT}s:\n{log.read_text()[-4000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM lets the server shut its kernels down; the group kill is the fallback."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        # The server ran in its own session: this reaches only it and its kernels.
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=10)


@contextmanager
def jupyter_server(app: str, base: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """Run ``python -m <app>`` (``jupyterlab`` or ``notebook``) until the block ends.

    ``base`` is an empty temporary directory; the server's root is ``base/root``.
    """
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    prefix = base / "prefix"
    launch_with_env(install_kernelspec(prefix), base / KERNEL_ENVS)
    settings = base / "lab-settings"
    write_settings(settings, app)
    token = secrets.token_hex(16)
    log = base / f"{app}.log"
    full_env = {
        **os.environ,
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
        **(env or {}),
    }
    argv = [
        sys.executable,
        "-m",
        app,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        # No PyPI look-ups from the extension manager during a test.
        "--LabApp.extension_manager=readonly",
        EXPOSE_APP[app],
    ]
    if os.geteuid() == 0:  # CI runs as root
        argv.append("--ServerApp.allow_root=True")
    for attempt in range(3):
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*argv, f"--ServerApp.port={port}"],
                cwd=root,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(proc, url, token, log)
            break
        except RuntimeError:
            _stop(proc)
            # Another run took the free port before the server bound it: another port.
            if attempt == 2 or "already in use" not in log.read_text(errors="replace"):
                raise
    try:
        yield Server(url=url, token=token, root=root, log=log, app=app, base=base, process=proc)
    finally:
        _stop(proc)


@dataclass
class Folder:
    """A test's own folder on a shared server: its notebooks, its kernels' working folder
    (their environment is the one :meth:`kernel_env` wrote) and its own JupyterLab
    workspace, so nothing another test opened shows on its page."""

    server: Server
    root: Path
    #: Where this test's part of the server log begins.
    log_start: int = 0
    #: What every kernel here gets beneath :meth:`kernel_env`'s variables: the test's own
    #: session store and runtime folder (tests/conftest.py), as a server of its own passed on.
    defaults: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        return self.server.token

    def kernel_env(self, env: dict[str, str]) -> None:
        """The environment (over the server's) of the kernels started from now on here."""
        env = {**self.defaults, **env}
        exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
        (self.server.base / KERNEL_ENVS / self.root.name).write_text(exports)

    def notebook_url(self, name: str = "") -> str:
        """The page showing notebook ``name`` of this folder (in JupyterLab, in a fresh
        workspace of its own; without a name, the workspace with the folder open)."""
        path = f"{self.root.name}/{name}".rstrip("/")
        if self.server.app == "jupyterlab":
            return (
                f"{self.url}/lab/workspaces/{self.root.name}/tree/{path}?reset&token={self.token}"
            )
        return f"{self.url}/notebooks/{path}?token={self.token}"

    def set_theme(self, theme: str) -> None:
        """Make ``theme`` the server's theme: pages loaded (or reloaded) from now on use it."""
        set_theme(self.server.base, theme)

    def log_tail(self, chars: int = 4000) -> str:
        """The end of what the server logged since this folder was made."""
        try:
            with self.server.log.open("rb") as log:
                log.seek(self.log_start)
                return log.read().decode(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def shut_down_kernels(self) -> None:
        """End the sessions (and so the kernels) of this folder's notebooks and consoles."""
        prefix = f"{self.root.name}/"
        try:
            sessions = self.server.api("GET", "sessions")
            for session in sessions:
                if session["path"].startswith(prefix):
                    self.server.api("DELETE", f"sessions/{session['id']}")
        except (urllib.error.URLError, OSError) as exc:  # the server is gone: so are they
            print(f"could not shut down the kernels of {self.root}: {exc}")


class Servers:
    """This test process's Jupyter servers, one per front end, started on first use (and
    again if one died), stopped by :meth:`close`."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._stack = ExitStack()
        self._running: dict[str, Server] = {}
        self._started = 0

    def folder(self, app: str, name: str) -> Folder:
        """A new empty folder named after ``name`` on the ``app`` server, its settings
        back to the defaults (the theme a test switched to is not the next one's)."""
        server = self._server(app)
        write_settings(server.base / "lab-settings", app)
        root = server.root / name
        for number in range(1, 100):
            if not root.exists():
                break
            root = server.root / f"{name}_{number}"
        root.mkdir()
        folder = Folder(
            server=server,
            root=root,
            log_start=server.log.stat().st_size,
            defaults={var: os.environ[var] for var in ISOLATED if var in os.environ},
        )
        folder.kernel_env({})
        return folder

    def _server(self, app: str) -> Server:
        server = self._running.get(app)
        if server is None or server.process is None or server.process.poll() is not None:
            self._started += 1
            base = self.base / f"{app}-{self._started}"
            base.mkdir(parents=True)
            env = {  # the server's own, whichever test started it
                "IAC_KERNEL_SESSIONS_DIR": str(base / "sessions"),
                "IAC_KERNEL_RUNTIME_DIR": str(base / "run"),
            }
            server = self._stack.enter_context(jupyter_server(app, base, env))
            self._running[app] = server
        return server

    def close(self) -> None:
        self._stack.close()
