"""Issue 41, items 5, 6 and 8: the egress proxy's environment and how it is started.

* The agent's own code (its package, its interpreter's prefixes, the proxy's
  environment) is read-only in a sandbox even under a writable working directory; the
  proxy loads copies of its addons from its private folder, with onboarding off and
  HTTP/2 off while the engine predates the smuggling fix.
* The engine is the newest mitmproxy the newest Python here can run (fake interpreters).
* The sandboxes' CA bundle belongs to one agent process (two proxies, two bundles).
* The environment is made on first use; an unreachable package index is one line, on
  the status and on the card of a bash call that tries the network.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import iac_kernel
from egress_support import egress_ready
from iac_kernel import control_paths
from iac_kernel.cli import main as cli_main
from iac_kernel.config import Settings
from iac_kernel.egress import broker, ca, environment, inside
from iac_kernel.egress import proxy as proxy_module
from iac_kernel.egress.proxy import EgressProxy
from iac_kernel.guard.sandbox import bwrap as sandbox
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, Layout
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.bash import BashTool

PACKAGE = Path(iac_kernel.__file__).resolve().parent
no_bwrap = pytest.mark.skipif(sandbox.unusable_reason() is not None, reason="no bwrap")


def fake_python(folder: Path, name: str, body: str) -> Path:
    """An executable ``name`` in ``folder`` running the shell ``body``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


# -- choosing the engine -------------------------------------------------------------


def test_the_newest_python_that_can_make_a_venv_chooses_mitmproxy_12(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    fake_python(bin_dir, "python3.13", "exit 127")  # a pyenv shim for a version not active
    newest = fake_python(bin_dir, "python3.12", 'case "$3" in *ensurepip*) echo 3.12;; esac')
    fake_python(bin_dir, "python3", "echo 3.9")  # too old: never chosen
    fake_python(bin_dir, "python3.10", "echo 3.10")
    engine = environment.choose_engine(str(bin_dir))
    assert engine.python == str(newest) and engine.version == (3, 12)
    assert engine.requirements == ("mitmproxy>=12.1.2", environment.BOTOCORE)
    assert engine.describe() == "mitmproxy 12.1.2 or later on Python 3.12"


def test_without_python_312_the_engine_is_mitmproxy_11(tmp_path: Path):
    """Only 3.11 here (a 3.12 that cannot make a virtual environment does not count):
    mitmproxy 11.0.2, the last release for it."""
    bin_dir = tmp_path / "bin"
    fake_python(bin_dir, "python3.12", "echo 'No module named ensurepip' >&2; exit 1")
    fake_python(bin_dir, "python3.11", "echo 3.11")
    engine = environment.choose_engine(str(bin_dir))
    if sys.version_info >= (3, 12):
        assert engine.version == sys.version_info[:2]  # the running one is newer still
        return
    assert engine.version == (3, 11) and engine.mitmproxy == "mitmproxy==11.0.2"
    assert engine.describe() == "mitmproxy 11.0.2 on Python 3.11"


def test_the_installed_engine_says_whether_http2_is_safe(tmp_path: Path, monkeypatch):
    root = tmp_path / "env"
    site = root / "lib" / "python3.12" / "site-packages"
    (site / "mitmproxy-12.1.2.dist-info").mkdir(parents=True)
    fake_python(root / "bin", "python", "exit 0")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.4\n")
    (root / "iac-kernel-requirements.txt").write_text("mitmproxy>=12.1.2\nbotocore>=1.34\n")
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(root))
    found = environment.installed()
    assert found is not None and found.http2_safe
    assert found.describe() == "mitmproxy 12.1.2 on Python 3.12.4"
    shutil.rmtree(site / "mitmproxy-12.1.2.dist-info")
    (site / "mitmproxy-11.0.2.dist-info").mkdir()
    found = environment.installed()
    assert found is not None and not found.http2_safe
    assert "with HTTP/2 off" in found.describe()
    (root / "iac-kernel-requirements.txt").write_text("mitmproxy==10\n")  # not ours
    assert environment.installed() is None and environment.egress_python() is None


# -- how mitmdump is started ---------------------------------------------------------


@pytest.fixture
def recorded_launch(tmp_path: Path, monkeypatch):
    """``EgressProxy._launch`` with a program that records its argv and exits."""
    record = tmp_path / "argv"
    program = fake_python(tmp_path / "bin", "mitmdump", f'printf "%s\\n" "$@" > {record}')
    made = broker.prepare({}, home=tmp_path / "home", folder=tmp_path / "private")
    owner = EgressProxy()
    owner._start_loop()

    def launch(mitmproxy: tuple[int, ...]) -> list[str]:
        found = environment.Installed(tmp_path, "3.x", mitmproxy)
        monkeypatch.setattr(environment, "installed", lambda: found)
        assert owner._launch(program, made) is False  # it exited
        return record.read_text().splitlines()

    try:
        yield owner, launch
    finally:
        owner.stop()
        assert owner._dir is not None
        control_paths.unregister(owner._dir)
        shutil.rmtree(owner._dir, ignore_errors=True)


def test_mitmdump_loads_private_copies_of_the_addons(recorded_launch):
    owner, launch = recorded_launch
    argv = launch((11, 0, 2))
    scripts = [Path(argv[i + 1]) for i, word in enumerate(argv) if word == "-s"]
    assert [s.name for s in scripts] == ["addon_policy.py", "addon_broker.py", "addon_scrub.py"]
    for script in scripts:
        # In the private folder (0700, hidden from every sandbox), the same code.
        assert script.parent.parent == owner._dir
        assert script.read_bytes() == (PACKAGE / "egress" / script.name).read_bytes()
    assert os.stat(owner._dir).st_mode & 0o777 == 0o700
    assert owner._dir in control_paths.registered()
    helpers = {p.name for p in (PACKAGE / "egress").glob("addon_*.py")}
    assert {p.name for p in scripts[0].parent.glob("addon_*.py")} == helpers


def test_onboarding_is_off_and_http2_off_before_the_smuggling_fix(recorded_launch):
    _, launch = recorded_launch
    old = launch((11, 0, 2))
    assert "onboarding=false" in old and "http2=false" in old
    fixed = launch((12, 1, 2))
    assert "onboarding=false" in fixed and not any(w.startswith("http2=") for w in fixed)
    unknown = launch(())  # a version that cannot be read is treated as old
    assert "http2=false" in unknown


# -- the agent's code is read-only in every sandbox -----------------------------------


def _sandboxed(cwd: Path, command: str, tmp_path: Path) -> str:
    """``command`` in the sandbox of a bash call in ``cwd`` (no egress route)."""
    dirs = []
    for name in ("tmp", "guard", "bin"):
        dirs.append(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=sandbox.state_dir())))
    tmp, guard, launchers = dirs
    os.chmod(tmp, 0o1777)
    try:
        layout = Layout(cwd=cwd, tmp_dir=tmp, guard_dir=guard, launcher_dir=launchers)
        bwrap = sandbox.bwrap_path()
        assert bwrap is not None
        argv = [*layout.bwrap_args(bwrap), "sh", "-c", command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        return done.stdout + done.stderr
    finally:
        for folder in dirs:
            shutil.rmtree(folder, ignore_errors=True)


CHECK = 'for p in "$@"; do test -w "$p" && echo "writable $p" || echo "read-only $p"; done'


def _check(cwd: Path, paths: list[Path], tmp_path: Path) -> str:
    quoted = " ".join(f"'{p}'" for p in paths)
    return _sandboxed(cwd, f"set -- {quoted}; {CHECK}", tmp_path)


@no_bwrap
def test_the_package_is_read_only_when_the_cwd_holds_it(tmp_path: Path):
    """A checkout used as the working directory: its files are the user's to edit, the
    agent's package (the proxy's addon scripts, lazily imported modules) is not."""
    cwd = PACKAGE.parent
    addon = PACKAGE / "egress" / "addon_broker.py"
    lazy = PACKAGE / "egress" / "environment.py"
    out = _check(cwd, [addon, lazy, PACKAGE, cwd], tmp_path)
    assert f"read-only {addon}" in out and f"read-only {lazy}" in out, out
    assert f"read-only {PACKAGE}" in out, out
    assert f"writable {cwd}" in out, out  # the rest of the working directory
    inner = PACKAGE / "egress"  # a working directory inside the package: read-only too
    assert f"read-only {addon}" in _check(inner, [addon], tmp_path)


@no_bwrap
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not in a virtual environment")
def test_the_interpreters_venv_is_read_only_when_the_cwd_holds_it(tmp_path: Path):
    """A project's .venv running the agent, with the project as the working directory."""
    venv = Path(os.path.realpath(sys.prefix))
    cwd = venv.parent
    python = Path(os.path.realpath(sys.executable))
    out = _check(cwd, [venv / "pyvenv.cfg", venv / "bin", python, cwd], tmp_path)
    assert f"read-only {venv / 'pyvenv.cfg'}" in out and f"read-only {venv / 'bin'}" in out
    assert f"writable {cwd}" in out, out


@no_bwrap
def test_the_egress_environment_is_read_only_under_a_writable_cwd(tmp_path: Path, monkeypatch):
    """The proxy's environment (mitmproxy's code runs on the host) under the cwd."""
    cwd = Path(os.path.realpath(tmp_path)) / "home"
    env = cwd / ".cache" / "iac-kernel" / "egress"
    (env / "lib").mkdir(parents=True)
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(env))
    out = _check(cwd, [env / "lib", cwd / ".cache"], tmp_path)
    assert f"read-only {env / 'lib'}" in out and f"writable {cwd / '.cache'}" in out, out


def test_only_code_under_a_writable_bind_is_mounted_again(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert sandbox.own_code_under([elsewhere]) == []
    assert str(PACKAGE) in sandbox.own_code_under([PACKAGE.parent])


# -- one CA bundle per agent process --------------------------------------------------


def test_two_agents_have_their_own_ca_bundles(tmp_path: Path):
    """Two proxies with two brokers (two CAs): each writes its bundle in its own private
    folder; writing one never changes the other; a call's folder gets a link."""
    egress_ready()  # the CA is made with mitmproxy
    owners = []
    try:
        for name in ("a", "b"):
            made = broker.prepare({}, home=tmp_path / f"home-{name}", folder=tmp_path / name)
            owner = EgressProxy()
            owner._start_loop()
            owner._trust(made)
            owners.append((owner, made))
        (a, made_a), (b, made_b) = owners
        assert a.bundle is not None and b.bundle is not None and a.bundle != b.bundle
        cert_a = (made_a.confdir / ca.CA_CERT).read_text()
        cert_b = (made_b.confdir / ca.CA_CERT).read_text()
        assert cert_a != cert_b
        text_a = a.bundle.read_text()
        assert cert_a in text_a and cert_b not in text_a
        b._trust(made_b)  # b starts again: a's bundle is untouched
        assert a.bundle.read_text() == text_a and cert_b in b.bundle.read_text()
        call = tmp_path / "call"
        call.mkdir()
        a.place_bundle(call)
        assert (call / ca.BUNDLE_NAME).read_text() == text_a
    finally:
        for owner, _ in owners:
            owner.stop()
            if owner._dir is not None:
                control_paths.unregister(owner._dir)
                shutil.rmtree(owner._dir, ignore_errors=True)


def test_the_trust_variables_name_the_bundle_in_the_routes_folder(monkeypatch):
    owner = EgressProxy()
    monkeypatch.setattr(proxy_module, "_PROXY", owner)
    assert "SSL_CERT_FILE" not in inside.proxy_env(3128, GUARD_MOUNT)  # no bundle yet
    owner.bundle = Path("/nowhere/ca-bundle.pem")
    env = inside.proxy_env(3128, GUARD_MOUNT)
    for name in ca.TRUST_VARIABLES:
        assert env[name] == f"{GUARD_MOUNT}/{ca.BUNDLE_NAME}"


# -- made on first use ---------------------------------------------------------------


@pytest.fixture
def unreachable_index(tmp_path: Path, monkeypatch) -> Path:
    """An empty egress environment folder and a pip whose package index refuses."""
    root = tmp_path / "egress-env"
    root.mkdir()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(root))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no extra index or links from pip.conf
    return root


def test_first_use_installs_and_an_unreachable_index_is_one_line(unreachable_index: Path, caplog):
    owner = EgressProxy()
    assert environment.will_install()
    with caplog.at_level(logging.WARNING, logger="iac_kernel.egress.proxy"):
        assert owner.ensure() is False
    progress = [r.getMessage() for r in caplog.records]
    assert len(progress) == 1 and progress[0].startswith("Installing the sandboxes' egress")
    assert str(unreachable_index) in progress[0]
    failure = owner.failure
    assert failure is not None and "\n" not in failure
    assert "the package index http://127.0.0.1:9/ cannot be reached" in failure, failure
    assert "Connection refused" in failure
    # Remembered: the next first uses do not try again at once (each would wait on pip).
    started = time.monotonic()
    assert owner.ensure() is False and owner.failure == failure
    assert time.monotonic() - started < 2
    assert not environment.will_install()
    # The status says so, and `egress install` tries again now, in one line.
    assert failure.split("; ", 1)[1] in sandbox.status_text()
    assert "cannot be reached" in proxy_module.status_text()


def test_egress_install_with_no_index_is_one_line(unreachable_index, monkeypatch, capsys):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert cli_main(["egress", "install"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("Installing the sandboxes' egress proxy (mitmproxy")
    err = captured.err.strip()
    assert "\n" not in err and err.startswith("iac-kernel egress install: could not install")
    assert "pip found no mitmproxy" in err and "PIP_NO_INDEX" in err


def test_a_folder_that_is_not_a_venv_is_never_cleared(tmp_path: Path, monkeypatch):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "notes.txt").write_text("keep")
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(root))
    with pytest.raises(environment.EgressInstallError, match="is no virtual environment"):
        environment.ensure_environment(again=True)
    assert (root / "notes.txt").read_text() == "keep"


def test_the_status_is_the_same_before_the_first_install(tmp_path: Path, monkeypatch):
    """Committed outputs (%session) do not depend on whether the environment exists."""
    before = sandbox.status_text()
    monkeypatch.setenv("IAC_KERNEL_EGRESS_ENV", str(tmp_path / "missing"))
    assert sandbox.status_text() == before
    assert "installed on first use" in proxy_module.status_text()


@no_bwrap
async def test_a_bash_call_without_the_proxy_says_why_it_has_no_network(
    unreachable_index: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.setattr(proxy_module, "_PROXY", EgressProxy())  # this test's own
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip then says why (the other tests: we look)
    ws = tmp_path / "ws"
    ws.mkdir()
    live: list[str] = []
    ctx = ToolContext(cwd=ws, settings=Settings(), on_output=live.append)
    result = await BashTool().run({"command": "curl -sS -m 5 http://example.com/ ; echo done"}, ctx)
    assert live and live[0].startswith("[installing the egress proxy")  # shown live
    assert "Could not resolve host" in result.content, result.content
    note = result.content.splitlines()[-1]
    assert note.startswith("[no egress proxy: sandboxes have no network; could not install")
    assert "cannot be reached" in note and "installing" not in result.content
    # A call that does not use the network gets no note (and no second install try).
    live.clear()
    quiet = await BashTool().run({"command": "echo hello"}, ctx)
    assert quiet.content == "hello" and not any("installing" in text for text in live)


def test_the_demo_makes_the_environment_with_a_progress_line(unreachable_index, capsys):
    from iac_kernel.demo import prepare_egress

    prepare_egress()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Installing the sandboxes' egress proxy")
    assert out[1].startswith("Note: could not install mitmproxy") and len(out) == 2
    assert "iac-kernel egress install" in out[1]


@no_bwrap
async def test_calls_and_guarded_runs_trust_their_agents_bundle_read_only(tmp_path: Path):
    """The shell and a guarded program (its own route folder) name this agent's bundle,
    in a folder no sandbox can write."""
    egress_ready()
    bin_dir = tmp_path / "bin"
    show = 'echo "$SSL_CERT_FILE"; test -w "$SSL_CERT_FILE" && echo writable || echo read-only'
    fake_python(bin_dir, "git", f'{show}; sha256sum < "$SSL_CERT_FILE"')
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    ctx = ToolContext(cwd=ws, settings=Settings(), env=env)
    ctx.ask_exec = None  # a read: never asked
    result = await BashTool().run({"command": f'{show}; sha256sum < "$SSL_CERT_FILE"'}, ctx)
    owner = proxy_module.proxy()
    assert owner.bundle is not None and owner.bundle.parent == owner._dir
    digest = hashlib.sha256(owner.bundle.read_bytes()).hexdigest()
    lines = result.content.splitlines()
    assert lines[:2] == [f"{GUARD_MOUNT}/{ca.BUNDLE_NAME}", "read-only"], result.content
    assert lines[2].startswith(digest), result.content
    guarded = await BashTool().run({"command": "git --version"}, ctx)
    lines = guarded.content.splitlines()
    assert lines[0].endswith(f"/{ca.BUNDLE_NAME}") and lines[1] == "read-only", guarded.content
    assert lines[2].startswith(digest), guarded.content
