"""The team's subcommands of ``iac-kernel``: ``approvals``, ``audit verify`` and ``team
init``. Bad input (an unknown id, unreadable rules, an unreachable store) is one line on
stderr and exit status 2, with nothing changed.

Only argparse is imported at module level: the parser is built on every ``iac-kernel``
start (editors start ``iac-kernel acp`` often), and SQLAlchemy is needed only here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

APPROVALS_HELP = """\
Approval records (docs/approvals.md): a change an approval rule holds back waits for
people other than its requester. You act as the OS user you are logged in as.

examples:
  iac-kernel approvals list
  iac-kernel approvals show 3f2a9c1b7d0e
  iac-kernel approvals approve 3f2a9c1b7d0e --note "checked the replacements"
  iac-kernel approvals reject 3f2a9c1b7d0e --note "not during the freeze"

environment:
  IAC_KERNEL_TEAM_STORE    the team store's SQLAlchemy URL (default: SQLite in the
                           session store, ~/.iac-code/sessions/team.sqlite)
  IAC_KERNEL_APPROVAL_TTL  seconds a record lives (default 86400)"""

TEAM_HELP = """\
Make or upgrade the team store's schema as its owner (PostgreSQL), and grant the users'
role what the agent needs and no more: audit rows may be read and added, never changed
or deleted. Prefer peer authentication or a password file to a password in the URL.

example:
  iac-kernel team init "postgresql:///iac?host=/run/postgresql" --users-role iac_kernel_users

environment:
  IAC_KERNEL_TEAM_STORE    what users then set: the same database, as themselves"""

Subparser = Callable[[Any, str, str, str], argparse.ArgumentParser]


def add_commands(sub: Any, subparser: Subparser) -> None:
    """The ``approvals`` and ``team`` subcommands, on ``iac-kernel``'s subparsers."""
    approvals = subparser(
        sub, "approvals", "list, show, approve or reject approval records", APPROVALS_HELP
    )
    actions = approvals.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the records waiting or approved (--all: every one)")
    listing.add_argument("--json", action="store_true", help="one JSON record a line")
    listing.add_argument("--all", action="store_true", help="also spent, rejected, expired ones")
    show = actions.add_parser("show", help="one record")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="the record as JSON")
    approve = actions.add_parser("approve", help="approve a record as yourself")
    approve.add_argument("id")
    approve.add_argument("--note", help="a note kept with your approval")
    approve.add_argument(
        "--plan-sha256", metavar="SHA", help="refuse unless the record is for this plan"
    )
    reject = actions.add_parser("reject", help="reject a record as yourself")
    reject.add_argument("id")
    reject.add_argument("--note", help="why (the requester sees it)")
    cancel = actions.add_parser("cancel", help="cancel a record you asked for")
    cancel.add_argument("id")

    team = subparser(sub, "team", "set up the team store (its owner runs this)", TEAM_HELP)
    team_actions = team.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = team_actions.add_parser("init", help="make or upgrade the schema; grant the users' role")
    init.add_argument("owner_url", metavar="OWNER_URL", help="the store's URL, as its owner")
    init.add_argument(
        "--users-role", default="iac_kernel_users", help="the role users log in through"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``approvals ...``, ``audit verify`` or ``team init``; 2 with one line on bad input."""
    from iac_kernel.team.approvals import ApprovalError
    from iac_kernel.team.store import TeamStoreError

    try:
        if args.command == "team":
            return _init(args.owner_url, args.users_role)
        if args.command == "audit":
            return _verify()
        return _approvals(args)
    except (ApprovalError, TeamStoreError) as exc:
        print(f"iac-kernel {args.command}: {exc}", file=sys.stderr)
        return 2


def _approvals(args: argparse.Namespace) -> int:
    from iac_kernel.team.approvals import LIVE, Approvals
    from iac_kernel.team.store import open_store, process_identity

    store = open_store()
    try:
        book = Approvals(store)
        if args.action == "list":
            records = book.list(None if args.all else LIVE)
            for record in records:
                print(json.dumps(record.public()) if args.json else _line(record))
            if not records and not args.json:
                print("No approval records" + ("." if args.all else " waiting."), file=sys.stderr)
            return 0
        me = process_identity()
        if args.action == "show":
            record = book.get(args.id)
        elif args.action == "approve":
            record = book.approve(args.id, me, note=args.note, plan_sha256=args.plan_sha256)
        elif args.action == "reject":
            record = book.reject(args.id, me, note=args.note)
        else:
            record = book.cancel(args.id, me)
        if getattr(args, "json", False):
            print(json.dumps(record.public(), indent=2))
        else:
            print("\n".join(describe(record)))
        return 0
    finally:
        store.close()


def _line(record: Any) -> str:
    public = record.public()
    return (
        f"{record.id}  {record.waiting_text() if record.status == 'pending' else record.status}"
        f"  by {record.requester}  until {public['expires_at']}  {record.summary}"
    )


def describe(record: Any) -> list[str]:
    """One record in a few lines of text."""
    public = record.public()
    binding = record.binding
    lines = [
        f"approval {record.id}  {record.waiting_text()}",
        f"  asked by {record.requester} at {public['created_at']}, "
        f"expires at {public['expires_at']}",
        f"  plan sha256 {record.plan_sha256}",
        f"  {record.summary}",
        f"  rule: {record.rule}",
        f"  workspace {binding.get('workspace')!s} in {binding.get('folder')!s}",
    ]
    for vote in record.votes:
        verb = "approved" if vote.decision == "approve" else "rejected"
        note = f": {vote.note}" if vote.note else ""
        lines.append(f"  {verb} by {vote.approver} at {vote.public()['at']}{note}")
    if record.spent_at:
        lines.append(f"  spent by one apply at {public['spent_at']}")
    return lines


def _verify() -> int:
    from iac_kernel.team.audit import verify
    from iac_kernel.team.store import open_store, shown

    store = open_store()
    try:
        result = verify(store)
    finally:
        store.close()
    if result.ok:
        print(f"audit trail in {shown(store.url)} intact: {result.count} records")
        return 0
    print(f"audit trail in {shown(store.url)} BROKEN: {result.problem}", file=sys.stderr)
    return 1


def _init(owner_url: str, users_role: str) -> int:
    from iac_kernel.team.store import GRANTS, init_store, shown

    store = init_store(owner_url, users_role)
    try:
        print(f"team store {shown(store.url)} is at the current schema")
        if not store.is_sqlite:
            for table, rights in GRANTS.items():
                print(f"  {users_role}: {rights} on {table}")
    finally:
        store.close()
    return 0
