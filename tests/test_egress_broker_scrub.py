"""The credential broker scrubs answers: a real mitmdump with the broker's addons, and
loopback servers (HTTP and HTTPS, WebSocket, plain TCP, moto's AWS) that put real values
in what they send back in every form: headers, a redirect, plain, gzip and deflate
bodies, URL-quoted, JSON-escaped, base64 at each alignment, hex, chunked and streamed
(``stream_large_bodies``) with the value split across chunks. The client must see no
real value (looked for by decoding what it got, independently of the addon) and the
placeholder where the form allows it; an answer with no value passes byte for byte."""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import hashlib
import html
import http.client
import json
import os
import re
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest

from egress_support import aws_user, broker_args, egress_ready, running_mitmdump, trust_broker
from iac_kernel.egress import broker

trustme = pytest.importorskip("trustme")
#: A bearer token (Terraform's shape: its placeholder has the same length).
TOKEN = "tfc7Hq2LmXw9Rb.atlasv1.Kd83jfLq0PzW6nYtR5vBc2MxAe9GhUo1IsZ4"
#: A password with signs a URL quotes (shorter than 20: its placeholder is longer).
PASSWORD = "s3cr3t/Pa ss+w&rd"
_TEST_CA = trustme.CA()


def leaks(data: bytes, value: str) -> list[str]:
    """The forms of ``value`` found in ``data``, each looked for by decoding ``data`` the
    way a client would (not by the addon's own patterns)."""
    raw = value.encode()
    text = data.decode("latin-1")
    found = []
    decoded = {
        "raw": text,
        "url-quoted": unquote(text),
        "form-quoted": unquote_plus(text),
        "json": text.replace("\\/", "/"),
        "json-unicode": re.sub(r"\\u00([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text),
        "html": html.unescape(text),
    }
    found += [name for name, plain in decoded.items() if value in plain]
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        run = run.replace("-", "+").replace("_", "/")
        for offset in range(4):
            part = run[offset:]
            part = part[: len(part) // 4 * 4]
            with contextlib.suppress(binascii.Error, ValueError):
                if raw in base64.b64decode(part):
                    found.append(f"base64 at {offset}")
    squashed = re.sub(r"[\s]", "", text).lower()
    if raw.hex() in squashed:
        found.append("hex")
    return found


class Leaky(BaseHTTPRequestHandler):
    """Answers with the real values in the form its path names."""

    protocol_version = "HTTP/1.1"
    token = TOKEN
    password = PASSWORD

    def send(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None):
        self.send_response_only(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def send_chunked(self, chunks: list[bytes], headers: dict[str, str] | None = None):
        """Chunk by chunk, each flushed and given time to reach the proxy alone."""
        self.send_response_only(200)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            time.sleep(0.15)
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self) -> None:
        token, password = self.token.encode(), self.password.encode()
        path, _, arg = self.path.partition("?")
        if path == "/raw":
            self.send(b"your token is " + token + b" and password " + password + b".\n")
        elif path == "/headers":
            self.send(
                b"ok\n",
                headers={
                    "X-Echo": self.token,
                    "Set-Cookie": f"session={quote(self.password)}; Path=/; HttpOnly",
                    "WWW-Authenticate": f'Bearer error_description="bad token {self.token}"',
                },
            )
        elif path == "/redirect":
            where = f"https://localhost/next?pw={quote_plus(self.password)}&t={self.token}"
            self.send(b"", 302, {"Location": where})
        elif path == "/gzip":
            body = gzip.compress(b"gz " + token + b" " + password + b"\n" * 1000)
            self.send(body, headers={"Content-Encoding": "gzip"})
        elif path == "/deflate":
            body = zlib.compress(b"deflated " + token + b" " + password)
            self.send(body, headers={"Content-Encoding": "deflate"})
        elif path == "/quoted":
            forms = [
                quote(self.password, safe=""),
                quote(self.password),
                quote_plus(self.password),
                re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(self.password, safe="")),
                json.dumps({"p": self.password}).replace("/", "\\/"),
                html.escape(self.password),
            ]
            self.send("\n".join(forms).encode())
        elif path == "/base64":
            lead = int(arg)
            out = []
            for value in (token, password):
                blob = os.urandom(lead) + value + os.urandom(9)
                out += [base64.b64encode(blob), base64.urlsafe_b64encode(blob)]
            self.send(b"\n".join(out))
        elif path == "/hex":
            self.send(b"%s\n%s\n" % (token.hex().encode(), password.hex(" ").upper().encode()))
        elif path == "/s3-signature-error":
            self.send(_s3_signature_error(self.token), 403, {"Content-Type": "application/xml"})
        elif path == "/chunked":
            body = b"before " + token + b" after " + password + b" end\n"
            cut = int(arg)
            self.send_chunked([body[:cut], body[cut : cut + 9], body[cut + 9 :]])
        elif path == "/chunked-gzip":
            packed = gzip.compress(b"stream " + token + b" " + password + b"\n")
            third = len(packed) // 3
            parts = [packed[:third], packed[third : 2 * third], packed[2 * third :]]
            self.send_chunked(parts, {"Content-Encoding": "gzip"})
        elif path == "/events":
            # a server-sent event stream: each event must arrive before the next is sent
            self.send_chunked([b"data: one\n\n", b"data: " + token + b"\n\n"])
        elif path == "/trailer":
            self.send_response_only(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", "X-Echo")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"3\r\nabc\r\n0\r\nX-Echo: " + token + b"\r\n\r\n")
        elif path == "/control":
            self.send(CONTROL, headers={"X-Request-Id": "abc123", "Content-Type": "text/plain"})
        elif path == "/control-gzip":
            self.send(gzip.compress(CONTROL, mtime=0), headers={"Content-Encoding": "gzip"})
        elif path == "/control-chunked":
            self.send_chunked([CONTROL[:1000], CONTROL[1000:]])
        else:
            self.send(b"no such form\n", 404)

    def log_message(self, *args: object) -> None:
        pass


#: An answer with no real value: text, base64 and hex of other data, 300 KB.
CONTROL = b"\n".join(
    [b"plain text with no secret", base64.b64encode(hashlib.sha512(b"x").digest()) * 2]
    + [hashlib.sha256(b"%d" % i).hexdigest().encode() for i in range(4000)]
)


def _s3_signature_error(token: str) -> bytes:
    """S3's ``SignatureDoesNotMatch`` answer as AWS sends it: the key id, the string to
    sign and the canonical request (with its session token header), each also as hex."""
    canonical = f"GET\n/\n\nhost:bucket.s3.amazonaws.com\nx-amz-security-token:{token}\n"
    to_sign = "AWS4-HMAC-SHA256\n20250101T000000Z\n20250101/us-east-1/s3/aws4_request\nabc"
    return (
        "<Error><Code>SignatureDoesNotMatch</Code>"
        f"<AWSAccessKeyId>{token}</AWSAccessKeyId>"
        f"<StringToSign>{html.escape(to_sign)}</StringToSign>"
        f"<StringToSignBytes>{to_sign.encode().hex(' ')}</StringToSignBytes>"
        f"<CanonicalRequest>{html.escape(canonical)}</CanonicalRequest>"
        f"<CanonicalRequestBytes>{canonical.encode().hex(' ')}</CanonicalRequestBytes>"
        "</Error>"
    ).encode()


@contextlib.contextmanager
def _serve(context: ssl.SSLContext | None = None) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Leaky)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The leaky servers, a broker holding TOKEN (for localhost) and PASSWORD, and two
    proxies: one that buffers answers (mitmproxy's default) and one that streams them."""
    root = tmp_path_factory.mktemp("scrub")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _TEST_CA.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    test_ca = root / "test-ca.pem"
    _TEST_CA.cert_pem.write_to_path(str(test_ca))
    with _serve(context) as tls_port, _serve() as plain_port:
        env = {
            "TF_TOKEN_localhost": TOKEN,
            "SCRUB_TEST_URL": f"https://bob:{quote(PASSWORD, safe='')}@localhost:{tls_port}/",
        }
        made = broker.prepare(env, home=root / "home", folder=root / "p")
        assert {TOKEN, PASSWORD} <= set(made.swaps)
        trust = trust_broker(made, root / "public" / "bundle.pem")
        args = [*broker_args(made), "--set", f"ssl_verify_upstream_trusted_ca={test_ca}"]
        streaming = [*args, "--set", "stream_large_bodies=1"]
        with (
            running_mitmdump(args, root / "buffered.log") as buffered,
            running_mitmdump(streaming, root / "streamed.log") as streamed,
        ):
            yield {
                "made": made,
                "fake": {TOKEN: made.swaps[TOKEN], PASSWORD: made.swaps[PASSWORD]},
                "client": ssl.create_default_context(cafile=trust["SSL_CERT_FILE"]),
                "test_ca": str(test_ca),
                "proxies": {"buffered": buffered, "streamed": streamed},
                "logs": {"buffered": root / "buffered.log", "streamed": root / "streamed.log"},
                "ports": {"https": tls_port, "http": plain_port},
            }


class Answer:
    """What the client got: status line, headers and body as they came."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.reason = response.reason
        self.headers = response.getheaders()
        self.body = response.read()

    def header(self, name: str) -> str:
        return next((v for n, v in self.headers if n.lower() == name.lower()), "")

    @property
    def content(self) -> bytes:
        """The body with its content coding undone."""
        coding = self.header("content-encoding")
        if coding == "gzip":
            return gzip.decompress(self.body)
        if coding == "deflate":
            return zlib.decompress(self.body)
        return self.body

    @property
    def everything(self) -> bytes:
        head = f"{self.status} {self.reason}\n" + "".join(f"{n}: {v}\n" for n, v in self.headers)
        return head.encode("latin-1") + self.body + b"\n" + self.content


def fetch(
    world: dict, proxy: str | None, scheme: str, path: str, host: str = "localhost"
) -> Answer:
    """GET ``path`` from the leaky server through ``proxy`` (None: directly)."""
    port = world["ports"][scheme]
    if proxy is None:
        if scheme == "https":
            direct = ssl.create_default_context(cafile=world["test_ca"])
            conn = http.client.HTTPSConnection(host, port, timeout=30, context=direct)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", path)
    elif scheme == "https":
        through = world["proxies"][proxy]
        conn = http.client.HTTPSConnection(
            "127.0.0.1", through, timeout=30, context=world["client"]
        )
        conn.set_tunnel(host, port)
        conn.request("GET", path)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", world["proxies"][proxy], timeout=30)
        conn.request("GET", f"http://{host}:{port}{path}")
    try:
        return Answer(conn.getresponse())
    finally:
        conn.close()


def assert_clean(answer: Answer, values: tuple[str, ...] = (TOKEN, PASSWORD)) -> None:
    for value in values:
        assert leaks(answer.everything, value) == [], (value, answer.everything[:2000])


PROXIES = ["buffered", "streamed"]


def test_the_oracle_sees_every_form():
    """The test's own detector finds each form the servers send (so a clean answer
    means scrubbed, not missed)."""
    for lead in range(3):
        blob = os.urandom(lead) + TOKEN.encode() + os.urandom(5)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            assert leaks(b"x " + encode(blob) + b" y", TOKEN)
    for form in [
        quote(PASSWORD),
        quote_plus(PASSWORD),
        json.dumps(PASSWORD).replace("/", "\\/"),
        html.escape(PASSWORD),
        PASSWORD.encode().hex(" ").upper(),
    ]:
        assert leaks(f"x {form} y".encode(), PASSWORD), form
    assert leaks(_s3_signature_error(TOKEN).replace(TOKEN.encode(), b"x"), TOKEN) == ["hex"]


@pytest.mark.parametrize("proxy", PROXIES)
@pytest.mark.parametrize("scheme", ["https", "http"])
def test_a_body_gets_the_placeholder(world: dict, proxy: str, scheme: str):
    answer = fetch(world, proxy, scheme, "/raw")
    assert_clean(answer)
    assert world["fake"][TOKEN].encode() in answer.body
    if proxy == "buffered":  # a streamed body keeps its length: a longer placeholder cannot
        assert world["fake"][PASSWORD].encode() in answer.body


def test_every_host_is_scrubbed_not_only_a_credentials_own(world: dict):
    """127.0.0.1 is no host of TOKEN's: its answers are scrubbed all the same."""
    answer = fetch(world, "buffered", "http", "/raw", host="127.0.0.1")
    assert_clean(answer)
    assert world["fake"][TOKEN].encode() in answer.body


@pytest.mark.parametrize("proxy", PROXIES)
def test_headers_and_cookies_get_the_placeholder(world: dict, proxy: str):
    answer = fetch(world, proxy, "https", "/headers")
    assert_clean(answer)
    fake_token, fake_password = world["fake"][TOKEN], world["fake"][PASSWORD]
    assert answer.header("X-Echo") == fake_token
    assert answer.header("Set-Cookie") == f"session={quote(fake_password)}; Path=/; HttpOnly"
    assert fake_token in answer.header("WWW-Authenticate")


@pytest.mark.parametrize("proxy", PROXIES)
def test_a_redirect_location_gets_the_placeholder(world: dict, proxy: str):
    answer = fetch(world, proxy, "https", "/redirect")
    assert answer.status == 302
    assert_clean(answer)
    location = answer.header("Location")
    assert f"pw={quote_plus(world['fake'][PASSWORD])}" in location
    assert f"t={world['fake'][TOKEN]}" in location


@pytest.mark.parametrize("proxy", PROXIES)
@pytest.mark.parametrize("path", ["/gzip", "/deflate"])
def test_a_compressed_body_is_scrubbed(world: dict, proxy: str, path: str):
    answer = fetch(world, proxy, "https", path)
    assert answer.status == 200
    assert_clean(answer)
    assert world["fake"][TOKEN].encode() in answer.content
    if proxy == "buffered":  # encoded again as it came
        assert answer.header("Content-Encoding") == path.strip("/")


@pytest.mark.parametrize("proxy", PROXIES)
def test_url_json_and_html_writings_get_the_placeholder_written_the_same_way(
    world: dict, proxy: str
):
    answer = fetch(world, proxy, "https", "/quoted")
    assert_clean(answer)
    if proxy == "buffered":
        fake = world["fake"][PASSWORD]  # letters and digits: every writing is the same
        assert answer.body.count(fake.encode()) == 6, answer.body


@pytest.mark.parametrize("proxy", PROXIES)
@pytest.mark.parametrize("lead", [0, 1, 2])
def test_base64_at_every_alignment_is_scrubbed(world: dict, proxy: str, lead: int):
    answer = fetch(world, proxy, "https", f"/base64?{lead}")
    assert_clean(answer)
    assert b"REDACTED" in answer.body


@pytest.mark.parametrize("proxy", PROXIES)
def test_hex_is_scrubbed(world: dict, proxy: str):
    assert_clean(fetch(world, proxy, "https", "/hex"))


@pytest.mark.parametrize("proxy", PROXIES)
def test_an_s3_style_signature_error_echo_is_scrubbed(world: dict, proxy: str):
    """S3's SignatureDoesNotMatch echoes the key id and the canonical request (with the
    session token), as text and as spaced hex."""
    answer = fetch(world, proxy, "https", "/s3-signature-error")
    assert answer.status == 403
    assert_clean(answer)
    assert f"<AWSAccessKeyId>{world['fake'][TOKEN]}</AWSAccessKeyId>".encode() in answer.body


@pytest.mark.parametrize("cut", [8, 10, 30, 60, 70, 85])
def test_a_value_split_across_streamed_chunks_is_found(world: dict, cut: int):
    """Chunks of 'before TOKEN after PASSWORD end' cut inside each value (8 + 9: both
    ends inside TOKEN; 70: inside PASSWORD), streamed chunk by chunk."""
    answer = fetch(world, "streamed", "https", f"/chunked?{cut}")
    assert answer.status == 200
    assert_clean(answer)
    assert world["fake"][TOKEN].encode() in answer.body
    assert answer.body.startswith(b"before ") and answer.body.endswith(b" end\n")
    assert "Streaming response from localhost" in world["logs"]["streamed"].read_text()


@pytest.mark.parametrize("proxy", PROXIES)
def test_a_chunked_gzip_body_is_scrubbed(world: dict, proxy: str):
    answer = fetch(world, proxy, "https", "/chunked-gzip")
    assert_clean(answer)
    assert world["fake"][TOKEN].encode() in answer.content


def test_a_streamed_event_is_not_held_back(world: dict):
    """The end of a streamed chunk is held back only when it may begin a value: an
    event ending in a blank line reaches the client before the server sends more."""
    port = world["ports"]["http"]
    conn = http.client.HTTPConnection("127.0.0.1", world["proxies"]["streamed"], timeout=30)
    conn.request("GET", f"http://localhost:{port}/events")
    response = conn.getresponse()
    first = response.read1(100)
    rest = response.read()
    conn.close()
    assert first == b"data: one\n\n"
    assert rest == b"data: " + world["fake"][TOKEN].encode() + b"\n\n"


@pytest.mark.parametrize("proxy", PROXIES)
@pytest.mark.parametrize("path", ["/control", "/control-chunked", "/control-gzip"])
def test_an_answer_without_values_passes_byte_for_byte(world: dict, proxy: str, path: str):
    direct = fetch(world, None, "https", path)
    through = fetch(world, proxy, "https", path)
    assert through.content == direct.content
    if proxy == "buffered" or path != "/control-gzip":  # a streamed coding is undone
        assert (through.status, through.headers, through.body) == (
            direct.status,
            direct.headers,
            direct.body,
        )


@pytest.mark.parametrize("proxy", PROXIES)
def test_http1_trailers_never_reach_the_client(world: dict, proxy: str):
    """mitmproxy 11 cannot read HTTP/1 trailers: the answer breaks off before them (the
    addon scrubs ``flow.response.trailers`` where mitmproxy has them: HTTP/2)."""
    port = world["ports"]["http"]
    with socket.create_connection(("127.0.0.1", world["proxies"][proxy]), 30) as sock:
        sock.sendall(
            f"GET http://localhost:{port}/trailer HTTP/1.1\r\nHost: localhost:{port}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        got = _read_all(sock)
    assert got.startswith(b"HTTP/1.1 ")
    assert b"X-Echo:" not in got.split(b"\r\n\r\n", 1)[1]
    assert leaks(got, TOKEN) == []


def test_websocket_messages_from_the_server_are_scrubbed(world: dict):
    with _websocket_server() as port:
        sock = socket.create_connection(("127.0.0.1", world["proxies"]["buffered"]), 30)
        with sock:
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall(
                (
                    f"GET http://localhost:{port}/ws HTTP/1.1\r\nHost: localhost:{port}\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                ).encode()
            )
            head = _read_until(sock, b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101"), head
            message = _read_frame(sock)
    assert leaks(message, TOKEN) == []
    assert message == b"echo " + world["fake"][TOKEN].encode()


def test_tcp_from_the_server_is_scrubbed(world: dict):
    """Plain TCP in a tunnel: a value in one message gets the placeholder; a value split
    across two messages never arrives whole (the rest of the stream is dropped)."""
    for split in (False, True):
        with _tcp_server(split) as port:
            sock = socket.create_connection(("127.0.0.1", world["proxies"]["buffered"]), 30)
            with sock:
                target = f"127.0.0.1:{port}"
                sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                assert _read_until(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 200")
                sock.sendall(b"HELLO\n")
                got = _read_all(sock)
        assert leaks(got, TOKEN) == []
        if not split:
            assert got == b"+" + world["fake"][TOKEN].encode() + b"\n"


def test_the_current_table_is_used_after_the_agent_rewrites_it(tmp_path: Path):
    """A value found after the proxy started is scrubbed without a restart."""
    home = tmp_path / "home"
    home.mkdir()
    made = broker.prepare({}, home=home, folder=tmp_path / "p")
    with _serve() as port, running_mitmdump(broker_args(made), tmp_path / "log") as proxy:
        world = {"ports": {"http": port}, "proxies": {"p": proxy}}
        assert TOKEN.encode() in fetch(world, "p", "http", "/raw").body  # not brokered yet
        again = broker.prepare({"TF_TOKEN_localhost": TOKEN}, home=home, folder=tmp_path / "p")
        answer = fetch(world, "p", "http", "/raw")
        assert_clean(answer, (TOKEN,))
        assert again.swaps[TOKEN].encode() in answer.body


def test_aws_answers_that_echo_the_key_id_are_scrubbed(tmp_path: Path):
    """moto's IAM lists the caller's access key id; an S3 object holding the secret key
    comes back scrubbed (as text and as base64). The requests here are signed with the
    real keys from the host (they carry no placeholder: what is judged is the answer)."""
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config

    with aws_user() as real:
        made = broker.prepare(real, home=tmp_path / "home", folder=tmp_path / "p")
        key_id, secret = real["AWS_ACCESS_KEY_ID"], real["AWS_SECRET_ACCESS_KEY"]
        keys = {"aws_access_key_id": key_id, "aws_secret_access_key": secret}
        endpoint = real["AWS_ENDPOINT_URL"]
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys)
        s3.create_bucket(Bucket="leaky")
        body = f"secret={secret}\nb64={base64.b64encode(secret.encode()).decode()}\n"
        s3.put_object(Bucket="leaky", Key="o", Body=body.encode())
        with running_mitmdump(broker_args(made), tmp_path / "log") as port:
            # a scrubbed object no longer matches its checksum: not checked here
            config = Config(
                proxies={"http": f"http://127.0.0.1:{port}"},
                response_checksum_validation="when_required",
            )
            iam = boto3.client(
                "iam", endpoint_url=endpoint, region_name="us-east-1", config=config, **keys
            )
            listed = iam.list_access_keys(UserName="agent")["AccessKeyMetadata"]
            assert [k["AccessKeyId"] for k in listed] == [made.swaps[key_id]]
            proxied = boto3.client(
                "s3", endpoint_url=endpoint, region_name="us-east-1", config=config, **keys
            )
            got = proxied.get_object(Bucket="leaky", Key="o")["Body"].read()
    assert leaks(got, secret) == [] and leaks(got, key_id) == []
    assert f"secret={made.swaps[secret]}\n".encode() in got


def test_moto_signature_errors_echo_nothing(tmp_path: Path):
    """What moto's S3 and STS say to a request whose signature fails (the placeholder
    secret): no key id (real S3 echoes it: see the loopback S3 echo above)."""
    boto3 = pytest.importorskip("boto3")
    from botocore.exceptions import ClientError

    with aws_user() as real:
        wrong = {"aws_access_key_id": real["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": "x"}
        for service, call in (("s3", "list_buckets"), ("sts", "get_caller_identity")):
            client = boto3.client(
                service, endpoint_url=real["AWS_ENDPOINT_URL"], region_name="us-east-1", **wrong
            )
            with pytest.raises(ClientError) as failed:
                getattr(client, call)()
            assert failed.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
            assert real["AWS_ACCESS_KEY_ID"] not in str(failed.value.response)


def test_stream_scrubbing_at_every_split_point_in_the_proxys_python(tmp_path: Path):
    """The addon's scrubber itself, run by the proxy's own Python: every form at every
    offset of a large body (the sampled search), and a streamed body cut at every pair
    of points (with brotli, zstd, gzip and raw deflate codings undone chunk by chunk)
    gives what scrubbing it whole gives."""
    program = egress_ready()
    script = tmp_path / "check.py"
    script.write_text(_UNIT)
    done = subprocess.run(
        [str(program.parent / "python"), script, Path(broker.__file__).parent, tmp_path / "t.json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("ok")


_UNIT = r"""
import base64, gzip, os, random, sys, zlib
from urllib.parse import quote
sys.path.insert(0, sys.argv[1])
import addon_broker as ab, addon_scrub as sc, addon_table
import brotli, zstandard

real = {"a": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "b": "AKIAIOSFODNN7EXAMPLE",
        "c": "pa ss/w+rd&x1", "d": "tok-" + "Zq9" * 200}
fake = {"a": "xKbmsYVuoGFNJ/L8NEFOH/cQySgjDZFYBNQMFLFZ", "b": "AKIAZZZZZZZZZ9ZZZZZZ",
        "c": "Q" * 20, "d": "tok-" + "Ab1" * 200}
entry = {"kind": "token", "hosts": [], "real": real, "placeholder": fake}
scrubber = sc._scrubber(addon_table.Table({"credentials": [entry]}).swaps)
rng = random.Random(7)

def forms(value):
    raw = value.encode()
    out = [raw, quote(value, safe="").encode(), raw.hex().encode(), raw.hex(" ").encode()]
    for lead in range(3):
        blob = bytes(rng.randrange(256) for _ in range(lead)) + raw + b"tail"
        out += [base64.b64encode(blob), base64.urlsafe_b64encode(blob)]
    return out

# every form, at the start, at every offset mod 64 in the middle, and at the very end of
# a body large enough for the sampled search, with each sampling stride
filler = base64.b64encode(os.urandom(30000))
pairs = {r.encode(): fake[k].encode() for k, r in real.items()}
for stride in (16, 32, 64):
    sampled = sc._Scrubber(pairs, stride)
    for value in real.values():
        for form in forms(value):
            for at in [0, *range(5000, 5064, 9), len(filler) - 1, len(filler)]:
                body = filler[:at] + b" " + form + b" " + filler[at:]
                out = sampled.scrub(body)
                assert value.encode() not in out and out != body, (stride, value, form, at)

body = b"".join(b"<%s>" % f for v in real.values() for f in forms(v)) + b" end}\n"
whole = scrubber.scrub(body, True)
assert all(v.encode() not in whole for v in real.values()) and len(whole) == len(body)

def streamed(chunks, coding=None):
    decode = sc._stream_decoder(coding) if coding else None
    stream = sc._StreamScrub(scrubber, coding is None, decode)
    out = []
    for chunk in [*chunks, b""]:
        got = stream(chunk)
        assert isinstance(got, list) and b"" not in got
        out += got
    return b"".join(out)

step = max(1, len(body) // 35)
for i in range(0, len(body), step):
    for j in range(i, len(body), step):
        assert streamed([c for c in (body[:i], body[i:j], body[j:]) if c]) == whole, (i, j)

plain = body.replace(b" end}\n", b"")
expected = scrubber.scrub(plain)
packed = {
    "gzip": gzip.compress(plain),
    "deflate": zlib.compress(plain)[2:-4],  # raw deflate, as some servers send it
    "br": brotli.compress(plain),
    "zstd": zstandard.ZstdCompressor().compress(plain),
    "gzip, br": brotli.compress(gzip.compress(plain)),
}
for coding, data in packed.items():
    for size in (1, 7, 300, len(data)):
        chunks = [data[k : k + size] for k in range(0, len(data), size)]
        assert streamed(chunks, coding) == expected, (coding, size)
assert sc._stream_decoder("compress") is None

# the hooks on mitmproxy's own test flows: trailers and the reason phrase (HTTP/2 has
# trailers mitmproxy keeps), a chain of codings, a mislabelled one, one that cannot be
# undone (withheld), and the table read again when it changes
import json
from mitmproxy import http
from mitmproxy.test import taddons, tflow

table = sys.argv[2]
with open(table, "w") as handle:
    json.dump({"credentials": [entry]}, handle)
secret, secret_fake = real["a"].encode(), fake["a"].encode()
broker = ab.Broker()
scrub = sc.ResponseScrub()
with taddons.context(broker, scrub) as tctx:
    tctx.configure(broker, iac_broker_file=table)

    def answered(coding=None, body=b"", **parts):
        flow = tflow.tflow(resp=True)
        flow.response.headers.pop("content-encoding", None)
        flow.response.content = body
        if coding:
            flow.response.headers["content-encoding"] = coding
            flow.response.raw_content = parts.pop("raw")
        for name, value in parts.items():
            setattr(flow.response, name, value)
        scrub.response(flow)
        return flow

    flow = answered(trailers=http.Headers([(b"x-echo", secret)]), reason=secret)
    assert flow.response.trailers[b"x-echo"] == secret_fake.decode()
    assert flow.response.data.reason == secret_fake
    raw = brotli.compress(gzip.compress(b"chained " + secret))
    flow = answered("gzip, br", raw=raw)
    assert flow.response.raw_content == b"chained " + secret_fake
    assert "content-encoding" not in flow.response.headers
    flow = answered("utf-8", raw=b"labelled " + secret)
    assert flow.response.raw_content == b"labelled " + secret_fake
    flow = answered("compress", raw=b"\x1f\x9d" + secret)
    assert flow.response.status_code == 502 and secret not in flow.response.raw_content
    untouched = gzip.compress(b"nothing here", mtime=0)
    flow = answered("gzip", raw=untouched)
    assert flow.response.raw_content == untouched

    other = {"kind": "token", "hosts": [], "real": {"t": "NEWVALUE-0123456789abcdef"},
             "placeholder": {"t": "OTHERVAL-9876543210fedcba"}}
    with open(table, "w") as handle:
        json.dump({"credentials": [entry, other]}, handle, indent=2)
    flow = answered(body=b"now NEWVALUE-0123456789abcdef")
    assert flow.response.content == b"now OTHERVAL-9876543210fedcba", flow.response.content
print("ok")
"""


@contextlib.contextmanager
def _websocket_server() -> Iterator[int]:
    """A WebSocket server that answers the handshake and sends one text message."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            head = _read_until(self.request, b"\r\n\r\n").decode()
            key = re.search(r"(?i)sec-websocket-key: *(\S+)", head)[1]
            accept = base64.b64encode(
                hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
            ).decode()
            self.request.sendall(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".encode()
            )
            payload = b"echo " + TOKEN.encode()
            self.request.sendall(bytes([0x81, len(payload)]) + payload)
            time.sleep(1)

    with _tcp(Handler) as port:
        yield port


@contextlib.contextmanager
def _tcp_server(split: bool) -> Iterator[int]:
    """A line server: after the client's first line, ``+TOKEN`` (in two sends, 0.3 s
    apart, when ``split``)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            _read_until(self.request, b"\n")
            reply = b"+" + TOKEN.encode() + b"\n"
            if split:
                self.request.sendall(reply[:20])
                time.sleep(0.3)
                self.request.sendall(reply[20:])
            else:
                self.request.sendall(reply)

    with _tcp(Handler) as port:
        yield port


@contextlib.contextmanager
def _tcp(handler: type[socketserver.BaseRequestHandler]) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    data = b""
    while end not in data:
        more = sock.recv(1)
        if not more:
            break
        data += more
    return data


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(3)
    data = b""
    with contextlib.suppress(TimeoutError, OSError):
        while more := sock.recv(4096):
            data += more
    return data


def _read_frame(sock: socket.socket) -> bytes:
    """One unmasked WebSocket frame's payload (short or 16-bit length)."""
    first = _recv_exact(sock, 2)
    length = first[1] & 0x7F
    if length == 126:
        length = int.from_bytes(_recv_exact(sock, 2), "big")
    return _recv_exact(sock, length)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        assert more, "connection closed"
        data += more
    return data
