"""Pick the model for a session from its settings."""

from __future__ import annotations

import os

from iac_kernel.models.base import Model
from iac_kernel.models.credentials import has_anthropic_credentials
from iac_kernel.models.scripted import SCRIPTED_MODEL_ID, Script, ScriptedModel

DEFAULT_ANTHROPIC_MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
#: Models offered in pickers (ACP config option, ``%model``). Any other id is accepted too.
ANTHROPIC_MODELS = ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"]


def anthropic_available() -> bool:
    return has_anthropic_credentials()


def default_model_id() -> str:
    """Claude when credentials are set, otherwise the offline scripted model."""
    return DEFAULT_ANTHROPIC_MODEL if anthropic_available() else SCRIPTED_MODEL_ID


def available_models() -> list[str]:
    """The ids a user can pick from, scripted first when there are no credentials."""
    if anthropic_available():
        return [*ANTHROPIC_MODELS, SCRIPTED_MODEL_ID]
    return [SCRIPTED_MODEL_ID, *ANTHROPIC_MODELS]


def create_model(model_id: str, script: str | None = None) -> Model:
    """Build the provider for ``model_id``.

    ``scripted`` replays ``script`` (or the packaged default); ``scripted:PATH`` names the
    script inline. Everything else goes to the Anthropic provider.
    """
    if model_id == SCRIPTED_MODEL_ID or model_id.startswith(SCRIPTED_MODEL_ID + ":"):
        inline = model_id.partition(":")[2] or None
        return ScriptedModel(Script.load(inline or script))
    from iac_kernel.models.anthropic import create_anthropic_model

    return create_anthropic_model(model_id)
