"""The agent's tools. Every tool runs for real, in every model mode."""
