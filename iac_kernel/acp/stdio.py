"""``iac-kernel acp``: the ACP server on stdin/stdout, as editors launch it.

stdout is the protocol channel and nothing else may reach it: at start the real stdout
is moved to a private descriptor and fd 1 is pointed at stderr, so a stray ``print``, a
library warning or a child process writing to fd 1 lands in the log instead. Logs go to
stderr, or to ``IAC_KERNEL_LOG_FILE``; ``IAC_KERNEL_LOG_LEVEL`` sets the level.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading

from iac_kernel.acp.server import serve
from iac_kernel.acp.transport import READ_LIMIT
from iac_kernel.config import Settings
from iac_kernel.models.credentials import has_anthropic_credentials
from iac_kernel.sessions.manager import SessionManager

log = logging.getLogger(__name__)


def run_stdio(fast_exit: bool = True) -> int:
    """Serve ACP on stdio until stdin closes or a SIGTERM/SIGINT arrives.

    With ``fast_exit`` the process ends with ``os._exit`` once every session is closed
    (their logs are fsynced and locks released): tearing down the interpreter's modules
    adds about half a second that an editor waiting for the agent to exit would see.
    """
    protocol_fd = claim_stdout()
    setup_logging()
    warm_up()
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        log.error("bad IAC_KERNEL_* setting: %s", exc)
        return 2
    manager = SessionManager(settings, holder=f"iac-kernel acp (pid {os.getpid()})", origin="acp")
    try:
        asyncio.run(_main(protocol_fd, manager))
    except KeyboardInterrupt:
        pass
    if fast_exit:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(0)
    return 0


def warm_up() -> None:
    """With Anthropic credentials set, import the SDK in the background while the client
    initializes: the first prompt needs it and it takes a second to import. Without
    credentials sessions use the scripted model, so nothing is imported."""
    if not has_anthropic_credentials():
        return

    def load() -> None:
        # Only third-party code is left to import by now (every iac_kernel module
        # the server uses is loaded), so this cannot deadlock with the main thread.
        with contextlib.suppress(Exception):
            importlib.import_module("iac_kernel.models.anthropic")

    threading.Thread(target=load, name="warm-up", daemon=True).start()


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


async def _main(protocol_fd: int, manager: SessionManager) -> None:
    loop = asyncio.get_running_loop()
    reader = await open_reader(0)
    writer = await open_writer(protocol_fd)
    server = asyncio.ensure_future(serve(reader, writer, manager))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, server.cancel)
    try:
        await server
    except asyncio.CancelledError:
        log.info("stopping on a signal")
    finally:
        await manager.close_all()


async def open_reader(fd: int) -> asyncio.StreamReader:
    """A stream reader on ``fd``: a pipe or tty directly, anything else (a file) via a
    thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
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
    loop = asyncio.get_running_loop()
    sink = os.fdopen(fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), sink
        )
    except (ValueError, OSError):
        return BlockingWriter(sink)
    return asyncio.StreamWriter(transport, protocol, None, loop)


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
