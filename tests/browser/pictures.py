"""Where the browser tests put what they draw.

Screenshots (for a person reading a failure) go to the test's own temporary folder, never
into the checkout: pytest keeps the last three runs' folders and a failing test prints
where. The pictures in ``docs/img`` are drawn by the same tests, but only when
``IAC_DOC_PICTURES`` names a folder to draw them into; ``python docs/img/make.py``
runs those tests with it set to ``docs/img``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The folder the docs' pictures are written to; unset (the test run): none is written.
#: Not ``IAC_KERNEL_*``: the kernels the tests start would report that as an unknown
#: setting, in the picture.
DOC_PICTURES_ENV = "IAC_DOC_PICTURES"


def doc_picture(name: str) -> Path | None:
    """Where to write the docs' picture ``name``, or ``None`` when not asked to."""
    folder = os.environ.get(DOC_PICTURES_ENV)
    return Path(folder) / name if folder else None
