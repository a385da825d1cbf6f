"""The credential broker re-signs AWS requests: real awscli and boto3 holding only
placeholder credentials work against moto's server, which checks every Signature V4
against the real keys (``INITIAL_NO_AUTH_ACTION_COUNT``: after the first calls that make
the user, moto authenticates and authorizes every request like AWS)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from egress_support import agent_proxy, aws_user
from iac_kernel.egress import broker

boto3 = pytest.importorskip("boto3")
AWS = str(Path(sys.executable).parent / "aws")
REGION = "us-east-1"


@pytest.fixture(scope="module")
def aws_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """moto with authentication on, a user with real keys, the broker in mitmdump."""
    root = tmp_path_factory.mktemp("aws-broker")
    with aws_user(REGION) as real:
        endpoint = real["AWS_ENDPOINT_URL"]
        made = broker.prepare(real, home=root / "home", folder=root / "private")
        with agent_proxy(made) as port:
            yield {"endpoint": endpoint, "real": real, "made": made, "port": port, "root": root}


def _client_env(world: dict, proxy: bool = True) -> dict[str, str]:
    """A client's environment: placeholders only, the proxy in front of moto."""
    made, real = world["made"], world["real"]
    home = world["root"] / "client-home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and "PROXY" not in k}
    env.update(
        HOME=str(home),
        AWS_ACCESS_KEY_ID=made.swaps[real["AWS_ACCESS_KEY_ID"]],
        AWS_SECRET_ACCESS_KEY=made.swaps[real["AWS_SECRET_ACCESS_KEY"]],
        AWS_ENDPOINT_URL=world["endpoint"],
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    if proxy:
        url = f"http://127.0.0.1:{world['port']}"
        env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url)
    return env


def _aws(world: dict, *args: str, proxy: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [AWS, *args],
        env=_client_env(world, proxy),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_placeholders_are_of_the_right_shape_and_unknown_to_aws(aws_world: dict):
    env = _client_env(aws_world, proxy=False)
    assert env["AWS_ACCESS_KEY_ID"].startswith("AKIA") and len(env["AWS_ACCESS_KEY_ID"]) == 20
    assert env["AWS_ACCESS_KEY_ID"] != aws_world["real"]["AWS_ACCESS_KEY_ID"]
    # Straight to moto, the placeholders are refused: the broker is what makes them work.
    direct = _aws(aws_world, "s3", "ls", proxy=False)
    assert direct.returncode != 0
    assert "InvalidAccessKeyId" in direct.stderr or "InvalidClientTokenId" in direct.stderr


def test_awscli_with_placeholders_works_through_the_broker(aws_world: dict):
    made = _aws(aws_world, "s3", "mb", "s3://brokered-cli")
    assert made.returncode == 0, made.stderr
    listed = _aws(aws_world, "s3", "ls")
    assert listed.returncode == 0 and "brokered-cli" in listed.stdout, listed.stderr
    upload = aws_world["root"] / "upload.bin"
    upload.write_bytes(os.urandom(200_000))
    copied = _aws(aws_world, "s3", "cp", str(upload), "s3://brokered-cli/up.bin")
    assert copied.returncode == 0, copied.stderr
    back = aws_world["root"] / "back.bin"
    fetched = _aws(aws_world, "s3", "cp", "s3://brokered-cli/up.bin", str(back))
    assert fetched.returncode == 0 and back.read_bytes() == upload.read_bytes(), fetched.stderr
    who = _aws(aws_world, "sts", "get-caller-identity", "--output", "json")
    assert who.returncode == 0 and ":user/agent" in who.stdout, who.stderr


def test_boto3_with_placeholders_works_through_the_broker(aws_world: dict):
    code = (
        "import boto3\n"
        "s3 = boto3.client('s3')\n"
        "s3.create_bucket(Bucket='brokered-sdk')\n"
        "s3.put_object(Bucket='brokered-sdk', Key='k/a b.txt', Body=b'x' * 70000)\n"
        "print(s3.get_object(Bucket='brokered-sdk', Key='k/a b.txt')['Body'].read()[:3])\n"
        "sqs = boto3.client('sqs')\n"
        "print(sqs.create_queue(QueueName='brokered')['QueueUrl'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_client_env(aws_world),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "b'xxx'" in done.stdout and "brokered" in done.stdout


def test_aws_placeholders_to_another_host_are_refused(aws_world: dict):
    """An endpoint the keys do not belong to (not AWS's, not AWS_ENDPOINT_URL) gets a
    403 from the broker: the request never leaves with a real signature."""
    other = aws_world["endpoint"].replace("127.0.0.1", "localhost")
    done = _aws(aws_world, "s3", "ls", "--endpoint-url", other)
    assert done.returncode != 0
    assert "AccessDenied" in done.stderr and "credential broker" in done.stderr, done.stderr
    assert "not sent to localhost" in done.stderr, done.stderr


def test_plain_http_to_an_aws_name_that_is_not_a_named_endpoint_is_refused(aws_world: dict):
    """Keys go to ``*.amazonaws.com``, but a re-signed request in plain HTTP could be read
    on the way and replayed: only over TLS, or to an endpoint named with its port
    (``AWS_ENDPOINT_URL``). Refused before any connection is made."""
    done = _aws(
        aws_world, "sts", "get-caller-identity", "--endpoint-url", "http://sts.amazonaws.com"
    )
    assert done.returncode != 0
    assert "only over TLS" in done.stderr and "AccessDenied" in done.stderr, done.stderr


def test_presigned_urls_and_old_signatures_made_with_placeholders_are_refused(aws_world: dict):
    """A presigned URL is for someone outside the sandbox (V2 or V4): never re-signed;
    nor is a Signature V2 header."""
    assert _aws(aws_world, "s3", "mb", "s3://brokered-presign").returncode == 0
    code = (
        "import boto3, botocore.config as c\n"
        "for v in ('s3', 's3v4'):\n"
        "    s3 = boto3.client('s3', config=c.Config(signature_version=v))\n"
        "    print(s3.generate_presigned_url('get_object', Params={'Bucket': "
        "'brokered-presign', 'Key': 'x'}))\n"
    )
    env = _client_env(aws_world, proxy=False)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    urls = done.stdout.split()
    assert len(urls) == 2 and "AWSAccessKeyId=AKIA" in urls[0], done.stderr
    assert "X-Amz-Credential=AKIA" in urls[1]
    fake_id = env["AWS_ACCESS_KEY_ID"]
    proxy = f"http://127.0.0.1:{aws_world['port']}"
    v2_header = ["-H", f"Authorization: AWS {fake_id}:c2lnbmF0dXJl"]
    for args in ([urls[0]], [urls[1]], [*v2_header, f"{aws_world['endpoint']}/brokered-presign"]):
        done = subprocess.run(
            ["curl", "-s", "-w", "\n%{http_code}", "--proxy", proxy, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.stdout.endswith("\n403") and "credential broker" in done.stdout, done.stdout
