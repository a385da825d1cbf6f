"""Tell the team a change waits for them: a new pending approval record posted to a
Slack-compatible incoming webhook (``{"text": ...}``), with a link that opens the record
in the approvals panel of JupyterLab.

Settings (environment variables, an admin's like the store's; docs/approvals.md):

* ``IAC_KERNEL_APPROVAL_WEBHOOK``: the incoming-webhook URL (a secret: hidden from
  sandboxes and masked like any credential; never logged);
* ``IAC_KERNEL_APPROVAL_PANEL``: the JupyterLab URL approvers open, to which the link adds
  ``?iac-approval=ID``. On JupyterHub with a public URL it defaults to the hub's
  ``user-redirect/lab``, which takes whoever clicks to their own Lab; else the message
  names the record's id and the panel without a link.

:func:`notify_pending` posts from a daemon thread with a short timeout, so the apply that
made the record never waits on the webhook; a failure is logged once per process.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from iac_kernel.team.approvals import Approval
from iac_kernel.team.store import iso

WEBHOOK_ENV = "IAC_KERNEL_APPROVAL_WEBHOOK"
PANEL_ENV = "IAC_KERNEL_APPROVAL_PANEL"
#: JupyterHub gives each user's server the hub's public URL (when the hub has one).
HUB_URL_ENV = "JUPYTERHUB_PUBLIC_HUB_URL"
#: The query parameter the lab extension's panel opens a record by (src/approvals/).
LINK_PARAM = "iac-approval"
#: Seconds one post may take.
TIMEOUT = 5.0
#: A record older than this was announced when it was made (by the process that made it):
#: an apply that finds it again later does not post it again.
FRESH = 300.0

log = logging.getLogger(__name__)
_lock = threading.Lock()
_posted: set[str] = set()
_failure_logged = False


def panel_link(record_id: str, env: Mapping[str, str]) -> str | None:
    """The URL that opens ``record_id`` in the approvals panel, or None when no Lab URL is
    known."""
    base = env.get(PANEL_ENV, "").strip()
    if not base and env.get(HUB_URL_ENV, "").strip():
        base = urllib.parse.urljoin(env[HUB_URL_ENV].strip().rstrip("/") + "/", "user-redirect/lab")
    if not base:
        return None
    parts = urllib.parse.urlsplit(base)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, v) for k, v in query if k != LINK_PARAM] + [(LINK_PARAM, record_id)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _slack(text: str) -> str:
    """Slack's three control characters, escaped (its incoming webhooks ask for this)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message(approval: Approval, env: Mapping[str, str]) -> dict[str, Any]:
    """The webhook's JSON: who asks, the plan's summary, what it waits for, the rule, the
    expiry and the link to the panel."""
    lines = [
        f"{_slack(approval.requester)} asks to apply: {_slack(approval.summary)}",
        f"{_slack(approval.waiting_text())} (rule: {_slack(approval.rule)}); "
        f"expires {iso(approval.expires_at)}",
    ]
    link = panel_link(approval.id, env)
    if link:
        lines.append(f"Review it in JupyterLab: <{link}>")
    else:
        lines.append(
            f"Review approval {approval.id} in JupyterLab's Approvals panel, or "
            f"`iac-kernel approvals show {approval.id}`"
        )
    return {"text": "\n".join(lines)}


def _webhook(env: Mapping[str, str]) -> str | None:
    url = env.get(WEBHOOK_ENV, "").strip()
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        _failed(f"{WEBHOOK_ENV} is not an http(s) URL")
        return None
    return url


def notify_pending(
    approval: Approval, env: Mapping[str, str] | None = None
) -> threading.Thread | None:
    """Post ``approval`` to the webhook when one is set, it is pending, was made in the
    last :data:`FRESH` seconds and this process has not posted it yet. Returns the posting
    thread (already started), or None when nothing is posted. Never raises, never waits."""
    env = dict(os.environ if env is None else env)
    url = _webhook(env)
    if url is None or approval.status != "pending" or time.time() - approval.created_at > FRESH:
        return None
    with _lock:
        if approval.id in _posted:
            return None
        _posted.add(approval.id)
    body = json.dumps(message(approval, env)).encode()
    thread = threading.Thread(
        target=_post, args=(url, body, approval.id), name="approval-webhook", daemon=True
    )
    thread.start()
    return thread


def _post(url: str, body: bytes, record_id: str) -> None:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            answer.read(4096)
    except urllib.error.HTTPError as exc:
        _failed(f"approval {record_id}: the webhook answered HTTP {exc.code}")
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections
        reason = str(getattr(exc, "reason", None) or exc).replace(url, "(the URL)")
        _failed(f"approval {record_id}: the webhook could not be reached ({reason})")


def _failed(line: str) -> None:
    """Log the first failure of this process (the URL, a secret, is never in it)."""
    global _failure_logged
    with _lock:
        if _failure_logged:
            return
        _failure_logged = True
    log.warning("%s; later webhook failures are not logged", line)
