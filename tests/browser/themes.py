"""The theme matrix of the browser tests: JupyterLab's Light, Dark and Dark High Contrast
themes, in JupyterLab and Notebook 7 alike: set through the server's settings directory
(the page reads them when it loads) or switched in place on an open page (what the
Settings menu does), so one page load checks every theme."""

from __future__ import annotations

import json
from pathlib import Path

THEMES = ["JupyterLab Light", "JupyterLab Dark", "JupyterLab Dark High Contrast"]
APPS = ["jupyterlab", "notebook"]
#: Whether the page's main background (``--jp-layout-color0``) is as light as asked.
SHOWS_LIGHT = """light => {
  const probe = document.createElement('div');
  probe.style.background = 'var(--jp-layout-color0)';
  document.body.appendChild(probe);
  const [r, g, b] = getComputedStyle(probe).backgroundColor.match(/[\\d.]+/g).map(Number);
  probe.remove();
  return (r + g + b) / 3 > 128 === light;
}"""


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
    """Wait until the page shows ``theme``: its name on the page, its colours applied (a
    light or a dark background), the splash screen that covers a theme's loading gone and
    a frame drawn since."""
    from playwright.sync_api import expect

    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
    page.wait_for_function(SHOWS_LIGHT, arg="Light" in theme)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def switch_theme(page, theme: str) -> None:
    """Switch the open page to ``theme`` in place with the front end's own command (the
    server is told too: a reload keeps it) and wait until it shows."""
    page.evaluate(
        "t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme
    )
    wait_theme(page, theme)


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
