"""A secret sent in a request body (an OAuth client secret: ``ARM_CLIENT_SECRET``,
``AZURE_CLIENT_SECRET`` to the identity host) is brokered too: guarded programs hold a
placeholder; the proxy swaps it in the named form or JSON field, on its host only. The
tokens it is exchanged for stay with the proxy: the run gets placeholders for them."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

import pytest

from egress_support import Answers, agent_proxy
from iac_kernel.egress import broker, credentials
from iac_kernel.egress.decide import GuardedRun

SECRET = "Azure~Client.Secret_0123456789abcdefXYZ"


ACCESS = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJhcm0ifQ.c2lnbmF0dXJl-real"
REFRESH = "0.ARefreshTokenRealValue_0123456789abcdefghijklmnop"


class _Bodies(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(self.rfile.read(length))  # type: ignore[attr-defined]
        answer = b"ok\n"
        if self.path.endswith("/token"):
            tokens = {"token_type": "Bearer", "access_token": ACCESS, "refresh_token": REFRESH}
            answer = json.dumps({**tokens, "expires_in": 3599}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        self.server.auths.append(self.headers.get("Authorization", ""))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def world(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bodies)
    server.bodies = []  # type: ignore[attr-defined]
    server.auths = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    # the identity host, here: this loopback server under the name localhost
    host = f"localhost:{port}"
    identity = credentials.Identity(host, ("ARM_CLIENT_SECRET",), (host,))
    monkeypatch.setitem(credentials.BODY_VARIABLES, "ARM_CLIENT_SECRET", identity)
    home = tmp_path / "home"
    home.mkdir()
    made = broker.prepare({"ARM_CLIENT_SECRET": SECRET}, home=home, folder=tmp_path / "p")
    try:
        # a run that started unasked: a token exchange is no change (nothing is asked)
        plan = GuardedRun("terraform", ("terraform", "plan"), approved=False)
        with agent_proxy(made, run=plan, answers=Answers(operation_answer=False)) as proxy:
            yield {"made": made, "port": port, "proxy": proxy, "server": server}
    finally:
        server.shutdown()


def _post(world: dict, host: str, data: bytes, kind: str, path: str = "/t/oauth2/v2.0/token"):
    status, _ = _send(world, host, path, data, {"Content-Type": kind})
    return status


def _send(world: dict, host: str, path: str, data: bytes | None, headers: dict) -> tuple:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{world['proxy']}"})
    )
    url = f"http://{host}:{world['port']}{path}"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with opener.open(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_tokens_it_is_exchanged_for_stay_with_the_proxy(world: dict):
    fake = world["made"].swaps[SECRET]
    form = urlencode({"grant_type": "client_credentials", "client_secret": fake}).encode()
    kind = {"Content-Type": "application/x-www-form-urlencoded"}
    status, body = _send(world, "localhost", "/t/oauth2/v2.0/token", form, kind)
    assert status == 200, body
    tokens = json.loads(body)
    assert ACCESS not in body.decode() and REFRESH not in body.decode()
    assert tokens["expires_in"] == 3599 and len(tokens["access_token"]) == len(ACCESS)
    # the placeholder access token works on the hosts the tokens are for
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert _send(world, "localhost", "/subscriptions", None, bearer)[0] == 200
    assert world["server"].auths == [f"Bearer {ACCESS}"]
    # and the refresh token goes back in a later exchange's body as the real one
    again = urlencode({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]})
    assert _send(world, "localhost", "/t/oauth2/v2.0/token", again.encode(), kind)[0] == 200
    assert urlencode({"refresh_token": REFRESH}) in world["server"].bodies[-1].decode()


def test_the_secret_is_swapped_in_its_form_field_on_its_host(world: dict):
    fake = world["made"].swaps[SECRET]
    assert fake != SECRET
    form = urlencode(
        {"grant_type": "client_credentials", "client_id": "app", "client_secret": fake}
    )
    assert _post(world, "localhost", form.encode(), "application/x-www-form-urlencoded") == 200
    sent = world["server"].bodies[-1].decode()
    assert urlencode({"client_secret": SECRET}) in sent and fake not in sent


def test_the_secret_is_swapped_in_a_json_field(world: dict):
    fake = world["made"].swaps[SECRET]
    body = json.dumps({"client_secret": fake, "note": "x"}).encode()
    assert _post(world, "localhost", body, "application/json") == 200
    assert json.loads(world["server"].bodies[-1]) == {"client_secret": SECRET, "note": "x"}


def test_another_field_or_another_host_never_gets_it(world: dict):
    fake = world["made"].swaps[SECRET]
    form = urlencode({"comment": fake}).encode()
    assert _post(world, "localhost", form, "application/x-www-form-urlencoded") == 200
    assert SECRET not in world["server"].bodies[-1].decode()
    before = len(world["server"].bodies)
    other = urlencode({"client_secret": fake}).encode()
    assert _post(world, "127.0.0.1", other, "application/x-www-form-urlencoded") == 403
    assert len(world["server"].bodies) == before
