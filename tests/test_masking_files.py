"""Issue 32 item 1: terraform's sensitive files never reach a place the model reads.
The shell of a bash call and the file tools see masked copies (recognised by content,
never by name); the guarded terraform reads the originals. Real terraform.

Families: a state (as named, renamed ``notes.json``, gzip), a saved plan, a var file, the
backend cache with credentials, a ``*.tfbackend``; controls: an ordinary JSON file named
``terraform.tfstate``, a plan without sensitive values, a plain variable's value.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.config import Settings
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.terraform import backends, tffiles
from iac_kernel.tools import tf_guard
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.edit_file import EditFileTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.read_file import ReadFileTool
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401

pytestmark = needs_terraform
sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

VALUE = "Zq9-Secret&Value<77>"
PLAIN = "Plain-Visible-1234"
S3_SECRET = "S3secretKEY-abcdef-0987"
MAIN = f"""
variable "tok" {{
  type      = string
  sensitive = true
}}
variable "plain" {{
  type    = string
  default = "{PLAIN}"
}}
resource "terraform_data" "r" {{
  input = var.tok
}}
output "tok" {{
  value     = var.tok
  sensitive = true
}}
output "plain" {{ value = var.plain }}
"""


def leaked(text: str) -> list[str]:
    """Which spellings of VALUE ``text`` holds (raw, reversed, Go-escaped)."""
    go = VALUE.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return [f for f in (VALUE, VALUE[::-1], go, go[::-1], "Zq9-Secret") if f in text]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("maskfiles") / "ws"
    root.mkdir()
    (root / "main.tf").write_text(MAIN)
    (root / "secret.auto.tfvars").write_text(f'tok = "{VALUE}"\n')
    tf(root, "init", "-input=false")
    tf(root, "apply", "-auto-approve", "-input=false")
    tf(root, "plan", "-out=p.bin", "-input=false")
    state = (root / "terraform.tfstate").read_bytes()
    (root / "notes.json").write_bytes(state)  # a state renamed
    (root / "old.gz").write_bytes(gzip.compress(state))
    (root / "not-a-state").mkdir()
    (root / "not-a-state" / "terraform.tfstate").write_text('{"note": "just JSON", "n": 1}\n')
    cache = {
        "version": 3,
        "serial": 1,
        "lineage": "x",
        "backend": {"type": "s3", "config": {"bucket": "b", "key": "k", "secret_key": S3_SECRET}},
    }
    (root / "other" / ".terraform").mkdir(parents=True)  # another root module's cache
    (root / "other" / ".terraform" / "terraform.tfstate").write_text(json.dumps(cache))
    (root / "modules" / "db").mkdir(parents=True)  # a folder named like .terraform's
    (root / "modules" / "db" / "copy.tfstate.json").write_bytes(state)
    (root / "prod.hcl").write_text(f'bucket = "b"\nsecret_key = "{S3_SECRET}"\n')
    plain = root / "plainws"
    plain.mkdir()
    (plain / "main.tf").write_text(f'output "plain" {{ value = "{PLAIN}" }}\n')
    tf(plain, "init", "-input=false")
    tf(plain, "plan", "-out=plain.plan", "-input=false")
    return root


def test_files_are_recognised_by_content(ws: Path):
    names = {"tok"}
    for name in ("terraform.tfstate", "notes.json", "old.gz", "p.bin", "secret.auto.tfvars"):
        out = tffiles.masked((ws / name).read_bytes(), names)
        assert out is not None, name
        body = gzip.decompress(out) if name.endswith(".gz") else out
        assert not leaked(body.decode("latin-1")), name
    for name in ("other/.terraform/terraform.tfstate", "prod.hcl"):
        out = tffiles.masked((ws / name).read_bytes())
        assert out is not None and S3_SECRET.encode() not in out and b'"b"' in out, name
    # controls: not terraform's, or nothing sensitive
    assert tffiles.masked((ws / "not-a-state" / "terraform.tfstate").read_bytes()) is None
    assert tffiles.masked((ws / "plainws" / "plain.plan").read_bytes()) is None
    assert tffiles.masked((ws / "main.tf").read_bytes(), {"tok"}) is None


def test_every_backend_has_its_secret_settings():
    shipped = {"local", "s3", "azurerm", "gcs", "http", "consul", "cos", "kubernetes"}
    shipped |= {"oss", "pg", "remote", "cloud", "oci", "inmem"}
    assert shipped <= set(backends.SECRET_SETTINGS)
    for kind, setting in [
        ("s3", "sse_customer_key"),
        ("azurerm", "sas_token"),
        ("azurerm", "client_certificate_password"),
        ("gcs", "encryption_key"),
        ("pg", "conn_str"),
        ("http", "password"),
        ("kubernetes", "token"),
    ]:
        assert backends.is_secret_setting(setting, kind)
    assert not backends.is_secret_setting("key", "s3")  # the state's path, not a secret
    assert not backends.is_secret_setting("bucket", "gcs")


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(cwd=ws, settings=Settings())


async def test_file_tools_read_masked_copies(ws: Path):
    ctx = _ctx(ws)
    for name in ("terraform.tfstate", "notes.json", "secret.auto.tfvars"):
        result = await ReadFileTool().run({"path": name}, ctx)
        assert not leaked(result.content) and "(sensitive)" in result.content, name
    plain = await ReadFileTool().run({"path": "not-a-state/terraform.tfstate"}, ctx)
    assert "just JSON" in plain.content
    state = await ReadFileTool().run({"path": "terraform.tfstate"}, ctx)
    assert PLAIN in state.content  # a plain output stays readable
    found = await GrepTool().run({"pattern": "Zq9|u0026Value", "path": ".", "glob": "*"}, ctx)
    assert not leaked(found.content)
    shown = await GrepTool().run({"pattern": "sensitive|Plain-Visible", "path": "."}, ctx)
    assert "notes.json" in shown.content and PLAIN in shown.content
    with pytest.raises(ToolError, match="terraform's state"):
        EditFileTool().preview(
            {"path": "notes.json", "old_string": "serial", "new_string": "x"}, ctx
        )


@sandboxed
async def test_the_shell_sees_masked_copies_terraform_the_originals(ws: Path, tmp_path: Path):
    tf_guard.register()  # as building the tools does
    work = tmp_path / "ws"
    shutil.copytree(ws, work, symlinks=True)
    bin_dir, log = make_fakes(tmp_path)
    (bin_dir / "terraform").unlink()  # the real one
    harness = Harness(work, bin_dir, log, mode="bypass")
    command = (
        "cat terraform.tfstate notes.json secret.auto.tfvars modules/db/* | rev; "
        "gzip -dc old.gz | rev; cat other/.terraform/terraform.tfstate prod.hcl | rev; "
        'python3 -c \'import zipfile,sys; z=zipfile.ZipFile("p.bin"); '
        '[sys.stdout.write(z.read(m).decode("latin-1")[::-1]) for m in z.namelist()]\'; '
        "echo; echo x >> notes.json; echo write=$?; "
        "cat not-a-state/terraform.tfstate; "
        'python3 -c \'import zipfile; print(zipfile.ZipFile("plainws/plain.plan")'
        '.read("tfplan").count(b"' + PLAIN + "\"))'; "
        "export TF_CLI_CONFIG_FILE=/dev/null; "
        "terraform plan -detailed-exitcode -input=false >/dev/null 2>&1; echo plan=$?; "
        # terraform's own output is masked inside the exec, before the pipe
        "terraform output -raw tok | rev; echo; terraform output -json | base64 -w0 | rev; "
        "terraform output -raw plain | rev; echo"
    )
    result = await harness.run(command, Asker())
    assert result is not None
    text = result.content
    assert not leaked(text), text
    assert S3_SECRET not in text and S3_SECRET[::-1] not in text
    assert "write=1" in text  # read-only in the shell
    assert "just JSON" in text  # control: not a state
    assert PLAIN[::-1] in text  # a plain output in the masked state stays readable
    assert "plan=0" in text  # guarded terraform read the original state: no change
    assert ")evitisnes(" in text  # `terraform output -raw tok | rev`
    assert PLAIN[::-1] in text.replace(")evitisnes(", "")  # a plain output, readable
    assert VALUE in (work / "notes.json").read_text().replace("\\u0026", "&").replace(
        "\\u003c", "<"
    ).replace("\\u003e", ">")
