"""Chat fronts that run the agent as an ACP subprocess (Jupyter AI's chat persona).

This package imports nothing from Jupyter AI: :mod:`iac_kernel.persona.jupyter_ai`
does, and only Jupyter AI's persona manager imports it (the ``jupyter_ai.personas``
entry point). What the persona needs without Jupyter AI is here.
"""

from __future__ import annotations

import sys
from pathlib import Path

NAME = "IaC Agent"
DESCRIPTION = (
    "The iac-kernel infrastructure-as-code agent: reads, edits and plans Terraform in "
    "the chat's folder; infrastructure changes such as terraform apply ask on every "
    "call. Its sessions are shared with iac-kernel notebooks and ACP editors."
)
AVATAR = Path(__file__).resolve().parent.parent / "kernel" / "resources" / "logo-svg.svg"
INSTALL_HINT = "pip install 'iac-kernel[jupyter-ai]'"


def agent_command() -> list[str]:
    """``iac-kernel acp`` of this environment (the interpreter running Jupyter)."""
    return [sys.executable, "-m", "iac_kernel", "acp"]
