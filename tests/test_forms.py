"""Forms on permission questions (:mod:`iac_kernel.agent.forms`): the gate attaches a
typed confirmation to a destroying or production apply and never takes an approval whose
typed value does not match; a front without forms answers the plain question."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, Form, FormField, typed_confirmation
from iac_kernel.agent.permissions import (
    ALLOW_ONCE,
    REJECT_ONCE,
    Answer,
    PermissionGate,
    PermissionRequest,
    checked,
)
from iac_kernel.guard.approval.request import ExecRequest
from iac_kernel.guard.policy.grammar import CHANGE, Verdict


def _review(workspace="staging", deletes=1, kind="terraform_apply"):
    return {"kind": kind, "workspace": workspace, "plan": {"counts": {"delete": deletes}}}


@pytest.mark.parametrize(
    ("review", "danger", "target"),
    [
        (_review(), True, "staging"),  # it destroys
        (_review(deletes=0), True, None),  # a plain apply to staging: a click will do
        (_review("prod-eu", 0), True, "prod-eu"),  # production
        (_review("eu.PRD", 0), True, "eu.PRD"),
        (_review("product", 0), True, None),  # not production
        (_review(None, 0, "terraform_destroy"), True, "default"),
        ({**_review(), "plan": {"counts": {"replace": 2}}}, True, "staging"),
        (_review(), False, None),  # not a per-call question
        ({"kind": "terraform_plan", "workspace": "prod"}, True, None),
        ("not a review", True, None),
    ],
)
def test_which_applies_need_the_workspace_typed(review, danger, target):
    form = typed_confirmation(review, danger)
    assert (form.confirms if form else None) == target


def _request(form: Form | None) -> PermissionRequest:
    return PermissionRequest(
        "c1", "bash", "t", "execute", {}, [ALLOW_ONCE, REJECT_ONCE], "r", form=form
    )


@pytest.mark.parametrize(
    ("values", "allowed"),
    [
        ({"workspace": "staging"}, True),
        ({"workspace": " staging\n"}, True),
        ({"workspace": "Staging"}, False),
        ({"workspace": "yes"}, False),
        ({"workspace": ""}, False),
        ({}, False),
        ({"workspace": ["staging"]}, False),
        (None, True),  # a front that cannot render forms: the plain question stands
    ],
)
def test_an_approval_must_carry_the_typed_name(values, allowed):
    request = _request(typed_confirmation(_review(), True))
    answer = checked(request, Answer(ALLOW_ONCE, by="test", values=values))
    assert (answer == ALLOW_ONCE) is allowed
    if not allowed:
        assert answer.note and answer.by == "test"


def test_a_rejection_stays_a_rejection_whatever_it_carries():
    request = _request(typed_confirmation(_review(), True))
    answer = Answer(REJECT_ONCE, values={"workspace": "staging"})
    assert checked(request, answer) == REJECT_ONCE


def test_field_kinds_check_their_values():
    form = Form(
        "Q",
        [
            FormField("env", "Environment", CHOICE, choices=["dev", "prod"]),
            FormField("force", "Force", BOOLEAN),
            FormField("count", "Count", NUMBER, required=False),
        ],
    )
    assert form.mismatch({"env": "dev", "force": False}) is None
    assert form.mismatch({"env": "dev", "force": False, "count": 3.5}) is None
    assert "one of" in form.mismatch({"env": "qa", "force": True})
    assert "true or false" in form.mismatch({"env": "dev", "force": "yes"})
    assert "number" in form.mismatch({"env": "dev", "force": True, "count": True})
    schema = form.schema()
    assert schema["required"] == ["env", "force"]
    assert schema["properties"]["env"] == {
        "title": "Environment",
        "type": "string",
        "enum": ["dev", "prod"],
    }


@pytest.mark.parametrize(("typed", "allowed"), [("prod", True), ("default", False)])
async def test_the_gate_attaches_the_form_and_refuses_a_wrong_name(tmp_path, typed, allowed):
    seen: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> str:
        seen.append(request)
        return Answer(ALLOW_ONCE, by="test", values={"workspace": typed})

    review = SimpleNamespace(
        summary=_review("prod", 0), text="Apply to prod", covered_by_literal=False
    )
    exec_request = ExecRequest(
        program="terraform",
        argv=["terraform", "apply"],
        cwd=str(tmp_path),
        verdict=Verdict(CHANGE, "It changes infrastructure"),
        review=review,
    )
    decision = await PermissionGate().check_exec(exec_request, "c1", "bash", ask)
    (request,) = seen
    assert request.form is not None and request.form.confirms == "prod"
    assert decision.allowed is allowed
    assert exec_request.asked["allowed"] is allowed
