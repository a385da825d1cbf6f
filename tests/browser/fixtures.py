"""Fixtures of the browser tests: one Jupyter server per front end for the whole test
process (a pytest-xdist worker has its own) with a folder of its own on it for each test
(``jupyter``), one headless Chromium per test module, a fresh page (its own context) per
test, and a folder for the test's screenshots (under its own temporary folder, never the
checkout). A module may override ``page`` (e.g. to grant permissions)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from browser.jupyter import Folder, Servers
from browser.lab import chromium, lab_page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Per module, not per session: while Playwright's sync API runs, the thread has a
    running event loop, and the asyncio tests of other modules could not start theirs."""
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="session")
def jupyter_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    servers = Servers(tmp_path_factory.mktemp("jupyter"))
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture
def jupyter(jupyter_servers: Servers, tmp_path: Path) -> Iterator[Callable[..., Folder]]:
    """``jupyter(app, env)``: this test's own folder on the shared ``app`` server
    (``jupyterlab`` or ``notebook``), its kernels started with ``env``; named after the
    test unless ``name`` says otherwise (a picture shows it). Their kernels are shut down
    when the test ends, after its page closed (``page`` asks for this fixture)."""
    folders: list[Folder] = []

    def open_folder(app: str, env: dict[str, str] | None = None, name: str = "") -> Folder:
        folder = jupyter_servers.folder(app, name or tmp_path.name)
        if env:
            folder.kernel_env(env)
        folders.append(folder)
        return folder

    yield open_folder
    for folder in folders:
        folder.shut_down_kernels()


@pytest.fixture
def page(browser, jupyter) -> Iterator[object]:
    with lab_page(browser) as page:
        yield page


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """This test's screenshot folder; its path is printed so a failure's pictures are found."""
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    print(f"screenshots: {folder}")
    return folder
