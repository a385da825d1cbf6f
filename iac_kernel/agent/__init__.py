"""The agent core: one loop, one permission gate, shared by the kernel and the ACP server."""
