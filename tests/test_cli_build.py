"""Installing without Node.js: the Python package builds, and one line says what is missing.

A clean checkout (the repository's files, without the gitignored extension build) is
built offline with ``--no-build-isolation`` and a PATH that holds only Python: no npm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTE = "iac-kernel: the JupyterLab extension was not built (npm was not found on PATH)"
HOW = "to get it, install Node.js (npm) and run the pip install again"
SHARE = "share/jupyter/labextensions/@iac-kernel/jupyterlab"


def clean_checkout(dest: Path) -> Path:
    """The files a fresh clone has (tracked and new, minus ignored ones such as the build)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest / "iac_kernel" / "labextension").exists()
    return dest


def hatchling_build(
    hook: str, src: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run hatchling's ``hook`` (``build_wheel``, ``build_editable``) in ``src`` into
    ``src/../dist``; asserts it succeeded and returns the process and the built file."""
    code = f"from hatchling.build import {hook}; print({hook}('../dist'))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, src.parent / "dist" / proc.stdout.strip().splitlines()[-1]  # after npm


@pytest.fixture
def no_npm(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has Python and nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PATH=str(bin_dir), PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    assert shutil.which("npm", path=env["PATH"]) is None
    return env


def test_wheel_builds_without_npm_and_says_how_to_get_the_extension(
    tmp_path: Path, no_npm: dict[str, str]
) -> None:
    src = clean_checkout(tmp_path / "checkout")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-v", "-w", str(tmp_path / "dist"), "./checkout"],
        cwd=tmp_path, env=no_npm, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    notes = [line.strip() for line in output.splitlines() if NOTE in line]
    assert len(notes) == 1 and HOW in notes[0]
    assert "Traceback" not in output

    (wheel,) = (tmp_path / "dist").glob("iac_kernel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "iac_kernel/cli.py" in names
    assert any(n.endswith("share/jupyter/kernels/iac-kernel/kernel.json") for n in names)
    # Installing enables the Jupyter Server extension (ACP over WebSocket).
    assert any(n.endswith("etc/jupyter/jupyter_server_config.d/iac_kernel.json") for n in names)
    assert not any(SHARE in n for n in names)  # no half-installed extension folder
    assert src.is_dir()
    # The Jupyter AI persona: its module, its avatar, its entry point and extra.
    assert "iac_kernel/persona/jupyter_ai.py" in names
    assert "iac_kernel/kernel/resources/logo-svg.svg" in names
    with zipfile.ZipFile(wheel) as archive:
        info = {n.rsplit("/", 1)[-1]: n for n in names if ".dist-info/" in n}
        points = archive.read(info["entry_points.txt"]).decode()
        metadata = archive.read(info["METADATA"]).decode()
    assert "[jupyter_ai.personas]" in points
    assert "iac-agent = iac_kernel.persona.jupyter_ai:IacAgentPersona" in points
    assert "Provides-Extra: jupyter-ai" in metadata
    assert "jupyter-ai-acp-client" in metadata


def test_editable_install_builds_without_npm(tmp_path: Path, no_npm: dict[str, str]) -> None:
    src = clean_checkout(tmp_path / "checkout")
    assert not list((src / "iac_kernel").rglob("*.pyc"))
    proc, built = hatchling_build("build_editable", src, {**no_npm, "PYTHONDONTWRITEBYTECODE": "1"})
    assert NOTE in proc.stderr and HOW in proc.stderr
    assert built.is_file()
    # The source tree is what an editable install imports: its bytecode is written, even
    # where PYTHONDONTWRITEBYTECODE keeps Python from writing it at import time.
    sources = list((src / "iac_kernel").rglob("*.py"))
    compiled = {p.name.split(".")[0] for p in (src / "iac_kernel").rglob("__pycache__/*.pyc")}
    assert sources and {p.stem for p in sources} <= compiled


def test_a_built_extension_is_shipped_without_npm(tmp_path: Path, no_npm: dict[str, str]) -> None:
    """An sdist carries the build: a wheel made from it needs no npm and ships it."""
    src = clean_checkout(tmp_path / "checkout")
    build = src / "iac_kernel" / "labextension"
    (build / "static").mkdir(parents=True)
    (build / "package.json").write_text('{"name": "@iac-kernel/jupyterlab"}')
    (build / "static" / "style.js").write_text("/* built */")
    proc, built = hatchling_build("build_wheel", src, no_npm)
    assert NOTE not in proc.stderr
    names = zipfile.ZipFile(built).namelist()
    assert any(n.endswith(f"{SHARE}/package.json") for n in names)
    assert any(n.endswith(f"{SHARE}/install.json") for n in names)


def test_a_build_holding_its_own_install_json_is_shipped_once(
    tmp_path: Path, no_npm: dict[str, str]
) -> None:
    """A build folder that already has install.json (a builder wrote it) installs again:
    the wheel holds exactly one, the build's own."""
    src = clean_checkout(tmp_path / "checkout")
    build = src / "iac_kernel" / "labextension"
    (build / "static").mkdir(parents=True)
    (build / "package.json").write_text('{"name": "@iac-kernel/jupyterlab"}')
    (build / "static" / "style.js").write_text("/* built */")
    (build / "install.json").write_text('{"packageName": "from-the-build"}')
    _, built = hatchling_build("build_wheel", src, no_npm)
    archive = zipfile.ZipFile(built)
    (install,) = [n for n in archive.namelist() if n.endswith(f"{SHARE}/install.json")]
    assert b"from-the-build" in archive.read(install)


def test_sdist_of_a_clean_clone_carries_the_built_extension(tmp_path: Path) -> None:
    """``python -m build --sdist`` from a fresh clone: the hook builds the extension with
    npm (the clone shares this checkout's node_modules: no download) and the sdist
    carries the build, so a wheel made from it needs no npm."""
    modules = REPO / "labextension" / "node_modules"
    npm = shutil.which("npm")
    if npm is None or not modules.is_dir():
        pytest.skip("needs npm and labextension/node_modules (the editable install makes it)")
    src = clean_checkout(tmp_path / "checkout")
    (src / "labextension" / "node_modules").symlink_to(modules)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    proc, built = hatchling_build("build_sdist", src, env)
    assert "sdist carries no JupyterLab extension" not in proc.stderr
    with tarfile.open(built) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames()}
    build = "iac_kernel/labextension"
    assert {f"{build}/package.json", f"{build}/static/style.js"} <= names
    assert any(n.startswith(f"{build}/static/remoteEntry.") for n in names)
    assert "labextension/src/index.ts" in names and not any("node_modules" in n for n in names)


def test_sdist_without_npm_says_it_carries_no_extension(
    tmp_path: Path, no_npm: dict[str, str]
) -> None:
    src = clean_checkout(tmp_path / "checkout")
    proc, built = hatchling_build("build_sdist", src, no_npm)
    assert "the sdist carries no JupyterLab extension build (npm was not found" in proc.stderr
    with tarfile.open(built) as archive:
        assert not any("iac_kernel/labextension/" in n for n in archive.getnames())


def test_the_lab_extra_brings_jupyterlab_nbconvert_and_papermill(tmp_path: Path) -> None:
    """The README's user install, `pip install ".[lab]"` from the checkout, into a new
    environment (uv, dependencies from the package index): every program the demo and
    README name then runs."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (the test extra brings it)")
    venv = tmp_path / "lab"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])  # no npm: the
    # extension is shipped from this checkout's build when there is one
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), f"{REPO}[lab]"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for argv in (["jupyter", "lab", "--version"], ["jupyter", "nbconvert", "--version"],
                 ["papermill", "--version"], ["iac-kernel", "--version"]):  # fmt: skip
        ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, (argv, ran.stderr[-2000:])
    listed = subprocess.run(["jupyter", "kernelspec", "list"], env=env, capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    assert "iac-kernel" in listed
