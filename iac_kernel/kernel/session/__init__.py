"""The kernel's sessions and running turns, the status comm, editors on the same session."""
