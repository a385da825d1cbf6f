"""Start the kernel process (what the kernelspec's argv runs)."""

from __future__ import annotations


def launch(connection_file: str | None) -> int:
    """Run :class:`~iac_kernel.kernel.kernel.IacKernel` on ``connection_file`` until shutdown."""
    from ipykernel.kernelapp import IPKernelApp

    from iac_kernel.kernel.kernel import IacKernel

    argv = ["-f", connection_file] if connection_file else []
    app = IPKernelApp.instance(kernel_class=IacKernel)
    app.initialize(argv)
    app.start()
    return 0
