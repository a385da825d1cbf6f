"""Settings: defaults, environment overrides, and typed run-time changes.

A bad value never stops a program: :meth:`Settings.from_env` keeps the default and
reports one readable line per problem (the variable, its value, what it accepts), and
:meth:`Settings.set` raises ``ValueError`` with the same kind of line for ``%config`` and
``session/set_config_option``.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_kernel.egress.policy import DEFAULT_ALLOW, check_private_setting
from iac_kernel.masking import own_names
from iac_kernel.models import providers
from iac_kernel.models.base import FIRST_BYTE_TIMEOUT

MODES = ("default", "accept_edits", "read_only", "bypass")
HEADLESS_POLICIES = ("deny", "allow", "stdin")
PERMISSION_UIS = ("auto", "widgets", "stdin", "policy")
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
ENV_PREFIX = "IAC_KERNEL_"
#: Settings whose value must be one of a few words (add yours with a new field).
CHOICES: dict[str, tuple[str, ...]] = {
    "mode": MODES,
    "headless_policy": HEADLESS_POLICIES,
    "sandbox": ("auto", "required"),  # guard (H1): required refuses bash without bwrap
    "sandbox_network": ("proxy", "none"),
}
#: ``IAC_KERNEL_*`` variables that are not Settings fields: name -> accepted words,
#: ``NUMBER`` (a number, 0 or more) or ``None`` (free text: a path, a program). Checked at
#: start like the fields.
NUMBER = ("<number>",)
OTHER_ENV: dict[str, tuple[str, ...] | None] = {
    "IAC_KERNEL_PERMISSION_UI": PERMISSION_UIS,
    "IAC_KERNEL_ENDPOINT": TRUE_WORDS + FALSE_WORDS,
    "IAC_KERNEL_LOG_LEVEL": ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "IAC_KERNEL_LOG_FILE": None,
    "IAC_KERNEL_RUNTIME_DIR": None,
    **providers.SETTINGS,  # IAC_KERNEL_PROVIDER and the endpoint of the active provider
    "IAC_KERNEL_CHECKOV": None,
    "IAC_KERNEL_CHECKOV_CHECKS": None,  # trusted custom check dirs (terraform/policy.py)
    "IAC_KERNEL_MCP_START_TIMEOUT": NUMBER,
    "IAC_KERNEL_MCP_CALL_TIMEOUT": NUMBER,
    # iac-kernel acp --remote (acp/remote/); the token is never echoed.
    "IAC_KERNEL_REMOTE_TOKEN": None,
    "IAC_KERNEL_REMOTE_RECONNECT": NUMBER,
    "IAC_KERNEL_EGRESS_ENV": None,  # the egress proxy's environment (egress/environment.py)
    "IAC_KERNEL_EGRESS_DIR": None,  # the credential broker's private folder (egress/broker.py)
    # A team's change control (team/, docs/approvals.md): the admin's, never a session's.
    "IAC_KERNEL_APPROVAL_RULES": None,  # the admin's rules file (TOML)
    "IAC_KERNEL_TEAM_STORE": None,  # the store's SQLAlchemy URL
    "IAC_KERNEL_APPROVAL_TTL": NUMBER,  # seconds an approval lives (default 24 h)
    "IAC_KERNEL_APPROVAL_WEBHOOK": None,  # Slack-compatible webhook URL (team/webhook.py)
    "IAC_KERNEL_APPROVAL_PANEL": None,  # the Lab URL the webhook's link opens
}
#: The agent's own variables that hold a secret (masked and hidden like any credential).
SECRET_ENV = frozenset({"IAC_KERNEL_REMOTE_TOKEN", "IAC_KERNEL_APPROVAL_WEBHOOK"})

log = logging.getLogger(__name__)


def _default_sessions_dir() -> Path:
    env = os.environ.get(f"{ENV_PREFIX}SESSIONS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".iac-code" / "sessions"


@dataclass
class Settings:
    """Every knob the agent core reads. One instance per session (copied from defaults)."""

    sessions_dir: Path = field(default_factory=_default_sessions_dir)
    #: Model id; ``None`` picks Anthropic when a key is set, else the scripted model.
    model: str | None = None
    #: Script file for the scripted model (``None``: the packaged default script).
    script: str | None = None
    mode: str = "default"
    max_turn_requests: int = 25
    max_tokens: int = 8192
    thinking_budget: int = 0
    #: Overrides the model's context window (tests use small windows to force compaction).
    context_window: int | None = None
    #: Compact when the context reaches this fraction of the window.
    compact_threshold: float = 0.8
    #: Seconds to wait for a model endpoint's first byte before the turn ends with an
    #: error (0: no limit); a stream that has started is never cut by it.
    model_first_byte_timeout: float = FIRST_BYTE_TIMEOUT
    bash_timeout: float = 120.0
    #: Seconds between SIGINT and SIGTERM (and SIGTERM and SIGKILL) when a command is cancelled.
    bash_grace: float = 5.0
    output_limit: int = 30_000
    read_limit_bytes: int = 256_000
    web_fetch_allow_private: bool = False
    web_fetch_max_bytes: int = 2_000_000
    web_fetch_timeout: float = 20.0
    #: What a headless notebook run does with a permission request: deny, allow, or ask on stdin.
    headless_policy: str = "deny"
    #: Bash sandbox (bubblewrap): auto (reduced guard when unusable) or required (refuse bash).
    sandbox: str = "auto"
    #: Extra paths writable inside the sandbox besides the cwd and a private /tmp
    #: (separated by ``:`` or ``,``).
    sandbox_writable_paths: str = ""
    #: Workspace roots beyond the cwd (ACP ``additionalDirectories``): tools read and
    #: write there as in the cwd, and the sandbox binds them writable (``:`` separated).
    additional_directories: str = ""
    #: Extra paths hidden inside the sandbox (empty mounts), like the credential stores
    #: (``~/.aws``, ``~/.ssh`` ...) that are always hidden (``:`` or ``,`` separated).
    sandbox_hidden_paths: str = ""
    #: Network of a bash call's shell: proxy (its own namespace, out only through the
    #: egress proxy), or none (no way out; guarded programs keep the proxy).
    sandbox_network: str = "proxy"
    #: Hosts sandboxes reach without a question (names and ``*.suffix``, comma separated).
    egress_allow: str = DEFAULT_ALLOW
    #: Loopback/private addresses sandboxes may reach (``127.0.0.1:8080``, ``10.0.0.0/8``).
    egress_allow_private: str = ""
    #: Programs whose changing commands need a per-call approval at exec time.
    guarded_programs: str = "terraform,tofu,terragrunt,kubectl,helm,aws,gcloud,gsutil,az,pulumi,git"
    #: ``terraform_apply`` given a pull request applies before the merge when the forge
    #: says it can be merged (off: only a merged request is applied).
    pr_apply_before_merge: bool = False

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, problems: list[str] | None = None
    ) -> Settings:
        """Defaults, overridden by ``IAC_KERNEL_<FIELD>`` environment variables.

        A bad value keeps the default: its one-line description is appended to
        ``problems``, or logged as a warning when no list is given; so are unknown
        ``IAC_KERNEL_*`` names and bad values of :data:`OTHER_ENV`.
        """
        env = os.environ if env is None else env
        settings = cls()
        found: list[str] = []
        for key, name in FIELD_ENV.items():
            value = env.get(name)
            if value is None or key == "sessions_dir":
                continue
            try:
                settings.set(key, value)
            except ValueError as exc:
                detail = getattr(exc, "detail", None) or accepts(key)
                found.append(
                    f"{name}={value!r} is not valid ({detail}); "
                    f"using the default {_show(getattr(settings, key))}"
                )
        found += _other_env_problems(env)
        if problems is None:
            for line in found:
                log.warning("%s", line)
        else:
            problems.extend(found)
        return settings

    def copy(self) -> Settings:
        return dataclasses.replace(self)

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]

    def set(self, key: str, value: Any) -> None:
        """Set one field from a string or a typed value; bad keys or values raise ValueError."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        if key not in fields:
            raise ValueError(
                f"unknown setting {key!r}{_did_you_mean(key, fields)}; settings: "
                + ", ".join(fields)
            )
        setattr(self, key, _coerce(key, fields[key].type, value))

    def public(self) -> dict[str, Any]:
        """The settings as plain JSON values."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self).items()}


#: Each setting's environment variable.
FIELD_ENV = {f.name: ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings)}


def path_list(raw: Any) -> list[Path]:
    """The paths of a ``:``/``,`` separated setting (or a list), each expanded and resolved."""
    if not isinstance(raw, (list, tuple)):
        raw = str(raw or "").replace(",", os.pathsep).split(os.pathsep)
    paths = (os.path.expanduser(str(item).strip()) for item in raw)
    return [Path(os.path.realpath(p)) for p in paths if p]


def _coerce(key: str, type_name: Any, value: Any) -> Any:
    type_name = str(type_name)
    text = value.strip() if isinstance(value, str) else value
    try:
        if "None" in type_name and text in (None, "", "none", "None", "null"):
            result: Any = None
        elif type_name.startswith("bool"):
            if isinstance(text, bool):
                return text
            lowered = str(text).lower()
            if lowered not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError
            result = lowered in TRUE_WORDS
        elif type_name.startswith(("int", "float")):
            if isinstance(text, bool):
                raise ValueError
            result = (int if type_name.startswith("int") else float)(text)
            if result < 0:
                raise ValueError
        elif type_name == "Path":
            result = Path(str(text)).expanduser()
        else:
            result = str(text)
    except (TypeError, ValueError):
        raise ValueError(_invalid(key, value, type_name)) from None
    if key in CHOICES and result not in CHOICES[key]:
        raise ValueError(_invalid(key, value, type_name))
    if key in CHECKS and result is not None:
        try:
            CHECKS[key](result)
        except Exception as exc:
            error = ValueError(f"{key} = {value!r} is not valid ({exc})")
            error.detail = str(exc)  # type: ignore[attr-defined]
            raise error from None
    return result


def _check_model(model_id: Any) -> None:
    # Imported when used: config sits below every other module.
    from iac_kernel.models.registry import check_model_id

    check_model_id(str(model_id))


#: Checks beyond the type, by setting (they raise with a readable message).
CHECKS: dict[str, Callable[[Any], None]] = {
    "model": _check_model,
    "egress_allow_private": check_private_setting,
}


def accepts(key: str, type_name: Any = None) -> str:
    """What a setting accepts, in words: ``"expects a whole number, 0 or more"``."""
    if type_name is None:
        fields = {f.name: f.type for f in dataclasses.fields(Settings)}
        type_name = fields.get(key, "str")
    type_name = str(type_name)
    if key in CHOICES:
        text = "one of " + ", ".join(CHOICES[key])
    else:
        text = next((w for t, w in _WORDS.items() if type_name.startswith(t)), "text")
    return f"expects {text}" + (", or none" if "None" in type_name else "")


#: What a field of each type accepts, in words.
_WORDS = {
    "bool": "true or false, 1 or 0, yes or no, on or off",
    "int": "a whole number, 0 or more",
    "float": "a number, 0 or more",
    "Path": "a path",
}


def settings_table() -> str:
    """The settings as a Markdown table (docs/settings.md holds this very text)."""
    rows = ["| setting | environment variable | accepts | default |", "|---|---|---|---|"]
    defaults = Settings()
    for f in dataclasses.fields(Settings):
        default = getattr(defaults, f.name)
        shown = "`~/.iac-code/sessions`" if f.name == "sessions_dir" else f"`{_show(default)}`"
        words = accepts(f.name, f.type).removeprefix("expects ")
        rows.append(f"| `{f.name}` | `{FIELD_ENV[f.name]}` | {words} | {shown} |")
    return "\n".join(rows) + "\n"


def _invalid(key: str, value: Any, type_name: Any) -> str:
    return f"{key} = {value!r} is not valid ({accepts(key, type_name)})"


def _show(value: Any) -> str:
    return "none" if value is None else repr(str(value) if isinstance(value, Path) else value)


def own_variables() -> frozenset[str]:
    """The agent's own settings as variables (``IAC_KERNEL_<FIELD>`` and
    :data:`OTHER_ENV`) that hold no secret: never secrets by their name
    (``IAC_KERNEL_EGRESS_ALLOW_PRIVATE`` names a host, not a private key)."""
    return frozenset((set(FIELD_ENV.values()) | set(OTHER_ENV)) - SECRET_ENV)


own_names.declare(own_variables())


def _did_you_mean(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _other_env_problems(env: Mapping[str, str]) -> list[str]:
    """Unknown ``IAC_KERNEL_*`` names and bad values of the non-field variables."""
    known = set(FIELD_ENV.values()) | set(OTHER_ENV)
    problems = []
    for name in sorted(n for n in env if n.startswith(ENV_PREFIX)):
        value = env[name]
        if name not in known:
            problems.append(
                f"{name} is not an iac-kernel setting{_did_you_mean(name, known)}; ignored"
            )
            continue
        words = OTHER_ENV.get(name)
        if words is NUMBER:
            try:
                _coerce(name, "float", value)
            except ValueError:
                problems.append(f"{name}={value!r} is not valid (expects a number, 0 or more)")
        elif words and value.strip().lower() not in {w.lower() for w in words}:
            problems.append(f"{name}={value!r} is not valid (expects one of {', '.join(words)})")
    return problems
