"""The Agent Client Protocol front end: the official SDK's connection, our agent core.

``serve(reader, writer, manager)`` speaks ACP over any byte stream pair (stdio for
editors, a unix socket for the kernel's endpoint); ``run_stdio()`` is ``iac-kernel acp``.
"""

from iac_kernel.acp.server import serve

__all__ = ["serve"]
