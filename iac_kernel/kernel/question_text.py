"""The words of a permission question: the reason naming the command or file, button
labels that say what "always" covers, and the kernel's own HTML box for a destructive
question (theme variables, so it reads in light and dark themes)."""

from __future__ import annotations

from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    CATEGORY_REASONS,
    REJECT_ALWAYS,
    PermissionRequest,
)
from iac_kernel.kernel import theme
from iac_kernel.textsafe import printable, shown_lines

DANGER_RED = theme.RED
#: A translucent red over whatever the page is: the text keeps the page's own colour.
DANGER_TINT = theme.RED_TINT


def is_danger(request: PermissionRequest) -> bool:
    """A per-call question (apply, destroy, force-unlock, a write outside the folder), as
    the permission gate marks it (``PermissionRequest.danger``)."""
    return bool(getattr(request, "danger", False))


def reason_text(request: PermissionRequest) -> str:
    """The reason, naming the command or the file when the gate gave only its category's
    generic words ("It runs a command or a sub-agent.")."""
    if request.reason not in CATEGORY_REASONS.values():
        return request.reason
    args = request.input if isinstance(request.input, dict) else {}
    command, path = args.get("command"), args.get("path") or args.get("file_path")
    if isinstance(command, str) and command.strip():
        return f"It runs `{_short(command)}` in this folder."
    if isinstance(path, str) and path.strip():
        return f"It changes `{path}`."
    return request.reason


def _short(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def button_label(request: PermissionRequest, option: str) -> str:
    """A button's label that says what "always" covers: "Always allow `terraform plan`",
    "Always allow edits in this folder"."""
    custom = request.labels.get(option, "")
    if option not in (ALLOW_ALWAYS, REJECT_ALWAYS):
        return request.label(option)
    verb = "Always allow" if option == ALLOW_ALWAYS else "Always reject"
    if ":" in custom:  # the gate's "Allow always: `terraform plan`" (a command prefix)
        return f"{verb} {custom.split(':', 1)[1].strip()} …"
    if request.kind == "edit":
        return f"{verb} edits in this folder"
    return f"{verb} {request.tool_name} (this session)"


def label_html(request: PermissionRequest, danger: bool = False) -> str:
    """The question as the widget box shows it (HTML, all text escaped)."""
    import html

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
        f'<div class="iac-danger" style="border:2px solid {DANGER_RED};border-radius:6px;'
        f'padding:6px 10px;background:{DANGER_TINT}">'
        f'<div style="font-weight:700;color:{DANGER_RED}">'
        "⚠️ Destructive: approve this one call?</div>"
        f'<pre style="margin:4px 0;white-space:pre-wrap;color:inherit;background:transparent">'
        f"{shown}</pre>"
        # pre-wrap: a review (terraform_apply's plan summary) is several lines.
        f'<div style="white-space:pre-wrap">{reason}</div></div>'
    )
