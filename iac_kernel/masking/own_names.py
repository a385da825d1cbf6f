"""The agent's own settings are never secrets by their name.

A secret is recognised by a variable's name (``*PRIVATE*``, ``*TOKEN*``, ``*KEY*`` ...)
or by the shape of its value. The agent's own settings are no credentials whatever their
name says: ``IAC_KERNEL_EGRESS_ALLOW_PRIVATE`` holds a host and port, and masking it would
hide that host in every output (a git remote on it showed as ``[REDACTED:...]``). Their
values are still checked by shape like any text.

The settings are declared a layer above this one (:mod:`iac_kernel.config` hands their
names here when it is imported, which every front does before it masks anything); until
then no name is exempt: that masks more, never less.
"""

from __future__ import annotations

_NAMES: set[str] = set()


def declare(names: frozenset[str]) -> None:
    """The agent's own settings that hold no secret (called by :mod:`iac_kernel.config`)."""
    _NAMES.update(names)


def own_setting(name: str) -> bool:
    """``name`` is one of the agent's own settings that hold no secret."""
    return name in _NAMES  # exactly: the agent reads no other spelling
