"""Masking by value in every form and by credential shape, with controls that must stay
readable (issue 22 point 3, issue 23 point 2). Pure functions: no terraform, no server."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

import pytest

from iac_kernel.masking.shapes import mask_shapes
from iac_kernel.redact import redact
from iac_kernel.terraform.sensitive import MASK, StreamMasker, mask_text

VALUE = "Amp&Secret<x>-4471"


def go_json(value: str) -> str:
    return (
        json.dumps(value)[1:-1]
        .replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
    )


#: How a program may print VALUE: (form, text holding it).
PRINTED = {
    "raw": f"value = {VALUE}\n",
    "python-json": json.dumps({"v": VALUE + '"q'}),
    "go-json": '{"v":"' + go_json(VALUE) + '"}',
    "base64": base64.b64encode(VALUE.encode()).decode(),
    "base64+newline": base64.b64encode(VALUE.encode() + b"\n").decode(),
    "base64 inside": base64.b64encode(b"k=" + VALUE.encode() + b";").decode(),
    "base64 offset 2": base64.b64encode(b"ab" + VALUE.encode() + b"\n").decode(),
    "urlsafe base64": base64.urlsafe_b64encode(b"?" + VALUE.encode()).decode(),
    "hex": VALUE.encode().hex(),
    "HEX": VALUE.encode().hex().upper(),
    "url": quote(VALUE, safe=""),
    "url plus": "q=" + quote_plus(VALUE + " x"),
    "reversed": VALUE[::-1] + "\n",
    "json in json": json.dumps('{"v":"' + go_json(VALUE) + '"}'),
}


def decodes_to_value(text: str) -> bool:
    """Whether any readable decoding of what is left still shows VALUE."""
    candidates = [text, text[::-1], json.loads(json.dumps(text))]
    for chunk in re.findall(r"[A-Za-z0-9+/=_-]{8,}", text):
        for pad in ("", "=", "=="):
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    candidates.append(decode(chunk + pad).decode("utf-8", "replace"))
                except ValueError:
                    pass
        try:
            candidates.append(bytes.fromhex(chunk).decode("utf-8", "replace"))
        except ValueError:
            pass
    try:
        candidates.append(json.loads(text).get("v", ""))
    except (ValueError, AttributeError):
        pass
    for form in (text, text.replace("\\\\", "\\")):  # Go's escapes, also in a JSON string
        candidates.append(
            form.replace("\\u0026", "&").replace("\\u003c", "<").replace("\\u003e", ">")
        )
    from urllib.parse import unquote_plus

    candidates.append(unquote_plus(text))
    return any(VALUE in c for c in candidates)


@pytest.mark.parametrize("form", sorted(PRINTED))
def test_a_known_value_is_masked_in_every_form(form: str):
    text = PRINTED[form]
    assert decodes_to_value(text)  # the planted text really carries the value
    masked = mask_text(text, {VALUE})
    assert not decodes_to_value(masked), masked
    assert MASK in masked


@pytest.mark.parametrize("form", sorted(PRINTED))
def test_a_secret_environment_value_is_redacted_in_every_form(form: str):
    masked = redact(PRINTED[form], {"DEPLOY_TOKEN": VALUE})
    assert not decodes_to_value(masked) and "[REDACTED:DEPLOY_TOKEN]" in masked


def test_short_values_are_masked_only_as_whole_tokens_or_json_strings():
    values = {"q7Z"}
    assert mask_text('{"pin": "q7Z"}', values) == '{"pin": "(sensitive)"}'
    assert mask_text("pin = q7Z\n", values) == "pin = (sensitive)\n"
    assert mask_text("q7Z", values) == MASK
    for kept in ("aq7Zb", "q7Z-1", "x/q7Z", "q7Z.txt", "id_q7Z"):
        assert mask_text(kept, values) == kept


def test_a_stream_masks_a_value_learned_while_it_runs():
    known: set[str] = set()
    masker = StreamMasker(set(), refresh=lambda: known)
    first = masker.feed("starting\n")
    known.add("Gen-1b2c3d4e-created-now")
    rest = masker.feed("Gen-1b2c3d4e-created-now\n") + masker.flush()
    assert "Gen-1b2c3d4e" not in first + rest and MASK in rest


#: Credential shapes by category: (text, the secret part that must go).
SHAPES = {
    "aws access key id": ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws session key id": ("ASIAY34FZKBOKMUTVV7A,", "ASIAY34FZKBOKMUTVV7A"),
    "aws secret (ini)": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "aws secret (json)": (
        '{"SecretAccessKey": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY", "x": 1}',
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    ),
    "aws secret (bare)": (
        "9drTJvcXLB89EXAMPLELB8923FB892xMFI8Ab2Lc",
        "9drTJvcXLB89EXAMPLELB8923FB892xMFI8Ab2Lc",
    ),
    "aws session token": ("aws_session_token=IQoJb3JpZ2luX2VjEXAMPLE//////wEaCXVz", "IQoJb3JpZ2lu"),
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7xyz\nabc=\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7xyz",
    ),
    "pem in json": (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkq\\n'
        '-----END PRIVATE KEY-----\\n"}',
        "MIIEvQIBADANBgkq",
    ),
    "openssh key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    "kube token": (
        "users:\n- name: admin\n  user:\n    token: kubeTok3n.abcdef123456\n",
        "kubeTok3n",
    ),
    "kube client key": ("    client-key-data: LS0tLS1CRUdJTiBSU0Eg\n", "LS0tLS1CRUdJTiBSU0Eg"),
    "gcloud json": (
        '{"client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty", "type": "authorized_user"}',
        "d-FL95Q19q7MQmFpd7hHD0Ty",
    ),
    "refresh token": ('{"refresh_token": "1//0gLq-refresh-EXAMPLE"}', "1//0gLq-refresh-EXAMPLE"),
    "access token": ('{"access_token":"ya29.a0AfH6SMBexample"}', "ya29.a0AfH6SMBexample"),
    "url password": ("DATABASE_URL=postgres://app:hunter2pass@db:5432/app", "hunter2pass"),
    "url password https": (
        "git clone https://bot:ghs_abc123secret@github.com/o/r",
        "ghs_abc123secret",
    ),
    "dsn password": ("Server=db;Database=app;User Id=sa;Password=Sup3rS3cret!;", "Sup3rS3cret!"),
    "dsn pwd": ("Driver={x};Uid=sa;Pwd=An0therOne;", "An0therOne"),
    "libpq": ("host=db user=app password=Lib9Secret dbname=x", "Lib9Secret"),
    "mysql env": ("MYSQL_PWD=MyPwd42x", "MyPwd42x"),
    "env secret": ("export STRIPE_API_KEY='sk_live_abcdef123456'", "sk_live_abcdef123456"),
    "github token": ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789"),
    "netrc": ("machine api.example.com login bob password N3trcPass", "N3trcPass"),
    "jwt": (
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "dozjgNryP4J3",
    ),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_credential_shapes_are_masked(case: str):
    text, secret = SHAPES[case]
    masked = mask_shapes(text)
    assert secret not in masked and "[REDACTED:" in masked, masked
    assert mask_shapes(masked) == masked  # masking twice changes nothing


#: Ordinary text that must stay readable.
CONTROLS = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
    "id = 123e4567-e89b-12d3-a456-426614174000",
    "instance i-0123456789abcdef0 in subnet-0a1b2c3d4e5f67890 sg-0123456789abcdef0",
    "arn:aws:iam::123456789012:role/deploy-role",
    "https://registry.terraform.io/providers/hashicorp/aws/5.0.0",
    "git@github.com:org/repo.git and ssh://git@host/repo",
    "postgres://app@db:5432/app",
    "password = var.db_password",
    'variable "db_password" { sensitive = true }',
    "PWD=/home/user OLDPWD=/tmp",
    "max_tokens=4096 MAX_TOKENS=4096",
    "terraform_data.x: Creation complete after 0s [id=b4f1d6c2-0b8e-6c3b-2f5a-9a1e5c7d3f21]",
    "Plan: 3 to add, 0 to change, 1 to destroy.",
    "aws_key_pair.deployer: key_name = deployer-key",
    "etag: 33a64df551425fcc55e4d42a148795d9f25f89d4",
]


@pytest.mark.parametrize("text", CONTROLS)
def test_ordinary_text_is_not_masked(text: str):
    assert redact(text, {}) == text


def stream(chunks: list[str], env: dict[str, str] | None = None) -> tuple[list[str], str]:
    """What a redacting live-output stream releases per chunk, and in all."""
    masker = StreamMasker(set(), redact=lambda text: redact(text, env or {}), redact_hold=64)
    released = [masker.feed(chunk) for chunk in chunks]
    released.append(masker.flush())
    return released, "".join(released)


def test_a_private_key_cut_across_chunks_is_masked_whole():
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7xyz\nQmFzZTY0Ym9keQ==\n"
    _parts, whole = stream(
        ["log line\n" + key[:40], key[40:] + "-----END RSA", " PRIVATE KEY-----\nok\n"]
    )
    assert "MIIEow" not in whole and "QmFzZTY0" not in whole and "ok" in whole


def test_an_environment_secret_cut_across_chunks_is_masked():
    env = {"DEPLOY_TOKEN": "tok-123456789-abcdef"}
    _parts, whole = stream(["value: tok-1234", "56789-abcdef done\n"], env)
    assert "tok-1234" not in whole and "[REDACTED:DEPLOY_TOKEN]" in whole


def test_a_shape_cut_across_chunks_is_masked():
    _parts, whole = stream(["export DB_PASSWORD=Sup3r", "Secret42\n"])
    assert "Sup3r" not in whole


def test_finished_lines_go_out_at_once():
    parts, _whole = stream(["Applying...\nhalf a li", "ne\n"])
    assert parts[0] == "Applying...\n"


def test_a_four_character_value_is_masked_encoded_too():
    value = "k9Qz"
    for text in (base64.b64encode(b"k9Qz").decode(), b"k9Qz".hex(), "zQ9k"):
        assert mask_text(f"x {text} y", {value}) == f"x {MASK} y"


def test_a_question_is_masked_in_every_field(tmp_path, monkeypatch):
    from iac_kernel.agent.permissions import PermissionRequest
    from iac_kernel.events import Diff
    from iac_kernel.tools.tf_masking import mask_question

    monkeypatch.setenv("DEPLOY_TOKEN", VALUE)
    text = f"run {VALUE} and {go_json(VALUE)} with AKIAIOSFODNN7EXAMPLE"
    request = PermissionRequest(
        call_id="c",
        tool_name="bash",
        title=text,
        kind="execute",
        input={"command": text, "argv": ["terraform", "apply", "-var", f"x={VALUE}"]},
        options=["allow_once"],
        reason=text,
        diff=Diff("f.env", text, text),
        labels={"allow_always": f"Allow always: `{text}`"},
        review={"text": text},
    )
    shown = repr(mask_question(request, tmp_path))
    assert not decodes_to_value(shown) and "AKIAIOSFODNN7EXAMPLE" not in shown
    assert request.title == text  # the gate's own request is not changed


def test_a_replay_masks_values_learned_after_they_were_stored(tmp_path):
    from iac_kernel.agent.history import replay
    from iac_kernel.config import Settings
    from iac_kernel.events import ToolCallResult
    from iac_kernel.tools.base import ToolContext

    late = "Learned-Later-Value-61"
    messages = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "bash",
                    "input": {"command": "cat notes.txt"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": f"note: {late} AKIAIOSFODNN7EXAMPLE",
                }
            ],
        },
    ]
    state = {"version": 4, "resources": [],
             "outputs": {"x": {"value": late, "type": "string", "sensitive": True}}}  # fmt: skip
    (tmp_path / "terraform.tfstate").write_text(json.dumps(state))
    ctx = ToolContext(cwd=tmp_path, settings=Settings())
    results = [e for e in replay(messages, {}, ctx) if isinstance(e, ToolCallResult)]
    assert results and late not in results[0].output
    assert "AKIAIOSFODNN7EXAMPLE" not in results[0].output


def test_a_long_value_is_masked_in_every_form():
    body = "".join(f"{i:04x}Zq" for i in range(600))  # 3,600 characters
    value = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    for text in (
        value,
        base64.b64encode(value.encode()).decode(),
        value.encode().hex(),
        value[::-1],
    ):
        masked = mask_text(f"x {text} y", {value})
        assert body[:50] not in masked and MASK in masked
    assert "[REDACTED:KEY_TOKEN]" in redact(value, {"KEY_TOKEN": value})


def test_a_progress_bar_line_goes_out_at_each_carriage_return():
    parts, _whole = stream(["10%\r20%\r", "30%"])
    assert parts[0] == "10%\r20%\r"
