"""With the credential broker active, no sandboxed process holds a real credential:
the shell sees none (as before), and the guarded programs the guard runs get
placeholders (variables and credential files) instead of the real values. The real
values, the placeholder table and the interception CA's key are readable nowhere in a
sandbox. Safe control: a real ``aws s3 ls`` runs unasked and works through the broker."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from egress_support import aws_user, egress_ready
from guard_support import Asker, Harness
from iac_kernel.agent.permissions import ALLOW_ONCE
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.guard.sandbox.bwrap import unusable_reason

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
GIT_PASSWORD = "gitPassw0rd-1a2b3c4d5e6f"
GH_TOKEN = "ghp_Zy9XwV8uT7sR6qP5oN4mL3kJ2iH1gF0eDcBa"


@pytest.fixture(scope="module")
def aws_keys() -> Iterator[dict[str, str]]:
    with aws_user() as keys:
        yield keys


@pytest.fixture
def brokered(outside_tmp: Path, aws_keys: dict, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """A home with real credential files and variables, the broker prepared from them
    and active: the agent's egress proxy runs with it."""
    home = outside_tmp / "home"
    egress_ready()  # the proxy's environment where it is, not under the test's HOME
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        "[default]\n"
        f"aws_access_key_id = {aws_keys['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {aws_keys['AWS_SECRET_ACCESS_KEY']}\n"
    )
    (home / ".git-credentials").write_text(f"https://bob:{GIT_PASSWORD}@git.example.com\n")
    monkeypatch.setenv("HOME", str(home))
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**aws_keys, "GITHUB_TOKEN": GH_TOKEN}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    made = broker.prepare(os.environ, home=home, folder=home / ".iac-code" / "egress")
    broker.activate(made)  # the agent's egress proxy restarts with it
    try:
        yield {
            "home": home,
            "made": made,
            "endpoint": urlsplit(aws_keys["AWS_ENDPOINT_URL"]).netloc,
            "reals": [
                aws_keys["AWS_ACCESS_KEY_ID"],
                aws_keys["AWS_SECRET_ACCESS_KEY"],
                GH_TOKEN,
            ],
        }
    finally:
        broker.activate(None)


def _harness(root: Path, endpoint: str, dump: str = "") -> Harness:
    """Real awscli (the test environment's) guarded; a fake ``terraform`` that prints
    what a guarded program can read (it runs with what the guard gives it)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (root / "log").mkdir()
    (root / "log" / "calls").touch()
    terraform = bin_dir / "terraform"
    terraform.write_text(f"#!/bin/sh\n{dump}\n")
    terraform.chmod(terraform.stat().st_mode | stat.S_IEXEC)
    harness = Harness(root / "ws", bin_dir, root / "log" / "calls", mode="bypass")
    harness.settings.egress_allow_private = endpoint  # moto, on loopback
    return harness


READS = (
    "cat /proc/self/environ | tr '\\0' '\\n'; env; "
    "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sort -u; "
    "cat $HOME/.aws/credentials $HOME/.aws/config $HOME/.git-credentials; "
    "ls -la $HOME/.iac-code $HOME/.iac-code/egress $HOME/.iac-code/egress/mitmproxy; "
    "cat $HOME/.iac-code/egress/agents/*/broker.json $HOME/.iac-code/egress/placeholder.key "
    "$HOME/.iac-code/egress/mitmproxy/mitmproxy-ca.pem; true"
)


async def test_no_sandboxed_process_reads_a_real_credential(brokered: dict, outside_tmp: Path):
    # The shell and the guarded program write what they read to files the test reads
    # itself: tool output masks credential shapes, placeholders included.
    dump = outside_tmp / "h1" / "ws" / "guarded.txt"
    harness = _harness(outside_tmp / "h1", brokered["endpoint"], f"({READS}) > {dump} 2>&1")
    ask = Asker()
    shell_dump = dump.with_name("shell.txt")
    result = await harness.run(f"({READS}) > {shell_dump} 2>&1; terraform version", ask)
    assert result is not None and not ask.exec_questions()
    shell = shell_dump.read_text()
    guarded = dump.read_text()
    text = shell + guarded
    assert guarded.strip(), text
    for real in [*brokered["reals"], GIT_PASSWORD]:
        assert real not in text and real[::-1] not in text, real
    assert "PRIVATE KEY" not in text and '"real"' not in text
    ca_key = (brokered["made"].confdir / "mitmproxy-ca.pem").read_text().splitlines()
    assert not any(line in text for line in ca_key if len(line) > 40)
    swaps = brokered["made"].swaps
    # the guarded program got the placeholders, as variables and as files
    for real in [*brokered["reals"], GIT_PASSWORD]:
        assert swaps[real] in guarded, real
    assert f"bob:{swaps[GIT_PASSWORD]}@git.example.com" in guarded
    # the shell got none of them (nor the values): scripts have nothing to send
    assert not any(fake in shell for fake in swaps.values())


async def test_aws_s3_ls_works_unasked_through_the_broker(brokered: dict, outside_tmp: Path):
    harness = _harness(outside_tmp / "h2", brokered["endpoint"])
    harness.bin_dir = Path(sys.executable).parent  # the real awscli first on PATH
    ask = Asker(exec_answer=ALLOW_ONCE, danger_answer=ALLOW_ONCE)
    setup = await harness.run("aws s3 mb s3://sandboxed-bucket", ask)
    assert setup is not None and "make_bucket: sandboxed-bucket" in setup.content, setup
    ask = Asker()
    result = await harness.run("aws s3 ls", ask)
    assert result is not None and "sandboxed-bucket" in result.content, result.content
    who = await harness.run("aws sts get-caller-identity --output text", ask)
    assert who is not None and ":user/agent" in who.content, who
    assert not ask.exec_questions()
    assert not [r for r in ask.requests if "cloud_operation" in r.input]  # reads: unasked
