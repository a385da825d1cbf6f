"""guard/tfcover/cover.py with a real bubblewrap sandbox: a masked copy is mounted over a file
in a running sandbox's mount namespace (read-only, the original untouched), and a file
that cannot be covered stops the sandbox's processes (fail closed)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from iac_kernel.guard.sandbox import processes
from iac_kernel.guard.sandbox.bwrap import Layout, bwrap_path, unusable_reason
from iac_kernel.guard.tfcover.cover import Cover, holders

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")


def _sandboxed(
    layout: Layout, script: str, hide: tuple[Path, ...] = ()
) -> tuple[subprocess.Popen, int]:
    """A sandbox of ``layout`` (and empty folders over ``hide``) running ``script``, and
    the pid of a process in it."""
    bwrap = bwrap_path()
    assert bwrap is not None
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--bind", str(layout.tmp_dir), "/tmp", "--bind", str(layout.cwd), str(layout.cwd)]
    for path in [*layout.masks, *hide]:
        args += ["--tmpfs", str(path)]
    args += ["--unshare-pid", "--die-with-parent", "--cap-drop", "ALL", "--"]
    proc = subprocess.Popen(
        [*args, "sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    own = os.stat("/proc/self/ns/mnt").st_ino
    for _ in range(100):
        for name in filter(str.isdigit, os.listdir("/proc")):
            pid, seen = int(name), set()
            try:
                if os.stat(f"/proc/{pid}/ns/mnt").st_ino == own:
                    continue
            except OSError:
                continue
            parent: int | None = pid
            while parent and parent not in seen:
                if parent == proc.pid:
                    return proc, pid
                seen.add(parent)
                parent = processes.parent_of(parent)
        time.sleep(0.05)
    raise AssertionError("no sandboxed process found")


def _layout(tmp_path: Path) -> Layout:
    cwd, tmp, hidden = tmp_path / "cwd", tmp_path / "tmp", tmp_path / "copies"
    for folder in (cwd, tmp, hidden):
        folder.mkdir()
    return Layout(cwd=cwd, tmp_dir=tmp, guard_dir=tmp, launcher_dir=tmp, masks=[hidden])


def test_a_copy_is_mounted_over_the_file_in_the_running_sandbox(tmp_path: Path):
    layout = _layout(tmp_path)
    secret, copy = layout.cwd / "state", layout.masks[0] / "copy"
    secret.write_text("real secret\n")
    copy.write_text("masked\n")
    intmp = layout.tmp_dir / "x"
    intmp.write_text("real too\n")
    found = {layout.cwd: [(copy, secret)], layout.tmp_dir: [(copy, intmp)]}
    cover = Cover(layout, lambda cwd, root: found.get(root, []))
    script = (
        f"echo ready; read go; cat {secret} /tmp/x; echo more >> {secret}; echo w=$?; "
        f"rm {secret}; echo rm=$?"
    )
    proc, pid = _sandboxed(layout, script)
    try:
        cover.watch(pid)
        assert cover.run() == []
        out, _ = proc.communicate("go\n", timeout=10)
    finally:
        cover.close()
        proc.kill()
    assert out.count("masked") == 2 and "real" not in out, out  # the folder and /tmp
    assert "w=1" in out or "w=2" in out  # read-only
    assert "rm=1" in out
    assert secret.read_text() == "real secret\n"  # the original is untouched
    assert (copy, secret) in layout.overlays  # later sandboxes mount them too
    assert (copy, Path("/tmp/x")) in layout.overlays  # where the sandbox shows it


def test_a_file_that_cannot_be_covered_stops_the_sandbox(tmp_path: Path):
    layout = _layout(tmp_path)
    unseen = layout.cwd / "unseen"  # the sandbox shows another folder there
    unseen.mkdir()
    secret, copy = unseen / "state", layout.masks[0] / "copy"
    secret.write_text("real secret\n")
    copy.write_text("masked\n")
    cover = Cover(layout, lambda cwd, root: [(copy, secret)] if root == layout.cwd else [])
    proc, pid = _sandboxed(layout, "echo ready; exec sleep 30", hide=(unseen,))
    try:
        cover.watch(pid)
        problems = cover.run()
        proc.wait(timeout=10)
    finally:
        cover.close()
        proc.kill()
    assert problems and "stopped" in problems[-1], problems
    assert proc.returncode is not None


def test_the_guards_own_folders_are_never_covered(tmp_path: Path):
    layout = _layout(tmp_path)
    assert layout.inside_path(str(layout.tmp_dir / "a")) == "/tmp/a"
    assert layout.inside_path(str(layout.cwd / "b")) == str(layout.cwd / "b")
    assert layout.inside_path(str(layout.masks[0] / "c")) is None  # hidden inside
    assert layout.inside_path("/etc/passwd") is None  # not a writable place


def test_holders_finds_a_descriptor_in_the_namespace(tmp_path: Path):
    layout = _layout(tmp_path)
    target = layout.cwd / "f"
    target.write_text("x")
    proc, pid = _sandboxed(layout, f"exec 3<{target}; echo ready; exec sleep 30")
    try:
        st = target.stat()
        ns = os.stat(f"/proc/{pid}/ns/mnt").st_ino
        found = holders({(st.st_dev, st.st_ino)}, {ns})
        assert found and all(os.stat(f"/proc/{p}/ns/mnt").st_ino == ns for p in found)
        other = layout.tmp_dir / "g"
        other.write_text("y")
        assert holders({(other.stat().st_dev, other.stat().st_ino)}, {ns}) == []
    finally:
        proc.kill()


def _step(proc: subprocess.Popen, line: str) -> str:
    """Send ``line`` to the sandboxed script; what it printed up to its next ``--``."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    out = []
    while (got := proc.stdout.readline()) not in ("--\n", ""):
        out.append(got)
    return "".join(out)


def test_files_terraform_may_write_are_covered_before_it_runs(tmp_path: Path):
    layout = _layout(tmp_path)
    state, plan = layout.cwd / "terraform.tfstate", layout.cwd / "out.plan"
    copy = layout.masks[0] / "copy"
    copy.write_text("masked\n")
    sensitive: list[tuple[Path, Path]] = []
    cover = Cover(layout, lambda cwd, root: sensitive if root == layout.cwd else [])
    script = (
        "echo ready; while read step; do cat terraform.tfstate out.plan 2>&1; "
        "[ $step = during ] && { mkfifo f; mv -f f terraform.tfstate; echo swap=$?; rm -f f; }; "
        "[ $step = last ] && { rm out.plan; echo rm=$?; ls -a; }; echo --; done"
    )
    proc, pid = _sandboxed(layout, f"cd {layout.cwd}; {script}")
    try:
        cover.watch(pid)
        argv = ["terraform", "apply", "-out=out.plan"]  # (apply takes no -out: a plan's)
        held, problems = cover.hold(argv, str(layout.cwd), {})
        assert problems == [] and state.exists() and plan.exists()
        shown = {o: c for c, o in layout.overlays}  # sandboxes started meanwhile too
        assert shown[state].read_text() == "" and shown[plan].read_text() == ""
        with state.open("r+") as fh:  # terraform writes in place (the same inode)
            fh.write("real secret\n")
        with plan.open("r+") as fh:
            fh.write("plain plan\n")
        during = _step(proc, "during")
        sensitive.append((copy, state))
        assert cover.settle(held) == []
        after = _step(proc, "last")
        assert (copy, state) in layout.overlays
        assert plan not in {o for _, o in layout.overlays}  # shown as it is now
    finally:
        cover.close()
        proc.kill()
    assert "real" not in during and "plain" not in during, during  # the placeholders
    assert "swap=1" in during, during  # a held file cannot be replaced (a FIFO)
    assert "masked" in after and "real" not in after, after
    assert "plain plan" in after and "rm=0" in after, after  # not sensitive: shown whole
    assert "backup" not in after and "errored" not in after, after  # made, then put back
    assert state.read_text() == "real secret\n"
    assert not (layout.cwd / "terraform.tfstate.backup").exists()


def test_a_state_present_before_shows_as_it_was_while_terraform_runs(tmp_path: Path):
    layout = _layout(tmp_path)
    state = layout.cwd / "terraform.tfstate"
    state.write_text("old plain state\n")
    cover = Cover(layout, lambda cwd, root: [])
    script = "echo ready; while read step; do cat terraform.tfstate; echo --; done"
    proc, pid = _sandboxed(layout, f"cd {layout.cwd}; {script}")
    try:
        cover.watch(pid)
        held, problems = cover.hold(["terraform", "apply"], str(layout.cwd), {})
        assert problems == []
        with state.open("r+") as fh:
            fh.write("new secret state\n")
        during = _step(proc, "during")
        assert cover.settle(held) == []
        after = _step(proc, "after")
    finally:
        cover.close()
        proc.kill()
    assert during == "old plain state\n", during
    assert after == "new secret state\n", after  # the scan found nothing sensitive


def test_a_folder_renamed_while_terraform_runs_stops_the_shell(tmp_path: Path):
    layout = _layout(tmp_path)
    (layout.cwd / "sub").mkdir()
    cover = Cover(layout, lambda cwd, root: [])
    proc, pid = _sandboxed(layout, "echo ready; exec sleep 30")
    try:
        cover.watch(pid)
        argv = ["terraform", "plan", "-out=sub/p"]
        held, problems = cover.hold(argv, str(layout.cwd), {})
        assert problems == [] and (layout.cwd / "sub" / "p").exists()
        os.rename(layout.cwd / "sub", layout.cwd / "old")  # outside the shell's view
        (layout.cwd / "sub").mkdir()
        (layout.cwd / "sub" / "p").write_text("a new file terraform wrote\n")
        problems = cover.settle(held)
        proc.wait(timeout=10)
    finally:
        cover.close()
        proc.kill()
    assert any("moved while terraform ran" in p for p in problems), problems
    assert proc.returncode is not None  # stopped


def test_the_folders_on_the_way_cannot_be_renamed_while_terraform_runs(tmp_path: Path):
    layout = _layout(tmp_path)
    (layout.cwd / "a" / "b").mkdir(parents=True)
    (layout.cwd / "a" / "b" / "keep").write_text("seen\n")
    cover = Cover(layout, lambda cwd, root: [])
    script = (
        "echo ready; read go; mv a/b a/c; echo b=$?; mv a z; echo a=$?; "
        "cat a/b/keep; echo x >> a/b/keep; echo w=$?; ls a/b; echo --"
    )
    proc, pid = _sandboxed(layout, f"cd {layout.cwd}; {script}")
    try:
        cover.watch(pid)
        argv = ["terraform", "apply", "-state-out=a/b/s.json"]
        held, problems = cover.hold(argv, str(layout.cwd), {})
        assert problems == []
        out = _step(proc, "go")
        assert cover.settle(held) == []
    finally:
        cover.close()
        proc.kill()
    assert "b=1" in out and "a=1" in out, out  # EBUSY: mount points
    assert "seen" in out and "w=0" in out, out  # the rest of the folder as it was
    assert (layout.cwd / "a" / "b" / "keep").read_text() == "seen\nx\n"


def test_a_symlink_at_a_held_path_cannot_be_repointed_while_terraform_runs(tmp_path: Path):
    layout = _layout(tmp_path)
    os.symlink("real.json", layout.cwd / "terraform.tfstate")
    cover = Cover(layout, lambda cwd, root: [])
    script = (
        "echo ready; while read step; do ln -sfn other.json terraform.tfstate; "
        "echo ln=$?; cat terraform.tfstate; echo --; done"
    )
    proc, pid = _sandboxed(layout, f"cd {layout.cwd}; {script}")
    try:
        cover.watch(pid)
        held, problems = cover.hold(["terraform", "apply"], str(layout.cwd), {})
        assert problems == []
        with (layout.cwd / "real.json").open("r+") as fh:  # terraform, through the link
            fh.write("written\n")
        during = _step(proc, "during")
        assert cover.settle(held) == []
        after = _step(proc, "after")
    finally:
        cover.close()
        proc.kill()
    assert "ln=1" in during and "written" not in during, during  # held: EBUSY
    assert "ln=0" in after, after  # the shell's again
    assert os.readlink(layout.cwd / "terraform.tfstate") == "other.json"
    assert (layout.cwd / "real.json").read_text() == "written\n"


def test_the_folder_of_a_state_masked_already_cannot_be_swapped(tmp_path: Path):
    layout = _layout(tmp_path)
    ws = layout.cwd / "terraform.tfstate.d" / "w"
    ws.mkdir(parents=True)
    (ws / "terraform.tfstate").write_text("real secret\n")
    copy = layout.masks[0] / "copy"
    copy.write_text("masked\n")
    layout.overlays = [(copy, ws / "terraform.tfstate")]  # as bwrap mounted it
    cover = Cover(layout, lambda cwd, root: [])
    proc, pid = _sandboxed(layout, f"cd {layout.cwd}; echo ready; read go; mv {ws} x; echo mv=$?")
    try:
        cover.watch(pid)
        env = {"TF_WORKSPACE": "w"}
        held, problems = cover.hold(["terraform", "apply"], str(layout.cwd), env)
        assert problems == []
        assert all(h.inside != str(ws / "terraform.tfstate") for h in held)  # masked
        out, _ = proc.communicate("go\n", timeout=10)
        cover.settle(held)
    finally:
        cover.close()
        proc.kill()
    assert "mv=1" in out, out
