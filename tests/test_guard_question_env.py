"""Issue 22, point 5: the exec-time question says what will run - argv, folder, the
environment that retargets it and what it resolves to - in the gate's request, and so
in the notebook card, the ACP question and the stdin prompt."""

from __future__ import annotations

from pathlib import Path

from iac_kernel.agent.permissions import ALLOW_ONCE, PermissionGate, PermissionRequest
from iac_kernel.guard.approval.request import ExecRequest
from iac_kernel.guard.policy import target
from iac_kernel.guard.policy.rules import classify
from iac_kernel.kernel.ask.permission_ui import stdin_prompt
from iac_kernel.kernel.ask.questions import question_state
from iac_kernel.kernel.ask.widgets import label_html


def test_retargeting_env_and_what_it_resolves_to(tmp_path: Path, monkeypatch):
    (tmp_path / ".terraform").mkdir()
    (tmp_path / ".terraform" / "environment").write_text("staging\n")
    env = {"TF_WORKSPACE": "prod", "TF_VAR_token": "secret-x", "HOME": "/h", "PATH": "/bin"}
    assert target.retargeting_env(env) == {"TF_VAR_token": "***", "TF_WORKSPACE": "prod"}
    argv = ["terraform", "apply"]
    assert "Target: terraform workspace prod" in target.describe(
        "terraform", argv, str(tmp_path), env
    )
    assert target.terraform_workspace(argv, str(tmp_path), {}) == "staging"
    kube = tmp_path / "kc"
    kube.write_text("apiVersion: v1\ncurrent-context: prod-eu\n")
    assert target.kube_context("kubectl", ["kubectl", "get"], {"KUBECONFIG": str(kube)}).startswith(
        "prod-eu"
    )
    assert target.kube_context("kubectl", ["kubectl", "--context", "dev", "get"], {}) == (
        "dev (from --context)"
    )
    assert target.kube_context("helm", ["helm", "--kube-context=qa", "ls"], {}).startswith("qa")


async def test_every_front_shows_it(tmp_path: Path):
    argv = ["terraform", "apply"]
    request = ExecRequest("terraform", argv, str(tmp_path), classify("terraform", argv))
    request.env = {"TF_WORKSPACE": "prod", "TF_CLI_ARGS_apply": "-destroy"}
    request.target = ["Environment: TF_CLI_ARGS_apply=-destroy, TF_WORKSPACE=prod"]
    request.target.append("Target: terraform workspace prod")
    asked: list[PermissionRequest] = []

    async def ask(question: PermissionRequest) -> str:
        asked.append(question)
        return ALLOW_ONCE

    gate = PermissionGate(mode="bypass")
    assert (await gate.check_exec(request, "c1", "bash", ask)).allowed
    (question,) = asked
    assert "TF_WORKSPACE=prod" in question.reason and "workspace prod" in question.reason
    assert str(tmp_path) in question.reason and "terraform apply" in question.reason
    assert question.input["env"] == request.env
    assert "TF_WORKSPACE=prod" in label_html(question, danger=True)
    assert "TF_WORKSPACE=prod" in question_state("q", question, "open")["reason"]
    assert "TF_WORKSPACE=prod" in stdin_prompt(question)

    from iac_kernel.acp.session.permissions import request_params

    params = request_params("s1", question)
    call = params["toolCall"]
    assert call["rawInput"]["env"]["TF_WORKSPACE"] == "prod"
    assert "TF_WORKSPACE=prod" in call["_meta"]["iac_kernel"]["reason"]
