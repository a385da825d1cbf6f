"""``%mcp``: the MCP servers of the notebook's session (list, add, remove).

The servers of a ``.mcp.json`` in the session's folder start with the session
(:func:`iac_kernel.mcp.project.follow_session`, a kernel state listener); ``%mcp add``
and ``%mcp remove`` change the running session only. Registered in
:data:`iac_kernel.kernel.magics.SPECS`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from iac_kernel.mcp.commands import McpCommandError, run_mcp_command

if TYPE_CHECKING:
    from iac_kernel.kernel.magics import MagicOutput, Magics

USAGE = (
    "%mcp [list | add NAME COMMAND [ARG...] | add NAME URL [--sse] | remove NAME | trust [HASH]]"
)
SUMMARY = "The session's MCP servers (.mcp.json, %mcp add): list, add, remove; trust .mcp.json."
CHOICES = ["list", "add", "remove", "trust"]


async def mcp_magic(magics: Magics, args: str) -> MagicOutput:
    from iac_kernel.kernel.magics import MagicError, MagicOutput

    session = magics.state.session()
    try:
        text = await run_mcp_command(session, args)
    except McpCommandError as exc:
        raise MagicError(str(exc).replace("usage: mcp", "usage: %mcp"), "McpError") from None
    return MagicOutput(text, re.sub(r"[`*]", "", text))
