"""The theme matrix of the browser tests: JupyterLab's Light, Dark and Dark High Contrast
themes, set through the server's settings directory (the page reads them when it loads),
in JupyterLab and Notebook 7 alike."""

from __future__ import annotations

import json
from pathlib import Path

from browser.contrast import CONTRAST

THEMES = ["JupyterLab Light", "JupyterLab Dark", "JupyterLab Dark High Contrast"]
APPS = ["jupyterlab", "notebook"]


def set_theme(base: Path, theme: str) -> None:
    """Make ``theme`` the theme of the server started under ``base`` (jupyter_server's
    ``base``): pages loaded (or reloaded) from now on use it."""
    folder = base / "lab-settings" / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))


def slug(theme: str) -> str:
    """``light``, ``dark`` or ``contrast``: for file names."""
    return "contrast" if "Contrast" in theme else theme.split()[-1].lower()


def wait_theme(page, theme: str) -> None:
    """Wait until the page shows ``theme``."""
    from playwright.sync_api import expect

    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)


def contrast(locator) -> float:
    """The WCAG contrast ratio of the first element's text on what it is drawn on."""
    return float(locator.first.evaluate(CONTRAST))


def reload_page(page, idle: bool = True) -> None:
    """Reload without saving (leave the page when it asks: the notebook goes back to its
    file) and wait until the kernel answered kernel_info again (and, with ``idle``, until
    it is idle)."""
    from browser.lab import WAIT_MS

    if not getattr(page, "leaves_unsaved", False):
        page.on("dialog", lambda dialog: dialog.accept())
        page.leaves_unsaved = True
    page.kernel_replies.clear()
    page.reload()
    for _ in range(WAIT_MS // 100):
        if page.kernel_replies:
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError("no kernel_info_reply after the reload")
    if idle:
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()
