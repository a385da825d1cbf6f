"""The credential broker, agent side: placeholders of the right shape, which credentials
are found and the hosts they belong to, the private table and the placeholder files."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from iac_kernel.egress import broker, credentials, formats
from iac_kernel.egress.addon_table import placeholder_for

KEY = b"k" * 32
REAL_ID = "AKIAZ7QRSTUVWXY23456"
REAL_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE"
REAL_TOKEN = "FwoGZXIvYXdzEBYaDHqa0AP1/+Example/Session+Token=="
TF_TOKEN = "ab12CD34ef56GH.atlasv1.zyXWvu98TSrq76PONmlk54JIhgfe32DCba10"
GH_TOKEN = "ghp_Ab3dEf6hIj9lMn2pQr5tUv8xYz1Bc4De7Fg0"


def test_placeholders_keep_the_shape_of_the_real_value():
    fake_id = placeholder_for(REAL_ID, KEY, "aws_access_key_id")
    assert re.fullmatch(r"AKIA[A-Z0-9]{16}", fake_id) and fake_id != REAL_ID
    fake_secret = placeholder_for(REAL_SECRET, KEY, "aws_secret_access_key")
    assert len(fake_secret) == 40 and fake_secret != REAL_SECRET
    assert [c for c in fake_secret if not c.isalnum()] == ["/", "/"]
    fake_gh = placeholder_for(GH_TOKEN, KEY)
    assert fake_gh.startswith("ghp_") and len(fake_gh) == len(GH_TOKEN) and fake_gh != GH_TOKEN
    fake_tf = placeholder_for(TF_TOKEN, KEY)
    assert ".atlasv1." in fake_tf and len(fake_tf) == len(TF_TOKEN)
    # stable for one install, unrelated across installs; a short password gets a long one
    assert placeholder_for(GH_TOKEN, KEY) == fake_gh
    assert placeholder_for(GH_TOKEN, b"other" * 8) != fake_gh
    short = placeholder_for("pw", KEY)
    assert len(short) >= 20 and "pw" not in short


def test_credentials_and_their_hosts():
    assert credentials.terraform_token_host("TF_TOKEN_app_terraform_io") == "app.terraform.io"
    assert credentials.terraform_token_host("TF_TOKEN_my__tfe_example_com") == "my-tfe.example.com"
    env = {
        "AWS_ACCESS_KEY_ID": REAL_ID,
        "AWS_SECRET_ACCESS_KEY": REAL_SECRET,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "AWS_ENDPOINT_URL_S3": "https://s3.local.test",
        "TF_TOKEN_app_terraform_io": TF_TOKEN,
        "GITHUB_TOKEN": GH_TOKEN,
        "UNBOUND_API_TOKEN": "x" * 30,
    }
    hosts = [*credentials.AWS_HOSTS, *credentials.endpoint_hosts(env)]
    found = {c.name: c for c in credentials.from_env(env, hosts)}
    assert set(found) == {"AWS_ACCESS_KEY_ID", "TF_TOKEN_app_terraform_io", "GITHUB_TOKEN"}
    assert {"127.0.0.1:4566", "s3.local.test:443", "*.amazonaws.com"} <= set(
        found["AWS_ACCESS_KEY_ID"].hosts
    )
    assert found["TF_TOKEN_app_terraform_io"].hosts == ["app.terraform.io"]
    netrc = formats.netrc(
        "machine git.example.com login u password s3cr3t-pass\ndefault login x password y"
    ).found
    # the default entry (a password for every host) is a placeholder never swapped
    assert [(c.hosts, c.values) for c in netrc] == [
        (["git.example.com"], {"token": "s3cr3t-pass"}),
        ([], {"token": "y"}),
    ]
    git = formats.git_credentials("https://bob:p%40ss-word-123@git.example.com:8443\n").found
    assert [(c.hosts, c.values) for c in git] == [
        (["git.example.com:8443"], {"token": "p@ss-word-123"})
    ]


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".aws" / "cli" / "cache").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = {REAL_ID}\naws_secret_access_key = {REAL_SECRET}\n"
        f"aws_session_token = {REAL_TOKEN}\n"
    )
    (home / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    (home / ".aws" / "cli" / "cache" / "x.json").write_text('{"SecretAccessKey": "cached-secret"}')
    (home / ".git-credentials").write_text("https://bob:gitpass-0123456789@git.example.com\n")
    (home / ".netrc").write_text("machine api.example.com login u password netrcpass-987654\n")
    (home / ".terraform.d").mkdir()
    (home / ".terraform.d" / "credentials.tfrc.json").write_text(
        json.dumps({"credentials": {"app.terraform.io": {"token": TF_TOKEN}}})
    )
    return home


def test_prepare_writes_a_private_table_and_placeholder_files(tmp_path: Path):
    home = _home(tmp_path)
    folder = tmp_path / "private"
    env = {"GITHUB_TOKEN": GH_TOKEN, "DATABASE_URL": "postgres://u:dbpass@h/db"}
    made = broker.prepare(env, home=home, folder=folder)
    reals = [REAL_ID, REAL_SECRET, REAL_TOKEN, TF_TOKEN, GH_TOKEN, "gitpass-0123456789"]
    reals.append("netrcpass-987654")
    assert set(reals) == set(made.swaps)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(made.table.stat().st_mode) == 0o600
    table = json.loads(made.table.read_text())["credentials"]
    names = {e["name"] for e in table}
    assert names >= {"aws profile default", "GITHUB_TOKEN", "netrc api.example.com"}
    # every placeholder file: the real values replaced, nothing else of the folder copied
    assert set(made.mounts) == {
        home / ".aws",
        home / ".git-credentials",
        home / ".netrc",
        home / ".terraform.d" / "credentials.tfrc.json",
    }
    texts = "".join(p.read_text() for p in made.mounts.values() if p.is_file())
    texts += "".join(p.read_text() for p in made.mounts[home / ".aws"].rglob("*") if p.is_file())
    assert not any(real in texts for real in reals) and "cached-secret" not in texts
    assert all(made.swaps[real] in texts for real in reals if real != GH_TOKEN)
    assert "region = eu-west-1" in texts and "bob:" in texts
    # variables: brokered ones get placeholders, the others are told apart
    shown, other = made.env(env)
    assert shown == {"GITHUB_TOKEN": made.swaps[GH_TOKEN]}
    assert other == {"DATABASE_URL": "postgres://u:dbpass@h/db"}
    # again: the same placeholders (files mounted earlier stay valid)
    assert broker.prepare(env, home=home, folder=folder).swaps == made.swaps


def test_the_table_and_the_ca_key_live_in_the_private_folder(tmp_path: Path):
    made = broker.prepare({}, home=tmp_path, folder=tmp_path / "p")
    assert made.table.parent == tmp_path / "p" / broker.AGENTS / str(os.getpid())
    assert made.confdir == tmp_path / "p" / "mitmproxy"  # mitmproxy's CA key goes there
    assert all(Path(broker.__file__).with_name(name).is_file() for name in broker.ADDONS)
