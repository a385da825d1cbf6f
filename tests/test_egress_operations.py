"""What the broker reads from a request that carries a brokered credential: the operation
and whether it reads, changes or may return a secret (``addon_operations``, run inside
the proxy; botocore's models, never a hand-written table), by protocol and by class."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import iac_kernel.egress

pytest.importorskip("botocore")
_PATH = Path(iac_kernel.egress.__file__).with_name("addon_operations.py")
_SPEC = importlib.util.spec_from_file_location("addon_operations_under_test", _PATH)
ops = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = ops
_SPEC.loader.exec_module(ops)

FORM = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}


def _aws(service: str, method: str, host: str, path: str, headers=None, body: bytes = b""):
    return ops.aws_operation(service, ops.Request(method, host, path, headers or {}, body))


AWS = [
    # query protocol (IAM, STS, EC2, RDS): the Action parameter, in the body or the query
    (
        "iam",
        "POST",
        "iam.amazonaws.com",
        "/",
        FORM,
        b"Action=CreateAccessKey&UserName=ci",
        "iam:CreateAccessKey",
        "change",
        "user/ci",
    ),
    (
        "iam",
        "GET",
        "iam.amazonaws.com",
        "/?Action=ListUsers&Version=2010-05-08",
        {},
        b"",
        "iam:ListUsers",
        "read",
        None,
    ),
    (
        "sts",
        "POST",
        "sts.amazonaws.com",
        "/",
        FORM,
        b"Action=GetCallerIdentity",
        "sts:GetCallerIdentity",
        "read",
        None,
    ),
    (
        "ec2",
        "POST",
        "ec2.us-east-1.amazonaws.com",
        "/",
        FORM,
        b"Action=TerminateInstances&InstanceId.1=i-0abc",
        "ec2:TerminateInstances",
        "change",
        None,
    ),
    (
        "ec2",
        "POST",
        "ec2.us-east-1.amazonaws.com",
        "/",
        FORM,
        b"Action=DescribeInstances",
        "ec2:DescribeInstances",
        "read",
        None,
    ),
    # JSON protocol: X-Amz-Target
    (
        "dynamodb",
        "POST",
        "dynamodb.us-east-1.amazonaws.com",
        "/",
        {"x-amz-target": "DynamoDB_20120810.DeleteTable"},
        b'{"TableName": "orders"}',
        "dynamodb:DeleteTable",
        "change",
        "table/orders",
    ),
    (
        "kms",
        "POST",
        "kms.us-east-1.amazonaws.com",
        "/",
        {"x-amz-target": "TrentService.Decrypt"},
        b"{}",
        "kms:Decrypt",
        "change",
        None,
    ),
    # REST: method and path against every operation's requestUri
    ("s3", "GET", "s3.amazonaws.com", "/", {}, b"", "s3:ListBuckets", "read", None),
    (
        "s3",
        "GET",
        "logs.s3.us-east-1.amazonaws.com",
        "/?list-type=2",
        {},
        b"",
        "s3:ListObjectsV2",
        "read",
        "bucket/logs",
    ),
    (
        "s3",
        "DELETE",
        "s3.amazonaws.com",
        "/logs",
        {},
        b"",
        "s3:DeleteBucket",
        "change",
        "bucket/logs",
    ),
    (
        "s3",
        "PUT",
        "s3.amazonaws.com",
        "/logs/a/b.txt",
        {},
        b"x",
        "s3:PutObject",
        "change",
        "bucket/logs",
    ),
    (
        "s3",
        "PUT",
        "s3.amazonaws.com",
        "/logs/a/b.txt",
        {"x-amz-copy-source": "x/y"},
        b"",
        "s3:CopyObject",
        "change",
        "bucket/logs",
    ),
    (
        "s3",
        "PUT",
        "s3.amazonaws.com",
        "/logs?policy",
        {},
        b"{}",
        "s3:PutBucketPolicy",
        "change",
        "bucket/logs",
    ),
    (
        "lambda",
        "POST",
        "lambda.us-east-1.amazonaws.com",
        "/2015-03-31/functions/fn/invocations",
        {},
        b"{}",
        "lambda:Invoke",
        "change",
        "function/fn",
    ),
    # S3 Control signs as s3: its host says which service it is
    (
        "s3",
        "GET",
        "111122223333.s3-control.us-east-1.amazonaws.com",
        "/v20180820/accesspoint",
        {"x-amz-account-id": "111122223333"},
        b"",
        "s3:ListAccessPoints",
        "read",
        None,
    ),
    # a signing name that is not a service's name (CloudWatch signs as "monitoring")
    (
        "monitoring",
        "POST",
        "monitoring.us-east-1.amazonaws.com",
        "/",
        FORM,
        b"Action=DeleteAlarms&AlarmNames.member.1=a",
        "cloudwatch:DeleteAlarms",
        "change",
        None,
    ),
]


@pytest.mark.parametrize(
    ("service", "method", "host", "path", "headers", "body", "name", "access", "resource"),
    AWS,
    ids=[case[6] for case in AWS],
)
def test_aws_operations_are_read_from_the_request(
    service, method, host, path, headers, body, name, access, resource
):
    found = _aws(service, method, host, path, headers, body)
    assert f"{found['service']}:{found['operation']}" == name
    assert found["access"] == access
    assert found.get("resource") == resource


@pytest.mark.parametrize(
    ("service", "target", "members"),
    [
        ("secretsmanager", "secretsmanager.GetSecretValue", {"SecretString", "SecretBinary"}),
        ("ssm", "AmazonSSM.GetParameter", {"Value"}),
    ],
)
def test_reads_that_may_return_a_secret_name_the_members(service, target, members):
    found = _aws(service, "POST", f"{service}.amazonaws.com", "/", {"x-amz-target": target})
    assert found["access"] == "read" and members <= set(found["secret_members"])


def test_lambda_configuration_reads_may_return_the_environment():
    found = _aws("lambda", "GET", "lambda.us-east-1.amazonaws.com", "/2015-03-31/functions/fn")
    assert found["operation"] == "GetFunction" and "Variables" in found["secret_members"]


def test_an_unknown_operation_is_a_change():
    found = _aws("iam", "POST", "iam.amazonaws.com", "/", FORM, b"Action=MadeUpThing")
    assert found["access"] == "change"
    found = _aws("no-such-service", "GET", "x.amazonaws.com", "/")
    assert found["access"] == "change"


def test_a_secret_is_found_in_the_answer_only_when_it_has_a_value():
    js, xml = "application/x-amz-json-1.1", "text/xml"
    assert ops.holds_secret(["SecretString"], b'{"Name":"db","SecretString":"hunter2"}', js)
    assert ops.holds_secret(["PasswordData"], b"<PasswordData>abc=</PasswordData>", xml)
    assert not ops.holds_secret(["MasterUserPassword"], b"<MasterUsername>a</MasterUsername>", xml)
    assert not ops.holds_secret(["Value"], b'{"Value": ""}', js)
    assert not ops.holds_secret(["PasswordData"], b"<PasswordData/>", xml)
    # an answer in another form (CBOR, asked for with Accept) holds it where it is named
    assert ops.holds_secret(["SecretString"], b"\xa1lSecretStringghunter2", "application/cbor")


def test_a_request_read_two_ways_is_a_change():
    # IAM speaks the query protocol: a JSON target naming a read does not make it one
    target = {"x-amz-target": "AWSIdentityManagementV20100508.ListUsers", **FORM}
    found = _aws("iam", "POST", "iam.amazonaws.com", "/", target, b"Action=CreateAccessKey")
    assert found["access"] == "change"
    # SQS's model lists JSON only, but SQS reads the query protocol too
    sqs = {"x-amz-target": "AmazonSQS.ListQueues", **FORM}
    mixed = _aws("sqs", "POST", "sqs.us-east-1.amazonaws.com", "/", sqs, b"Action=DeleteQueue")
    assert mixed["access"] == "change"
    # a target header folded with a comma names two operations
    folded = {"x-amz-target": "DynamoDB_20120810.DeleteTable, DynamoDB_20120810.ListTables"}
    assert _aws("dynamodb", "POST", "dynamodb.amazonaws.com", "/", folded)["access"] == "change"
    # the form is read whatever the content type's case
    upper = {"content-type": "Application/X-WWW-Form-Urlencoded"}
    sneaky = _aws("iam", "POST", "iam.amazonaws.com", "/?Action=ListUsers", upper, b"Action=X")
    assert sneaky["access"] == "change"
    # the Action twice (query and body), or the target twice: either may be the one read
    twice = _aws(
        "iam", "POST", "iam.amazonaws.com", "/?Action=ListUsers", FORM, b"Action=DeleteUser"
    )
    assert twice["access"] == "change"
    pairs = [
        ("X-Amz-Target", "DynamoDB_20120810.ListTables"),
        ("X-Amz-Target", "DynamoDB_20120810.DeleteTable"),
    ]
    request = ops.Request("POST", "dynamodb.us-east-1.amazonaws.com", "/", pairs, b"{}")
    assert ops.aws_operation("dynamodb", request)["access"] == "change"
    # a JSON service sent a query-protocol request: not an operation it reads
    odd = _aws("dynamodb", "POST", "dynamodb.amazonaws.com", "/", FORM, b"Action=ListTables")
    assert odd["access"] == "change"


@pytest.mark.parametrize(
    ("service", "body"),
    [
        ("ec2", b"Action=ExportImage"),
        ("elasticache", b"Action=TestFailover"),
        ("sqs", None),
    ],
)
def test_verbs_that_sound_like_reads_but_change_are_changes(service, body):
    if body is None:  # JSON: states:TestState runs a task with a role
        headers, body, service = {"x-amz-target": "AWSStepFunctions.TestState"}, b"{}", "states"
    else:
        headers = FORM
    found = _aws(service, "POST", f"{service}.us-east-1.amazonaws.com", "/", headers, body)
    assert found["access"] == "change", found


@pytest.mark.parametrize(
    ("service", "headers", "body", "path", "method", "member", "answer", "kind"),
    [
        # ECR's token is not marked sensitive in the model
        (
            "ecr",
            {"x-amz-target": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"},
            b"{}",
            "/",
            "POST",
            "authorizationToken",
            b'{"authorizationData":[{"authorizationToken":"QVdTOnNlY3JldA=="}]}',
            "application/x-amz-json-1.1",
        ),
        # EC2 writes the member as passwordData
        (
            "ec2",
            FORM,
            b"Action=GetPasswordData&InstanceId=i-1",
            "/",
            "POST",
            "passwordData",
            b"<GetPasswordDataResponse><passwordData>c2VjcmV0</passwordData>"
            b"</GetPasswordDataResponse>",
            "text/xml",
        ),
    ],
)
def test_secret_answers_the_models_do_not_mark_or_write_otherwise_are_found(
    service, headers, body, path, method, member, answer, kind
):
    found = _aws(service, method, f"{service}.us-east-1.amazonaws.com", path, headers, body)
    assert found["access"] == "read" and member in found["secret_members"]
    assert ops.holds_secret(found["secret_members"], answer, kind)


BEARER = [
    ("GET", "api.github.com", "/repos/o/r/pulls", {}, b"", "read"),
    ("POST", "api.github.com", "/repos/o/r/pulls", {}, b"{}", "change"),
    ("DELETE", "api.github.com", "/repos/o/r", {}, b"", "change"),
    ("POST", "api.github.com", "/graphql", {}, b'{"query": "query { viewer { login } }"}', "read"),
    ("POST", "api.github.com", "/graphql", {}, b'{"query": "{ viewer { login } }"}', "read"),
    ("POST", "api.github.com", "/graphql", {}, b'{"query": "mutation { x }"}', "change"),
    ("POST", "api.github.com", "/graphql", {}, b'{"query": "# hi\\nmutation { x }"}', "change"),
    (
        "POST",
        "api.github.com",
        "/graphql",
        {},
        b'{"query": "query A { a } mutation B { x }", "operationName": "B"}',
        "change",
    ),
    ("GET", "gitlab.com", "/api/graphql?query=mutation%20%7Bx%7D", {}, b"", "change"),
    ("GET", "api.github.com", "/repos/o/r", {"x-http-method-override": "DELETE"}, b"", "change"),
    ("GET", "api.example.com", "/things/1?_method=DELETE", {}, b"", "change"),
    # Kubernetes: exec, attach, port-forward and proxy run something; Secrets are secrets
    ("GET", "k8s.example.com", "/api/v1/namespaces/d/pods/web/exec?command=sh", {}, b"", "change"),
    ("GET", "k8s.example.com", "/api/v1/namespaces/d/pods/web/portforward", {}, b"", "change"),
    ("GET", "k8s.example.com", "/api/v1/namespaces/d/services/s/proxy/x", {}, b"", "change"),
    (
        "GET",
        "k8s.example.com",
        "/api/v1/namespaces/d/pods",
        {"upgrade": "websocket"},
        b"",
        "change",
    ),
    ("GET", "k8s.example.com", "/api/v1/namespaces/d/secrets", {}, b"", "secret"),
    ("GET", "k8s.example.com", "/api/v1/namespaces/d/pods", {}, b"", "read"),
    ("GET", "gitlab.com", "/api/v4/projects/1/variables", {}, b"", "secret"),
    ("GET", "app.terraform.io", "/api/v2/state-versions/sv-1/download", {}, b"", "secret"),
    ("GET", "git.example.com", "/org/repo.git/info/refs?service=git-upload-pack", {}, b"", "read"),
    ("POST", "git.example.com", "/org/repo.git/git-upload-pack", {}, b"", "read"),
    ("POST", "git.example.com", "/org/repo.git/git-receive-pack", {}, b"", "change"),
    ("PUT", "management.azure.com", "/subscriptions/s/resourceGroups/rg", {}, b"{}", "change"),
    ("POST", "management.azure.com", "/subscriptions/s/x/listKeys", {}, b"", "change"),
    (
        "GET",
        "secretmanager.googleapis.com",
        "/v1/projects/p/secrets/s/versions/1:access",
        {},
        b"",
        "secret",
    ),
    ("GET", "vault.example.com", "/v1/secret/data/db", {"x-vault-token": "t"}, b"", "secret"),
    ("GET", "vault.example.com", "/v1/sys/health", {"x-vault-token": "t"}, b"", "read"),
    ("GET", "app.terraform.io", "/api/v2/organizations/o/workspaces", {}, b"", "read"),
    ("POST", "app.terraform.io", "/api/v2/runs", {}, b"{}", "change"),
]


@pytest.mark.parametrize(("method", "host", "path", "headers", "body", "access"), BEARER)
def test_bearer_operations_by_method_and_path(method, host, path, headers, body, access):
    found = ops.bearer_operation(ops.Request(method, host, path, headers, body))
    assert found["access"] == access
    assert found["service"] == host and found["operation"].startswith(method)
