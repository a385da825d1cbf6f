"""Pick the model for a session from its settings, and check that a model id exists.

Valid ids: ``scripted`` (the packaged script or the ``script`` setting),
``scripted:PATH`` naming a script file that exists, and known Claude models: the ids in
:data:`KNOWN_CLAUDE_MODELS` (optionally with a ``-YYYYMMDD`` date, ``@YYYYMMDD`` on
Vertex, the Bedrock form ``[region.]anthropic.ID[-DATE]-vN:M``, or the ``[1m]``
long-context suffix) and whatever ``ANTHROPIC_MODEL`` names. Anything else is refused
with a message that lists the choices, before a session switches to it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from iac_kernel.models.base import Model, ModelError
from iac_kernel.models.credentials import has_anthropic_credentials
from iac_kernel.models.scripted import SCRIPTED_MODEL_ID, Script, ScriptedModel

DEFAULT_ANTHROPIC_MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
#: Models offered in pickers (ACP config option, ``%model``).
ANTHROPIC_MODELS = ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"]
#: Every Claude model id accepted (the pickers show :data:`ANTHROPIC_MODELS`).
KNOWN_CLAUDE_MODELS = frozenset(
    {
        *ANTHROPIC_MODELS,
        "claude-opus-4-7",
        "claude-opus-4-5",
        "claude-opus-4-1",
        "claude-opus-4",
        "claude-opus-4-0",
        "claude-sonnet-4-5",
        "claude-sonnet-4",
        "claude-sonnet-4-0",
        "claude-3-7-sonnet",
        "claude-3-5-haiku",
        "claude-haiku-4",
    }
)
_DATED = re.compile(r"^(?P<base>.+?)(?:[-@]\d{8})?$")
_BEDROCK = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<id>.+?)(?:-v\d+(?::\d+)?)?$")


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


def is_known_claude_model(model_id: str) -> bool:
    """True for a known Claude id in any of the providers' spellings."""
    name = model_id.strip()
    if name.lower().endswith("[1m]"):
        name = name[:-4]
    if name == DEFAULT_ANTHROPIC_MODEL:
        return True
    bedrock = _BEDROCK.match(name)
    if bedrock:
        name = bedrock.group("id")
    match = _DATED.match(name)
    return bool(match) and match.group("base") in KNOWN_CLAUDE_MODELS


def check_model_id(model_id: str, script: str | None = None) -> None:
    """Raise :class:`ModelError` naming the choices unless ``model_id`` can be used."""
    if not isinstance(model_id, str) or not model_id.strip():
        raise ModelError(_unknown(repr(model_id)))
    if model_id == SCRIPTED_MODEL_ID:
        return
    if model_id.startswith(SCRIPTED_MODEL_ID + ":"):
        path = Path(model_id.partition(":")[2]).expanduser()
        if not path.is_file():
            raise ModelError(f"cannot read script {path}: no such file (model {model_id!r})")
        return
    if not is_known_claude_model(model_id):
        raise ModelError(_unknown(repr(model_id)))


def _unknown(shown: str) -> str:
    choices = ", ".join([*available_models(), f"{SCRIPTED_MODEL_ID}:PATH"])
    return f"unknown model {shown}; choose one of: {choices}"


def create_model(model_id: str, script: str | None = None) -> Model:
    """Build the provider for ``model_id`` (checked with :func:`check_model_id`).

    ``scripted`` replays ``script`` (or the packaged default); ``scripted:PATH`` names the
    script inline. Known Claude ids go to the Anthropic provider.
    """
    check_model_id(model_id, script)
    if model_id == SCRIPTED_MODEL_ID or model_id.startswith(SCRIPTED_MODEL_ID + ":"):
        inline = model_id.partition(":")[2] or None
        return ScriptedModel(Script.load(inline or script))
    from iac_kernel.models.anthropic import create_anthropic_model

    return create_anthropic_model(model_id)
