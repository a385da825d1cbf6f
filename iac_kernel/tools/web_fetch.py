"""web_fetch: GET an http(s) URL and return it as text, refusing private addresses."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from iac_kernel.tools.base import Category, Tool, ToolContext, ToolError, ToolResult

if TYPE_CHECKING:  # httpx is imported when a fetch runs: it costs ~0.1 s at start-up
    import httpx

MAX_REDIRECTS = 5
USER_AGENT = "iac-kernel/0.1 (web_fetch)"
_REDIRECTS = (301, 302, 303, 307, 308)
_TEXT_TYPES = re.compile(
    r"^(text/.*|application/(json|xml|yaml|x-yaml|javascript|x-sh|x-hcl|toml|"
    r"x-terraform|hcl|graphql|.*\+json|.*\+xml))$"
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
#: NAT64 (RFC 6052) embeds an IPv4 address in the last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def is_public_address(ip: IPAddress) -> bool:
    """False for loopback, private, link-local, multicast, reserved and unspecified addresses.

    IPv6 forms that carry an IPv4 address (mapped, 6to4, Teredo, NAT64) are judged by it.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: list[ipaddress.IPv4Address] = []
        if ip.ipv4_mapped:
            embedded.append(ip.ipv4_mapped)
        if ip.sixtofour:
            embedded.append(ip.sixtofour)
        if ip.teredo:
            embedded.extend(ip.teredo)
        if ip in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(not is_public_address(v4) for v4 in embedded):
            return False
        if ip.ipv4_mapped:
            return True
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


async def resolve_host(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to for ``host``; ToolError when it is not allowed."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ToolError(f"cannot resolve host {host!r}: {exc}") from None
        addresses = []
        for info in infos:
            # Drop an IPv6 zone id ("fe80::1%eth0") before parsing.
            addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            if addr not in addresses:
                addresses.append(addr)
        if not addresses:
            raise ToolError(f"cannot resolve host {host!r}")
    if not allow_private:
        for addr in addresses:
            if not is_public_address(addr):
                raise ToolError(
                    f"refused: {host} resolves to {addr}, a private, loopback, link-local or "
                    "otherwise non-public address (set web_fetch_allow_private to allow it)"
                )
    return str(addresses[0])


def _check_url(raw: str) -> httpx.URL:
    import httpx

    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolError(f"invalid URL {raw!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched (got {url.scheme or 'none'!r})")
    if not url.host:
        raise ToolError(f"invalid URL {raw!r}: no host")
    return url


class HTMLText(HTMLParser):
    """Readable text from HTML: scripts and styles dropped, blocks on their own lines."""

    SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
    BLOCK = frozenset(
        {
            "p", "div", "section", "article", "header", "footer", "nav", "main", "aside",
            "ul", "ol", "table", "tr", "blockquote", "dl", "dt", "dd", "form", "figure",
            "figcaption", "details", "summary", "body", "html",
        }
    )  # fmt: skip

    def __init__(self, base_url: str = "") -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._pre = 0
        self._in_title = False
        self._href: str | None = None
        self._link_start = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self.BLOCK:
            self.parts.append("\n")
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag == "br":
            self.parts.append("\n")
        elif tag == "hr":
            self.parts.append("\n---\n")
        elif tag == "pre":
            self._pre += 1
            self.parts.append("\n```\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self.parts.append(f"[image: {alt}]")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            if href and not href.startswith(("#", "javascript:", "mailto:")):
                self._href = urljoin(self.base_url, href)
                self._link_start = len(self.parts)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self._skip = max(self._skip - 1, 0)
        elif tag == "title":
            self._in_title = False
        elif tag in self.BLOCK or tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.parts.append("\n")
        elif tag == "pre":
            self._pre = max(self._pre - 1, 0)
            self.parts.append("\n```\n")
        elif tag == "a" and self._href is not None:
            label = "".join(self.parts[self._link_start :]).strip()
            if label and label != self._href:
                del self.parts[self._link_start :]
                self.parts.append(f"[{label}]({self._href})")
            self._href = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
            return
        self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))

    def text(self) -> str:
        lines: list[str] = []
        fenced = False
        for line in "".join(self.parts).split("\n"):
            if line.strip() == "```":
                fenced = not fenced
                line = "```"
            lines.append(line.rstrip() if fenced else line.strip())
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        title = re.sub(r"\s+", " ", self.title).strip()
        return f"# {title}\n\n{body}" if title else body


def html_to_text(html: str, base_url: str = "") -> str:
    """Readable text of an HTML document."""
    parser = HTMLText(base_url)
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient, but never let a page crash the tool
        pass
    return parser.text()


class WebFetchTool(Tool):
    name = "web_fetch"
    description = (
        "Fetch an http(s) URL with GET and return its content as text (HTML is converted "
        "to readable text with links). Redirects are followed (up to 5). Private, loopback "
        "and link-local addresses are refused. Use it for provider docs, module READMEs, "
        "release notes."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "http or https URL.", "minLength": 1},
            "max_bytes": {
                "type": "integer",
                "description": "Stop downloading after this many bytes (capped by settings).",
                "minimum": 1,
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    kind = "fetch"
    category = Category.READ
    subject = "url"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        import httpx

        args = self.check(args)
        settings = ctx.settings
        cap = int(settings.web_fetch_max_bytes)
        cap = min(args.get("max_bytes", cap), cap)
        seconds = float(settings.web_fetch_timeout)
        try:
            async with asyncio.timeout(seconds):
                return await _fetch(
                    args["url"], cap, bool(settings.web_fetch_allow_private), seconds,
                    int(settings.output_limit),
                )  # fmt: skip
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"fetching {args['url']} timed out after {seconds:g}s") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {args['url']} failed: {exc or type(exc).__name__}") from None
        except OSError as exc:
            raise ToolError(f"fetching {args['url']} failed: {exc.strerror or exc}") from None


async def _fetch(
    raw_url: str, cap: int, allow_private: bool, seconds: float, output_limit: int
) -> ToolResult:
    import httpx

    url = _check_url(raw_url)
    # trust_env=False: a proxy would resolve hosts itself and bypass the address check.
    async with httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=httpx.Timeout(seconds)
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            response = await _send(client, url, allow_private)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    url = _check_url(urljoin(str(url), location))
                    continue
                body, truncated = await _read_capped(response, cap)
            finally:
                await response.aclose()
            return _result(url, response, body, truncated, cap, output_limit)
    raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}) starting from {raw_url}")


async def _send(client: httpx.AsyncClient, url: httpx.URL, allow_private: bool) -> httpx.Response:
    """Connect to the address that was checked, not to a second DNS answer (rebinding)."""
    host = url.raw_host.decode("ascii")  # IDNA-encoded, as DNS, SNI and Host need it
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await resolve_host(host, port, allow_private)
    host_header = f"[{host}]" if ":" in host else host
    if url.port:
        host_header += f":{url.port}"
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    request = client.build_request(
        "GET",
        url.copy_with(host=address),
        headers={
            "Host": host_header,
            "User-Agent": USER_AGENT,
            "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
        },
        extensions=extensions,
    )
    return await client.send(request, stream=True)


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= cap:
            return bytes(body[:cap]), len(body) > cap or _more_expected(response, cap)
    return bytes(body), False


def _more_expected(response: httpx.Response, cap: int) -> bool:
    length = response.headers.get("content-length", "")
    return not length.isdigit() or int(length) > cap


def _result(
    url: httpx.URL, response: httpx.Response, body: bytes, truncated: bool, cap: int, limit: int
) -> ToolResult:
    content_type = response.headers.get("content-type", "")
    mime = content_type.split(";")[0].strip().lower()
    charset = response.charset_encoding or "utf-8"
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    sniff_html = not mime and text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))
    if response.status_code >= 400:
        snippet = (html_to_text(text, str(url)) if mime in _HTML_TYPES else text)[:500]
        raise ToolError(
            f"HTTP {response.status_code} {response.reason_phrase} from {url}"
            + (f":\n{snippet.strip()}" if snippet.strip() else "")
        )
    if mime in _HTML_TYPES or sniff_html:
        text = html_to_text(text, str(url))
    elif (mime and not _TEXT_TYPES.match(mime)) or "\x00" in text:
        raise ToolError(
            f"{url} returned {mime or 'binary data'} ({len(body)} bytes), which is not text"
        )
    notes = []
    if truncated:
        notes.append(f"[download stopped at {cap} bytes; the document is longer]")
    if len(text) > limit:
        notes.append(f"[content cut at {limit} of {len(text)} characters]")
        text = text[:limit]
    header = f"URL: {url}\nStatus: {response.status_code}\nContent-Type: {mime or 'unknown'}"
    return ToolResult(
        "\n\n".join([header, text.strip() or "(empty document)", *notes]),
        raw_output={
            "url": str(url),
            "status": response.status_code,
            "content_type": mime,
            "bytes": len(body),
            "truncated": truncated,
        },
    )
