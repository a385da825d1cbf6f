"""JSON-RPC on the wire: line framing, the connection, the agent's sends to its client,
and the SDK's router (the seam where the ACP SDK's models come in)."""
