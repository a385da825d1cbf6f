"""``iac-kernel acp --remote URL``: the bridge from an editor's stdio to a Jupyter
server's ACP WebSocket."""
