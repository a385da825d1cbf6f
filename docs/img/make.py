"""Draw the pictures in docs/img: ``python docs/img/make.py`` (extra arguments go to pytest).

Each picture is drawn by the browser test that checks what it shows, run here with
``IAC_DOC_PICTURES`` set to this folder (``tests/browser/pictures.py``). The
ordinary test run draws none of them, so it leaves the checkout as it was. Needs what the
browser tests need: ``/usr/bin/chromium`` and the ``[test]`` extra (Playwright).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))

from browser.pictures import DOC_PICTURES_ENV  # noqa: E402

#: Each picture, and the test (pytest node id, from the checkout's root) that draws it.
PICTURES = {
    "lab-permission.png": (
        "tests/test_browser_lab.py::test_lab_streams_renders_cards_and_allows_a_write"
    ),
    "lab-big-plan.png": (
        "tests/test_browser_big_plan.py::test_a_big_plan_question_is_readable_fast_and_complete"
        "[jupyterlab]"
    ),
}


def pytest_command(extra: list[str]) -> list[str]:
    """The pytest command line that runs the drawing tests (in the checkout's root)."""
    return [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", *PICTURES.values(), *extra]


def main(argv: list[str]) -> int:
    started = time.time()
    env = {**os.environ, DOC_PICTURES_ENV: str(HERE)}
    code = subprocess.call(pytest_command(argv), cwd=REPO, env=env)
    if code:
        return code
    drawn = {name: HERE / name for name in PICTURES}
    missing = [n for n, p in drawn.items() if not p.exists() or p.stat().st_mtime < started]
    if missing:  # e.g. the browser tests were skipped (no /usr/bin/chromium)
        print(f"not drawn: {', '.join(missing)} (were the browser tests skipped?)", file=sys.stderr)
        return 1
    for name, path in drawn.items():
        print(f"drew docs/img/{name} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
