"""Both ACP SDK lines: 0.12 (the main venv) builds the connection on a message transport,
0.11 (beside jupyter-ai-acp-client, .ci/jupyter-ai) on a fed byte reader. Each line's
ACP tests run in its own venv; this checks the right form is picked for the installed
one."""

from __future__ import annotations

from importlib.metadata import version

from iac_kernel.acp.sdk_connection import MESSAGE_TRANSPORT


def test_the_connection_form_follows_the_installed_sdk_line():
    line = tuple(int(part) for part in version("agent-client-protocol").split(".")[:2])
    assert line in ((0, 11), (0, 12)), f"untested ACP SDK line {line}"
    assert MESSAGE_TRANSPORT is (line >= (0, 12))
