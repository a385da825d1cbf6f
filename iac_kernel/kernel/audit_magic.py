"""``%audit``: the audit records of applies (see ``docs/audit.md``), newest last.

``%audit`` lists those of this folder (and below), ``%audit all`` every folder's.
Registered in :data:`iac_kernel.kernel.magics.SPECS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iac_kernel.sessions.audit import AuditLog, describe

if TYPE_CHECKING:
    from iac_kernel.kernel.magics import MagicOutput, Magics

USAGE = "%audit [all]"
SUMMARY = "The audit records of applies (plan, answer, exit, state) of this folder (all: every)."
CHOICES = ["all"]
#: Records shown (the newest).
LIMIT = 50


async def audit_magic(magics: Magics, args: str) -> MagicOutput:
    from iac_kernel.kernel.magics import MagicError, MagicOutput

    if args.strip() not in ("", "all"):
        raise MagicError(f"usage: {USAGE}")
    everywhere = args.strip() == "all"
    state = magics.state
    records = AuditLog(state.settings.sessions_dir).records(None if everywhere else str(state.cwd))
    if not records:
        where = "in the store" if everywhere else f"for {state.cwd}"
        text = f"No audit records {where} yet."
        return MagicOutput(text, text)
    shown = records[-LIMIT:]
    text = "\n".join(line for record in shown for line in describe(record))
    head = f"{len(records)} audit record(s)" + (
        f", the last {LIMIT}" if len(records) > LIMIT else ""
    )
    return MagicOutput(f"{head}:\n\n```\n{text}\n```", f"{head}:\n{text}")
