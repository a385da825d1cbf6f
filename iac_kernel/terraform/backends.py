"""The secret settings of every state backend Terraform and OpenTofu ship.

Checked against :data:`CHECKED_AGAINST`. A backend's settings live in a ``backend``
block, in ``-backend-config`` files and ``KEY=VALUE`` words (``*.tfbackend``), and in
the copy ``terraform init`` keeps in ``.terraform/terraform.tfstate``
(``backend.config``). Each name here is a setting whose value is a credential, a key, or
holds one (``pg``'s ``conn_str``, ``consul``'s ``http_auth`` ``user:password``,
``gcs``'s ``credentials`` path or JSON); nested blocks (``assume_role_with_web_identity``,
``exec``) are matched by the name of the setting inside them. Backends removed in
Terraform 1.3 / never in OpenTofu (``artifactory``, ``etcd``, ``etcdv3``, ``manta``,
``swift``) are kept: an old ``.terraform`` folder still names them.
"""

from __future__ import annotations

import re
from typing import Any

CHECKED_AGAINST = (
    "developer.hashicorp.com/terraform/language/backend (Terraform v1.11) and "
    "opentofu.org/docs/language/settings/backends (OpenTofu v1.9)"
)

SECRET_SETTINGS: dict[str, frozenset[str]] = {
    "local": frozenset(),
    "s3": frozenset(
        {
            "access_key",
            "secret_key",
            "token",
            "sse_customer_key",
            "web_identity_token",  # assume_role_with_web_identity { web_identity_token }
            "external_id",  # assume_role { external_id }: a shared secret with the account
        }
    ),
    "azurerm": frozenset(
        {
            "access_key",
            "sas_token",
            "client_secret",
            "client_certificate",  # the certificate itself, base64 (client_certificate_path)
            "client_certificate_password",
            "oidc_token",
            "oidc_request_token",
        }
    ),
    "gcs": frozenset({"credentials", "access_token", "encryption_key"}),
    "http": frozenset({"password", "client_private_key_pem"}),
    "consul": frozenset({"access_token", "http_auth", "key_file"}),
    "cos": frozenset({"secret_id", "secret_key", "security_token"}),
    "kubernetes": frozenset({"token", "client_key", "password", "env"}),  # exec { env }
    "oss": frozenset({"access_key", "secret_key", "security_token"}),
    "pg": frozenset({"conn_str"}),
    "remote": frozenset({"token"}),
    "cloud": frozenset({"token"}),
    # removed backends
    "artifactory": frozenset({"password"}),
    "etcd": frozenset({"password"}),
    "etcdv3": frozenset({"password", "key_file"}),
    "manta": frozenset({"key_material"}),
    "swift": frozenset({"password", "token", "application_credential_secret"}),
}

#: Every secret setting of every backend (for a ``*.tfbackend`` file, which names none).
ALL_SECRET_SETTINGS: frozenset[str] = frozenset().union(*SECRET_SETTINGS.values())
#: A backend we do not know (a fork's, a newer one): its secret-named settings.
_SECRET_NAME = re.compile(r"key|secret|token|password|passw|credential|sas|conn_str|auth")


def is_secret_setting(name: str, backend: str | None = None) -> bool:
    """Whether ``name`` is a secret setting of ``backend`` (of any backend when None)."""
    known = SECRET_SETTINGS.get(backend) if backend else None
    if known is not None:
        return name in known
    return name in ALL_SECRET_SETTINGS or bool(_SECRET_NAME.search(name.lower()))


def secret_values(config: Any, backend: str | None = None) -> list[str]:
    """The values of ``config``'s secret settings (nested blocks included)."""
    found: list[str] = []
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack += item
        elif isinstance(item, dict):
            for key, value in item.items():
                if is_secret_setting(str(key), backend):
                    found += _scalars(value)
                elif isinstance(value, dict | list):
                    stack.append(value)
    return found


def _scalars(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return [str(value)]
    return []
