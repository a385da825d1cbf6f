"""The ipywidgets of a permission question: the answer buttons (Reject first for a danger
question), the fields of the form it asks for, and a "Reject with note" field.

A form (:class:`~iac_kernel.agent.forms.Form`: a typed confirmation of a destroy or a
production apply, or the agent's own question) comes above the buttons, which stay
disabled until it is answered; an approval carries the values, and one whose values do
not answer the form (a stale view clicking a disabled button) is a rejection. When the
JupyterLab extension draws the question on the tool card (``card_shown``), the card has
the form and the answer buttons, and the box here only offers "Reject with note".
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import Any

from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, Form, FormField
from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)
from iac_kernel.kernel.ask.questions import answers_form, button_label, button_order, reason_text
from iac_kernel.kernel.render import theme
from iac_kernel.textsafe import printable, shown_lines

#: Up to this many choices show as toggle buttons; more as a dropdown.
TOGGLE_MAX = 4
NOTE_BUTTON = "Reject with note"
#: The options whose labels grow with the command ("Always allow `terraform plan`, … …"):
#: they may wrap or be cut (the tooltip holds the whole label); the others never shrink.
LONG_OPTIONS = (ALLOW_ALWAYS, REJECT_ALWAYS)
#: The answer buttons' classes (labextension/style/base.css lets a long label wrap).
SHORT_CLASS, LONG_CLASS = "iac-answer", "iac-answer-long"
BUTTON_STYLES = {
    ALLOW_ONCE: "success",
    ALLOW_ALWAYS: "info",
    REJECT_ONCE: "danger",
    REJECT_ALWAYS: "warning",
}


def answer_layout(option: str) -> Any:
    """An answer button's layout: as wide as its label; only a long label may shrink (to
    the row's width, cut with an ellipsis where no stylesheet lets it wrap)."""
    import ipywidgets as widgets

    if option in LONG_OPTIONS:
        return widgets.Layout(width="auto", flex="0 1 auto", min_width="0")
    return widgets.Layout(width="auto", flex="0 0 auto")


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
        self.danger = request.danger
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
                layout=answer_layout(option),
            )
            button.add_class(LONG_CLASS if option in LONG_OPTIONS else SHORT_CLASS)
            button.on_click(lambda _button, option=option: self._clicked(option))
            self.buttons.append(button)
            if answers_form(option):
                self.approving.append(button)
        self.note = widgets.Text(placeholder="Why not? (the agent reads this)")
        note_button = widgets.Button(
            description=NOTE_BUTTON,
            tooltip="Reject once and tell the agent why",
            layout=answer_layout(REJECT_ONCE),
        )
        note_button.add_class(SHORT_CLASS)
        note_button.on_click(lambda _button: self._noted())
        self.buttons.append(note_button)
        # No answer row when the card's form has the answer buttons.
        # Rows wrap: a button that does not fit goes to the next line before anything is cut.
        wrap = {"flex_flow": "row wrap"}
        rows: list[Any] = [widgets.HBox(self.buttons[:-1], layout=wrap)] if options else []
        rows.append(widgets.HBox([self.note, note_button], layout=wrap))
        if self.form is not None:
            rows.insert(0, self.form.box)
            self.form.on_change(self._follow_form)
            self._follow_form()
        self.box = widgets.VBox(rows if card_shown else [self.label, *rows])
        # The extension answers keys a / r in a box with this class
        # (labextension/src/questions/keys.ts).
        self.box.add_class("iac-question")
        if self.danger:
            self.box.add_class("iac-question-danger")

    def _follow_form(self) -> None:
        """Approving buttons are enabled only while the form is answered."""
        blocked = self.form is not None and self.form.problem() is not None
        for button in self.approving:
            button.disabled = blocked

    def _clicked(self, option: str, note: str = "") -> None:
        values = self.form.values() if self.form is not None and not note else None
        # A click may be dispatched on a subshell thread: hop to the turn's loop.
        self.loop.call_soon_threadsafe(self._resolve, option, note, values)

    def _noted(self) -> None:
        self._clicked(REJECT_ONCE, str(self.note.value or "").strip() or "(no reason given)")

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


def label_html(request: PermissionRequest, danger: bool = False) -> str:
    """The question as the widget box shows it (HTML, all text escaped)."""
    title = html.escape(printable(request.title))
    reason = html.escape(shown_lines(reason_text(request)))
    if not danger:
        return f"✋ <b>{title}</b> needs your approval: {reason}"
    command = request.input.get("command") if isinstance(request.input, dict) else None
    # An exec-time question's command is one argv: on one line. A script keeps its lines.
    one_line = isinstance(request.input, dict) and "argv" in request.input
    shown = (
        html.escape((printable if one_line else shown_lines)(str(command))) if command else title
    )
    # The text keeps the page's colour over a translucent tint (kernel/theme.py), so it
    # reads in light and dark themes, with or without JupyterLab's variables.
    return (
        f'<div class="iac-danger" style="border:2px solid {theme.RED};border-radius:6px;'
        f'padding:6px 10px;background:{theme.RED_TINT}">'
        f'<div style="font-weight:700;color:{theme.RED}">'
        "⚠️ Destructive: approve this one call?</div>"
        f'<pre style="margin:4px 0;white-space:pre-wrap;color:inherit;background:transparent">'
        f"{shown}</pre>"
        # pre-wrap: a review (terraform_apply's plan summary) is several lines.
        f'<div style="white-space:pre-wrap">{reason}</div></div>'
    )


def locked_note(field: FormField, button: str = "Allow once") -> str:
    """What a typed confirmation does to the approving button, in words (the extension's
    card says the same: labextension/src/questions/model.ts ``lockedNote``)."""
    return f"{button} stays disabled until you type {field.must_equal} exactly."


def placeholder(field: FormField) -> str:
    """A text field's hint: what to type for a typed confirmation."""
    if field.must_equal is not None:
        return f"type {field.must_equal} to approve"
    return field.description


def field_widget(field: FormField) -> Any:
    """One ipywidget for ``field`` (its description is the field's visible label)."""
    import ipywidgets as widgets

    common: dict[str, Any] = {
        "description": field.title,
        "style": {"description_width": "initial"},
    }
    if field.kind == CHOICE:
        kind = widgets.ToggleButtons if len(field.choices) <= TOGGLE_MAX else widgets.Dropdown
        value = field.default if field.default in field.choices else None
        return kind(options=list(field.choices), value=value, **common)
    if field.kind == BOOLEAN:
        return widgets.Checkbox(value=bool(field.default), indent=False, **common)
    if field.kind == NUMBER:
        number = field.default if isinstance(field.default, int | float) else 0.0
        return widgets.FloatText(value=float(number), **common)
    default = field.default if isinstance(field.default, str) else ""
    return widgets.Text(
        value=default,
        placeholder=placeholder(field),
        continuous_update=True,
        layout=widgets.Layout(width="min(100%, 32em)"),
        **common,
    )


class FormWidgets:
    """The widgets of a form and the values they hold."""

    def __init__(self, form: Form):
        import ipywidgets as widgets

        self.form = form
        self.fields = {f.name: field_widget(f) for f in form.fields}
        rows: list[Any] = []
        if form.title:
            rows.append(widgets.HTML(f"<b>{html.escape(form.title)}</b>"))
        for f in form.fields:
            if f.description and f.kind != "text":
                rows.append(widgets.HTML(html.escape(f.description)))
            rows.append(self.fields[f.name])
            if f.must_equal is not None:
                rows.append(widgets.HTML(html.escape(locked_note(f))))
        self.box = widgets.VBox(rows)
        self.box.add_class("iac-form")

    def values(self) -> dict[str, Any]:
        """The values filled in, by field name (text without surrounding blanks)."""
        found: dict[str, Any] = {}
        for name, widget in self.fields.items():
            value = widget.value
            found[name] = value.strip() if isinstance(value, str) else value
        return found

    def problem(self) -> str | None:
        """Why the form does not approve yet, or ``None``."""
        return self.form.mismatch(self.values())

    def on_change(self, callback: Callable[[], None]) -> None:
        for widget in self.fields.values():
            widget.observe(lambda _change: callback(), names="value")
