"""Issue 43's figures: a team's change control, on SQLite and on PostgreSQL.

Run: ``python bench/run.py --only team [--runs N]`` (a few minutes).

1. **apply**: the ``terraform_apply`` tool's real path (review, the question's card, run,
   the apply's audit record) on a plan of 10 ``terraform_data`` updates, with an admin
   rule that matches it and an approval already given by another identity (nothing
   waits: the cost is evaluating the rules, finding the record, spending it and its
   audit rows), against the floor of the same apply with no rules file. Real terraform,
   ``TF_CLI_CONFIG_FILE=/dev/null``; plans made untimed; runs interleaved. Then the gate
   alone (``terraform/gate.py``: rules evaluated, record found, spent) timed in process,
   where terraform's own variance does not hide it, and the making of a record.
2. **audit**: 20 writer processes appending through :class:`~iac_kernel.team.audit.Trail`
   at once (started and connected before the clock starts); records per second, then
   every record checked present, none fallen back to ``audit.jsonl``, and the chain
   verified (:func:`~iac_kernel.team.audit.verify`).
3. **panel**: a real ``jupyter server`` on the store; a pending record made with
   ``Approvals.request`` as ``alice``; ``GET /iac-kernel/approvals`` (the panel's own
   API, asked as the server's user) polled until it lists the record. The panel in
   JupyterLab asks that API every ``REFRESH_MS`` while shown (or on its Refresh
   button), so in the UI the row shows within that interval plus this latency.

PostgreSQL is a throwaway cluster on a Unix socket (as tests/team_support.py makes one;
as root it runs as the OS user ``iacpg``), durable (fsync on, as the SQLite file on the
same disk); its rows are skipped with the reason when ``initdb`` is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import ROOT, median

from iac_kernel.config import Settings
from iac_kernel.sessions.audit import AuditLog
from iac_kernel.team import audit
from iac_kernel.team.approvals import Approvals
from iac_kernel.team.rules import Requirement
from iac_kernel.team.store import Identity, init_store, open_store, os_identity
from iac_kernel.terraform.gate import Gate, requirement_of
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.tf_apply import GatedPlan, TerraformApplyTool

WRITERS = 20
RECORDS_PER_WRITER = 50
#: Gate-alone repetitions per store.
GATE_RUNS = 20
RESOURCES = 10
PLAN_FILE = "p.tfplan"
APPROVER = Identity("bench-approver", groups=frozenset({"platform"}))
ALICE = Identity("alice", groups=frozenset({"dev"}))
RULES = """
[[rule]]
name = "default needs a second person"
when = { workspace = "def*" }
approvers = 1
"""
CONFIG = """
variable "n" { type = number }
resource "terraform_data" "item" {
  count = COUNT
  input = "${var.n}-${count.index}"
}
""".replace("COUNT", str(RESOURCES))
PANEL_SOURCE = ROOT / "labextension" / "src" / "approvals" / "panel.ts"
PG_USER = "iacpg"
OWNER_ROLE, USERS_ROLE, MEMBER_ROLE = "iac_owner", "iac_kernel_users", "iac_member"

WRITER = """
import json, sys, time
from pathlib import Path
from iac_kernel.sessions.audit import AuditLog
from iac_kernel.team.audit import Trail
mode, writer, count, root = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
if mode == "trail":
    trail = Trail(AuditLog(root))
    trail.store()  # connected (and the schema checked) before the clock starts
    add = trail.append
else:  # the floor: the older per-user audit.jsonl, one file for every writer
    add = AuditLog(root).append
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
for n in range(count):
    said = add({"kind": "command", "form": "bench", "writer": writer, "n": n,
                "command": "terraform apply -input=false tfplan",
                "workdir": "/srv/infra/prod", "outcome": "ok", "exit": 0})
    if said:
        print(said, file=sys.stderr, flush=True)
print(json.dumps(time.perf_counter() - start), flush=True)
"""


@contextlib.contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """``os.environ`` with ``values`` set (``None``: unset), restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- PostgreSQL: a throwaway cluster on a Unix socket --------------------------------------


def _initdb() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    which = shutil.which("initdb")
    return Path(found[-1]) if found else (Path(which) if which else None)


def _version(path: str) -> int:
    name = Path(path).parent.parent.name
    return int(name) if name.isdigit() else 0


def _as(user: str | None, argv: list[str]) -> list[str]:
    return argv if user is None else ["runuser", "-u", user, "--", *argv]


class Postgres:
    """A cluster in its own folder (TCP off), with the owner, users' and member roles,
    and one database made by ``team init``."""

    def __init__(self, parent: Path) -> None:
        self.bindir = _initdb().parent  # type: ignore[union-attr]
        self.user: str | None = None
        if os.geteuid() == 0:
            pwd.getpwnam(PG_USER)  # KeyError: see start()
            self.user = PG_USER
        self.root = Path(tempfile.mkdtemp(prefix="bench-pg-", dir=parent))
        os.chmod(self.root, 0o755)
        self.socket = self.root / "sock"
        self.socket.mkdir()
        if self.user:
            shutil.chown(self.root, self.user)
            shutil.chown(self.socket, self.user)
        self.data = self.root / "data"

    def _run(self, argv: list[str]) -> str:
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        done = subprocess.run(
            _as(self.user, argv), capture_output=True, text=True, env=env, timeout=120
        )
        if done.returncode:
            raise RuntimeError(f"{Path(argv[0]).name}: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> str:
        """Start it; returns a users'-role member's URL of a database at the schema."""
        owner = self.user or pwd.getpwuid(os.getuid()).pw_name
        self._run([str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust",
                   "-E", "UTF8", "-U", owner])  # fmt: skip
        options = f"-c listen_addresses='' -k {self.socket} -c max_connections=200"
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                   str(self.root / "log"), "-w", "-o", options, "start"])  # fmt: skip
        self.psql(
            f"CREATE ROLE {OWNER_ROLE} LOGIN; CREATE ROLE {USERS_ROLE} NOLOGIN; "
            f"CREATE ROLE {MEMBER_ROLE} LOGIN IN ROLE {USERS_ROLE}; "
        )
        self.psql(f"CREATE DATABASE bench OWNER {OWNER_ROLE}")
        init_store(self.url(OWNER_ROLE), USERS_ROLE).close()
        return self.url(MEMBER_ROLE)

    def url(self, role: str) -> str:
        return f"postgresql+psycopg://{role}@/bench?host={self.socket}"

    def psql(self, sql: str) -> str:
        role = self.user or pwd.getpwuid(os.getuid()).pw_name
        return self._run([str(self.bindir / "psql"), "-h", str(self.socket), "-U", role,
                          "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-Atc", sql])  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"])
        shutil.rmtree(self.root, ignore_errors=True)


def stores(base: Path) -> Iterator[tuple[str, str | None, str | None]]:
    """``(name, url, None)`` per store, or ``(name, None, why skipped)``."""
    yield "SQLite", f"sqlite:///{base / 'team.sqlite'}", None
    if _initdb() is None:
        yield "PostgreSQL", None, "initdb is not installed (Debian: apt-get install postgresql)"
        return
    try:
        cluster = Postgres(base)
    except KeyError:
        yield "PostgreSQL", None, f"no OS user {PG_USER} to run the cluster as (root)"
        return
    try:
        url = cluster.start()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        cluster.stop()
        yield "PostgreSQL", None, f"the cluster did not start: {exc}"
        return
    try:
        yield "PostgreSQL", url, None
    finally:
        cluster.stop()


# -- 1. the apply: rules and record against no rules ---------------------------------------


def _terraform(ws: Path, *args: str) -> None:
    done = subprocess.run(["terraform", *args], cwd=ws, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"terraform {args[0]} failed: {done.stderr.strip()[-2000:]}")


def _workspace(base: Path) -> Path:
    ws = base / "ws"
    ws.mkdir()
    (ws / "main.tf").write_text(CONFIG)
    _terraform(ws, "init", "-input=false", "-no-color")
    _terraform(ws, "apply", "-input=false", "-no-color", "-auto-approve", "-var", "n=0")
    return ws


def _plan(ws: Path, n: int) -> None:
    _terraform(ws, "plan", "-input=false", "-no-color", "-var", f"n={n}", f"-out={PLAN_FILE}")


def _approve_ahead(gated: GatedPlan) -> float:
    """Make the record the apply will find and approve it as another identity; returns
    the seconds ``Approvals.request`` took to make it."""
    store = open_store()
    try:
        book = Approvals(store)
        started = time.perf_counter()
        record = book.request(
            os_identity(),
            gated.sha256,
            gated.binding.approval_inputs(),
            "bench plan",
            gated.requirement,
        )
        made = time.perf_counter() - started
        book.approve(record.id, APPROVER)
        return made
    finally:
        store.close()


async def _apply(ws: Path, trail: audit.Trail, ruled: bool) -> tuple[float, float | None]:
    """One ``terraform_apply`` call as the agent loop makes it, without the question:
    review, the question's card, run, the audit record. Returns (seconds, seconds to make
    the record ahead, untimed, or None)."""
    tool, args = TerraformApplyTool(), {"plan": PLAN_FILE}
    ctx = ToolContext(cwd=ws, settings=Settings.from_env())
    started = time.perf_counter()
    ctx.review = await tool.review(args, ctx)
    ctx.review.summary()
    paused = time.perf_counter()
    made = None
    if isinstance(ctx.review, GatedPlan) != ruled:
        raise SystemExit(f"the rule {'did not match' if ruled else 'matched without rules'}")
    if ruled:
        made = await asyncio.to_thread(_approve_ahead, ctx.review)
    resumed = time.perf_counter()
    result = await tool.run(args, ctx)
    record = {**ctx.review.audit_record(), "outcome": result.raw_output.get("outcome")}
    await asyncio.to_thread(trail.append, record)
    ended = time.perf_counter()
    if result.is_error or (ruled and "approval" not in record):
        raise SystemExit(f"the apply did not go through: {result.content[:2000]}")
    return (paused - started) + (ended - resumed), made


async def _gate_alone(ws: Path) -> dict[str, list[float]]:
    """The gate on one reviewed plan, :data:`GATE_RUNS` times: the rules evaluated, and
    a record approved ahead found and spent (each spend needs a new record)."""
    tool = TerraformApplyTool()
    ctx = ToolContext(cwd=ws, settings=Settings.from_env())
    gated = await tool.review({"plan": PLAN_FILE}, ctx)
    assert isinstance(gated, GatedPlan)
    out: dict[str, list[float]] = {"rules": [], "gate": []}
    try:
        for _ in range(GATE_RUNS):
            await asyncio.to_thread(_approve_ahead, gated)
            started = time.perf_counter()
            requirement = await asyncio.to_thread(requirement_of, gated.plan, gated.binding)
            evaluated = time.perf_counter()
            held = Gate(gated, requirement)
            refusal = await held.wait(lambda _text: None) or await asyncio.to_thread(held.spend)
            out["gate"].append(time.perf_counter() - evaluated)
            out["rules"].append(evaluated - started)
            if refusal:
                raise SystemExit(f"the gate refused: {refusal}")
    finally:
        gated.cleanup()
    return out


def apply_figures(base: Path, url: str, runs: int) -> dict[str, list[float]]:
    rules = base / "admin" / "approvals.toml"
    rules.parent.mkdir()
    rules.write_text(RULES)
    sessions = base / "sessions"
    tf = {"TF_CLI_CONFIG_FILE": "/dev/null", "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}
    figures: dict[str, list[float]] = {"floor": [], "ruled": [], "made": []}
    with environ(IAC_KERNEL_TEAM_STORE=url, IAC_KERNEL_SESSIONS_DIR=str(sessions),
                 IAC_KERNEL_CHECKOV="off", IAC_KERNEL_APPROVAL_RULES=None, **tf):  # fmt: skip
        ws = _workspace(base)
        trail = audit.trail(AuditLog(sessions))
        n = 0
        try:
            for i in range(runs + 1):  # the first pair warms up (the egress proxy starts)
                for ruled in (False, True):
                    n += 1
                    _plan(ws, n)
                    with environ(IAC_KERNEL_APPROVAL_RULES=str(rules) if ruled else None):
                        took, made = asyncio.run(_apply(ws, trail, ruled))
                    if i:
                        figures["ruled" if ruled else "floor"].append(took)
                        if made is not None:
                            figures["made"].append(made)
            _plan(ws, n + 1)
            with environ(IAC_KERNEL_APPROVAL_RULES=str(rules)):
                figures.update(asyncio.run(_gate_alone(ws)))
        finally:
            audit.close_trails()
    return figures


# -- 2. the audit trail: 20 concurrent writers ---------------------------------------------


def _writers(mode: str, roots: list[Path], env: dict[str, str]) -> float:
    """:data:`WRITERS` processes appending :data:`RECORDS_PER_WRITER` records each, all
    started and ready before the clock starts; returns the seconds until the last ends."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, mode, str(w), str(RECORDS_PER_WRITER), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w, root in enumerate(roots)
    ]
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                raise SystemExit("an audit writer did not start")
        started = time.perf_counter()
        for proc in procs:
            proc.stdin.write("go\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        for proc in procs:
            proc.communicate(timeout=600)
        wall = time.perf_counter() - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"an audit writer ({mode}) failed")
    return wall


def writer_figures(base: Path, url: str) -> dict[str, Any]:
    """The trail's records per second and its check; the floor: the same writers
    appending to one audit.jsonl (flock, write, fsync) on the same disk."""
    roots = [base / f"writer-{w}" for w in range(WRITERS)]
    env = {**os.environ, "IAC_KERNEL_TEAM_STORE": url}
    store = open_store(url)
    try:
        before = audit.verify(store).count
    finally:
        store.close()
    wall = _writers("trail", roots, env)
    floor_root = base / "jsonl-floor"
    floor = _writers("jsonl", [floor_root] * WRITERS, env)
    store = open_store(url)
    try:
        check = audit.verify(store)
        found = [
            (e.record["writer"], e.record["n"])
            for e in audit.entries(store, after=before)
            if e.record.get("form") == "bench"
        ]
    finally:
        store.close()
    expected = {(w, n) for w in range(WRITERS) for n in range(RECORDS_PER_WRITER)}
    floor_found = {(r["writer"], r["n"]) for r in AuditLog(floor_root).records()}
    if floor_found != expected:
        raise SystemExit("the audit.jsonl floor lost records: its figure would mean nothing")
    return {
        "wall": wall,
        "floor": floor,
        "records": len(found),
        "lost": len(expected - set(found)),
        "twice": len(found) - len(set(found)),
        "fell_back": sum(1 for root in roots if AuditLog(root).records()),
        "chain": "intact" if check.ok else check.problem,
        "chain_count": check.count,
    }


# -- 3. pending record -> the panel's API lists it -----------------------------------------


def refresh_ms() -> int | None:
    """The panel's ``REFRESH_MS``, read from its source (None when not found)."""
    try:
        found = re.search(r"REFRESH_MS\s*=\s*([\d_]+)", PANEL_SOURCE.read_text())
    except OSError:
        return None
    return int(found.group(1).replace("_", "")) if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


@contextlib.contextmanager
def jupyter_server(base: Path, url: str) -> Iterator[tuple[str, str]]:
    """A real ``jupyter server`` on loopback, on the team store ``url``; yields (its
    address, its token)."""
    home, runtime = base / "server-home", base / "server-runtime"
    home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), JUPYTER_RUNTIME_DIR=str(runtime), JUPYTER_PLATFORM_DIRS="1",
               IAC_KERNEL_SESSIONS_DIR=str(base / "server-sessions"),
               IAC_KERNEL_TEAM_STORE=url)  # fmt: skip
    port, token = _free_port(), secrets.token_hex(16)
    log = base / "jupyter-server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
             f"--port={port}", "--port-retries=0", f"--ServerApp.root_dir={home}",
             "--allow-root", f"--IdentityProvider.token={token}"],
            env=env, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"jupyter server did not start: {log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                _get(address + "/api/status", token)
                break
            time.sleep(0.1)
        yield address, token
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def panel_figures(base: Path, url: str, runs: int) -> dict[str, Any]:
    binding = {"folder": "/srv/infra", "workspace": "prod", "data_dir": None,
               "cli_config": None, "var_files": [], "lineage": None}  # fmt: skip
    need = Requirement(approvers=1, rules=("production needs a second person",))
    latency, one_get, seen_by = [], [], ""
    with jupyter_server(base, url) as (address, token):
        listing = address + "/iac-kernel/approvals"
        _get(listing, token)  # the server opens the store on its first request
        store = open_store(url)
        try:
            book = Approvals(store)
            for _ in range(runs):
                started = time.perf_counter()
                record = book.request(ALICE, secrets.token_hex(32), binding, "bench", need)
                while True:
                    asked = time.perf_counter()
                    answer = _get(listing, token)
                    done = time.perf_counter()
                    rows = [r for r in answer["approvals"] if r["id"] == record.id]
                    if rows:
                        break
                    if done - started > 60:
                        raise SystemExit("the panel's API never listed the pending record")
                    time.sleep(0.005)
                if rows[0]["yours"] or answer["you"] == ALICE.name:
                    raise SystemExit("the record was listed as the viewer's own")
                latency.append(done - started)
                one_get.append(done - asked)
                seen_by = answer["you"]
                book.cancel(record.id, ALICE)  # the listing stays short
        finally:
            store.close()
    return {"latency": latency, "get": one_get, "you": seen_by}


# -- the figures ----------------------------------------------------------------------------


def run(runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load": os.getloadavg(),
        "cpus": os.cpu_count(),
        "stores": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        base = Path(tmp)
        os.chmod(base, 0o755)  # the cluster's OS user reaches its folder inside
        for name, url, why in stores(base):
            if url is None:
                out["stores"][name] = {"skipped": why}
                continue
            here = base / name.lower()
            here.mkdir()
            out["stores"][name] = {
                "apply": apply_figures(here, url, runs),
                "writers": writer_figures(here, url),
                "panel": panel_figures(here, url, runs),
            }
    out["load after"] = os.getloadavg()
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def report(figures: dict[str, Any]) -> None:
    load = " ".join(f"{x:.2f}" for x in figures["load"])
    after = " ".join(f"{x:.2f}" for x in figures["load after"])
    print(
        f"team change control (issue 43), {figures['date']}, {figures['cpus']} CPUs, "
        f"load average {load} before, {after} after"
    )
    for name, each in figures["stores"].items():
        if "skipped" in each:
            print(f"  {name}: skipped: {each['skipped']}")
            continue
        a = each["apply"]
        floor, ruled = median(a["floor"]), median(a["ruled"])
        pairs = [r - f for r, f in zip(a["ruled"], a["floor"], strict=True)]
        print(f"  {name}")
        print(
            f"    apply of {RESOURCES} terraform_data updates, rule matched and approved "
            f"ahead: {_ms(ruled)}; no rules file (floor) {_ms(floor)}; "
            f"{ruled / floor:.2f}x, added {_ms(median(pairs))} (median of {len(pairs)} pairs)"
        )
        print(
            f"    the gate alone, median of {GATE_RUNS}: rules evaluated "
            f"{_ms(median(a['rules']))}, record found + spent + audit rows "
            f"{_ms(median(a['gate']))}; making a new record (the first apply's request) "
            f"{_ms(median(a['made']))}"
        )
        w = each["writers"]
        total = WRITERS * RECORDS_PER_WRITER
        rate, floor_rate = total / w["wall"], total / w["floor"]
        print(
            f"    audit trail, {WRITERS} writer processes x {RECORDS_PER_WRITER}: "
            f"{rate:.0f} records/s ({total} in {w['wall']:.2f} s); floor: the same writers "
            f"on one audit.jsonl {floor_rate:.0f} records/s; {rate / floor_rate:.2f}x"
        )
        print(
            f"      check: stored {w['records']}, lost {w['lost']}, twice {w['twice']}, "
            f"fell back to audit.jsonl {w['fell_back']}; chain {w['chain']} "
            f"({w['chain_count']} records in the store)"
        )
        p = each["panel"]
        bound = refresh_ms()
        ui = (
            f"; in the Lab panel within {bound / 1000:.0f} s (its refresh) + that, "
            "at once on Refresh"
            if bound
            else ""
        )
        print(
            f"    pending record (alice) -> listed by GET /iac-kernel/approvals as "
            f"{p['you']}: {_ms(median(p['latency']))} median, {_ms(max(p['latency']))} max "
            f"of {len(p['latency'])} (one GET {_ms(median(p['get']))}){ui}"
        )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    report(run(parser.parse_args().runs))
