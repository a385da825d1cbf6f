"""Brokered credentials are used only by a guarded program's own run, one judged operation
at a time (issue 41, items 1 and 2), through real sandboxed bash calls, the agent's
egress proxy and moto's server checking every signature against the real keys:

* the shell never gets a credential swapped, even with valid placeholders it copied out
  of a guarded program (a signature made with them is refused at the wire);
* a request that names the placeholder key id without its signature is refused;
* a run that started unasked (a read) may read; its changes are asked per request,
  naming the service, the operation and the resource, and a rejection stops them;
* a run the user approved needs no second question;
* a read whose answer holds a secret is withheld unless allowed.
"""

from __future__ import annotations

import base64
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from egress_support import aws_user, egress_ready
from guard_support import Asker, Harness
from iac_kernel.agent.permissions import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, PermissionRequest
from iac_kernel.egress import broker
from iac_kernel.egress.environment import environment_dir
from iac_kernel.guard.sandbox.bwrap import unusable_reason

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")
boto3 = pytest.importorskip("boto3")


class WireAsker(Asker):
    """Answers cloud-operation questions with ``operation_answer``; records them."""

    def __init__(self, operation_answer: str = REJECT_ONCE, **kwargs) -> None:
        super().__init__(**kwargs)
        self.operation_answer = operation_answer

    async def __call__(self, request: PermissionRequest) -> str:
        if "cloud_operation" in request.input:
            self.requests.append(request)
            return self.operation_answer
        return await super().__call__(request)

    def operations(self) -> list[str]:
        return [r.input["cloud_operation"] for r in self.requests if "cloud_operation" in r.input]


@pytest.fixture(scope="module")
def aws_keys() -> Iterator[dict[str, str]]:
    with aws_user() as keys:
        yield keys


@pytest.fixture
def world(outside_tmp: Path, aws_keys: dict, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    home = outside_tmp / "home"
    home.mkdir()
    egress_ready()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    monkeypatch.setenv("HOME", str(home))
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in aws_keys.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    made = broker.prepare(os.environ, home=home, folder=home / ".iac-code" / "egress")
    broker.activate(made)
    world = {"made": made, "keys": aws_keys, "root": outside_tmp}
    world["s3"] = _real(world, "s3")
    try:
        yield world
    finally:
        broker.activate(None)


def _real(world: dict, service: str):
    """A boto3 client of ``service`` with the real keys, straight to moto (the test's
    own view of what happened, never through the broker)."""
    keys = world["keys"]
    return boto3.client(
        service,
        endpoint_url=keys["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
    )


def _buckets(world: dict) -> set[str]:
    return {b["Name"] for b in world["s3"].list_buckets()["Buckets"]}


def _harness(world: dict, name: str, program: str) -> Harness:
    """A fake guarded ``terraform``: a Python program (this interpreter, boto3) run by
    the guard with what it gives guarded programs (placeholders, its own relay)."""
    root = world["root"] / name
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (root / "log").mkdir()
    (root / "log" / "calls").touch()
    terraform = bin_dir / "terraform"
    terraform.write_text(f"#!{sys.executable}\n{program}\n")
    terraform.chmod(terraform.stat().st_mode | stat.S_IEXEC)
    harness = Harness(root / "ws", bin_dir, root / "log" / "calls", mode="bypass")
    harness.settings.egress_allow_private = urlsplit(world["keys"]["AWS_ENDPOINT_URL"]).netloc
    return harness


CLIENT = """
import os, sys, boto3, botocore
s3 = boto3.client("s3", region_name="us-east-1")
def shown(http_response=None, **_):
    if http_response is not None and http_response.status_code >= 400:
        print("answer", http_response.status_code, http_response.text[:300])
def attempt(what, call):
    s3.meta.events.register("after-call.*", shown)
    try:
        call()
        print(what, "ok")
    except botocore.exceptions.ClientError as exc:
        print(what, "refused", exc.response["Error"].get("Code"), str(exc)[:300])
    except botocore.exceptions.BotoCoreError as exc:
        print(what, "failed", exc)
"""


async def test_the_shell_cannot_use_placeholders_it_copied_out(world: dict):
    # The guarded program hands its placeholders to the shell (a file in the folder).
    harness = _harness(
        world,
        "copy",
        "import os\nopen('creds', 'w').write(os.environ['AWS_ACCESS_KEY_ID'] + ' ' + "
        "os.environ['AWS_SECRET_ACCESS_KEY'])",
    )
    made, keys = world["made"], world["keys"]
    script = (
        CLIENT.replace('boto3.client("s3", region_name="us-east-1")', "None")
        + "key, secret = open('creds').read().split()\n"
        "s3 = boto3.client('s3', region_name='us-east-1', aws_access_key_id=key, "
        "aws_secret_access_key=secret, endpoint_url=os.environ['ENDPOINT'])\n"
        "attempt('create', lambda: s3.create_bucket(Bucket='from-the-shell'))\n"
        "attempt('list', lambda: s3.list_buckets())\n"
    )
    (harness.cwd / "shell.py").write_text(script)
    ask = WireAsker(operation_answer=ALLOW_ONCE)
    result = await harness.run(
        f"terraform version && ENDPOINT={keys['AWS_ENDPOINT_URL']} python shell.py", ask
    )
    assert result is not None
    copied = (harness.cwd / "creds").read_text().split()
    assert copied[0] == made.swaps[keys["AWS_ACCESS_KEY_ID"]]  # valid placeholders
    assert "create refused" in result.content and "list refused" in result.content
    assert "credential broker" in result.content and "the shell" in result.content
    assert "from-the-shell" not in _buckets(world)
    assert ask.operations() == []  # refused outright: nothing to approve


async def test_a_read_run_is_asked_for_each_change_and_a_rejection_stops_it(world: dict):
    program = (
        CLIENT + "attempt('list', lambda: s3.list_buckets())\n"
        "attempt('create', lambda: s3.create_bucket(Bucket=sys.argv[2]))\n"
    )
    harness = _harness(world, "read-run", program)
    ask = WireAsker(operation_answer=REJECT_ONCE)
    result = await harness.run("terraform plan rejected-bucket", ask)
    assert result is not None, "terraform plan runs unasked"
    assert not ask.exec_questions()
    assert "list ok" in result.content, result.content
    assert "create refused" in result.content, result.content
    assert ask.operations() == ["s3:CreateBucket on bucket/rejected-bucket"]
    question = ask.requests[-1]
    assert "terraform plan rejected-bucket" in question.reason
    assert question.input["request_sha256"]
    assert "rejected-bucket" not in _buckets(world)

    ask = WireAsker(operation_answer=ALLOW_ONCE)
    result = await harness.run("terraform plan allowed-bucket", ask)
    assert result is not None and "create ok" in result.content, result.content
    assert ask.operations() == ["s3:CreateBucket on bucket/allowed-bucket"]
    assert "allowed-bucket" in _buckets(world)


async def test_allow_always_is_remembered_for_the_session_only_for_that_operation(world: dict):
    program = CLIENT + "attempt('create', lambda: s3.create_bucket(Bucket=sys.argv[2]))\n"
    harness = _harness(world, "always", program)
    ask = WireAsker(operation_answer=ALLOW_ALWAYS)
    first = await harness.run("terraform plan always-one", ask)
    second = await harness.run("terraform plan always-two", ask)
    assert first is not None and second is not None
    assert "create ok" in first.content and "create ok" in second.content
    assert ask.operations() == ["s3:CreateBucket on bucket/always-one"]
    assert {"always-one", "always-two"} <= _buckets(world)


async def test_an_approved_run_needs_no_second_question(world: dict):
    program = CLIENT + "attempt('create', lambda: s3.create_bucket(Bucket='by-apply'))\n"
    harness = _harness(world, "apply", program)
    ask = WireAsker(operation_answer=REJECT_ONCE, exec_answer=ALLOW_ONCE)
    result = await harness.run("terraform apply -auto-approve", ask)
    assert result is not None and "create ok" in result.content, result.content
    assert len(ask.exec_questions()) == 1 and ask.operations() == []
    assert "by-apply" in _buckets(world)


async def test_a_request_naming_the_placeholder_without_its_signature_is_refused(world: dict):
    # Signed with another secret under the placeholder key id: the broker re-signed such
    # requests before, it now checks the signature first (even for a read).
    program = (
        CLIENT.replace(
            'region_name="us-east-1")',
            "region_name='us-east-1', aws_access_key_id=os.environ['AWS_ACCESS_KEY_ID'], "
            "aws_secret_access_key='x' * 40)",
        )
        + "attempt('list', lambda: s3.list_buckets())\n"
    )
    harness = _harness(world, "forged", program)
    ask = WireAsker(operation_answer=ALLOW_ONCE)
    result = await harness.run("terraform plan", ask)
    assert result is not None and "list refused" in result.content, result.content
    assert "credential broker" in result.content and "signature" in result.content
    assert ask.operations() == []


async def test_a_read_that_returns_a_secret_is_withheld_unless_allowed(world: dict):
    secrets = _real(world, "secretsmanager")
    secrets.create_secret(Name="db", SecretString="hunter2-the-db-password")
    program = (
        CLIENT.replace('"s3"', '"secretsmanager"')
        + "attempt('describe', lambda: s3.describe_secret(SecretId='db'))\n"
        "attempt('value', lambda: print(s3.get_secret_value(SecretId='db')['SecretString']))\n"
    )
    harness = _harness(world, "secret", program)
    ask = WireAsker(operation_answer=REJECT_ONCE)
    result = await harness.run("terraform plan", ask)
    assert result is not None
    assert "describe ok" in result.content and "value refused" in result.content, result.content
    assert "hunter2" not in result.content
    assert ask.operations() == ["secretsmanager:GetSecretValue on secret/db"]

    ask = WireAsker(operation_answer=ALLOW_ONCE)
    result = await harness.run("terraform plan", ask)
    assert result is not None and "value ok" in result.content, result.content


async def test_role_credentials_stay_with_the_broker(world: dict):
    """AssumeRole's answer reaches the run with placeholders; requests signed with them
    are re-signed with the role's real credentials, which never enter the sandbox."""
    keys = world["keys"]
    iam = _real(world, "iam")
    trust = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}'  # noqa: E501
    role = iam.create_role(RoleName="deployer", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    from egress_support import ALLOW_ALL

    iam.put_role_policy(RoleName="deployer", PolicyName="all", PolicyDocument=ALLOW_ALL)
    program = (
        "import boto3, json\n"
        "sts = boto3.client('sts', region_name='us-east-1')\n"
        f"got = sts.assume_role(RoleArn='{role}', RoleSessionName='run')['Credentials']\n"
        "print('role key', got['AccessKeyId'], got['SecretAccessKey'], got['SessionToken'])\n"
        "s3 = boto3.client('s3', region_name='us-east-1', aws_access_key_id=got['AccessKeyId'],"
        " aws_secret_access_key=got['SecretAccessKey'], aws_session_token=got['SessionToken'])\n"
        "s3.create_bucket(Bucket='made-by-the-role')\n"
        "print('buckets', [b['Name'] for b in s3.list_buckets()['Buckets']])\n"
    )
    harness = _harness(world, "role", program)
    ask = WireAsker(operation_answer=REJECT_ONCE, exec_answer=ALLOW_ONCE)
    dump = harness.cwd / "out.txt"
    result = await harness.run(f"terraform apply > {dump} 2>&1", ask)
    assert result is not None
    out = dump.read_text()
    assert "made-by-the-role" in out, out
    fake_id, fake_secret, fake_token = out.split("role key ")[1].split()[:3]
    sts_real = boto3.client(
        "sts",
        endpoint_url=keys["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=fake_id,
        aws_secret_access_key=fake_secret,
        aws_session_token=fake_token,
    )
    with pytest.raises(Exception):  # noqa: B017 - moto knows only the real role keys
        sts_real.get_caller_identity()
    assert "made-by-the-role" in _buckets(world)


async def test_a_read_run_minting_an_access_key_is_asked_and_refused(world: dict):
    """The issue's case: a guarded read's code (a provider, a data source) calls
    ``iam:CreateAccessKey`` with valid placeholder credentials (query protocol)."""
    iam = _real(world, "iam")
    iam.create_user(UserName="ci")
    program = (
        CLIENT.replace('"s3"', '"iam"')
        + "attempt('users', lambda: s3.list_users())\n"
        + "attempt('mint', lambda: s3.create_access_key(UserName='ci'))\n"
    )
    harness = _harness(world, "mint", program)
    ask = WireAsker(operation_answer=REJECT_ONCE)
    result = await harness.run("terraform plan", ask)
    assert result is not None and not ask.exec_questions()
    assert "users ok" in result.content and "mint refused" in result.content, result.content
    assert ask.operations() == ["iam:CreateAccessKey on user/ci"]
    assert iam.list_access_keys(UserName="ci")["AccessKeyMetadata"] == []


async def test_bearer_api_reads_pass_and_changes_are_asked(world: dict, outside_tmp: Path):
    from egress_support import recording_api

    with recording_api() as api:
        port = api.server_address[1]
        home = Path(os.environ["HOME"])
        password = "bearer-Passw0rd-0123456789"
        (home / ".git-credentials").write_text(f"http://bob:{password}@127.0.0.1:{port}\n")
        made = broker.prepare(os.environ, home=home, folder=home / ".iac-code" / "egress")
        broker.activate(made)
        program = (
            "import base64, os, urllib.request, urllib.error\n"
            "line = open(os.path.expanduser('~/.git-credentials')).read().strip()\n"
            "auth = line.split('//')[1].split('@')[0]\n"
            "header = 'Basic ' + base64.b64encode(auth.encode()).decode()\n"
            "for method in ('GET', 'POST'):\n"
            f"    url = 'http://127.0.0.1:{port}/api/things'\n"
            "    request = urllib.request.Request(url, method=method, data=b'{}' if method == "
            "'POST' else None, headers={'Authorization': header})\n"
            "    try:\n"
            "        urllib.request.urlopen(request).read()\n"
            "        print(method, 'ok')\n"
            "    except urllib.error.HTTPError as exc:\n"
            "        print(method, 'refused', exc.code, exc.read().decode()[:200])\n"
        )
        harness = _harness(world, "bearer", program)
        harness.settings.egress_allow_private += f",127.0.0.1:{port}"
        ask = WireAsker(operation_answer=REJECT_ONCE)
        result = await harness.run("terraform plan", ask)
        assert result is not None
        assert "GET ok" in result.content and "POST refused 403" in result.content, result.content
        assert ask.operations() == ["127.0.0.1:POST /api/things"]
        real = "Basic " + base64.b64encode(f"bob:{password}".encode()).decode()
        assert [(m, h.get("Authorization")) for m, _p, h in api.seen] == [("GET", real)]


async def test_a_request_signed_for_one_host_is_never_re_signed_for_another(
    world: dict, monkeypatch: pytest.MonkeyPatch
):
    """Signed for the AWS endpoint but sent to another host the keys may go to (an
    attacker's ``*.amazonaws.com`` name): re-signed, it could be replayed at AWS, which
    acts on the Host it signs. Refused; nothing reaches the other host."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Catcher(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Catcher)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    catch = f"127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://{catch}")
    home = Path(os.environ["HOME"])
    made = broker.prepare(os.environ, home=home, folder=home / ".iac-code" / "egress")
    broker.activate(made)
    target = urlsplit(world["keys"]["AWS_ENDPOINT_URL"]).netloc
    program = (
        "import json, os, urllib.request, urllib.error\n"
        "from botocore.auth import SigV4Auth\n"
        "from botocore.awsrequest import AWSRequest\n"
        "from botocore.credentials import Credentials\n"
        "creds = Credentials(os.environ['AWS_ACCESS_KEY_ID'], "
        "os.environ['AWS_SECRET_ACCESS_KEY'])\n"
        "body = b'Action=GetSessionToken&Version=2011-06-15'\n"
        f"req = AWSRequest(method='POST', url='http://{target}/', data=body, "
        "headers={'Content-Type': 'application/x-www-form-urlencoded'})\n"
        "SigV4Auth(creds, 'sts', 'us-east-1').add_auth(req)\n"
        f"headers = {{**dict(req.headers.items()), 'Host': '{target}'}}\n"
        f"sent = urllib.request.Request('http://{catch}/', data=body, headers=headers, "
        "method='POST')\n"
        "try:\n"
        "    print('sent', urllib.request.urlopen(sent).status)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print('refused', exc.code, exc.read().decode()[:300])\n"
    )
    harness = _harness(world, "replay", program)
    harness.settings.egress_allow_private += f",{catch}"
    ask = WireAsker(operation_answer=ALLOW_ONCE)
    try:
        result = await harness.run("terraform plan", ask)
    finally:
        server.shutdown()
    assert result is not None and "refused 403" in result.content, result.content
    assert "signed Host" in result.content
    assert seen == [] and ask.operations() == []
