"""The interception CA: made once per install, trusted inside sandboxes only.

mitmproxy keeps its CA (key and certificate) in its ``confdir``; ours lives in the
agent's private folder (hidden from every sandbox), never in ``~/.mitmproxy``. Sandboxes
trust it through a bundle, the system's CAs plus ours, named by the variables every
common client reads (:func:`trust_env`); the host's trust store is never changed. The
bundle belongs to one agent process (written in its proxy's private folder) and is linked
into each call's folder, which its sandbox mounts read-only (:func:`link_bundle`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import ssl
import subprocess
from pathlib import Path

from iac_kernel.egress.environment import ensure_environment

#: The files mitmproxy keeps in its confdir (basename ``mitmproxy``).
CA_KEY_AND_CERT = "mitmproxy-ca.pem"
CA_CERT = "mitmproxy-ca-cert.pem"
#: The bundle's name in the proxy's private folder and in each call's folder.
BUNDLE_NAME = "ca-bundle.pem"
#: Variables naming a CA bundle: OpenSSL, Python (requests, botocore), Node, git, curl.
TRUST_VARIABLES = (
    "SSL_CERT_FILE",
    "AWS_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
)
_MAKE_CA = (
    "import sys\nfrom mitmproxy.certs import CertStore\n"
    "CertStore.from_store(sys.argv[1], 'mitmproxy', 2048)\n"
)


def ensure_ca(confdir: Path) -> Path:
    """Make the CA in ``confdir`` (mode 0700) unless it exists; return its certificate.
    Agents of one user share it: one makes it, under a lock, while the others wait."""
    confdir.mkdir(parents=True, exist_ok=True)
    os.chmod(confdir, 0o700)
    cert = confdir / CA_CERT
    with open(confdir / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cert.is_file() or not (confdir / CA_KEY_AND_CERT).is_file():
            python = ensure_environment()
            subprocess.run([str(python), "-c", _MAKE_CA, str(confdir)], check=True, timeout=120)
        for name in os.listdir(confdir):
            os.chmod(confdir / name, 0o600)
    return cert


def system_cas() -> str:
    """The system's CA certificates (PEM), or ``""`` when none are found."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/cert.pem"):
        if candidate and os.path.isfile(candidate):
            return Path(candidate).read_text()
    return ""


def write_bundle(ca_cert: Path, dest: Path) -> Path:
    """Write the sandbox's bundle (system CAs + ours) to ``dest`` (readable by all: it
    holds certificates only) and return it."""
    system = system_cas()
    text = system + ("" if not system or system.endswith("\n") else "\n") + ca_cert.read_text()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return dest


def link_bundle(bundle: Path, dest: Path) -> Path:
    """Put ``bundle`` at ``dest`` (a hard link, or a copy across file systems)."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(bundle, tmp)
    except OSError:
        shutil.copyfile(bundle, tmp)
        os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return dest


def trust_env(bundle: Path) -> dict[str, str]:
    """The variables that make a sandbox's clients trust ``bundle``."""
    return {name: str(bundle) for name in TRUST_VARIABLES}
