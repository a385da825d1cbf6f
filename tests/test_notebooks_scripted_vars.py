"""Scripted-model ``vars``: notebook parameters given in a prompt steer later tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iac_kernel.models.base import MessageDone, ModelRequest
from iac_kernel.models.scripted import Script, ScriptedModel, ScriptError

PLAN = "./bin/terraform -chdir=envs/{{environment}} plan"
SCRIPT = {
    "vars": {
        "environment": {"pattern": r"environment\s*=\s*\"?([\w.-]+)", "default": "prod"},
        "lock": {"pattern": r"ID:\s+([0-9a-f-]{8,})", "default": "LOCK_ID"},
    },
    "exchanges": [
        {"match": "parameters", "turns": [{"text": "Target: {{environment}}."}]},
        {"match": "unlock", "turns": [{"text": "force-unlock {{lock}}"}]},
        {
            "match": "plan",
            "turns": [
                {
                    "text": "Planning {{environment}}; {{unknown}} stays.",
                    "tool_use": [
                        {
                            "name": "bash",
                            "input": {
                                "command": "./bin/terraform -chdir=envs/{{environment}} plan"
                            },
                        }
                    ],
                }
            ],
        },
    ],
}


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


async def done(model: ScriptedModel, messages: list[dict]) -> MessageDone:
    events = [e async for e in model.stream(ModelRequest(system="", messages=messages))]
    assert isinstance(events[-1], MessageDone)
    return events[-1]


@pytest.fixture
def model(tmp_path: Path) -> ScriptedModel:
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(SCRIPT))
    return ScriptedModel(Script.load(path))


async def test_default_value_when_no_prompt_sets_it(model):
    reply = await done(model, [user("run the plan")])
    assert reply.content[0]["text"] == "Planning prod; {{unknown}} stays."
    assert reply.content[1]["input"]["command"] == "./bin/terraform -chdir=envs/prod plan"


async def test_latest_prompt_setting_the_value_wins(model):
    messages = [
        user('Parameters: environment = "prod"'),
        assistant("Target: prod."),
        user('Parameters (injected by papermill): environment = "staging"'),
        assistant("Target: staging."),
        user("now run the plan"),
    ]
    reply = await done(model, messages)
    assert reply.content[1]["input"]["command"] == "./bin/terraform -chdir=envs/staging plan"


async def test_value_in_the_matching_prompt_itself(model):
    reply = await done(model, [user("parameters: environment = qa-2")])
    assert reply.content[0]["text"] == "Target: qa-2."


async def test_value_from_a_tool_result(model):
    tool_result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "Error acquiring the state lock\nLock Info:\n  ID:        6f1d8a52-00aa\n",
    }
    messages = [
        user("run the plan"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash"}]},
        {"role": "user", "content": [tool_result]},
        assistant("Locked."),
        user("unlock it"),
    ]
    assert (await done(model, messages)).content[0]["text"] == "force-unlock 6f1d8a52-00aa"
    assert (await done(model, [user("unlock it")])).content[0]["text"] == "force-unlock LOCK_ID"


@pytest.mark.parametrize(
    ("vars_spec", "message"),
    [
        ([], "'vars' must be an object"),
        ({"env": {"default": "x"}}, "needs a 'pattern' string"),
        ({"env": {"pattern": "("}}, "pattern:"),
        ({"env": {"pattern": "no group"}}, "needs a group"),
    ],
)
def test_bad_vars_are_clear_errors(tmp_path: Path, vars_spec, message: str):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"vars": vars_spec, "exchanges": []}))
    with pytest.raises(ScriptError, match=message):
        Script.load(path)
