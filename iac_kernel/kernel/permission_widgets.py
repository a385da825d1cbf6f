"""The ipywidgets of a permission question: the answer buttons (Reject first for a danger
question), the form a question asks for, and a "Reject with note" field.

When the question carries a form (:mod:`~iac_kernel.kernel.form_ui`), its fields come
above the buttons and the approving buttons stay disabled until the form is answered
(a typed confirmation: until the workspace's name is typed exactly); an approval carries
the values, and one whose values do not answer the form (a stale view clicking a disabled
button) is a rejection. When the JupyterLab extension draws the question on the tool card
(``card_shown``), the card shows the form with its Allow and Reject buttons and answers
through the status channel: the box here then only offers "Reject with note" (no
second set of buttons, and none that could approve without the typed name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)
from iac_kernel.kernel.form_ui import FormWidgets, answers_form
from iac_kernel.kernel.question_text import button_label, is_danger, label_html

NOTE_BUTTON = "Reject with note"
BUTTON_STYLES = {
    ALLOW_ONCE: "success",
    ALLOW_ALWAYS: "info",
    REJECT_ONCE: "danger",
    REJECT_ALWAYS: "warning",
}


def button_order(request: PermissionRequest) -> list[str]:
    """Danger questions put Reject first; routine ones keep the gate's order."""
    if not is_danger(request):
        return list(request.options)
    return sorted(request.options, key=lambda o: 0 if o.startswith("reject") else 1)


class WidgetPrompt:
    """The buttons under a tool card (Reject first for danger questions), the form's fields,
    a "Reject with a note" field, and the future a click resolves."""

    def __init__(
        self,
        request: PermissionRequest,
        loop: asyncio.AbstractEventLoop,
        *,
        card_shown: bool = False,
    ):
        """``card_shown``: the frontend draws the question on the tool card (the
        JupyterLab extension), so the buttons come without a second copy of it."""
        import ipywidgets as widgets

        self.request = request
        self.loop = loop
        self.danger = is_danger(request)
        self.future: asyncio.Future[str] = loop.create_future()
        self.label = widgets.HTML("" if card_shown else label_html(request, self.danger))
        form = request.form
        #: The form's fields, when this box asks for them (not when the card does).
        self.form = FormWidgets(form) if form is not None and not card_shown else None
        options = button_order(request)
        if form is not None and card_shown:
            options = []  # the card's form has the answer buttons
        self.buttons = []
        self.approving: list[Any] = []
        for option in options:
            style = BUTTON_STYLES.get(option, "")
            if self.danger:
                style = "danger" if option == ALLOW_ONCE else ""
            label = button_label(request, option)
            button = widgets.Button(
                description=label,
                button_style=style,
                tooltip=f"{label}: {request.title}",
                layout=widgets.Layout(width="auto"),  # never a label cut to "Allow al…"
            )
            button.on_click(self._handler(option))
            self.buttons.append(button)
            if answers_form(option):
                self.approving.append(button)
        self.note = widgets.Text(placeholder="Why not? (the agent reads this)")
        note_button = widgets.Button(
            description=NOTE_BUTTON, tooltip="Reject once and tell the agent why"
        )
        note_button.on_click(self._note_handler())
        self.buttons.append(note_button)
        # No answer row when the card's form has the answer buttons.
        rows: list[Any] = [widgets.HBox(self.buttons[:-1])] if options else []
        rows.append(widgets.HBox([self.note, note_button]))
        if self.form is not None:
            rows.insert(0, self.form.box)
            self.form.on_change(self._follow_form)
            self._follow_form()
        self.box = widgets.VBox(rows if card_shown else [self.label, *rows])
        # The extension answers keys a / r in a box with this class (labextension/keys.ts).
        self.box.add_class("iac-question")
        if self.danger:
            self.box.add_class("iac-question-danger")

    def _follow_form(self) -> None:
        """Approving buttons are enabled only while the form is answered."""
        blocked = self.form is not None and self.form.problem() is not None
        for button in self.approving:
            button.disabled = blocked

    def _handler(self, option: str) -> Callable[[Any], None]:
        def clicked(_button: Any) -> None:
            values = self.form.values() if self.form is not None else None
            # A click may be dispatched on a subshell thread: hop to the turn's loop.
            self.loop.call_soon_threadsafe(self._resolve, option, "", values)

        return clicked

    def _note_handler(self) -> Callable[[Any], None]:
        def clicked(_button: Any) -> None:
            note = str(self.note.value or "").strip() or "(no reason given)"
            self.loop.call_soon_threadsafe(self._resolve, REJECT_ONCE, note, None)

        return clicked

    def _resolve(self, option: str, note: str, values: dict[str, Any] | None) -> None:
        if self.future.done():
            return
        if answers_form(option) and self.request.form is not None:
            values = values if values is not None else {}
            problem = self.request.form.mismatch(values)
            if problem is not None:  # a disabled button clicked from a stale view
                self.future.set_result(Answer(REJECT_ONCE, problem, values=values))
                return
            self.future.set_result(Answer(option, values=values))
            return
        self.future.set_result(Answer(option, note) if note else option)

    def bundle(self) -> dict[str, Any]:
        data = dict(self.box._repr_mimebundle_() or {})
        what = "DESTRUCTIVE, approve this one call?" if self.danger else "Permission needed:"
        data["text/plain"] = (
            f"{what} {self.request.title} ({self.request.reason}). Use the buttons "
            "in a frontend with ipywidgets; interrupt the kernel to cancel."
        )
        return data

    async def wait(self) -> str:
        return await self.future

    def close(self) -> None:
        """Close every widget model (buttons, boxes and their layout/style models)."""
        _close_tree(self.box)


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    for part in ("layout", "style"):
        model = getattr(widget, part, None)
        if model is not None and hasattr(model, "close"):
            model.close()
    widget.close()
