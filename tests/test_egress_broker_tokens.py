"""The credential broker swaps bearer tokens and passwords on their own hosts only: a
loopback HTTPS API (its certificate from a test CA) gets the real token when the client,
trusting only the sandbox bundle (system CAs + the per-install CA), sent the placeholder;
other hosts get the placeholder (TLS not intercepted) or a 403 from the broker."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from egress_support import agent_proxy, recording_api, trust_broker
from iac_kernel.egress import broker

trustme = pytest.importorskip("trustme")
API_TOKEN = "tfc7Hq2LmXw9Rb.atlasv1.Kd83jfLq0PzW6nYtR5vBc2MxAe9GhUo1IsZ4"
GIT_PASSWORD = "gitPassw0rd-9f8e7d6c5b4a"
#: The CA of the loopback servers (the proxy trusts it upstream; clients trust our CA).
_TEST_CA = trustme.CA()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("token-broker")
    ca = _TEST_CA
    server_cert = ca.issue_cert("localhost", "127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_cert.configure_cert(context)
    test_ca = root / "test-ca.pem"
    ca.cert_pem.write_to_path(str(test_ca))
    with recording_api(context) as https_api, recording_api() as http_api:
        tls_port, plain_port = https_api.server_address[1], http_api.server_address[1]
        home = root / "home"
        home.mkdir()
        # git: a password for 127.0.0.1 on the HTTPS port (so that host is intercepted)
        # and one for localhost on the plain port
        (home / ".git-credentials").write_text(
            f"https://bob:other-{GIT_PASSWORD}@127.0.0.1:{tls_port}\n"
            f"http://bob:{GIT_PASSWORD}@localhost:{plain_port}\n"
        )
        made = broker.prepare({"TF_TOKEN_localhost": API_TOKEN}, home=home, folder=root / "p")
        trust = trust_broker(made, root / "public" / "bundle.pem")
        options = {"ssl_verify_upstream_trusted_ca": str(test_ca)}
        with agent_proxy(made, options=options) as port:
            yield {
                "made": made,
                "trust": trust,
                "port": port,
                "https": https_api,
                "http": http_api,
                "test_ca": test_ca,
            }


def _curl(world: dict, *args: str, trust: bool = True) -> tuple[str, str]:
    """(status, body) of curl through the broker, with the sandbox's CA variables."""
    proxy = f"http://127.0.0.1:{world['port']}"
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    env.update({"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy})
    env["http_proxy"] = proxy
    if trust:
        env.update(world["trust"])
    done = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    body, _, status = done.stdout.rpartition("\n")
    assert status != "000", done.stderr
    return status, body


def _auth_seen(api) -> str:
    return api.seen[-1][2].get("Authorization", "")


def test_bearer_token_is_swapped_on_its_host_over_https(world: dict):
    fake = world["made"].swaps[API_TOKEN]
    port = world["https"].server_address[1]
    status, body = _curl(
        world, "-H", f"Authorization: Bearer {fake}", f"https://localhost:{port}/v2/x"
    )
    assert (status, body) == ("200", "ok\n")
    assert _auth_seen(world["https"]) == f"Bearer {API_TOKEN}"
    # in the URL (a token as a query parameter) too
    status, _ = _curl(world, f"https://localhost:{port}/v2/y?token={fake}")
    assert status == "200" and world["https"].seen[-1][1] == f"/v2/y?token={API_TOKEN}"


def test_the_bundle_trusts_our_ca_and_the_system(world: dict):
    bundle = Path(world["trust"]["SSL_CERT_FILE"])
    assert set(world["trust"]) >= {"SSL_CERT_FILE", "AWS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}
    text = bundle.read_text()
    ours = (world["made"].confdir / "mitmproxy-ca-cert.pem").read_text()
    assert ours in text and text.count("BEGIN CERTIFICATE") > 10
    assert "PRIVATE KEY" not in text
    # the CA's key stays in the private confdir
    assert oct(world["made"].confdir.stat().st_mode & 0o777) == "0o700"


def test_a_host_without_brokered_credentials_is_tunnelled_with_the_placeholder(world: dict):
    """localhost's token sent to 127.0.0.1:another port is not intercepted (its TLS
    goes straight through: the client sees the server's own certificate) and the
    server gets the worthless placeholder, never the token."""
    fake = world["made"].swaps[API_TOKEN]
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with recording_api(context) as other, ca.cert_pem.tempfile() as other_ca:
        port = other.server_address[1]
        status, _ = _curl(
            world,
            "--cacert",
            other_ca,
            "-H",
            f"Authorization: Bearer {fake}",
            f"https://127.0.0.1:{port}/",
            trust=False,
        )
        assert status == "200" and _auth_seen(other) == f"Bearer {fake}"


@pytest.mark.parametrize(
    "route",
    [
        "https-other-intercepted-host",
        "http-other-host",
        "http-host-header-spoofed",
        "basic-auth-other-host",
        "custom-header-other-host",
        "cookie-other-host",
        "query-other-host",
        "path-other-host",
        "userinfo-other-host",
    ],
)
def test_a_placeholder_to_a_host_it_does_not_belong_to_is_refused(world: dict, route: str):
    fake, git_fake = world["made"].swaps[API_TOKEN], world["made"].swaps[GIT_PASSWORD]
    tls_port = world["https"].server_address[1]
    plain_port = world["http"].server_address[1]
    seen = len(world["https"].seen) + len(world["http"].seen)
    bearer = ["-H", f"Authorization: Bearer {fake}"]
    args = {
        # 127.0.0.1 on the TLS port is intercepted (a git password belongs there)
        "https-other-intercepted-host": [*bearer, f"https://127.0.0.1:{tls_port}/"],
        "http-other-host": [*bearer, f"http://127.0.0.1:{plain_port}/"],
        "http-host-header-spoofed": [
            *bearer,
            "-H",
            f"Host: localhost:{plain_port}",
            f"http://127.0.0.1:{plain_port}/",
        ],
        "basic-auth-other-host": ["-u", f"bob:{git_fake}", f"http://127.0.0.1:{plain_port}/"],
        "custom-header-other-host": [
            "-H",
            f"PRIVATE-TOKEN: {fake}",
            f"http://127.0.0.1:{plain_port}/",
        ],
        "cookie-other-host": ["-b", f"session={fake}", f"https://127.0.0.1:{tls_port}/"],
        "query-other-host": [f"http://127.0.0.1:{plain_port}/?access_token={fake}"],
        "path-other-host": [f"https://127.0.0.1:{tls_port}/t/{fake}/x"],
        "userinfo-other-host": [f"http://bob:{git_fake}@127.0.0.1:{plain_port}/"],
    }[route]
    status, body = _curl(world, *args)
    assert status == "403" and "credential broker" in body
    assert len(world["https"].seen) + len(world["http"].seen) == seen  # nothing arrived


@pytest.mark.parametrize(
    "header", ["PRIVATE-TOKEN: {}", "X-Api-Key: {}", "Cookie: a=1; session={}; b=2"]
)
def test_a_placeholder_in_any_header_is_swapped_on_its_host(world: dict, header: str):
    fake = world["made"].swaps[API_TOKEN]
    port = world["https"].server_address[1]
    status, _ = _curl(world, "-H", header.format(fake), f"https://localhost:{port}/")
    name, _, value = header.format(API_TOKEN).partition(": ")
    assert status == "200" and world["https"].seen[-1][2].get(name) == value


def test_basic_auth_password_is_swapped_on_its_host(world: dict):
    git_fake = world["made"].swaps[GIT_PASSWORD]
    port = world["http"].server_address[1]
    status, _ = _curl(world, "-u", f"bob:{git_fake}", f"http://localhost:{port}/repo.git")
    assert status == "200"
    expected = base64.b64encode(f"bob:{GIT_PASSWORD}".encode()).decode()
    assert _auth_seen(world["http"]) == f"Basic {expected}"


def test_a_tunnel_to_another_host_named_as_the_bound_one_is_refused(world: dict):
    """CONNECT to a host the token does not belong to, with the bound host as TLS server
    name and ``Host`` header (a server that even has a valid certificate for it): the
    broker judges the connection's target, so the token is not sent there."""
    import socket

    fake = world["made"].swaps[API_TOKEN]
    with recording_api(_context_for("localhost", "127.0.0.1")) as evil:
        target = f"127.0.0.1:{evil.server_address[1]}"
        with socket.create_connection(("127.0.0.1", world["port"]), timeout=30) as raw:
            raw.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            assert raw.recv(4096).startswith(b"HTTP/1.1 200")
            client = ssl.create_default_context(cafile=world["trust"]["SSL_CERT_FILE"])
            with client.wrap_socket(raw, server_hostname="localhost") as tls:
                request = (
                    f"GET / HTTP/1.1\r\nHost: localhost:{evil.server_address[1]}\r\n"
                    f"Authorization: Bearer {fake}\r\nConnection: close\r\n\r\n"
                )
                tls.sendall(request.encode())
                answer = tls.recv(4096)
        assert answer.startswith(b"HTTP/1.1 403") and evil.seen == []


def _context_for(*names: str) -> ssl.SSLContext:
    """A server context with a certificate for ``names`` from the proxy-trusted test CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _TEST_CA.issue_cert(*names).configure_cert(context)
    return context


def test_the_addon_reads_the_table_again_when_the_agent_rewrites_it(tmp_path: Path):
    """A credential found after the proxy started is brokered without a restart."""
    home = tmp_path / "home"
    home.mkdir()
    made = broker.prepare({}, home=home, folder=tmp_path / "p")
    with recording_api() as api, agent_proxy(made) as port:
        url = f"http://localhost:{api.server_address[1]}/"
        env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
        env["http_proxy"] = f"http://127.0.0.1:{port}"
        again = broker.prepare({"TF_TOKEN_localhost": API_TOKEN}, home=home, folder=tmp_path / "p")
        fake = again.swaps[API_TOKEN]
        subprocess.run(
            ["curl", "-sS", "-H", f"Authorization: Bearer {fake}", url],
            env=env,
            capture_output=True,
            timeout=60,
            check=True,
        )
        assert _auth_seen(api) == f"Bearer {API_TOKEN}"
