"""``iac-kernel acp --remote URL``: the command that runs the bridge (:mod:`.bridge`)
with the editor's stdio."""

from __future__ import annotations

import asyncio
import logging
import os

from iac_kernel.acp.bridge import RECONNECT_FOR, Bridge, say
from iac_kernel.acp.remote import RemoteError

RECONNECT_VAR = "IAC_KERNEL_REMOTE_RECONNECT"


def reconnect_window(value: str | None) -> float:
    """Seconds to keep reconnecting: ``value`` if it is a number >= 0, else the default
    (a bad value is reported in one line)."""
    if value is None or not value.strip():
        return RECONNECT_FOR
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        say(f"{RECONNECT_VAR}={value!r} is not a number of seconds; using {RECONNECT_FOR:g}")
        return RECONNECT_FOR
    return seconds


def run_remote(url: str, *, allow_insecure: bool = False) -> int:
    """The ``--remote`` command: check the URL, relay stdio, return the exit status."""
    from iac_kernel.acp.remote import target
    from iac_kernel.acp.stdio import claim_stdout, open_reader, open_writer, setup_logging

    protocol_fd = claim_stdout()
    setup_logging()
    if logging.getLogger().level > logging.DEBUG:
        # The bridge says itself, in one line, why a connection failed.
        logging.getLogger("tornado.general").setLevel(logging.CRITICAL)
    try:
        where = target(url, allow_insecure=allow_insecure)
    except RemoteError as exc:
        say(str(exc))
        return 2

    window = reconnect_window(os.environ.get(RECONNECT_VAR))

    async def main() -> int:
        reader = await open_reader(0)
        writer = await open_writer(protocol_fd)
        return await Bridge(where, reader, writer, window).run()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0
