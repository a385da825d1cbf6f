"""Runbook parameters cells are read as parameters (kernel/magics/cell.py), not prompts."""

from __future__ import annotations

from iac_kernel.kernel.magics.cell import parameters_block, parameters_markdown, parameters_of
from iac_kernel.papermill import HEADER, IacKernelTranslator


def test_the_runbook_cell_and_papermills_injected_cell_are_parameters() -> None:
    assert parameters_of('Runbook parameters:\n- environment = "prod"') == {"environment": "prod"}
    injected = IacKernelTranslator.codify({"environment": "staging", "replicas": 3})
    assert injected.startswith(HEADER)
    assert parameters_of(injected) == {"environment": "staging", "replicas": 3}


def test_prompts_that_only_look_alike_stay_prompts() -> None:
    for text in (
        "Runbook parameters:",  # no values
        'Runbook parameters:\n- environment = "prod"\nNow deploy it.',  # a prompt after them
        '- environment = "prod"',  # no heading
        "Runbook parameters:\n- environment = prod",  # not JSON
        "What are the runbook parameters: environment?",
    ):
        assert parameters_of(text) is None, text


def test_the_block_the_agent_reads_round_trips() -> None:
    values = {"environment": "staging", "note": 'say "hi"'}
    assert parameters_of(parameters_block(values)) == values
    assert "no model call" in parameters_markdown(values)
