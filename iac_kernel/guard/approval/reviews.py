"""Per-program reviews of changing commands (e.g. a plan summary for ``terraform apply``).

A review runs on the agent's side (outside the sandbox) after the guard has classified
an argv as changing and before the user is asked. It can add text and a structured
summary to the question, refuse outright, rewrite the argv and the environment (e.g. to
a private copy of a plan file placed in :attr:`ExecInfo.private_dir`), bind the approval
with a ``recheck`` run right before the program starts, and ask for an audit record of
the call (``audit``, completed by the server with the question, answer and exit).

An observer (:func:`observe`) sees every exec of its programs before it runs, read-only
ones too (``terraform plan -var tok=...``): it can learn what the call is about to print
(the values given to sensitive variables), but neither asks nor refuses.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecInfo:
    """What a review sees of one exec request."""

    #: The guarded program (``terraform``), and the exact argv it would receive.
    program: str
    argv: list[str]
    #: The working directory on the host (the same path the sandbox sees, except that
    #: paths under the sandbox's private /tmp are mapped to the host directory behind it).
    cwd: str
    #: A host directory the sandbox can read but not write, for private copies.
    private_dir: Path
    #: Where ``private_dir`` appears inside the sandbox (use this path in a rewritten argv).
    sandbox_private_dir: str
    #: The environment the command would run with (TF_* variables etc.).
    env: dict[str, str] = field(default_factory=dict)
    #: The host path behind an absolute path the program sees (the sandbox's /tmp).
    host_path: Callable[[str], str] = os.path.normpath
    #: The working directory as the program sees it (empty: ``cwd``).
    sandbox_cwd: str = ""

    @property
    def inner_cwd(self) -> str:
        return self.sandbox_cwd or self.cwd


@dataclass
class Review:
    """A review's answer; every field is optional."""

    #: Extra text for the question (e.g. "Plan: 1 to add, 0 to change, 2 to destroy").
    text: str = ""
    #: A structured summary for front ends (PermissionRequest.review).
    summary: Any = None
    #: Refuse without asking; the message goes back to the model.
    refuse: str | None = None
    #: Run this argv instead (e.g. pointing at a private copy of the plan file).
    argv: list[str] | None = None
    #: Called after approval, right before the program starts: a message refuses
    #: (e.g. "the plan file changed after it was reviewed"), None lets it run.
    recheck: Callable[[], str | None] | None = None
    #: Awaited after the user's approval, before ``recheck``: waits for other people's
    #: (a team's approval rules), telling the command what it waits for through its
    #: argument (a line for the command's stderr); a message refuses, None goes on.
    hold: Callable[[Callable[[str], None]], Awaitable[str | None]] | None = None
    #: Run with this environment instead (e.g. without ``TF_CLI_ARGS`` whose words the
    #: rewritten argv already holds).
    env: dict[str, str] | None = None
    #: For the audit record of this call: what was reviewed (plan hash, summary, state
    #: before). The server adds the question, the answer and the exit status, and
    #: ``after()`` (e.g. the state after the run).
    audit: dict[str, Any] | None = None
    after: Callable[[], dict[str, Any]] | None = None
    #: Applied to the finished record before it is written (e.g. removes ``-var``
    #: values the question and the command line hold).
    scrub: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: The call's own question about this exact command (its literal text, approved a
    #: moment ago) covers this review: it adds no fact that question lacked (``terraform
    #: test``: what its rule's reason says). No second question then; the record keeps
    #: that question and its answer.
    covered_by_literal: bool = False


ReviewFn = Callable[[ExecInfo], Review | None]
ObserveFn = Callable[[ExecInfo], None]
#: Given an exec, a maker of one masking filter per output stream (``feed``/``flush``).
FilterFn = Callable[[ExecInfo], Callable[[], Any] | None]

_REVIEWS: dict[str, list[ReviewFn]] = {}
_OBSERVERS: dict[str, list[ObserveFn]] = {}
_FILTERS: dict[str, FilterFn] = {}


def filter_output(programs: Iterable[str], fn: FilterFn) -> None:
    """Mask what each of ``programs`` prints inside the exec (:mod:`.output_filter`)."""
    for program in programs:
        _FILTERS[program] = fn


def output_filter(info: ExecInfo) -> Callable[[], Any] | None:
    """The filter maker for ``info``'s program (None: its output goes straight out)."""
    fn = _FILTERS.get(info.program)
    return fn(info) if fn is not None else None


def register(programs: Iterable[str], fn: ReviewFn) -> None:
    """Attach ``fn`` to each of ``programs``; it is called for their changing commands."""
    for program in programs:
        entries = _REVIEWS.setdefault(program, [])
        if fn not in entries:
            entries.append(fn)


def unregister(programs: Iterable[str], fn: ReviewFn) -> None:
    for program in programs:
        if fn in _REVIEWS.get(program, []):
            _REVIEWS[program].remove(fn)


def review(info: ExecInfo) -> Review | None:
    """The first review a registered function gives for ``info`` (None: no review).

    A review that raises refuses the call: an approval must not skip its review.
    """
    for fn in list(_REVIEWS.get(info.program, [])):
        try:
            result = fn(info)
        except Exception as exc:
            log.exception("guard review for %s failed", info.program)
            refusal = f"the review of this command failed: {exc}"
            command = " ".join([info.program, *info.argv[1:]])
            audit = {"kind": "review_failed", "form": "bash", "command": command}
            return Review(refuse=refusal, audit={**audit, "workdir": info.cwd})
        if result is not None:
            return result
    return None


def observe(programs: Iterable[str], fn: ObserveFn) -> None:
    """Attach ``fn`` to each of ``programs``: it sees every exec of them before it runs."""
    for program in programs:
        entries = _OBSERVERS.setdefault(program, [])
        if fn not in entries:
            entries.append(fn)


def noticed(info: ExecInfo) -> None:
    """Tell the observers of ``info.program`` about one exec. An observer that raises
    refuses the call (:class:`ObserverFailed`): what it would have learnt (a secret the
    call prints) must not go unmasked."""
    for fn in list(_OBSERVERS.get(info.program, [])):
        try:
            fn(info)
        except Exception as exc:
            log.exception("guard observer for %s failed", info.program)
            raise ObserverFailed(
                f"the guard could not read this command's variables: {exc}"
            ) from exc


class ObserverFailed(Exception):
    """An observer failed; the exec does not run."""
