"""pytest plugin: collect garbage before a test's report is made.

On CPython 3.11 the ``ast`` module keeps one recursion counter per interpreter, and a
parse that starts inside another parse resets it: the outer one then fails with
``SystemError: AST constructor recursion depth mismatch``. pytest parses source with
``ast`` to show a failure; a garbage collection during that parse runs finalizers, and an
asyncio task whose exception nobody retrieved logs it from ``Task.__del__`` with a
traceback, which 3.11 formats with ``ast`` too. A failed test leaves exactly such tasks
behind (its frames hold them until the next failure replaces ``sys.last_traceback``), so
the next failure's report crashed pytest (``INTERNALERROR``). Collecting first runs those
finalizers outside any parse.

Only reports of a call that raised are parsed, so only they collect first: a full
collection of the suite's heap takes a good part of a second, and doing it before every
report (three a test) more than tripled the suite's time.
"""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    if call.excinfo is not None:
        gc.collect()
    yield
