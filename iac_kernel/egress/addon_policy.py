"""mitmproxy addon (loaded by ``mitmdump -s``; imports only the stdlib and mitmproxy).

Before every connection to a server, ask the agent over its private Unix socket
(``iac_egress_socket``) whether the client (known by its source port: the agent's relay
binds it before connecting) may reach ``host:port``; the agent answers with the checked
address to connect to (pinned here, so no second resolution can change it) or a refusal.
The name asked for is kept beside the connection (``targets``): the broker judges that,
not the pinned address, and asks its own questions through :meth:`EgressPolicy.ask`.
TLS passes through untouched unless ``iac_egress_intercept`` is on (the broker's job).
The first connection (``hello``) stays open: when the agent goes away, the proxy stops.
"""

from __future__ import annotations

import asyncio
import json

from mitmproxy import ctx


class EgressPolicy:
    def __init__(self) -> None:
        self._hello: asyncio.StreamWriter | None = None
        #: server connection id -> (host, port) as asked, before the address was pinned:
        #: where a connection goes, for the broker (never the Host header or the SNI).
        self.targets: dict[str, tuple[str, int]] = {}

    def load(self, loader) -> None:
        loader.add_option("iac_egress_socket", str, "", "The agent's decision socket.")
        loader.add_option("iac_egress_intercept", bool, False, "Intercept TLS (broker).")

    async def ask(self, message: dict) -> dict:
        """The agent's answer to ``message`` (one JSON line each way; the broker's
        questions go here too)."""
        reader, writer = await asyncio.open_unix_connection(ctx.options.iac_egress_socket)
        try:
            writer.write(json.dumps(message).encode() + b"\n")
            await writer.drain()
            return json.loads(await reader.readline() or b"{}")
        finally:
            writer.close()

    async def running(self) -> None:
        reader, writer = await asyncio.open_unix_connection(ctx.options.iac_egress_socket)
        writer.write(json.dumps({"hello": True}).encode() + b"\n")
        await writer.drain()
        self._hello = writer
        asyncio.get_running_loop().create_task(self._watch(reader))

    async def _watch(self, reader: asyncio.StreamReader) -> None:
        await reader.read()
        ctx.master.shutdown()

    async def server_connect(self, data) -> None:
        host, port = data.server.address
        peer = data.client.peername
        try:
            answer = await self.ask({"peer": peer[1], "host": host, "port": port})
        except (OSError, ValueError) as exc:
            answer = {"reason": f"the agent did not answer: {exc}"}
        if answer.get("allow") and answer.get("address"):
            self.targets[data.server.id] = (host, port)
            data.server.address = (answer["address"], port)
        else:
            data.server.error = str(answer.get("reason") or "refused by the egress policy")

    def server_disconnected(self, data) -> None:
        self.targets.pop(data.server.id, None)

    def tls_clienthello(self, data) -> None:
        if not ctx.options.iac_egress_intercept:
            data.ignore_connection = True


addons = [EgressPolicy()]
