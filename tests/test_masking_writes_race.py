"""Issue 32 item 1, reads while terraform runs: a process of the same call's shell
reading the files terraform writes, in a loop next to it, never gets a sensitive value
(``Cover.hold``: they are covered before terraform starts). Real terraform, real
bubblewrap.

The reader keeps every version it reads, raw (a plan's zip members unpacked), in a file
the test reads on the host: no encoding of a value can be in what it saw if the value
is not. Routes: ``apply`` making a new state (and its backup), ``apply`` over a state
without sensitive values, a hard link to it made before, ``plan -out`` to a new file,
a folder on the way renamed and made again in a loop, the timestamped backup of
``state rm``, a workspace's state,
``-state-out`` into a new folder. Controls: a state without sensitive values stays
readable whole and removable after the run; a failed run leaves no file behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.guard.sandbox.bwrap import unusable_reason
from terraform_support import needs_terraform, no_checkov_by_default, tf  # noqa: F401
from tf_writes_support import APPLY, PLAIN, VALUE, copy_work, leaked, new_base, run

pytestmark = [
    needs_terraform,
    pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable"),
]

READER = """
import glob, io, os, sys, zipfile
seen, reads = {}, 0
with open("seen.log", "ab") as out:
    open("ready", "w").close()
    while not os.path.exists("stop"):
        for name in [n for a in sys.argv[1:] for n in glob.glob(a) or [a]]:
            try:
                with open(name, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            reads += 1
            if seen.get(name) == data:
                continue
            seen[name] = data
            if data.startswith(b"PK"):
                try:
                    z = zipfile.ZipFile(io.BytesIO(data))
                    data += b"".join(z.read(m) for m in z.namelist())
                except Exception:
                    pass
            out.write(b"\\n--- " + name.encode() + b"\\n" + data)
            out.flush()
    out.write(b"\\nreads=%d\\n" % reads)
"""


SWAP = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
swaps = tries = 0
while not os.path.exists(sys.argv[1] + "/p"):  # made by the guard: terraform is starting
    time.sleep(0.001)
time.sleep(0.3)
while not os.path.exists("stop"):
    tries += 1
    swaps += libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) == 0
open("swapped", "w").write(f"swaps={swaps} tries={tries}\\n")
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_base(tmp_path_factory)


@pytest.fixture
def work(base: Path, tmp_path: Path) -> Path:
    work = copy_work(base, tmp_path)
    (work / "reader.py").write_text(READER)
    return work


async def read_while(work: Path, files: list[str], command: str, before: str = "") -> str:
    """What the reader saw of ``files`` while ``command`` ran (after ``before``)."""
    script = (
        # a reader holding a file open when it is covered is stopped: start another
        f"{before}(while [ ! -e stop ]; do python3 reader.py {' '.join(files)}; done) & "
        "while [ ! -e ready ]; do sleep 0.02; done; "
        f"{command}; echo rc=$?; sleep 0.2; touch stop; wait"
    )
    text = await run(work, script)
    assert "rc=0" in text, text
    seen = (work / "seen.log").read_bytes().decode("latin-1")
    reads = [int(line[6:]) for line in seen.splitlines() if line.startswith("reads=")]
    assert sum(reads) > 10, seen[-300:]
    return seen


def written(path: Path) -> bool:
    """The host file holds the value (terraform wrote it, Go-escaped in JSON)."""
    data = path.read_bytes().decode("latin-1")
    return "Wx7-Hidden\\u0026Token" in data or VALUE in data


async def test_apply_making_a_new_state(work: Path):
    files = ["terraform.tfstate", "terraform.tfstate.backup", "errored.tfstate"]
    seen = await read_while(work, files, f"{APPLY} >/dev/null")
    assert written(work / "terraform.tfstate")
    assert not leaked(seen), leaked(seen)
    assert "(sensitive)" in seen  # it read the masked copy once terraform returned
    assert not (work / "errored.tfstate").exists()  # made for the run, not written
    assert not (work / "terraform.tfstate.backup").exists()


async def test_apply_over_a_state_without_sensitive_values(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false", "-var", "on=false")
    assert not written(work / "terraform.tfstate")
    files = ["terraform.tfstate", "terraform.tfstate.backup"]
    seen = await read_while(work, files, f"{APPLY} >/dev/null")
    assert written(work / "terraform.tfstate")
    assert not leaked(seen), leaked(seen)
    assert PLAIN in seen and "(sensitive)" in seen  # the old state whole, then masked


async def test_a_hard_link_made_before(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false", "-var", "on=false")
    before = "mkdir -p deep/er && ln terraform.tfstate deep/er/x && "
    seen = await read_while(work, ["deep/er/x"], f"{APPLY} >/dev/null", before)
    assert written(work / "deep" / "er" / "x")
    assert not leaked(seen), leaked(seen)
    assert PLAIN in seen and "(sensitive)" in seen


async def test_plan_out_to_a_new_file(work: Path):
    command = "terraform plan -out=p -input=false >/dev/null"
    seen = await read_while(work, ["p"], command)
    assert written_plan(work / "p")
    assert not leaked(seen), leaked(seen)


def written_plan(path: Path) -> bool:
    import zipfile

    with zipfile.ZipFile(path) as z:
        return any(VALUE in z.read(m).decode("latin-1") for m in z.namelist())


async def test_plan_out_in_a_folder_the_shell_tries_to_swap(work: Path):
    (work / "sub").mkdir()
    (work / "other").mkdir()
    (work / "swap.py").write_text(SWAP)
    before = "python3 swap.py sub other & "  # sub always exists: swapped atomically
    command = "terraform plan -out=sub/p -input=false >/dev/null"
    seen = await read_while(work, ["sub/p", "other/p"], command, before)
    swapped = (work / "swapped").read_text()
    assert "swaps=0 " in swapped and "tries=0" not in swapped, swapped  # all failed
    assert written_plan(work / "sub" / "p")
    assert not leaked(seen), leaked(seen)


async def test_the_timestamped_backup_of_a_state_command(work: Path):
    tf(work, "apply", "-auto-approve", "-input=false")  # a state with the value
    files = ["'terraform.tfstate.*.backup'"]
    seen = await read_while(work, files, "terraform state rm terraform_data.p >/dev/null")
    backups = [work / n for n in os.listdir(work) if n.startswith("terraform.tfstate.1")]
    assert len(backups) == 1 and written(backups[0]), backups  # the others put back
    assert not leaked(seen), leaked(seen)
    assert "(sensitive)" in seen


async def test_a_workspace_state(work: Path):
    state = "terraform.tfstate.d/w/terraform.tfstate"
    before = "terraform workspace new w >/dev/null && "
    seen = await read_while(work, [state, f"{state}.backup"], f"{APPLY} >/dev/null", before)
    assert written(work / state)
    assert not leaked(seen), leaked(seen)
    assert "(sensitive)" in seen


async def test_state_out_into_a_new_folder(work: Path):
    files = ["new/st.json", "new/st.json.backup", "terraform.tfstate"]
    seen = await read_while(work, files, f"{APPLY} -state-out=new/st.json >/dev/null")
    assert written(work / "new" / "st.json")
    assert not leaked(seen), leaked(seen)
    assert "(sensitive)" in seen
    assert not (work / "terraform.tfstate").exists()  # made for the run, not written


async def test_a_state_without_sensitive_values_is_readable_and_removable(work: Path):
    command = (
        f"{APPLY} -var on=false >/dev/null; cat terraform.tfstate; "
        "rm terraform.tfstate; echo rm=$?; ls"
    )
    text = await run(work, command)
    assert PLAIN in text and '"lineage"' in text, text
    assert "rm=0" in text, text  # no placeholder left mounted over it
    assert not (work / "terraform.tfstate").exists()


def listing(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in [*dirs, *files]
    }


async def test_a_failed_run_leaves_no_file_behind(work: Path):
    before = listing(work)
    command = (
        f"{APPLY} -var on=notabool -state-out=x/y.json; echo a=$?; "
        f"{APPLY} -var on=notabool; echo b=$?; "
        "terraform plan -out=q -var-file=missing.tfvars; echo c=$?; "
        "terraform workspace new w2 >/dev/null; TF_WORKSPACE=w2 "
        f"{APPLY} -var on=notabool; echo d=$?; "
        "TF_DATA_DIR=dd terraform init -input=false >/dev/null; echo e=$?; ls -aR"
    )
    text = await run(work, command)
    for step in "abcd":
        assert f"{step}=1" in text, text
    assert "e=0" in text, text
    after = listing(work)
    # terraform's own: the workspace and its selection; nothing the guard made stays
    made = {"terraform.tfstate.d", "terraform.tfstate.d/w2", ".terraform", ".terraform/environment"}
    assert after - before == made, after - before
