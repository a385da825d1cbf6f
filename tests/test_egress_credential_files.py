"""Issue 41, parts 3 and 4 (credential files): every credential file a guarded program can
read is a placeholder copy (swapped at the wire on the credential's own hosts) or hidden,
and the broker fails closed: a file it cannot parse in full, read as UTF-8, or whose copy
would still hold a real or secret-shaped value gets an EMPTY copy (the reason logged),
never the file itself. New stores: kubeconfig tokens, docker (and helm registry) auths,
``~/.vault-token``, Pulumi access tokens, gh's hosts.yml, helm repositories, terraform's
CLI configuration, ``.databrickscfg``; stores guarded programs do not need are empty."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from iac_kernel.egress import broker, credentials, formats, stores
from iac_kernel.egress.formats import Context, Unparsable
from iac_kernel.guard.sandbox import hidden

AWS_ID = "AKIAZ7QRSTUVWXY23456"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE"
KUBE_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLWJ5dGVz"
KUBE_PASSWORD = "kubePassw0rd-77aa88bb"
KUBE_FILE_TOKEN = "filetoken-0f1e2d3c4b5a69788796"
DOCKER_PASSWORD = "dockerPassw0rd-1234abcd"
DOCKER_PAT = "dckr_pat_Zx9Qm2Lp7Rt4Vb8Nc3Kd6Hf1Gj5"
IDENTITY_TOKEN = "idtok-5e4d3c2b1a0f9e8d7c6b5a49"
VAULT_TOKEN = "hvs.CAESIJ7xQm2Lp7Rt4Vb8Nc3Kd6Hf1Gj5Ws0Ya"
PULUMI_TOKEN = "pul-0123456789abcdef0123456789abcdef01234567"
GH_OAUTH = "gho_Ab3dEf6hIj9lMn2pQr5tUv8xYz1Bc4De7Fg0"
HELM_PASSWORD = "helmRepoPassw0rd-4242"
TFRC_TOKEN = "ab12CD34ef56GH.atlasv1.zyXWvu98TSrq76PONmlk54JIhgfe32DCba10"
DATABRICKS_TOKEN = "dapi0123456789abcdef0123456789abcdef"
NETRC_PASSWORD = "netrcPassw0rd-5566"
GIT_PASSWORD = "gitPassw0rd-9f8e7d6c"
CLIENT_KEY = base64.b64encode(
    b"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"
)
CA_DATA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n")

KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://k8s.example.com:6443
    certificate-authority-data: {CA_DATA.decode()}
- name: dev
  cluster:
    server: http://127.0.0.1:8001
users:
- name: token-user
  user:
    token: {KUBE_TOKEN}
- name: basic-user
  user:
    username: admin
    password: "{KUBE_PASSWORD}"
- name: cert-user
  user:
    client-certificate-data: {CA_DATA.decode()}
    client-key-data: {CLIENT_KEY.decode()}
- name: file-user
  user:
    tokenFile: token
- name: lonely
  user:
    token: lonely-token-0011223344556677
contexts:
- name: prod
  context: {{cluster: prod, user: token-user}}
- name: dev
  context: {{cluster: dev, user: basic-user}}
- name: certs
  context: {{cluster: dev, user: cert-user}}
- name: files
  context: {{cluster: dev, user: file-user}}
current-context: prod
"""


def _docker_config() -> str:
    auth = base64.b64encode(f"bob:{DOCKER_PASSWORD}".encode()).decode()
    pat = base64.b64encode(f"bob:{DOCKER_PAT}".encode()).decode()
    return json.dumps(
        {
            "auths": {
                "https://index.docker.io/v1/": {"auth": auth},
                "ghcr.io": {"auth": pat, "identitytoken": IDENTITY_TOKEN},
            },
            "credsStore": "desktop",
        }
    )


#: home-relative path -> real text, one file of every brokered store.
FILES = {
    ".aws/credentials": (
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"
    ),
    ".kube/config": KUBECONFIG,
    ".kube/token": KUBE_FILE_TOKEN + "\n",
    ".docker/config.json": _docker_config(),
    ".vault-token": VAULT_TOKEN + "\n",
    ".pulumi/credentials.json": json.dumps(
        {
            "current": "https://api.pulumi.com",
            "accessTokens": {"https://api.pulumi.com": PULUMI_TOKEN},
            "accounts": {"https://api.pulumi.com": {"accessToken": PULUMI_TOKEN, "username": "b"}},
        }
    ),
    ".config/gh/hosts.yml": f"github.com:\n  oauth_token: {GH_OAUTH}\n  user: bob\n",
    ".config/helm/repositories.yaml": (
        "apiVersion: ''\nrepositories:\n- name: private\n  url: https://charts.example.com/x\n"
        f"  username: bob\n  password: {HELM_PASSWORD}\n"
    ),
    ".terraformrc": (
        f'plugin_cache_dir = "/var/cache/tf"\ncredentials "tfe.example.com" {{\n'
        f'  token = "{TFRC_TOKEN}"\n}}\n'
    ),
    ".databrickscfg": (
        f"[DEFAULT]\nhost = https://adb-1.azuredatabricks.net\ntoken = {DATABRICKS_TOKEN}\n"
    ),
    ".netrc": f"machine api.example.com login bob password {NETRC_PASSWORD}\n",
    ".git-credentials": f"https://bob:{GIT_PASSWORD}@git.example.com\n",
}
REALS = [
    AWS_ID,
    AWS_SECRET,
    KUBE_TOKEN,
    KUBE_PASSWORD,
    KUBE_FILE_TOKEN,
    DOCKER_PASSWORD,
    DOCKER_PAT,
    IDENTITY_TOKEN,
    VAULT_TOKEN,
    PULUMI_TOKEN,
    GH_OAUTH,
    HELM_PASSWORD,
    TFRC_TOKEN,
    DATABRICKS_TOKEN,
    NETRC_PASSWORD,
    GIT_PASSWORD,
]
ENV = {"VAULT_ADDR": "https://vault.example.com:8200"}


def _home(tmp_path: Path, files: dict[str, str] = FILES) -> Path:
    home = tmp_path / "home"
    for rel, text in files.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return home


def _prepare(home: Path, env: dict[str, str] | None = None) -> broker.Brokered:
    return broker.prepare(ENV if env is None else env, home=home, folder=home.parent / "private")


def _copy_of(made: broker.Brokered, path: Path) -> str:
    """What a guarded program reads at ``path`` (through a folder copy too)."""
    for real, copy in made.mounts.items():
        if real == path:
            return copy.read_text()
        if real in path.parents:
            target = copy / path.relative_to(real)
            return target.read_text() if target.exists() else "<absent>"
    raise AssertionError(f"{path} is given to guarded programs as itself")


def _hosts(made: broker.Brokered, real: str) -> list[str]:
    return sorted({h for e in made.entries if real in e["real"].values() for h in e["hosts"]})


def _all_copies(made: broker.Brokered) -> str:
    texts = []
    for copy in made.mounts.values():
        files = [copy] if copy.is_file() else [p for p in copy.rglob("*") if p.is_file()]
        texts += [p.read_text(errors="replace") for p in files]
    return "\n".join(texts)


def _leaks(text: str, reals: list[str] = REALS) -> list[str]:
    """The real values ``text`` holds, raw, URL-quoted or base64 (with a user)."""
    found = []
    for real in reals:
        forms = {real, base64.b64encode(real.encode()).decode().rstrip("=")}
        forms.add(base64.b64encode(f"bob:{real}".encode()).decode().rstrip("="))
        if any(form in text for form in forms):
            found.append(real)
    return found


# -- every store: placeholders, bound to their own hosts ------------------------------


def test_every_store_gets_a_placeholder_copy_bound_to_its_own_hosts(tmp_path: Path):
    home = _home(tmp_path)
    made = _prepare(home)
    assert made.refused == {}, made.refused
    assert set(REALS) <= set(made.swaps)
    copies = _all_copies(made)
    assert _leaks(copies) == []
    for real in REALS:
        if real not in (DOCKER_PASSWORD, DOCKER_PAT):  # inside base64 user:password
            assert made.swaps[real] in copies, real
    docker = json.loads(_copy_of(made, home / ".docker" / "config.json"))
    hub = base64.b64decode(docker["auths"]["https://index.docker.io/v1/"]["auth"]).decode()
    assert hub == f"bob:{made.swaps[DOCKER_PASSWORD]}"
    assert docker["credsStore"] == "desktop"  # a program, not a secret: kept
    # hosts: each credential on its own hosts only
    assert _hosts(made, KUBE_TOKEN) == ["k8s.example.com:6443"]
    assert _hosts(made, KUBE_PASSWORD) == ["127.0.0.1:8001"]
    assert _hosts(made, KUBE_FILE_TOKEN) == ["127.0.0.1:8001"]
    assert _hosts(made, "lonely-token-0011223344556677") == []  # no context: never swapped
    assert _hosts(made, DOCKER_PASSWORD) == sorted(formats.DOCKER_HUB_HOSTS)
    assert _hosts(made, DOCKER_PAT) == ["ghcr.io:443"]
    assert _hosts(made, VAULT_TOKEN) == ["vault.example.com:8200"]
    assert _hosts(made, PULUMI_TOKEN) == ["api.pulumi.com:443"]
    assert _hosts(made, GH_OAUTH) == sorted(credentials.GITHUB_HOSTS)
    assert _hosts(made, HELM_PASSWORD) == ["charts.example.com:443"]
    assert _hosts(made, TFRC_TOKEN) == ["tfe.example.com"]
    assert _hosts(made, DATABRICKS_TOKEN) == ["adb-1.azuredatabricks.net:443"]
    identity = next(e for e in made.entries if IDENTITY_TOKEN in e["real"].values())
    assert identity["body"] == ["refresh_token"]  # an OAuth refresh token goes in a body
    # the table the proxy reads has the same entries
    assert json.loads(made.table.read_text())["credentials"] == made.entries


def test_kubeconfig_copy_keeps_client_certificates_and_drops_an_intercepted_ca(tmp_path: Path):
    home = _home(tmp_path)
    made = _prepare(home)
    import yaml

    copy = yaml.safe_load(_copy_of(made, home / ".kube" / "config"))
    clusters = {c["name"]: c["cluster"] for c in copy["clusters"]}
    users = {u["name"]: u["user"] for u in copy["users"]}
    # TLS client authentication is end to end: certificates and keys stay (documented)
    assert users["cert-user"]["client-key-data"] == CLIENT_KEY.decode()
    # the proxy intercepts k8s.example.com:6443: the client trusts the interception CA
    # (SSL_CERT_FILE); the proxy verifies the server with the public CAs
    assert "certificate-authority-data" not in clusters["prod"]
    assert users["token-user"]["token"] == made.swaps[KUBE_TOKEN]
    assert users["file-user"]["tokenFile"] == "token"
    assert _copy_of(made, home / ".kube" / "token").strip() == made.swaps[KUBE_FILE_TOKEN]
    assert copy["current-context"] == "prod"


def test_store_paths_follow_the_variables_that_move_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    home = _home(tmp_path, {})
    elsewhere = tmp_path / "elsewhere"
    files = {
        "kube/a.yaml": KUBECONFIG,
        "dockercfg/config.json": _docker_config(),
        "pulumi/credentials.json": FILES[".pulumi/credentials.json"],
        "aws/creds": FILES[".aws/credentials"],
        "netrc": FILES[".netrc"],
        "gh/hosts.yml": FILES[".config/gh/hosts.yml"],
    }
    for rel, text in files.items():
        (elsewhere / rel).parent.mkdir(parents=True, exist_ok=True)
        (elsewhere / rel).write_text(text)
    (elsewhere / "kube" / "token").write_text(KUBE_FILE_TOKEN)
    env = {
        **ENV,
        "KUBECONFIG": f"{elsewhere}/kube/missing.yaml{os.pathsep}{elsewhere}/kube/a.yaml",
        "DOCKER_CONFIG": str(elsewhere / "dockercfg"),
        "PULUMI_HOME": str(elsewhere / "pulumi"),
        "AWS_SHARED_CREDENTIALS_FILE": str(elsewhere / "aws" / "creds"),
        "NETRC": str(elsewhere / "netrc"),
        "GH_CONFIG_DIR": str(elsewhere / "gh"),
    }
    made = _prepare(home, env)
    assert made.refused == {}
    for rel in files:
        text = _copy_of(made, elsewhere / rel)
        assert text and _leaks(text) == [], rel
    assert _copy_of(made, elsewhere / "kube" / "token").strip() == made.swaps[KUBE_FILE_TOKEN]
    # the shell loses all of them
    monkeypatch.setenv("HOME", str(home))
    shell = hidden.credential_paths(None, env)
    for rel in ("kube/a.yaml", "dockercfg", "pulumi/credentials.json", "aws/creds", "netrc", "gh"):
        assert elsewhere / rel in shell, rel
    # and the broker is prepared again when one of the variables changes
    assert broker.sources(env) != broker.sources({**env, "KUBECONFIG": str(elsewhere)})


# -- fail closed: every parser ---------------------------------------------------------

SECRET = "REALsecret-0123456789abcdef"
UNPARSABLE = {
    ".aws/credentials": [
        f"aws_secret_access_key = {SECRET}\n",  # no section
        f"[a]\naws_secret_access_key = {SECRET}\n[a]\nregion = x\n",  # duplicate section
        f"[a]\naws_secret_access_key = {SECRET}\nnot a key value line\n",
    ],
    ".netrc": [
        f'machine h login u password "{SECRET}\n',  # unclosed quote
        f"machine h login u password {SECRET} port 22\n",  # unknown keyword
        f"password {SECRET}\n",  # before any machine
        f"machine h login u password #{SECRET}\n",  # ambiguous comment
        f"machine h login u password {SECRET} login\n",  # keyword without a value
        f'machine h login u pass"word {SECRET}\n',
    ],
    ".git-credentials": [
        f"https://u:{SECRET}@h.example.com\nnot a url\n",
        f"# https://u:{SECRET}@h.example.com\n",
        f"https://u:{SECRET}@h.example.com:99999\n",
        f"u:{SECRET}@h.example.com\n",
    ],
    ".terraform.d/credentials.tfrc.json": [
        f'{{"credentials": {{"h": {{"token": "{SECRET}"}}}}',  # truncated
        f'{{"credentials": [{{"token": "{SECRET}"}}]}}',
        f'{{"credentials": {{"h": {{"token": ["{SECRET}"]}}}}}}',
    ],
    ".terraformrc": [f'credentials "h" {{\n  token = "{SECRET}"\n'],
    ".kube/config": [
        f"users:\n- name: u\n  user:\n    token: {SECRET}\n  bad: [\n",
        f"users: {{token: {SECRET}}}\n",
        f"users:\n- name: u\n  user:\n    token: {{value: {SECRET}}}\n",
        f"users: []\n---\nusers:\n- name: u\n  user: {{token: {SECRET}}}\n",
    ],
    ".docker/config.json": [
        json.dumps({"auths": {"r.example.com": {"auth": SECRET + "!!"}}}),
        json.dumps(
            {"auths": {"r.example.com": {"auth": base64.b64encode(SECRET.encode()).decode()}}}
        ),
        '{"auths": {"r.example.com": {"auth": "' + SECRET,
    ],
    ".vault-token": [f"{SECRET} {SECRET}\n"],
    ".pulumi/credentials.json": ['{"accessTokens": {"https://api.pulumi.com": "' + SECRET],
    ".config/gh/hosts.yml": [f"github.com:\n  oauth_token: {SECRET}\n  x: [\n"],
    ".config/helm/repositories.yaml": [f"repositories:\n  password: {SECRET}\n"],
    ".databrickscfg": [f"token = {SECRET}\n"],
}
CASES = [(rel, text) for rel, texts in UNPARSABLE.items() for text in texts]


@pytest.mark.parametrize(
    ("rel", "text"), CASES, ids=[f"{r}-{i}" for i, (r, _t) in enumerate(CASES)]
)
def test_an_unparsable_file_gets_an_empty_copy_and_the_reason_is_logged(
    tmp_path: Path, rel: str, text: str, caplog: pytest.LogCaptureFixture
):
    home = _home(tmp_path, {rel: text})
    with caplog.at_level(logging.WARNING, logger="iac_kernel.egress.broker"):
        made = _prepare(home)
    path = home / rel
    copy = _copy_of(made, path)
    assert SECRET not in copy and SECRET not in _all_copies(made)
    assert copy.strip() in ("", "{}"), copy
    assert path in made.refused
    assert any(
        str(path) in r.getMessage() and "empty copy" in r.getMessage() for r in caplog.records
    )
    assert SECRET not in caplog.text  # the reason never quotes the value


@pytest.mark.parametrize("rel", sorted({rel for rel, _t in CASES} | {".kube/extra"}))
def test_unreadable_files_fail_closed(tmp_path: Path, rel: str):
    """Not UTF-8, too large, a FIFO, a folder where a file belongs: an empty copy (or an
    empty folder), never the file; reading never blocks."""
    home = _home(tmp_path, {})
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"users: [] # \xff\xfe " + SECRET.encode() + b"\n")
    made = _prepare(home)
    assert "UTF-8" in made.refused[path] and SECRET not in _all_copies(made)
    path.write_text("x" * (formats.MAX_FILE + 1) + SECRET)
    made = _prepare(home)
    assert "larger" in made.refused[path] and _copy_of(made, path).strip() in ("", "{}")
    if rel == ".kube/extra":
        return  # beside the kubeconfigs, only files are read (a FIFO there is no store)
    path.unlink()
    os.mkfifo(path)
    done = threading.Event()

    def prepare() -> None:
        made_here.append(_prepare(home))
        done.set()

    made_here: list[broker.Brokered] = []
    threading.Thread(target=prepare, daemon=True).start()
    assert done.wait(30), "reading a FIFO credential file blocked"
    assert "not a regular file" in made_here[0].refused[path]
    assert _copy_of(made_here[0], path).strip() in ("", "{}")
    path.unlink()
    path.mkdir()
    (path / "inside").write_text(SECRET)
    made = _prepare(home)
    assert SECRET not in _all_copies(made)
    # a folder where the file belongs: an empty folder over it (a file cannot go there)
    assert "not a regular file" in made.refused[path]
    folder = next(m for m in made.mounts if m == path or m in path.parents)
    shown = made.mounts[folder] / path.relative_to(folder)
    assert shown.is_dir() and not shown.is_symlink() and not any(shown.iterdir())


def test_symlinked_files_are_read_through_and_mounted_where_they_are_named(tmp_path: Path):
    home = _home(tmp_path, {})
    target = tmp_path / "secrets" / "netrc"
    target.parent.mkdir()
    target.write_text(FILES[".netrc"])
    home.mkdir(exist_ok=True)
    (home / ".netrc").symlink_to(target)
    (home / ".vault-token").symlink_to(tmp_path / "nowhere")  # dangling: nothing to hide
    made = _prepare(home)
    copy = _copy_of(made, home / ".netrc")
    assert NETRC_PASSWORD not in copy and made.swaps[NETRC_PASSWORD] in copy
    assert home / ".vault-token" not in made.mounts
    # a symlink into the system's devices is never mounted over (TF_CLI_CONFIG_FILE=/dev/null)
    made = _prepare(home, {**ENV, "TF_CLI_CONFIG_FILE": "/dev/null"})
    assert not any(str(p).startswith("/dev") for p in made.guarded_mounts(ENV))


def test_netrc_default_and_unbound_machines_get_placeholders_that_are_never_swapped(
    tmp_path: Path,
):
    text = (
        "# a comment line\n"
        "machine api.example.com\n  login bob\n  password pw1\n"  # short: replaced too
        'machine "*.example.com" login x password "quoted pass word"\n'
        'machine spaced.example.com password "a long pass phrase with \\"spaces\\""\n'
        "macdef init\ncd /pub\nbinary\n\n"
        f"default login anonymous password {SECRET} account acct-0123456789\n"
    )
    home = _home(tmp_path, {".netrc": text})
    made = _prepare(home)
    assert made.refused == {}
    assert _hosts(made, "pw1") == ["api.example.com"]
    assert _hosts(made, "quoted pass word") == []  # a wildcard is no host
    assert _hosts(made, 'a long pass phrase with "spaces"') == ["spaced.example.com"]
    assert _hosts(made, SECRET) == [] and _hosts(made, "acct-0123456789") == []
    copy = _copy_of(made, home / ".netrc")
    # a placeholder with blanks or quotes is written quoted: one word again
    spaced = 'a long pass phrase with "spaces"'
    assert formats.netrc(copy).found[2].values == {"token": made.swaps[spaced]}
    assert spaced not in copy
    for real in ("pw1", "quoted pass word", SECRET, "acct-0123456789"):
        assert real not in copy and made.swaps[real] in copy
    assert "macdef init\ncd /pub" in copy  # ftp macros kept
    assert any("default" in note and "never swapped" in note for note in made.notes)


def test_aws_keys_outside_a_whole_pair_and_default_sections_are_brokered(tmp_path: Path):
    text = (
        f"[DEFAULT]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"
        f"[half]\naws_secret_access_key = {SECRET}\n"
        "[sso]\nsso_start_url = https://x.awsapps.com/start\nregion = eu-west-1\n"
        "credential_process = /usr/bin/get-creds --profile x\n"
    )
    home = _home(tmp_path, {".aws/credentials": text})
    made = _prepare(home)
    assert made.refused == {}
    copy = _copy_of(made, home / ".aws" / "credentials")
    assert _leaks(copy, [AWS_ID, AWS_SECRET, SECRET]) == []
    assert _hosts(made, AWS_ID) and _hosts(made, SECRET) == []
    assert "credential_process = /usr/bin/get-creds --profile x" in copy


def test_a_copy_that_would_keep_a_secret_is_written_empty(tmp_path: Path):
    """The rewrite replaces the values it knows; anything else secret in the file (an
    unknown field, the real value again in another form, a token from the environment)
    makes the whole copy empty."""
    github = "ghp_Zy9XwV8uT7sR6qP5oN4mL3kJ2iH1gF0eDcBa"
    cases = {
        # the same token, base64-encoded in a field the parser does not know
        ".terraform.d/credentials.tfrc.json": json.dumps(
            {
                "credentials": {"h.example.com": {"token": TFRC_TOKEN}},
                "note": base64.b64encode(TFRC_TOKEN.encode()).decode(),
            }
        ),
        # a secret-named field nobody brokers
        ".docker/config.json": json.dumps(
            {
                "auths": {},
                "proxies": {"default": {"httpsProxy": "x"}},
                "HttpHeaders": {"X-Auth-Token": "abcdef0123456789"},
            }
        ),
        # a secret-shaped value in an unknown place (not one the broker knows)
        ".pulumi/credentials.json": json.dumps({"current": "x", "other": {"v": GH_OAUTH}}),
        # a token of the environment pasted in a macro
        ".netrc": (
            f"machine h.example.com login u password p4ssw0rd-long\nmacdef x\necho {github}\n\n"
        ),
        # an URL-quoted real value in a kubeconfig extension
        ".kube/config": (
            f"users:\n- name: u\n  user:\n    token: {KUBE_TOKEN}\n"
            f"extensions:\n- name: x\n  extension: {{url: 'https://h/?t={KUBE_TOKEN}'}}\n"
        ),
    }
    home = _home(tmp_path, cases)
    made = _prepare(home, {**ENV, "GITHUB_TOKEN": github})
    for rel in cases:
        assert home / rel in made.refused, rel
        assert _copy_of(made, home / rel).strip() in ("", "{}"), rel
    reals = [TFRC_TOKEN, github, GH_OAUTH, KUBE_TOKEN, "abcdef0123456789"]
    assert _leaks(_all_copies(made), reals) == []


def test_a_known_real_value_anywhere_in_a_structured_file_is_swapped(tmp_path: Path):
    """JSON and YAML copies are rewritten by structure: a brokered value is replaced
    wherever it stands (here a token of the environment in an unknown field)."""
    github = "ghp_Zy9XwV8uT7sR6qP5oN4mL3kJ2iH1gF0eDcBa"
    home = _home(tmp_path, {".pulumi/credentials.json": json.dumps({"other": {"v": github}})})
    made = _prepare(home, {"GITHUB_TOKEN": github})
    assert made.refused == {}
    copy = json.loads(_copy_of(made, home / ".pulumi" / "credentials.json"))
    assert copy == {"other": {"v": made.swaps[github]}}


def test_vault_token_without_vault_addr_is_hidden(tmp_path: Path):
    home = _home(tmp_path, {".vault-token": VAULT_TOKEN})
    made = _prepare(home, {})
    assert "VAULT_ADDR" in made.refused[home / ".vault-token"]
    assert _copy_of(made, home / ".vault-token") == ""


def test_environment_tokens_bound_to_their_servers():
    env = {
        "VAULT_ADDR": "https://vault.example.com:8200",
        "VAULT_TOKEN": VAULT_TOKEN,
        "PULUMI_ACCESS_TOKEN": PULUMI_TOKEN,
        "NOMAD_TOKEN": "nomad-token-without-an-address",
        "HELM_REPO": f"https://bob:{HELM_PASSWORD}@charts.example.com/stable",
        "DATABASE_URL": f"postgres://u:{SECRET}@db:5432/app",
    }
    found = {c.name: c for c in credentials.from_env(env, list(credentials.AWS_HOSTS))}
    assert found["VAULT_TOKEN"].hosts == ["vault.example.com:8200"]
    assert found["PULUMI_ACCESS_TOKEN"].hosts == ["api.pulumi.com:443"]
    assert found["HELM_REPO URL password"].hosts == ["charts.example.com:443"]
    assert found["HELM_REPO URL password"].values == {"token": HELM_PASSWORD}
    assert "NOMAD_TOKEN" not in found  # no NOMAD_ADDR: no host, given as before
    assert not any(SECRET in c.values.values() for c in found.values())  # not HTTP


# -- what guarded programs get of each store ----------------------------------------------


def test_hidden_stores_are_empty_for_guarded_programs_and_given_ones_are_not_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    runtime = tmp_path / "run"
    (runtime / "keyring").mkdir(parents=True)
    (runtime / "agent").mkdir()
    (runtime / "agent" / "ssh.sock").write_text("")
    files = {
        ".pgpass": "h:5432:db:u:pgpass-secret\n",
        ".npmrc": "//registry.npmjs.org/:_authToken=npm_secret\n",
        ".bash_history": "export TOKEN=x\n",
        ".gnupg/private-keys-v1.d/k.key": "gpg",
        ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        ".config/gcloud/credentials.db": "sqlite",
    }
    home = _home(tmp_path, files)
    env = {"XDG_RUNTIME_DIR": str(runtime), "SSH_AUTH_SOCK": str(runtime / "agent" / "ssh.sock")}
    made = _prepare(home, env)
    mounts = made.guarded_mounts(env)
    for rel in (".pgpass", ".npmrc", ".bash_history"):
        assert mounts[home / rel].read_text() == "", rel
    assert mounts[home / ".gnupg"].is_dir() and not any(mounts[home / ".gnupg"].iterdir())
    assert not any(mounts[runtime / "keyring"].iterdir())
    # given: the SSH key and agent, gcloud's store, the runtime folder itself
    for path in (home / ".ssh", home / ".config" / "gcloud", runtime, runtime / "agent"):
        assert not any(m == path or m in path.parents for m in mounts), path
    # the shell loses every one of them
    monkeypatch.setenv("HOME", str(home))
    shell = hidden.credential_paths(None, env)
    for path in [home / rel for rel in files] + [runtime]:
        assert any(p == path or p in path.parents for p in shell), path


def test_a_store_only_the_call_names_is_hidden_not_given(tmp_path: Path):
    """The broker is prepared from the agent's environment; a store that only a call's
    environment names (KUBECONFIG set in the session) has no copy: it is mounted empty
    for guarded programs instead of passing through."""
    home = _home(tmp_path, {".kube/config": KUBECONFIG})
    other = tmp_path / "other.yaml"
    other.write_text(KUBECONFIG)
    made = _prepare(home)
    assert other not in made.mounts
    mounts = made.guarded_mounts({"KUBECONFIG": str(other), "NPM_CONFIG_USERCONFIG": str(other)})
    assert mounts[other].read_text() == ""
    assert mounts[home / ".kube" / "config"] == made.mounts[home / ".kube" / "config"]


def test_placeholders_are_stable_and_folder_copies_drop_files_that_are_gone(tmp_path: Path):
    home = _home(tmp_path)
    (home / ".docker" / "contexts").mkdir()
    (home / ".docker" / "contexts" / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    first = _prepare(home)
    docker_copy = first.mounts[home / ".docker"]
    assert sorted(p.name for p in docker_copy.iterdir()) == ["config.json"]  # no contexts
    (home / ".docker" / "config.json").unlink()
    second = _prepare(home)
    assert second.mounts[home / ".docker"] == docker_copy and not any(docker_copy.iterdir())
    assert {k: v for k, v in second.swaps.items() if k in first.swaps} == {
        k: v for k, v in first.swaps.items() if k in second.swaps
    }
    mode = stat.S_IMODE((home.parent / "private").stat().st_mode)
    assert mode == 0o700 and stat.S_IMODE(second.table.stat().st_mode) == 0o600


def test_every_store_is_in_the_table_once_with_a_treatment():
    names = [store.name for store in stores.STORES]
    assert len(names) == len(set(names))
    assert {store.treat for store in stores.STORES} == {stores.BROKER, stores.HIDE, stores.GIVE}
    for store in stores.STORES:
        where = store.locate({}, Path("/home/u"))
        assert all(fmt in formats.FORMATS for _p, fmt in where.files)
        assert store.treat != stores.GIVE or store.why, store.name


@pytest.mark.parametrize("name", sorted(formats.FORMATS))
def test_parsers_refuse_wrong_types_without_crashing(name: str):
    fmt = formats.FORMATS[name]
    for text in ("[]", "null", "42", '"x"', "{}", "- a\n- b\n", "\t\t", "a = b\n", "{{{{"):
        try:
            fmt.parse(text, Context(env={"VAULT_ADDR": "https://v.example.com"}))
        except Unparsable:
            pass


# -- through a real bash call: what a guarded program reads ----------------------------

SHELL_READS = " ".join(f"$HOME/{rel}" for rel in FILES)
HIDDEN_FILES = {
    ".pgpass": "h:5432:db:u:pgpass-secret-77\n",
    ".npmrc": "//registry.npmjs.org/:_authToken=npm-secret-7788\n",
    ".bash_history": "export TOKEN=history-secret-99\n",
    ".gnupg/pubring.kbx": "gpg-secret-66",
}
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-secret-55\n"


@pytest.fixture
def sandbox_home(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch):
    """A home with a file of every store (and stores guarded programs do not need, an
    SSH key, an unparsable .netrc, a .git-credentials that is not UTF-8), the broker
    prepared from it and active."""
    from egress_support import egress_ready
    from iac_kernel.egress.environment import environment_dir
    from iac_kernel.guard.sandbox.bwrap import unusable_reason

    if unusable_reason() is not None:
        pytest.skip("bubblewrap unusable")
    egress_ready()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(environment_dir()))
    files = {**FILES, **HIDDEN_FILES, ".ssh/id_ed25519": SSH_KEY}
    files[".netrc"] = f'machine h login u password "{NETRC_PASSWORD}\n'  # unclosed quote
    home = _home(outside_tmp, files)
    (home / ".docker" / "contexts" / "meta").mkdir(parents=True)  # TLS keys of daemons
    (home / ".git-credentials").write_bytes(f"https://u:{GIT_PASSWORD}@h\xe9\n".encode("latin-1"))
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "DOCKER_CONFIG", "XDG_CONFIG_HOME", "PULUMI_HOME", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VAULT_ADDR", ENV["VAULT_ADDR"])
    made = broker.prepare(os.environ, home=home, folder=home / ".iac-code" / "egress")
    broker.activate(made)
    try:
        yield home, made
    finally:
        broker.activate(None)


async def test_guarded_programs_read_placeholders_or_nothing(sandbox_home, outside_tmp: Path):
    from guard_support import Asker, Harness

    home, made = sandbox_home
    root = outside_tmp / "h"
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    dump = root / "ws" / "guarded.txt"
    reads = " ".join(f"$HOME/{rel}" for rel in [*FILES, *HIDDEN_FILES, ".ssh/id_ed25519"])
    terraform = bin_dir / "terraform"
    listing = dump.with_name("listing.txt")
    terraform.write_text(
        f"#!/bin/sh\n(cat {reads}) > {dump} 2>&1\n"
        f"ls -A $HOME/.docker $HOME/.gnupg > {listing} 2>&1\n"
    )
    terraform.chmod(0o755)
    (root / "log").mkdir()
    (root / "log" / "calls").touch()
    harness = Harness(root / "ws", bin_dir, root / "log" / "calls", mode="bypass")
    shell_dump = dump.with_name("shell.txt")
    command = f"(cat {SHELL_READS}; ls -a $HOME/.kube) > {shell_dump} 2>&1; terraform version"
    ask = Asker()
    result = await harness.run(command, ask)
    assert result is not None and not ask.exec_questions()
    guarded, shell = dump.read_text(), shell_dump.read_text()
    secrets = [*REALS, "pgpass-secret-77", "npm-secret-7788", "history-secret-99", "gpg-secret-66"]
    # no real value reaches a guarded program (nor the shell)
    assert _leaks(guarded, secrets) == [] and _leaks(shell, secrets) == []
    # the new stores as placeholders: kubeconfig tokens, docker, vault, pulumi, gh, helm ...
    for real in (KUBE_TOKEN, KUBE_FILE_TOKEN, VAULT_TOKEN, PULUMI_TOKEN, GH_OAUTH, HELM_PASSWORD):
        assert made.swaps[real] in guarded, real
    assert made.swaps[TFRC_TOKEN] in guarded and made.swaps[DATABRICKS_TOKEN] in guarded
    hub = base64.b64encode(f"bob:{made.swaps[DOCKER_PASSWORD]}".encode()).decode()
    assert hub in guarded
    assert "client-key-data" in guarded  # kept: TLS client keys are end to end
    assert "ssh-secret-55" in guarded  # given: ssh keys cannot be brokered
    # unparsable and non-UTF-8 files: empty for the guarded program, never themselves
    assert {home / ".netrc", home / ".git-credentials"} <= set(made.refused)
    # the docker folder holds only its copied config.json; gpg's folder is empty
    listed = listing.read_text().split()
    assert "config.json" in listed and "contexts" not in listed and "pubring.kbx" not in listed
    # the shell gets neither values nor placeholders
    assert not any(fake in shell for fake in made.swaps.values())


async def test_real_kubectl_reads_the_placeholder_token(sandbox_home, outside_tmp: Path):
    """The real kubectl, run by the guard, reads the kubeconfig it is given: the token it
    finds is the placeholder."""
    import shutil

    from guard_support import Asker, Harness
    from iac_kernel.agent.permissions import ALLOW_ONCE

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    _home_path, made = sandbox_home
    root = outside_tmp / "k"
    (root / "bin").mkdir(parents=True)
    (root / "log").mkdir()
    (root / "log" / "calls").touch()
    harness = Harness(root / "ws", root / "bin", root / "log" / "calls", mode="bypass")
    out = root / "ws" / "token.txt"
    path = "{.users[?(@.name=='token-user')].user.token}"
    # `config view --raw` prints credentials: asked, and allowed here
    ask = Asker(exec_answer=ALLOW_ONCE, danger_answer=ALLOW_ONCE)
    result = await harness.run(f'kubectl config view --raw -o jsonpath="{path}" > {out}', ask)
    assert result is not None, result
    assert out.read_text().strip() == made.swaps[KUBE_TOKEN], result.content


def test_each_agent_process_has_its_own_table_and_copies(tmp_path):
    """Two agents of one user (different variables) never overwrite each other's table;
    an agent's folder goes with it, and one left by a killed agent is removed."""
    import subprocess
    import sys

    from iac_kernel.egress import broker

    home, folder = tmp_path / "home", tmp_path / "egress"
    home.mkdir()
    mine = broker.prepare({"GITHUB_TOKEN": "ghp_" + "a" * 36}, home=home, folder=folder)
    child = (
        "import sys, json; from pathlib import Path; from iac_kernel.egress import broker\n"
        "made = broker.prepare({'GITHUB_TOKEN': 'ghp_' + 'b' * 36}, home=Path(sys.argv[1]),"
        " folder=Path(sys.argv[2]))\n"
        "print(made.table)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(home), str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = Path(done.stdout.strip())
    assert theirs != mine.table and not theirs.parent.exists()  # removed at its exit
    assert "a" * 36 in mine.table.read_text()
    killed = folder / broker.AGENTS / "999999999"
    killed.mkdir()
    (killed / "broker.json").write_text("{}")
    broker._CLEANED.clear()
    broker.prepare({}, home=home, folder=folder)
    assert not killed.exists() and mine.table.parent.exists()


def test_a_port_written_by_gits_store_helper_is_read():
    """git's own ``store`` helper writes ``host%3aport``: the password is bound to that
    host and port, not left unswapped."""
    parsed = formats.git_credentials("https://bob:Passw0rd-0123456789ab@127.0.0.1%3a8080\n")
    assert [(c.hosts, c.values["token"]) for c in parsed.found] == [
        (["127.0.0.1:8080"], "Passw0rd-0123456789ab")
    ]
