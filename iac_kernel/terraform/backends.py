"""The secret settings of every state backend Terraform and OpenTofu ship, and of
OpenTofu's state encryption key providers.

Read from the backends' schemas (:data:`CHECKED_AGAINST`). A backend's settings live in a
``backend`` block, in ``-backend-config`` files and ``KEY=VALUE`` words (``*.tfbackend``),
and in the copy ``terraform init`` keeps in ``.terraform/terraform.tfstate``
(``backend.config``). Each name here is a setting whose value is a credential or a key,
or may hold one inline (``pg``'s ``conn_str``, ``consul``'s ``http_auth``
``user:password``, ``gcs``'s ``credentials`` path or JSON, ``http``'s ``headers``); a
setting in a nested block (``assume_role``, ``assume_role_with_web_identity``,
``exec``) is matched by its own name. A setting that only names a file holding a secret
(``client_certificate_path``, ``shared_credentials_file``) is not a secret: masking a
path hides nothing. Backends removed in
Terraform 1.3 and never in OpenTofu (``artifactory``, ``etcd``, ``etcdv3``, ``manta``,
``swift``, the ``azure`` name) are kept: an old ``.terraform`` folder still names them.

OpenTofu's ``terraform { encryption { key_provider "TYPE" "NAME" { ... } } }`` (or the
same body in ``TF_ENCRYPTION``) holds passphrases, keys and cloud credentials:
:data:`KEY_PROVIDER_SECRETS` and :func:`encryption_values`.
"""

from __future__ import annotations

import re
from typing import Any

CHECKED_AGAINST: tuple[str, ...] = (
    "hashicorp/terraform main 883c7221ee2e (1.17.0-dev, 2026-08-21), v1.15.9 and v1.11.4: "
    "internal/backend/init/init.go, internal/backend/remote-state/*/backend.go, "
    "oci/constants.go, internal/backend/remote/backend.go, internal/cloud/backend.go",
    "hashicorp/terraform v1.2.9: remote-state/{artifactory,etcdv2,etcdv3,manta,swift}"
    "/backend.go (removed in v1.3)",
    "opentofu/opentofu main f831fa1aa4b9 (1.13.0-dev, 2026-08-22), v1.12.6 and v1.9.0: "
    "internal/backend/init/init.go, internal/backend/remote-state/*/backend.go, "
    "internal/encryption/keyprovider/*/config.go, internal/encryption/method/*/descriptor.go",
)

_AWS = frozenset(
    {
        "access_key",
        "secret_key",
        "token",  # the session token ("MFA token" in the schema's description)
        "external_id",  # assume_role { external_id } (top level before Terraform 1.6)
        "web_identity_token",  # assume_role_with_web_identity { web_identity_token }
    }
)
_AZURE = frozenset(
    {
        "access_key",
        "sas_token",
        "client_secret",
        "client_certificate",  # the PKCS#12 bundle itself, base64
        "client_certificate_password",
        "oidc_token",
        "oidc_request_token",
    }
)
_GOOGLE = frozenset({"credentials", "access_token"})  # credentials: a path or the JSON

SECRET_SETTINGS: dict[str, frozenset[str]] = {
    "local": frozenset(),
    "inmem": frozenset(),  # lock_id only (tests)
    "s3": _AWS | {"sse_customer_key"},
    # customer_provided_key: OpenTofu v1.12 (azure/backend.go, Sensitive)
    "azurerm": _AZURE | {"customer_provided_key"},
    "gcs": _GOOGLE | {"encryption_key"},  # kms_encryption_key: a key's name, not a key
    # headers: OpenTofu v1.7 (an Authorization header); username: not a secret
    "http": frozenset({"password", "client_private_key_pem", "headers"}),
    "consul": frozenset({"access_token", "http_auth"}),
    # secret_id: the key's id, as s3's access_key; assume_role { external_id }
    "cos": frozenset({"secret_id", "secret_key", "security_token", "external_id"}),
    # exec { env }: the credential plugin's environment
    "kubernetes": frozenset({"token", "client_key", "password", "env"}),
    "oss": frozenset({"access_key", "secret_key", "security_token"}),
    "pg": frozenset({"conn_str"}),
    # oci: Terraform v1.12 (oci/backend.go: private_key, private_key_password and
    # sse_customer_key are Sensitive; sse_customer_key_sha256 is a digest)
    "oci": frozenset({"private_key", "private_key_password", "sse_customer_key"}),
    "remote": frozenset({"token"}),
    "cloud": frozenset({"token"}),
    # removed in Terraform v1.3 (read from v1.2.9)
    "azure": _AZURE,  # the old name of azurerm
    "artifactory": frozenset({"password"}),
    "etcd": frozenset({"password"}),
    "etcdv3": frozenset({"password"}),  # key_path: a file
    "manta": frozenset({"key_material"}),
    # key: "a client private key" (content or path), not a state path as in s3
    "swift": frozenset({"password", "token", "application_credential_secret", "key"}),
}

#: OpenTofu's encryption key providers (v1.7; external and the external method v1.10,
#: azure_vault v1.11). ``chain`` (pbkdf2), ``a``/``b`` (xor) and a method's ``keys``
#: are references to another key provider's output.
KEY_PROVIDER_SECRETS: dict[str, frozenset[str]] = {
    "pbkdf2": frozenset({"passphrase"}),
    "static": frozenset({"key"}),
    "aws_kms": _AWS,
    "gcp_kms": _GOOGLE,
    "azure_vault": _AZURE,
    "openbao": frozenset({"token"}),
    "external": frozenset(),
    "xor": frozenset(),
}
#: A method's secret settings: aes_gcm's ``keys`` when given inline, not as a reference.
METHOD_SECRETS: dict[str, frozenset[str]] = {
    "aes_gcm": frozenset({"keys"}),
    "external": frozenset({"keys"}),
    "unencrypted": frozenset(),
}

#: Names that are a secret in one backend and an ordinary setting in others (``key``:
#: swift's private key, s3's state path); not secret when no backend is named.
_AMBIGUOUS = frozenset({"key"})
#: Every secret setting of every backend (for a ``*.tfbackend`` file, which names none).
ALL_SECRET_SETTINGS: frozenset[str] = frozenset().union(*SECRET_SETTINGS.values()) - _AMBIGUOUS
#: A backend we do not know (a fork's, a newer one): its secret-named settings.
_SECRET_NAME = re.compile(
    r"key|secret|token|password|passw|passphrase|credential|sas|conn_str|auth|headers"
)
#: Blocks nested in a backend's settings (s3, cos, kubernetes, OpenTofu's s3 ``endpoints``).
_NESTED = frozenset({"assume_role", "assume_role_with_web_identity", "exec", "endpoints"})
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:([^\s/@]+)@")
#: A value that is only a reference (``${var.key}``, ``${key_provider.pbkdf2.k}``).
_REFERENCE = re.compile(r"^\$\{[^{}]*\}$")


def is_secret_setting(name: str, backend: str | None = None) -> bool:
    """Whether ``name`` is a secret setting of ``backend``: of any backend we know when
    None; any secret-named setting too when ``backend`` is one we do not know (or "")."""
    if backend is None:
        return name in ALL_SECRET_SETTINGS
    known = SECRET_SETTINGS.get(backend)
    if known is not None:
        return name in known
    return name in ALL_SECRET_SETTINGS or bool(_SECRET_NAME.search(name.lower()))


def secret_values(config: Any, backend: str | None = None) -> list[str]:
    """The values of ``config``'s secret settings (nested blocks included), and the
    password of any URL setting that carries one (``address = "https://u:pw@host"``);
    ``backend`` None: the settings secret in any backend (a ``*.tfbackend`` file)."""
    found = _walk(config, lambda name: is_secret_setting(name, backend))
    return found + [m for s in _scalars(config) for m in _URL_PASSWORD.findall(s)]


def backend_config_values(doc: Any) -> list[str]:
    """The secret values a ``-backend-config`` file (``*.tfbackend``) sets: its top-level
    settings secret in any backend, and those of the nested blocks a backend has."""
    if not isinstance(doc, dict):
        return []
    wanted = ALL_SECRET_SETTINGS | _NESTED
    return secret_values({k: v for k, v in doc.items() if k in wanted})


def terraform_block_values(doc: Any) -> list[str]:
    """The secret values a configuration file's ``terraform`` blocks give (python-hcl2's
    shape or JSON syntax): ``backend`` and ``cloud`` settings, and ``encryption``."""
    found: list[str] = []
    for block in bodies(doc.get("terraform") if isinstance(doc, dict) else None):
        for backends in bodies(block.get("backend")):
            for kind, body in backends.items():
                found += secret_values(body, kind)
        for cloud in bodies(block.get("cloud")):
            found += secret_values(cloud, "cloud")
        for encryption in bodies(block.get("encryption")):
            found += encryption_values(encryption)
    return found


def encryption_values(config: Any) -> list[str]:
    """The secret values of an ``encryption`` block's body (or ``TF_ENCRYPTION``'s):
    its key providers' and methods' secret settings; a provider type we do not know
    gives its secret-named settings."""
    found: list[str] = []
    if not isinstance(config, dict):
        return found
    for field, table in (("key_provider", KEY_PROVIDER_SECRETS), ("method", METHOD_SECRETS)):
        for by_type in bodies(config.get(field)):
            for kind, named in by_type.items():
                known = table.get(kind)
                for body in bodies(named):
                    for instance in body.values():
                        found += _walk(instance, lambda n, k=known: _secret_in(n, k))
    return found


def _secret_in(name: str, known: frozenset[str] | None) -> bool:
    if known is not None:
        return name in known
    return bool(_SECRET_NAME.search(name.lower()))


def bodies(value: Any) -> list[dict[str, Any]]:
    """A block's bodies: python-hcl2 gives a list of dicts, JSON syntax one dict (the
    ``variable`` / ``terraform`` / ``backend`` blocks of a configuration too)."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return []


def _walk(config: Any, secret: Any) -> list[str]:
    found: list[str] = []
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack += item
        elif isinstance(item, dict):
            for key, value in item.items():
                if secret(str(key)):
                    found += [s for s in _scalars(value) if not _REFERENCE.match(s)]
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
