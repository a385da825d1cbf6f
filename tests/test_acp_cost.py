"""ACP ``usage_update`` with ``cost`` (schema 1.25): the session's list-price cost, from
the same prices as the notebook footer, only where the footer has one."""

from __future__ import annotations

import pytest
from acp.schema import SessionNotification
from acp.utils import serialize_params

from iac_kernel.acp.session import notify
from iac_kernel.agent.manager import SessionManager
from iac_kernel.config import Settings
from iac_kernel.events import Usage
from iac_kernel.models.providers import RunningCost
from node_schema import schema_failures
from test_prices import PROVIDER_ENV

MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


@pytest.fixture
def priced(monkeypatch, workspace):
    """A session on claude-haiku-4-5 ($1 in, $5 out per million) with a direct key."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    manager = SessionManager(Settings.from_env(), holder="test", origin="acp")
    session = manager.new(str(workspace))
    session.set_model("claude-haiku-4-5")
    return session


def test_running_cost_adds_priced_turns_and_gives_up_on_an_unpriced_one() -> None:
    cost = RunningCost()
    assert cost.total() is None  # nothing priced yet: no figure, not $0
    cost.add(0.5, MILLION)
    cost.add(None, Usage())  # a slash command: no tokens, no harm
    assert cost.total() == 0.5
    assert cost.total(running=0.25) == 0.75
    assert cost.total(running=None, used_tokens=True) is None  # running turn unpriced
    cost.add(None, MILLION)  # e.g. a turn on the scripted model or Bedrock
    assert cost.total() is None and cost.total(running=1.0) is None


def test_usage_update_cost_is_the_footer_price_of_the_session(priced) -> None:
    assert notify.session_cost(priced) is None  # no turn yet
    running = notify.session_cost(priced, MILLION)
    assert running is not None and running.currency == "USD" and running.amount == 6.0
    priced.cost.add(priced.turn_cost(MILLION), MILLION)  # what a finished turn does
    assert notify.session_cost(priced).amount == 6.0
    assert notify.session_cost(priced, MILLION).amount == 12.0


def test_no_cost_where_the_footer_has_no_price(priced, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")  # Bedrock prices differ
    assert notify.session_cost(priced, MILLION) is None
    monkeypatch.delenv("CLAUDE_CODE_USE_BEDROCK")
    priced.set_model("scripted")
    assert notify.session_cost(priced, MILLION) is None


async def test_the_usage_update_with_cost_validates_against_the_ts_sdk(priced) -> None:
    sent: list[dict] = []

    class Channel:
        async def update(self, session_id, update, extra=None):
            sent.append(serialize_params(SessionNotification(session_id=session_id, update=update)))

    await notify.send_usage(Channel(), priced, MILLION)
    (params,) = sent
    assert params["update"]["cost"] == {"amount": 6.0, "currency": "USD"}
    assert schema_failures([("zSessionNotification", params)]) == []
    # The check can fail: a cost without its currency is refused.
    del params["update"]["cost"]["currency"]
    assert schema_failures([("zSessionNotification", params)]) != []
