"""The kernel against the Jupyter messaging protocol: jupyter_kernel_test's suite,
kernel_info, complete, is_complete, inspect, and the kernelspec installer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import jupyter_kernel_test
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from iac_kernel.kernel.app import KERNEL_NAME, install, kernel_spec, write_spec
from kernel_harness import CREDENTIAL_ENV, KernelHarness, scripted_kernel

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"
REPO = Path(__file__).parent.parent


#: The suite's kernel starts with one bad setting: it must start anyway and say so.
BAD_SETTING = {"IAC_KERNEL_MAX_TURN_REQUESTS": "abc"}


def run_cell(kc, code: str, timeout: float = 60) -> tuple[dict, list[dict]]:
    """Execute ``code``; the reply and the iopub messages of that request until idle."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    msgs = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return reply, msgs
        msgs.append(msg)


class IacKernelTests(jupyter_kernel_test.KernelTests):
    """jupyter_kernel_test's whole suite: a sample for every test it offers.

    Two of its tests cannot apply to a prompt kernel and are replaced by checks of what
    the kernel does instead (same names, so nothing is skipped):

    * ``test_execute_stdout``: an answer is never printed to stdout; it is one Markdown
      display updated in place, so it can stream and still end as one output.
    * ``test_clear_output``: outputs are updated in place by display id and never
      cleared (clearing would also drop the tool cards above the answer).
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
    # The start-up problems are repeated on stderr by every %config listing.
    code_stderr = "%config"
    code_page_something = "%fork?"
    # %config KEY is the setting's value: the default, as the env value was bad.
    code_execute_result = [{"code": "%config max_turn_requests", "result": "25"}]
    supported_history_operations = ("tail", "range", "search")
    code_history_pattern = "%config max_turn*"

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
            **BAD_SETTING,
        )
        from jupyter_client.manager import start_new_kernel

        cls.km, cls.kc = start_new_kernel(
            kernel_name=cls.kernel_name, env=env, cwd=str(root / "work")
        )
        cls.first_cell = run_cell(cls.kc, "%help")

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        if cls._saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = cls._saved
        shutil.rmtree(cls._tmp, ignore_errors=True)

    def test_bad_setting_is_one_line_in_the_first_cell(self) -> None:
        reply, msgs = self.first_cell
        self.assertEqual(reply["content"]["status"], "ok")  # the kernel started and answers
        errs = [m["content"]["text"] for m in msgs if m["msg_type"] == "stream"]
        self.assertEqual(
            errs,
            [
                "iac-kernel setting ignored: IAC_KERNEL_MAX_TURN_REQUESTS='abc' is not valid "
                "(expects a whole number, 0 or more); using the default 25\n"
            ],
        )
        self.assertTrue(
            all(m["content"]["name"] == "stderr" for m in msgs if "name" in m["content"])
        )
        # Only the first cell says so (and %config listings: code_stderr).
        _reply, later = run_cell(self.kc, "%help")
        self.assertFalse([m for m in later if m["msg_type"] == "stream"])

    def test_execute_stdout(self) -> None:
        """Replaces the stdout check (see the class docstring): a prompt's answer is a
        Markdown display updated in place, never a stdout stream."""
        self.flush_channels()
        reply, msgs = self.execute_helper("quick question", timeout=60)
        self.assertEqual(reply["content"]["status"], "ok")
        types = [m["msg_type"] for m in msgs]
        self.assertIn("display_data", types)
        self.assertIn("update_display_data", types)
        self.assertTrue(any("text/markdown" in m["content"].get("data", {}) for m in msgs))
        self.assertFalse([m for m in msgs if m["msg_type"] == "stream"])

    def test_clear_output(self) -> None:
        """Replaces the clear_output check (see the class docstring): displays are updated
        by display id, never cleared."""
        self.flush_channels()
        reply, msgs = self.execute_helper("quick question", timeout=60)
        self.assertEqual(reply["content"]["status"], "ok")
        updated = {
            m["content"]["transient"]["display_id"]
            for m in msgs
            if m["msg_type"] == "update_display_data"
        }
        shown = {
            m["content"].get("transient", {}).get("display_id")
            for m in msgs
            if m["msg_type"] == "display_data"
        }
        self.assertTrue(updated and updated <= shown)
        self.assertNotIn("clear_output", [m["msg_type"] for m in msgs])


#: jupyter_kernel_test's tests and the samples each needs (it skips a test without them).
SUITE_NEEDS = {
    "test_kernel_info": (),
    "test_execute_stdout": ("code_hello_world",),
    "test_execute_stderr": ("code_stderr",),
    "test_completion": ("completion_samples",),
    "test_is_complete": (
        "complete_code_samples",
        "incomplete_code_samples",
        "invalid_code_samples",
    ),
    "test_pager": ("code_page_something",),
    "test_error": ("code_generate_error",),
    "test_execute_result": ("code_execute_result",),
    "test_display_data": ("code_display_data",),
    "test_history": ("code_execute_result", "supported_history_operations", "code_history_pattern"),
    "test_inspect": ("code_inspect_sample",),
    "test_clear_output": ("code_clear_output",),
}


def test_the_suite_skips_nothing() -> None:
    """Every test jupyter_kernel_test offers has its samples here, or is replaced by a
    check of its own (a new version of the suite with new tests fails here first)."""
    offered = {n for n in dir(jupyter_kernel_test.KernelTests) if n.startswith("test_")}
    assert offered == set(SUITE_NEEDS)
    for name, needs in SUITE_NEEDS.items():
        if name in IacKernelTests.__dict__:
            continue  # replaced (documented in the class docstring)
        missing = [attr for attr in needs if not getattr(IacKernelTests, attr)]
        assert not missing, f"{name} would skip: set {missing}"
    assert set(IacKernelTests.supported_history_operations) == {"tail", "range", "search"}


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


def test_a_debug_request_is_answered_without_a_debugger(kernel: KernelHarness) -> None:
    """The kernel starts without debugpy (kernel/app.py); a client that asks anyway gets
    a reply on the control channel and the kernel goes on."""
    request = {"seq": 1, "type": "request", "command": "initialize", "arguments": {}}
    msg = kernel.kc.session.msg("debug_request", request)
    kernel.kc.control_channel.send(msg)
    reply = kernel.kc.get_control_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    assert reply["msg_type"] == "debug_reply"
    assert kernel.execute("%help").status == "ok"


def test_the_kernel_process_does_not_import_debugpy() -> None:
    code = (
        "import sys\n"
        "from iac_kernel.kernel.app import without_debugger\n"
        "without_debugger()\n"
        "import iac_kernel.kernel.kernel\n"
        "from ipykernel.debugger import _is_debugpy_available\n"
        "loaded = [m for m in sys.modules if m.startswith(('debugpy', 'pydevd', '_pydevd'))]\n"
        "print(_is_debugpy_available, [m for m in loaded if sys.modules[m] is not None])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.split() == ["False", "[]"], out.stdout + out.stderr


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


# -- start-up warnings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "dropped"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_tcp_encryption_warning_is_dropped_on_loopback_only(ip: str, dropped: bool) -> None:
    import logging
    from types import SimpleNamespace

    from iac_kernel.kernel.app import TCP_WARNING, LoopbackTcpFilter

    keep = LoopbackTcpFilter(SimpleNamespace(ip=ip)).filter

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("IPKernelApp", logging.WARNING, "", 0, msg, None, None)

    assert keep(record(TCP_WARNING + ". All communication ... eavesdropping.")) is not dropped
    assert keep(record("Some other warning"))
