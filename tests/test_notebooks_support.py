"""The runbooks' support code: nbval display folding (notebooks/conftest.py) and tf_audit."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
AUDIT = NOTEBOOKS / "tools" / "tf_audit.py"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


support = load(NOTEBOOKS / "conftest.py", "notebooks_conftest")
tf_audit = load(AUDIT, "tf_audit")


def msg(kind: str, parent: str, **content) -> dict:
    return {"msg_type": kind, "parent_header": {"msg_id": parent}, "content": content}


def display(kind: str, parent: str, display_id: str | None, text: str) -> dict:
    transient = {"display_id": display_id} if display_id else {}
    return msg(kind, parent, data={"text/plain": text}, metadata={}, transient=transient)


class FakeKernel:
    def __init__(self, messages: list[dict]):
        self.messages = list(messages)

    def get_message(self, stream, timeout=None):
        if stream == "shell":
            return {"msg_type": "execute_reply"}
        return self.messages.pop(0)


def drain(kernel: FakeKernel) -> list[dict]:
    get = support.fold_display_updates(FakeKernel.get_message)
    seen = []
    while True:
        seen.append(get(kernel, "iopub"))
        if seen[-1]["msg_type"] == "status" and seen[-1]["content"]["execution_state"] == "idle":
            return seen


def test_displays_reach_nbval_once_in_their_final_form_and_order():
    kernel = FakeKernel(
        [
            msg("status", "c1", execution_state="busy"),
            display("display_data", "c1", "answer", "_Working…_"),
            display("display_data", "c1", "card-1", "[running] grep"),
            msg("stream", "c1", name="stderr", text="note\n"),
            display("display_data", "c1", None, "Allowed by policy"),
            display("update_display_data", "c1", "card-1", "[done] grep"),
            display("update_display_data", "c1", "answer", "Five matches."),
            display("update_display_data", "old-cell", "other", "ignored"),
            msg("status", "c1", execution_state="idle"),
        ]
    )
    seen = drain(kernel)
    kinds = [m["msg_type"] for m in seen]
    assert kinds == ["status", "stream", "display_data", "display_data", "display_data", "status"]
    texts = [m["content"]["data"]["text/plain"] for m in seen if m["msg_type"] == "display_data"]
    assert texts == ["Five matches.", "[done] grep", "Allowed by policy"]


def test_displays_of_another_cell_are_not_released_by_this_cells_idle():
    kernel = FakeKernel(
        [
            display("display_data", "other", "x", "from a comm"),
            display("display_data", "c2", "y", "mine"),
            msg("status", "c2", execution_state="idle"),
        ]
    )
    seen = drain(kernel)
    assert [m["content"]["data"]["text/plain"] for m in seen[:-1]] == ["mine"]


def test_objects_are_sanitized_as_sorted_json():
    def sanitize(self, s):
        return re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<ID>", s) if isinstance(s, str) else s

    wrapped = support.sanitize_objects(sanitize)
    a = {"sessionId": "6f1d8a52-3c4b-9e07-d1a8-27c5e0b94f13", "status": "done"}
    b = {"status": "done", "sessionId": "b4e7c019-58d2-4a6f-93be-0c1f7a2d6e85"}
    assert wrapped(None, a) == wrapped(None, b)
    assert "<ID>" in wrapped(None, a)
    assert wrapped(None, {"status": "done"}) != wrapped(None, {"status": "failed"})
    assert wrapped(None, 3) == 3


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "mod").mkdir()
    (tmp_path / "versions.tf").write_text(
        "terraform {\n  required_providers {\n"
        '    aws = {\n      source  = "hashicorp/aws"\n      version = "~> 5.0"\n    }\n'
        '    tls = {\n      source = "hashicorp/tls"\n    }\n  }\n}\n'
    )
    (tmp_path / "main.tf").write_text(
        'module "vpc" {\n  source = "terraform-aws-modules/vpc/aws"\n}\n\n'
        'module "pinned" {\n  source  = "terraform-aws-modules/vpc/aws"\n  version = "5.1.0"\n}\n\n'
        'module "local" {\n  source = "./mod"\n}\n'
    )
    (tmp_path / "mod" / "sg.tf").write_text(
        'resource "aws_security_group" "open" {\n'
        "  ingress {\n    from_port   = 22\n    to_port     = 22\n"
        '    protocol    = "tcp"\n    cidr_blocks = ["10.0.0.0/8"]\n  }\n\n'
        "  ingress {\n    from_port   = 3389\n    to_port     = 3389\n"
        '    protocol    = "tcp"\n    cidr_blocks = ["0.0.0.0/0"]\n  }\n\n'
        "  egress {\n    from_port   = 0\n    to_port     = 0\n"
        '    protocol    = "-1"\n    cidr_blocks = ["0.0.0.0/0"]\n  }\n}\n\n'
        'resource "aws_security_group_rule" "v6" {\n  type             = "ingress"\n'
        "  from_port        = 443\n  to_port          = 443\n"
        '  protocol         = "tcp"\n  ipv6_cidr_blocks = ["::/0"]\n}\n\n'
        'resource "aws_s3_bucket" "tagged" {\n  tags = { team = "x" }\n}\n\n'
        'resource "aws_autoscaling_group" "asg" {\n  tag {\n    key   = "team"\n'
        '    value = "x"\n    propagate_at_launch = true\n  }\n}\n'
    )
    return tmp_path


def test_audit_findings(tree: Path):
    found = [str(f) for f in tf_audit.audit(tree, list(tf_audit.CHECKS))]
    assert found == [
        'main.tf:1: module vpc ("terraform-aws-modules/vpc/aws") has no version',
        "mod/sg.tf:1: aws_security_group.open has no tags",
        "mod/sg.tf:13: aws_security_group.open allows tcp/3389 from 0.0.0.0/0",
        "mod/sg.tf:29: aws_security_group_rule.v6 allows tcp/443 from ::/0",
        "versions.tf:7: provider tls (hashicorp/tls) has no version constraint",
    ]


def run_audit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(AUDIT), *args], capture_output=True, text=True)


def test_audit_exit_codes(tree: Path, tmp_path: Path):
    report = run_audit("ingress", str(tree))
    assert report.returncode == 0 and "2 finding(s) (ingress)" in report.stdout
    assert run_audit("ingress", str(tree), "--strict").returncode == 1
    assert run_audit("tags", str(tree / "versions.tf"), "--strict").returncode == 0

    missing = run_audit("all", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    (tree / "broken.tf").write_text('resource "aws_vpc" "x" {\n')
    broken = run_audit("all", str(tree))
    assert broken.returncode == 2 and "broken.tf: cannot parse" in broken.stderr
    assert "Traceback" not in broken.stderr
