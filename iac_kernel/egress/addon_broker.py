"""mitmdump addon: swap placeholder credentials for the real ones, on their own hosts only.

Loaded by ``mitmdump -s addon_broker.py --set iac_broker_file=TABLE`` in the egress
environment (imports stdlib, mitmproxy and botocore only; never the agent's package).
The table (written by ``iac_kernel.egress.broker``, mode 0600) lists each credential's
real values, placeholders and hosts; it is read again when it changes.

* TLS is intercepted only for hosts a credential belongs to; every other connection is
  tunnelled untouched (a placeholder sent there is worthless and never replaced).
* AWS: a request signed (Signature V4, ``Authorization`` header) with a placeholder key
  id is re-signed with botocore's ``SigV4Auth`` and the real keys: same method, URL,
  signed headers and payload hash; new ``Authorization``, ``X-Amz-Date``,
  ``X-Amz-Security-Token``. A presigned URL (the key id in the query, V2 or V4), an
  older signature (``Authorization: AWS id:sig``) or a
  streaming-signed payload (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``, whose chunk signatures
  chain from the header's) made with a placeholder is refused: re-signing it would need
  the body rewritten, and a presigned URL is meant for someone outside the sandbox.
* Tokens and passwords: a placeholder in any header (``Authorization: Basic`` decoded
  too) or in the URL is replaced by the real value.
* A placeholder on its way to a host it does not belong to is refused (HTTP 403, the
  reason in the body), never replaced.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import os
import re

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from mitmproxy import ctx, http, tls

_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([^,\s]+),\s*Signature=[0-9a-f]+"
)
_RESIGNED = {"authorization", "x-amz-date", "x-amz-security-token"}


class _Resigner(SigV4Auth):
    """SigV4 as botocore signs, keeping the client's path as sent for S3 (S3 signs the
    path unnormalised) and its ``X-Amz-Content-SHA256`` (base class behaviour)."""

    def _normalize_url_path(self, path: str) -> str:
        return path if self._service_name == "s3" else super()._normalize_url_path(path)


def host_matches(pattern: str, host: str, port: int) -> bool:
    """``pattern`` (``host``, ``*.suffix``, either with ``:port``) covers ``host:port``."""
    name, _, want = pattern.rpartition(":") if pattern.count(":") == 1 else (pattern, "", "")
    if want and want != str(port):
        return False
    return fnmatch.fnmatchcase(host.lower(), name.lower())


class Table:
    """The credentials of the broker table, indexed by placeholder."""

    def __init__(self, data: dict) -> None:
        #: placeholder -> [(real, hosts)] (one real value per placeholder)
        self.swaps: dict[str, tuple[str, list[str]]] = {}
        #: placeholder access key id -> (real keys, hosts)
        self.aws: dict[str, tuple[dict, list[str]]] = {}
        for entry in data.get("credentials", []):
            hosts = list(entry.get("hosts", []))
            for name, fake in entry["placeholder"].items():
                real = entry["real"][name]
                known = self.swaps.get(fake, (real, []))[1]
                self.swaps[fake] = (real, sorted({*known, *hosts}))
            if entry["kind"] == "aws":
                fake_id = entry["placeholder"]["aws_access_key_id"]
                self.aws[fake_id] = (entry["real"], self.swaps[fake_id][1])

    def intercepts(self, host: str, port: int) -> bool:
        return any(
            host_matches(p, host, port) for _real, hosts in self.swaps.values() for p in hosts
        )

    def allowed(self, fake: str, host: str, port: int) -> bool:
        return any(host_matches(p, host, port) for p in self.swaps[fake][1])


class Broker:
    def __init__(self) -> None:
        self.table = Table({})
        self._stamp: tuple[float, int] | None = None

    def load(self, loader) -> None:
        loader.add_option("iac_broker_file", str, "", "The credential broker's table (JSON).")

    def configure(self, updated) -> None:
        if "iac_broker_file" in updated:
            self._stamp = None
            self._reload()

    def _reload(self) -> None:
        path = ctx.options.iac_broker_file
        if not path:
            return
        try:
            info = os.stat(path)
        except OSError:
            return
        stamp = (info.st_mtime, info.st_size)
        if stamp != self._stamp:
            with open(path, encoding="utf-8") as handle:
                self.table = Table(json.load(handle))
            self._stamp = stamp

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        self._reload()
        address = data.context.server.address
        host = data.client_hello.sni or (address[0] if address else "")
        port = address[1] if address else 443
        hosts = {host, address[0] if address else host}
        if not any(self.table.intercepts(h, port) for h in hosts):
            data.ignore_connection = True

    def request(self, flow: http.HTTPFlow) -> None:
        self._reload()
        req = flow.request
        host, port = req.host, req.port
        refusal = self._aws(req, host, port) or self._tokens(req, host, port)
        if refusal:
            ctx.log.warn(f"credential broker: {refusal}")
            flow.response = http.Response.make(
                403, f"iac-kernel credential broker: {refusal}\n", {"Content-Type": "text/plain"}
            )

    def _aws(self, req: http.Request, host: str, port: int) -> str | None:
        """Re-sign a SigV4 request made with a placeholder key id; a refusal or None."""
        if any(fake in req.url for fake in self.table.aws):
            return "a presigned URL made with placeholder AWS credentials is not re-signed"
        header = req.headers.get("authorization", "").strip()
        found = _SIGV4.fullmatch(header)
        if not found or found.group(1) not in self.table.aws:
            if any(fake in header for fake in self.table.aws):
                return "only Signature V4 requests made with placeholder AWS keys are re-signed"
            return None
        fake_id, _day, region, service, signed = found.groups()
        real, _hosts = self.table.aws[fake_id]
        if not self.table.allowed(fake_id, host, port):
            return f"AWS credentials are not sent to {host}:{port}"
        if req.headers.get("x-amz-content-sha256", "").startswith("STREAMING-AWS4-HMAC"):
            return "a streaming-signed AWS payload cannot be re-signed (use an unsigned payload)"
        names = [n for n in signed.split(";") if n not in _RESIGNED]
        headers = {n: req.headers.get(n, "") for n in names}
        url = f"{req.scheme}://{req.host_header or host}{req.path}"
        aws = AWSRequest(method=req.method, url=url, data=req.raw_content or b"", headers=headers)
        creds = Credentials(
            real["aws_access_key_id"], real["aws_secret_access_key"], real.get("aws_session_token")
        )
        _Resigner(creds, service, region).add_auth(aws)
        for name in _RESIGNED:
            req.headers.pop(name, None)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                req.headers[name] = aws.headers[name]
        return None

    def _tokens(self, req: http.Request, host: str, port: int) -> str | None:
        """Replace placeholders in headers and the URL; a refusal or None."""
        raw = list(req.headers.items(multi=True))
        decoded = [_decoded(n, v) for n, v in raw]
        for text in [req.url, *decoded]:
            if (refused := _refusal(self.table, text, host, port)) is not None:
                return refused
        swapped = [_swap(self.table, v) for v in decoded]
        if swapped != decoded:
            fields = [
                (n.encode(), v.encode() if new == old else _encoded(n, new))
                for (n, v), old, new in zip(raw, decoded, swapped, strict=True)
            ]
            req.headers = http.Headers(fields=fields)
        url = _swap(self.table, req.url)
        if url != req.url:
            req.url = url
        return None


def _decoded(name: str, value: str) -> str:
    """A header's value, ``Authorization: Basic`` decoded (``Basic user:password``)."""
    if name.lower() == "authorization" and value[:6].lower() == "basic ":
        try:
            return "Basic " + base64.b64decode(value[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


def _encoded(name: str, value: str) -> bytes:
    """The header value to send (``Basic user:password`` encoded again)."""
    if name.lower() == "authorization" and value[:6].lower() == "basic ":
        return b"Basic " + base64.b64encode(value[6:].encode())
    return value.encode()


def _refusal(table: Table, text: str, host: str, port: int) -> str | None:
    """The refusal for a placeholder in ``text`` that does not belong to ``host``."""
    for fake in table.swaps:
        if fake in text and not table.allowed(fake, host, port):
            return f"a brokered credential is not sent to {host}:{port}"
    return None


def _swap(table: Table, text: str) -> str:
    for fake, (real, _hosts) in table.swaps.items():
        if fake in text:
            text = text.replace(fake, real)
    return text


addons = [Broker()]
