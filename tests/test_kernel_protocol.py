"""The kernel against the Jupyter messaging protocol: jupyter_kernel_test's suite,
kernel_info, complete, is_complete, inspect, and the kernelspec installer."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import jupyter_kernel_test
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from iac_kernel.kernel.install import KERNEL_NAME, install, kernel_spec, write_spec
from iac_kernel.kernel.testing import CREDENTIAL_ENV, KernelHarness, scripted_kernel

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"
REPO = Path(__file__).parent.parent


class IacKernelTests(jupyter_kernel_test.KernelTests):
    """jupyter_kernel_test's checks, filled in where they apply to a prompt kernel.

    Left unset on purpose: code_hello_world / code_stderr (a prompt does not print to
    stdout), code_execute_result (answers are displays), history and pager.
    """

    kernel_name = KERNEL_NAME
    language_name = "markdown"
    file_extension = ".md"
    completion_samples = [
        {"text": "%se", "matches": {"%session", "%sessions"}},
        {"text": "%mo", "matches": {"%model", "%mode"}},
        {"text": "%mode read", "matches": {"read_only"}},
    ]
    complete_code_samples = ["Review the Terraform in this folder", "%help", ""]
    incomplete_code_samples = ['Explain this:\n```hcl\nresource "x" {', "a long line \\"]
    invalid_code_samples = ["%nosuchmagic"]
    code_generate_error = "%nosuchmagic"
    code_display_data = [
        {"code": "%help", "mime": "text/markdown"},
        {"code": "quick question", "mime": "text/markdown"},
    ]
    code_inspect_sample = "%fork"

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.mkdtemp(prefix="iac-kernel-test-")
        root = Path(cls._tmp)
        write_spec(root / "jupyter" / "kernels" / KERNEL_NAME)
        (root / "work").mkdir()
        cls._saved = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = str(root / "jupyter")
        env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_ENV}
        env.update(
            IAC_KERNEL_SESSIONS_DIR=str(root / "sessions"),
            IAC_KERNEL_SCRIPT=str(SCRIPT),
            IAC_KERNEL_MODEL="scripted",
        )
        from jupyter_client.manager import start_new_kernel

        cls.km, cls.kc = start_new_kernel(
            kernel_name=cls.kernel_name, env=env, cwd=str(root / "work")
        )

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        if cls._saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = cls._saved
        shutil.rmtree(cls._tmp, ignore_errors=True)


# -- through the harness ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHarness]:
    root = tmp_path_factory.mktemp("kernel-protocol")
    (root / "work").mkdir()
    harness = scripted_kernel(root, root / "work", SCRIPT)
    try:
        yield harness
    finally:
        harness.stop()


def test_kernel_info_names_markdown_and_no_debugger(kernel: KernelHarness) -> None:
    content = kernel.request("kernel_info_request", {})["content"]
    assert content["status"] == "ok"
    assert content["implementation"] == "iac-kernel"
    assert content["language_info"]["name"] == "markdown"
    assert content["language_info"]["mimetype"] == "text/markdown"
    assert "debugger" not in content.get("supported_features", [])
    assert "%help" in content["banner"]


def test_complete_session_ids_after_load(kernel: KernelHarness) -> None:
    assert kernel.execute("quick question").status == "ok"
    text = kernel.execute("%session").of_type("display_data")[0]["content"]["data"]["text/plain"]
    session_id = next(ln.split()[-1] for ln in text.splitlines() if ln.startswith("id "))
    code = f"%load {session_id[:5]}"
    reply = kernel.request("complete_request", {"code": code, "cursor_pos": len(code)})
    content = reply["content"]
    assert content["matches"] == [session_id]
    assert (content["cursor_start"], content["cursor_end"]) == (6, len(code))


def test_complete_on_a_later_line(kernel: KernelHarness) -> None:
    code = "Review this.\n%perm"
    reply = kernel.request("complete_request", {"code": code, "cursor_pos": len(code)})
    assert reply["content"]["matches"] == ["%permissions"]
    assert reply["content"]["cursor_start"] == len("Review this.\n")


def test_cell_text_is_never_run_as_python(kernel: KernelHarness, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    result = kernel.execute(code)
    assert result.status == "ok"
    assert not marker.exists()
    reply = kernel.request(
        "execute_request",
        {
            "code": "%help",
            "silent": False,
            "user_expressions": {"x": f"__import__('pathlib').Path({str(marker)!r}).touch()"},
            "allow_stdin": False,
        },
    )
    assert reply["content"]["user_expressions"] == {}
    assert not marker.exists()


# -- the installer -------------------------------------------------------------------------------


def test_install_into_a_prefix_is_found_by_kernelspec_manager(tmp_path: Path) -> None:
    message = install(prefix=str(tmp_path))
    assert KERNEL_NAME in message
    kernels = tmp_path / "share" / "jupyter" / "kernels"
    manager = KernelSpecManager(kernel_dirs=[str(kernels)])
    assert KERNEL_NAME in manager.find_kernel_specs()
    spec = manager.get_kernel_spec(KERNEL_NAME)
    assert spec.display_name == "IaC Agent"
    assert spec.language == "markdown"
    assert spec.interrupt_mode == "signal"
    assert spec.argv == [sys.executable, "-m", "iac_kernel", "kernel", "-f", "{connection_file}"]


def test_install_user_writes_to_the_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    install(user=True)
    assert (tmp_path / "data" / "kernels" / KERNEL_NAME / "kernel.json").exists()


def test_install_sys_prefix_uses_sys_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    install(sys_prefix=True)
    assert (tmp_path / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json").exists()


def test_install_refuses_two_places_and_unwritable_ones(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="choose one"):
        install(user=True, prefix=str(tmp_path))
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a directory should be")
    with pytest.raises(SystemExit, match="cannot write the kernelspec"):
        install(prefix=str(blocked))


def test_cli_install(tmp_path: Path) -> None:
    from iac_kernel.cli import main

    assert main(["install", "--prefix", str(tmp_path)]) == 0
    assert (tmp_path / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json").exists()


def test_reference_kernel_json_matches_the_installer() -> None:
    reference = json.loads((REPO / "kernel.json").read_text())
    expected = kernel_spec("python")
    assert reference == expected
