"""Where a sandbox may connect: host names by allowlist, addresses by kind, ports by owner.

Two independent checks decide one connection through the egress proxy:

* the **host name** the program asked for: on the ``egress_allow`` setting (exact names
  and ``*.suffix`` patterns), else a permission question (see ``PermissionGate``);
* the **address** it resolves to, checked after resolution (here, in the agent, right
  before the proxy connects to exactly that address, so DNS rebinding cannot swap it):
  loopback, link-local (cloud metadata ``169.254.169.254``), private, shared (CGNAT),
  unspecified, multicast and reserved addresses, in any spelling (``2130706433``,
  ``0x7f000001``, ``127.1``, ``::ffff:127.0.0.1``, 6to4 and NAT64 forms), are refused
  unless the ``egress_allow_private`` setting names them. Ports of the agent's own
  control plane (the Jupyter server, kernels, the proxy itself) are refused on every
  non-public address, whatever the rules say.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Hosts every sandbox may reach without a question: terraform's and OpenTofu's
#: registries, GitHub (modules, provider downloads), the clouds' API endpoints.
DEFAULT_ALLOW = (
    "registry.terraform.io,releases.hashicorp.com,checkpoint-api.hashicorp.com,"
    "registry.opentofu.org,get.opentofu.org,github.com,*.github.com,"
    "*.githubusercontent.com,*.amazonaws.com,*.api.aws,*.googleapis.com,"
    "management.azure.com,*.azure.com,login.microsoftonline.com,graph.microsoft.com,"
    "*.windows.net"
)

#: Names that are loopback by definition (RFC 6761): refused without a DNS lookup.
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")

_SPECIAL = (
    ipaddress.ip_network("100.64.0.0/10"),  # shared address space (CGNAT, some clouds)
    ipaddress.ip_network("192.0.0.0/24"),
    ipaddress.ip_network("198.18.0.0/15"),
    ipaddress.ip_network("fc00::/7"),
    ipaddress.ip_network("fe80::/10"),
)


def normal_host(host: str) -> str:
    """The host name as compared: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


def split_list(raw: Any) -> list[str]:
    """A setting's comma, space or newline separated items."""
    items = raw if isinstance(raw, (list, tuple)) else str(raw or "").replace(",", " ").split()
    return [str(i).strip() for i in items if str(i).strip()]


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether ``host`` is on the allowlist: an exact name, or ``*.suffix`` (any name
    below ``suffix``, not ``suffix`` itself)."""
    name = normal_host(host)
    for pattern in patterns:
        pattern = normal_host(pattern)
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                return True
        elif name == pattern:
            return True
    return False


def ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any form the C library accepts (``127.1``,
    ``2130706433``, ``0x7f.1``, ``[::1]``), or None for a name."""
    text = normal_host(host)
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:  # inet_aton accepts the historic forms getaddrinfo resolves without DNS
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def embedded_v4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries: mapped ``::ffff:a.b.c.d``, compatible
    ``::a.b.c.d``, 6to4 ``2002:AABB:CCDD::``, NAT64 ``64:ff9b::a.b.c.d``."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    packed = address.packed
    if packed[:12] == bytes(12) and int(address) > 1:
        return ipaddress.IPv4Address(packed[12:])
    if address in ipaddress.ip_network("64:ff9b::/96") or address in ipaddress.ip_network(
        "64:ff9b:1::/48"
    ):
        return ipaddress.IPv4Address(packed[12:])
    return None


def kind_of(address: IPAddress) -> str | None:
    """Why an address is not public (``loopback``, ``link-local`` ...), or None."""
    inner = embedded_v4(address)
    if inner is not None:
        return kind_of(inner)
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local (instance metadata)"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if any(address in net for net in _SPECIAL if net.version == address.version):
        return "private"
    if address.is_private or address.is_reserved or not address.is_global:
        return "private"
    return None


@dataclass(frozen=True)
class PrivateRule:
    """One ``egress_allow_private`` item: a network and, optionally, one port."""

    network: Network
    port: int | None = None

    def matches(self, address: IPAddress, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if address.version != self.network.version:
            inner = embedded_v4(address)
            return inner is not None and inner in self.network
        return address in self.network or (
            (inner := embedded_v4(address)) is not None and inner in self.network
        )


def parse_private(item: str) -> PrivateRule:
    """``127.0.0.1:8080``, ``[::1]:8080``, ``10.0.0.0/8``, ``192.168.1.5``. Raises
    ValueError with a readable message."""
    text = item.strip()
    port: int | None = None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = _port(rest.removeprefix(":"), item)
        text = host
    elif text.count(":") == 1:
        text, raw = text.split(":")
        port = _port(raw, item)
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(f"{item!r} is not an address, network or address:port") from None
    return PrivateRule(network, port)


def _port(raw: str, item: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{item!r} has no valid port")
    return int(raw)


def private_rules(raw: Any) -> list[PrivateRule]:
    """The ``egress_allow_private`` setting's rules (bad items raise ValueError)."""
    return [parse_private(item) for item in split_list(raw)]


def check_private_setting(raw: Any) -> None:
    """The setting's check (config.CHECKS): raises ValueError on a bad item."""
    private_rules(raw)


def address_refusal(
    address: IPAddress, port: int, rules: Iterable[PrivateRule], protected: Iterable[int]
) -> str | None:
    """Why a connection to ``address:port`` is refused, or None when it may be made."""
    kind = kind_of(address)
    if kind is None:
        return None
    if port in set(protected):
        return f"{address} port {port} belongs to the agent or Jupyter (never reachable)"
    if any(rule.matches(address, port) for rule in rules):
        return None
    return (
        f"{address} is a {kind} address (not reachable from the sandbox unless "
        f"egress_allow_private names {_shown(address)}:{port})"
    )


def _shown(address: IPAddress) -> str:
    return f"[{address}]" if address.version == 6 else str(address)


def is_local_name(host: str) -> bool:
    """``localhost`` and its aliases (``*.localhost``, trailing dot, any case)."""
    name = normal_host(host)
    return name in _LOCAL_NAMES or name.endswith(".localhost")


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (the host's resolver; ``[]`` when none)."""
    literal = ip_literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(normal_host(host), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%")[0]
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if address not in found:
            found.append(address)
    return found
