"""Issue 31, item 3: Jupyter's control plane is found as Jupyter finds it
(:mod:`jupyter_core.paths`). A real kernel whose connection file lives in a runtime
folder moved by ``JUPYTER_DATA_DIR`` or ``JUPYTER_RUNTIME_DIR`` cannot be driven from a
bash call; a server config file holding a token is empty inside; every ``JUPYTER_*``,
``JPY_*`` and ``JUPYTERHUB_*`` variable is gone. Controls: the same attack works from
the host, and the workspace's own files stay readable."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from guard_support import Asker, Harness, make_fakes
from iac_kernel.guard.sandbox import hidden
from iac_kernel.guard.sandbox.bwrap import unusable_reason

sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

TOKEN = "jupyter-server-token-8c1f0b2a"
#: Finds every kernel connection file in the runtime folder and runs code in each
#: kernel through it: the code writes MARKER's path (given as argv[2]).
ATTACK = """
import glob, os, sys
from jupyter_client import BlockingKernelClient
found = sorted(glob.glob(os.path.join(sys.argv[1], "kernel-*.json")))
print("connection files:", len(found))
for path in found:
    client = BlockingKernelClient(connection_file=path)
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=30)
    client.execute_interactive(f"open({sys.argv[2]!r}, 'w').write('pwned')", timeout=30)
    client.stop_channels()
"""


@pytest.fixture
def home(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = outside_tmp / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "jupyter_server_config.json").write_text(
        json.dumps({"IdentityProvider": {"token": TOKEN}})
    )
    monkeypatch.setenv("HOME", str(home))
    for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def kernel(outside_tmp: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A real python kernel whose connection file is where the moved layout puts it."""
    moved = outside_tmp / "moved"
    if request.param == "JUPYTER_DATA_DIR":
        monkeypatch.setenv("JUPYTER_DATA_DIR", str(moved))
        runtime = moved / "runtime"
    else:
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(moved / "rt"))
        runtime = moved / "rt"
    runtime.mkdir(parents=True)
    manager = KernelManager(
        kernel_name="python3", connection_file=str(runtime / "kernel-test.json")
    )
    manager.start_kernel()
    try:
        yield runtime
    finally:
        manager.shutdown_kernel(now=True)


def _harness(tmp_path: Path, outside_tmp: Path) -> Harness:
    root = tmp_path / "h"
    root.mkdir()
    bin_dir, log = make_fakes(root)
    return Harness(outside_tmp / "ws", bin_dir, log, mode="bypass")


@sandboxed
@pytest.mark.parametrize("kernel", ["JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"], indirect=True)
async def test_a_moved_runtime_folder_is_hidden_from_a_call(
    tmp_path: Path, outside_tmp: Path, home: Path, kernel: Path
):
    harness = _harness(tmp_path, outside_tmp)
    script = harness.cwd / "attack.py"
    script.write_text(ATTACK)
    marker = harness.cwd / "pwned"
    command = f"{sys.executable} attack.py {kernel} {marker} 2>&1; ls -a {kernel}; cat attack.py"
    result = await harness.run(command, Asker())
    assert result is not None
    assert "connection files: 0" in result.content, result.content
    assert "import glob" in result.content  # control: the workspace stays readable
    assert not marker.exists()
    # Control: the same attack from the host reaches the kernel (the test can fail).
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script), str(kernel), str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "connection files: 1" in done.stdout, done.stdout + done.stderr
    assert marker.read_text() == "pwned"


@sandboxed
async def test_server_config_files_and_jupyter_variables_are_hidden(
    tmp_path: Path, outside_tmp: Path, home: Path, monkeypatch: pytest.MonkeyPatch
):
    moved = outside_tmp / "cfg"
    moved.mkdir()
    (moved / "jupyter_notebook_config.py").write_text(f"c.NotebookApp.token = '{TOKEN}'\n")
    (moved / "jupyterhub_config.py").write_text(f"c.JupyterHub.api_tokens = {{'{TOKEN}': 'a'}}\n")
    (moved / "other.json").write_text('{"plain": "visible-control"}')
    variables = {
        "JUPYTER_CONFIG_DIR": str(moved),
        "JPY_SESSION_NAME": "/home/u/work/notebook.ipynb",
        "JPY_API_TOKEN": TOKEN,
        "JUPYTERHUB_API_TOKEN": TOKEN,
        "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
        "JUPYTER_TOKEN": TOKEN,
        "JUPYTER_SERVER_URL": "http://127.0.0.1:8888/",
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    harness = _harness(tmp_path, outside_tmp)
    (harness.cwd / "notes.txt").write_text("workspace-control")
    command = (
        f"cat {home}/.jupyter/jupyter_server_config.json {moved}/*.py {moved}/other.json "
        "notes.txt; env"
    )
    result = await harness.run(command, Asker())
    assert result is not None
    text = result.content
    assert TOKEN not in text, text
    for name in variables:
        assert f"{name}=" not in text, name
    assert "visible-control" in text and "workspace-control" in text


def test_jupyter_paths_follow_jupyter_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """XDG_DATA_HOME and JUPYTER_PREFER_ENV_PATH move the folders as Jupyter moves them."""
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("JUPYTER_DATA_DIR", raising=False)
    monkeypatch.delenv("JUPYTER_PLATFORM_DIRS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "extra"))
    found = hidden.jupyter_paths({})
    assert tmp_path / "xdg" / "jupyter" / "runtime" in found
    assert tmp_path / "extra" / "jupyter_server_config.json" in found
    assert Path(sys.prefix, "etc", "jupyter", "jupyter_server_config.py") in found
    # A value given only to the call counts too.
    assert tmp_path / "d" / "runtime" in hidden.jupyter_paths(
        {"JUPYTER_DATA_DIR": str(tmp_path / "d")}
    )


def test_control_variables_are_dropped_everywhere():
    shown, secret = hidden.split_env(
        {"JPY_SESSION_NAME": "x", "JUPYTERHUB_API_TOKEN": "t", "jupyter_path": "/p", "A": "b"}
    )
    assert shown == {"A": "b"} and secret == {}
