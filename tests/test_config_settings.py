"""Bad settings: one readable line naming the variable or key, its value and what it
accepts; environment values fall back to the defaults instead of stopping anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iac_kernel import config
from iac_kernel.config import Settings

PACKAGE = Path(config.__file__).resolve().parent


def test_bad_environment_values_keep_the_defaults_and_say_so() -> None:
    problems: list[str] = []
    settings = Settings.from_env(
        {
            "IAC_KERNEL_MAX_TURN_REQUESTS": "abc",
            "IAC_KERNEL_MODE": "yolo",
            "IAC_KERNEL_WEB_FETCH_ALLOW_PRIVATE": "perhaps",
            "IAC_KERNEL_BASH_TIMEOUT": "-3",
            "IAC_KERNEL_MAX_TOKENS": "100",
        },
        problems,
    )
    assert (settings.max_turn_requests, settings.mode) == (25, "default")
    assert settings.web_fetch_allow_private is False and settings.bash_timeout == 120.0
    assert settings.max_tokens == 100  # good values still apply
    assert sorted(problems) == sorted(
        [
            "IAC_KERNEL_MAX_TURN_REQUESTS='abc' is not valid (expects a whole number, 0 or more);"
            " using the default 25",
            "IAC_KERNEL_MODE='yolo' is not valid (expects one of default, accept_edits, "
            "read_only, bypass); using the default 'default'",
            "IAC_KERNEL_WEB_FETCH_ALLOW_PRIVATE='perhaps' is not valid (expects true or false, "
            "1 or 0, yes or no, on or off); using the default False",
            "IAC_KERNEL_BASH_TIMEOUT='-3' is not valid (expects a number, 0 or more); "
            "using the default 120.0",
        ]
    )
    assert all("\n" not in line for line in problems)


def test_without_a_list_problems_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="iac_kernel.config"):
        settings = Settings.from_env({"IAC_KERNEL_MAX_TOKENS": "lots"})
    assert settings.max_tokens == Settings().max_tokens
    assert "IAC_KERNEL_MAX_TOKENS='lots' is not valid" in caplog.text


def test_unknown_and_other_variables() -> None:
    problems: list[str] = []
    Settings.from_env(
        {
            "IAC_KERNEL_MAX_TURN_REQUEST": "5",
            "IAC_KERNEL_PERMISSION_UI": "sideways",
            "IAC_KERNEL_LOG_LEVEL": "debug",  # case does not matter
            "IAC_KERNEL_ENDPOINT": "off",
            "IAC_KERNEL_LOG_FILE": "/tmp/x.log",
            "HOME": "/root",
        },
        problems,
    )
    assert problems == [
        "IAC_KERNEL_MAX_TURN_REQUEST is not an iac-kernel setting (did you mean "
        "IAC_KERNEL_MAX_TURN_REQUESTS?); ignored",
        "IAC_KERNEL_PERMISSION_UI='sideways' is not valid (expects one of auto, widgets, "
        "stdin, policy)",
    ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "max_tokens",
            "lots",
            "max_tokens = 'lots' is not valid (expects a whole number, 0 or more)",
        ),
        ("context_window", "big", "(expects a whole number, 0 or more, or none)"),
        ("mode", "yolo", "mode = 'yolo' is not valid (expects one of default, accept_edits"),
        ("headless_policy", "maybe", "(expects one of deny, allow, stdin)"),
        ("max_turn_reqs", "3", "unknown setting 'max_turn_reqs' (did you mean max_turn_requests?)"),
    ],
)
def test_set_names_the_key_the_value_and_what_it_accepts(key: str, value: str, message: str):
    with pytest.raises(ValueError) as error:
        Settings().set(key, value)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_set_config_option_names_the_key_and_the_value(tmp_path: Path) -> None:
    from acp import RequestError

    from iac_kernel.acp.session.state import apply
    from iac_kernel.agent.manager import SessionManager

    manager = SessionManager(Settings(sessions_dir=tmp_path / "s"), holder="test", origin="acp")
    session = manager.new(str(tmp_path))
    for config_id, value, words in [
        ("max_turn_requests", "abc", "max_turn_requests = 'abc' is not valid (expects a whole"),
        ("mode", "yolo", "yolo"),
    ]:
        with pytest.raises(RequestError) as error:
            apply(session, config_id, value)
        assert words in str(error.value.data)


def test_every_iac_kernel_variable_in_the_code_is_known() -> None:
    """A new IAC_KERNEL_* variable must be a Settings field or listed in OTHER_ENV, or the
    kernel would call it unknown."""
    used = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r"\bIAC_KERNEL_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    fields = {"IAC_KERNEL_" + name.upper() for name in Settings().keys()}
    unknown = used - fields - set(config.OTHER_ENV) - {"IAC_KERNEL_"}
    assert not unknown


def test_an_unknown_model_in_the_environment_names_the_choices() -> None:
    problems: list[str] = []
    settings = Settings.from_env({"IAC_KERNEL_MODEL": "claude-sonet-4"}, problems)
    assert settings.model is None  # the default: Claude with credentials, else scripted
    (line,) = problems
    assert line.startswith("IAC_KERNEL_MODEL='claude-sonet-4' is not valid (unknown model")
    assert "claude-sonnet-4-6" in line and line.endswith("using the default none")
    assert Settings.from_env({"IAC_KERNEL_MODEL": "scripted"}, problems).model == "scripted"
    assert len(problems) == 1
