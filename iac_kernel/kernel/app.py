"""Start the kernel process (what the kernelspec's argv runs)."""

from __future__ import annotations

import ipaddress
import logging
import sys
from typing import Any

#: ipykernel 7 warns about this at every start over TCP; on the loopback interface there is
#: nobody to eavesdrop (other users can only connect, and need the connection file's key).
TCP_WARNING = "Kernel is running over TCP without encryption"


class LoopbackTcpFilter(logging.Filter):
    """Drops ipykernel's TCP-encryption warning when the kernel listens on loopback only."""

    def __init__(self, app: Any):
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(TCP_WARNING):
            return True
        return not is_loopback(str(getattr(self.app, "ip", "")))


def is_loopback(ip: str) -> bool:
    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def without_debugger() -> None:
    """Keep ipykernel from importing debugpy (about a quarter of a second of every start).

    Cells here are prompts, not Python: the kernelspec says ``"debugger": false`` and
    kernel_info lists no debugger. ipykernel imports debugpy anyway and treats an
    ``ImportError`` as "not installed"; a ``None`` in ``sys.modules`` is Python's way of
    making that import fail at once, in this process only.
    """
    sys.modules.setdefault("debugpy", None)  # type: ignore[arg-type]


def launch(connection_file: str | None) -> int:
    """Run :class:`~iac_kernel.kernel.kernel.IacKernel` on ``connection_file`` until shutdown."""
    without_debugger()
    from ipykernel.kernelapp import IPKernelApp

    from iac_kernel.guard import hidden
    from iac_kernel.kernel.kernel import IacKernel

    argv = ["-f", connection_file] if connection_file else []
    app = IPKernelApp.instance(kernel_class=IacKernel)
    app.log.addFilter(LoopbackTcpFilter(app))
    app.initialize(argv)
    if app.abs_connection_file:  # its HMAC key steers the kernel: never in a bash call
        hidden.register(app.abs_connection_file)
    app.start()
    return 0
