"""The team store: approval records and their votes, the audit trail and its head.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    op.create_table(
        "iac_approvals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("requester", sa.String(255), nullable=False),
        sa.Column("plan_sha256", sa.String(64), nullable=False),
        sa.Column("binding", sa.Text, nullable=False),
        sa.Column("binding_sha256", sa.String(64), nullable=False, index=True),
        # Set while the record is live (pending or approved): one live record per binding
        # and requester, whoever races to make it.
        sa.Column("live_key", sa.String(64), unique=True),
        sa.Column("workspace", sa.String(255), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        # The plan card the requester saw (JSON), shown to approvers as it was.
        sa.Column("card", sa.Text),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("required", sa.Integer, nullable=False),
        sa.Column("groups", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("note", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("decided_at", sa.Float),
        sa.Column("spent_at", sa.Float),
    )
    op.create_table(
        "iac_approval_votes",
        sa.Column(
            "approval_id", sa.String(32), sa.ForeignKey("iac_approvals.id"), primary_key=True
        ),
        sa.Column("approver", sa.String(255), primary_key=True),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("approver_groups", sa.Text, nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("at", sa.Float, nullable=False),
    )
    op.create_table(
        "iac_audit",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("prev_sha256", sa.String(64), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("import_key", sa.String(80), unique=True),
    )
    head = op.create_table(
        "iac_audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "sha256": GENESIS}])


def downgrade() -> None:
    for table in ("iac_audit_head", "iac_audit", "iac_approval_votes", "iac_approvals"):
        op.drop_table(table)
