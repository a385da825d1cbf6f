"""The agent's side of the wire gate, without a proxy: who may use a brokered credential
for which operation (``EgressCall.judge``), the question it asks through the session's
gate, what the session remembers, and the audit record."""

from __future__ import annotations

from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    PermissionGate,
    PermissionRequest,
)
from iac_kernel.egress.decide import EgressCall, GuardedRun

CHANGE = {"service": "iam", "operation": "CreateAccessKey", "resource": "user/ci"}
PLAN = GuardedRun("terraform", ("terraform", "plan"), approved=False)
APPLY = GuardedRun("terraform", ("terraform", "apply", "tfplan"), approved=True)


class Front:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> str:
        self.asked.append(request)
        return self.answers.pop(0)


def _call(front: Front, run: GuardedRun | None, gate: PermissionGate | None = None):
    records: list[dict] = []
    asker = (gate or PermissionGate()).egress_asker("call-1", "bash", front)
    return EgressCall(object(), asker, run=run, audit=records.append), records


def _op(access: str, **extra) -> dict:
    return {**CHANGE, "access": access, "host": "iam.amazonaws.com", "digest": "ab" * 32, **extra}


async def test_the_shell_never_gets_a_credential_for_any_operation():
    front = Front()
    call, records = _call(front, None)
    for access in ("read", "change", "secret"):
        decision = await call.judge(_op(access))
        assert not decision.allow and "shell" in decision.reason
    assert front.asked == [] and records == []


async def test_a_read_of_any_run_passes_unasked_and_unrecorded():
    front = Front()
    call, records = _call(front, PLAN)
    assert (await call.judge(_op("read"))).allow
    assert front.asked == [] and records == []


async def test_an_approved_run_changes_without_a_second_question_and_is_recorded():
    front = Front()
    call, records = _call(front, APPLY)
    assert (await call.judge(_op("change"))).allow
    assert front.asked == []
    assert records[0]["operation"] == "iam:CreateAccessKey on user/ci"
    assert records[0]["outcome"] == "allowed" and records[0]["request_sha256"] == "ab" * 32


async def test_a_change_of_an_unasked_run_is_asked_as_a_destructive_question():
    front = Front(REJECT_ONCE, ALLOW_ONCE)
    gate = PermissionGate()
    gate.mode = "bypass"  # asked in every mode
    call, records = _call(front, PLAN, gate)
    refused = await call.judge(_op("change"))
    assert not refused.allow and "iam:CreateAccessKey on user/ci" in refused.reason
    assert (await call.judge(_op("change"))).allow
    question = front.asked[0]
    assert question.danger and question.title == "bash: iam:CreateAccessKey on user/ci"
    assert "terraform plan" in question.reason and "changes something" in question.reason
    assert question.input["request_sha256"] == "ab" * 32
    assert [r["outcome"] for r in records] == ["rejected", "allowed"]


async def test_always_answers_are_remembered_per_operation_for_the_session():
    front = Front(ALLOW_ALWAYS, REJECT_ALWAYS)
    gate = PermissionGate()
    call, _ = _call(front, PLAN, gate)
    assert (await call.judge(_op("change"))).allow
    assert (await call.judge(_op("change", resource="user/other"))).allow
    other = {**_op("change"), "operation": "DeleteUser"}
    assert not (await call.judge(other)).allow
    assert not (await call.judge(other)).allow
    assert len(front.asked) == 2
    fresh_call, _ = _call(Front(REJECT_ONCE), PLAN, PermissionGate())
    assert not (await fresh_call.judge(_op("change"))).allow  # another session asks again


async def test_a_secret_read_names_what_it_returns():
    front = Front(REJECT_ONCE)
    call, _ = _call(front, PLAN)
    secret = {"service": "secretsmanager", "operation": "GetSecretValue", "access": "secret"}
    assert not (await call.judge(secret)).allow
    assert "returns a secret" in front.asked[0].reason


async def test_nobody_to_ask_is_a_refusal():
    call = EgressCall(object(), None, run=PLAN)
    decision = await call.judge(_op("change"))
    assert not decision.allow and "no one is there" in decision.reason


def test_the_audit_listing_names_a_cloud_operation():
    from iac_kernel.sessions.audit import describe

    lines = describe(
        {
            "kind": "cloud_operation",
            "operation": "iam:CreateAccessKey on user/ci",
            "outcome": "rejected",
            "command": "terraform plan",
            "host": "iam.amazonaws.com",
            "request_sha256": "ab" * 32,
            "recorded_at": "2026-12-07T12:00:00Z",
            "cwd": "/w",
            "session_id": "s1",
        }
    )
    assert (
        lines[0]
        == "2026-12-07T12:00:00Z  rejected  iam:CreateAccessKey on user/ci  [cloud operation]"
    )
    assert "`terraform plan` to iam.amazonaws.com" in lines[1] and "abababababab" in lines[1]
