"""Import the Anthropic SDK and build its shared client ahead of time, off the main thread.

Importing ``anthropic`` takes about a second and building a client 20-35 ms; a Claude
prompt sent right after start-up should not wait for either. Without Anthropic
credentials sessions use the scripted model, so nothing is done.
"""

from __future__ import annotations

import logging
import threading
import time

from iac_kernel.models.credentials import has_anthropic_credentials

log = logging.getLogger(__name__)


def warm_anthropic() -> bool:
    """Import the provider and build the default client (blocking); True if it did."""
    if not has_anthropic_credentials():
        return False
    try:
        from iac_kernel.models.anthropic_clients import prepare_client

        prepare_client()
    except Exception:  # a bad configuration is reported when a model is built
        log.debug("Anthropic warm-up failed", exc_info=True)
        return False
    return True


def start_warm_up(delay: float = 0.0) -> threading.Thread | None:
    """:func:`warm_anthropic` in a daemon thread after ``delay`` seconds (None without
    credentials)."""
    if not has_anthropic_credentials():
        return None

    def run() -> None:
        if delay > 0:
            time.sleep(delay)
        warm_anthropic()

    thread = threading.Thread(target=run, name="anthropic-warm-up", daemon=True)
    thread.start()
    return thread
