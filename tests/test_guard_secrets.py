"""Issue 22, points 1 and 2: a bash call's shell sees neither the agent's control plane
(runtime folder, session store, MCP trust file, ~/.iac-code, Jupyter's runtime folder)
nor the user's credentials (stores by path, secret-bearing variables by name and shape);
the guarded programs the guard runs get the real files and environment back."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.guard.sandbox import hidden
from iac_kernel.guard.sandbox.bwrap import unusable_reason

sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
STORES = {
    ".aws/credentials": f"[default]\naws_secret_access_key = {SECRET}\n",
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-ssh\n",
    ".kube/config": "users:\n- user:\n    token: secret-kube-token\n",
    ".config/gcloud/application_default_credentials.json": '{"client_secret": "secret-gc"}',
    ".azure/msal_token_cache.json": "secret-azure",
    ".terraform.d/credentials.tfrc.json": '{"credentials": {"app": {"token": "secret-tfc"}}}',
    ".docker/config.json": '{"auths": {"r": {"auth": "secret-docker"}}}',
    ".netrc": "machine h login u password secret-netrc\n",
    ".git-credentials": "https://u:secret-gitcred@github.com\n",
    ".pgpass": "h:5432:db:u:secret-pgpass\n",
    ".config/gh/hosts.yml": "github.com:\n  oauth_token: secret-gh\n",
    "extra/vault.txt": "secret-extra",
}
SECRET_ENV = {
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "MYSQL_PWD": "secret-mysql",
    "DATABASE_URL": "postgres://app:secret-dsn@db:5432/app",
    "SOME_SERVICE_OPTIONS": "host=db password=secret-shape",
    "UNRELATED_NAME": "Zx9Qm2Lp7Rt4Vb8Nc3Kd6Hf1Gj5Ws0Ya",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "DB_PASS": "secret-dbpass",
    "REDIS_URL": "redis://:secret-redis@cache:6379/0",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/secret-hook",
}
PLAIN_ENV = {"AWS_REGION": "eu-west-1", "MY_SETTING": "hello world", "AWS_PROFILE": "dev"}


@pytest.fixture
def home(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = outside_tmp / "home"
    for rel, text in STORES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    run = home / ".iac-code" / "run"
    run.mkdir(parents=True)
    (run / "kernel-1.json").write_text('{"token": "secret-endpoint"}')
    jupyter = home / ".local/share/jupyter/runtime"
    jupyter.mkdir(parents=True)
    (jupyter / "kernel-x.json").write_text('{"key": "secret-jupyter"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    for name, value in {**SECRET_ENV, **PLAIN_ENV}.items():
        monkeypatch.setenv(name, value)
    return home


def _harness(tmp_path: Path, home: Path) -> Harness:
    root = tmp_path / "h"
    root.mkdir()
    bin_dir, log = make_fakes(root)
    # The fake aws prints what it can read: the guard runs it with the real files and env.
    aws = bin_dir / "aws"
    aws.write_text(
        "#!/bin/sh\n"
        f"cat {home}/.aws/credentials {home}/.ssh/id_rsa >> {log} 2>&1\n"
        f'echo "env:$AWS_SECRET_ACCESS_KEY:$MYSQL_PWD:$DATABASE_URL" >> {log}\n'
    )
    aws.chmod(aws.stat().st_mode | stat.S_IEXEC)
    harness = Harness(root / "ws", bin_dir, log, mode="bypass")
    harness.settings.sandbox_hidden_paths = str(home / "extra")
    return harness


def test_secret_variables_by_name_and_shape():
    for name, value in SECRET_ENV.items():
        assert hidden.is_secret(name, value), name
    for name, value in {**PLAIN_ENV, "PATH": "/usr/bin:/bin", "PWD": "/x"}.items():
        assert not hidden.is_secret(name, value), name
    assert not hidden.is_secret("VERSION", "1.2.3")
    assert not hidden.is_secret("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")


@sandboxed
async def test_the_shell_sees_no_credentials_nor_control_plane(tmp_path: Path, home: Path):
    harness = _harness(tmp_path, home)
    reads = " ".join(f"{home}/{rel}" for rel in STORES)
    command = (
        f"cat {reads} {home}/.iac-code/run/kernel-1.json "
        f"{home}/.local/share/jupyter/runtime/kernel-x.json 2>&1; "
        f"ls -a {home}/.iac-code {home}/.aws {os.environ['IAC_KERNEL_SESSIONS_DIR']}; "
        "env; printenv AWS_SECRET_ACCESS_KEY | rev; printenv AWS_SECRET_ACCESS_KEY | base64 -w0"
    )
    result = await harness.run(command, Asker())
    assert result is not None
    text = result.content
    import re

    assert not re.findall(r"secret-[a-z]+", text), text
    assert SECRET[:10] not in text and SECRET[::-1][:10] not in text
    assert "AKIA" not in text and "ghp_" not in text and "Zx9Qm" not in text
    assert "AWS_REGION=eu-west-1" in text and "MY_SETTING=hello world" in text


@sandboxed
async def test_guarded_programs_get_the_real_files_and_environment(tmp_path: Path, home: Path):
    """What the broker cannot put back (an ssh key, a database password) reaches the
    guarded program as itself; AWS keys, which the proxy re-signs with, as placeholders
    of the same shape, in the variables and in ``~/.aws`` alike."""
    harness = _harness(tmp_path, home)
    ask = Asker()
    result = await harness.run("aws s3 ls", ask)
    assert result is not None and not ask.exec_questions()
    log = harness.log.read_text()
    assert "secret-ssh" in log
    assert ":secret-mysql:postgres://app:secret-dsn@db:5432/app" in log
    assert SECRET not in log
    seen = re.findall(r"aws_secret_access_key = (\S+)", log) + re.findall(r"env:([^:]+):", log)
    assert len(seen) == 2 and all(len(value) == len(SECRET) for value in seen)


@sandboxed
async def test_a_key_exported_after_the_first_call_is_brokered_too(tmp_path: Path, home: Path):
    harness = _harness(tmp_path, home)
    (home / ".aws" / "credentials").unlink()
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"):
        os.environ.pop(name)
    await harness.run("aws s3 ls", Asker())
    assert "env::secret-mysql" in harness.log.read_text()  # no AWS key yet
    os.environ.update(AWS_SECRET_ACCESS_KEY=SECRET, AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE")
    await harness.run("aws s3 ls", Asker())
    last = harness.log.read_text().splitlines()[-1]
    assert last.startswith("env:") and SECRET not in last
    assert len(last.split(":")[1]) == len(SECRET)


@sandboxed
async def test_no_network_setting(tmp_path: Path, home: Path):
    harness = _harness(tmp_path, home)
    harness.settings.sandbox_network = "none"
    result = await harness.run("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | xargs", Asker())
    assert result is not None and result.content.strip() == "lo"


@sandboxed
async def test_other_calls_guard_folders_are_hidden(tmp_path: Path, home: Path):
    from iac_kernel.guard.sandbox.bwrap import state_dir

    other = state_dir() / "tmp-another-call"
    other.mkdir(exist_ok=True)
    (other / "note").write_text("secret-othercall")
    try:
        harness = _harness(tmp_path, home)
        result = await harness.run(f"cat {other}/note; ls {state_dir()}; aws s3 ls", Asker())
        assert result is not None and "secret-othercall" not in result.content
        assert "secret-ssh" in harness.log.read_text()  # guarded programs still run
    finally:
        (other / "note").unlink()
        other.rmdir()


def _real_git_harness(tmp_path: Path, home: Path) -> Harness:
    import shutil
    import subprocess

    assert shutil.which("git")
    root = tmp_path / "g"
    (root / "nofakes").mkdir(parents=True)
    (root / "log").mkdir()
    (root / "log" / "calls").touch()
    harness = Harness(root / "ws", root / "nofakes", root / "log" / "calls", mode="bypass")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True, env=env)
    subprocess.run(["git", "init", "-q", str(harness.cwd)], check=True, env=env)
    return harness


@sandboxed
async def test_git_runs_local_commands_without_credentials(tmp_path: Path, home: Path):
    """The repository's own configuration can make git run anything (core.fsmonitor):
    a local git command the guard runs sees no credential store and no secret variable."""
    harness = _real_git_harness(tmp_path, home)
    hook = "cat $HOME/.aws/credentials >&2; printenv AWS_SECRET_ACCESS_KEY >&2; false"
    command = f"git config core.fsmonitor '{hook}' && git status 2>&1; echo done"
    ask = Asker()
    result = await harness.run(command, ask)
    assert result is not None and "done" in result.content, result
    assert SECRET not in result.content and not ask.exec_questions()


@sandboxed
@pytest.mark.parametrize(
    "command",
    [
        "git -c core.sshCommand='cat $HOME/.ssh/id_rsa >&2' ls-remote ssh://h/x",
        "git config core.sshCommand 'cat $HOME/.ssh/id_rsa >&2' && git fetch ssh://h/x",
        "printf '#!/bin/sh\\ncat $HOME/.ssh/id_rsa >&2\\n' > .git/hooks/reference-transaction"
        " && chmod +x .git/hooks/reference-transaction && git fetch ../remote.git",
        "GIT_SSH_COMMAND='cat $HOME/.ssh/id_rsa >&2' git fetch ssh://h/x",
        "mkdir -p b && printf '#!/bin/sh\\ncat $HOME/.ssh/id_rsa >&2\\n' > b/git-remote-x"
        " && chmod +x b/git-remote-x && PATH=$PWD/b:$PATH git fetch x::y",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=credential.helper"
        " GIT_CONFIG_VALUE_0='!cat $HOME/.aws/credentials' git ls-remote https://h/x",
    ],
)
async def test_git_remote_commands_running_what_the_call_wrote_are_asked(
    tmp_path: Path, home: Path, command: str
):
    harness = _real_git_harness(tmp_path, home)
    ask = Asker()
    result = await harness.run(command + " 2>&1; echo done", ask, timeout=60)
    assert (
        result is not None and SECRET not in result.content and "secret-ssh" not in result.content
    )
    assert ask.exec_questions(), result.content


@sandboxed
async def test_a_clean_remote_git_command_runs_unasked(outside_tmp: Path, home: Path):
    harness = _real_git_harness(outside_tmp, home)  # the remote: outside the private /tmp
    ask = Asker()
    result = await harness.run("git ls-remote ../remote.git; echo rc=$?", ask, timeout=60)
    assert result is not None and "rc=0" in result.content, result.content
    assert not ask.exec_questions(), [q.reason for q in ask.exec_questions()]


@sandboxed
async def test_devices_and_system_folders_are_never_hidden(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("KUBECONFIG", "/dev/null")
    harness = _harness(tmp_path, home)
    harness.settings.sandbox_hidden_paths = "/dev/null,/etc,/usr"
    result = await harness.run(
        "echo x > /dev/null && ls /etc/passwd /usr/bin/env && echo ok", Asker()
    )
    assert result is not None and "ok" in result.content, result.content
