"""mitmdump addon: swap placeholder credentials for the real ones, on their own hosts,
for a guarded program's own run only, one judged operation at a time.

Loaded by ``mitmdump -s addon_broker.py --set iac_broker_file=TABLE`` in the egress
environment (imports stdlib, mitmproxy, botocore and its siblings ``addon_table`` and
``addon_operations``; never the agent's package). The table (``addon_table``) lists each
credential's real values, placeholders and hosts; it is read again when it changes.

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

Every answer is then scrubbed of every real value by the next addon, ``addon_scrub``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import html
import json
import os
import re
import secrets
from urllib.parse import parse_qsl, urlencode

from addon_operations import READ, SECRET, Request, aws_operation, bearer_operation, holds_secret
from addon_table import AWS_KEYS, TABLE_OPTION, Table, entry, placeholder_for
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials
from mitmproxy import ctx, http, tls

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


class Broker:
    def __init__(self) -> None:
        self.table = Table({})
        self._stamp: tuple[float, int] | None = None
        self._data: dict = {}
        #: AWS credentials the broker obtained for a run (role credentials, new keys):
        #: kept here, in this process only; the sandbox got placeholders for them.
        self._obtained: list[dict] = []
        #: The placeholders of those are drawn with this key (this process only).
        self._key = secrets.token_bytes(32)

    def load(self, loader) -> None:
        loader.add_option(TABLE_OPTION, str, "", "The credential broker's table (JSON).")

    def configure(self, updated) -> None:
        if TABLE_OPTION in updated:
            self._stamp = None
            self.reload()

    def reload(self) -> None:
        """Read the table again when the agent rewrote it."""
        path = getattr(ctx.options, TABLE_OPTION)
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
        self.reload()
        address = data.context.server.address
        host = data.client_hello.sni or (address[0] if address else "")
        port = address[1] if address else 443
        hosts = {host, address[0] if address else host}
        if not any(self.table.intercepts(h, port) for h in hosts):
            data.ignore_connection = True

    async def request(self, flow: http.HTTPFlow) -> None:
        self.reload()
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
        real = dict(zip(AWS_KEYS, (key_id, secret, found.get("sessiontoken")), strict=True))
        real = {name: value for name, value in real.items() if value}
        fake = {name: placeholder_for(value, self._key) for name, value in real.items()}
        hosts = self.table.aws[parent][1] if parent in self.table.aws else []
        self._obtained.append(entry("aws", "obtained", hosts, real, fake))
        self._build()
        for name, value in real.items():
            body = body.replace(value.encode(), fake[name].encode())
        response.content = body
        return {"accesskeyid", "secretaccesskey", "secretkey", "sessiontoken"}

    def _exchange(self, req: http.Request) -> list[str]:
        """The hosts of the tokens this request exchanges a brokered secret for (an OAuth
        token request with a client secret), or []."""
        body = req.raw_content or b""
        issued = self.table.issues_for.items()
        return sorted({h for fake, hosts in issued if fake.encode() in body for h in hosts})

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
                fake = data[name] = placeholder_for(real, self._key)
                made = entry("token", f"issued {name}", hosts, {"token": real}, {"token": fake})
                if name == "refresh_token":  # swapped back in a later exchange's body
                    made.update(body=[name], issues_for=hosts)
                self._obtained.append(made)
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
        """The agent's answer for ``operation`` on this flow's connection (None: allowed),
        asked over the policy addon's socket."""
        policy = ctx.master.addons.get("egresspolicy")
        peer = flow.client_conn.peername
        if policy is None or not peer:
            return "no agent to judge the use of a brokered credential"
        try:
            answer = await policy.ask({"operation": operation, "peer": peer[1]})
        except (OSError, ValueError) as exc:
            return f"the agent did not answer: {exc}"
        return None if answer.get("allow") else str(answer.get("reason") or "not approved")

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
        creds = Credentials(*(real.get(name) for name in AWS_KEYS))
        resigned = [n for n in names if n not in _RESIGNED]
        if real.get(AWS_KEYS[2]):
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
