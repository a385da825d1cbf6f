"""The exec-time verdict is one ordered list of steps (guard/policy/verdict.py): the first
step that gives a verdict decides, a helper of a guarded git is part of its run, a
redirect's reason joins the rules' own, and a read that no step catches runs unasked."""

from __future__ import annotations

from pathlib import Path

from iac_kernel.guard.policy.git_creds import Placement
from iac_kernel.guard.policy.grammar import CHANGE, READ, REFUSE, SKIP
from iac_kernel.guard.policy.verdict import STEPS, Exec, decide
from iac_kernel.guard.sandbox.bwrap import Layout


def _exec(argv: list[str], env: dict | None = None, **more) -> Exec:
    env = env or {}
    fields = dict(env=env, run_env=env, base_env={}, place=Placement(True), layout=None)
    fields |= dict(guard_dir=Path("/nonexistent"), peer=None) | more
    return Exec(argv[0], argv, "/ws", **fields)


async def test_a_read_no_step_catches_runs_unasked():
    assert (await decide(_exec(["kubectl", "get", "pods"]))).kind == READ


async def test_the_rules_ask_for_a_change():
    verdict = await decide(_exec(["kubectl", "delete", "pod", "web"]))
    assert verdict.kind == CHANGE and verdict.reason.startswith("kubectl delete")


async def test_a_redirect_asks_for_a_read_and_joins_the_reason_of_a_change():
    env = {"PYTHONPATH": "/tmp/x"}
    read = await decide(_exec(["aws", "s3", "ls"], env))
    assert read.kind == CHANGE and "PYTHONPATH" in read.reason
    change = await decide(_exec(["aws", "s3", "rm", "s3://b/k"], env))
    assert change.kind == CHANGE
    assert change.reason.startswith("aws s3 rm: deletes S3 objects; ") and "PYTHONPATH" in (
        change.reason
    )


async def test_a_helper_of_a_guarded_git_is_part_of_its_run():
    argv = ["git", "credential", "fill"]
    assert (await decide(_exec(argv))).kind == CHANGE  # from the shell: asked
    helper = Placement(True, helper=True, nested=True)
    assert (await decide(_exec(argv, place=helper))).kind == READ
    store = Placement(True, helper=True, nested=True, skip=True)
    assert (await decide(_exec(["git", "credential", "approve"], place=store))).kind == SKIP


async def test_a_process_of_another_call_is_refused_first(tmp_path: Path):
    layout = Layout(tmp_path, tmp_path, tmp_path / "guard", tmp_path / "bin")
    (tmp_path / "guard").mkdir()
    x = _exec(["kubectl", "delete", "pod", "web"], layout=layout, peer=1)
    verdict = await decide(x)
    assert verdict.kind == REFUSE and "its own call" in verdict.reason


def test_every_step_says_what_it_catches():
    for step in STEPS:
        assert step.__doc__ and len(step.__doc__.split()) > 8, step.__name__
