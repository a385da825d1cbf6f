"""Issue 31: the egress policy's address and host checks, by category, with controls."""

from __future__ import annotations

import asyncio

import pytest

from iac_kernel.config import Settings
from iac_kernel.egress.decide import EgressCall
from iac_kernel.egress.policy import address_refusal, host_allowed, ip_literal, parse_private

LOOPBACK = ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.1", "017700000001",
            "::1", "::ffff:127.0.0.1", "[::1]", "::127.0.0.1", "2002:7f00:1::",
            "64:ff9b::7f00:1"]  # fmt: skip
LINK_LOCAL = ["169.254.169.254", "0xa9fea9fe", "2852039166", "::ffff:169.254.169.254",
              "fe80::1", "169.254.170.2"]  # fmt: skip
PRIVATE = ["10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fc00::1", "fd12::1",
           "0.0.0.0", "::", "224.0.0.1", "::ffff:10.1.2.3", "198.18.0.1"]  # fmt: skip
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "52.94.76.1"]


@pytest.mark.parametrize("spelling", LOOPBACK + LINK_LOCAL + PRIVATE)
def test_non_public_addresses_are_refused_in_every_spelling(spelling):
    address = ip_literal(spelling)
    assert address is not None, spelling
    assert address_refusal(address, 80, [], ()) is not None


@pytest.mark.parametrize("spelling", PUBLIC)
def test_public_addresses_pass(spelling):  # control
    assert address_refusal(ip_literal(spelling), 443, [], ()) is None


def test_a_rule_allows_exactly_its_address_and_port():
    rule = parse_private("127.0.0.1:8080")
    assert address_refusal(ip_literal("127.1"), 8080, [rule], ()) is None
    assert address_refusal(ip_literal("::ffff:127.0.0.1"), 8080, [rule], ()) is None
    assert address_refusal(ip_literal("127.0.0.1"), 8081, [rule], ()) is not None
    assert address_refusal(ip_literal("127.0.0.2"), 8080, [rule], ()) is not None
    # The control plane's ports stay refused even when a rule names them.
    broad = parse_private("127.0.0.0/8")
    assert "never reachable" in address_refusal(ip_literal("127.0.0.1"), 8888, [broad], {8888})


def test_bad_private_rules_are_one_line_errors():
    settings = Settings()
    with pytest.raises(ValueError, match="egress_allow_private"):
        settings.set("egress_allow_private", "localhost:80")
    settings.set("egress_allow_private", "10.0.0.0/8, [::1]:8080")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [("registry.terraform.io", True), ("sts.us-east-1.amazonaws.com", True),
     ("REGISTRY.TERRAFORM.IO.", True), ("amazonaws.com", False),
     ("evilamazonaws.com", False), ("amazonaws.com.evil.io", False),
     ("registry.terraform.io.evil.io", False), ("storage.googleapis.com", True)],
)  # fmt: skip
def test_default_allowlist(host, allowed):
    assert host_allowed(host, Settings().egress_allow.split(",")) is allowed


def test_names_resolving_to_loopback_are_refused_after_approval():
    asked = []

    async def ask(host, port):
        asked.append(host)
        return True, ""

    async def main():
        call = EgressCall(Settings(), ask, asyncio.get_running_loop())
        first = await call.decide("localhost.", 80, ())  # refused before any question
        second = await call.decide("LOCALHOST", 80, ())
        return first, second

    first, second = asyncio.run(main())
    assert not first.allow and not second.allow and asked == []
    assert "loopback" in first.reason
