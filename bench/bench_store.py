"""Session store figures: ``session/list`` paging from the index, and appending a message.

    python bench/bench_store.py [--sessions 10000] [--folder 1000] [--appends 1000] [--dir D]

1. Listing: 10,000 stored sessions, 1,000 of them in one folder. Every page of that folder
   is fetched the way ``session/list`` does it (a fresh store, as in a new ``iac-kernel acp``
   process, then ``list_page`` with the cursor of the previous page). Compared with the
   floor of reading the folder's index file once, and with the old way (every metadata
   file read for every page).
2. Appending: a typical message appended with fsync through ``SessionWriter`` (the log
   record plus the listing index line), against the floor of a bare ``write`` + ``fsync``
   of the same bytes on an open file in the same folder. Run once on ``--dir`` (a real
   disk) and once on /dev/shm (RAM), where fsync is nearly free and our own overhead shows.

Targets (issue 13): all pages <= 0.3 s; an append <= 250 us. On a disk whose fsync alone
costs more than that, the ratio to the floor is the figure to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from iac_kernel.acp.session.listing import list_page
from iac_kernel.sessions.store import SessionMeta, SessionStore, now_iso

MESSAGE = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "I will look at the VPC module first. " * 6},
        {
            "type": "tool_use",
            "id": "toolu_0123456789",
            "name": "read_file",
            "input": {"path": "vpc/main.tf"},
        },
    ],
}


def populate(root: Path, total: int, in_folder: int, folder: str) -> None:
    """Metadata of ``total`` sessions written directly (fast), then indexed by the store."""
    root.mkdir(parents=True)
    for i in range(total):
        sid = str(uuid.uuid4())
        cwd = folder if i < in_folder else f"/work/other-{i % 97}"
        stamp = f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
        meta = SessionMeta(sid, cwd, stamp, stamp, title=f"session {i}", message_count=i % 40)
        (root / f"{sid}.json").write_text(json.dumps(asdict(meta)))
        (root / f"{sid}.jsonl").touch()


def bench_listing(base: Path, total: int, in_folder: int) -> None:
    root = base / "list"
    folder = "/work/infra"
    populate(root, total, in_folder, folder)
    started = time.perf_counter()
    SessionStore(root).list(folder)  # the first listing ever builds the index
    built = time.perf_counter() - started

    def all_pages(store: SessionStore) -> tuple[float, int, int]:
        started = time.perf_counter()
        cursor, pages, seen = None, 0, 0
        while True:
            page = list_page(store.list(folder), cursor)
            pages += 1
            seen += len(page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                return time.perf_counter() - started, pages, seen

    cold, pages, seen = all_pages(SessionStore(root))  # a new process: nothing cached
    warm_store = SessionStore(root)
    all_pages(warm_store)
    warm, _, _ = all_pages(warm_store)
    index_file = SessionStore(root).index.path(folder)
    started = time.perf_counter()
    index_file.read_bytes()
    floor = time.perf_counter() - started
    started = time.perf_counter()
    metas = [json.loads(p.read_bytes()) for p in root.glob("*.json")]  # the old way, per page
    old_page = time.perf_counter() - started
    assert len(metas) == total and seen == in_folder
    print(f"listing: {in_folder} sessions of one folder among {total}, {pages} pages")
    print(f"  index built once from metadata files : {built * 1000:8.1f} ms")
    print(f"  all pages, fresh process (cold)      : {cold * 1000:8.1f} ms  (target <= 300 ms)")
    print(f"  all pages, same process (warm)       : {warm * 1000:8.1f} ms")
    print(f"  floor: read the folder's index once  : {floor * 1000:8.2f} ms")
    old_total = old_page * pages
    print(f"  old way: every metadata file, 1 page : {old_page * 1000:8.1f} ms")
    print(f"  old way, all pages                   : {old_total:8.2f} s")
    print(f"  old way / new cold                   : {old_total / cold:8.0f}x")


def bench_append(base: Path, count: int, label: str) -> None:
    root = base / "append"
    store = SessionStore(root)
    meta = store.create(str(base))
    writer = store.open_writer(meta.session_id, "bench")
    for _ in range(20):  # warm up
        writer.append_message(MESSAGE)
    line = (json.dumps({"type": "message", "ts": now_iso(), "message": MESSAGE}) + "\n").encode()
    fd = os.open(root / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times, floor = [], []
    for _ in range(count):  # interleaved, so both see the same disk and load
        started = time.perf_counter()
        writer.append_message(MESSAGE)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        os.write(fd, line)
        os.fsync(fd)
        floor.append(time.perf_counter() - started)
    os.close(fd)
    writer.close()
    ours, bare = statistics.median(times) * 1e6, statistics.median(floor) * 1e6
    print(f"append with fsync on {label}: {count} messages of {len(line)} bytes")
    print(f"  SessionWriter.append_message (median): {ours:8.1f} us  (target <= 250 us)")
    print(f"  floor: bare write+fsync (median)     : {bare:8.1f} us")
    print(f"  ratio to the floor                   : {ours / bare:8.2f}x")
    print(f"  our overhead over the floor          : {ours - bare:8.1f} us")
    shutil.rmtree(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--folder", type=int, default=1_000)
    parser.add_argument("--appends", type=int, default=1_000)
    parser.add_argument("--dir", default=None, help="where to put the stores (a real disk)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    try:
        bench_listing(base, args.sessions, args.folder)
        bench_append(base, args.appends, f"disk ({base})")
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            ram = Path(tempfile.mkdtemp(prefix="bench-store-", dir=shm))
            try:
                bench_append(ram, args.appends, "RAM (/dev/shm)")
            finally:
                shutil.rmtree(ram, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
