"""Other processes of a sandboxed call that run next to a guarded program asking to run.

The guard reads git's configuration before a push, and git reads it again when it runs;
a process of the same call running meanwhile (``(... rewrite .git/config ...) &``) can
flip it in between. So a plain push is asked when anything else of the call is alive
besides the launcher and its ancestors, or when an ancestor is not just waiting for its
child (a shell that ran ``git push &`` and goes on writing the file with builtins): the
call's processes are those in its PID namespace (bwrap ``--unshare-pid``).
Programs the guard already started run in sibling sandboxes (their own namespaces) and
are not counted; their launchers, which wait for them inside the call, are.
"""

from __future__ import annotations

import os
from pathlib import Path

from iac_kernel.egress.inside import is_forwarder
from iac_kernel.guard.rules import CHANGE, Verdict


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1])


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _waiting(pid: int) -> bool:
    """Every thread of ``pid`` is blocked waiting for a child (``wait``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return bool(tasks) and all(
            Path(f"/proc/{pid}/task/{t}/wchan").read_text().strip() == "do_wait" for t in tasks
        )
    except OSError:
        return False


def others_alive(pid: int | None) -> list[int] | None:
    """Processes in ``pid``'s PID namespace that could act while ``pid`` waits: live ones
    other than ``pid`` and its ancestors, and ancestors not blocked in ``wait``; None when
    that cannot be told (the caller then assumes there are some)."""
    if pid is None:
        return None
    namespace = _namespace(pid)
    if namespace is None:
        return None
    ancestors, current = set(), pid
    while current > 0 and current not in ancestors and _namespace(current) == namespace:
        ancestors.add(current)
        stat = _stat(current)
        if stat is None:
            break
        current = stat[1]
    others = [a for a in ancestors if a != pid and not _waiting(a)]
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in ancestors or _namespace(int(name)) != namespace:
            continue
        stat = _stat(int(name))
        if stat is not None and stat[0] not in ("Z", "X") and not is_forwarder(int(name)):
            others.append(int(name))
    return others


def racing_verdict(pid: int | None, verdict: Verdict) -> Verdict:
    """``verdict`` of a plain push, or CHANGE when another process of the call could
    rewrite the git configuration between the guard's read and git's."""
    others = others_alive(pid)
    if others == []:
        return verdict
    return Verdict(
        CHANGE,
        "git push: other processes of this command are running and could change the git "
        "configuration (a forced push refspec) before git reads it",
    )
