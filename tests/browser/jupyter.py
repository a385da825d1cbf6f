"""Start a Jupyter server (JupyterLab or Notebook 7) for a browser test, and stop it.

The server only listens on 127.0.0.1, with a random token, a temporary root directory,
its own config/runtime/settings/workspace directories (so the machine's user settings
cannot change what the test sees) and the iac-kernel kernelspec installed under a
temporary prefix that JUPYTER_PATH points at.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

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


@dataclass
class Server:
    url: str
    token: str
    root: Path
    log: Path

    def page_url(self, path: str) -> str:
        return f"{self.url}/{path.lstrip('/')}?token={self.token}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"


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


def write_settings(settings_dir: Path) -> None:
    """Quiet JupyterLab: no news or update toasts over the notebook."""
    notification = settings_dir / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True, exist_ok=True)
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
    install_kernelspec(prefix)
    settings = base / "lab-settings"
    settings.mkdir()
    if app == "jupyterlab":  # Notebook 7 has no notification plugin to configure
        write_settings(settings)
    port = free_port()
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
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        # No PyPI look-ups from the extension manager during a test.
        "--LabApp.extension_manager=readonly",
    ]
    if os.geteuid() == 0:  # CI runs as root
        argv.append("--ServerApp.allow_root=True")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
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
        yield Server(url=url, token=token, root=root, log=log)
    finally:
        _stop(proc)
