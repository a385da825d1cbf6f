"""The Jupyter Server extension: ACP over WebSocket at ``{base_url}iac-kernel/acp``.

Installing the package enables it (``etc/jupyter/jupyter_server_config.d/iac_kernel.json``);
jupyter_server finds :func:`_jupyter_server_extension_points` here and loads
:class:`~iac_kernel.server.app.IacKernelServer`. Nothing is imported from jupyter_server
until then, so the package works without it.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from iac_kernel.server.app import IacKernelServer

    return [{"module": "iac_kernel.server.app", "app": IacKernelServer}]
