"""The Agent Client Protocol front end: the official SDK's connection, our agent core.

``serve(reader, writer, manager)`` speaks ACP over any byte stream pair (stdio for
editors, a unix socket for the kernel's endpoint); ``run_stdio()`` is ``iac-kernel acp``.
``serve`` is imported on first use: importing this package must not load the SDK.
"""

from typing import Any

__all__ = ["serve"]


def __getattr__(name: str) -> Any:
    if name == "serve":
        from iac_kernel.acp.server import serve

        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
