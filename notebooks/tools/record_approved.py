"""Record a runbook whose committed run includes a person's approval (07-plan-review-apply).

Usage (from the repository root)::

    python notebooks/tools/record_approved.py notebooks/07-plan-review-apply.ipynb
    python notebooks/tools/record_approved.py notebooks/06-drift-check.ipynb   # no approvals

Like ``run_notebooks.py`` (headless, fresh session store, no Anthropic credentials, policy
checks off), except for cells tagged ``approve-in-recording``: those run with
``allow_stdin`` true, as in JupyterLab, so the kernel shows its Allow / Reject buttons, and
this script answers the question by clicking **Allow once** on the button widget, through
the same comm message a browser sends (first typing the name a typed confirmation asks
for, as its field's placeholder says). Nothing else is answered for the person: every other
cell runs exactly as under nbval. Those cells are also tagged ``nbval-ignore-output``: a
headless re-run cannot click, so there the apply is refused and the output differs.

Machine paths in the saved outputs (the checkout, the temporary session store) are replaced
as ``nbval-sanitize.cfg`` replaces them, so the committed notebook holds no absolute paths.
"""

from __future__ import annotations

import argparse
import configparser
import re
import sys
from pathlib import Path
from typing import Any

from nbclient import NotebookClient
from run_notebooks import execute  # this directory (scripts run from here)

NOTEBOOKS = Path(__file__).resolve().parent.parent
TAG = "approve-in-recording"
ALLOW = "Allow once"
#: Sanitized in the saved outputs: machine paths, and the stand-in forge's port (08).
PATH_SECTIONS = ("session-stores", "checkout-paths", "forge-ports")


class ApprovingClient(NotebookClient):
    """Runs tagged cells as an interactive frontend would, clicking Allow once."""

    clicked: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, on_cell_execute=self._before_cell, **kwargs)
        self._approving = False

    def _before_cell(self, cell: Any, cell_index: int) -> None:
        self._approving = TAG in cell.get("metadata", {}).get("tags", [])
        self.kc.allow_stdin = self._approving

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        output = super().process_message(msg, cell, cell_index)
        typed = typed_confirmation(msg) if self._approving else None
        if typed is not None:  # the form's field comes before the buttons
            self._send(msg, {"method": "update", "state": {"value": typed}, "buffer_paths": []})
        if self._approving and button_named(msg, ALLOW):
            self._send(msg, {"method": "custom", "content": {"event": "click"}})
            self.clicked += 1
        return output

    def _send(self, opened: dict[str, Any], data: dict[str, Any]) -> None:
        """What a browser sends to the widget ``opened`` made (typing, a click)."""
        content = {"comm_id": opened["content"]["comm_id"], "data": data}
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", content))


def typed_confirmation(msg: dict[str, Any]) -> str | None:
    """The name a typed confirmation's Text field asks for ("type NAME to approve": a
    destroy, or an apply that deletes), as a person reads it off the field."""
    if msg.get("msg_type") != "comm_open":
        return None
    state = msg["content"].get("data", {}).get("state", {})
    found = re.fullmatch(r"type (.+) to approve", str(state.get("placeholder", "")))
    return found.group(1) if state.get("_model_name") == "TextModel" and found else None


def button_named(msg: dict[str, Any], description: str) -> bool:
    if msg.get("msg_type") != "comm_open":
        return False
    state = msg["content"].get("data", {}).get("state", {})
    return state.get("_model_name") == "ButtonModel" and state.get("description") == description


def sanitizers() -> list[tuple[re.Pattern[str], str]]:
    config = configparser.ConfigParser()
    config.read(NOTEBOOKS / "nbval-sanitize.cfg")
    return [
        (re.compile(config[s]["regex"]), config[s]["replace"]) for s in PATH_SECTIONS if s in config
    ]


def sanitize(value: Any, rules: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, str):
        for pattern, replace in rules:
            value = pattern.sub(replace, value)
        return value
    if isinstance(value, dict):
        return {k: sanitize(v, rules) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v, rules) for v in value]
    return value


def record(path: Path, timeout: int) -> int:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = execute(nb, path, timeout, ApprovingClient)
    rules = sanitizers()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = nbformat.from_dict(sanitize(cell.outputs, rules))
    if "widgets" in nb.metadata:  # the questions' saved widget state says them too
        nb.metadata["widgets"] = sanitize(nb.metadata["widgets"], rules)
    nbformat.write(nb, path)
    return client.clicked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--timeout", type=int, default=180, help="seconds per cell")
    args = parser.parse_args(argv)
    import nbformat

    tagged = [
        c
        for c in nbformat.read(args.notebook, as_version=4).cells
        if TAG in c.get("metadata", {}).get("tags", [])
    ]
    clicked = record(args.notebook.resolve(), args.timeout)
    print(f"{args.notebook}: recorded, {clicked} question(s) answered with {ALLOW!r}")
    return 1 if tagged and not clicked else 0


if __name__ == "__main__":
    sys.exit(main())
