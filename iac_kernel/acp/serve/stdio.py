"""``iac-kernel acp``: the ACP server on stdin/stdout, as editors launch it.

stdout is the protocol channel and nothing else may reach it: at start the real stdout
is moved to a private descriptor and fd 1 is pointed at stderr, so a stray ``print``, a
library warning or a child process writing to fd 1 lands in the log instead. Logs go to
stderr, or to ``IAC_KERNEL_LOG_FILE``; ``IAC_KERNEL_LOG_LEVEL`` sets the level.

Start-up: ``initialize`` and ``session/new`` are answered without the ACP SDK, which is
imported for the first request that needs its models (:mod:`iac_kernel.acp.routes`).
With credentials, a thread imports the model provider's SDK meanwhile
(:func:`~iac_kernel.models.registry.start_warm_up`), before the first prompt needs it.

The streams are ours, not the SDK's ``stdio_streams``: that one writes to
``sys.stdout`` (pointed at stderr here), fails on a stdin or stdout that is a regular
file, keeps the pipe's 64 KB buffer, and would import the SDK before the first answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from iac_kernel.acp import approvals
from iac_kernel.acp.attach.runtime import RuntimeDirError, remove_dead
from iac_kernel.acp.serve.server import serve
from iac_kernel.acp.wire.transport import READ_LIMIT
from iac_kernel.models.registry import start_warm_up

if TYPE_CHECKING:
    from iac_kernel.agent.manager import SessionManager
    from iac_kernel.config import Settings

log = logging.getLogger(__name__)

#: Seconds after start that the provider's SDK starts importing in a thread: after the
#: answers an editor waits for at spawn, which it would otherwise slow down.
WARM_UP_AFTER = 1.0


def run_stdio(fast_exit: bool = True) -> int:
    """Serve ACP on stdio until stdin closes or a SIGTERM/SIGINT arrives.

    With ``fast_exit`` the process ends with ``os._exit`` once every session is closed
    (their logs are fsynced and locks released): tearing down the interpreter's modules
    adds about half a second that an editor waiting for the agent to exit would see.
    """
    protocol_fd = claim_stdout()
    setup_logging()
    code = 0
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(_main(protocol_fd))
    if fast_exit:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)
    return code


@functools.cache
def make_manager() -> SessionManager:
    """The session manager of this process, with settings from the environment (made
    with the agent, after the ``initialize`` answer: importing it is most of start-up)."""
    from iac_kernel.agent.manager import SessionManager

    holder = f"iac-kernel acp (pid {os.getpid()})"
    return SessionManager(_settings(), holder=holder, origin="acp")


def _settings() -> Settings:
    """Settings from the environment; each bad variable logged as one line naming it
    (its default is used)."""
    from iac_kernel.config import Settings

    problems: list[str] = []
    settings = Settings.from_env(problems=problems)
    for line in problems:
        log.warning("setting ignored: %s", line)
    return settings


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


async def _main(protocol_fd: int) -> int:
    loop = asyncio.get_running_loop()
    try:
        reader = await open_reader(0)
        writer = await open_writer(protocol_fd)
    except (ValueError, OSError) as exc:
        log.error("%s", exc)
        return 2
    # A local editor approves as the person who runs this process (``_iac/approvals/*``).
    decisions = approvals.local()
    server = asyncio.ensure_future(serve(reader, writer, make_manager, approvals=decisions))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, server.cancel)
    try:  # runtime files of killed kernels go at every start, not when someone attaches
        remove_dead()
    except (OSError, RuntimeDirError) as exc:
        log.warning("could not clean the runtime directory: %s", exc)
    loop.call_later(WARM_UP_AFTER, start_warm_up)
    try:
        await server
    except asyncio.CancelledError:
        log.info("stopping on a signal")
    finally:
        decisions.close()
        if make_manager.cache_info().currsize:
            await make_manager().close_all()
        else:  # no request needed the agent: bad settings are still named once
            _settings()
    return 0


async def open_reader(fd: int) -> asyncio.StreamReader:
    """A stream reader on ``fd``; ValueError unless it is a pipe, a socket or a terminal."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    source = os.fdopen(fd, "rb", buffering=0, closefd=False)
    await _connect(loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source))
    return reader


async def open_writer(fd: int) -> asyncio.StreamWriter:
    """A writer with flow control on ``fd``; ValueError unless it is a pipe, a socket or a
    terminal."""
    loop = asyncio.get_running_loop()
    widen_pipe(fd)
    sink = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await _connect(
        loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop=loop), sink)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _connect(connecting: Any) -> Any:
    try:
        return await connecting
    except ValueError:  # a regular file: asyncio watches pipes, sockets and terminals only
        raise ValueError(
            "iac-kernel acp speaks over pipes (as editors start it): stdin and stdout "
            "must be pipes, sockets or terminals, not files"
        ) from None


#: The pipe buffer asked for on stdout (Linux's default 64 KB meant a wake-up of both
#: sides per 64 KB of a long ``session/load`` replay); Linux's default most a user may ask.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a :data:`PIPE_BYTES` buffer when ``fd`` is a pipe (Linux; else, or when
    the system allows less, the buffer stays as it is)."""
    import fcntl

    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
