"""papermill runs the triage runbook headless with parameters; the policy decides, no hang."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

pm = pytest.importorskip("papermill")

from iac_kernel.papermill import HEADER, IacKernelTranslator  # noqa: E402 (registers it)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
TRIAGE = NOTEBOOKS / "04-incident-triage.ipynb"
LOCKS = json.loads((NOTEBOOKS / "workspaces/payments-deploy/.shim/locks.json").read_text())
CARD_MIME = "application/vnd.iac-kernel.toolcall+json"
#: A hang must fail the test, not block the suite.
EXECUTION_TIMEOUT = 120


def cards(nb) -> list[dict]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            card = out.get("data", {}).get(CARD_MIME)
            if card is not None:
                found.append(json.loads(card) if isinstance(card, str) else card)
    return found


def run_triage(tmp_path: Path, **parameters) -> nbformat.NotebookNode:
    out = tmp_path / "triage-out.ipynb"
    pm.execute_notebook(
        str(TRIAGE),
        str(out),
        kernel_name="iac-kernel",
        parameters=parameters,
        cwd=str(NOTEBOOKS),
        execution_timeout=EXECUTION_TIMEOUT,
        progress_bar=False,
    )
    return nbformat.read(out, as_version=4)


def test_parameter_reaches_the_agent_and_the_policy_decides(tmp_path: Path):
    nb = run_triage(tmp_path, environment="staging")

    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert injected[0].source == f'{HEADER}\n- environment = "staging"'

    staging = LOCKS["acme-terraform-state/payments-api/staging/terraform.tfstate"]
    prod = LOCKS["acme-terraform-state/payments-api/prod/terraform.tfstate"]
    shown = cards(nb)
    plan = next(c for c in shown if c["name"] == "bash" and " plan " in c["input"]["command"])
    # The shim really ran against envs/staging and answered with staging's lock.
    assert "-chdir=envs/staging" in plan["input"]["command"]
    assert "payments-api/staging/terraform.tfstate" in plan["output"]
    assert staging["ID"] in plan["output"] and prod["ID"] not in plan["output"]
    assert plan["status"] == "failed"  # the plan fails on the lock, as in the incident

    log = next(c for c in shown if "ci/logs/deploy-" in c["input"].get("command", ""))
    assert "deploy-staging.log" in log["input"]["command"] and log["status"] == "done"

    # headless_policy allow approved the ordinary commands but refused the per-call one.
    unlock = next(c for c in shown if "force-unlock" in c["input"].get("command", ""))
    assert unlock["status"] == "denied"
    assert staging["ID"] in unlock["input"]["command"]
    assert all(c["status"] in ("done", "failed") for c in shown if c is not unlock)
    assert nb.metadata["papermill"]["parameters"] == {"environment": "staging"}

    # Both parameters cells (the runbook's defaults, papermill's values) are read as
    # parameters: no model call, no agent text, and no turn in the session's history.
    tagged = [
        c
        for c in nb.cells
        if {"parameters", "injected-parameters"} & set(c.metadata.get("tags", []))
    ]
    assert len(tagged) == 2
    for cell in tagged:
        (output,) = cell.outputs
        assert "Runbook parameters" in output["data"]["text/markdown"]
        assert "no model call" in output["data"]["text/markdown"]
        assert not any(CARD_MIME in o.get("data", {}) for o in cell.outputs)


def test_translator_renders_prompt_text_that_cannot_become_a_magic():
    text = IacKernelTranslator.codify({"environment": "%config mode bypass", "count": 2})
    lines = text.splitlines()
    assert lines[0] == HEADER
    assert lines[1:] == ['- environment = "%config mode bypass"', "- count = 2"]
    assert not any(line.lstrip().startswith("%") for line in lines)


def test_translator_inspects_the_parameters_cell():
    cell = {"source": 'Runbook parameters:\n- environment = "prod"\n- retries = 3\nnot a parameter'}
    found = IacKernelTranslator.inspect(cell)
    assert [(p.name, p.inferred_type_name, p.default) for p in found] == [
        ("environment", "str", '"prod"'),
        ("retries", "int", "3"),
    ]
    triage = nbformat.read(TRIAGE, as_version=4)
    tagged = next(c for c in triage.cells if "parameters" in c.metadata.get("tags", []))
    assert [p.name for p in IacKernelTranslator.inspect(tagged)] == ["environment"]
