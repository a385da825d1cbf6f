"""The credential broker, agent side: placeholders for sandboxes, the real values for
the proxy.

:func:`prepare` finds the brokerable credentials (:mod:`.credentials`), gives each a
placeholder of the same shape (:mod:`.placeholders`) and writes, in the agent's private
folder (``~/.iac-code/egress``, hidden from every sandbox, mode 0700):

* ``broker.json`` (0600): placeholder -> real value and the hosts it belongs to, read by
  the proxy's addon (``addon_broker.py``, loaded by ``mitmdump``);
* ``placeholders/``: the user's credential files with every real value replaced, mounted
  over the real ones in a sandbox (``~/.aws``, ``~/.git-credentials``, ``~/.netrc``,
  ``~/.terraform.d/credentials.tfrc.json``).

The result (:class:`Brokered`) gives a sandbox its environment (:meth:`Brokered.env`),
its mounts (:attr:`Brokered.mounts`) and the proxy its options (:meth:`Brokered.mitmdump_args`).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from iac_kernel.egress import ca, credentials
from iac_kernel.egress.credentials import AWS_HOSTS, Credential
from iac_kernel.egress.placeholders import placeholder_for

#: The mitmdump script of the broker.
ADDON = Path(__file__).with_name("addon_broker.py")
#: The option the addon reads the table from.
TABLE_OPTION = "iac_broker_file"
#: Credential files that get placeholder copies: path under home -> parser.
FILES = {
    ".aws/credentials": lambda text, hosts: credentials.aws_profiles(text, hosts),
    ".aws/config": lambda text, hosts: credentials.aws_profiles(text, hosts, config=True),
    ".git-credentials": lambda text, hosts: credentials.git_credentials(text),
    ".netrc": lambda text, hosts: credentials.netrc(text),
    ".terraform.d/credentials.tfrc.json": (
        lambda text, hosts: credentials.terraform_credentials(text)
    ),
}
#: A real value shorter than this is replaced only where it is a whole variable's value.
_SUBSTRING_MIN = 8


def private_dir() -> Path:
    """The broker's private folder (``$IAC_KERNEL_EGRESS_DIR``, else ``~/.iac-code/egress``)."""
    env = os.environ.get("IAC_KERNEL_EGRESS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".iac-code" / "egress"


def _install_key(folder: Path) -> bytes:
    path = folder / "placeholder.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        key = secrets.token_bytes(32)
        _write_private(path, key.hex())
        return key


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


@dataclass
class Brokered:
    """What :func:`prepare` made: the credentials with their placeholders, the files."""

    folder: Path
    #: real value -> placeholder, every brokered value.
    swaps: dict[str, str]
    entries: list[dict] = field(default_factory=list)
    #: host path of a real credential file or folder -> its placeholder copy.
    mounts: dict[Path, Path] = field(default_factory=dict)

    @property
    def table(self) -> Path:
        return self.folder / "broker.json"

    @property
    def confdir(self) -> Path:
        """mitmproxy's confdir (the interception CA's key lives there)."""
        return self.folder / "mitmproxy"

    def substitute(self, text: str) -> str:
        """``text`` with every brokered real value (raw and URL-quoted) replaced."""
        for real, fake in sorted(self.swaps.items(), key=lambda kv: -len(kv[0])):
            if len(real) >= _SUBSTRING_MIN or text == real:
                text = text.replace(real, fake)
                if quote(real, safe="") != real:
                    text = text.replace(quote(real, safe=""), quote(fake, safe=""))
        return text

    def env(self, secret_env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """(the variables of ``secret_env`` that held a brokered value, with placeholders
        instead; the others, which cannot be brokered)."""
        brokered, other = {}, {}
        for name, value in secret_env.items():
            swapped = self.substitute(value)
            (brokered if swapped != value else other)[name] = swapped
        return brokered, other

    def mitmdump_args(self) -> list[str]:
        """The options that load the broker into ``mitmdump`` with our CA."""
        return [
            "-s",
            str(ADDON),
            "--set",
            f"{TABLE_OPTION}={self.table}",
            "--set",
            f"confdir={self.confdir}",
        ]

    def ca_bundle(self, dest: Path) -> dict[str, str]:
        """Make the CA if needed, write the sandbox bundle to ``dest`` (a path a sandbox
        can read) and return the variables that make clients trust it."""
        return ca.trust_env(ca.write_bundle(ca.ensure_ca(self.confdir), dest))


#: The active broker and, when :func:`current` prepared it, what it was prepared from.
_ACTIVE: list[tuple[Brokered, tuple | None]] = []


def activate(made: Brokered | None) -> None:
    """Make ``made`` the broker of every guarded call from now on (None: no broker)."""
    _ACTIVE[:] = [(made, None)] if made is not None else []


def active() -> Brokered | None:
    """The active broker (:func:`activate`), or None."""
    return _ACTIVE[0][0] if _ACTIVE else None


def current() -> Brokered:
    """The active broker, prepared from this process's environment and home (and made
    active) on first use, and prepared again when they changed since (a key exported or
    a credentials file edited after the first call is brokered too): the egress proxy
    calls it when it starts, and restarts when the broker changed."""
    source = sources(os.environ)
    if not _ACTIVE or (_ACTIVE[0][1] is not None and _ACTIVE[0][1] != source):
        _ACTIVE[:] = [(prepare(os.environ), source)]
    return _ACTIVE[0][0]


def sources(env: Mapping[str, str]) -> tuple:
    """What :func:`prepare` reads: the brokerable variables of ``env``, the home folder
    and its credential files' identity (size, change time, inode)."""
    variables = tuple(
        sorted(
            (name, value)
            for name, value in env.items()
            if name in credentials.WATCHED_VARIABLES
            or name.startswith(("TF_TOKEN_", "AWS_ENDPOINT_URL"))
        )
    )
    home = Path(os.path.expanduser("~"))
    files = []
    for rel in FILES:
        try:
            st = (home / rel).stat()
        except OSError:
            files.append((rel, None))
        else:
            files.append((rel, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)))
    return (str(home), variables, tuple(files))


def prepare(
    env: Mapping[str, str],
    home: Path | None = None,
    folder: Path | None = None,
    aws_hosts: list[str] | None = None,
) -> Brokered:
    """Find the brokerable credentials of ``env`` and ``home``'s files; write the table
    and the placeholder files (see the module doc). ``aws_hosts`` adds hosts AWS keys
    belong to besides AWS's own and ``AWS_ENDPOINT_URL*``."""
    home = Path(os.path.expanduser("~")) if home is None else home
    folder = private_dir() if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    key = _install_key(folder)
    hosts = [*AWS_HOSTS, *credentials.endpoint_hosts(env), *(aws_hosts or [])]
    found = credentials.from_env(env, hosts)
    texts: dict[str, str] = {}
    for rel, parse in FILES.items():
        path = home / rel
        if path.is_file():
            try:
                texts[rel] = path.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            found += parse(texts[rel], hosts)
    made = Brokered(folder, {})
    for cred in found:
        made.entries.append(_entry(cred, key, made.swaps))
    _write_private(made.table, json.dumps({"credentials": made.entries}, indent=1))
    _placeholder_files(made, home, texts)
    return made


def _entry(cred: Credential, key: bytes, swaps: dict[str, str]) -> dict:
    fakes = {}
    for name, real in cred.values.items():
        fakes[name] = swaps.setdefault(real, placeholder_for(real, key, name))
    return {
        "kind": cred.kind,
        "name": cred.name,
        "hosts": cred.hosts,
        "real": cred.values,
        "placeholder": fakes,
    }


def _placeholder_files(made: Brokered, home: Path, texts: dict[str, str]) -> None:
    """Placeholder copies of the credential files (``~/.aws`` as a folder holding only
    ``credentials`` and ``config``: its caches hold live temporary credentials)."""
    root = made.folder / "placeholders"
    root.mkdir(exist_ok=True)
    for rel, text in texts.items():
        dest = root / rel
        _write_private(dest, made.substitute(text))
        os.chmod(dest, 0o644)
    aws = home / ".aws"
    if aws.is_dir():
        (root / ".aws").mkdir(parents=True, exist_ok=True)
        os.chmod(root / ".aws", 0o755)
        made.mounts[aws] = root / ".aws"
    for rel in texts:
        if not rel.startswith(".aws/"):
            made.mounts[home / rel] = root / rel
    os.chmod(root, 0o755)
    for parent in {(root / rel).parent for rel in texts}:
        os.chmod(parent, 0o755)
