"""MCP servers a session uses: their configuration, their connections and their tools.

* :mod:`~iac_kernel.mcp.config`: server specs from ACP ``mcpServers``, a ``.mcp.json``
  (Claude Code's format) or a ``%mcp add`` line;
* :mod:`~iac_kernel.mcp.client`: one running server (stdio, streamable HTTP or SSE) on
  the official ``mcp`` SDK;
* :mod:`~iac_kernel.mcp.sdk`: the SDK's 2.x line (the 2026-07-28 spec and the earlier
  ones) and 1.x line (the earlier ones) behind one connection interface;
* :mod:`~iac_kernel.mcp.tool`: each server tool as an ordinary
  :class:`~iac_kernel.tools.base.Tool` named ``mcp__<server>__<tool>``;
* :mod:`~iac_kernel.mcp.manager`: a session's servers, started with it and stopped with it;
* :mod:`~iac_kernel.mcp.trust`: a project ``.mcp.json`` starts only once the user trusted
  its exact content (and what its servers run);
* :mod:`~iac_kernel.mcp.commands`: ``%mcp`` / ``/mcp``.

This package sits beside ``tools/``: it never imports ``agent/``, ``kernel/`` or ``acp/``.
"""
