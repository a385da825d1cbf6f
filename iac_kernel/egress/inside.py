"""What a sandbox with the egress route gets: the forwarder in front of its command and
the proxy variables (``HTTP(S)_PROXY``, ``ALL_PROXY``, lower case too, ``NO_PROXY=``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from iac_kernel.interpreter import sandbox_python

FORWARDER = os.path.realpath(Path(__file__).with_name("forward.py"))  # seen in the sandbox
#: Where the call's relay socket appears inside (in the guard folder, read-only mount).
SOCKET_NAME = "egress.sock"
#: Beside it: the proxy command for clients without proxy variables (git://).
CONNECT_SCRIPT = "egress-connect"

#: Extra variables for every sandbox with the egress route (e.g. the broker's CA bundle
#: and placeholder credentials): each hook gets the mount (the route's folder as seen
#: inside) and returns a mapping, merged after ours.
ENV_HOOKS: list[Callable[[str], dict[str, str]]] = []


def proxy_env(port: int, mount: str) -> dict[str, str]:
    """The variables that send every common client through the forwarder (``mount``:
    the folder of the relay socket, as seen inside)."""
    http = f"http://127.0.0.1:{port}"
    env = {"HTTP_PROXY": http, "HTTPS_PROXY": http, "ALL_PROXY": f"socks5h://127.0.0.1:{port}"}
    env["NO_PROXY"] = ""
    env.update({k.lower(): v for k, v in env.items()})
    # git:// has no proxy variable of its own: git runs this with the host and port.
    env["GIT_PROXY_COMMAND"] = f"{mount}/{CONNECT_SCRIPT}"
    for hook in ENV_HOOKS:
        env.update(hook(mount))
    return env


def connect_script(port: int) -> str:
    """The program ``GIT_PROXY_COMMAND`` names (git runs it with host and port; ssh's
    ``ProxyCommand`` can too): CONNECT through the forwarder."""
    return f'#!/bin/sh\nexec {sandbox_python()} -IS {FORWARDER} connect {port} "$@"\n'


def forwarder_argv(port: int, socket_inside: str) -> list[str]:
    return [sandbox_python(), "-IS", FORWARDER, str(port), socket_inside, "--"]


def route_args(port: int, mount: str) -> list[str]:
    """The end of a ``bwrap`` command line with the egress route: the proxy variables
    (``--setenv``), ``--`` and the forwarder that then runs the command (``mount``: the
    folder of the relay socket, as seen inside)."""
    args: list[str] = []
    for key, value in proxy_env(port, mount).items():
        args += ["--setenv", key, value]
    return [*args, "--", *forwarder_argv(port, f"{mount}/{SOCKET_NAME}")]


def is_forwarder(pid: int) -> bool:
    """``pid`` runs the real forwarder (this interpreter on :data:`FORWARDER`): the one
    process of a call that the guard's race check does not count."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        os.path.realpath(exe) == os.path.realpath(sys.executable)
        and len(words) > 3
        and words[1] == b"-IS"
        and words[2] == FORWARDER.encode()
    )
