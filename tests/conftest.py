"""Shared fixtures. Every test runs with its own session store and no Anthropic key."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from iac_kernel.models.providers import CREDENTIAL_ENV

#: Finalizers never run inside pytest's own parse of a failure's source (see the module);
#: the browser tests share their Chromium and page fixtures.
pytest_plugins = ["gc_before_report", "browser.fixtures"]


@pytest.fixture(autouse=True)
def isolated_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point the session store at a fresh directory; drop real credentials and a
    developer's own telemetry endpoint (tests that export start their receiver)."""
    store = tmp_path_factory.mktemp("sessions")
    monkeypatch.setenv("IAC_KERNEL_SESSIONS_DIR", str(store))
    for name in (*CREDENTIAL_ENV, *(n for n in os.environ if n.startswith("OTEL_"))):
        monkeypatch.delenv(name, raising=False)
    return store


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty working directory for a session (resolved, as sessions store it)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return Path(os.path.realpath(path))


@pytest.fixture
def tool_ctx(workspace: Path):
    """A ToolContext in ``workspace`` with default Settings (tests replace fields as needed)."""
    from iac_kernel.config import Settings
    from iac_kernel.tools.base import ToolContext

    return ToolContext(cwd=workspace, settings=Settings())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "browser: drives JupyterLab / Notebook 7 in headless Chromium (/usr/bin/chromium)",
    )


@pytest.fixture(scope="session", autouse=True)
def session_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Kernels started by module- or class-level fixtures (set up before any per-test
    fixture) advertise their ACP endpoints here, never in ``~/.iac-code/run``."""
    run = tmp_path_factory.mktemp("run-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IAC_KERNEL_RUNTIME_DIR", str(run))
        yield run


@pytest.fixture(scope="session", autouse=True)
def egress_environment() -> Iterator[None]:
    """The egress proxy's environment stays where this machine keeps it when a test
    moves HOME (else the first sandboxed call of such a test installs mitmproxy again
    under the fake home); a test of the install itself names another folder."""
    from iac_kernel.egress.environment import environment_dir

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
        yield


@pytest.fixture(autouse=True)
def isolated_runtime_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Kernels advertise their ACP endpoints in a fresh runtime directory per test."""
    run = tmp_path_factory.mktemp("run")
    monkeypatch.setenv("IAC_KERNEL_RUNTIME_DIR", str(run))
    return run


@pytest.fixture(autouse=True)
def sigint_delivered() -> Iterator[None]:
    """SIGINT neither ignored nor blocked in this process when a test starts, as it is
    for the agent at run time: children inherit both, and a shell started with SIGINT
    ignored cannot trap it (a bash cancel test then saw only the SIGTERM that follows),
    so a test that left it so (a kernel app or a browser driver started in-process) must
    not decide another's result."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp, whatever TMPDIR says: a bash call's sandbox has a private
    /tmp, so a fake HOME or store under /tmp would be invisible inside for that reason
    alone, and a test of what the sandbox hides or shows would prove nothing."""
    import shutil
    import tempfile

    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="iac-test-", dir="/var/tmp")))
    yield path
    shutil.rmtree(path, ignore_errors=True)
