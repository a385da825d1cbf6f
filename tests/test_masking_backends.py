"""Issue 32 item 1: every backend terraform and OpenTofu ship, with all its secret
settings, in every place a backend's settings live.

The expected settings below are written from the backends' schemas (see
``backends.CHECKED_AGAINST``), not read from the table under test. Families: the
backend cache ``.terraform/terraform.tfstate`` (masked copy and workspace scan), a
``*.tfbackend`` file, a ``backend`` block in ``*.tf`` / ``*.tf.json``; an unknown
backend's secret-named settings; real terraform's cache of an ``http`` backend
(OpenTofu's ``encryption`` and command-line secrets: ``test_masking_encryption.py``).
Controls: each backend's ordinary settings (bucket, region, path, the state's ``key``,
paths to key files) stay readable.
"""

from __future__ import annotations

import http.server
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.terraform import backends, config_scan, tffiles
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401

S, P = "<secret>", "<plain>"  # placeholders filled with unique values

#: Per backend: its settings as terraform keeps them, secret ones marked S.
SPEC: dict[str, dict[str, Any]] = {
    "s3": {
        "bucket": P,
        "key": P,
        "region": P,
        "kms_key_id": P,
        "shared_credentials_file": P,
        "access_key": S,
        "secret_key": S,
        "token": S,
        "sse_customer_key": S,
        "assume_role": {"role_arn": P, "external_id": S, "session_name": P},
        "assume_role_with_web_identity": {
            "role_arn": P,
            "web_identity_token": S,
            "web_identity_token_file": P,
        },
    },
    "azurerm": {
        "storage_account_name": P,
        "container_name": P,
        "key": P,
        "client_id": P,
        "client_certificate_path": P,
        "oidc_request_url": P,
        "encryption_scope": P,
        "access_key": S,
        "sas_token": S,
        "client_secret": S,
        "client_certificate": S,
        "client_certificate_password": S,
        "oidc_token": S,
        "oidc_request_token": S,
        "customer_provided_key": S,  # OpenTofu
    },
    "gcs": {
        "bucket": P,
        "prefix": P,
        "kms_encryption_key": P,
        "impersonate_service_account": P,
        "credentials": S,
        "access_token": S,
        "encryption_key": S,
    },
    "http": {
        "address": P,
        "lock_address": P,
        "username": P,
        "client_certificate_pem": P,
        "password": S,
        "client_private_key_pem": S,
        "headers": {"Authorization": S, "X-Team": S},  # OpenTofu
    },
    "consul": {
        "address": P,
        "path": P,
        "datacenter": P,
        "key_file": P,
        "access_token": S,
        "http_auth": S,
    },
    "cos": {
        "bucket": P,
        "region": P,
        "key": P,
        "secret_id": S,
        "secret_key": S,
        "security_token": S,
        "assume_role": [{"role_arn": P, "session_name": P, "external_id": S}],
    },
    "kubernetes": {
        "secret_suffix": P,
        "namespace": P,
        "host": P,
        "username": P,
        "config_path": P,
        "client_certificate": P,  # the public certificate
        "token": S,
        "client_key": S,
        "password": S,
        "exec": [{"api_version": P, "command": P, "args": [P], "env": {"AUTH": S}}],
    },
    "oss": {
        "bucket": P,
        "key": P,
        "region": P,
        "shared_credentials_file": P,
        "access_key": S,
        "secret_key": S,
        "security_token": S,
        "assume_role": [{"role_arn": P, "session_name": P}],
    },
    "pg": {"schema_name": P, "table_name": P, "conn_str": S},
    "oci": {
        "bucket": P,
        "namespace": P,
        "key": P,
        "region": P,
        "fingerprint": P,
        "private_key_path": P,
        "sse_customer_key_sha256": P,
        "private_key": S,
        "private_key_password": S,
        "sse_customer_key": S,
    },
    "remote": {"hostname": P, "organization": P, "workspaces": {"name": P}, "token": S},
    "cloud": {"hostname": P, "organization": P, "workspaces": {"project": P}, "token": S},
    "local": {"path": P, "workspace_dir": P},
    "inmem": {"lock_id": P},
    # removed in Terraform v1.3
    "azure": {"storage_account_name": P, "key": P, "access_key": S, "client_secret": S},
    "artifactory": {"url": P, "repo": P, "subpath": P, "username": P, "password": S},
    "etcd": {"path": P, "endpoints": P, "username": P, "password": S},
    "etcdv3": {"prefix": P, "endpoints": [P], "key_path": P, "username": P, "password": S},
    "manta": {"account": P, "user": P, "key_id": P, "path": P, "key_material": S},
    "swift": {
        "container": P,
        "auth_url": P,
        "user_name": P,
        "region_name": P,
        "password": S,
        "token": S,
        "application_credential_secret": S,
        "key": S,  # a client private key
    },
}
TERRAFORM_SHIPS = {"local", "remote", "cloud", "azurerm", "consul", "cos", "gcs", "http"}
TERRAFORM_SHIPS |= {"inmem", "kubernetes", "oss", "pg", "s3", "oci"}
OPENTOFU_SHIPS = TERRAFORM_SHIPS - {"oci"}
REMOVED = {"artifactory", "azure", "etcd", "etcdv3", "manta", "swift"}
#: Names secret in some backend: a file naming no backend masks them all.
SOMEWHERE_SECRET = {
    name
    for spec in SPEC.values()
    for name, value in spec.items()
    if value == S or (isinstance(value, dict) and S in value.values())
}
_counter = itertools.count()


def fill(spec: Any, kind: str, secrets: list[str], plains: list[str], name: str = "") -> Any:
    """``spec`` with each placeholder replaced by a unique value, collected by kind."""
    if isinstance(spec, dict):
        return {k: fill(v, kind, secrets, plains, k) for k, v in spec.items()}
    if isinstance(spec, list):
        return [fill(v, kind, secrets, plains, name) for v in spec]
    if spec == S:
        secrets.append(f"Sv{next(_counter)}-{kind}-{name}-x9Q")
        return secrets[-1]
    plains.append(f"pv{next(_counter)}-{kind}-{name}")
    return plains[-1]


def hcl(value: Any, indent: str = "") -> str:
    """An HCL attribute body: a dict as an object, a list of dicts as blocks."""
    lines = []
    for key, item in value.items():
        if isinstance(item, list) and item and isinstance(item[0], dict):
            for block in item:
                lines += [f"{indent}{key} {{", hcl(block, indent + "  "), f"{indent}}}"]
        elif isinstance(item, dict):
            pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in item.items())
            lines.append(f"{indent}{key} = {{ {pairs} }}")
        else:
            lines.append(f"{indent}{key} = {json.dumps(item)}")
    return "\n".join(lines)


def cache(kind: str, config: dict[str, Any]) -> bytes:
    doc = {"version": 3, "terraform_version": "1.11.4"}
    doc["backend"] = {"type": kind, "config": config, "hash": 1}
    return json.dumps(doc, indent=2).encode()


def assert_masked(out: bytes | None, secrets: list[str], plains: list[str]) -> None:
    assert out is not None
    text = out.decode()
    assert [s for s in secrets if s in text] == []
    assert [p for p in plains if p not in text] == []


def test_every_backend_both_tools_ship_is_in_the_table():
    assert TERRAFORM_SHIPS | OPENTOFU_SHIPS | REMOVED <= set(backends.SECRET_SETTINGS)
    assert set(SPEC) == set(backends.SECRET_SETTINGS)


@pytest.mark.parametrize("kind", sorted(SPEC))
def test_the_backend_cache_masks_every_secret_setting(kind: str, tmp_path: Path):
    secrets: list[str] = []
    plains: list[str] = []
    data = cache(kind, fill(SPEC[kind], kind, secrets, plains))
    if not secrets:  # local, inmem: nothing to mask, the cache is shown whole
        assert tffiles.masked(data) is None
        return
    assert_masked(tffiles.masked(data), secrets, plains)
    (tmp_path / "terraform.tfstate").write_bytes(data)  # the workspace scan too
    _, found = config_scan.backend_cache(tmp_path / "terraform.tfstate")
    assert sorted(found) == sorted(secrets)


@pytest.mark.parametrize("kind", sorted(k for k in SPEC if k not in {"local", "inmem"}))
def test_a_backend_config_file_masks_every_secret_setting(kind: str):
    secrets: list[str] = []
    plains: list[str] = []
    config = fill(SPEC[kind], kind, secrets, plains)
    if kind == "swift":  # `key`: s3's state path when no backend is named
        secrets.remove(config["key"])
        plains.append(config["key"])
    plains = [p for p in plains if p.split("-")[-1] not in SOMEWHERE_SECRET]
    out = tffiles.masked(hcl(config).encode() + b"\n")
    assert_masked(out, secrets, plains)


@pytest.mark.parametrize("kind", sorted(k for k in SPEC if k not in {"local", "inmem"}))
def test_a_backend_block_in_the_configuration_is_masked(kind: str, tmp_path: Path):
    secrets: list[str] = []
    plains: list[str] = []
    config = fill(SPEC[kind], kind, secrets, plains)
    block = "cloud {" if kind == "cloud" else f'backend "{kind}" {{'
    text = f"terraform {{\n  {block}\n{hcl(config, '    ')}\n  }}\n}}\n"
    assert_masked(tffiles.masked(text.encode()), secrets, plains)
    (tmp_path / "main.tf").write_text(text)
    as_json = {"terraform": {"backend": {kind: config}}}
    (tmp_path / "backend.tf.json").write_text(json.dumps(as_json))
    assert_masked(tffiles.masked(json.dumps(as_json).encode()), secrets, plains)
    for name in ("main.tf", "backend.tf.json"):
        found, _, _ = config_scan.config_values([tmp_path / name], [])
        assert found == set(secrets), name


def test_nested_blocks_secrets_are_found():
    config = {
        "bucket": "state-bucket",
        "assume_role_with_web_identity": [{"web_identity_token": "eyJ-web-identity"}],
        "assume_role": {"role_arn": "arn:aws:iam::1:role/r", "external_id": "ext-shared-77"},
    }
    assert sorted(backends.secret_values(config, "s3")) == ["ext-shared-77", "eyJ-web-identity"]
    kube = {"exec": [{"command": "aws", "env": {"AWS_SECRET": "kube-exec-secret-1"}}]}
    assert backends.secret_values(kube, "kubernetes") == ["kube-exec-secret-1"]
    # a tfbackend file (no backend named) with an s3 assume_role object
    out = tffiles.masked(
        b'bucket = "state-bucket"\nassume_role = {\n  role_arn = "arn:r"\n'
        b'  external_id = "ext-shared-77"\n}\n'
    )
    assert out is not None and b"ext-shared-77" not in out and b"arn:r" in out


def test_a_url_settings_password_is_secret():
    config = {"address": "https://bob:Url-Pass-123@state.example/s", "username": "bob"}
    config["lock_address"] = "https://state.example/lock"
    assert_masked(tffiles.masked(cache("http", config)), ["Url-Pass-123"], ["state.example/s"])
    assert backends.secret_values({"proxy_url": "http://u:Px-9876@proxy:3128"}, "kubernetes") == [
        "Px-9876"
    ]


def test_an_unknown_backends_secret_named_settings_are_secret():
    config = {"path": "state/x", "bucket": "b1", "api_secret": "fork-secret-1"}
    config |= {"db_password": "fork-pass-2", "auth_token": "fork-tok-3"}
    data = cache("forkdb", config)
    assert_masked(tffiles.masked(data), ["fork-secret-1", "fork-pass-2", "fork-tok-3"], ["b1"])
    out = tffiles.masked(data.replace(b'"forkdb"', b"null"))  # no type at all
    assert_masked(out, ["fork-secret-1", "fork-pass-2", "fork-tok-3"], ["b1"])
    # a known backend's setting with a secret-looking name is not secret
    assert not backends.is_secret_setting("kms_key_id", "s3")
    assert not backends.is_secret_setting("sse_customer_key_sha256", "oci")
    assert not backends.is_secret_setting("key", "s3")
    assert backends.is_secret_setting("key", "swift")


@pytest.fixture
def state_server() -> Iterator[str]:
    """An HTTP state server that holds no state yet (GET: 404)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/state"
    finally:
        server.shutdown()
        server.server_close()


@needs_terraform
def test_real_terraform_http_backend_cache_is_masked(tmp_path: Path, state_server: str):
    (tmp_path / "main.tf").write_text('terraform {\n  backend "http" {}\n}\n')
    (tmp_path / "prod.tfbackend").write_text(
        f'address = "{state_server}"\nusername = "state-user"\npassword = "Http-Pass-9z8y"\n'
    )
    tf(tmp_path, "init", "-input=false", "-backend-config=prod.tfbackend")
    cache_file = tmp_path / ".terraform" / "terraform.tfstate"
    data = cache_file.read_bytes()
    assert b"Http-Pass-9z8y" in data
    assert_masked(tffiles.masked(data), ["Http-Pass-9z8y"], [state_server, "state-user"])
    assert_masked(
        tffiles.masked((tmp_path / "prod.tfbackend").read_bytes()),
        ["Http-Pass-9z8y"],
        [state_server, "state-user"],
    )
    assert config_scan.backend_cache(cache_file)[1] == ["Http-Pass-9z8y"]
