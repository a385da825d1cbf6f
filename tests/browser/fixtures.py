"""Fixtures of the browser tests: one headless Chromium per test module, a fresh page
(its own context) per test. A module may override ``page`` (e.g. to grant permissions)."""

from __future__ import annotations

from collections.abc import Iterator

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
