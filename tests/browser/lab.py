"""Playwright helpers shared by the browser tests: Chromium, pages, and JupyterLab steps."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from browser.jupyter import CHROMIUM, CHROMIUM_ARGS

#: Limit for one wait on the page (a bound, not a timing assertion). Generous: CI
#: machines with two cores start a kernel in seconds, a loaded one in tens of seconds.
WAIT_MS = 120_000
SESSION_MIME = "application/vnd.iac-kernel.session+json"


@contextmanager
def chromium() -> Iterator[object]:
    """Headless Debian Chromium (never a downloaded browser)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def lab_page(browser) -> Iterator[object]:
    """A page that records uncaught errors and the kernel_info replies on its websockets."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"{exc}\n{exc.stack}"))
    page.errors = errors
    kernel_replies: list[str] = []

    def watch(ws) -> None:
        def on_frame(frame: str | bytes) -> None:
            if "kernel_info_reply" in str(frame):
                kernel_replies.append(ws.url)

        ws.on("framereceived", on_frame)

    page.on("websocket", watch)
    page.kernel_replies = kernel_replies
    try:
        yield page
    finally:
        context.close()


#: Resolves once the element and everything in it kept their size and place for five
#: frames in a row (the layout settled, e.g. after a resize).
STILL = """node => new Promise(resolve => {
  let last = '', still = 0;
  const tick = () => {
    const now = [node, ...node.querySelectorAll('*')].map(n => {
      const r = n.getBoundingClientRect();
      return [r.left, r.top, r.width, r.height].join();
    }).join(';');
    still = now === last ? still + 1 : 0;
    last = now;
    if (still >= 5) resolve(); else requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})"""


def wait_still(locator) -> None:
    """Wait until the element of ``locator`` and its contents stop moving."""
    locator.evaluate(STILL)


def our_errors(page) -> list[str]:
    """Uncaught page errors thrown from this extension's bundle (Notebook 7 itself logs one
    unrelated settings error on load, with or without the extension)."""
    return [error for error in page.errors if "@iac-kernel" in error]


def server_env(tmp_path: Path, script: Path) -> dict[str, str]:
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    return {"IAC_KERNEL_SESSIONS_DIR": str(sessions), "IAC_KERNEL_SCRIPT": str(script)}


def run_prompt(page, prompt: str, cell: int = 0) -> None:
    """Type the prompt into a cell and run it with Shift+Enter."""
    editor = page.locator(".jp-Cell .jp-InputArea-editor .cm-content").nth(cell)
    editor.click()
    page.keyboard.type(prompt)
    page.keyboard.press("Shift+Enter")


def save_and_reload(page) -> None:
    """Save the notebook, reload the page and wait until its kernel answered kernel_info
    (the kernel's widgets and running turns are known to the page from then on)."""
    from playwright.sync_api import expect

    page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").click()
    expect(page.locator(".jp-mod-current.jp-mod-dirty")).to_have_count(0)
    page.kernel_replies.clear()
    page.reload()
    for _ in range(WAIT_MS // 100):
        if page.kernel_replies:
            return
        page.wait_for_timeout(100)
    raise AssertionError("no kernel_info_reply after the reload")


def wait_kernel_idle(page) -> None:
    """Wait until the notebook's kernel is connected and idle.

    The toolbar's indicator says "idle" before any kernel exists, and a cell run then
    is silently dropped, so the kernel_info_reply on the kernel websocket is awaited too.
    """
    page.kernel_replies.clear()
    for _ in range(WAIT_MS // 100):
        if page.kernel_replies:
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError("the notebook's kernel never answered kernel_info")
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for()
