"""Validate values against the TypeScript ACP SDK's zod schemas (schema 1.25, the SDK
2.4.0 of tests/node) from Python tests: for the fields the Python SDK (schema 1.19)
lacks, which the agent sends as raw JSON. No tests here."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from mcp_support import NODE_DIR, require_node_modules

VALIDATE = NODE_DIR / "validate.mjs"


def schema_failures(items: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The failures of ``(zod schema name, value)`` pairs (``zSessionNotification`` ...);
    ``[]`` when every value validates losslessly. Skips without node and the SDK."""
    require_node_modules()
    done = subprocess.run(
        [shutil.which("node") or "node", str(VALIDATE)],
        input=json.dumps([{"schema": name, "value": value} for name, value in items]),
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["failures"]
