"""Issue 33: a CA-bundle path (``SSL_CERT_FILE``, ``AWS_CA_BUNDLE``, ...) is not a
credential. It is never masked (a name with CERT in it masked the path everywhere, under
whichever variable held it first), and an exec question shows it under its own name on a
"Trust store" line, not as retargeting environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from iac_kernel.guard.policy import target
from iac_kernel.masking.trust_store import is_trust_store, public_path
from iac_kernel.redact import redact, secret_values
from iac_kernel.tools.tf_masking import mask_shown

CA = "/etc/ssl/certs/corp-ca-bundle.pem"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"


@pytest.mark.parametrize(
    "name",
    [
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "AWS_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
        "VAULT_CA_PATH",
        "VAULT_CACERT",
        "MY_TOOL_CA_BUNDLE",
        "NIX_SSL_CERT_FILE",
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    ],
)
def test_trust_store_paths_are_not_secrets(name: str):
    assert is_trust_store(name) and public_path(name, CA)
    env = {name: CA, "SSL_CERT_FILE": CA}
    assert CA not in secret_values(env)
    assert (
        redact(f"AWS_CA_BUNDLE={CA} terraform apply", env) == f"AWS_CA_BUNDLE={CA} terraform apply"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SSL_CERT_FILE", PEM),  # certificate text, not a path: masked as before
        ("TLS_CLIENT_CERT", "/home/u/client.pem"),  # a client certificate is no trust store
        ("CLIENT_CERT_KEY", "/home/u/client.key"),
        ("TLS_CERT_FILE", "/home/u/server.pem"),  # its own certificate, not what it trusts
        ("SSL_CERT_FILE", "s3cr3t\npath"),
    ],
)
def test_other_cert_values_stay_masked(name: str, value: str):
    assert not public_path(name, value)
    assert value in secret_values({name: value})
    assert value not in redact(f"x {value} y", {name: value})


def test_the_question_shows_trust_stores_under_their_own_name(tmp_path: Path, monkeypatch):
    env = {
        "TF_WORKSPACE": "prod",
        "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": CA,
        "SSL_CERT_FILE": CA,
        "AWS_CA_BUNDLE": PEM,
        "PATH": "/bin",
    }
    assert target.retargeting_env(env) == {"TF_WORKSPACE": "prod"}
    argv = ["terraform", "apply"]
    lines = target.describe("terraform", argv, str(tmp_path), env)
    assert lines[0] == "Environment: TF_WORKSPACE=prod"
    assert lines[1] == (
        "Trust store set by the command: AWS_CA_BUNDLE=(certificate text), "
        f"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE={CA}, SSL_CERT_FILE={CA}"
    )
    # Against the inherited environment: only what the command set or changed.
    base = {"SSL_CERT_FILE": CA, "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": "/etc/other.pem"}
    lines = target.describe("terraform", argv, str(tmp_path), env, base)
    assert lines[1] == (
        "Trust store set by the command: AWS_CA_BUNDLE=(certificate text), "
        f"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE={CA}"
    )
    assert len(target.describe("terraform", argv, str(tmp_path), env, env)) == 2
    # What the notebook and ACP show: masked with the kernel's own environment, where the
    # same path is SSL_CERT_FILE's value. It stays a path, under its own name.
    monkeypatch.setenv("SSL_CERT_FILE", CA)
    shown = mask_shown("\n".join(lines), tmp_path)
    assert f"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE={CA}" in shown and "REDACTED" not in shown
