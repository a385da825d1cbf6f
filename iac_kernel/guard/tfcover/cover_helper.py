"""Runs as its own process, as the guard's user: mount masked copies over files in a
waiting shell's mount namespace. Standard library only.

Usage: ``python -I -S cover_helper.py NSFD`` with ``{"ours": [[dev, ino] of every masked
copy], "items": [...]}`` on stdin, each item ``{"copy": host path, "path": path in the
namespace, "dev": int, "ino": int, "shown": [dev, ino] of the copy}``. Each copy is cloned
as a detached read-only mount in the guard's namespace (``open_tree``,
``mount_setattr``: the shell need not see it), then, inside the shell's namespace
(``setns``), attached over ``path`` when ``path`` (last component not followed) is still
the file ``dev``/``ino`` or an older masked copy (``move_mount`` onto that descriptor: no
path race). Prints one JSON list: per item, ``"covered"`` (this copy is there now),
``"other"`` (another file is there: the original moved) or an error text.
"""

import ctypes
import json
import os
import struct
import sys

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
#: Generic syscall numbers (the same on x86_64 and arm64).
_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442
_AT_FDCWD = -100
_OPEN_TREE_CLONE = 1
_AT_RECURSIVE = 0x8000
_AT_EMPTY_PATH = 0x1000
_MOVE_MOUNT_F_EMPTY_PATH, _MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_CLONE_NEWNS = 0x20000
_MNT_DETACH, _UMOUNT_NOFOLLOW = 0x2, 0x8


def _check(result: int, name: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")
    return result


def _read_only_clone(path: str) -> int:
    """A detached read-only bind mount of ``path`` (a descriptor)."""
    flags = _OPEN_TREE_CLONE | os.O_CLOEXEC
    fd = _check(_LIBC.syscall(_OPEN_TREE, _AT_FDCWD, path.encode(), flags), "open_tree")
    attr = struct.pack("QQQQ", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    _check(_LIBC.syscall(_MOUNT_SETATTR, fd, b"", _AT_EMPTY_PATH, buf, len(attr)), "mount_setattr")
    return fd


def _attach(tree: int, target: int) -> None:
    flags = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
    _check(_LIBC.syscall(_MOVE_MOUNT, tree, b"", target, b"", flags), "move_mount")


def _unmount(item: dict) -> str:
    """Take the copy ``item["shown"]`` off ``item["path"]`` if it is on top there."""
    parent, name = os.path.split(item["path"])
    folder = os.open(parent or "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fchdir(folder)
        st = os.stat(name, follow_symlinks=False)
        if [st.st_dev, st.st_ino] != item["shown"]:
            return "other"
        _check(_LIBC.umount2(name.encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW), "umount2")
        return "unmounted"
    finally:
        os.close(folder)
        os.chdir("/")


def _pin(item: dict) -> str:
    """Mount the folder ``item["path"]`` over itself, the mounts under it included."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(item["path"], flags)
    try:
        st = os.fstat(fd)
        if [st.st_dev, st.st_ino] != [item["dev"], item["ino"]]:
            return "other"
        clone = _OPEN_TREE_CLONE | _AT_RECURSIVE | _AT_EMPTY_PATH | os.O_CLOEXEC
        tree = _check(_LIBC.syscall(_OPEN_TREE, fd, b"", clone), "open_tree")
        try:
            _attach(tree, fd)
        finally:
            os.close(tree)
        return "pinned"
    finally:
        os.close(fd)


def main() -> None:
    namespace = int(sys.argv[1])
    given = json.load(sys.stdin)
    items, ours = given["items"], given["ours"]
    trees: list[int | str] = []
    for item in items:
        if item.get("unmount") or item.get("pin"):
            trees.append("")
            continue
        try:
            trees.append(_read_only_clone(item["copy"]))
        except OSError as exc:
            trees.append(str(exc))
    _check(_LIBC.setns(namespace, _CLONE_NEWNS), "setns")
    os.chdir("/")
    results: list[str] = []
    for item, tree in zip(items, trees, strict=True):
        if item.get("unmount") or item.get("pin"):
            try:
                results.append(_unmount(item) if item.get("unmount") else _pin(item))
            except OSError as exc:
                results.append(str(exc))
            continue
        if isinstance(tree, str):
            results.append(tree)
            continue
        try:
            fd = os.open(item["path"], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            results.append(f"open: {exc.strerror}")
            continue
        try:
            st = os.fstat(fd)
            seen = [st.st_dev, st.st_ino]
            if seen == item["shown"]:
                results.append("covered")  # this copy is there already
            elif seen == [item["dev"], item["ino"]] or seen in ours:
                _attach(tree, fd)  # over the file, or over an older copy of it
                results.append("covered")
            else:
                results.append("other")
        except OSError as exc:
            results.append(str(exc))
        finally:
            os.close(fd)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
