"""web_fetch: against a local server on 127.0.0.1 only; every other address is refused
before any connection is made."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from iac_kernel.tools import web_fetch as web_fetch_mod
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.web_fetch import WebFetchTool, html_to_text, is_public_address

tool = WebFetchTool()

PAGE = """<!doctype html><html><head><title>aws_vpc | Terraform Registry</title>
<style>.nav { color: red }</style><script>window.track("secret-js")</script></head>
<body><nav><a href="/docs">Docs</a></nav>
<h1>Resource: aws_vpc</h1><p>Provides a <b>VPC</b> resource &amp; more.</p>
<ul><li>cidr_block</li><li>tags</li></ul>
<pre>resource "aws_vpc" "main" {
  cidr_block = "10.0.0.0/16"
}</pre><noscript>enable js</noscript></body></html>"""


class Handler(BaseHTTPRequestHandler):
    release: threading.Event
    seen_hosts: list[str]

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.seen_hosts.append(self.headers.get("Host", ""))
        path = self.path
        if path == "/html":
            self.send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif path == "/text":
            self.send(200, b"plain text body\n", "text/plain")
        elif path == "/json":
            self.send(200, b'{"version": "1.9.0"}', "application/json")
        elif path == "/big":
            self.send(200, b"x" * 1_000_000, "text/plain")
        elif path == "/endless":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(10_000):  # 640 MB if nobody stops reading
                    self.wfile.write(b"y" * 65_536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/slow":
            self.release.wait(10)
            self.send(200, b"too late", "text/plain")
        elif path == "/binary":
            self.send(200, b"\x89PNG\r\n\x1a\n\x00\x00", "image/png")
        elif path == "/missing":
            self.send(404, b"no such page", "text/plain")
        elif path == "/redirect":
            self.send(302, b"", "text/plain", Location="/text")
        elif path == "/redirect-metadata":
            self.send(302, b"", "text/plain", Location="http://169.254.169.254/latest/meta-data/")
        elif path.startswith("/loop"):
            n = int(path[5:] or 0)
            self.send(302, b"", "text/plain", Location=f"/loop{n + 1}")
        else:
            self.send(500, b"unexpected", "text/plain")


#: Host headers the test server received, for the server of the running test.
SEEN_HOSTS: list[str] = []


@pytest.fixture
def server() -> Iterator[str]:
    release = threading.Event()
    SEEN_HOSTS.clear()
    handler = type("H", (Handler,), {"release": release, "seen_hosts": SEEN_HOSTS})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


def ctx_with(ctx: ToolContext, **changes) -> ToolContext:
    return dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, **changes))


@pytest.fixture
def local_ctx(tool_ctx: ToolContext) -> ToolContext:
    return ctx_with(tool_ctx, web_fetch_allow_private=True, web_fetch_timeout=5.0)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any request would actually be sent."""

    async def refuse(*args, **kwargs):
        raise AssertionError("a request was sent")

    monkeypatch.setattr(httpx.AsyncClient, "send", refuse)


# -- happy paths against 127.0.0.1 (allowed explicitly) ------------------------------


async def test_plain_text(local_ctx: ToolContext, server: str):
    result = await tool.run({"url": f"{server}/text"}, local_ctx)
    assert not result.is_error
    assert result.content.endswith("plain text body")
    assert "Status: 200" in result.content
    assert result.raw_output["content_type"] == "text/plain"


async def test_json_is_text(local_ctx: ToolContext, server: str):
    result = await tool.run({"url": f"{server}/json"}, local_ctx)
    assert result.content.endswith('{"version": "1.9.0"}')


async def test_html_becomes_readable_text(local_ctx: ToolContext, server: str):
    result = await tool.run({"url": f"{server}/html"}, local_ctx)
    text = result.content
    assert "# aws_vpc | Terraform Registry" in text
    assert "# Resource: aws_vpc" in text
    assert "Provides a VPC resource & more." in text
    assert "- cidr_block\n- tags" in text
    assert f"[Docs]({server}/docs)" in text
    assert '  cidr_block = "10.0.0.0/16"' in text  # <pre> keeps its indentation
    for hidden in ("secret-js", "color: red", "enable js", "<p>", "&amp;"):
        assert hidden not in text


async def test_size_cap_stops_the_download(local_ctx: ToolContext, server: str):
    result = await tool.run({"url": f"{server}/big", "max_bytes": 1000}, local_ctx)
    assert result.raw_output["bytes"] == 1000
    assert result.raw_output["truncated"] is True
    assert "download stopped at 1000 bytes" in result.content


async def test_size_cap_stops_an_endless_stream(local_ctx: ToolContext, server: str):
    ctx = ctx_with(local_ctx, web_fetch_max_bytes=200_000)
    result = await tool.run({"url": f"{server}/endless"}, ctx)
    assert result.raw_output["bytes"] == 200_000
    assert "download stopped at 200000 bytes" in result.content


async def test_max_bytes_cannot_exceed_the_setting(local_ctx: ToolContext, server: str):
    ctx = ctx_with(local_ctx, web_fetch_max_bytes=500)
    result = await tool.run({"url": f"{server}/big", "max_bytes": 10**9}, ctx)
    assert result.raw_output["bytes"] == 500


async def test_long_text_is_cut_to_the_output_limit(local_ctx: ToolContext, server: str):
    ctx = ctx_with(local_ctx, output_limit=2000)
    result = await tool.run({"url": f"{server}/big"}, ctx)
    assert len(result.content) < 2500
    assert "content cut at 2000" in result.content


async def test_timeout(local_ctx: ToolContext, server: str):
    ctx = ctx_with(local_ctx, web_fetch_timeout=0.3)
    with pytest.raises(ToolError, match=re.escape("timed out after 0.3s")):
        await tool.run({"url": f"{server}/slow"}, ctx)


async def test_redirect_is_followed(local_ctx: ToolContext, server: str):
    result = await tool.run({"url": f"{server}/redirect"}, local_ctx)
    assert result.content.startswith(f"URL: {server}/text")
    assert result.content.endswith("plain text body")


async def test_too_many_redirects(local_ctx: ToolContext, server: str):
    with pytest.raises(ToolError, match="too many redirects"):
        await tool.run({"url": f"{server}/loop"}, local_ctx)


async def test_http_error_status(local_ctx: ToolContext, server: str):
    with pytest.raises(ToolError, match="HTTP 404 Not Found") as err:
        await tool.run({"url": f"{server}/missing"}, local_ctx)
    assert "no such page" in str(err.value)


async def test_binary_content_is_refused(local_ctx: ToolContext, server: str):
    with pytest.raises(ToolError, match=r"image/png .* not text"):
        await tool.run({"url": f"{server}/binary"}, local_ctx)


async def test_connection_refused_is_a_tool_error(local_ctx: ToolContext, server: str):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: nothing answers
        with pytest.raises(ToolError, match="failed"):
            await tool.run({"url": f"http://127.0.0.1:{port}/"}, local_ctx)


async def test_the_host_header_names_the_requested_host(local_ctx: ToolContext, server: str):
    port = server.rsplit(":", 1)[1]
    # The connection goes to the checked address; the Host header is the URL's own.
    result = await tool.run({"url": f"http://localhost:{port}/text"}, local_ctx)
    assert result.content.startswith(f"URL: http://localhost:{port}/text")
    assert result.content.endswith("plain text body")
    assert SEEN_HOSTS == [f"localhost:{port}"]


# -- refusals (private addresses not allowed) -----------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.8.9.10:8080/x",
        "http://localhost/",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/admin",
        "http://169.254.10.1/",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://0.0.0.0/",
        "http://2130706433/",  # decimal form of 127.0.0.1
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:a9fe:a9fe]/",  # IPv4-mapped 169.254.169.254
        "http://[fe80::1]/",
        "http://[fd00:ec2::254]/",  # the AWS metadata service over IPv6
        "https://[::]/",
    ],
)
async def test_private_addresses_are_refused(tool_ctx: ToolContext, no_network, url: str):
    with pytest.raises(ToolError, match="refused"):
        await tool.run({"url": url}, tool_ctx)


async def test_redirect_to_a_private_address_is_refused(
    tool_ctx: ToolContext, server: str, monkeypatch: pytest.MonkeyPatch
):
    # Let the first hop (the local test server) through as if it were public; the
    # redirect to the metadata address must still be checked and refused.
    loopback = ipaddress.ip_address("127.0.0.1")
    real = web_fetch_mod.is_public_address
    monkeypatch.setattr(web_fetch_mod, "is_public_address", lambda ip: ip == loopback or real(ip))
    ctx = ctx_with(tool_ctx, web_fetch_timeout=5.0)
    assert (await tool.run({"url": f"{server}/text"}, ctx)).content.endswith("plain text body")
    with pytest.raises(ToolError, match=re.escape("refused: 169.254.169.254")):
        await tool.run({"url": f"{server}/redirect-metadata"}, ctx)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/x", "only http and https"),
        ("gopher://127.0.0.1/", "only http and https"),
        ("example.com/page", "only http and https"),
        ("http:///nohost", "no host"),
    ],
)
async def test_bad_urls(tool_ctx: ToolContext, no_network, url: str, message: str):
    with pytest.raises(ToolError, match=message):
        await tool.run({"url": url}, tool_ctx)


async def test_schema_errors(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="missing required field 'url'"):
        await tool.run({}, tool_ctx)
    with pytest.raises(ToolError, match="'max_bytes' must be >= 1"):
        await tool.run({"url": "https://example.com", "max_bytes": 0}, tool_ctx)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("10.1.2.3", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("127.0.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.251", False),  # multicast
        ("240.0.0.1", False),  # reserved
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 wrapping 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 wrapping 169.254.169.254
    ],
)
def test_is_public_address(address: str, public: bool):
    assert is_public_address(ipaddress.ip_address(address)) is public


def test_html_to_text_handles_broken_markup():
    assert html_to_text("<p>unclosed <b>bold<div>next") == "unclosed bold\nnext"
    assert html_to_text("") == ""


def test_title():
    assert tool.title({"url": "https://registry.terraform.io/x"}) == (
        "web_fetch: https://registry.terraform.io/x"
    )
