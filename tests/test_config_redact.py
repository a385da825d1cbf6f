"""Settings coercion and secret redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from iac_kernel.config import Settings
from iac_kernel.redact import redact


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch, isolated_store: Path):
    monkeypatch.setenv("IAC_KERNEL_MAX_TURN_REQUESTS", "7")
    monkeypatch.setenv("IAC_KERNEL_MODE", "accept_edits")
    monkeypatch.setenv("IAC_KERNEL_WEB_FETCH_ALLOW_PRIVATE", "yes")
    settings = Settings.from_env()
    assert settings.max_turn_requests == 7
    assert settings.mode == "accept_edits"
    assert settings.web_fetch_allow_private is True
    assert settings.sessions_dir == isolated_store


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("max_tokens", "100", 100),
        ("bash_timeout", "2.5", 2.5),
        ("context_window", "none", None),
        ("context_window", "5000", 5000),
        ("headless_policy", "allow", "allow"),
        ("script", "/tmp/x.json", "/tmp/x.json"),
    ],
)
def test_set_coerces(key: str, value: str, expected):
    settings = Settings()
    settings.set(key, value)
    assert getattr(settings, key) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_tokens", "lots"),
        ("max_tokens", "-5"),
        ("mode", "yolo"),
        ("headless_policy", "maybe"),
        ("web_fetch_allow_private", "perhaps"),
        ("nope", "1"),
    ],
)
def test_set_rejects_bad_values(key: str, value: str):
    with pytest.raises(ValueError):
        Settings().set(key, value)


def test_redact_secret_looking_variables_only():
    env = {
        "GITHUB_TOKEN": "ghp_abcdefghijklmnop",
        "DB_PASSWORD": "hunter2hunter2",
        "HOME": "/home/someone",
        "API_KEY": "short",
    }
    text = "token ghp_abcdefghijklmnop pw hunter2hunter2 home /home/someone key short"
    assert redact(text, env) == (
        "token [REDACTED:GITHUB_TOKEN] pw [REDACTED:DB_PASSWORD] home /home/someone key short"
    )
    assert redact("", env) == ""
