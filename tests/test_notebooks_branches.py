"""Every runbook's "denied" branch (notebooks/scripts/*.json) fits both ways a call is
not approved: a person rejecting its question in JupyterLab, and a headless run whose
policy denies it (issue 24 point 8). So no branch says the reader refused: the text
says the call was not approved (and may say how to approve it in JupyterLab)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks" / "scripts"
#: Words that assume a person answered.
ASSUMES = re.compile(r"\byou (refused|rejected|denied)\b", re.I)


def denied_texts(value: Any) -> list[str]:
    """The texts of every ``denied`` branch under ``value``."""
    found: list[str] = []

    def texts(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "text" and isinstance(item, str):
                    found.append(item)
                else:
                    texts(item)
        elif isinstance(node, list):
            for item in node:
                texts(item)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "denied":
                    texts(item)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return found


def test_denied_branches_fit_a_reject_and_a_headless_denial() -> None:
    checked = 0
    for script in sorted(SCRIPTS.glob("*.json")):
        for text in denied_texts(json.loads(script.read_text())):
            checked += 1
            assert not ASSUMES.search(text), f"{script.name}: {text[:120]}"
    assert checked >= 20, checked  # the runbooks have many such branches


def test_the_check_catches_a_branch_that_assumes_a_person() -> None:
    script = {"turns": [{"on": {"denied": {"text": "You refused the plan."}}}]}
    [text] = denied_texts(script)
    assert ASSUMES.search(text)
