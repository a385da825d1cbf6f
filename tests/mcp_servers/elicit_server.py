"""An MCP server whose tools elicit (``MCPServer`` of mcp 2.x, ``FastMCP`` of 1.x), over
stdio, for the tests of forwarding elicitations to the user.

* ``sizing()``: a form (workspace, replicas, public); answers what came back;
* ``sign_in()``: a URL elicitation mid-call (handshake-era specs: the 2026-07-28 spec
  has no channel for it); after an accept, says the interaction completed
  (``notifications/elicitation/complete``) and answers what came back;
* ``needs_login()``: refused with ``-32042`` (URL elicitation required), any spec.
"""

import sys
from typing import Annotated, Any

sys.modules.setdefault("rfc3987_syntax", None)  # see demo_server.py

from mcp.types import ElicitRequestURLParams  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
    from mcp.shared.exceptions import UrlElicitationRequiredError

    LINE = 2

    def new_server() -> Any:
        return MCPServer("elicit", log_level="WARNING")

except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.shared.exceptions import UrlElicitationRequiredError

    LINE = 1

    def new_server() -> Any:
        return FastMCP("elicit", log_level="WARNING")


SIGN_IN_URL = "https://login.example.test/device?code=ABCD-1234"


class Sizing(BaseModel):
    workspace: str = Field(description="The Terraform workspace")
    replicas: int = Field(description="How many replicas")
    public: bool = Field(default=False, description="Expose it publicly")


def build() -> Any:
    server = new_server()

    if LINE == 2:  # a resolver: a standalone request mid-call before 2026-07-28, an
        # InputRequiredResult the client answers and retries with from 2026-07-28 on

        def ask_sizing() -> Any:
            return Elicit("Sizing for the deployment", Sizing)

        @server.tool()
        async def sizing(
            result: Annotated[ElicitationResult[Sizing], Resolve(ask_sizing)],
        ) -> str:
            """Ask the user for the sizing of a deployment."""
            data = result.data.model_dump() if result.action == "accept" else None
            return f"sizing: {result.action} {data}"

    else:

        @server.tool()
        async def sizing(ctx: Context) -> str:
            """Ask the user for the sizing of a deployment."""
            result = await ctx.elicit("Sizing for the deployment", schema=Sizing)
            data = result.data.model_dump() if result.action == "accept" else None
            return f"sizing: {result.action} {data}"

    @server.tool()
    async def needs_login() -> str:
        """Refused until the user signed in (URL elicitation required, -32042)."""
        raise UrlElicitationRequiredError(
            [
                ElicitRequestURLParams(
                    mode="url",
                    message="Sign in to the demo cloud first",
                    url=SIGN_IN_URL,
                    elicitationId="login-2",
                )
            ]
        )

    @server.tool()
    async def sign_in(ctx: Context) -> str:
        """Send the user to a sign-in page."""
        result = await ctx.elicit_url("Sign in to the demo cloud", SIGN_IN_URL, "login-1")
        if result.action == "accept":
            await ctx.session.send_elicit_complete("login-1")
        return f"sign_in: {result.action}"

    return server


if __name__ == "__main__":
    build().run("stdio")
