"""Import the ACP SDK quickly, and off the thread that answers the client.

The SDK's ``acp.schema`` defines ~280 pydantic models with ``use_attribute_docstrings``.
Importing it costs ~0.75 s: most of it pydantic finding each class's source through
the stack and tokenizing it again for the field docstrings, then building validators
and serializers for every model, used or not. :func:`import_sdk` imports it with two
changes, limited to the time of the import (and ``defer_build`` to ``acp.schema``):

* attribute docstrings come from one parse of each module's file with pydantic's own
  visitor (for ``acp/schema.py`` cached on disk, keyed by the file's size, mtime and
  pydantic's version), so the field descriptions are the same;
* ``defer_build``: each model's validator and serializer are built when first used,
  as pydantic does for any model configured so; validation itself is unchanged. The
  same goes for the ``RootModel[...]`` classes the SDK's unions derive from and its
  module-level ``TypeAdapter``s (~0.1 s together, never used on the start-up path).

Anything unexpected (other pydantic internals, an unreadable file) falls back to the
plain import. :func:`start_loading` runs the import (and any modules named) in a
background thread, after the agent core's modules when asked (:class:`Loader`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SCHEMA_MODULE = "acp.schema"
ENV_PLAIN = "IAC_KERNEL_PLAIN_SDK_IMPORT"  # set to 1 to import the SDK unchanged


def import_sdk(*modules: str) -> None:
    """Import ``acp`` (and so ``acp.schema``) the fast way, then ``modules`` (whose
    pydantic models also get their attribute docstrings from one parse per file)."""
    if os.environ.get(ENV_PLAIN) == "1":
        for name in ("acp", *modules):
            importlib.import_module(name)
        return
    with _import_lock:
        _skip_plugin_scan()  # before the first model is built
        with _fast_models():
            for name in ("acp", *modules):
                importlib.import_module(name)


def _skip_plugin_scan() -> None:
    """Tell pydantic it has no plugins when no installed distribution can declare one.

    On its first model, pydantic lists every distribution's entry points looking for
    the ``pydantic`` group (~25 ms here); :func:`no_pydantic_plugins` reads the same
    ``entry_points.txt`` files directly. If any could name a plugin, pydantic looks.
    """
    try:
        if no_pydantic_plugins():
            from pydantic.plugin import _loader

            if _loader._plugins is None:
                _loader._plugins = {}
    except Exception as exc:  # other pydantic internals: pydantic scans itself
        log.debug("pydantic plugin scan kept: %s", exc)


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


_import_lock = threading.Lock()  # one patched import at a time


@contextlib.contextmanager
def _fast_models() -> Iterator[None]:
    try:
        from pydantic import RootModel, TypeAdapter
        from pydantic._internal import _config, _fields
        from pydantic.type_adapter import _type_has_config

        original_docs = _fields.extract_docstrings_from_cls
        original_for_model = _config.ConfigWrapper.for_model.__func__  # type: ignore[attr-defined]
        original_adapter_init = TypeAdapter.__init__
        docs = schema_docstrings()
    except Exception as exc:  # other pydantic internals, no source: the plain import
        log.debug("plain ACP SDK import: %s", exc)
        yield
        return

    def fast_docs(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
        found = docs if cls.__module__ == SCHEMA_MODULE else _module_docstrings(cls.__module__)
        if found is not None and cls.__qualname__ in found:
            return dict(found[cls.__qualname__])
        return original_docs(cls, use_inspect=use_inspect)

    # ``RootModel[X]`` classes the SDK's unions subclass: built at once they cost ~0.1 s
    # of the import, and most are never used.
    importing = threading.get_ident()

    def for_model(cls: Any, bases: Any, namespace: Any, raw: Any, kwargs: Any) -> Any:
        wrapper = original_for_model(cls, bases, namespace, raw, kwargs)
        if namespace.get("__module__") == SCHEMA_MODULE or (
            threading.get_ident() == importing and len(bases) == 1 and bases[0] is RootModel
        ):
            wrapper.config_dict["defer_build"] = True
        return wrapper

    def adapter_init(
        self: Any, type: Any, *, config: Any = None, _parent_depth: int = 2, **kw: Any
    ) -> None:
        # The SDK's module-level adapters (elicitation unions, ~50 ms): built on first use.
        if config is None and threading.get_ident() == importing and not _type_has_config(type):
            config = {"defer_build": True}
        original_adapter_init(self, type, config=config, _parent_depth=_parent_depth + 1, **kw)

    _fields.extract_docstrings_from_cls = fast_docs
    _config.ConfigWrapper.for_model = classmethod(for_model)  # type: ignore[method-assign]
    TypeAdapter.__init__ = adapter_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        _fields.extract_docstrings_from_cls = original_docs
        _config.ConfigWrapper.for_model = classmethod(original_for_model)  # type: ignore[method-assign]
        TypeAdapter.__init__ = original_adapter_init  # type: ignore[method-assign]


def schema_path() -> Path:
    """``acp/schema.py`` of the installed SDK, found without importing the package."""
    spec = importlib.util.find_spec("acp")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the ACP SDK is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "schema.py"


def schema_docstrings() -> dict[str, dict[str, str]]:
    """Attribute docstrings of each top-level class of ``acp/schema.py`` (by name)."""
    import pydantic

    path = schema_path()
    stat = path.stat()
    key = f"{stat.st_size}-{stat.st_mtime_ns}-{pydantic.VERSION}"
    cache = _cache_dir() / f"acp-schema-docs-{key}.json"
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(cache.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    docs = extract_docstrings(path.read_text(encoding="utf-8"))
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(docs), encoding="utf-8")
        os.replace(tmp, cache)
    return docs


_parsed: dict[str, dict[str, dict[str, str]] | None] = {}


def _module_docstrings(name: str) -> dict[str, dict[str, str]] | None:
    """:func:`extract_docstrings` of a module being imported (parsed once), or None."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    if path not in _parsed:
        try:
            _parsed[path] = extract_docstrings(Path(path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            _parsed[path] = None
    return _parsed[path]


def extract_docstrings(source: str) -> dict[str, dict[str, str]]:
    """Per top-level class, what pydantic's docstring visitor finds in its body. Names
    defined twice are left out (pydantic then looks them up itself)."""
    import ast

    from pydantic._internal._docs_extraction import DocstringVisitor

    docs: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        if node.name in seen:
            docs.pop(node.name, None)
            continue
        seen.add(node.name)
        visitor = DocstringVisitor()
        visitor.visit(ast.Module(body=[node], type_ignores=[]))
        docs[node.name] = visitor.attrs
    return docs


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "iac-kernel"


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
