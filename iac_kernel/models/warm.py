"""Import the active provider's SDK (and build Anthropic's shared client) ahead of time,
off the main thread.

Importing ``anthropic`` takes about a second and building a client 20-35 ms; a Claude
prompt sent right after start-up should not wait for either. An OpenAI-compatible
provider gets its SDK imported. Without credentials sessions use the scripted model, so
nothing is done.
"""

from __future__ import annotations

import logging
import threading
import time

from iac_kernel.models.credentials import has_anthropic_credentials
from iac_kernel.models.providers import ANTHROPIC_FAMILY, PROVIDERS, known_active_provider

log = logging.getLogger(__name__)


def warm_anthropic() -> bool:
    """Import the provider's SDK and build Anthropic's default client (blocking); True if
    it did."""
    active = known_active_provider()
    if active is not None and PROVIDERS[active].kind == "openai":
        try:
            import iac_kernel.models.openai_model  # noqa: F401
        except Exception:
            log.debug("OpenAI SDK warm-up failed", exc_info=True)
            return False
        return True
    if not has_anthropic_credentials() or active not in (None, *ANTHROPIC_FAMILY):
        return False  # a Messages-compatible profile builds its own client
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
    if known_active_provider() is None and not has_anthropic_credentials():
        return None

    def run() -> None:
        if delay > 0:
            time.sleep(delay)
        warm_anthropic()

    thread = threading.Thread(target=run, name="anthropic-warm-up", daemon=True)
    thread.start()
    return thread
