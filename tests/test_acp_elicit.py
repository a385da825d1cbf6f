"""A typed confirmation (ACP form elicitation, schema 1.25) for a destroy or a production
apply: asked only of clients that declared ``elicitation.form``; only the exact
workspace name approves, once; other clients get ``session/request_permission``."""

from __future__ import annotations

import pytest

from iac_kernel.acp.session.permissions import PermissionAsker
from iac_kernel.agent.forms import typed_confirmation
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE, PermissionRequest
from node_schema import schema_failures
from test_acp_support import AnsweringChannel

FORM_CLIENT = {"elicitation": {"form": {}}}


def _request(workspace="staging", deletes=1, kind="terraform_apply", danger=True):
    plan = {"counts": {"delete": deletes, "create": 2}}
    review = {"kind": kind, "text": "Apply of the saved plan tfplan: ...", "plan": plan}
    if workspace is not None:
        review["workspace"] = workspace
    request = PermissionRequest(
        "call-1",
        "bash",
        "bash: terraform apply tfplan",
        "execute",
        {"command": "terraform apply tfplan"},
        [ALLOW_ONCE, REJECT_ONCE],
        "This command changes real infrastructure or data; approve each call.",
        review=review,
        danger=danger,
    )
    request.form = typed_confirmation(review, danger)  # as the gate attaches it
    return request


@pytest.mark.parametrize(
    ("request_", "target"),
    [
        (_request(), "staging"),  # it destroys
        (_request(deletes=0), None),  # a plain apply to staging: a click will do
        (_request(workspace="prod-eu", deletes=0), "prod-eu"),  # production
        (_request(workspace="product", deletes=0), None),  # not production
        (_request(workspace=None, kind="terraform_destroy"), "default"),
        (_request(danger=False), None),
    ],
)
def test_which_questions_need_the_workspace_typed(request_, target):
    assert (request_.form.confirms if request_.form else None) == target


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "accept", "content": {"workspace": " staging "}}, ALLOW_ONCE),
        ({"action": "accept", "content": {"workspace": "yes"}}, REJECT_ONCE),
        ({"action": "accept"}, REJECT_ONCE),
        ({"action": "decline"}, REJECT_ONCE),
        ({"action": "cancel"}, REJECT_ONCE),
    ],
)
async def test_only_the_exact_name_approves(answer, expected):
    channel = AnsweringChannel(FORM_CLIENT, [answer])
    got = await PermissionAsker(channel, "s1")(_request())
    assert got == expected and "typed confirmation" in got.by
    ((method, params),) = channel.requests
    assert method == "elicitation/create" and params["toolCallId"] == "call-1"
    assert "`staging`" in params["message"]
    assert (
        schema_failures(
            [("zCreateElicitationRequest", params), ("zCreateElicitationResponse", answer)]
        )
        == []
    )


async def test_clients_without_form_elicitation_get_the_permission_question():
    selected = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    for capabilities in ({}, {"elicitation": {"url": {}}}):
        channel = AnsweringChannel(capabilities, [selected])
        assert await PermissionAsker(channel, "s1")(_request()) == ALLOW_ONCE
        assert [m for m, _ in channel.requests] == ["session/request_permission"]
    # and a question that needs no typing is a permission question for every client
    channel = AnsweringChannel(FORM_CLIENT, [selected])
    await PermissionAsker(channel, "s1")(_request(deletes=0))
    assert [m for m, _ in channel.requests] == ["session/request_permission"]
