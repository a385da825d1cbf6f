"""The files a guarded terraform/tofu may write, made ready to be covered before it
starts (:meth:`.cover.Cover.hold`), and put back as they were when it has returned.

A mount needs a file to cover: a missing one is made (with the folders terraform would
make), empty or as :data:`.writes.NO_BACKEND` (terraform 1.11 reads both as nothing).
Terraform writes states, plans and the backend cache in place (the same inode), so a
mount over the file keeps hiding what it writes. Each file gets its own placeholder in
the guard's private folder: the shell sees the file as it was while terraform runs.
Afterwards a made file still holding what was made is removed, and so are the folders
made for it, when empty. Names are made, read and removed one at a time from the
writable place down, never through a symlink; a symlink at a held path is held too
(:func:`prepare_link`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: How far the guard's and the workspace's scans look (:func:`walk`).
MAX_DEPTH, MAX_ENTRIES = 64, 500_000


@dataclass
class Held:
    """One file held for a terraform run."""

    #: As the sandbox sees it, and on the host.
    inside: str
    host: str
    placeholder: str
    #: ``(dev, ino)`` of the file and of its placeholder.
    file_id: tuple[int, int]
    shown: tuple[int, int]
    #: ``(ino, size, mtime_ns)`` of a file made here (None: it existed).
    made: tuple[int, int, int] | None = None
    #: What the made file holds until terraform writes it.
    content: bytes = b""
    #: Folders made for it, outermost first.
    folders: list[str] = field(default_factory=list)
    #: A symlink leading to a held file (the placeholder goes over the link itself).
    link: bool = False
    #: The writable place (host) it is under.
    root: str = "/"


def prepare(
    inside: str, host: str, root: str, content: bytes, make_dirs: bool, folder: Path
) -> Held | str:
    """Make ``host`` (under ``root``) ready to be covered, or why it cannot be: not a
    regular file (a FIFO would hand terraform's writes to the shell), or a missing
    folder terraform would not make (the shell could make it while terraform runs).
    Every name under ``root`` is opened without following symlinks: a symlink the shell
    planted on the way cannot lead the guard to make or read a file elsewhere."""
    made: list[str] = []
    try:
        parent, made = _folder_fd(root, os.path.dirname(host), make_dirs)
    except FileNotFoundError:
        return "its folder does not exist"
    except OSError as exc:
        return f"its folder cannot be opened: {exc.strerror or exc}"
    name = os.path.basename(host)
    try:
        shown, st, created = _make_or_read(parent, name, content)
    except OSError as exc:
        remove_folders(root, made)
        return f"cannot be made or read: {exc.strerror or exc}"
    finally:
        os.close(parent)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    placeholder, own = _placeholder(folder, shown)
    return Held(
        inside,
        host,
        placeholder,
        (st.st_dev, st.st_ino),
        own,
        made=(st.st_ino, st.st_size, st.st_mtime_ns) if created else None,
        content=content,
        folders=made,
        root=root,
    )


def _make_or_read(parent: int, name: str, content: bytes) -> tuple[bytes, os.stat_result, bool]:
    """(what the file ``name`` in the folder ``parent`` shows, its status, made here):
    made holding ``content`` when missing, else read (what the shell can read now)."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            return content, os.fstat(fh.fileno()), True
    if not stat.S_ISREG(st.st_mode):
        return b"", st, False
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(), os.fstat(fh.fileno()), False


def _folder_fd(root: str, folder: str, make: bool) -> tuple[int, list[str]]:
    """A descriptor of ``folder`` (``root`` or under it), opened one name at a time
    without following symlinks, and the folders made on the way (when ``make``)."""
    rel = os.path.relpath(folder, root)
    if rel == ".." or rel.startswith("../"):
        raise OSError(errno.EXDEV, "not under a writable place")
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    made: list[str] = []
    path = root
    try:
        for name in [] if rel == "." else rel.split("/"):
            path = os.path.join(path, name)
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                made.append(path)
                nxt = os.open(name, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        remove_folders(root, made)
        raise
    return fd, made


def prepare_link(inside: str, host: str, shown: bytes, folder: Path) -> Held | str:
    """Hold the symlink ``host`` leading to a held file that shows ``shown``: mounted
    over, the shell can neither remove nor re-point it while terraform runs."""
    try:
        st = os.stat(host, follow_symlinks=False)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not stat.S_ISLNK(st.st_mode):
        return "not the symlink it was"
    placeholder, own = _placeholder(folder, shown)
    return Held(inside, host, placeholder, (st.st_dev, st.st_ino), own, link=True)


def put_back(helds: list[Held]) -> None:
    """Remove each file made for ``helds`` that terraform did not write (the same file,
    holding what was made), then the folders made for them where empty."""
    for held in helds:
        if held.made is None:
            continue
        with contextlib.suppress(OSError):
            parent, _ = _folder_fd(held.root, os.path.dirname(held.host), False)
            try:
                name = os.path.basename(held.host)
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
                with os.fdopen(fd, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    same = (st.st_ino, st.st_size) == held.made[:2]
                    same = same and fh.read() == held.content
                if same:
                    os.unlink(name, dir_fd=parent)
            finally:
                os.close(parent)
    for held in helds:
        remove_folders(held.root, held.folders)


def links(file_id: tuple[int, int], roots: list[str]) -> list[str]:
    """Every name of the file ``file_id`` (``(dev, ino)``) under ``roots``."""
    found: list[str] = []
    for entry in walk(roots):
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if (st.st_dev, st.st_ino) == file_id:
                found.append(entry.path)
    return found


def walk(
    roots: list[str], enter: Callable[[str, str], bool] | None = None
) -> Iterator[os.DirEntry]:
    """Every entry but folders under ``roots``, symlinks not followed, within
    :data:`MAX_DEPTH` and :data:`MAX_ENTRIES`; a folder is entered when ``enter(folder,
    name)`` (default: every one)."""
    seen = 0
    stack = [(root, 0) for root in roots]
    while stack and seen < MAX_ENTRIES:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                yield entry
            elif depth < MAX_DEPTH and (enter is None or enter(folder, entry.name)):
                stack.append((entry.path, depth + 1))


def identity(path: str, *, follow_symlinks: bool = False) -> tuple[int, int] | None:
    """``(dev, ino)`` of ``path`` (a symlink itself unless ``follow_symlinks``), None when
    missing."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def folders_between(host: str, roots: list[str]) -> list[str]:
    """The folders between the root holding ``host`` and it, outermost first."""
    root = next((r for r in roots if host.startswith(f"{r}/")), None)
    folder = os.path.dirname(host)
    chain: list[str] = []
    while root is not None and folder.startswith(f"{root}/"):
        chain.insert(0, folder)
        folder = os.path.dirname(folder)
    return chain


def remove_folders(root: str, folders: list[str]) -> None:
    """Remove ``folders`` (under ``root``) where they are empty, deepest first."""
    for path in sorted(folders, key=lambda f: f.count("/"), reverse=True):
        with contextlib.suppress(OSError):
            parent, _ = _folder_fd(root, os.path.dirname(path), False)
            try:
                os.rmdir(os.path.basename(path), dir_fd=parent)
            finally:
                os.close(parent)


def _placeholder(folder: Path, content: bytes) -> tuple[str, tuple[int, int]]:
    """A new read-only file holding ``content`` in ``folder`` (one per held file: its
    identity says which mount is whose), and its ``(dev, ino)``."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="held-", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
        st = os.fstat(fh.fileno())
    os.chmod(path, 0o444)
    return path, (st.st_dev, st.st_ino)
