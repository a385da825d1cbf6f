"""ACP payloads as pure data, no I/O: agent events as ``session/update``s, prompt content,
notices, what the client declared, and the JSON-RPC errors."""
