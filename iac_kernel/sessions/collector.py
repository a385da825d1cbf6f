"""Python's cyclic garbage collector paused for a bulk read.

Reading a long session builds hundreds of thousands of containers at once; each of the
collector's full passes walks every one of them again: about half again the time of a
50 MB ``session/load`` (``bench/acp_load.py``). Reference counting still frees
everything without a cycle meanwhile; the collector resumes at the end.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside the block (as it was before, after it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
