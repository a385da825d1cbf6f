"""The forge package's parts without a forge: which forge a remote is on and its API
base, the token the broker binds to the API host, the body within GitHub's limit for a
10,000-change plan, the files a session changed, the notebook masked."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from iac_kernel.egress import broker
from iac_kernel.events import TextDelta, ToolCallInput, ToolCallResult, UserMessage
from iac_kernel.forge.body import MAX_BODY, BodyParts, build
from iac_kernel.forge.clients import api_token
from iac_kernel.forge.notebook import session_notebook
from iac_kernel.forge.remote import GITHUB, GITLAB, ForgeError, forge_of
from iac_kernel.terraform.plan import Plan, PlanFile, ResourceChange
from iac_kernel.tools.pull_request import session_changes
from iac_kernel.tools.registry import build_tools


@pytest.mark.parametrize(
    ("url", "env", "forge", "api", "project"),
    [
        ("https://github.com/octo/infra.git", {}, GITHUB, "https://api.github.com", "octo/infra"),
        ("git@github.com:octo/infra.git", {}, GITHUB, "https://api.github.com", "octo/infra"),
        (
            "https://ghe.corp.example/team/net.git",
            {"GH_HOST": "ghe.corp.example"},
            GITHUB,
            "https://ghe.corp.example/api/v3",
            "team/net",
        ),
        (
            "ssh://git@ghe.corp.example:2222/team/net.git",
            {"GH_HOST": "ghe.corp.example", "GITHUB_API_URL": "https://ghe.corp.example/api/v3/"},
            GITHUB,
            "https://ghe.corp.example/api/v3",
            "team/net",
        ),
        (
            "http://127.0.0.1:8080/octo/infra.git",
            {"GH_HOST": "127.0.0.1:8080"},
            GITHUB,
            "http://127.0.0.1:8080/api/v3",
            "octo/infra",
        ),
        ("https://gitlab.com/g/sub/p.git", {}, GITLAB, "https://gitlab.com", "g/sub/p"),
        (
            "https://code.example/gitlab/g/p.git",
            {"GITLAB_HOST": "https://code.example/gitlab"},
            GITLAB,
            "https://code.example/gitlab",
            "g/p",
        ),
    ],
)
def test_the_forge_and_its_api_come_from_the_remote(url, env, forge, api, project):
    remote = forge_of("origin", url, env)
    assert (remote.forge, remote.api_url, remote.project) == (forge, api, project)


def test_a_github_api_url_for_another_host_is_not_taken():
    """``GITHUB_API_URL`` left over from another forge never sends the token elsewhere."""
    env = {"GH_HOST": "ghe.corp.example", "GITHUB_API_URL": "https://api.github.com"}
    remote = forge_of("origin", "https://ghe.corp.example/a/b.git", env)
    assert remote.api_url == "https://ghe.corp.example/api/v3"


@pytest.mark.parametrize(
    ("url", "env", "said"),
    [
        ("https://git.example.org/a/b.git", {}, "neither GitHub nor GitLab"),
        ("/srv/git/infra.git", {}, "local path"),
        ("file:///srv/git/infra.git", {}, "not on a forge"),
        ("https://github.com/justone", {}, "names no owner/repository"),
    ],
)
def test_a_remote_on_no_known_forge_is_one_line(url, env, said):
    with pytest.raises(ForgeError) as error:
        forge_of("origin", url, env)
    assert said in str(error.value) and "\n" not in str(error.value)


def test_the_token_is_the_one_bound_to_the_api_host(tmp_path: Path):
    env = {
        "GITHUB_TOKEN": "ghp_" + "a" * 36,
        "GH_HOST": "ghe.corp.example",
        "GH_ENTERPRISE_TOKEN": "ghp_" + "b" * 36,
        "GITLAB_TOKEN": "glpat-" + "c" * 20,
    }
    made = broker.prepare(env, home=tmp_path / "home", folder=tmp_path / "broker")
    github = forge_of("origin", "https://github.com/o/r.git", env)
    enterprise = forge_of("origin", "https://ghe.corp.example/o/r.git", env)
    gitlab = forge_of("origin", "https://gitlab.com/o/r.git", env)
    assert api_token(github, made).name == "GITHUB_TOKEN"
    assert api_token(github, made).value == env["GITHUB_TOKEN"]
    assert api_token(enterprise, made).value == env["GH_ENTERPRISE_TOKEN"]
    assert api_token(gitlab, made).value == env["GITLAB_TOKEN"]
    # a token is never offered to a host it is not bound to
    only_github = broker.prepare(
        {"GITHUB_TOKEN": env["GITHUB_TOKEN"], "GH_HOST": "ghe.corp.example"},
        home=tmp_path / "home",
        folder=tmp_path / "broker2",
    )
    with pytest.raises(ForgeError, match=r"no GitHub token is bound to ghe\.corp\.example:443"):
        api_token(enterprise, only_github)
    assert "ghp_" not in repr(api_token(github, made))  # a token never shows in a repr


def _big_plan(creates: int, deletes: int, replaces: int) -> Plan:
    resources = [
        ResourceChange(f"aws_s3_bucket.c[{i}]", "create", "aws_s3_bucket") for i in range(creates)
    ]
    resources += [
        ResourceChange(f"aws_db_instance.d[{i}]", "delete", "aws_db_instance")
        for i in range(deletes)
    ]
    resources += [
        ResourceChange(f"aws_instance.r[{i}]", "replace", "aws_instance", replace_paths=["ami"])
        for i in range(replaces)
    ]
    counts = {"create": creates, "delete": deletes, "replace": replaces}
    return Plan(file=PlanFile("tfplan", "ab" * 32, 10, 0.0), counts=counts, resources=resources)


def test_a_ten_thousand_change_plan_fits_with_its_destroys_first():
    plan = _big_plan(9_700, 200, 100)
    link = "https://ghe.example/o/r/blob/b/.iac-kernel/runs/b.ipynb"
    body = build(
        BodyParts("t", "Why: growth.", ["main.tf"], plan, rule="2 approvals", notebook=link)
    )
    assert len(body) <= MAX_BODY
    assert "**300 to destroy** (100 replaced), 0 to change, 9800 to add" in body
    assert f"SHA-256 `{'ab' * 32}`" in body
    table = [line for line in body.splitlines() if line.startswith("| `")]
    # every destroy and replacement is in the table, before any create
    assert all("replace" in line or "delete" in line for line in table[:300])
    assert len(table) < 10_000 and "create" in table[-1]
    assert "more rows not shown here" in body and link in body
    assert "2 approvals" in body and body.startswith("Why: growth.")


def test_even_destroys_alone_over_the_limit_are_counted_and_linked():
    plan = _big_plan(0, 10_000, 0)
    body = build(BodyParts("t", "s", [], plan, notebook="NB"))
    assert len(body) <= MAX_BODY
    assert "of them destroys or replacements" in body and "(NB)" in body


def test_a_huge_summary_never_crowds_out_the_plan():
    plan = _big_plan(3, 1, 0)
    body = build(BodyParts("t", "x" * 200_000, [], plan))
    assert len(body) <= MAX_BODY and "aws_db_instance.d[0]" in body


def test_session_changes_are_the_edit_calls_that_did_not_fail(tmp_path: Path):
    tools = {tool.name: tool for tool in build_tools()}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "a",
                    "name": "write_file",
                    "input": {"path": "new.tf", "content": "x"},
                },
                {
                    "type": "tool_use",
                    "id": "b",
                    "name": "edit_file",
                    "input": {"path": "main.tf", "old_string": "1", "new_string": "2"},
                },
                {
                    "type": "tool_use",
                    "id": "c",
                    "name": "edit_file",
                    "input": {"path": "bad.tf", "old_string": "1", "new_string": "2"},
                },
                {"type": "tool_use", "id": "d", "name": "read_file", "input": {"path": "read.tf"}},
                {"type": "tool_use", "id": "e", "name": "write_file", "input": {"path": 3}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "b", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "c", "content": "no", "is_error": True},
                {"type": "tool_result", "tool_use_id": "d", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "e", "content": "no", "is_error": True},
            ],
        },
    ]
    assert session_changes(messages, tools, tmp_path) == [tmp_path / "new.tf", tmp_path / "main.tf"]


def test_the_notebook_is_masked_and_valid(monkeypatch: pytest.MonkeyPatch):
    secret = "AnotherS3cretValue-0099-abcdef"
    monkeypatch.setenv("SERVICE_API_KEY", secret)
    events = [
        UserMessage(f"use {secret} and plan"),
        TextDelta("Reading."),
        ToolCallInput("c1", "bash", "bash: cat x", "execute", {"command": "cat x"}),
        ToolCallResult("c1", "bash", "completed", f"db password is planted-value and {secret}"),
        TextDelta("Done."),
    ]
    data = session_notebook(events, {"planted-value"}, _big_plan(2, 1, 0), "A title")
    book = nbformat.reads(data.decode(), as_version=4)
    text = json.dumps(book)
    assert secret not in text and "planted-value" not in text
    assert "[REDACTED" in text and "(sensitive)" in text
    assert [c.cell_type for c in book.cells] == ["markdown", "code", "markdown"]
    assert "aws_db_instance.d[0]" in book.cells[-1].source  # the whole table at the end
