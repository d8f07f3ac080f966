"""High availability of real ``cronoq serve`` processes (docs/reference/behaviour.md#fencing,
docs/reference/behaviour.md#high-availability, docs/reference/behaviour.md#server-details).

Every test runs real server processes (``tests/e2e/cluster.py``) on one PostgreSQL schema (its
own, dropped afterwards) or one SQLite file, real worker processes (``ha_worker.py``) that list
every server address, and a failover :class:`cronoq.client.Client`.

* failover under load: 2 servers, 2 workers, a client submitting keyed tasks continuously;
  SIGKILL the leader at a random moment, ``CRONOQ_FAILOVER_ROUNDS`` times (default 2; 5+ for
  the full run) of ``CRONOQ_FAILOVER_SECONDS`` each (default 6; 20 for the full run). Every
  acknowledged key ends ``succeeded`` exactly once in the store, with the acknowledged id, was
  executed by a worker, and no key has two tasks; the new leader dispatches; the failover
  time (leader killed → first lease sent by the new leader) is ≤ 2 s on PostgreSQL.
* fencing: a leader paused (SIGSTOP) while its term ends (PostgreSQL: its sessions are
  terminated; SQLite: its lease lapses) cannot write after SIGCONT: a submission it receives is
  not acknowledged and leaves no row, a Wait in flight whose attempt ended while it was paused
  is answered 503 (not the outcome it cannot commit), no row of its epoch appears, the epoch
  stays the new leader's; it stands by.
* SIGTERM hands over at once: the standby leads well within the SQLite lease ttl.
* an answered outcome: the leader SIGKILLed the moment a ``Wait`` answered ``succeeded`` has
  committed it (the new leader does not run the task again).
* recurring schedules across failovers: no occurrence key twice.
* bad input: PostgreSQL unreachable at start (standby, retrying, clear log; leads once it is
  reachable), a wrong database (clear error, standby), PostgreSQL lost mid-run for the leader
  only and for everybody (via a cuttable TCP proxy): never two leaders writing, nothing
  acknowledged lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services import missing_service

from .cluster import (
    DSN,
    PgSchema,
    ServerNode,
    Submitter,
    TcpProxy,
    WorkerProc,
    check_rows,
    epoch_of,
    first_dispatch_after,
    http_get,
    http_post,
    pg_store_toml,
    pg_unreachable,
    sqlite_epoch,
    sqlite_rows,
    sqlite_store_toml,
    wait_all_terminal,
    wait_leader,
    with_port,
)
from .conftest import failed

ROUNDS = int(os.environ.get("CRONOQ_FAILOVER_ROUNDS", "2"))
SECONDS = float(os.environ.get("CRONOQ_FAILOVER_SECONDS", "6"))
PG_FAILOVER_TARGET = 2.0
SQLITE_LEASE_TTL = 10.0  # SqliteStore's default, which `cronoq serve` uses

Rows = Callable[[], list[tuple[int, str | None, str, int]]]


class Cluster:
    """Server nodes on one store + workers; everything is killed at the end."""

    def __init__(self, tmp: Path, kind: str, proxies: bool = False) -> None:
        self.kind = kind
        self.tmp = tmp
        self.nodes: list[ServerNode] = []
        self.workers: list[WorkerProc] = []
        self.proxies: dict[str, TcpProxy] = {}
        self.schema: PgSchema | None = None
        self.db = tmp / "ha.db"
        self.use_proxies = proxies
        if kind == "postgres":
            self.schema = PgSchema()

    def node(self, name: str) -> ServerNode:
        if self.schema is not None:
            if self.use_proxies:
                self.proxies[name] = TcpProxy()
                url = with_port(DSN, self.proxies[name].port, self.schema.app(name))
            else:
                url = _app_dsn(self.schema, name)
            store = pg_store_toml(self.schema.schema, url)
        else:
            store = sqlite_store_toml(self.db)
        n = ServerNode(self.tmp, name, store)
        self.nodes.append(n)
        return n

    @property
    def targets(self) -> list[str]:
        return [n.grpc for n in self.nodes]

    def rows(self) -> list[tuple[int, str | None, str, int]]:
        return self.schema.rows() if self.schema is not None else sqlite_rows(self.db)

    def epoch(self) -> int:
        return self.schema.epoch() if self.schema is not None else sqlite_epoch(self.db)

    def start_pair(self) -> tuple[ServerNode, ServerNode]:
        a, b = self.node("A"), self.node("B")
        a.start().wait_listening()
        assert wait_leader([a]) is a
        b.start().wait_listening()
        wait_until(lambda: b.healthz()[0] == 200, 15, "the standby to answer /healthz")
        assert not b.ready(), "the standby must answer readyz 503 while A leads"
        return a, b

    def start_workers(self, n: int = 2, **kw: Any) -> list[WorkerProc]:
        for _ in range(n):
            self.workers.append(WorkerProc(self.targets, **kw))
        for w in self.workers:
            w.wait_for("REGISTERED", 30)
        return self.workers

    def logs(self) -> str:
        return "\n".join(f"--- {n.name}\n{n.log()[-4000:]}" for n in self.nodes)

    def close(self) -> None:
        for w in self.workers:
            w.cleanup()
        for n in self.nodes:
            n.cleanup()
        for p in self.proxies.values():
            p.close()
        if self.schema is not None:
            self.schema.drop()


def _app_dsn(schema: PgSchema, name: str) -> str:
    return DSN + ("&" if "?" in DSN else "?") + f"application_name={schema.app(name)}"


def _need_pg(kind: str) -> None:
    if kind == "postgres":
        why = pg_unreachable()
        if why:
            missing_service("PostgreSQL", why)


@pytest.fixture
def make_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(kind: str, *, proxies: bool = False) -> Cluster:
        _need_pg(kind)
        c = Cluster(tmp_path, kind, proxies)
        made.append(c)
        return c

    yield make
    for c in made:
        if failed(request.node):  # the servers' logs, for a failure seen only in CI
            print(f"\n===== server logs ({c.kind}) =====\n{c.logs()}")
        c.close()


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------------- failover under load


def failover_rounds(c: Cluster, rounds: int, seconds: float, *, seed: int | None = None) -> dict[str, Any]:
    """Kill the leader once per round under continuous keyed submissions; check everything."""
    rng = random.Random(seed)
    c.start_pair()
    workers = c.start_workers(2, slots=8, exec_ms=10)
    sub = Submitter(c.targets, f"ha-{c.kind}", concurrency=4).start()
    records: list[dict[str, Any]] = []
    epochs = [c.epoch()]
    try:
        wait_until(lambda: len(sub.acked) >= 20, 30, "the load to get going")
        for r in range(rounds):
            t_round = time.monotonic()
            leader = wait_leader(c.nodes)
            time.sleep(rng.uniform(0.2, 0.6) * seconds)
            acked_before = len(sub.acked)
            t_kill = time.time()
            leader.kill()
            new = wait_leader(c.nodes, timeout=SQLITE_LEASE_TTL + 30, exclude=leader)
            t_ready = time.time()
            epochs.append(c.epoch())
            assert epochs[-1] > epochs[-2], f"the takeover did not bump the epoch: {epochs}"
            wait_until(
                lambda: first_dispatch_after(workers, new.grpc, t_kill) is not None,  # noqa: B023
                30,
                "the first dispatch by the new leader",
            )
            first = first_dispatch_after(workers, new.grpc, t_kill)
            assert first is not None
            # work resumes: new submissions are acknowledged by the new leader (its epoch in the id)
            wait_until(
                lambda: any(epoch_of(i) == epochs[-1] for i in list(sub.acked.values())),
                30,
                "an acknowledgement from the new leader",
            )
            leader.start().wait_listening()  # the old node comes back as a standby
            records.append(
                {
                    "round": r,
                    "killed": leader.name,
                    "new_leader": new.name,
                    "epoch": epochs[-1],
                    "ready_s": round(t_ready - t_kill, 3),
                    "failover_s": round(first - t_kill, 3),
                    "acked_before_kill": acked_before,
                }
            )
            rest = seconds - (time.monotonic() - t_round)
            if rest > 0:
                time.sleep(rest)
    finally:
        sub.stop()
    rows = wait_all_terminal(c.rows, sub.acked, 120)
    stats = check_rows(rows, sub.acked)
    done = {int(p[2]) for w in workers for p in w.of("DONE")}
    unrun = [k for k, i in sub.acked.items() if i not in done]
    assert not unrun, f"{len(unrun)} acknowledged tasks never ran to completion on a worker: {unrun[:10]}"
    assert all(epoch_of(i) in epochs for i in sub.acked.values()), "ids from an epoch no leader was given"
    # after the last round, the cluster still has exactly one leader
    wait_leader(c.nodes)
    return {"records": records, "stats": stats, "errors": dict(sub.errors), "epochs": epochs}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_failover_under_load(make_cluster: Callable[..., Cluster], kind: str, tmp_path: Path) -> None:
    c = make_cluster(kind)
    seconds = SECONDS if kind == "postgres" else max(SECONDS, 4.0)
    out = failover_rounds(c, ROUNDS, seconds)
    (tmp_path / "failover.json").write_text(json.dumps(out, indent=1))
    print(f"\n{kind} failover: {json.dumps(out['records'])} stats={out['stats']} errors={out['errors']}")
    times = [r["failover_s"] for r in out["records"]]
    assert len(times) == ROUNDS
    if kind == "postgres":
        assert max(times) <= PG_FAILOVER_TARGET, f"PostgreSQL failover slower than 2 s: {times}"
    else:  # a SIGKILLed SQLite leader's lease must lapse first
        assert max(times) <= SQLITE_LEASE_TTL + 3.0, f"SQLite failover too slow: {times}"


# --------------------------------------------------------------------------- fencing


def _write_locked(db: Path) -> bool:
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None, timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def pause_outside_write_transaction(c: Cluster, node: ServerNode) -> None:
    """SIGSTOP ``node``; on SQLite retry until it is not frozen inside a write transaction
    (a process frozen while holding SQLite's write lock blocks the file for everybody — the
    standby could never take the lease; inherent to SQLite, not what this test is about)."""
    for _ in range(50):
        node.signal(signal.SIGSTOP)
        if c.schema is not None or not _write_locked(c.db):
            return
        node.signal(signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError("the leader always held the SQLite write lock")


def post_while_stopped(addr: str, path: str, body: Any) -> socket.socket:
    """Send a whole JSON POST to ``addr`` (whose process may be stopped: the kernel accepts
    the connection and buffers the request); the answer is read by :func:`read_status`."""
    host, _, port = addr.rpartition(":")
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {addr}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    ).encode()
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall(head + data)
    return s


def read_status(s: socket.socket) -> tuple[int, bytes]:
    """The status code and body of the answer on ``s`` (read to EOF)."""
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _submit_keys(targets: list[str], keys: list[str]) -> dict[str, int]:
    from cronoq.client import Client

    async def go() -> dict[str, int]:
        async with Client(targets) as client:
            out = {}
            for k in keys:
                out[k] = (await client.submit(k.encode(), key=k)).id
            for k in keys:
                assert (await client.wait(k, timeout=30)).status == "succeeded"
            return out

    return asyncio.run(go())


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["postgres", pytest.param("sqlite", marks=pytest.mark.slow)])
def test_paused_leader_cannot_write_after_resuming(make_cluster: Callable[..., Cluster], kind: str) -> None:
    c = make_cluster(kind)
    a, b = c.start_pair()
    (w,) = c.start_workers(1, slots=16, exec_ms=1500)
    before = _submit_keys(c.targets, [f"pre-{i}" for i in range(10)])
    epoch_a = c.epoch()
    assert all(epoch_of(i) == epoch_a for i in before.values())
    # a Wait in flight on the old leader, for a task whose attempt ends while it is paused
    status, body = http_post(a.http, "/v1/tasks", {"payload": "w", "key": "waited"})
    assert status == 200, body
    waited = int(body["id"])
    wait_until(lambda: waited in {lease[2] for lease in w.leases()}, 20, "the waited task's lease")
    answer: list[tuple[int, Any]] = []
    result = f"/v1/tasks/{waited}/result"
    waiter = threading.Thread(target=lambda: answer.append(http_get(a.http, result, 60)))
    waiter.start()
    pause_outside_write_transaction(c, a)
    try:
        if c.schema is not None:  # its term ends with its sessions (network loss while paused)
            assert c.schema.terminate("A") >= 1
        # SQLite: the paused leader stops renewing; its lease lapses after lease_ttl
        wait_until(b.ready, SQLITE_LEASE_TTL + 20, "the standby to take over")
        # the worker reports that attempt to the paused leader
        wait_until(lambda: str(waited) in {p[2] for p in w.of("DONE")}, 20, "the waited task's attempt")
        epoch_b = c.epoch()
        assert epoch_b > epoch_a
        rows_a = sorted(r[0] for r in c.rows() if epoch_of(r[0]) == epoch_a)
        # a submission that reaches the old leader while it is paused: handled once it resumes
        # (the kernel accepts the connection and buffers the whole request before SIGCONT)
        probe = post_while_stopped(a.http, "/v1/tasks", {"payload": "late", "key": "fenced-probe"})
    finally:
        a.signal(signal.SIGCONT)
    with probe:
        status, body = read_status(probe)
    assert status == 503, f"a fenced leader acknowledged a submission: {status} {body}\n{c.logs()}"
    # its waiter is not told the outcome it could not commit (the new leader runs the task again)
    waiter.join(60)
    assert answer and answer[0][0] == 503, f"a fenced leader answered a Wait: {answer}"
    wait_until(lambda: http_get(a.http, "/readyz")[0] == 503, 15, "the old leader to stand by")
    wait_until(lambda: a.healthz()[1]["leading"] is False, 15, "the old leader to report standby")
    # nothing written by the old term after the takeover
    rows = c.rows()
    assert "fenced-probe" not in {r[1] for r in rows}
    assert sorted(r[0] for r in rows if epoch_of(r[0]) == epoch_a) == rows_a
    assert c.epoch() == epoch_b, "the resumed leader took the store back"
    assert b.ready() and not a.ready()
    assert "lost leadership" in a.log() or "fenced" in a.log(), a.log()[-3000:]
    # the cluster serves through the new leader; the worker followed it
    after = _submit_keys(c.targets, [f"post-{i}" for i in range(5)])
    assert all(epoch_of(i) == epoch_b for i in after.values())
    wait_leader(c.nodes)


# --------------------------------------------------------------------------- clean handover


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_sigterm_hands_over_at_once(make_cluster: Callable[..., Cluster], kind: str) -> None:
    c = make_cluster(kind)
    a, b = c.start_pair()
    workers = c.start_workers(1, slots=2, exec_ms=5)
    _submit_keys(c.targets, ["t-1", "t-2"])
    epoch_a = c.epoch()
    t0 = time.time()
    a.signal(signal.SIGTERM)
    wait_until(b.ready, SQLITE_LEASE_TTL, "the standby to lead after SIGTERM")
    took = time.time() - t0
    assert a.proc is not None and a.proc.wait(30) == 0, a.log()[-3000:]
    assert "cronoq serve: stopped" in a.log()
    assert took < 3.0, f"handover took {took:.2f}s (lease ttl {SQLITE_LEASE_TTL}s)"
    assert c.epoch() == epoch_a + 1
    t1 = time.time()
    out = _submit_keys(c.targets, ["t-3"])
    assert epoch_of(out["t-3"]) == epoch_a + 1
    # the worker's LEASE line is read by a thread: it may lag behind the task's end (seen under load)
    wait_until(lambda: first_dispatch_after(workers, b.grpc, t1) is not None, 10, "a lease from B")
    print(f"\n{kind}: SIGTERM → standby ready in {took:.3f}s")


# --------------------------------------------------------------------------- answered outcomes


@pytest.mark.timeout(120)
def test_an_answered_outcome_survives_the_leaders_kill(make_cluster: Callable[..., Cluster]) -> None:
    """SIGKILL the leader the moment ``submit(wait=True)`` answered ``succeeded``: the outcome is
    in the store (a completion is committed only with the next group, and Wait used to answer
    before that commit: the new leader then ran the task again)."""
    from cronoq.client import Client

    c = make_cluster("postgres")
    c.start_pair()
    (w,) = c.start_workers(1, slots=2, exec_ms=0)

    async def rounds() -> list[int]:
        ids: list[int] = []
        async with Client(c.targets) as client:
            for _ in range(2):
                leader = wait_leader(c.nodes)
                s = await client.submit(b"x", wait=True, wait_timeout=20)
                leader.kill()  # (the answer's commit, if any, is over: its session is gone)
                assert s.result is not None and s.result.status == "succeeded"
                ids.append(s.id)
                row = {r[0]: r for r in await asyncio.to_thread(c.rows)}.get(s.id)
                assert row is not None and row[2:] == ("succeeded", 1), f"answered succeeded, stored {row}"
                wait_leader(c.nodes, exclude=leader)
                leader.start().wait_listening()  # (back as the standby)
        return ids

    ids = asyncio.run(rounds())
    assert [lease[2] for lease in w.leases()] == ids, "a task answered succeeded ran again"


# --------------------------------------------------------------------------- recurring


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_recurring_occurrences_never_fire_twice_across_failovers(
    make_cluster: Callable[..., Cluster],
) -> None:
    from cronoq.client import Client

    c = make_cluster("postgres")
    c.start_pair()
    c.start_workers(2, slots=4, exec_ms=300)  # occurrences are often running when the leader dies

    async def add() -> None:
        async with Client(c.targets) as client:
            await client.add_recurring("tick", "* * * * * *", b"tick", key="tick")

    asyncio.run(add())
    epochs = [c.epoch()]

    def ticks() -> list[tuple[int, str | None, str, int]]:
        return [r for r in c.rows() if r[1] is not None and r[1].startswith("tick@")]

    def two_more(epoch: int) -> Callable[[], bool]:  # two occurrences created by this leader
        return lambda: sum(epoch_of(r[0]) == epoch for r in ticks()) >= 2

    for _ in range(3):
        wait_until(two_more(epochs[-1]), 30, "two occurrences from the leader")
        leader = wait_leader(c.nodes)
        leader.kill()
        wait_leader(c.nodes, exclude=leader)
        epochs.append(c.epoch())
        leader.start().wait_listening()
    wait_until(two_more(epochs[-1]), 30, "two occurrences from the last leader")
    rows = ticks()
    keys = [r[1] for r in rows]
    assert len(keys) == len(set(keys)), f"an occurrence fired twice: {sorted(keys)}"
    assert len(keys) >= 8, f"too few occurrences: {sorted(keys)}"
    # the schedule went on under every leader
    seen = {epoch_of(r[0]) for r in rows}
    assert set(epochs[1:]) <= seen, (epochs, seen)


# --------------------------------------------------------------------------- bad input


@pytest.mark.timeout(120)
def test_pg_unreachable_at_start_stands_by_and_leads_when_reachable(
    make_cluster: Callable[..., Cluster],
) -> None:
    from cronoq.client import Client, ClientError

    c = make_cluster("postgres", proxies=True)
    a = c.node("A")
    c.proxies["A"].cut()
    a.start().wait_listening()
    wait_until(lambda: a.log().count("cannot start the scheduler") >= 2, 20, "two logged retries")
    assert not a.ready()
    code, health = a.healthz()
    assert code == 200 and health["leading"] is False
    assert "cannot connect to the database" in a.log(), a.log()[-3000:]

    async def submit() -> str:
        async with Client(c.targets) as client:
            try:
                await client.submit(b"x", key="k0")
            except ClientError as e:
                return e.code
            return "ok"

    assert asyncio.run(submit()) == "unavailable"
    c.proxies["A"].restore()
    wait_leader([a], 20)
    assert asyncio.run(submit()) == "ok"


@pytest.mark.timeout(60)
def test_pg_wrong_database_is_a_clear_error(tmp_path: Path) -> None:
    _need_pg("postgres")
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(DSN)
    url = urlunsplit((u.scheme, u.netloc, "/cronoq_no_such_database", u.query, u.fragment))
    n = ServerNode(tmp_path, "W", pg_store_toml("cronoq_nowhere", url))
    try:
        n.start().wait_listening()
        wait_until(lambda: "cronoq_no_such_database" in n.log(), 15, "the error in the log")
        assert 'database "cronoq_no_such_database" does not exist' in n.log()
        assert not n.ready() and n.healthz()[0] == 200
        assert n.terminate() == 0
    finally:
        n.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pg_lost_mid_run_never_two_writers_nothing_acknowledged_lost(
    make_cluster: Callable[..., Cluster],
) -> None:
    c = make_cluster("postgres", proxies=True)
    a, b = c.start_pair()
    c.start_workers(2, slots=8, exec_ms=10)
    sub = Submitter(c.targets, "lost", concurrency=4).start()
    ready_log: list[tuple[float, bool, bool]] = []
    stop = threading.Event()

    def monitor() -> None:
        while not stop.is_set():
            ready_log.append((time.time(), a.ready(), b.ready()))
            time.sleep(0.05)

    mon = threading.Thread(target=monitor, daemon=True)
    mon.start()
    try:
        wait_until(lambda: len(sub.acked) >= 50, 30, "the load to get going")
        epoch_a = c.epoch()
        # 1. the leader alone loses PostgreSQL (network partition): the standby takes over, the
        #    cut-off leader steps down (it cannot reach the database to know better)
        t_cut = time.time()
        c.proxies["A"].cut()
        wait_until(b.ready, 15, "B to take over from the cut-off leader")
        t_b = time.time()
        wait_until(lambda: not a.ready(), 15, "the cut-off leader to step down")
        assert "cannot reconnect" in a.log() or "lost leadership" in a.log(), a.log()[-3000:]
        time.sleep(1.0)  # the partition lasts a while (a scenario duration, not a synchronisation)
        c.proxies["A"].restore()
        wait_until(lambda: c.schema is not None and c.schema.sessions("A") >= 1, 15, "A to reconnect")
        assert b.ready() and not a.ready(), "A must stand by once it can reach the database again"
        epoch_b = c.epoch()
        assert epoch_b > epoch_a
        # a task *created* under the old epoch after the takeover would be split brain; a duplicate
        # answer (a retry the new leader dedups to the old leader's committed task) is fine
        late = [(k, i, t) for t, k, i in list(sub.fresh_log) if epoch_of(i) == epoch_a and t > t_b + 0.5]
        assert not late, f"the cut-off leader acknowledged work after the takeover: {late[:5]}"
        # 2. everybody loses PostgreSQL for a while (like a database restart)
        for p in c.proxies.values():
            p.cut()
        time.sleep(3.0)  # the outage lasts a while (a scenario duration, like a restart)
        for p in c.proxies.values():
            p.restore()
        wait_leader(c.nodes, 30)
        n = len(sub.acked)
        wait_until(lambda: len(sub.acked) > n + 20, 30, "submissions to be acknowledged again")
    finally:
        sub.stop()
        stop.set()
        mon.join(5)
    rows = wait_all_terminal(c.rows, sub.acked, 120)
    stats = check_rows(rows, sub.acked)
    # a leader that was cut off may look ready until its keepalive notices (it cannot write);
    # that overlap starts after the cut and is bounded by the keepalive (2 s) plus a reconnect
    # attempt; there is none before the cut
    both = [t for t, ra, rb in ready_log if ra and rb]
    if both:
        assert t_cut <= both[0], f"two nodes ready before any cut: {both[:5]} (cut at {t_cut})"
        assert both[-1] - both[0] <= 4.0, f"two nodes ready for {both[-1] - both[0]:.2f} s: {both}"
    print(f"\nlost mid-run: stats={stats} errors={sub.errors} both-ready samples={len(both)}")
