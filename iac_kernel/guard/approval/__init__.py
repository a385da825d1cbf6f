"""The approval server of a bash call: the launcher's wire, the question put to the
permission gate, per-program reviews and output filters, and running the real program."""
