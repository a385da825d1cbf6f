"""Issue 32 item 1: OpenTofu's state encryption key providers' secrets (a ``terraform {
encryption {} }`` block, ``TF_ENCRYPTION``) and backend secrets given on a command line
(``-backend-config KEY=VALUE``) are known secrets. Expected settings written from
``internal/encryption/keyprovider/*/config.go`` (see ``backends.CHECKED_AGAINST``).
Controls: key names, regions, key lengths and references stay readable; a
``-backend-config`` file name or plain setting is no secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iac_kernel.guard.approval.reviews import ExecInfo
from iac_kernel.terraform import config_scan, tffiles
from iac_kernel.terraform.workspace import sensitive_values
from iac_kernel.tools import tf_guard


def assert_masked(out: bytes | None, secrets: list[str], plains: list[str]) -> None:
    assert out is not None
    text = out.decode()
    assert [s for s in secrets if s in text] == []
    assert [p for p in plains if p not in text] == []


ENCRYPTION = """
terraform {
  encryption {
    key_provider "pbkdf2" "pass" {
      passphrase = "pbkdf2-passphrase-long-1"
      key_length = 32
    }
    key_provider "static" "st" {
      key = "6f6f6f6f6f6f6f6f-static"
    }
    key_provider "aws_kms" "kms" {
      kms_key_id = "alias/plain-kms-key"
      key_spec   = "AES_256"
      region     = "eu-west-1"
      access_key = "AKIAKMSACCESS1"
      secret_key = "kms-secret-key-2"
      assume_role = { role_arn = "arn:plain-role", external_id = "kms-external-3" }
    }
    key_provider "gcp_kms" "g" {
      kms_encryption_key = "projects/p/keys/plain-gcp"
      credentials        = "gcp-credentials-json-4"
      key_length         = 32
    }
    key_provider "azure_vault" "az" {
      vault_uri     = "https://plain-vault.example"
      client_secret = "azure-vault-secret-5"
    }
    key_provider "openbao" "bao" {
      address  = "https://plain-bao.example"
      key_name = "plain-bao-key"
      token    = "s.openbao-token-6"
    }
    key_provider "newkms" "future" {
      endpoint  = "https://plain-new.example"
      api_token = "newkms-token-7"
    }
    method "aes_gcm" "m" {
      keys = key_provider.pbkdf2.pass
    }
    state {
      method = method.aes_gcm.m
    }
  }
}
"""
ENC_SECRETS = ["pbkdf2-passphrase-long-1", "6f6f6f6f6f6f6f6f-static", "AKIAKMSACCESS1"]
ENC_SECRETS += ["kms-secret-key-2", "kms-external-3", "gcp-credentials-json-4"]
ENC_SECRETS += ["azure-vault-secret-5", "s.openbao-token-6", "newkms-token-7"]
ENC_PLAIN = ["alias/plain-kms-key", "eu-west-1", "arn:plain-role", "projects/p/keys/plain-gcp"]
ENC_PLAIN += ["https://plain-vault.example", "plain-bao-key", "key_provider.pbkdf2.pass"]


def test_opentofu_encryption_key_providers_are_masked(tmp_path: Path):
    assert_masked(tffiles.masked(ENCRYPTION.encode()), ENC_SECRETS, ENC_PLAIN)
    (tmp_path / "encryption.tf").write_text(ENCRYPTION)
    found, _, _ = config_scan.config_values([tmp_path / "encryption.tf"], [])
    assert found == set(ENC_SECRETS)


def test_tf_encryption_in_the_environment(monkeypatch: pytest.MonkeyPatch):
    body = ENCRYPTION.split("encryption {", 1)[1].rsplit("}", 2)[0]
    assert sorted(config_scan.encryption_env_values({"TF_ENCRYPTION": body})) == sorted(ENC_SECRETS)
    as_json = {"key_provider": {"pbkdf2": {"k": {"passphrase": "json-passphrase-8"}}}}
    as_json["method"] = {"aes_gcm": {"m": {"keys": "${key_provider.pbkdf2.k}"}}}
    env = {"TF_ENCRYPTION": json.dumps(as_json)}
    assert config_scan.encryption_env_values(env) == ["json-passphrase-8"]
    monkeypatch.setenv("TF_ENCRYPTION", json.dumps(as_json))
    found, _, _ = config_scan.config_values([], [])
    assert found == {"json-passphrase-8"}
    assert config_scan.encryption_env_values({"TF_ENCRYPTION": "not { hcl"}) == []


def test_backend_config_words_and_tf_encryption_at_exec_time(tmp_path: Path):
    words = ["init", "-backend-config=password=Cli-Pass-4411", "-backend-config", "bucket=b1"]
    words += ["-backend-config", "token=Cli-Tok-5522", "-backend-config=prod.tfbackend"]
    words += ["--backend-config=key=states/plain.tfstate"]
    env = {"TF_ENCRYPTION": 'key_provider "openbao" "b" {\n  token = "bao-exec-9911"\n}\n'}
    found = config_scan.exec_given_secrets(words, env)
    assert sorted(found) == ["Cli-Pass-4411", "Cli-Tok-5522", "bao-exec-9911"]
    assert config_scan.exec_given_secrets(["init", "-backend-config=bucket=b1"], {}) == []
    # the guard's observation of a real exec makes them known secrets in every workspace
    (tmp_path / "main.tf").write_text('terraform {\n  backend "http" {}\n}\n')
    info = ExecInfo(
        program="tofu",
        argv=["tofu", "init", "-backend-config=password=Exec-Pass-6633"],
        cwd=str(tmp_path),
        private_dir=tmp_path,
        sandbox_private_dir=str(tmp_path),
        env={"TF_CLI_ARGS_init": "-backend-config='client_private_key_pem=Exec-Pem-7744'"},
    )
    assert "Exec-Pass-6633" not in sensitive_values(tmp_path)
    tf_guard.observe_exec(info)
    known = sensitive_values(tmp_path)
    assert {"Exec-Pass-6633", "Exec-Pem-7744"} <= known
    assert str(tmp_path) not in known and "http" not in known
