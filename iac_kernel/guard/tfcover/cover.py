"""Terraform's sensitive files written during a call: covered in the call's shell before
terraform writes them, masked once it returns.

The shell of a sandboxed call sees masked copies of the sensitive terraform files that
existed when it started (bind mounts made by bwrap). A guarded terraform/tofu runs in a
sibling sandbox with the originals and can write new ones (a state, its backup, a plan,
a backend cache) in the folder, the call's /tmp or a writable path.

Before it starts, :meth:`Cover.hold` covers every file it may write (:mod:`.writes`) in
the mount namespace of each waiting shell with a placeholder (the file as it was, or
empty: a missing file is made first, :mod:`.held`), its other names (hard links) and a
symlink at its path; each folder between a writable place and such a file is mounted
over itself, so the shell cannot rename it and make another where terraform would
write; processes of the shell holding a held file open are stopped. A file that cannot
be held refuses the run. Terraform writes these files in place, so the shell keeps
seeing the placeholder. When it has returned, and before its exit status goes back,
:meth:`Cover.settle` scans those places by content and mounts a read-only masked copy
over every sensitive file (``cover_helper.py``, as the guard's own user: ``setns`` +
``move_mount``; added to the layout for sandboxes started later), takes the other
placeholders off and removes the files made for the run that terraform did not write.

A process of the shell holding a rewritten file open or mapped when terraform returns
is killed (its descriptor would read what the mount hides); a held path that names
another file by then stops the shell. What this cannot close (docs/masking.md): files
named only as terraform runs (a ``state`` command's timestamped backup after its first
seconds), a symlinked folder re-pointed while it runs, a descriptor in flight in a unix
socket, a hard link beyond the scan's limits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from iac_kernel.guard.sandbox.bwrap import Layout, process_dir
from iac_kernel.guard.tfcover import held as held_files
from iac_kernel.guard.tfcover.held import Held, identity
from iac_kernel.guard.tfcover.writes import targets
from iac_kernel.interpreter import sandbox_python

log = logging.getLogger(__name__)

#: Scans and mounts (and rounds of killing descriptor holders) at most this many times
#: before the shell is stopped.
ROUNDS = 3

#: ``scan(cwd, root)``: (masked copy, host path) for each sensitive file under ``root``,
#: with what is known of the workspace at ``cwd``.
Scan = Callable[[Path, Path], list[tuple[Path, Path]]]


class Cover:
    """The mount namespaces of one call's shell, and masking what terraform wrote."""

    def __init__(self, layout: Layout, scan: Scan) -> None:
        self.layout = layout
        self.scan = scan
        #: namespace inode -> an open descriptor of it (keeps it, whatever the pid does).
        self._namespaces: dict[int, int] = {}
        #: (namespace inode, path inside) -> (copy, dev, ino) already mounted there.
        self._done: dict[tuple[int, str], tuple[str, int, int]] = {}
        self._lock = threading.Lock()
        self._own = ns_inode("/proc/self/ns/mnt")
        #: ``(dev, ino)`` of every placeholder mounted by :meth:`hold`, and their folder.
        self._placeholders: set[tuple[int, int]] = set()
        self._held_dir: Path | None = None
        #: (namespace inode, folder inside, dev, ino) mounted over itself (:meth:`_pin`).
        self._pinned: set[tuple[int, str, int, int]] = set()
        #: Paths inside covered by the last scan (a masked copy on top there).
        self._covered_now: set[str] = set()

    def watch(self, pid: int) -> None:
        """Remember the mount namespace of ``pid`` (a process of the call's shell)."""
        try:
            fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        inode = os.fstat(fd).st_ino
        with self._lock:
            if inode == self._own or inode in self._namespaces:
                os.close(fd)  # never our own namespace: the mounts would be the host's
                return
            self._namespaces[inode] = fd

    def roots(self) -> list[Path]:
        """Where the shell can write: its folder, its /tmp and the writable paths."""
        found = [self.layout.cwd, self.layout.tmp_dir, *self.layout.writable]
        return [Path(os.path.realpath(p)) for p in found if os.path.isdir(p)]

    def run(self) -> list[str]:
        """Mount masked copies of every sensitive file under :meth:`roots` in the
        namespaces watched; returns what could not be covered (empty: all covered)."""
        with self._lock:
            return self._run()

    def hold(
        self, argv: Sequence[str], cwd: str, env: Mapping[str, str]
    ) -> tuple[list[Held], list[str]]:
        """Before a guarded terraform/tofu runs ``argv``: cover each file it may write
        (:mod:`.writes`, made when missing: :mod:`.held`) with a placeholder in the
        watched namespaces, and stop the processes holding one open. The files held,
        and what could not be covered (then nothing is held: terraform must not run)."""
        with self._lock:
            helds: list[Held] = []
            try:
                problems: list[str] = []
                found = targets(argv, cwd, env, self.layout.host_path)
                for target in found:
                    host = self.layout.host_path(target.path)
                    problems += self._prepare(host, target.content, target.make_dirs, helds)
                    problems += self._prepare_link(target.named, host, helds)
                hosts = [os.path.normpath(self.layout.host_path(t.path)) for t in found]
                problems = problems or self._pin(hosts) or self._hold(helds)
                if not problems:  # its other names (hard links) show what it shows
                    links, problems = self._links(helds)
                    helds += links
                    problems += self._hold(links)
            except BaseException:
                self._release(helds)
                raise
            if problems:
                self._release(helds)
                return [], problems
            self._stop_holders([Path(h.host) for h in helds])
            # Sandboxes started while terraform runs (git, aws ...) show them too.
            shown = [h for h in helds if not h.link]
            self.layout.overlays += [(Path(h.placeholder), Path(h.inside)) for h in shown]
            return helds, []

    def _prepare(self, host: str, content: bytes, make_dirs: bool, helds: list[Held]) -> list[str]:
        """Add ``host`` to ``helds`` when it is in a writable place and not masked; why
        it cannot be."""
        host = os.path.normpath(host)
        inside = self.layout.inside_path(host)
        held = {str(o) for c, o in self.layout.overlays if c.parent == self._held_dir}
        covered = {str(o) for _, o in self.layout.overlays} - held  # masked copies
        if inside is None or inside in covered or inside in (h.inside for h in helds):
            return []  # not a writable place, or masked already
        root = next((r for r in map(str, self.roots()) if host.startswith(f"{r}/")), None)
        if root is None:
            return []
        one = held_files.prepare(inside, host, root, content, make_dirs, self._folder())
        return self._add(one, inside, helds)

    def _prepare_link(self, named: str, host: str, helds: list[Held]) -> list[str]:
        """Hold the symlink ``named`` (inside) if it leads to the held ``host``."""
        link = self.layout.host_path(named) if named else ""
        inside = self.layout.inside_path(link) if link else None
        if inside is None or not os.path.islink(link):
            return []  # a symlink above the file only: docs/masking.md
        target = next((h for h in helds if h.host == os.path.normpath(host)), None)
        shown = Path(target.placeholder).read_bytes() if target else b""
        return self._add(
            held_files.prepare_link(inside, link, shown, self._folder()), inside, helds
        )

    def _add(self, one: Held | str, inside: str, helds: list[Held]) -> list[str]:
        """Add ``one`` to ``helds`` (its placeholder is ours); or why it cannot be held."""
        if isinstance(one, str):
            return [f"{inside}: {one}"]
        helds.append(one)
        self._placeholders.add(one.shown)
        return []

    def _folder(self) -> Path:
        """The guard's private folder of this call's placeholders."""
        if self._held_dir is None:
            self._held_dir = Path(tempfile.mkdtemp(dir=process_dir()))
        return self._held_dir

    def _links(self, helds: list[Held]) -> tuple[list[Held], list[str]]:
        """The other names of ``helds`` under the roots (held too), and a problem for a
        file made here whose every link cannot be found (linked as it was made)."""
        found: list[Held] = []
        problems: list[str] = []
        for h in [h for h in helds if not h.link]:
            with contextlib.suppress(OSError):
                count = os.stat(h.host, follow_symlinks=False).st_nlink
                if count < 2:
                    continue
                names = held_files.links(h.file_id, [str(r) for r in self.roots()])
                for name in names:
                    if all(x.host != os.path.normpath(name) for x in helds):
                        problems += self._prepare(name, b"", False, found)
                if h.made is not None and len(names) < count:
                    problems.append(f"{h.inside}: linked where the guard cannot find it")
        return found, problems

    def _pin(self, files: list[str]) -> list[str]:
        """Mount each folder between a root and one of ``files`` (host paths terraform
        may write, held or masked already) over itself in the watched namespaces, for
        the rest of the call: renamed and made again while terraform runs, it would
        have terraform write a new, uncovered file. What failed."""
        roots = [str(r) for r in self.roots()]
        folders: dict[str, tuple[int, int]] = {}
        for path in files:
            for each in held_files.folders_between(path, roots):
                inside = self.layout.inside_path(each)
                ident = held_files.identity(each)
                if inside is not None and ident is not None:
                    folders.setdefault(inside, ident)
        problems: list[str] = []
        for inode, fd in list(self._namespaces.items()):
            todo = [(p, i) for p, i in folders.items() if (inode, p, *i) not in self._pinned]
            items = [{"pin": True, "path": p, "dev": i[0], "ino": i[1]} for p, i in todo]
            if not items:
                continue
            for (path, ident), result in zip(todo, run_helper(fd, items, []), strict=False):
                if result == "pinned":
                    self._pinned.add((inode, path, *ident))
                else:
                    problems.append(f"{path}: {result}")
        return problems

    def _hold(self, helds: list[Held]) -> list[str]:
        """Mount the placeholders of ``helds``; what failed."""
        problems: list[str] = []
        ours = [list(p) for p in self._placeholders]
        for inode, fd in list(self._namespaces.items()) if helds else ():
            items = [_item(h.placeholder, h.inside, h.file_id, h.shown) for h in helds]
            for h, result in zip(helds, run_helper(fd, items, ours), strict=False):
                if result == "covered":
                    self._done.pop((inode, h.inside), None)  # the next scan mounts again
                else:
                    problems.append(f"{h.inside}: {result}")
        return problems

    def settle(self, helds: list[Held]) -> list[str]:
        """After a guarded terraform/tofu returned: :meth:`run`, then take the
        placeholders of ``helds`` off where no masked copy went over them, and put back
        the files terraform did not write. A held path that no longer names the file
        held (a folder on the way renamed and made again while terraform ran) may have
        had terraform write an uncovered file: the call's shell is stopped (fail closed)."""
        with self._lock:
            swapped = [h.inside for h in helds if held_files.identity(h.host) != h.file_id]
            problems = self._run()
            if swapped:
                log.warning("guard: a path terraform wrote moved while it ran: %s", swapped)
                self._stop_all()
                problems += [f"{p}: moved while terraform ran" for p in swapped]
                problems.append("the call's shell was stopped")
            self._release(helds, keep=self._covered_now)
            return problems

    def release(self, helds: list[Held]) -> None:
        """Undo :meth:`hold` (terraform did not start)."""
        with self._lock:
            self._release(helds)

    def _release(self, helds: list[Held], keep: set[str] | None = None) -> None:
        """Take the placeholders off (but where ``keep`` says a masked copy is on top)
        and put the files back."""
        ours = {Path(h.placeholder) for h in helds}
        self.layout.overlays = [(c, o) for c, o in self.layout.overlays if c not in ours]
        shown = [h for h in helds if h.inside not in (keep or set())]
        items = [{"unmount": True, "path": h.inside, "shown": list(h.shown)} for h in shown]
        off = {h.placeholder for h in shown}
        for fd in list(self._namespaces.values()) if items else ():
            for h, result in zip(shown, run_helper(fd, items, []), strict=False):
                if result != "unmounted":
                    off.discard(h.placeholder)
                if result not in ("unmounted", "other"):
                    log.warning("guard: a placeholder stays on %s: %s", h.inside, result)
        held_files.put_back(helds)
        # Only those taken off: removing a file detaches the mounts on it (a masked
        # copy over its placeholder) in every namespace.
        for path in off:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _run(self) -> list[str]:
        stopped: list[str] = []
        for _round in range(ROUNDS):
            pairs, problems = self._cover_all()
            if problems:  # fail closed: the shell must not go on next to an uncovered file
                for problem in problems:
                    log.warning("guard: a masked copy could not be mounted: %s", problem)
                self._stop_all()
                return [*stopped, *problems, "the call's shell was stopped"]
            killed = self._stop_holders([original for _, original in pairs.values()])
            if not killed:
                return stopped
            stopped += killed  # a holder may have linked the file anew before it died
        self._stop_all()
        return [*stopped, "the call's shell was stopped"]

    def _cover_all(self) -> tuple[dict[str, tuple[Path, Path]], list[str]]:
        """Scan and mount until every sensitive file is covered (again when the shell
        moved one meanwhile); the files, and what stayed uncovered."""
        pairs: dict[str, tuple[Path, Path]] = {}
        problems: list[str] = []
        for _round in range(ROUNDS):
            pairs = self._scan()
            self._covered_now = set(pairs)
            self._add_to_layout(pairs)
            problems = []
            for inode, fd in list(self._namespaces.items()):
                problems += self._cover(inode, fd, pairs)
            if not problems:
                break
        return pairs, problems

    def _scan(self) -> dict[str, tuple[Path, Path]]:
        """path inside -> (copy, host path) of every sensitive file under the roots."""
        pairs: dict[str, tuple[Path, Path]] = {}
        for root in self.roots():
            for copy, original in self.scan(self.layout.cwd, root):
                inside = self.layout.inside_path(str(original))
                if inside is not None:
                    pairs[inside] = (copy, original)
        return pairs

    def _cover(self, inode: int, fd: int, pairs: dict[str, tuple[Path, Path]]) -> list[str]:
        """Mount in one namespace what is not mounted there yet; what failed."""
        items = []
        ours = copies({c.parent for c, _ in pairs.values()})
        for inside, (copy, original) in sorted(pairs.items()):
            try:
                st = os.stat(original, follow_symlinks=False)
                own = os.stat(copy)
            except OSError:
                continue
            if self._done.get((inode, inside)) != (str(copy), st.st_dev, st.st_ino):
                items.append(
                    _item(str(copy), inside, (st.st_dev, st.st_ino), (own.st_dev, own.st_ino))
                )
        if not items:
            return []
        ours += [list(p) for p in self._placeholders]
        problems: list[str] = []
        for item, result in zip(items, run_helper(fd, items, ours), strict=False):
            if result == "covered":
                self._done[(inode, item["path"])] = (item["copy"], item["dev"], item["ino"])
            else:
                problems.append(f"{item['path']}: {result}")
        return problems

    def _stop_all(self) -> None:
        """Kill every process of the watched namespaces (the call's shell)."""
        for pid in pids_in(set(self._namespaces)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _stop_holders(self, files: list[Path]) -> list[str]:
        """Kill every process of the watched namespaces that holds one of ``files`` open
        or mapped, and wait until they are gone: terraform rewrites a state or plan in
        place, so a descriptor taken before (or while it ran) would read the values the
        mount now hides. One line for each."""
        found = (identity(str(path), follow_symlinks=True) for path in files)
        wanted = {file_id for file_id in found if file_id is not None}
        pids = holders(wanted, set(self._namespaces)) if wanted and self._namespaces else []
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        wait_dead(pids)
        problems = [f"process {pid} held a terraform file open: stopped" for pid in pids]
        for problem in problems:
            log.warning("guard: %s", problem)
        return problems

    def _add_to_layout(self, pairs: dict[str, tuple[Path, Path]]) -> None:
        """Sandboxes started from now on (other guarded programs) mount the copies too."""
        kept = [(c, o) for c, o in self.layout.overlays if str(o) not in pairs]
        self.layout.overlays = kept + [(c, Path(i)) for i, (c, _) in sorted(pairs.items())]

    def close(self) -> None:
        with self._lock:
            for fd in self._namespaces.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._namespaces.clear()
            if self._held_dir is not None:
                shutil.rmtree(self._held_dir, ignore_errors=True)


def _item(copy: str, inside: str, file_id: tuple[int, int], shown: tuple[int, int]) -> dict:
    """The helper's request to mount ``copy`` (``shown``: its ``(dev, ino)``) over
    ``inside`` while that still is the file ``file_id`` (or an older copy)."""
    return {"copy": copy, "path": inside, "dev": file_id[0], "ino": file_id[1], "shown": [*shown]}


#: The helper that mounts in a shell's mount namespace (a script: standard library only).
HELPER = os.path.realpath(Path(__file__).with_name("cover_helper.py"))


def run_helper(fd: int, items: list[dict], ours: list[list[int]]) -> list[str]:
    """The helper's result for each of ``items`` in the namespace open at ``fd``
    (``ours``: ``[dev, ino]`` of the copies a path may show to be mounted over)."""
    try:
        done = subprocess.run(
            [sandbox_python(), "-IS", HELPER, str(fd)],
            input=json.dumps({"items": items, "ours": ours}),
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            timeout=30,
            check=False,
        )
        results = json.loads(done.stdout or "null")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return [f"cannot run the helper: {exc}"] * len(items)
    if not isinstance(results, list) or len(results) != len(items):
        text = (done.stderr or "").strip().splitlines()
        return [text[-1] if text else "the helper failed"] * len(items)
    return [str(r) for r in results]


def copies(folders: set[Path]) -> list[list[int]]:
    """``[dev, ino]`` of every masked copy in ``folders`` (a path showing one is masked)."""
    found: list[list[int]] = []
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    found.append([st.st_dev, st.st_ino])
    return found


def holders(files: set[tuple[int, int]], namespaces: set[int]) -> list[int]:
    """Pids in the mount ``namespaces`` (inodes) with a descriptor on, or a mapping of,
    one of ``files`` (``(st_dev, st_ino)``)."""
    found: list[int] = []
    for pid in pids_in(namespaces):
        name = str(pid)
        for folder in ("fd", "map_files"):
            try:
                entries = os.listdir(f"/proc/{name}/{folder}")
            except OSError:
                continue
            held = (identity(f"/proc/{name}/{folder}/{e}", follow_symlinks=True) for e in entries)
            if any(file_id in files for file_id in held):
                found.append(int(name))
                break
    return found


def wait_dead(pids: list[int], limit: float = 2.0) -> None:
    """Wait (at most ``limit`` seconds) until ``pids`` are gone or zombies: their
    descriptors are closed then."""
    end = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < end:
            try:
                state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
            except (OSError, IndexError):
                break
            if state in (b"Z", b"X"):
                break
            time.sleep(0.01)


def pids_in(namespaces: set[int]) -> list[int]:
    """The processes whose mount namespace is one of ``namespaces`` (inodes)."""
    names = [n for n in os.listdir("/proc") if n.isdigit()]
    return [int(n) for n in names if ns_inode(f"/proc/{n}/ns/mnt") in namespaces]


def ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
