"""Approval records on SQLite and a real PostgreSQL (iac_kernel/team/approvals.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from iac_kernel.team import audit
from iac_kernel.team.approvals import ApprovalError, Approvals, UnknownApproval
from iac_kernel.team.rules import Change, Requirement, RuleSet, parse
from iac_kernel.team.store import Identity, open_store
from team_support import pg_cluster, team_url  # noqa: F401 (fixtures)

ALICE = Identity("alice", groups=frozenset({"dev"}))
BOB = Identity("bob", groups=frozenset({"platform"}))
CAROL = Identity("carol", groups=frozenset({"platform"}))
DAVE = Identity("dave", groups=frozenset({"dev"}))
PLAN = "a" * 64
OTHER_PLAN = "b" * 64
BINDING = {
    "folder": "/srv/infra",
    "workspace": "prod",
    "data_dir": "/srv/infra/.terraform",
    "cli_config": None,
    "var_files": ["prod.tfvars"],
    "lineage": "5d1e0c2a",
}
ONE = Requirement(approvers=1, rules=("prod needs a second person",))


@pytest.fixture
def book(team_url: str):  # noqa: F811
    store = open_store(team_url)
    yield Approvals(store)
    store.close()


def race(n: int, action: Callable[[int], object]) -> tuple[list[object], list[Exception]]:
    """Run ``action(i)`` in ``n`` threads released at once."""
    barrier = threading.Barrier(n)
    results: list[object] = []
    errors: list[Exception] = []

    def one(i: int) -> None:
        barrier.wait()
        try:
            results.append(action(i))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors


def test_the_requester_cannot_approve_their_own_record(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "Plan: 1 to destroy.", ONE)
    assert record.status == "pending"
    assert record.waiting_text() == "waiting for 1 approval"
    with pytest.raises(ApprovalError, match="alice asked for it and cannot approve"):
        book.approve(record.id, ALICE)
    # Not by another Identity object with the same name either: the name is the person.
    with pytest.raises(ApprovalError, match="cannot approve"):
        book.approve(record.id, Identity("alice", via="hub"))
    assert book.get(record.id).status == "pending"
    assert book.approve(record.id, BOB, note="looked at it").status == "approved"


def test_a_second_request_finds_the_live_record(book: Approvals) -> None:
    first = book.request(ALICE, PLAN, BINDING, "Plan: 1 to destroy.", ONE)
    book.approve(first.id, BOB)
    again = book.request(ALICE, PLAN, BINDING, "Plan: 1 to destroy.", ONE)
    assert again.id == first.id and again.status == "approved"
    other = book.request(ALICE, PLAN, {**BINDING, "var_files": ["other.tfvars"]}, "x", ONE)
    assert other.id != first.id  # another binding is another record
    # Stricter rules than the record was made for: a new record, the old one superseded.
    stricter = book.request(ALICE, PLAN, BINDING, "x", Requirement(approvers=2))
    assert stricter.id != first.id and stricter.required == 2
    assert book.get(first.id).status == "cancelled"


def test_two_requests_at_once_make_one_record(book: Approvals) -> None:
    results, errors = race(8, lambda i: book.request(ALICE, PLAN, BINDING, "s", ONE).id)
    assert not errors
    assert len(set(results)) == 1


def test_two_approvers_at_once_are_one_decision(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "Plan: 1 to destroy.", ONE)
    people = [BOB, CAROL, DAVE, Identity("erin")]
    results, errors = race(len(people), lambda i: book.approve(record.id, people[i]))
    assert len(results) == 1, errors  # one approval decided; the others found it decided
    assert all("is approved, not pending" in str(e) for e in errors), errors
    final = book.get(record.id)
    assert final.status == "approved"
    assert len(final.approvals) == 1
    steps = [e.record["step"] for e in audit.entries(book.store)]
    assert steps.count("approve") == 1


def test_two_approvals_needed_from_distinct_people(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", Requirement(approvers=2))
    assert book.approve(record.id, BOB).status == "pending"
    with pytest.raises(ApprovalError, match="bob has already answered"):
        book.approve(record.id, BOB)
    assert book.get(record.id).waiting_text() == "waiting for 1 approval"
    assert book.approve(record.id, CAROL).status == "approved"


def test_two_racing_approvers_both_needed_approve_it(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", Requirement(approvers=2))
    results, errors = race(2, lambda i: book.approve(record.id, (BOB, CAROL)[i]))
    assert not errors and len(results) == 2
    assert book.get(record.id).status == "approved"


def test_a_group_rule_needs_a_member(book: Approvals) -> None:
    rules = RuleSet(
        tuple(parse('[[rule]]\nname = "p"\napprovers = 1\ngroup = "platform"\n', "a.toml"))
    )
    need = rules.evaluate(Change.of("prod", [("aws_instance", "update")]))
    record = book.request(ALICE, PLAN, BINDING, "s", need)
    assert record.waiting_text() == "waiting for 1 approval by platform"
    with pytest.raises(ApprovalError, match="needs a member of platform; dave is not one"):
        book.approve(record.id, DAVE)
    assert book.approve(record.id, BOB).status == "approved"


def test_a_record_expires(team_url: str) -> None:  # noqa: F811
    store = open_store(team_url)
    try:
        book = Approvals(store, ttl_seconds=0.4)
        pending = book.request(ALICE, PLAN, BINDING, "s", ONE)
        approved = book.request(ALICE, OTHER_PLAN, BINDING, "s", ONE)
        book.approve(approved.id, BOB)
        time.sleep(0.6)
        assert book.expire() == 2
        assert book.expire() == 0
        assert book.get(pending.id).status == "expired"
        with pytest.raises(ApprovalError, match="is expired, not pending"):
            book.approve(pending.id, BOB)
        with pytest.raises(ApprovalError, match="is expired, not approved"):
            book.spend(approved.id, ALICE, OTHER_PLAN, BINDING)
        assert book.list() == []
        # A new request for the same plan is a new record, not the expired one.
        assert book.request(ALICE, PLAN, BINDING, "s", ONE).id != pending.id
    finally:
        store.close()


def test_an_approval_of_a_changed_plan_is_refused(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", ONE)
    with pytest.raises(ApprovalError, match="the plan changed"):
        book.approve(record.id, BOB, plan_sha256=OTHER_PLAN)
    assert book.get(record.id).status == "pending"
    book.approve(record.id, BOB, plan_sha256=PLAN)
    with pytest.raises(ApprovalError, match="another plan or binding"):
        book.spend(record.id, ALICE, OTHER_PLAN, BINDING)
    with pytest.raises(ApprovalError, match="another plan or binding"):
        book.spend(record.id, ALICE, PLAN, {**BINDING, "lineage": "0f0f0f0f"})
    assert book.get(record.id).status == "approved"  # still there for the real plan
    assert book.spend(record.id, ALICE, PLAN, BINDING).status == "spent"


def test_spend_exactly_once_under_a_race(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", ONE)
    with pytest.raises(ApprovalError, match="is pending, not approved"):
        book.spend(record.id, ALICE, PLAN, BINDING)
    book.approve(record.id, BOB)
    results, errors = race(10, lambda i: book.spend(record.id, ALICE, PLAN, BINDING))
    assert len(results) == 1 and len(errors) == 9
    assert all(isinstance(e, ApprovalError) for e in errors)
    assert book.get(record.id).status == "spent"
    steps = [e.record["step"] for e in audit.entries(book.store)]
    assert steps.count("spend") == 1


def test_only_the_requester_spends_or_cancels(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", ONE)
    with pytest.raises(ApprovalError, match="only its requester alice may cancel"):
        book.cancel(record.id, BOB)
    book.approve(record.id, BOB)
    with pytest.raises(ApprovalError, match="asked by alice, not bob"):
        book.spend(record.id, BOB, PLAN, BINDING)
    assert book.cancel(record.id, ALICE).status == "cancelled"
    with pytest.raises(ApprovalError, match="nothing to cancel"):
        book.cancel(record.id, ALICE)


def test_a_rejection_ends_the_record(book: Approvals) -> None:
    record = book.request(ALICE, PLAN, BINDING, "s", Requirement(approvers=2))
    book.approve(record.id, BOB)
    rejected = book.reject(record.id, CAROL, note="not during the freeze")
    assert rejected.status == "rejected"
    assert rejected.public()["rejection"]["note"] == "not during the freeze"
    with pytest.raises(ApprovalError, match="is rejected, not pending"):
        book.approve(record.id, DAVE)


def test_bad_input_is_one_line_and_changes_nothing(book: Approvals) -> None:
    with pytest.raises(UnknownApproval, match="no approval record 'nope'"):
        book.approve("nope", BOB)
    with pytest.raises(ApprovalError, match="missing lineage"):
        book.request(ALICE, PLAN, {k: v for k, v in BINDING.items() if k != "lineage"}, "s", ONE)
    with pytest.raises(ApprovalError, match="rules unreadable"):
        book.request(ALICE, PLAN, BINDING, "s", Requirement(unreadable="a.toml: bad"))
    assert book.list(None) == []
    assert audit.entries(book.store) == []


def test_the_json_record_carries_the_documented_fields(book: Approvals) -> None:
    record = book.approve(book.request(ALICE, PLAN, BINDING, "Plan: 2 to add.", ONE).id, BOB)
    public = record.public()
    for key in (
        "id",
        "requester",
        "status",
        "plan_sha256",
        "summary",
        "rule",
        "approvals",
        "expires_at",
    ):
        assert key in public
    assert public["requester"] == "alice" and public["status"] == "approved"
    assert public["approvals"][0]["by"] == "bob"
    assert public["rule"] == "prod needs a second person"
    assert public["expires_at"].endswith("Z")
