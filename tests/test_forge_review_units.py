"""The parts of an apply bound to a pull request without a forge (issue 44, items 2-3):
which request a call names, which plan a request carries (and whose word counts), who
approved it, the one reason an apply is refused, the configuration a plan file holds
against a commit's files, and the ``%pr review`` / ``%pr apply`` prompts."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from iac_kernel.forge.body import BodyParts, build, plan_marker, plan_markers
from iac_kernel.forge.clients import Note, PullFacts
from iac_kernel.forge.remote import ForgeError, forge_of
from iac_kernel.forge.review import (
    PlanConfig,
    PullRequestApply,
    approvers,
    blob_id,
    carried_plan,
    difference,
    judge,
    main_top,
    number_of,
    plan_config,
    repository_folders,
)
from iac_kernel.terraform.plan import Plan, PlanFile, ResourceChange
from iac_kernel.terraform.review import ApprovedPlan
from iac_kernel.tools.pull_request import subcommand_prompt

GITHUB = forge_of("origin", "https://ghe.example/octo/infra.git", {"GH_HOST": "ghe.example"})
GITLAB = forge_of("origin", "https://gitlab.com/g/infra.git", {})
SHA, OTHER = "a" * 64, "b" * 64
HEAD, OLD, MERGED = "1" * 40, "2" * 40, "3" * 40


def facts(**changes) -> PullFacts:
    """Pull request #7 by alice, planned and approved by bob at HEAD, merged."""
    made = PullFacts(
        number=7,
        url="https://ghe.example/octo/infra/pull/7",
        state="merged",
        author="alice",
        head=HEAD,
        head_ref="topic",
        base="main",
        merge_commit=MERGED,
        mergeable=None,
        approvals=(("bob", HEAD),),
        changes_requested=(),
        notes=(Note("alice", f"{plan_marker(SHA, HEAD)}\nThe change."),),
        viewer="alice",
    )
    return replace(made, **changes)


@pytest.mark.parametrize(
    ("given", "number"),
    [(7, 7), ("7", 7), ("#7", 7), (" !7 ", 7), ("https://ghe.example/octo/infra/pull/7", 7)],
)
def test_a_request_is_named_by_number_or_address(given, number):
    assert number_of(given, GITHUB) == number


def test_a_gitlab_address():
    assert number_of("https://gitlab.com/g/infra/-/merge_requests/12", GITLAB) == 12


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("seven", "'seven' is not a pull request's number (7) or address"),
        (0, "0 is not a pull request's number (they start at 1)"),
        (True, "pull_request must be a pull request's number or address, not True"),
        (1.5, "pull_request must be a pull request's number or address, not 1.5"),
        ("https://ghe.example/octo/other/pull/7", "is not a pull request of octo/infra"),
        ("https://github.com/octo/infra/pull/7", "is not a pull request of octo/infra"),
        ("https://ghe.example/octo/infra/issues/7", "is not the address of a pull request"),
    ],
)
def test_bad_request_names_are_one_line(given, said):
    with pytest.raises(ForgeError) as caught:
        number_of(given, GITHUB)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_the_marker_round_trips_and_leads_the_body():
    plan = Plan(file=PlanFile("tfplan", SHA, 10, 0.0))
    plan.resources = [ResourceChange("terraform_data.a", "terraform_data", "a", "create")]
    body = build(BodyParts(title="t", summary="s" * 70_000, plan=plan, commit=HEAD))
    assert body.startswith(plan_marker(SHA, HEAD))
    assert plan_markers(body) == [(SHA, HEAD)]
    assert not build(BodyParts(title="t", summary="s", plan=plan)).startswith("<!--")


def test_only_the_token_users_latest_marker_counts():
    # a marker anyone else writes is not the request's plan
    forged = Note("mallory", plan_marker(OTHER, HEAD))
    assert carried_plan(facts(notes=(*facts().notes, forged))) == (SHA, HEAD)
    # a later plan comment of the token's user replaces the body's
    again = Note("alice", f"### Plan\n{plan_marker(OTHER, MERGED)}")
    assert carried_plan(facts(notes=(*facts().notes, again))) == (OTHER, MERGED)
    # a request someone else opened: its body's marker does not count
    assert carried_plan(facts(notes=(Note("carol", plan_marker(SHA, HEAD)),))) is None


def test_approvals_count_from_others_on_the_head_only():
    given = (("alice", HEAD), ("bob", OLD), ("carol", HEAD), ("dave", None))
    assert approvers(facts(approvals=given)) == ["carol", "dave"]
    # the one applying does not approve their own apply either
    assert approvers(facts(approvals=given, viewer="carol")) == ["dave"]


@pytest.mark.parametrize(
    ("changes", "sha", "said"),
    [
        ({"state": "closed"}, SHA, "pull request #7 is closed without being merged"),
        ({"notes": (Note("alice", "no marker"),)}, SHA, "pull request #7 carries no plan"),
        ({}, OTHER, f"(sha256 {OTHER[:12]}) is not the plan pull request #7 carries"),
        ({"head": OLD}, SHA, f"commit {OLD[:12]} came to pull request #7 after its plan"),
        ({"changes_requested": ("carol",)}, SHA, "carol asked for changes on pull request #7"),
        ({"approvals": (("alice", HEAD),)}, SHA, "no approval of its head 111111111111 by anyone"),
        ({"approvals": (("bob", OLD),)}, SHA, "no approval of its head"),
        ({"state": "open", "merge_commit": None}, SHA, "is not merged yet"),
    ],
)
def test_the_one_reason_of_a_refusal(changes, sha, said):
    refusal, commit = judge(facts(**changes), GITHUB, sha, allow_unmerged=False)
    assert refusal is not None and said in refusal and commit == ""


def test_a_merged_request_is_checked_at_its_merge_commit():
    assert judge(facts(), GITHUB, SHA, allow_unmerged=False) == (None, MERGED)


def test_before_the_merge_only_when_allowed_and_mergeable():
    unmerged = facts(state="open", merge_commit=None, mergeable=True)
    assert judge(unmerged, GITHUB, SHA, allow_unmerged=True) == (None, HEAD)
    for mergeable, said in ((None, "has not said yet"), (False, "says no")):
        refusal, _ = judge(replace(unmerged, mergeable=mergeable), GITHUB, SHA, True)
        assert refusal is not None and said in refusal


def plan_zip(path: Path, modules: list[dict], files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("tfplan", b"")
        archive.writestr("tfconfig/modules.json", json.dumps(modules))
        for name, data in files.items():
            archive.writestr(f"tfconfig/{name}", data)
    return path


def test_the_plans_configuration_against_a_commits(tmp_path: Path):
    modules = [
        {"Key": "", "Dir": "."},
        {"Key": "net", "Source": "./modules/net", "Dir": "modules/net"},
        {"Key": "vpc", "Source": "terraform-aws-modules/vpc/aws", "Dir": ".terraform/modules/vpc"},
        {"Key": "vpc.sub", "Source": "./sub", "Dir": ".terraform/modules/vpc/sub"},
    ]
    main, net = b'resource "terraform_data" "a" {}\n', b"# net\n"
    config = plan_config(
        plan_zip(
            tmp_path / "p", modules, {"m-/main.tf": main, "m-net/net.tf": net, "m-vpc/x.tf": b""}
        )
    )
    assert set(config.modules) == {".", "modules/net"}  # the registry module is pinned by main.tf
    places = repository_folders(config, "infra")
    assert places == {".": "infra", "modules/net": "infra/modules/net"}
    workdir = tmp_path / "infra"
    workdir.mkdir()
    (workdir / "terraform.tfvars").write_text("x = 1\n")
    listing = {
        "infra": {"main.tf": blob_id(main), "README.md": "0" * 40, ".#main.tf": "0" * 40},
        "infra/modules/net": {"net.tf": blob_id(net)},
    }
    assert difference(config, places, listing, workdir, "sha1") is None
    changed = {**listing, "infra": {**listing["infra"], "main.tf": "0" * 40}}
    assert difference(config, places, changed, workdir, "sha1") == "infra/main.tf differs"
    extra = {**listing, "infra/modules/net": {"net.tf": blob_id(net), "b.tf.json": "0" * 40}}
    said = "infra/modules/net/b.tf.json is in the commit, not in the plan"
    assert difference(config, places, extra, workdir, "sha1") == said
    gone = {**listing, "infra": {}}
    said = "infra/main.tf is in the plan, not in the commit"
    assert difference(config, places, gone, workdir, "sha1") == said
    # the var files terraform reads by itself, where the commit holds them
    other_vars = {**listing, "infra": {**listing["infra"], "terraform.tfvars": "0" * 40}}
    said = "terraform.tfvars differs from the folder's, which the plan was made with"
    assert difference(config, places, other_vars, workdir, "sha1") == said
    same_vars = {**listing, "infra": {**listing["infra"], "terraform.tfvars": blob_id(b"x = 1\n")}}
    assert difference(config, places, same_vars, workdir, "sha1") is None


def test_blob_ids_are_gits(tmp_path: Path):
    data = b"hello\n"
    done = subprocess.run(
        ["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True
    )
    assert blob_id(data) == done.stdout.decode().strip()


def test_a_module_outside_the_repository_cannot_be_compared():
    config = PlanConfig({".": {}, "../shared": {}})
    with pytest.raises(ForgeError, match="outside the repository"):
        repository_folders(config, ".")


def test_a_plan_without_a_configuration_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ForgeError, match="holds no configuration to compare"):
        plan_config(bad)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("tfplan", b"")
    (tmp_path / "nosnap").write_bytes(buffer.getvalue())
    with pytest.raises(ForgeError, match="holds no configuration to compare"):
        plan_config(tmp_path / "nosnap")


def test_a_scratch_worktree_writes_into_its_main_repository(tmp_path: Path):
    main = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    linked = main / ".git" / "iac-kernel" / "reviews" / "x"
    linked.mkdir(parents=True)
    (main / ".git" / "worktrees" / "x").mkdir(parents=True)
    (main / ".git" / "worktrees" / "x" / "commondir").write_text("../..\n")
    (linked / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'x'}\n")
    assert main_top(linked) == main.resolve()
    assert main_top(main) == main


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        ("review 7", ["terraform_plan", '{"pull_request": 7}']),
        ("review #7 infra", ["terraform_plan", '{"pull_request": 7, "dir": "infra"}']),
        ("apply !7 infra/tfplan", ["terraform_apply", '"pull_request": 7', "infra/tfplan"]),
        (
            "apply https://h/o/r/pull/7",
            ["terraform_apply", '"pull_request": "https://h/o/r/pull/7"'],
        ),
    ],
)
def test_pr_review_and_apply_ask_the_agent_for_the_bound_calls(args, wanted):
    prompt = subcommand_prompt(args)
    assert prompt is not None
    for text in wanted:
        assert text in prompt


@pytest.mark.parametrize("args", ["", "Review the tags", "apply the fix", "review", "Bump it"])
def test_other_pr_words_are_a_title(args):
    assert subcommand_prompt(args) is None


def test_the_result_comment_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    secret_env = "Sup3rSecretV4lue-for-the-test-0042"
    monkeypatch.setenv("DEPLOY_PASSWORD", secret_env)
    sensitive = "db-password-from-the-plan-77"
    plan = Plan(file=PlanFile("tfplan", SHA, 10, 0.0))
    approved = ApprovedPlan(
        tmp_path / "tfplan", "tfplan", SHA, tmp_path / "copy", plan, {sensitive}
    )
    approved.binding = SimpleNamespace(host_workdir=tmp_path)
    bound = PullRequestApply(pull=None, folder=".", requirement=None, commit=MERGED)  # type: ignore[arg-type]
    output = f"Error: bad value {sensitive}\n\nwith {secret_env}\n"
    comment = bound.result_comment("failed", output, approved)
    assert comment.startswith(f"**Failed** by iac-kernel: the plan with SHA-256 `{SHA}`")
    assert f"`{MERGED[:12]}`" in comment and "- bad value" in comment
    assert sensitive not in comment and secret_env not in comment
    refused = bound.result_comment(
        "refused", "Not applied: the head moved. Nothing was run.", approved
    )
    assert "Not applied: the head moved." in refused and "Nothing was applied." in refused
