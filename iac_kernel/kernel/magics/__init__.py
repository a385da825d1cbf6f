"""Cell text read as magic lines, prompt or runbook parameters, and the magic table."""
