"""An authorizer for the remote-attach tests (loaded by a test's jupyter server): every
resource is allowed but iac-kernel's ACP endpoint, as an operator could configure."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.authorizer import Authorizer


class NoAgent(Authorizer):
    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return resource != "iac_kernel"
