"""The Agent Client Protocol front end: our JSON-RPC connection, the SDK's models, our
agent core.

:func:`iac_kernel.acp.serve.server.serve` speaks ACP over any byte stream pair (stdio
for editors, a unix socket for the kernel's endpoint, the Jupyter server's WebSocket);
:func:`iac_kernel.acp.serve.stdio.run_stdio` is ``iac-kernel acp``. Importing this
package loads nothing else.
"""
