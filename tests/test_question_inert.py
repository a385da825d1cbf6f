"""Question text is inert: a name (plan file, path, workspace, resource address, command)
shown in a question cannot add a line that looks like one of its fields, nor hide or
reorder text with terminal escapes, bidirectional overrides or zero-width characters - in
the kernel's HTML box and in the ACP ``session/request_permission`` tool call."""

from __future__ import annotations

import json
import unicodedata

import pytest

from iac_kernel.acp.session.permissions import request_params
from iac_kernel.agent.permissions import PER_CALL_OPTIONS, PermissionRequest
from iac_kernel.kernel.ask.widgets import label_html
from iac_kernel.terraform.plan import parse_plan
from iac_kernel.terraform.summary import question_text
from iac_kernel.textsafe import printable, shown_lines

#: By family: C0, DEL, C1, CR, terminal escapes, bidi overrides and isolates,
#: zero-width, line/paragraph separators, and lines that imitate a field.
CONTROLS = {
    "nul": "\x00",
    "bell": "\x07",
    "backspace": "\x08",
    "del": "\x7f",
    "c1 nel": "\x85",
    "c1 csi": "\x9b",
    "cr": "\r",
    "ansi clear": "\x1b[2J",
    "ansi hyperlink": "\x1b]8;;https://x\x1b\\",
    "bidi lro": "\u202d",
    "bidi rlo": "\u202e",
    "bidi lre": "\u202a",
    "bidi rli": "\u2067",
    "bidi pdi": "\u2069",
    "zero width space": "\u200b",
    "zero width joiner": "\u200d",
    "bom": "\ufeff",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
}
FORGED = ("\nAction: read-only", "\nRisk: none", "\r\nAllowed: yes")
FIELDS = ("Action:", "Risk:", "Allowed:")


def hidden(text: str) -> list[str]:
    """Characters of ``text`` a reader would not see as printed (line breaks aside)."""
    return [
        c
        for c in text
        if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    ]


def request(name: str) -> PermissionRequest:
    return PermissionRequest(
        call_id="c1",
        tool_name="bash",
        title=f"bash: terraform apply {name}",
        kind="execute",
        input={"command": f"terraform apply {name}", "argv": ["terraform", "apply", name]},
        options=list(PER_CALL_OPTIONS),
        reason=f"It applies.\n{printable(name)}",
        danger=True,
        review={"text": f"Apply of the saved plan {printable(name)}"},
    )


def plan_with(address: str):
    """A plan deleting ``address``, whose policy check (checkov's id) is named the same: the
    apply question names the failed checks, never the rows (the plan table has them)."""
    change = {"address": address, "type": "terraform_data", "name": "x", "mode": "managed"}
    change["change"] = {"actions": ["delete"], "before": {}, "after": None}
    plan = parse_plan({"resource_changes": [change]}, values=set())
    plan.checks = [{"check_id": address, "name": "check", "address": address}]
    return plan


@pytest.mark.parametrize("control", list(CONTROLS.values()), ids=list(CONTROLS))
@pytest.mark.parametrize("place", ["start", "middle", "end"])
def test_no_control_character_reaches_any_front(control: str, place: str):
    name = {"start": control + "p.tfplan", "middle": "p" + control + ".tfplan"}.get(
        place, "p.tfplan" + control
    )
    html = label_html(request(name), danger=True)
    assert hidden(html) == [], html
    params = request_params("s1", request(name))
    tool_call = params["toolCall"]
    assert hidden(tool_call["title"]) == [] and "\n" not in tool_call["title"]
    assert hidden(tool_call["content"][0]["content"]["text"]) == []
    body = question_text(plan_with(f'terraform_data.x["{name}"]'))
    assert hidden(body) == []


@pytest.mark.parametrize("forged", FORGED)
def test_a_name_cannot_forge_a_field(forged: str):
    body = question_text(plan_with(f'terraform_data.x["{forged}"]'))
    assert not any(line.startswith(FIELDS) for line in body.split("\n"))
    params = request_params("s1", request(forged))
    text = params["toolCall"]["content"][0]["content"]["text"]
    assert not any(line.startswith(FIELDS) for line in text.split("\n"))
    assert "\n" not in params["toolCall"]["title"]
    # The kernel's box: the title and the reason keep the name on its line.
    for danger in (False, True):
        html = label_html(request(forged), danger=danger)
        assert not any(line.startswith(FIELDS) for line in html.split("\n"))


def test_control_a_normal_name_is_shown_unchanged():
    name = "plans/prod-eu_1.tfplan"
    params = request_params("s1", request(name))
    assert params["toolCall"]["title"] == f"bash: terraform apply {name}"
    assert name in json.dumps(params) and name in label_html(request(name), danger=True)
    assert 'terraform_data.x["élan 🚀"]' in question_text(plan_with('terraform_data.x["élan 🚀"]'))
    script = "cd infra\n\tterraform plan -out=p.tfplan"
    assert shown_lines(script) == script  # a script keeps its lines and tabs
