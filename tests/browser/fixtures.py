"""Fixtures of the browser tests: one headless Chromium per test module, a fresh page
(its own context) per test, and a folder for the test's screenshots (under its own
temporary folder, never the checkout). A module may override ``page`` (e.g. to grant
permissions)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from browser.lab import chromium, lab_page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser) -> Iterator[object]:
    with lab_page(browser) as page:
        yield page


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """This test's screenshot folder; its path is printed so a failure's pictures are found."""
    folder = tmp_path / "screenshots"
    folder.mkdir(exist_ok=True)
    print(f"screenshots: {folder}")
    return folder
