"""Entry points: :func:`~iac_kernel.acp.serve.server.serve` over any byte stream pair,
``iac-kernel acp`` on stdio, and the kernel's unix-socket endpoint."""
