"""``iac-kernel acp``: the ACP server on stdin/stdout, as editors launch it.

stdout is the protocol channel and nothing else may reach it: at start the real stdout
is moved to a private descriptor and fd 1 is pointed at stderr, so a stray ``print``, a
library warning or a child process writing to fd 1 lands in the log instead. Logs go to
stderr, or to ``IAC_KERNEL_LOG_FILE``; ``IAC_KERNEL_LOG_LEVEL`` sets the level.

Start-up: the agent core, then the ACP SDK and the server are imported in a background
thread (:mod:`iac_kernel.acp.sdk`) while the main thread reads stdin; a plainly valid
``initialize`` is answered at once, and plainly valid ``session/new`` requests as soon
as the core is in (:mod:`iac_kernel.acp.early_start`); everything else waits for the
import and is served by the SDK's connection. With Anthropic credentials the same
thread then imports the Anthropic SDK, before the first prompt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from iac_kernel.acp import sdk
from iac_kernel.acp.early_start import CORE_MODULES, EarlyStart
from iac_kernel.acp.keep import keep_replay

if TYPE_CHECKING:
    import asyncio

    from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)
STARTED = time.monotonic()

#: What the server needs besides the core, imported by the background thread.
SERVER_MODULES = ("iac_kernel.acp.server", "iac_kernel.models.credentials")


def run_stdio(fast_exit: bool = True) -> int:
    """Serve ACP on stdio until stdin closes or a SIGTERM/SIGINT arrives.

    With ``fast_exit`` the process ends with ``os._exit`` once every session is closed
    (their logs are fsynced and locks released): tearing down the interpreter's modules
    adds about half a second that an editor waiting for the agent to exit would see.
    """
    protocol_fd = claim_stdout()
    setup_logging()
    loader = sdk.start_loading(SERVER_MODULES, then=warm_up, core=CORE_MODULES)
    start = EarlyStart(0, protocol_fd, loader, make_manager)
    try:
        start.run()
        loader.wait()
        log.info(
            "ACP SDK and server loaded %.3f s after start%s%s",
            time.monotonic() - STARTED,
            "; initialize was answered before" if start.initialize else "",
            f"; {len(start.sessions)} session/new answered before" if start.sessions else "",
        )
        code = _serve(protocol_fd, start)
    except KeyboardInterrupt:
        code = 0
    if fast_exit:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)
    return code


def _remove_dead_runtime_files() -> None:
    """Runtime files of killed kernels go at every start, not when someone attaches."""
    from iac_kernel.acp.runtime import RuntimeDirError, remove_dead

    try:
        remove_dead()
    except (OSError, RuntimeDirError) as exc:
        log.warning("could not clean the runtime directory: %s", exc)


def make_manager() -> SessionManager:
    """The session manager of this process, with settings from the environment."""
    from iac_kernel.config import Settings
    from iac_kernel.sessions.manager import SessionManager

    problems: list[str] = []
    settings = Settings.from_env(problems=problems)
    for line in problems:  # one line each, naming the variable; the defaults are used
        log.warning("setting ignored: %s", line)
    holder = f"iac-kernel acp (pid {os.getpid()})"
    return SessionManager(settings, holder=holder, origin="acp", on_settled=keep_replay)


def _serve(protocol_fd: int, start: EarlyStart) -> int:
    import asyncio

    manager = start.manager or make_manager()
    _remove_dead_runtime_files()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(protocol_fd, manager, start))
    return 0


def warm_up() -> None:
    """Runs in the loader thread once the server's modules are imported (so only
    third-party code is left to import and this cannot deadlock with the main thread):
    with Anthropic credentials, import the SDK and build its client before the first
    prompt needs them."""
    from iac_kernel.models.warm import warm_anthropic

    warm_anthropic()


def claim_stdout() -> int:
    """Move the real stdout to a private fd and point fd 1 (and ``sys.stdout``) at stderr."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    private = os.dup(1)  # not inherited by child processes (PEP 446)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return private


def setup_logging() -> None:
    level = os.environ.get("IAC_KERNEL_LOG_LEVEL", "WARNING").upper()
    path = os.environ.get("IAC_KERNEL_LOG_FILE")
    handler: logging.Handler = logging.FileHandler(path) if path else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")


async def _main(protocol_fd: int, manager: SessionManager, start: EarlyStart | None = None) -> None:
    import asyncio
    import signal

    from iac_kernel.acp.server import serve

    loop = asyncio.get_running_loop()
    reader = await open_reader(0, start.buffer if start else b"", bool(start and start.eof))
    writer = await open_writer(protocol_fd)
    server = asyncio.ensure_future(
        serve(
            reader,
            writer,
            manager,
            initialized=start.initialize if start else None,
            early_sessions=start.sessions if start else (),
        )
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, server.cancel)
    try:
        await server
    except asyncio.CancelledError:
        log.info("stopping on a signal")
    finally:
        await manager.close_all()


async def open_reader(fd: int, initial: bytes = b"", eof: bool = False) -> asyncio.StreamReader:
    """A stream reader on ``fd``: a pipe or tty directly, anything else (a file) via a
    thread. ``initial`` is what was read from ``fd`` before (``eof``: all of it)."""
    import asyncio

    from iac_kernel.acp.transport import READ_LIMIT

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    if initial:
        reader.feed_data(initial)
    if eof:
        reader.feed_eof()
        return reader
    source = os.fdopen(fd, "rb", buffering=0, closefd=False)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    except (ValueError, OSError):
        threading.Thread(target=_feed, args=(loop, reader, fd), daemon=True).start()
    return reader


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    try:
        while data := os.read(fd, 65536):
            loop.call_soon_threadsafe(reader.feed_data, data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(reader.feed_eof)


async def open_writer(fd: int) -> asyncio.StreamWriter | BlockingWriter:
    """A writer on ``fd``: a pipe transport with flow control, or plain blocking writes
    when ``fd`` is a regular file."""
    import asyncio

    loop = asyncio.get_running_loop()
    widen_pipe(fd)
    sink = os.fdopen(fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), sink
        )
    except (ValueError, OSError):
        return BlockingWriter(sink)
    return asyncio.StreamWriter(transport, protocol, None, loop)


#: The pipe buffer asked for on stdout (Linux's default 64 KB meant a wake-up of both
#: sides per 64 KB of a long ``session/load`` replay); the system's limit if lower.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a :data:`PIPE_BYTES` buffer when ``fd`` is a pipe (Linux; else nothing)."""
    import fcntl

    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setter is None:
        return
    try:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        limit = PIPE_BYTES
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, setter, min(PIPE_BYTES, limit))


class BlockingWriter:
    """``write``/``drain`` on a file that asyncio cannot watch (stdout redirected to a file)."""

    def __init__(self, sink) -> None:
        self.sink = sink

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self.sink.write(view)
            if not written:
                raise OSError("stdout accepts no more data")
            view = view[written:]

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sink.close()
