"""Issue 32 item 1, files terraform writes during a call: the same call's shell sees
them masked once the guarded terraform returns (``guard/cover.py``). Real terraform,
real bubblewrap.

Routes: ``cat`` after ``apply``, the backup, a workspace state under ``-chdir``,
``plan -out`` then unzip, a hard link made beforehand, a symlink planted at the state
path, ``-state-out`` in /tmp, a backend cache in a ``TF_DATA_DIR`` in /tmp, a program the
guard starts later (git) reading the new state, a plan or state written to
``/dev/stdout`` or a FIFO, ``TF_LOG_PATH``, a descriptor opened before terraform
rewrote the file in place. Controls:
a state without sensitive values stays readable whole, terraform reads the real state
on the next plan, ``terraform output`` of a plain output shows it, the host file keeps
the real value.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from iac_kernel.guard.sandbox.bwrap import unusable_reason
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401
from tf_writes_support import (
    APPLY,
    HTTP_SECRET,
    PLAIN,
    VALUE,
    copy_work,
    leaked,
    new_base,
    run,
)

pytestmark = [
    needs_terraform,
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_base(tmp_path_factory)


@pytest.fixture
def work(base: Path, tmp_path: Path) -> Path:
    return copy_work(base, tmp_path)


async def test_cat_after_apply_in_the_same_call(work: Path):
    text = await run(work, f"{APPLY} >/dev/null; echo rc=$?; cat terraform.tfstate | rev")
    assert "rc=0" in text, text
    assert not leaked(text), text
    assert "(sensitive)"[::-1] in text and PLAIN[::-1] in text  # masked, not hidden
    assert (
        VALUE.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        in (work / "terraform.tfstate").read_text()
    )  # the host keeps the real state


async def test_backup_and_next_plan_read_the_real_state(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false")  # a state with the value
    command = (
        f"{APPLY} -var plain=second >/dev/null; cat terraform.tfstate.backup | rev; "
        "terraform plan -detailed-exitcode -input=false -var plain=second >/dev/null 2>&1;"
        " echo plan=$?; terraform output -raw plain; echo"
    )
    text = await run(work, command)
    assert not leaked(text), text
    assert "plan=0" in text, text  # terraform read the real state: nothing to change
    assert "second" in text  # `terraform output` of a plain output
    assert "(sensitive)"[::-1] in text  # the backup, masked


async def test_plan_out_then_unzip(work: Path):
    command = (
        "terraform plan -out=p -input=false >/dev/null; echo rc=$?; "
        'python3 -c \'import zipfile,sys; z=zipfile.ZipFile("p"); '
        '[sys.stdout.write(z.read(m).decode("latin-1")[::-1]) for m in z.namelist()]\'; '
        "echo; unzip -p p tfplan | strings | rev; "
        "terraform apply -input=false -no-color p >/dev/null; echo apply=$?"
    )
    text = await run(work, command)
    assert "rc=0" in text and "apply=0" in text, text  # terraform applies the real plan
    assert not leaked(text), text


async def test_hard_link_made_before_apply(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false", "-var", "on=false")  # nothing sensitive
    command = (
        "mkdir -p deep/er; ln terraform.tfstate deep/er/x; "
        f"{APPLY} >/dev/null; cat deep/er/x terraform.tfstate | rev"
    )
    text = await run(work, command)
    assert not leaked(text), text
    assert "(sensitive)"[::-1] in text


async def test_symlink_planted_at_the_state_path(work: Path):
    command = (
        "ln -s /tmp/elsewhere.json terraform.tfstate; "
        f"{APPLY} >/dev/null; echo rc=$?; cat /tmp/elsewhere.json | rev"
    )
    text = await run(work, command)
    assert "rc=0" in text, text
    assert not leaked(text), text
    assert "(sensitive)"[::-1] in text


async def test_state_out_in_tmp_and_a_later_guarded_program(work: Path):
    command = (
        f"{APPLY} -state-out=/tmp/st.json >/dev/null; echo rc=$?; cat /tmp/st.json | rev; "
        # git runs in a sandbox started after terraform: it sees the masked copy too
        f"{APPLY} >/dev/null; git init -q . && git add terraform.tfstate && "
        "git -c user.name=a -c user.email=a@b commit -qm s && "
        "git show HEAD:terraform.tfstate | rev"
    )
    text = await run(work, command)
    assert "rc=0" in text, text
    assert not leaked(text), text
    assert text.count("(sensitive)"[::-1]) >= 2, text


async def test_backend_cache_in_a_data_dir_in_tmp(work: Path):
    (work / "backend.tf").write_text(
        'terraform {\n  backend "http" {\n    address = "http://127.0.0.1:9/state"\n  }\n}\n'
    )
    (work / "creds.hcl").write_text(f'username = "u"\npassword = "{HTTP_SECRET}"\n')
    command = (
        "TF_DATA_DIR=/tmp/d terraform init -input=false -backend-config=creds.hcl "
        ">/dev/null 2>&1; ls /tmp/d; cat /tmp/d/terraform.tfstate | rev"
    )
    text = await run(work, command)
    assert "terraform.tfstate" in text, text  # written (init itself fails offline)
    assert not leaked(text), text
    assert '"ptth"' in text  # the backend's other settings stay readable (reversed)


async def test_special_outputs_are_refused(work: Path):
    command = (
        "terraform plan -out=/dev/stdout -input=false | base64 -w0 | rev; echo; "
        "ln -s /dev/stdout out.plan; terraform plan -out=out.plan -input=false | base64 "
        "-w0 | rev; echo; mkfifo f; (base64 -w0 < f | rev > /tmp/got &); "
        f"{APPLY} -state-out=f; sleep 0.3; cat /tmp/got; echo; "
        "TF_LOG=trace TF_LOG_PATH=log.txt terraform plan -input=false >/dev/null; "
        "cat log.txt 2>&1 | rev"
    )
    text = await run(work, command)
    assert not leaked(text), text
    assert "UEsDB"[::-1] not in text, text  # no zip (a plan) in base64 came through
    assert text.count("refused as an output of terraform") == 3, text
    assert "TF_LOG_PATH is refused" in text, text


async def test_a_state_without_sensitive_values_stays_whole(work: Path):
    text = await run(work, f"{APPLY} -var on=false >/dev/null; cat terraform.tfstate")
    assert PLAIN in text and '"lineage"' in text, text
    assert "(sensitive)" not in text
    assert "rm=0" in await run(work, "rm terraform.tfstate; echo rm=$?")


async def test_a_descriptor_held_from_before_is_stopped(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false", "-var", "on=false")  # nothing sensitive
    command = (  # terraform rewrites the state, and a plan named again, in place
        "exec 3<terraform.tfstate; touch p; exec 4<p; "
        f"{APPLY} >/dev/null; terraform plan -out=p -input=false >/dev/null; "
        'rev <&3; python3 -c \'import sys; sys.stdout.write(open(4, "rb").read()'
        '.decode("latin-1")[::-1])\'; echo after'
    )
    text = await run(work, command)
    assert not leaked(text), text
    assert "after" not in text  # the shell holding them was stopped
    assert "serial" in (work / "terraform.tfstate").read_text()  # terraform's run stands


async def test_a_workspace_state_in_a_chdir_folder(work: Path):
    (work / "sub").mkdir()
    for name in ("main.tf", "secret.auto.tfvars"):
        shutil.copy(work / name, work / "sub" / name)
    command = (
        "terraform -chdir=sub init -input=false >/dev/null && "
        "terraform -chdir=sub workspace new w >/dev/null && "
        "terraform -chdir=sub apply -auto-approve -input=false >/dev/null; echo rc=$?; "
        "find sub/terraform.tfstate.d -type f; cat sub/terraform.tfstate.d/w/* | rev"
    )
    text = await run(work, command)
    assert "rc=0" in text and "terraform.tfstate.d/w/terraform.tfstate" in text, text
    assert not leaked(text), text
    assert "(sensitive)"[::-1] in text
