"""Alembic's environment for the team store: it runs on the connection (and in the
transaction) that :func:`iac_kernel.team.store.upgrade` hands it, never from an ini."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    version_table=context.config.attributes["version_table"],
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
