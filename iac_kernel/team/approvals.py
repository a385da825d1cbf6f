"""Approval records: a change that a rule holds back waits for people other than its
requester, and the apply spends their approval exactly once.

A record is bound to the plan's SHA-256 and every input the plan binding fixes (folder,
workspace, data folder, CLI config, var files, lineage: :data:`BINDING_KEYS`). Its life::

    pending -> approved -> spent          (N approvals by distinct people, then one apply)
            -> rejected                   (one rejection by someone who may approve)
            -> expired                    (``IAC_KERNEL_APPROVAL_TTL`` seconds, default 24 h)
            -> cancelled                  (by its requester; approved ones too)

Every decision is one conditional ``UPDATE ... WHERE status = ...`` on a row locked for
the transaction, and a vote is unique per (record, approver): two approvers racing make
one decision, two appliers racing make one spend. Each step appends an audit record in the
same transaction. Who acts is an :class:`~iac_kernel.team.store.Identity`, never text.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from iac_kernel import telemetry
from iac_kernel.team.audit import append_in, canonical
from iac_kernel.team.rules import Requirement, wanted_text
from iac_kernel.team.store import Identity, TeamStore, approvals, iso, now, votes

#: The inputs of a plan's binding an approval is bound to, besides the plan's hash; a
#: request must name each (``None`` when it has none) so none is forgotten.
BINDING_KEYS = ("folder", "workspace", "data_dir", "cli_config", "var_files", "lineage")
TTL_ENV = "IAC_KERNEL_APPROVAL_TTL"
DEFAULT_TTL = 24 * 3600.0
LIVE = ("pending", "approved")


class ApprovalError(ValueError):
    """An approval operation refused or impossible; the message is one readable line."""


class UnknownApproval(ApprovalError):
    """No record has this id."""


@dataclass(frozen=True)
class Vote:
    approver: str
    decision: str
    groups: frozenset[str]
    note: str | None
    at: float

    def public(self) -> dict[str, Any]:
        return {"by": self.approver, "at": iso(self.at), "note": self.note}


@dataclass(frozen=True)
class Approval:
    """One record, with its votes."""

    id: str
    requester: str
    plan_sha256: str
    binding: dict[str, Any]
    summary: str
    rule: str
    required: int
    groups: dict[str, int]
    status: str
    note: str | None
    created_at: float
    expires_at: float
    decided_at: float | None
    spent_at: float | None
    votes: tuple[Vote, ...] = ()
    #: The plan card the requester saw (its JSON payload), for the approver's view.
    card: dict[str, Any] | None = None

    @property
    def approvals(self) -> tuple[Vote, ...]:
        return tuple(
            v for v in self.votes if v.decision == "approve" and v.approver != self.requester
        )

    def missing(self) -> tuple[int, dict[str, int]]:
        """Approvals still wanted: in all, and by group."""
        given = self.approvals
        groups = {
            g: n - sum(1 for v in given if g in v.groups)
            for g, n in self.groups.items()
            if n > sum(1 for v in given if g in v.groups)
        }
        return max(self.required - len(given), 0), groups

    def waiting_text(self) -> str:
        """``waiting for 1 approval by platform`` (or the status when it waits no more)."""
        if self.status != "pending":
            return self.status
        count, groups = self.missing()
        return "waiting for " + wanted_text(max(count, *groups.values(), 0), groups)

    def ended_text(self) -> str:
        """What became of the record, after its id: ``was rejected by bob: not during
        the freeze``, ``expired at ...``; for a live one ``is waiting for 1 approval``."""
        if self.status in LIVE:
            return f"is {self.waiting_text()}"
        if self.status == "rejected":
            rejection = next((v for v in self.votes if v.decision == "reject"), None)
            who = f" by {rejection.approver}" if rejection else ""
            return f"was rejected{who}" + (f": {self.note}" if self.note else "")
        if self.status == "expired":
            return f"expired at {iso(self.expires_at)} before enough people approved it"
        if self.status == "spent":
            return f"was already spent by an apply at {iso(self.spent_at)}"
        if self.status == "cancelled":
            return "was cancelled " + (f"({self.note})" if self.note else "by its requester")
        return f"is {self.status}"

    def public(self) -> dict[str, Any]:
        """The record as JSON (``iac-kernel approvals list --json``)."""
        rejection = next((v for v in self.votes if v.decision == "reject"), None)
        return {
            "id": self.id,
            "requester": self.requester,
            "status": self.status,
            "plan_sha256": self.plan_sha256,
            "summary": self.summary,
            "rule": self.rule,
            "required": self.required,
            "groups": self.groups,
            "approvals": [v.public() for v in self.approvals],
            "rejection": rejection.public() if rejection else None,
            "note": self.note,
            "binding": self.binding,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "decided_at": iso(self.decided_at),
            "spent_at": iso(self.spent_at),
        }


def ttl(env: Mapping[str, str] | None = None) -> float:
    """Seconds an approval lives: ``IAC_KERNEL_APPROVAL_TTL``, else 24 hours."""
    raw = (os.environ if env is None else env).get(TTL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TTL
    except ValueError:
        return DEFAULT_TTL  # config.Settings.from_env reports the bad value at start
    return value if value > 0 else DEFAULT_TTL


def binding_sha256(plan_sha256: str, binding: Mapping[str, Any]) -> str:
    """One hash of the plan and every input of its binding."""
    return hashlib.sha256(canonical({"plan_sha256": plan_sha256, **binding}).encode()).hexdigest()


def _check_binding(plan_sha256: str, binding: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(plan_sha256, str) or len(plan_sha256) != 64:
        raise ApprovalError(f"plan_sha256 {plan_sha256!r} is not a SHA-256 in hex")
    keys = set(binding)
    if keys != set(BINDING_KEYS):
        missing, extra = set(BINDING_KEYS) - keys, keys - set(BINDING_KEYS)
        raise ApprovalError(
            "an approval's binding names exactly "
            + ", ".join(BINDING_KEYS)
            + (f"; missing {', '.join(sorted(missing))}" if missing else "")
            + (f"; unknown {', '.join(sorted(extra))}" if extra else "")
        )
    return json.loads(canonical(dict(binding)))


def _covers(record: Approval, requirement: Requirement) -> bool:
    """Whether ``record`` asks at least what ``requirement`` asks."""
    return record.required >= requirement.approvers and all(
        record.groups.get(g, 0) >= n for g, n in requirement.groups.items()
    )


class Approvals:
    """Approval records in one team store."""

    def __init__(self, store: TeamStore, ttl_seconds: float | None = None) -> None:
        self.store = store
        self.ttl = ttl() if ttl_seconds is None else ttl_seconds

    def request(
        self,
        requester: Identity,
        plan_sha256: str,
        binding: Mapping[str, Any],
        summary: str,
        requirement: Requirement,
        card: Mapping[str, Any] | None = None,
    ) -> Approval:
        """The live record of ``requester`` for this plan and binding, or a new pending one."""
        if requirement.blocked:
            raise ApprovalError(requirement.text())
        if not requirement.needed:
            raise ApprovalError("no rule asks for an approval of this change")
        fixed = _check_binding(plan_sha256, binding)
        bound = binding_sha256(plan_sha256, fixed)
        live_key = hashlib.sha256(f"{bound}\n{requester.name}".encode()).hexdigest()
        for _ in range(3):
            with self.store.transaction() as conn:
                self._expire(conn)
                found = conn.execute(
                    sa.select(approvals.c.id).where(approvals.c.live_key == live_key)
                ).scalar()
                if found:
                    record = self._load(conn, found)
                    if _covers(record, requirement):
                        return record
                    # The rules ask for more than when it was made: it no longer answers.
                    self._flip(conn, found, record.status, "cancelled", note="rules changed")
                    self._audit(conn, requester, "supersede", found)
            stamp = now()
            record_id = secrets.token_hex(6)
            try:
                with self.store.transaction() as conn:
                    conn.execute(
                        approvals.insert().values(
                            id=record_id,
                            requester=requester.name,
                            plan_sha256=plan_sha256,
                            binding=canonical(fixed),
                            binding_sha256=bound,
                            live_key=live_key,
                            workspace=str(fixed.get("workspace") or "")[:255],
                            summary=summary,
                            card=canonical(dict(card)) if card is not None else None,
                            rule="; ".join(requirement.rules),
                            required=requirement.approvers,
                            groups=canonical(dict(requirement.groups)),
                            status="pending",
                            created_at=stamp,
                            expires_at=stamp + self.ttl,
                        )
                    )
                    self._audit(
                        conn,
                        requester,
                        "request",
                        record_id,
                        plan_sha256=plan_sha256,
                        binding=fixed,
                        summary=summary,
                        rule="; ".join(requirement.rules),
                    )
                    return self._load(conn, record_id)
            except sa.exc.IntegrityError:
                continue  # another process made the live record first: find it
        raise ApprovalError("could not make or find the approval record; try again")

    def get(self, record_id: str) -> Approval:
        with self.store.transaction() as conn:
            self._expire(conn)
            return self._load(conn, record_id)

    def list(self, statuses: tuple[str, ...] | None = LIVE) -> list[Approval]:
        """Records with one of ``statuses`` (``None``: all), oldest first."""
        with self.store.transaction() as conn:
            self._expire(conn)
            query = sa.select(approvals.c.id).order_by(approvals.c.created_at)
            if statuses is not None:
                query = query.where(approvals.c.status.in_(statuses))
            return [self._load(conn, i) for i in conn.execute(query).scalars().all()]

    def approve(
        self,
        record_id: str,
        approver: Identity,
        note: str | None = None,
        plan_sha256: str | None = None,
    ) -> Approval:
        """Add ``approver``'s approval; the record is approved when enough are in.
        With ``plan_sha256`` (the plan the approver saw), a record of another plan is refused."""
        return self._vote(record_id, approver, "approve", note, plan_sha256)

    def reject(self, record_id: str, approver: Identity, note: str | None = None) -> Approval:
        """One rejection by someone who may approve ends the record."""
        return self._vote(record_id, approver, "reject", note, None)

    def cancel(self, record_id: str, requester: Identity) -> Approval:
        with self.store.transaction() as conn:
            self._expire(conn)
            record = self._locked(conn, record_id)
            if record.requester != requester.name:
                raise ApprovalError(
                    f"approval {record_id}: only its requester {record.requester} may cancel it"
                )
            if record.status not in LIVE or not self._flip(
                conn, record_id, record.status, "cancelled"
            ):
                raise ApprovalError(f"approval {record_id} is {record.status}; nothing to cancel")
            self._audit(conn, requester, "cancel", record_id)
            return self._load(conn, record_id)

    def spend(
        self,
        record_id: str,
        requester: Identity,
        plan_sha256: str,
        binding: Mapping[str, Any],
    ) -> Approval:
        """Use the approval for one apply of exactly the plan and binding approved.
        Exactly one caller wins; every other gets :class:`ApprovalError`."""
        bound = binding_sha256(plan_sha256, _check_binding(plan_sha256, binding))
        with self.store.transaction() as conn:
            self._expire(conn)
            record = self._locked(conn, record_id)
            if record.requester != requester.name:
                raise ApprovalError(
                    f"approval {record_id} was asked by {record.requester}, not {requester.name}"
                )
            if binding_sha256(record.plan_sha256, record.binding) != bound:
                raise ApprovalError(
                    f"approval {record_id} is for another plan or binding: the plan "
                    "changed since it was asked for; ask again"
                )
            count, groups = record.missing()
            if record.status == "approved" and (count or groups):
                raise ApprovalError(f"approval {record_id} lacks the approvals it needs")
            stamp = now()
            flipped = conn.execute(
                approvals.update()
                .where(
                    approvals.c.id == record_id,
                    approvals.c.status == "approved",
                    approvals.c.expires_at > stamp,
                )
                .values(status="spent", spent_at=stamp, live_key=None)
            ).rowcount
            if flipped != 1:
                raise ApprovalError(f"approval {record_id} is {record.status}, not approved")
            self._audit(conn, requester, "spend", record_id, plan_sha256=plan_sha256)
            return self._load(conn, record_id)

    def expire(self) -> int:
        """Mark live records past their time expired; returns how many."""
        with self.store.transaction() as conn:
            return self._expire(conn)

    def _vote(
        self,
        record_id: str,
        who: Identity,
        decision: str,
        note: str | None,
        plan_sha256: str | None,
    ) -> Approval:
        try:
            with self.store.transaction() as conn:
                self._expire(conn)
                record = self._locked(conn, record_id)
                self._may_vote(record, who, plan_sha256)
                stamp = now()
                conn.execute(
                    votes.insert().values(
                        approval_id=record_id,
                        approver=who.name,
                        decision=decision,
                        approver_groups=canonical(sorted(who.groups)),
                        note=note,
                        at=stamp,
                    )
                )
                self._audit(conn, who, decision, record_id, note=note)
                record = self._load(conn, record_id)
                count, groups = record.missing()
                if decision == "reject":
                    self._flip(conn, record_id, "pending", "rejected", note=note)
                elif not count and not groups:
                    self._flip(conn, record_id, "pending", "approved")
                return self._load(conn, record_id)
        except sa.exc.IntegrityError:
            raise ApprovalError(
                f"approval {record_id}: {who.name} has already answered it"
            ) from None

    def _may_vote(self, record: Approval, who: Identity, plan_sha256: str | None) -> None:
        if who.name == record.requester:
            raise ApprovalError(
                f"approval {record.id}: {who.name} asked for it and cannot approve or reject "
                "it; another person must"
            )
        if record.status != "pending":
            raise ApprovalError(f"approval {record.id} is {record.status}, not pending")
        if plan_sha256 is not None and plan_sha256 != record.plan_sha256:
            raise ApprovalError(
                f"approval {record.id} is for plan {record.plan_sha256[:12]}, not "
                f"{plan_sha256[:12]}: the plan changed; the requester must ask again"
            )
        if record.groups and not (set(record.groups) & who.groups):
            raise ApprovalError(
                f"approval {record.id} needs a member of {', '.join(sorted(record.groups))}; "
                f"{who.name} is not one"
            )

    def _locked(self, conn: Connection, record_id: str) -> Approval:
        """The record, its row locked until the transaction ends (PostgreSQL; SQLite's
        transactions already hold the write lock)."""
        found = conn.execute(
            sa.select(approvals.c.id).where(approvals.c.id == record_id).with_for_update()
        ).scalar()
        if found is None:
            raise UnknownApproval(f"no approval record {record_id!r}")
        return self._load(conn, record_id)

    def _flip(self, conn: Connection, record_id: str, old: str, new: str, **values: Any) -> bool:
        """``old`` -> ``new`` only if the record is still ``old``: one decision."""
        if new not in LIVE:
            values["live_key"] = None
        changed = conn.execute(
            approvals.update()
            .where(approvals.c.id == record_id, approvals.c.status == old)
            .values(status=new, decided_at=now(), **values)
        ).rowcount
        return changed == 1

    def _expire(self, conn: Connection) -> int:
        stamp = now()
        due = (
            conn.execute(
                sa.select(approvals.c.id).where(
                    approvals.c.status.in_(LIVE), approvals.c.expires_at <= stamp
                )
            )
            .scalars()
            .all()
        )
        count = 0
        for record_id in due:
            changed = conn.execute(
                approvals.update()
                .where(approvals.c.id == record_id, approvals.c.status.in_(LIVE))
                .values(status="expired", decided_at=stamp, live_key=None)
            ).rowcount
            if changed:
                self._audit(conn, None, "expire", record_id)
                count += 1
        return count

    def _load(self, conn: Connection, record_id: str) -> Approval:
        row = conn.execute(sa.select(approvals).where(approvals.c.id == record_id)).first()
        if row is None:
            raise UnknownApproval(f"no approval record {record_id!r}")
        cast = conn.execute(
            sa.select(votes).where(votes.c.approval_id == record_id).order_by(votes.c.at)
        ).all()
        return Approval(
            id=row.id,
            requester=row.requester,
            plan_sha256=row.plan_sha256,
            binding=json.loads(row.binding),
            summary=row.summary,
            rule=row.rule,
            required=row.required,
            groups=json.loads(row.groups),
            status=row.status,
            note=row.note,
            created_at=row.created_at,
            expires_at=row.expires_at,
            decided_at=row.decided_at,
            spent_at=row.spent_at,
            card=json.loads(row.card) if row.card else None,
            votes=tuple(
                Vote(v.approver, v.decision, frozenset(json.loads(v.approver_groups)), v.note, v.at)
                for v in cast
            ),
        )

    def _audit(
        self, conn: Connection, who: Identity | None, step: str, record_id: str, **extra: Any
    ) -> None:
        record = {"kind": "approval", "step": step, "approval_id": record_id}
        record.update({k: v for k, v in extra.items() if v is not None})
        append_in(conn, record, who.name if who else "(expiry)")
        telemetry.approval(conn, step, record_id, who.name if who else None)
