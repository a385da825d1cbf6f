"""Chat fronts that run the agent as an ACP subprocess (Jupyter AI's chat persona).

This package imports nothing from Jupyter AI: :mod:`iac_kernel.persona.jupyter_ai`
does, and only Jupyter AI's persona manager imports it (the ``jupyter_ai.personas``
entry point). What the persona needs without Jupyter AI is here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from iac_kernel.models.providers import DETECT_ORDER, PROVIDER_ENV, PROVIDERS, active_provider

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


def credentials_notice(env: Mapping[str, str] | None = None) -> str | None:
    """What the chat says when no model credentials are set (the agent then answers with
    the offline scripted model), and how to set them; ``None`` when a provider is set."""
    env = os.environ if env is None else env
    try:
        if active_provider(env) is not None:
            return None
    except ValueError as exc:  # a misspelt IAC_KERNEL_PROVIDER: say so
        return f"**{NAME}**: {exc}. Fix it where JupyterLab starts, then restart JupyterLab."
    detected = [PROVIDERS[name] for name in DETECT_ORDER]
    keys = ", ".join(f"`{p.key_env}` ({p.title})" for p in detected if p.key_env)
    switches = " / ".join(f"`{p.switch_env}=1`" for p in detected if p.switch_env)
    return (
        f"**{NAME}**: no model credentials are set, so the offline scripted model answers "
        "(its words are replayed from a script; tools still run for real). To use a real "
        f"model, set one of {keys} in the environment JupyterLab starts in; or "
        f"{switches} with that cloud's credentials; or `{PROVIDER_ENV}=ollama` for a local "
        "model. Then restart JupyterLab."
    )
