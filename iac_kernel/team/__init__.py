"""A team's change control: approval rules, approval records and the audit trail, in one
store a team shares (SQLite on one machine, PostgreSQL for a team; docs/approvals.md).

Storage level: it imports only the root helpers (config, masking, textsafe, redact); the
agent, the tools and the fronts call into it."""
