"""The displays of each tool call of a running turn, kept so a page can ask for them again.

A page loaded while a turn runs (a reload without a save, another tab) never saw the
displays the turn created before it loaded; the updates that follow name display ids it
does not know. The kernel keeps, per call, every display that belongs to it, in the order
they were created and in their latest form: the tool card, the plan card shown with an
apply's question, the question's buttons (then the record of the answer), and a plan card
after the result. The status comm's ``call_card`` request (:mod:`~iac_kernel.kernel.status`)
hands them out, so the page puts the whole card back in its cell.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Shown:
    """One display in its latest form."""

    display_id: str
    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def output(self) -> dict[str, Any]:
        """As a notebook output, with the display id it is updated by."""
        return {
            "output_type": "display_data",
            "data": copy.deepcopy(self.data),
            "metadata": copy.deepcopy(self.metadata),
            "displayId": self.display_id,
        }


class CallDisplays:
    """Per tool call of one turn: its displays, by creation order, latest form of each."""

    def __init__(self) -> None:
        self._calls: dict[str, list[Shown]] = {}
        self._owner: dict[str, str] = {}

    def shown(
        self,
        call_id: str,
        display_id: str,
        data: dict[str, Any],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record a display of ``call_id`` as it was just sent (created or updated)."""
        owner = self._owner.get(display_id)
        if owner is not None:
            for item in self._calls.get(owner, []):
                if item.display_id == display_id:
                    item.data, item.metadata = data, dict(metadata or {})
                    return
        self._owner[display_id] = call_id
        self._calls.setdefault(call_id, []).append(Shown(display_id, data, dict(metadata or {})))

    def call_of(self, display_id: str) -> str | None:
        """The call a display belongs to, or None."""
        return self._owner.get(display_id)

    def outputs(self, call_id: str) -> list[dict[str, Any]] | None:
        """Every display of the call as outputs in creation order; None for an unknown call."""
        shown = self._calls.get(call_id)
        return None if shown is None else [item.output() for item in shown]

    def find(
        self, call_id: str | None = None, display_id: str | None = None
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """The call named by ``call_id`` or owning ``display_id``, and its outputs."""
        if not call_id and display_id:
            call_id = self.call_of(display_id)
        if not call_id:
            return None
        outputs = self.outputs(call_id)
        return None if outputs is None else (call_id, outputs)
