"""A question's form in the notebook: ipywidgets fields, stdin prompts, the card's payload.

A :class:`~iac_kernel.agent.forms.Form` rides on a permission question (a typed
confirmation of a destroy or a production apply, or the agent's own question). The kernel
renders every field kind: ``text`` as a Text field (a typed confirmation's placeholder says
what to type), ``choice`` as toggle buttons (a dropdown past four choices), ``boolean`` as a
checkbox and ``number`` as a number field. Whenever the kernel rendered a form, an approval
carries the values filled in, so the gate checks them (an approval without the typed name
never stands).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, Form, FormField

#: Up to this many choices show as toggle buttons; more as a dropdown.
TOGGLE_MAX = 4


def answers_form(option: str) -> bool:
    """Whether choosing ``option`` answers the form (carries its values): every option but
    a rejection (Allow once, Allow always, or an option of the agent's own question)."""
    return not option.startswith("reject")


def form_payload(form: Form | None) -> dict[str, Any] | None:
    """The form as the tool card's ``question.form`` (the extension renders it)."""
    if form is None:
        return None
    return {
        "title": form.title,
        "fields": [
            {
                "name": f.name,
                "title": f.title,
                "kind": f.kind,
                "description": f.description,
                "choices": list(f.choices),
                "required": f.required,
                "default": f.default,
                "mustEqual": f.must_equal,
            }
            for f in form.fields
        ],
    }


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
            rows.append(widgets.HTML(f"<b>{_escape(form.title)}</b>"))
        for f in form.fields:
            if f.description and f.kind != "text":
                rows.append(widgets.HTML(_escape(f.description)))
            rows.append(self.fields[f.name])
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


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def stdin_field_prompt(field: FormField) -> str:
    """The input_request prompt of one field."""
    parts = [field.title]
    if field.kind == CHOICE:
        choices = " ".join(f"[{i}] {c}" for i, c in enumerate(field.choices, 1))
        parts.append(f"({choices})")
    elif field.kind == BOOLEAN:
        parts.append("(y/n)")
    elif field.kind == NUMBER:
        parts.append("(a number)")
    if field.must_equal is not None:
        parts.append(f"- type {field.must_equal} to approve, anything else rejects")
    elif field.description:
        parts.append(f"- {field.description}")
    return " ".join(parts) + ": "


def parse_field(field: FormField, text: str) -> Any:
    """A typed answer as the field's value (``None`` when it gives none; a value of the
    wrong kind stays text, so :meth:`Form.mismatch` names the problem)."""
    answer = text.strip()
    if not answer:
        return None
    if field.kind == CHOICE:
        if answer.isdigit() and 1 <= int(answer) <= len(field.choices):
            return field.choices[int(answer) - 1]
        return answer
    if field.kind == BOOLEAN:
        lowered = answer.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        return answer
    if field.kind == NUMBER:
        try:
            return float(answer) if any(c in answer for c in ".eE") else int(answer)
        except ValueError:
            return answer
    return answer
