"""mitmdump addon: swap placeholder credentials for the real ones, on their own hosts,
for a guarded program's own run only, one judged operation at a time.

Loaded by ``mitmdump -s addon_broker.py --set iac_broker_file=TABLE`` in the egress
environment (imports stdlib, mitmproxy, botocore and its sibling ``addon_operations``;
never the agent's package). The table (written by ``iac_kernel.egress.broker``, mode
0600) lists each credential's real values, placeholders and hosts; it is read again when
it changes.

* TLS is intercepted only for hosts a credential belongs to; every other connection is
  tunnelled untouched (a placeholder sent there is worthless and never replaced).
* A request that carries a placeholder is first checked: on its credential's own host
  (else refused), and for AWS with a valid Signature V4 made with the placeholder secret
  (a request that only names the placeholder key id is refused). Then its operation is
  read from the request (``addon_operations``) and the agent is asked over its private
  socket whether this connection may use the credential for it: only a guarded
  program's run has its own relay (the agent knows the run by the connection's source
  port), reads pass, changes and secret reads are the run's approval or the user's
  question. Only then is the placeholder swapped: an AWS request is re-signed with
  botocore's ``SigV4Auth`` and the real keys (same method, URL, signed headers and
  payload hash; new ``Authorization``, ``X-Amz-Date``, ``X-Amz-Security-Token``); a
  token or password is replaced in the headers (``Authorization: Basic`` decoded too)
  and the URL.
* A read whose answer may hold a secret (the model says which members) is judged again
  when the answer comes: a secret in it is withheld unless allowed.
* Refused: a presigned URL (the key id in the query), an older signature
  (``Authorization: AWS id:sig``), a streaming-signed payload
  (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``) made with a placeholder, and anything the
  agent does not allow (HTTP 403, the reason in the body).
* Every answer the proxy sees (any host) is scrubbed of every real value of the table
  (:class:`ResponseScrub`, a second addon after the broker): headers, trailers, bodies
  (decoded, streamed ones chunk by chunk), WebSocket and TCP messages from servers.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import fnmatch
import hashlib
import hmac
import html
import json
import os
import re
import secrets
import string
import sys
import zlib
from urllib.parse import parse_qsl, quote, quote_plus, urlencode

from addon_operations import READ, SECRET, Request, aws_operation, bearer_operation, holds_secret
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials
from mitmproxy import ctx, http, tcp, tls

_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]+)"
)
_RESIGNED = {"authorization", "x-amz-date", "x-amz-security-token"}
#: Where the secret-read check of a request's answer waits (``flow.metadata``).
_PENDING = "iac_broker_pending"
#: The placeholder key id an AWS request was re-signed for (``flow.metadata``).
_SIGNED_FOR = "iac_broker_aws"
#: The hosts of the tokens a token request exchanges a brokered secret for.
_ISSUED = "iac_broker_issued"
#: AWS credentials in an answer (STS, SSO, Cognito, S3 sessions, new IAM keys), XML or JSON.
_ANSWERED_KEYS = re.compile(
    rb"<(AccessKeyId|SecretAccessKey|SessionToken)>([^<\s]+)</\1>|"
    rb'"(accessKeyId|AccessKeyId|secretAccessKey|SecretAccessKey|SecretKey|sessionToken|'
    rb'SessionToken)"\s*:\s*"([^"\\]+)"'
)


def _signer(creds: Credentials, service: str, region: str, signed: list[str]) -> SigV4Auth:
    """botocore's Signature V4 signer (S3's for S3: it signs the path as sent) over
    exactly the headers the client signed."""
    base = S3SigV4Auth if service == "s3" else SigV4Auth

    class Signer(base):  # type: ignore[valid-type,misc]
        def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
            chosen = HTTPHeaders()
            for name in signed:
                chosen[name] = request.headers.get(name, "")
            return chosen

    return Signer(creds, service, region)


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
        #: placeholder access key id -> its placeholder secret (verifies signatures)
        self.aws_secrets: dict[str, str] = {}
        #: placeholder -> the request-body fields (form or JSON) it is swapped in
        self.body: dict[str, set[str]] = {}
        #: placeholder of a secret exchanged for tokens -> the hosts those are for
        self.issues_for: dict[str, list[str]] = {}
        for entry in data.get("credentials", []):
            hosts = list(entry.get("hosts", []))
            for name, fake in entry["placeholder"].items():
                real = entry["real"][name]
                known = self.swaps.get(fake, (real, []))[1]
                self.swaps[fake] = (real, sorted({*known, *hosts}))
            for fake in entry["placeholder"].values() if entry.get("body") else ():
                self.body.setdefault(fake, set()).update(entry["body"])
                if entry.get("issues_for"):
                    self.issues_for[fake] = list(entry["issues_for"])
            if entry["kind"] == "aws":
                fake_id = entry["placeholder"]["aws_access_key_id"]
                self.aws[fake_id] = (entry["real"], self.swaps[fake_id][1])
                self.aws_secrets[fake_id] = entry["placeholder"]["aws_secret_access_key"]

    def intercepts(self, host: str, port: int) -> bool:
        return any(
            host_matches(p, host, port) for _real, hosts in self.swaps.values() for p in hosts
        )

    def allowed(self, fake: str, host: str, port: int) -> bool:
        return any(host_matches(p, host, port) for p in self.swaps[fake][1])

    def named(self, fake: str, host: str, port: int) -> bool:
        """``host:port`` is named with its port (an explicit endpoint, ``AWS_ENDPOINT_URL``),
        not only covered by a pattern such as ``*.amazonaws.com``."""
        return any(":" in p and host_matches(p, host, port) for p in self.swaps[fake][1])


class Broker:
    def __init__(self) -> None:
        self.table = Table({})
        self._stamp: tuple[float, int] | None = None
        self._data: dict = {}
        #: AWS credentials the broker obtained for a run (role credentials, new keys):
        #: kept here, in this process only; the sandbox got placeholders for them.
        self._obtained: list[dict] = []

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
                self._data = json.load(handle)
            self._build()
            self._stamp = stamp

    def _build(self) -> None:
        entries = [*self._data.get("credentials", []), *self._obtained]
        self.table = Table({"credentials": entries})

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        self._reload()
        address = data.context.server.address
        host = data.client_hello.sni or (address[0] if address else "")
        port = address[1] if address else 443
        hosts = {host, address[0] if address else host}
        if not any(self.table.intercepts(h, port) for h in hosts):
            data.ignore_connection = True

    async def request(self, flow: http.HTTPFlow) -> None:
        self._reload()
        req = flow.request
        host, port = _target(flow)
        signature, refusal = self._aws_signature(req, host, port)
        carries = signature is not None or self._carries_token(req)
        refusal = refusal or self._token_refusal(req, host, port)
        exchange = self._exchange(req)
        if exchange:  # a secret exchanged for tokens: the tokens stay here (response)
            flow.metadata[_ISSUED] = exchange
        if refusal is None and carries:
            refusal = await self._judge(flow, host, signature, exchange=bool(exchange))
        if refusal is None and carries:
            if signature is not None:
                self._resign(req, host, signature)
                flow.metadata[_SIGNED_FOR] = signature[0]
            self._swap_tokens(req)
        if refusal:
            _refuse(flow, refusal)

    async def response(self, flow: http.HTTPFlow) -> None:
        """AWS credentials in the answer stay here (the run gets placeholders for them);
        a read whose answer holds a secret is judged again (withheld unless allowed)."""
        if flow.response is None:
            return
        parent = flow.metadata.pop(_SIGNED_FOR, None)
        obtained = self._keep_obtained(flow.response, parent) if parent else set()
        issued = flow.metadata.pop(_ISSUED, None)
        if issued and flow.response.status_code < 400:
            self._keep_issued(flow.response, issued)
        pending = flow.metadata.pop(_PENDING, None)
        if pending is None:
            return
        members = [m for m in pending["secret_members"] if m.lower() not in obtained]
        if flow.response.stream and members:  # not looked at: judged as holding one
            member: str | None = members[0]
        else:
            kind = flow.response.headers.get("content-type", "")
            member = holds_secret(members, flow.response.content or b"", kind)
        if member is None:
            return
        operation = {**pending, "access": SECRET, "returned": member}
        operation.pop("secret_members", None)
        refusal = await self._ask_agent(flow, operation)
        if refusal:
            _refuse(flow, f"the answer holds a secret ({member}): {refusal}")

    def _keep_obtained(self, response: http.Response, parent: str) -> set[str]:
        """Replace AWS credentials in ``response`` (obtained with the placeholder key id
        ``parent``'s real keys) by new placeholders, and keep them to re-sign with; the
        names of the members replaced (lower case)."""
        body = response.content or b""
        found: dict[str, str] = {}
        for match in _ANSWERED_KEYS.finditer(body):
            name = (match.group(1) or match.group(3)).decode().lower()
            value = (match.group(2) or match.group(4)).decode()
            found[{"secretkey": "secretaccesskey"}.get(name, name)] = value
        key_id, secret = found.get("accesskeyid"), found.get("secretaccesskey")
        if not key_id or not secret or key_id in self.table.swaps:
            return set()
        real = {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
        if found.get("sessiontoken"):
            real["aws_session_token"] = found["sessiontoken"]
        fake = {name: _shaped(value) for name, value in real.items()}
        hosts = self.table.aws[parent][1] if parent in self.table.aws else []
        self._obtained.append(
            {"kind": "aws", "name": "obtained", "hosts": hosts, "real": real, "placeholder": fake}
        )
        self._build()
        for name, value in real.items():
            body = body.replace(value.encode(), fake[name].encode())
        response.content = body
        return {"accesskeyid", "secretaccesskey", "secretkey", "sessiontoken"}

    def _exchange(self, req: http.Request) -> list[str]:
        """The hosts of the tokens this request exchanges a brokered secret for (an OAuth
        token request with a client secret), or []."""
        body = req.raw_content or b""
        return sorted(
            {
                h
                for fake, hosts in self.table.issues_for.items()
                if fake.encode() in body
                for h in hosts
            }
        )

    def _keep_issued(self, response: http.Response, hosts: list[str]) -> None:
        """Replace the tokens of an OAuth answer by placeholders (bound to ``hosts``), and
        keep them: the sandbox never holds them; the refresh token is swapped back in a
        later exchange's body."""
        try:
            data = json.loads(response.content or b"")
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        kept = False
        for name in ("access_token", "refresh_token", "id_token"):
            real = data.get(name)
            if isinstance(real, str) and len(real) >= 8 and real not in self.table.swaps:
                fake = _shaped(real)
                entry = {"kind": "token", "name": f"issued {name}", "hosts": hosts}
                entry.update(real={"token": real}, placeholder={"token": fake})
                if name == "refresh_token":
                    entry.update(body=["refresh_token"], issues_for=hosts)
                self._obtained.append(entry)
                data[name] = fake
                kept = True
        if kept:
            self._build()
            response.content = json.dumps(data).encode()

    async def _judge(
        self, flow: http.HTTPFlow, host: str, signature: tuple | None, exchange: bool = False
    ) -> str | None:
        """Ask the agent whether this connection may use its credential for the request's
        operation; a refusal or None. A read that may return a secret is kept for the
        answer's check."""
        req = flow.request
        body = req.raw_content or b""
        view = Request(req.method, host, req.path, list(req.headers.items(multi=True)), body)
        try:
            operation = await asyncio.to_thread(
                lambda: aws_operation(signature[3], view) if signature else bearer_operation(view)
            )
        except Exception as exc:  # a model that cannot be read: judged as a change
            operation = {"service": host, "operation": req.method, "access": "change"}
            ctx.log.warn(f"credential broker: cannot read the operation: {exc}")
        if exchange:  # authentication, not a change: what it gets stays with the proxy
            operation.update(access=READ, operation=f"token exchange {operation['operation']}")
        digest = hashlib.sha256(b"\0".join([req.method.encode(), req.url.encode(), body]))
        operation.update(host=host, method=req.method, url=req.url[:300], digest=digest.hexdigest())
        refusal = await self._ask_agent(flow, operation)
        if refusal is None and operation.get("secret_members"):
            flow.metadata[_PENDING] = operation
        return refusal

    async def _ask_agent(self, flow: http.HTTPFlow, operation: dict) -> str | None:
        """The agent's answer for ``operation`` on this flow's connection (None: allowed)."""
        path = getattr(ctx.options, "iac_egress_socket", "")
        peer = flow.client_conn.peername
        if not path or not peer:
            return "no agent to judge the use of a brokered credential"
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            try:
                message = {"operation": operation, "peer": peer[1]}
                writer.write(json.dumps(message).encode() + b"\n")
                await writer.drain()
                answer = json.loads(await reader.readline() or b"{}")
            finally:
                writer.close()
        except (OSError, ValueError) as exc:
            return f"the agent did not answer: {exc}"
        if answer.get("allow"):
            return None
        return str(answer.get("reason") or "not approved")

    def _aws_signature(
        self, req: http.Request, host: str, port: int
    ) -> tuple[tuple | None, str | None]:
        """(the verified Signature V4 of a request made with a placeholder key id, or a
        refusal). The signature must be the placeholder secret's over this very request:
        a request that only names the placeholder key id is refused."""
        if any(fake in req.url for fake in self.table.aws):
            return None, "a presigned URL made with placeholder AWS credentials is not re-signed"
        header = req.headers.get("authorization", "").strip()
        found = _SIGV4.fullmatch(header)
        if not found or found.group(1) not in self.table.aws:
            if any(fake in header for fake in self.table.aws):
                return None, "only Signature V4 requests made with placeholder keys are re-signed"
            return None, None
        fake_id, day, region, service, signed, sent = found.groups()
        if not self.table.allowed(fake_id, host, port):
            return None, f"AWS credentials are not sent to {host}:{port}"
        if req.scheme != "https" and not self.table.named(fake_id, host, port):
            # plain HTTP could be read on the way and replayed: only to a named endpoint
            return None, f"AWS requests are signed only over TLS to {host} (not a named endpoint)"
        if req.headers.get("x-amz-content-sha256", "").startswith("STREAMING-AWS4-HMAC"):
            return None, "a streaming-signed AWS payload cannot be re-signed (send it unsigned)"
        names = signed.split(";")
        stamp = req.headers.get("x-amz-date", "")
        if "x-amz-date" not in names or not stamp.startswith(day):
            return None, "an AWS request must sign its X-Amz-Date"
        # The signature names its host: re-signed for another host than the one the
        # connection goes to, it could be replayed there (AWS acts on the Host signed).
        signed_host = req.host_header or ""
        if "host" not in names or not _same_host(signed_host, host, port, req.scheme):
            return None, f"the signed Host {signed_host!r} is not where the request goes ({host})"
        fake = Credentials(fake_id, self.table.aws_secrets[fake_id])
        expected = _signature(fake, req, host, service, region, names, stamp)
        if not hmac.compare_digest(expected, sent):
            return None, "the request's signature is not the placeholder credentials' own"
        return (fake_id, region, names, service), None

    def _resign(self, req: http.Request, host: str, signature: tuple) -> None:
        """Sign the request again with the real keys (same signed headers and payload)."""
        fake_id, region, names, service = signature
        real, _hosts = self.table.aws[fake_id]
        headers = {n: req.headers.get(n, "") for n in names if n not in _RESIGNED}
        url = f"{req.scheme}://{req.host_header or host}{req.path}"
        aws = AWSRequest(method=req.method, url=url, data=req.raw_content or b"", headers=headers)
        creds = Credentials(
            real["aws_access_key_id"], real["aws_secret_access_key"], real.get("aws_session_token")
        )
        resigned = [n for n in names if n not in _RESIGNED]
        if real.get("aws_session_token"):
            resigned.append("x-amz-security-token")
        _signer(creds, service, region, [*resigned, "x-amz-date"]).add_auth(aws)
        for name in _RESIGNED:
            req.headers.pop(name, None)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                req.headers[name] = aws.headers[name]

    def _carries_token(self, req: http.Request) -> bool:
        """The request holds a token placeholder (URL or a header, Basic decoded; the
        body for a credential sent in one, such as an OAuth client secret)."""
        texts = [req.url, *(_decoded(n, v) for n, v in req.headers.items(multi=True))]
        if any(fake in text for text in texts for fake in self.table.swaps):
            return True
        body = req.raw_content or b""
        return any(fake.encode() in body for fake in self.table.body)

    def _token_refusal(self, req: http.Request, host: str, port: int) -> str | None:
        """The refusal for a placeholder on its way to a host it does not belong to."""
        raw = list(req.headers.items(multi=True))
        body = (req.raw_content or b"").decode("utf-8", "replace") if self.table.body else ""
        for text in [req.url, *(_decoded(n, v) for n, v in raw), body]:
            if (refused := _refusal(self.table, text, host, port)) is not None:
                return refused
        return None

    def _swap_body(self, req: http.Request) -> None:
        """Replace placeholders in the body fields their credential is sent in (a form or
        a JSON object); any other body keeps them (worthless there)."""
        body = req.raw_content or b""
        fakes = {f: fields for f, fields in self.table.body.items() if f.encode() in body}
        if not fakes:
            return
        kind = req.headers.get("content-type", "")
        if "x-www-form-urlencoded" in kind:
            pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
            pairs = [(k, _swap_fields(self.table, fakes, k, v)) for k, v in pairs]
            req.content = urlencode(pairs).encode()
        elif "json" in kind:
            try:
                data = json.loads(body)
            except ValueError:
                return
            if isinstance(data, dict):
                for key, value in data.items():
                    if isinstance(value, str):
                        data[key] = _swap_fields(self.table, fakes, key, value)
                req.content = json.dumps(data).encode()

    def _swap_tokens(self, req: http.Request) -> None:
        """Replace placeholders in headers and the URL (after :meth:`_token_refusal`)."""
        raw = list(req.headers.items(multi=True))
        decoded = [_decoded(n, v) for n, v in raw]
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
        self._swap_body(req)


def _swap_fields(table: Table, fakes: dict[str, set[str]], field: str, value: str) -> str:
    """``value`` of body field ``field`` with the placeholders sent in that field swapped."""
    for fake, fields in fakes.items():
        if field in fields and fake in value:
            value = value.replace(fake, table.swaps[fake][0])
    return value


def _signature(
    creds: Credentials,
    req: http.Request,
    host: str,
    service: str,
    region: str,
    names: list[str],
    stamp: str,
) -> str:
    """The Signature V4 that ``creds`` give ``req`` over the headers ``names`` at ``stamp``."""
    url = f"{req.scheme}://{req.host_header or host}{req.path}"
    headers = {n: req.headers.get(n, "") for n in names}
    aws = AWSRequest(method=req.method, url=url, data=req.raw_content or b"", headers=headers)
    aws.context["timestamp"] = stamp
    signer = _signer(creds, service, region, names)
    canonical = signer.canonical_request(aws)
    return signer.signature(signer.string_to_sign(aws, canonical), aws)


def _shaped(real: str) -> str:
    """A random value of ``real``'s shape (its four-letter AWS prefix kept, each other
    character replaced by one of its class), never equal to it."""
    keep = 4 if re.match(r"A[SK]IA", real) else 0
    while True:
        made = real[:keep] + "".join(_same_class(c) for c in real[keep:])
        if made != real:
            return made


def _same_class(char: str) -> str:
    for alphabet in (string.ascii_uppercase, string.ascii_lowercase, string.digits):
        if char in alphabet:
            return secrets.choice(alphabet)
    return char


def _same_host(header: str, host: str, port: int, scheme: str) -> bool:
    """``header`` (a Host header: name, optional port) names ``host:port``."""
    name, _, written = header.rpartition(":") if header.count(":") == 1 else (header, "", "")
    default = 443 if scheme == "https" else 80
    wanted = int(written) if written.isdigit() else (None if written else default)
    return name.lower().rstrip(".") == host.lower().rstrip(".") and wanted == port


def _target(flow: http.HTTPFlow) -> tuple[str, int]:
    """Where the request goes: the name the egress policy checked before it pinned the
    address (a tunnel's requests then show the address), else the request's own target
    (plain HTTP, which connects after this hook). Never the ``Host`` header or the SNI."""
    policy = ctx.master.addons.get("egresspolicy")
    named = getattr(policy, "targets", {}).get(flow.server_conn.id) if policy else None
    return named or (flow.request.host, flow.request.port)


def _refuse(flow: http.HTTPFlow, reason: str) -> None:
    """Answer 403 with the reason, as the client's protocol reads errors: an AWS SDK or CLI
    shows ``AccessDenied: iac-kernel credential broker: ...``, anything else plain text."""
    ctx.log.warn(f"credential broker: {reason}")
    text = f"iac-kernel credential broker: {reason}"
    req = flow.request
    if "AWS4-HMAC-SHA256" not in req.headers.get("authorization", ""):
        flow.response = http.Response.make(403, text + "\n", {"Content-Type": "text/plain"})
    elif req.headers.get("x-amz-target") or "json" in req.headers.get("content-type", ""):
        body = json.dumps({"__type": "AccessDeniedException", "message": text})
        headers = {"Content-Type": "application/x-amz-json-1.1"}
        flow.response = http.Response.make(
            403, body, {**headers, "x-amzn-ErrorType": "AccessDeniedException"}
        )
    else:
        body = (
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
            f"<Message>{html.escape(text)}</Message></Error><RequestId>iac-kernel</RequestId>"
            "</ErrorResponse>"
        )
        flow.response = http.Response.make(403, body, {"Content-Type": "text/xml"})


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


# -- Response scrubbing ---------------------------------------------------------------
# Every answer the proxy can see (any host, not only brokered ones) leaves with no real
# value of the table in it: raw or as a URL, JSON, XML or HTML text writes it (each byte
# literal or escaped, any mix), as base64 (standard or URL-safe, at each of the three
# offsets inside a longer run) and as hex (plain or byte-spaced, as S3's signature errors
# echo canonical requests). A text form becomes the placeholder written the same way (the
# sandbox sees what it already holds); base64 and hex become a fixed marker of the same
# length. One regex of every form is built per table and runs only around "needles"
# found (pieces every match of a form holds): long needles are found in one pass over
# the text's 8-byte words at a fixed stride (a set lookup each), short ones by a search
# each, so an answer with no value costs about one pass whatever the table's size.

#: A real value shorter than this is scrubbed only where it is a whole header value,
#: body or message (the broker's own substitution rule): shorter strings occur by chance.
_SCRUB_MIN = 8
#: What stands for a base64 or text form that cannot carry the placeholder (cycled).
_MARKER = b"REDACTED"
_NEEDLE_MAX = 72
#: A needle of ``stride + 7`` bytes or more holds one of the 8-byte words at every
#: ``stride``-th offset of any text it is in: such needles are looked for in one pass
#: over those words (a set lookup each), shorter ones by a search of their own (one pass
#: each). The stride is chosen per table by the cost of each pass, counted in searches
#: (measured: a lookup costs about what a search spends on 30 bytes).
_WORD_PASS = {16: 8, 32: 4, 64: 2}
#: A needle this long is sampled at a stride of 32 (preferred over a shorter one).
_SAMPLED = 32 + 7
#: Below this size a text is searched needle by needle.
_SMALL = 4096
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ENTITY = {ord("&"): b"amp", ord("<"): b"lt", ord(">"): b"gt", ord('"'): b"quot", ord("'"): b"apos"}
#: Bytes of escapes and of the base64 and hex alphabets: with the values' own bytes, all
#: a match can hold (a streamed tail without them cannot be the start of one).
_FORM_BYTES = frozenset(_UNRESERVED | set(b"%\\/&#;+_ "))
_PERCENT = re.compile(rb"%[0-9A-F]{2}")


def _hex_either(byte: int) -> bytes:
    """A regex of ``byte``'s two hex digits, in either case."""
    return b"".join(
        d.encode() if d.isdigit() else f"[{d}{d.upper()}]".encode() for d in f"{byte:02x}"
    )


def _byte_forms(byte: int) -> tuple[bytes, int]:
    """(a regex of one byte of a value as text writes it, the longest such writing)."""
    literal = re.escape(bytes([byte]))
    if byte in _UNRESERVED:
        return literal, 1
    forms = [literal, b"%" + _hex_either(byte)]
    if byte == 0x20:
        forms.append(rb"\+")
    if byte in b'/"\\':
        forms.append(rb"\\" + literal)
    if byte < 0x80:
        forms += [
            rb"\\u00" + _hex_either(byte),
            b"&#%d;" % byte,
            b"&#[xX]" + _hex_either(byte) + b";",
        ]
    if byte in _ENTITY:
        forms.append(b"&" + _ENTITY[byte] + b";")
    return b"(?:" + b"|".join(forms) + b")", 6


def _b64_cores(real: bytes) -> list[bytes]:
    """The standard base64 characters only ``real`` decides, at each offset (0, 1, 2
    bytes into a 3-byte group) it can start at inside a longer base64 run."""
    cores = []
    for lead in range(3):
        text = base64.b64encode(bytes(lead) + real + bytes(2))
        cores.append(text[-(-8 * lead // 6) : 8 * (lead + len(real)) // 6])
    return cores


def _longest_run(text: bytes, allowed: frozenset[int]) -> bytes:
    runs = re.findall(b"[" + re.escape(bytes(sorted(allowed))) + b"]+", text)
    return max(runs, key=len, default=b"")


def _needles(run: bytes, whole: list[bytes]) -> set[bytes]:
    """Pieces every match of a form holds: ``run`` (a part every writing of it keeps)
    when it is long enough to be sampled, or when the ``whole`` writings are not either;
    else each whole writing (a mix of writings is then not looked for)."""
    shortest = min(len(w) for w in whole)
    if len(run) >= _SAMPLED or (len(run) >= _SCRUB_MIN and shortest < _SAMPLED):
        return {run[:_NEEDLE_MAX]}
    return {w[:_NEEDLE_MAX] for w in whole}


class _Scrubber:
    """The real values of one table in every form an answer may carry them (see above)."""

    def __init__(self, pairs: dict[bytes, bytes], stride: int | None = None) -> None:
        #: real -> placeholder, for values too short to look for inside a text
        self.exact = {r: f for r, f in pairs.items() if len(r) < _SCRUB_MIN}
        self._exact_max = _SCRUB_MIN + 64  # surrounding white space included
        #: group number -> (kind, real, placeholder)
        self.kinds: list[tuple[str, bytes, bytes]] = [("", b"", b"")]
        self.needles: set[bytes] = set()
        self._tokens: dict[bytes, re.Pattern[bytes]] = {}
        alternatives, longest, inner = [], 1, set(_FORM_BYTES)
        for real, fake in sorted(pairs.items(), key=lambda kv: -len(kv[0])):
            if len(real) < _SCRUB_MIN:
                continue
            inner |= set(real)
            forms = [_byte_forms(b) for b in real]
            text = b"".join(f for f, _ in forms)
            quoted = [real, quote(real, safe="").encode(), quote_plus(real, safe="").encode()]
            quoted.append(quote(real, safe="/").encode())
            quoted += [_PERCENT.sub(lambda m: m.group().lower(), q) for q in quoted]
            quoted.append(real.replace(b"/", b"\\/"))
            quoted.append(html.escape(real.decode("utf-8", "replace")).encode())
            self._add(alternatives, "text", real, fake, text)
            self.needles |= _needles(_longest_run(real, _UNRESERVED), quoted)
            longest = max(longest, sum(n for _, n in forms))
            for core in _b64_cores(real):
                safe = core.translate(bytes.maketrans(b"+/", b"-_"))
                pattern = re.escape(core).replace(b"\\+", b"[+\\-]").replace(b"/", b"[/_]")
                self._add(alternatives, "base64", real, fake, pattern)
                plain = frozenset(_UNRESERVED - set(b"-_"))
                self.needles |= _needles(_longest_run(core, plain), [core, safe])
                longest = max(longest, len(core))
            for form in (real.hex(), real.hex().upper(), real.hex(" "), real.hex(" ").upper()):
                self._add(alternatives, "hex", real, fake, re.escape(form.encode()))
                self.needles |= _needles(form.encode(), [form.encode()])
                longest = max(longest, len(form))
        self.pattern = re.compile(b"|".join(alternatives)) if alternatives else None
        cheapest = min(_WORD_PASS, key=lambda s: _WORD_PASS[s] + len(self._searched(s)))
        self._stride = stride or cheapest
        self._short = self._searched(self._stride)
        self._long = [n for n in self.needles if len(n) >= self._stride + 7]
        self._words = {
            int.from_bytes(n[i : i + 8], sys.byteorder)
            for n in self._long
            for i in range(len(n) - 7)
        }
        #: what a streamed chunk's end may hold back: a match is at most this long, less one
        self.hold = longest - 1
        self._inner_run = re.compile(b"[" + re.escape(bytes(sorted(inner))) + b"]*")

    def _searched(self, stride: int) -> dict[bytes, list[bytes]]:
        """The needles too short for ``stride``, by their first 4 bytes: one search each
        group (AWS key ids share ``AKIA``), or the needle's own when alone."""
        groups: dict[bytes, list[bytes]] = {}
        for needle in sorted(n for n in self.needles if len(n) < stride + 7):
            groups.setdefault(needle[:4], []).append(needle)
        return groups

    def _add(self, alternatives: list, kind: str, real: bytes, fake: bytes, regex: bytes) -> None:
        alternatives.append(b"(" + regex + b")")
        self.kinds.append((kind, real, fake))

    def windows(self, data: bytes) -> list[tuple[int, int]]:
        """Spans of ``data`` (merged, in order) that every match lies in: around each
        needle found, or each sampled word of a long needle; none when no value can be
        there, the usual case, found with one pass over the sampled words (a set lookup
        each) and one search per short needle."""
        points = []
        if len(data) < _SMALL:
            for needle in self.needles:
                points += _occurrences(data, needle)
            return _merged(points, self.hold + 1 + _NEEDLE_MAX)
        for prefix, needles in self._short.items():
            if len(needles) == 1:
                points += _occurrences(data, needles[0])
                continue
            for at in _occurrences(data, prefix):
                if any(data.startswith(n, at) for n in needles):
                    points.append(at)
        if self._long:
            words = memoryview(data)[: len(data) // 8 * 8].cast("Q")[:: self._stride // 8]
            for word in self._words.intersection(words):
                points += _occurrences(data, word.to_bytes(8, sys.byteorder))
            edge = self._stride + 16  # a needle starting this near the end may hold no word
            for needle in self._long:
                points += [len(data) - edge + at for at in _occurrences(data[-edge:], needle)]
        return _merged(points, self.hold + 1 + _NEEDLE_MAX)

    def scrub(self, data: bytes, same_length: bool = False) -> bytes:
        """``data`` without any real value (the very object when it held none)."""
        if self.exact and len(data) <= self._exact_max and data.strip() in self.exact:
            return data.replace(data.strip(), self.exact[data.strip()])
        return self.scrub_upto(data, len(data), same_length)[0]

    def scrub_upto(self, data: bytes, limit: int, same_length: bool) -> tuple[bytes, int]:
        """(``data[:end]`` scrubbed, ``end``): every match that starts before ``limit`` is
        replaced; ``end`` is ``limit`` or the end of a match that runs past it."""
        windows = self.windows(data)
        if not windows:
            return (data if limit == len(data) else data[:limit]), limit
        out, pos = [], 0
        for start, stop in windows:
            if start >= limit:
                break
            for found in self.pattern.finditer(data, start, stop):  # type: ignore[union-attr]
                if found.start() >= limit:
                    break
                out += [data[pos : found.start()], self._replacement(found, same_length)]
                pos = found.end()
        end = max(limit, pos)
        if not out:
            return (data if end == len(data) else data[:end]), end
        out.append(data[pos:end])
        return b"".join(out), end

    def _replacement(self, found: re.Match[bytes], same_length: bool) -> bytes:
        kind, real, fake = self.kinds[found.lastindex or 0]
        text = found.group()
        if kind == "hex":
            return bytes(b if b == 0x20 else 0x30 for b in text)
        if kind == "text":
            made = fake if text == real else self._as_written(text, real, fake)
            if len(made) == len(text) or not same_length:
                return made
        return (_MARKER * (len(text) // len(_MARKER) + 1))[: len(text)]

    def _as_written(self, text: bytes, real: bytes, fake: bytes) -> bytes:
        """The placeholder written as ``text`` writes ``real``: a placeholder keeps every
        non-alphanumeric character where it was, so each differing byte is a literal."""
        if len(fake) != len(real):
            return fake  # a short value's placeholder: letters and digits only
        if real not in self._tokens:
            self._tokens[real] = re.compile(b"".join(b"(" + _byte_forms(b)[0] + b")" for b in real))
        tokens = self._tokens[real].fullmatch(text).groups()  # type: ignore[union-attr]
        return b"".join(
            tok if r == f else bytes([f]) for tok, r, f in zip(tokens, real, fake, strict=True)
        )

    def keep(self, data: bytes) -> int:
        """How many bytes at the end of a streamed ``data`` to hold back: those that may
        begin a match the next chunk completes (none after a byte no match can hold)."""
        tail = data[-self.hold :][::-1] if self.hold else b""
        return self._inner_run.match(tail).end()  # type: ignore[union-attr]


def _occurrences(data: bytes, needle: bytes) -> list[int]:
    found, at = [], data.find(needle)
    while at >= 0:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def _merged(points: list[int], reach: int) -> list[tuple[int, int]]:
    """The spans ``reach`` bytes either side of ``points``, overlapping ones merged."""
    merged: list[tuple[int, int]] = []
    for at in sorted(points):
        if merged and at - reach <= merged[-1][1]:
            merged[-1] = (merged[-1][0], at + reach)
        else:
            merged.append((max(0, at - reach), at + reach))
    return merged


def _scrubber(table: Table) -> _Scrubber | None:
    """The scrubber of ``table``'s real values (None: it has none)."""
    pairs = {}
    for fake, (real, _hosts) in table.swaps.items():
        if real:
            pairs[real.encode()] = fake.encode()
    return _Scrubber(pairs) if pairs else None


def _scrub_headers(scrubber: _Scrubber, headers: http.Headers | None) -> None:
    if not headers:
        return
    fields = headers.fields
    exact = scrubber.exact and any(v.strip() in scrubber.exact for _, v in fields)
    if exact or scrubber.windows(b"\n".join(v for _, v in fields)):
        headers.fields = tuple((n, scrubber.scrub(v)) for n, v in fields)


def _decoded_body(response: http.Response) -> tuple[bytes, bool]:
    """(the body with its content codings undone, whether mitmproxy can encode it back
    the same way); ValueError when a coding cannot be undone. A label that is not a
    content coding (``utf-8``: a text codec) is taken as no coding, as clients do."""
    from mitmproxy.net import encoding

    data = response.raw_content or b""
    names = [n.strip().lower() for n in response.headers.get("content-encoding", "").split(",")]
    names = [n for n in names if n and n not in ("identity", "none")]
    same = len(names) <= 1
    for name in reversed(names):
        try:
            decoded = encoding.decode(data, name)
        except (LookupError, TypeError) as exc:
            raise ValueError(str(exc)) from exc
        if isinstance(decoded, bytes):
            data = decoded
        else:
            same = False
    return data, same


def _stream_decoder(header: str):
    """A function undoing the content codings ``header`` names on a streamed body, chunk
    by chunk (``(data, final) -> bytes``); None when one of them is unknown."""
    steps = []
    for name in reversed([n.strip().lower() for n in header.split(",") if n.strip()]):
        if name in ("identity", "none"):
            continue
        if name in ("gzip", "x-gzip"):
            steps.append(_ZlibStep(16 + zlib.MAX_WBITS))
        elif name == "deflate":
            steps.append(_ZlibStep(None))
        elif name == "br":
            import brotli  # mitmproxy's own dependency (its decoder)

            steps.append(_CallStep(brotli.Decompressor().process))
        elif name == "zstd":
            import zstandard  # mitmproxy's own dependency (its decoder)

            steps.append(_CallStep(zstandard.ZstdDecompressor().decompressobj().decompress))
        else:
            return None

    def run(data: bytes, final: bool) -> bytes:
        for step in steps:
            data = step(data, final)
        return data

    return run


class _CallStep:
    def __init__(self, call) -> None:
        self.call = call

    def __call__(self, data: bytes, final: bool) -> bytes:
        return self.call(data) if data else b""


class _ZlibStep:
    """gzip (``wbits`` 31, members one after another) or deflate (``None``: a zlib
    stream, or raw deflate as some servers send, told by its first two bytes)."""

    def __init__(self, wbits: int | None) -> None:
        self.wbits, self.pending, self.inflate = wbits, b"", None

    def __call__(self, data: bytes, final: bool) -> bytes:
        if self.inflate is None:
            self.pending += data
            if len(self.pending) < 2 and not final:
                return b""
            data, self.pending = self.pending, b""
            if self.wbits is None:
                zlib_header = (
                    len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
                )
                self.wbits = zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS
            self.inflate = zlib.decompressobj(self.wbits)
        out = [self.inflate.decompress(data)]
        while self.inflate.eof and self.inflate.unused_data and self.wbits > 16:
            rest = self.inflate.unused_data
            self.inflate = zlib.decompressobj(self.wbits)
            out.append(self.inflate.decompress(rest))
        if final:
            out.append(self.inflate.flush())
        return b"".join(out)


class _StreamScrub:
    """``flow.response.stream`` that scrubs a streamed body chunk by chunk, holding back
    the end of a chunk that may begin a value the next one completes. mitmproxy calls it
    with each chunk and once with ``b""`` at the end (then everything held goes out)."""

    def __init__(self, scrubber: _Scrubber, same_length: bool, decode=None, inner=None) -> None:
        self.scrubber, self.same_length = scrubber, same_length
        self.decode, self.inner = decode, inner
        self.carry = b""

    def __call__(self, chunk: bytes) -> list[bytes]:
        # Never b"" before the end: mitmproxy would send it as the last chunk of a
        # chunked body (``0\r\n\r\n``); an empty list sends nothing.
        final = not chunk
        if self.inner is not None:  # another addon's stream function runs first
            made = self.inner(chunk)
            parts = [made] if isinstance(made, bytes) else list(made)
            chunk = b"".join(parts)
            if not chunk and not final:
                return []
        if self.decode is not None:
            try:
                chunk = self.decode(chunk, final)
            except Exception as exc:  # a broken coding: the rest goes on as it came
                ctx.log.warn(f"credential broker: a streamed body cannot be decoded: {exc}")
                self.decode = None
        data = self.carry + chunk
        keep = 0 if final else self.scrubber.keep(data)
        out, end = self.scrubber.scrub_upto(data, len(data) - keep, self.same_length)
        self.carry = data[end:]
        return [out] if out else []


#: What a TCP flow keeps (``flow.metadata``): the end of the server's last message, and
#: whether a split value was found (the server's data is dropped from then on).
_TCP_TAIL, _TCP_MUTED = "iac_scrub_tail", "iac_scrub_muted"


class ResponseScrub:
    """The broker's second addon: what servers send back, scrubbed of every real value
    of the broker's current table (read again when the agent rewrites it). It runs after
    :class:`Broker`, so a refusal or a withheld answer is scrubbed too."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._made: tuple[Table, _Scrubber | None] | None = None

    def _current(self) -> _Scrubber | None:
        self.broker._reload()
        table = self.broker.table
        if self._made is None or self._made[0] is not table:
            self._made = (table, _scrubber(table))
        return self._made[1]

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Headers now (a streamed answer sends them next); a streamed body chunk by chunk."""
        scrubber = self._current()
        response = flow.response
        if scrubber is None or response is None:
            return
        _scrub_headers(scrubber, response.headers)
        response.data.reason = scrubber.scrub(response.data.reason)
        # mitmproxy starts streaming a body of unknown length once it outgrows
        # stream_large_bodies, with no hook in between: such a body is streamed from here.
        unknown = "content-length" not in response.headers
        if not response.stream and not (ctx.options.stream_large_bodies and unknown):
            return
        inner = response.stream if callable(response.stream) else None
        decode = None
        coding = response.headers.get("content-encoding", "").strip().lower()
        if coding not in ("", "identity", "none"):
            decode = _stream_decoder(coding)
            if decode is None:
                ctx.log.warn(f"credential broker: cannot scrub a {coding!r} streamed body")
                flow.kill()
                return
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
            chunked = "chunked" in response.headers.get("transfer-encoding", "").lower()
            if response.http_version == "HTTP/1.1" and not chunked:
                response.headers["transfer-encoding"] = "chunked"
        same_length = "content-length" in response.headers
        response.stream = _StreamScrub(scrubber, same_length, decode, inner)

    def response(self, flow: http.HTTPFlow) -> None:
        """Headers, trailers and (unless streamed) the whole body, decoded and encoded back."""
        scrubber = self._current()
        response = flow.response
        if scrubber is None or response is None:
            return
        _scrub_headers(scrubber, response.headers)
        _scrub_headers(scrubber, response.trailers)
        response.data.reason = scrubber.scrub(response.data.reason)
        if response.stream or not response.raw_content:
            return
        try:
            body, same = _decoded_body(response)
        except ValueError as exc:
            reason = f"an answer whose content coding cannot be undone is withheld: {exc}"
            ctx.log.warn(f"credential broker: {reason}")
            flow.response = http.Response.make(
                502, f"iac-kernel credential broker: {reason}\n", {"Content-Type": "text/plain"}
            )
            return
        scrubbed = scrubber.scrub(body)
        if scrubbed is body:
            return
        if not same:
            del response.headers["content-encoding"]
        response.content = scrubbed

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A WebSocket message from the server (whole: mitmproxy joins its frames)."""
        scrubber = self._current()
        if scrubber is None or flow.websocket is None:
            return
        message = flow.websocket.messages[-1]
        if not message.from_client:
            message.content = scrubber.scrub(message.content)

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        """Plain TCP from the server, scrubbed message by message. Nothing can be held
        back (a reply that waits for more would never come), so a value split across two
        messages is seen only when the second arrives: from then on the server's data is
        dropped (the first part already went out)."""
        scrubber = self._current()
        message = flow.messages[-1]
        if scrubber is None or message.from_client:
            return
        if flow.metadata.get(_TCP_MUTED):
            message.content = b""
            return
        tail = flow.metadata.get(_TCP_TAIL, b"")
        message.content = scrubber.scrub(message.content)
        joined = tail + message.content
        if scrubber.pattern is not None and scrubber.windows(joined):
            for found in scrubber.pattern.finditer(joined):
                if found.start() < len(tail) < found.end():
                    ctx.log.warn("credential broker: a value split across TCP messages")
                    flow.metadata[_TCP_MUTED] = True
                    message.content = b""
                    return
        flow.metadata[_TCP_TAIL] = joined[-scrubber.hold :] if scrubber.hold else b""


addons.append(ResponseScrub(addons[0]))
