"""Import the ACP SDK off the thread that answers the client.

The SDK's ``acp.schema`` defines ~280 pydantic models; importing it takes most of a
second. That cost is paid in a background thread (:class:`Loader`) while the main
thread answers ``initialize`` and a plain ``session/new`` without the SDK
(``acp/early.py``).

Only public means are used: no pydantic or SDK internals are replaced, so a patch
release of either cannot break the import. The one setting applied is pydantic's
documented ``PYDANTIC_DISABLE_PLUGINS``, during the import only and only when no
installed distribution declares a pydantic plugin (pydantic would find none: the
answer is the same without its entry-point scan).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"


def import_sdk(*modules: str) -> None:
    """Import ``acp`` (and so ``acp.schema``), then ``modules``."""
    with _import_lock, _no_plugin_scan():
        for name in ("acp", *modules):
            importlib.import_module(name)


_import_lock = threading.Lock()


@contextlib.contextmanager
def _no_plugin_scan() -> Iterator[None]:
    """Set ``PYDANTIC_DISABLE_PLUGINS`` for the import when no plugin can exist; the
    environment is restored after (children never inherit it)."""
    if PLUGINS_ENV in os.environ or not no_pydantic_plugins():
        yield
        return
    os.environ[PLUGINS_ENV] = "__all__"
    try:
        yield
    finally:
        os.environ.pop(PLUGINS_ENV, None)


def no_pydantic_plugins() -> bool:
    """True when no distribution on ``sys.path`` mentions ``pydantic`` in its entry
    points (what ``importlib.metadata`` would find), and nothing but the standard path
    finder lists distributions (zip entries, custom finders: False)."""
    import importlib.machinery

    for finder in sys.meta_path:
        if finder is not importlib.machinery.PathFinder and hasattr(finder, "find_distributions"):
            return False
    for entry in sys.path:
        if not isinstance(entry, str):
            return False
        folder = entry or "."
        if os.path.isfile(folder):
            return False
        try:
            items = list(os.scandir(folder))
        except OSError:
            continue
        for item in items:
            if not item.name.lower().endswith((".dist-info", ".egg-info")):
                continue
            path = os.path.join(item.path, "entry_points.txt") if item.is_dir() else item.path
            try:
                with open(path, "rb") as file:
                    if b"pydantic" in file.read().lower():
                        return False
            except FileNotFoundError:
                continue
            except OSError:  # unreadable: let pydantic decide
                return False
    return True


# -- loading in the background ---------------------------------------------------------


class Loader:
    """A background thread importing ``core`` modules (plain imports, no SDK), then the
    SDK and ``modules``, then running ``then`` (e.g. warming other imports).

    :attr:`core_loaded` is set when the core modules are in (or the import failed), so
    another thread can use them while the SDK still imports; :attr:`loaded` when all is.
    """

    def __init__(
        self,
        modules: Iterable[str],
        then: Callable[[], None] | None = None,
        core: Iterable[str] = (),
    ) -> None:
        self.modules = tuple(modules)
        self.core = tuple(core)
        self.then = then
        self.core_loaded = threading.Event()
        self.loaded = threading.Event()
        #: Called (in the loader thread) right after :attr:`loaded` is set.
        self.on_loaded: list[Callable[[], None]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="acp-sdk-import", daemon=True)

    def start(self) -> Loader:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            for name in self.core:
                importlib.import_module(name)
            self.core_loaded.set()
            import_sdk(*self.modules)
        except BaseException as exc:  # re-raised by wait()
            self.error = exc
        finally:
            self.core_loaded.set()
            self.loaded.set()
            for callback in self.on_loaded:
                callback()
        if self.then is not None and self.error is None:
            try:
                self.then()
            except Exception:
                log.debug("background warm-up failed", exc_info=True)

    def core_ready(self) -> bool:
        """Block until the core modules are imported; False if importing failed."""
        self.core_loaded.wait()
        return self.error is None

    def wait(self) -> None:
        """Block until the modules are imported; raise what the import raised."""
        self.loaded.wait()
        if self.error is not None:
            raise self.error


def start_loading(
    modules: Iterable[str] = (),
    then: Callable[[], None] | None = None,
    core: Iterable[str] = (),
) -> Loader:
    """Start importing ``core``, then the SDK and ``modules``, in a background thread."""
    return Loader(modules, then, core).start()
