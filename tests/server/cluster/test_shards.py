"""docs/how-to/shards.md: a real two-shard cluster on loopback (cluster.py): forwarding by pool,
id and key through either shard's endpoint, batches, fan-out with one cursor, merged
Snapshot/Watch, refusals, an unreachable peer, worker redirects and a failover of one shard.

One cluster serves the whole module (its servers start once); every test leaves a leader per
shard.
"""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import grpc
import pytest
from tests.server.cluster.cluster import B1_TOKEN, TOKENS, Cluster, config_toml, free_port, non_loopback_ip
from tests.server.procs import Raw, http_call, pb
from tests.server.test_dashboard import browser_page, needs_browser

from cronoq.client import Client, ClientError, Worker
from services import missing_service

asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install 'cronoq[postgres]')")

CLIENT = TOKENS["client"]
ADMIN = TOKENS["admin"]
MD = (("authorization", f"Bearer {ADMIN}"),)
LATER = 3600.0  # a start this far away keeps a task pending while a test looks at it


def _pg_reason() -> str:
    from tests.server.cluster.cluster import PG_DSN

    async def probe() -> str:
        try:
            conn = await asyncpg.connect(PG_DSN, timeout=3)
            await conn.close()
        except Exception as e:
            return f"PostgreSQL unreachable at {PG_DSN}: {type(e).__name__}: {e}"
        return ""

    return asyncio.run(probe())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why = _pg_reason()
    if why:
        missing_service("PostgreSQL", why)
    c = Cluster(tmp_path_factory.mktemp("shards"))
    try:
        c.start()
        yield c
    finally:
        c.stop()
        asyncio.run(c.drop_schemas())


async def echo(lease: Any) -> bytes:
    return b"done:" + lease.payload


@pytest.fixture
async def workers(cluster: Cluster) -> AsyncIterator[list[Worker]]:
    """A worker per pool, each pointed at the *other* shard: they follow the redirect."""
    ws = [
        Worker(cluster.grpc("sb"), "a1", echo, token=TOKENS["worker"], slots=4, backoff=(0.05, 0.5)),
        Worker(cluster.grpc("sb"), "a2", echo, token=TOKENS["worker"], slots=4, backoff=(0.05, 0.5)),
        Worker(cluster.grpc("sa"), "b1", echo, token=TOKENS["worker"], slots=4, backoff=(0.05, 0.5)),
    ]
    runs = [asyncio.ensure_future(w.run()) for w in ws]
    try:
        for w in ws:
            await asyncio.wait_for(w.wait_registered(), 20)
        yield ws
    finally:
        for w in ws:
            await w.stop(1.0)
        for r in runs:
            r.cancel()
        await asyncio.gather(*runs, return_exceptions=True)


def shard_of(tid: int) -> int:
    return tid >> 56


async def test_submit_get_wait_cancel_through_either_shard(cluster: Cluster, workers: list[Worker]) -> None:
    async with Client(cluster.grpc("sa"), token=CLIENT) as ca, Client(cluster.grpc("sb"), token=CLIENT) as cb:
        # a b1 task through shard sa's endpoint: forwarded, its id names shard 200
        s = await ca.submit(b"x", pool="b1", key="k-b", wait=True, wait_timeout=20)
        assert shard_of(s.id) == 200 and s.id >= 1 << 63
        assert s.result is not None and s.result.output == b"done:x"
        s2 = await cb.submit(b"y", pool="a1", key="k-a", wait=True, wait_timeout=20)
        assert shard_of(s2.id) == 1
        for c in (ca, cb):
            for tid, pool in ((s.id, "b1"), (s2.id, "a1")):
                info = await c.get(tid)
                assert info.id == tid and info.pool == pool and info.status == "succeeded"
                res = await c.wait(tid, timeout=5)
                assert res.status == "succeeded"
            # keys are looked up on every shard
            assert (await c.get("k-b")).id == s.id
            assert (await c.get("k-a")).id == s2.id
            assert (await c.wait("k-b", timeout=5)).output == b"done:x"
        # a duplicate key submitted through the other shard finds the same task
        dup = await cb.submit(b"x", pool="b1", key="k-b")
        assert dup.id == s.id and dup.duplicate
        # cancel by id and by key, through the shard that does not own the task
        later = await ca.submit(b"z", pool="b1", key="k-later", start_in=LATER)
        assert await ca.cancel("k-later") is True
        assert (await cb.get(later.id)).status == "cancelled"
        later2 = await cb.submit(b"z", pool="a2", start_in=LATER)
        assert await cb.cancel(later2.id) is True
        with pytest.raises(ClientError) as ei:
            await ca.get("no-such-key")
        assert ei.value.code == "not_found"


async def test_batches_stay_within_one_shard(cluster: Cluster) -> None:
    raw = Raw(cluster.grpc("sa"))
    try:
        spec = pb.TaskSpec(pool="b1", start_in_s=LATER)
        resp = await raw.tasks.SubmitBatch(pb.SubmitBatchRequest(tasks=[spec, spec]), metadata=MD)
        assert [shard_of(t.id) for t in resp.tasks] == [200, 200]
        cross = [pb.TaskSpec(pool="a1", start_in_s=LATER), pb.TaskSpec(pool="b1", start_in_s=LATER)]
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.SubmitBatch(pb.SubmitBatchRequest(tasks=cross), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert ei.value.details().startswith("a batch must stay within one shard (")
        assert "'sa'" in ei.value.details() and "'sb'" in ei.value.details()
        # a dependency on another shard's task: unknown_dependency naming both shards
        dep = pb.TaskSpec(pool="a1", deps=[pb.Dep(target=pb.TaskRef(id=resp.tasks[0].id))])
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=dep), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        assert "shard 'sb'" in ei.value.details() and "shard 'sa'" in ei.value.details()
        # over HTTP too, for one task and in a batch (the local handler would only say "unknown")
        url = f"http://{cluster.http('sa')}"
        other = str(resp.tasks[0].id)
        st, body = await asyncio.to_thread(_http, "POST", f"{url}/v1/tasks", {"pool": "a1", "after": [other]})
        assert st == 404 and body["code"] == "unknown_dependency"
        assert "shard 'sb'" in body["error"] and "shard 'sa'" in body["error"], body
        batch = {"tasks": [{"pool": "a1"}, {"pool": "a1", "deps": [{"target": other}]}]}
        st, body = await asyncio.to_thread(_http, "POST", f"{url}/v1/tasks:batch", batch)
        assert st == 404 and body["code"] == "unknown_dependency" and "shard 'sb'" in body["error"], body
        # a placeholder is a dependency too (docs/concepts/dependencies.md#outputs-on-edges)
        piped = {"pool": "a1", "after": [other], "payload": {"args": [{"$output": 0}], "kwargs": {}}}
        st, body = await asyncio.to_thread(_http, "POST", f"{url}/v1/tasks", piped)
        assert st == 404 and body["code"] == "unknown_dependency" and "shard 'sb'" in body["error"], body
        # SubmitMany: items routed one by one, answered in order
        many = [pb.TaskSpec(pool=p, start_in_s=LATER) for p in ("b1", "a1", "nope", "b1")]
        out = await raw.tasks.SubmitMany(pb.SubmitManyRequest(tasks=many), metadata=MD)
        kinds = [r.WhichOneof("outcome") for r in out.results]
        assert kinds == ["submitted", "submitted", "error", "submitted"]
        assert [shard_of(out.results[i].submitted.id) for i in (0, 1, 3)] == [200, 1, 200]
        assert out.results[2].error.code == "not_found"
    finally:
        await raw.close()


async def test_list_tasks_paged_across_shards(cluster: Cluster) -> None:
    async with Client(cluster.grpc("sb"), token=CLIENT) as c:
        mine = set()
        for p in ("a1", "b1", "a2", "b1", "a1"):
            mine.add((await c.submit(b"", pool=p, tags={"list": "1"})).id)
        for target in ("sa", "sb"):
            raw = Raw(cluster.grpc(target))
            try:
                seen: list[int] = []
                after = 0
                while True:
                    page = await raw.tasks.ListTasks(pb.ListTasksRequest(after=after, limit=2), metadata=MD)
                    assert len(page.tasks) <= 2 and not page.unavailable_shards
                    seen += [t.id for t in page.tasks]
                    if not page.next_after:
                        break
                    after = page.next_after
                assert seen == sorted(seen) and len(seen) == len(set(seen))
                assert mine <= set(seen)
                assert any(shard_of(i) == 1 for i in seen) and any(shard_of(i) == 200 for i in seen)
                only_b = await raw.tasks.ListTasks(pb.ListTasksRequest(pools=["b1"], limit=1000), metadata=MD)
                assert {t.pool for t in only_b.tasks} == {"b1"}
            finally:
                await raw.close()


async def test_snapshot_and_watch_merged(cluster: Cluster) -> None:
    raw = Raw(cluster.grpc("sa"))
    try:
        snap = await raw.admin.Snapshot(pb.Empty(), metadata=MD)
        assert [p.name for p in snap.pools] == ["a1", "a2", "b1"] and not snap.unavailable_shards
        call = raw.tasks.Watch(pb.WatchRequest(all_transitions=True), metadata=MD)
        await asyncio.wait_for(call.initial_metadata(), 10)
        async with Client(cluster.grpc("sb"), token=CLIENT) as cb:
            tb = await cb.submit(b"", pool="b1", start_in=LATER)
            ta = await cb.submit(b"", pool="a1", start_in=LATER)
        got: set[int] = set()
        while not {ta.id, tb.id} <= got:
            ev = await asyncio.wait_for(call.read(), 10)
            got.add(ev.id)
        call.cancel()
        # a pool filter naming pools of both shards
        call = raw.tasks.Watch(pb.WatchRequest(pools=["a2", "b1"], all_transitions=True), metadata=MD)
        await asyncio.wait_for(call.initial_metadata(), 10)
        async with Client(cluster.grpc("sa"), token=CLIENT) as ca:
            tb = await ca.submit(b"", pool="b1", start_in=LATER)
            ta = await ca.submit(b"", pool="a2", start_in=LATER)
            await ca.submit(b"", pool="a1", start_in=LATER)
        got = set()
        while not {ta.id, tb.id} <= got:
            ev = await asyncio.wait_for(call.read(), 10)
            assert ev.pool in ("a2", "b1")
            got.add(ev.id)
        call.cancel()
        workers = await raw.admin.ListWorkers(pb.Empty(), metadata=MD)
        assert not workers.unavailable_shards
    finally:
        await raw.close()


def _http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    return http_call(
        url, data, {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}, method
    )


async def test_http_routes_are_routed(cluster: Cluster) -> None:
    base = f"http://{cluster.http('sa')}"
    st, out = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks", {"pool": "b1", "start_in_s": LATER})
    assert st == 200 and shard_of(int(out["id"])) == 200
    st, info = await asyncio.to_thread(_http, "GET", f"{base}/v1/tasks/{out['id']}")
    assert st == 200 and info["pool"] == "b1"
    st, snap = await asyncio.to_thread(_http, "GET", f"{base}/v1/snapshot")
    assert st == 200 and [p["name"] for p in snap["pools"]] == ["a1", "a2", "b1"]
    st, lst = await asyncio.to_thread(_http, "GET", f"{base}/v1/tasks?limit=1000")
    assert st == 200 and out["id"] in {t["id"] for t in lst["tasks"]}
    st, res = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks/{out['id']}/cancel")
    assert st == 200 and res["cancelled"] is True
    req = urllib.request.Request(f"{base}/metrics", headers={"authorization": f"Bearer {ADMIN}"})
    text = (await asyncio.to_thread(lambda: urllib.request.urlopen(req, timeout=10).read())).decode()
    samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert samples and all('shard="sa"' in ln for ln in samples)
    assert any(ln.startswith("cronoq_pool_capacity{") and 'pool="a1"' in ln for ln in samples)
    cross = {"tasks": [{"pool": "a1"}, {"pool": "b1"}]}
    st, err = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks:batch", cross)
    assert st == 400 and err["error"].startswith("a batch must stay within one shard")
    # a forwarded error keeps its code (the peer's SubmitError code, as a local one would)
    dup = {"tasks": [{"pool": "b1", "key": "same"}, {"pool": "b1", "key": "same"}]}
    st, err = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks:batch", dup)
    assert st == 400 and err["code"] == "duplicate_key_in_batch", err


async def test_a_signal_name_with_a_slash_over_the_routers_http(cluster: Cluster) -> None:
    """``POST /v1/signals/{name}`` through the shard router matches the raw path too: a name
    holding ``/`` (sent as ``%2F``) reaches every shard whole."""
    base = f"http://{cluster.http('sa')}"
    st, out = await asyncio.to_thread(_http, "POST", f"{base}/v1/signals/approve%2Fsa", {"payload": 1})
    assert (st, out["name"], out["duplicate"]) == (200, "approve/sa", False), out
    st, out = await asyncio.to_thread(_http, "POST", f"{base}/v1/signals/approve%2Fsa")
    assert (st, out["name"], out["duplicate"]) == (200, "approve/sa", True), out


async def test_busiest_keys_of_the_other_shards_resource_over_http(cluster: Cluster) -> None:
    """``GET /v1/resources/{name}/keys`` answers the same through either shard: the resource's
    shard (sb) answers it, forwarded from sa."""
    sb = f"http://{cluster.http('sb')}"
    ids = []
    for key in ("x", "x", "x", "y"):  # (a far start: live, not running, while the test looks)
        task = {"pool": "b1", "start_in_s": LATER, "resources": {f"customer:{key}": 1}}
        st, out = await asyncio.to_thread(_http, "POST", f"{sb}/v1/tasks", task)
        assert st == 200, out
        ids.append(out["id"])
    try:
        want = {
            "resource": "customer",
            "keys": [
                {"key": "x", "running": 0, "waiting": 3, "limit": 1},
                {"key": "y", "running": 0, "waiting": 1, "limit": 1},
            ],
        }
        for shard in ("sa", "sb"):
            base = f"http://{cluster.http(shard)}"
            st, out = await asyncio.to_thread(_http, "GET", f"{base}/v1/resources/customer/keys?top=5")
            assert (st, out) == (200, want), shard
            st, out = await asyncio.to_thread(_http, "GET", f"{base}/v1/resources/customer/keys?top=1")
            assert st == 200 and out["keys"] == want["keys"][:1], shard
            st, out = await asyncio.to_thread(_http, "GET", f"{base}/v1/resources/customer/keys?top=0")
            assert st == 400 and out["code"] == "invalid_argument", (shard, out)
            st, out = await asyncio.to_thread(_http, "GET", f"{base}/v1/resources/nope/keys")
            assert st == 404, (shard, out)
    finally:
        for tid in ids:
            await asyncio.to_thread(_http, "POST", f"{sb}/v1/tasks/{tid}/cancel")


async def test_worker_at_the_wrong_shard_is_redirected(cluster: Cluster) -> None:
    raw = Raw(cluster.grpc("sa"))
    try:
        reg = pb.WorkerMessage(register=pb.Register(pool="b1", slots=1, protocol_version=3))

        async def one() -> AsyncIterator[pb.WorkerMessage]:
            yield reg

        call = raw.workers.Work(one(), metadata=(("authorization", f"Bearer {TOKENS['worker']}"),))
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            async for _ in call:
                pass
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        sb = f"http://127.0.0.1:{cluster.ports['sb'][0]}"
        assert ei.value.details() == f"pool 'b1' is served by shard 'sb' at {sb}"
        md = dict(ei.value.trailing_metadata() or ())
        assert md["cronoq-shard"] == "sb" and md["cronoq-shard-endpoint"] == sb
    finally:
        await raw.close()


@pytest.fixture(scope="module")
def lonely(cluster: Cluster) -> Iterator[tuple[str, str, str]]:
    """One server of shard ``sa`` of another cluster whose peer ``sb`` is down (a loopback
    port nobody listens on), whose peer ``sc`` is plain http beyond loopback (forwarding
    not allowed) and whose peer ``sd`` is in fact a server of another shard (the cluster's
    ``sa``: its answers say so, and are ignored)."""
    far = non_loopback_ip() or "192.0.2.1"  # (TEST-NET-1: never routed; refusal needs no call)
    shards = {"sa": (1, ["a1", "a2"]), "sb": (200, ["b1"]), "sc": (3, ["c1"]), "sd": (4, ["d1"])}
    eps = {
        "sb": [f"http://127.0.0.1:{free_port()}"],
        "sc": [f"http://{far}:{free_port()}"],
        "sd": [f"http://{cluster.grpc('sa')}"],
    }
    ports = {"sa": [free_port()]}
    text = config_toml(cluster.schema + "_lonely", ports, eps, shards)
    path = Path(cluster.directory) / "lonely.toml"
    path.write_text(text)
    sp = cluster.launch("sa", 0, config=path, name="lonely")
    cluster.wait_ready(sp, leading=True)
    try:
        yield sp.grpc, sp.http, eps["sc"][0]
    finally:
        sp.kill()


async def test_peer_down_and_refused_forwarding(cluster: Cluster, lonely: tuple[str, str, str]) -> None:
    grpc_addr, http_addr, sc_endpoint = lonely
    raw = Raw(grpc_addr)
    try:
        snap = await raw.admin.Snapshot(pb.Empty(), metadata=MD)
        assert list(snap.unavailable_shards) == ["sc", "sd", "sb"] and [p.name for p in snap.pools] == [
            "a1",
            "a2",
        ]
        page = await raw.tasks.ListTasks(pb.ListTasksRequest(), metadata=MD)
        assert "sb" in page.unavailable_shards
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="b1")), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        assert ei.value.details() == "shard 'sb' is unreachable"
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="c1")), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ei.value.details() == f"pool 'c1' is served by shard 'sc' at {sc_endpoint}"
        md = dict(ei.value.trailing_metadata() or ())
        assert md["cronoq-shard"] == "sc" and md["cronoq-shard-endpoint"] == sc_endpoint
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=3 << 56 | 1)), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ei.value.details() == f"task {3 << 56 | 1} belongs to shard 'sc' at {sc_endpoint}"
        # RemoveRecurring fans out: the shards that did not answer are named, not an error
        gone = await raw.admin.RemoveRecurring(pb.RemoveRecurringRequest(name="nowhere"), metadata=MD)
        assert (gone.removed, list(gone.unavailable_shards)) == (False, ["sc", "sd", "sb"])
    finally:
        await raw.close()
    base = f"http://{http_addr}"
    st, out = await asyncio.to_thread(_http, "DELETE", f"{base}/v1/recurring/nowhere")
    assert st == 200 and out == {"removed": False, "unavailable_shards": ["sc", "sd", "sb"]}
    st, err = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks", {"pool": "b1"})
    assert st == 503 and err["code"] == "unavailable" and err["error"] == "shard 'sb' is unreachable"
    st, err = await asyncio.to_thread(_http, "POST", f"{base}/v1/tasks", {"pool": "c1"})
    assert st == 421 and err == {
        "error": f"pool 'c1' is served by shard 'sc' at {sc_endpoint}",
        "code": "wrong_shard",
        "shard": "sc",
        "endpoint": sc_endpoint,
    }


async def test_one_shard_fails_over_alone(cluster: Cluster, workers: list[Worker]) -> None:
    """SIGKILL of shard sb's leader: sa keeps serving at once; forwarding to sb follows its new
    leader (the standby, the next address of sb's endpoint); no acknowledged task is lost."""
    async with Client(cluster.grpc("sa"), token=CLIENT) as ca:
        acked = [(await ca.submit(b"", pool="b1")).id for _ in range(20)]
        # load on both shards through sa during the kill: every acknowledged task must finish
        stop = asyncio.Event()

        async def load(pool: str) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    acked.append((await ca.submit(b"", pool=pool, key=f"load-{pool}-{i}")).id)
                except ClientError as e:
                    assert e.retryable, e
                    await asyncio.sleep(0.05)

        loaders = [asyncio.ensure_future(load(p)) for p in ("a1", "b1", "b1")]
        await asyncio.sleep(0.3)
        old = next(p for n, p in cluster.procs.items() if n.startswith("sb") and p.grpc == cluster.grpc("sb"))
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait()
        # the other shard is not disturbed
        s = await ca.submit(b"a", pool="a1", wait=True, wait_timeout=10)
        assert s.result is not None and s.result.output == b"done:a"
        # forwarding follows sb's new leader
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            try:
                after = await ca.submit(b"b", pool="b1")
                break
            except ClientError as e:
                assert e.code == "unavailable", e
                assert loop.time() < deadline, "sb's standby never took over"
                await asyncio.sleep(0.2)
        # the worker of b1 comes back through sa's redirect to sb's new leader
        assert (await ca.wait(after.id, timeout=30)).output == b"done:b"
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*loaders)
        assert sum(shard_of(t) == 1 for t in acked) and sum(shard_of(t) == 200 for t in acked) > 20
        for tid in acked:  # (acknowledged before or during the kill: none lost)
            assert (await ca.wait(tid, timeout=20)).status == "succeeded"
    # the killed server comes back as sb's standby
    name = next(n for n, p in cluster.procs.items() if p is old)
    sp = cluster.launch("sb", int(name[-1]))
    cluster.wait_ready(sp, leading=False)


async def test_sse_merges_every_shard(cluster: Cluster) -> None:
    host, port = cluster.http("sa").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            f"GET /v1/events?all_transitions=true HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {ADMIN}\r\n\r\n".encode()
        )
        await writer.drain()
        seen = b""
        while b": live" not in seen:
            seen += await asyncio.wait_for(reader.read(4096), 10)
        assert seen.startswith(b"HTTP/1.1 200")
        async with Client(cluster.grpc("sb"), token=CLIENT) as cb:
            tb = await cb.submit(b"", pool="b1", start_in=LATER)
            ta = await cb.submit(b"", pool="a2", start_in=LATER)
        while f'"id":"{tb.id}"'.encode() not in seen or f'"id":"{ta.id}"'.encode() not in seen:
            try:
                seen += await asyncio.wait_for(reader.read(65536), 10)
            except TimeoutError:
                raise AssertionError(f"events of {ta.id}, {tb.id} missing: {seen!r}") from None
        assert b"event: status" in seen
    finally:
        writer.close()


def test_top_shows_every_shard(cluster: Cluster, lonely: tuple[str, str, str]) -> None:
    """`cronoq top` goes through the merged Snapshot: every shard's pools, the missing named."""
    import subprocess
    import sys

    from tests.server.procs import child_env

    def top(server: str) -> str:
        cmd = [sys.executable, "-m", "cronoq.cli", "top", "--once", "--server", server, "--token", ADMIN]
        out = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    text = top(cluster.grpc("sa"))
    assert all(p in text for p in ("a1", "a2", "b1")) and "unavailable shards" not in text
    assert "unavailable shards: sc, sd, sb" in top(lonely[0])


# -- operations across shards (docs/how-to/shards.md#operations-across-shards) ------------------


def _paused(snap: Any) -> dict[str, bool]:
    pools = snap.pools if hasattr(snap, "pools") else []
    return {p.name: p.paused for p in pools}


async def test_pause_and_resume_a_pool_of_the_other_shard(cluster: Cluster) -> None:
    raw = Raw(cluster.grpc("sa"))
    base = f"http://{cluster.http('sa')}"
    try:
        # gRPC through sa for sb's pool, HTTP through sa to resume it
        out = await raw.admin.PausePool(pb.PoolRequest(pool="b1"), metadata=MD)
        assert out.changed is True
        assert _paused(await raw.admin.Snapshot(pb.Empty(), metadata=MD))["b1"] is True
        st, res = await asyncio.to_thread(_http, "POST", f"{base}/v1/pools/b1/pause")
        assert (st, res) == (200, {"changed": False})
        st, res = await asyncio.to_thread(_http, "POST", f"{base}/v1/pools/b1/resume")
        assert (st, res) == (200, {"changed": True})
        st, snap = await asyncio.to_thread(_http, "GET", f"{base}/v1/snapshot")
        assert {p["name"]: p.get("paused", False) for p in snap["pools"]}["b1"] is False
        # and the other way round: sb's endpoint pauses sa's pool
        sb = f"http://{cluster.http('sb')}"
        st, res = await asyncio.to_thread(_http, "POST", f"{sb}/v1/pools/a2/pause")
        assert (st, res) == (200, {"changed": True})
        assert _paused(await raw.admin.Snapshot(pb.Empty(), metadata=MD))["a2"] is True
        assert (await raw.admin.ResumePool(pb.PoolRequest(pool="a2"), metadata=MD)).changed is True
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.admin.PausePool(pb.PoolRequest(pool="nope"), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        st, err = await asyncio.to_thread(_http, "POST", f"{sb}/v1/pools/nope/pause")
        assert st == 404 and err["code"] == "not_found"
    finally:
        await raw.close()


async def test_bulk_actions_replay_and_kind_filter_across_shards(cluster: Cluster) -> None:
    kind = f"ops-{free_port()}"
    ra, rb = Raw(cluster.grpc("sa")), Raw(cluster.grpc("sb"))
    try:
        ids = []
        for p in ("a1", "b1", "a2", "b1"):
            spec = pb.TaskSpec(pool=p, kind=kind, start_in_s=LATER)
            ids.append((await rb.tasks.Submit(pb.SubmitRequest(task=spec), metadata=MD)).id)
        await rb.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="b1", start_in_s=LATER)), metadata=MD)
        # ListTasks' kind filter reaches both shards (gRPC and HTTP)
        page = await ra.tasks.ListTasks(pb.ListTasksRequest(kinds=[kind], limit=1000), metadata=MD)
        assert [t.id for t in page.tasks] == sorted(ids)
        st, lst = await asyncio.to_thread(_http, "GET", f"http://{cluster.http('sb')}/v1/tasks?kind={kind}")
        assert st == 200 and [int(t["id"]) for t in lst["tasks"]] == sorted(ids)
        # an empty list is refused through the router as on one server, never "any" (the
        # router forwards over gRPC, where an empty list is none: it cancelled all four)
        for empty in (
            {"pools": [], "kinds": [kind]},
            {"statuses": [], "kinds": [kind]},
            {"kinds": [], "tenant": kind},
        ):
            st, res = await asyncio.to_thread(
                _http, "POST", f"http://{cluster.http('sa')}/v1/tasks:cancel", {"filter": empty}
            )
            assert (st, res["code"]) == (400, "invalid") and "must not be empty" in res["error"], res
        # one limit across shards: sa's two first, then one of sb's
        bulk = pb.BulkRequest(filter=pb.TaskFilter(kinds=[kind], limit=3), request_key=kind)
        out = await rb.tasks.CancelWhere(bulk, metadata=MD)
        assert (out.matched, out.acted, list(out.unavailable_shards)) == (3, 3, [])
        out = await rb.tasks.CancelWhere(bulk, metadata=MD)  # (a retry: each shard answers again)
        assert (out.matched, out.acted) == (3, 3)
        st, res = await asyncio.to_thread(
            _http, "POST", f"http://{cluster.http('sa')}/v1/tasks:cancel", {"filter": {"kinds": [kind]}}
        )
        assert st == 200 and res == {"matched": 1, "acted": 1, "unavailable_shards": []}
        # replay by id of a task of the other shard, through either endpoint
        b_id = next(i for i in ids if shard_of(i) == 200)
        new = await ra.tasks.Replay(pb.ReplayRequest(task=pb.TaskRef(id=b_id)), metadata=MD)
        assert shard_of(new.id) == 200 and new.id != b_id
        a_id = next(i for i in ids if shard_of(i) == 1)
        st, res = await asyncio.to_thread(
            _http, "POST", f"http://{cluster.http('sb')}/v1/tasks/{a_id}/replay"
        )
        assert st == 200 and shard_of(int(res["id"])) == 1 and res["duplicate"] is False
        info = await rb.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=int(res["id"]))), metadata=MD)
        assert info.kind == kind and info.pool == "a1"
        # the replays cancelled by kind, both shards at once (gRPC)
        out = await ra.tasks.CancelWhere(pb.BulkRequest(filter=pb.TaskFilter(kinds=[kind])), metadata=MD)
        assert (out.matched, out.acted) == (2, 2)
    finally:
        await ra.close()
        await rb.close()


async def test_schedule_of_the_other_shard_paused_and_run(cluster: Cluster) -> None:
    name = f"ops/sched-{free_port()}"  # (a "/": the router's HTTP routes match the raw path)
    ra, rb = Raw(cluster.grpc("sa")), Raw(cluster.grpc("sb"))
    try:
        tmpl = pb.TaskSpec(pool="b1", start_in_s=LATER)
        await rb.admin.AddRecurring(
            pb.RecurringRequest(name=name, cron="0 0 1 1 *", template=tmpl), metadata=MD
        )
        ran = await ra.admin.TriggerRecurring(pb.RecurringNameRequest(name=name), metadata=MD)
        assert shard_of(ran.id) == 200
        base = f"http://{cluster.http('sa')}"
        st, res = await asyncio.to_thread(_http, "POST", f"{base}/v1/recurring/{quote(name, safe='')}/pause")
        assert (st, res) == (200, {"changed": True})
        scheds = await ra.admin.ListRecurring(pb.Empty(), metadata=MD)
        assert next(s for s in scheds.schedules if s.name == name).paused is True
        out = await ra.admin.ResumeRecurring(pb.RecurringNameRequest(name=name), metadata=MD)
        assert out.changed is True
        st, res = await asyncio.to_thread(_http, "POST", f"{base}/v1/recurring/{quote(name, safe='')}/run")
        assert st == 200 and shard_of(int(res["id"])) == 200
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await ra.admin.PauseRecurring(pb.RecurringNameRequest(name="no-such-schedule"), metadata=MD)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        for tid in (ran.id, int(res["id"])):
            await ra.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=tid)), metadata=MD)
    finally:
        await ra.admin.RemoveRecurring(pb.RemoveRecurringRequest(name=name), metadata=MD)
        await ra.close()
        await rb.close()


async def test_bulk_action_with_a_shard_down(cluster: Cluster, lonely: tuple[str, str, str]) -> None:
    grpc_addr, http_addr, _ = lonely
    kind = f"down-{free_port()}"
    raw = Raw(grpc_addr)
    try:
        for _ in range(2):
            spec = pb.TaskSpec(pool="a1", kind=kind, start_in_s=LATER)
            await raw.tasks.Submit(pb.SubmitRequest(task=spec), metadata=MD)
        # the limit is reached on the local shard: the others are not asked
        one = pb.BulkRequest(filter=pb.TaskFilter(kinds=[kind], limit=1))
        out = await raw.tasks.CancelWhere(one, metadata=MD)
        assert (out.matched, out.acted, list(out.unavailable_shards)) == (1, 1, [])
        # every shard asked: the reachable one's counts, the others named (in shard-number order)
        st, res = await asyncio.to_thread(
            _http, "POST", f"http://{http_addr}/v1/tasks:cancel", {"filter": {"kinds": [kind]}}
        )
        assert st == 200 and res == {"matched": 1, "acted": 1, "unavailable_shards": ["sc", "sd", "sb"]}
        out = await raw.tasks.ReplayWhere(pb.BulkRequest(filter=pb.TaskFilter(kinds=[kind])), metadata=MD)
        assert (out.matched, out.acted, list(out.unavailable_shards)) == (2, 2, ["sc", "sd", "sb"])
        # the client's BulkResult names them too (the replays are queued: 2 to cancel)
        c = Client(grpc_addr, token=ADMIN)
        try:
            got = await c.cancel_where(kinds=[kind])
        finally:
            await c.close()
        assert (got.matched, got.acted, got.unavailable_shards) == (2, 2, ("sc", "sd", "sb"))
    finally:
        await raw.close()


async def test_bulk_action_of_a_pool_restricted_token(cluster: Cluster) -> None:
    """Without a pool filter a token's bulk action covers its pools: on each shard only those
    that shard has (none on sa: nothing to do there, no unknown pool)."""
    kind = f"b1-only-{free_port()}"
    md = (("authorization", f"Bearer {B1_TOKEN}"),)
    raw = Raw(cluster.grpc("sa"))
    try:
        for _ in range(2):
            spec = pb.TaskSpec(pool="b1", kind=kind, start_in_s=LATER)
            await raw.tasks.Submit(pb.SubmitRequest(task=spec), metadata=md)
        page = await raw.tasks.ListTasks(pb.ListTasksRequest(kinds=[kind]), metadata=md)
        assert len(page.tasks) == 2
        out = await raw.tasks.CancelWhere(pb.BulkRequest(filter=pb.TaskFilter(kinds=[kind])), metadata=md)
        assert (out.matched, out.acted, list(out.unavailable_shards)) == (2, 2, [])
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.CancelWhere(pb.BulkRequest(filter=pb.TaskFilter(pools=["a1"])), metadata=md)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND  # (another token's pool: no oracle)
    finally:
        await raw.close()


async def test_progress_and_list_filters_reach_the_other_shard(cluster: Cluster) -> None:
    """Watch(progress) and /v1/events?progress=1 through sa for sb's pool; a list's tag and
    created range filters through HTTP."""
    release = asyncio.Event()

    async def slow(lease: Any) -> bytes:
        await lease.progress(1, 2, "half")
        await release.wait()
        return b"ok"

    raw = Raw(cluster.grpc("sa"))
    host, port = cluster.http("sa").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    call = raw.tasks.Watch(pb.WatchRequest(pools=["b1"], progress=True), metadata=MD)
    worker = Worker(cluster.grpc("sb"), "b1", slow, token=TOKENS["worker"], slots=8)
    run = asyncio.ensure_future(worker.run())
    try:
        writer.write(
            f"GET /v1/events?pool=b1&progress=1 HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {ADMIN}\r\n\r\n".encode()
        )
        await writer.drain()
        seen = b""
        while b": live" not in seen:
            seen += await asyncio.wait_for(reader.read(4096), 10)
        await asyncio.wait_for(call.initial_metadata(), 10)
        await asyncio.wait_for(worker.wait_registered(), 20)
        tag = f"t{free_port()}"
        async with Client(cluster.grpc("sa"), token=CLIENT) as ca:
            s = await ca.submit(b"", pool="b1", tags={"p": tag})
        while True:
            ev = await asyncio.wait_for(call.read(), 10)
            if ev.id == s.id and ev.HasField("progress"):
                assert (ev.progress.done, ev.progress.total, ev.progress.message) == (1, 2, "half")
                break
        while f'"id":"{s.id}"'.encode() not in seen or b"event: progress" not in seen:
            seen += await asyncio.wait_for(reader.read(65536), 10)
        base = f"http://{cluster.http('sa')}"
        st, lst = await asyncio.to_thread(_http, "GET", f"{base}/v1/tasks?tag=p={tag}")
        assert st == 200 and [int(t["id"]) for t in lst["tasks"]] == [s.id]
        st, lst = await asyncio.to_thread(_http, "GET", f"{base}/v1/tasks?tag=p={tag}&created_before=1")
        assert st == 200 and lst["tasks"] == []
    finally:
        release.set()
        call.cancel()
        writer.close()
        await worker.stop(1.0)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await raw.close()


@needs_browser
async def test_dashboard_names_the_unavailable_shards(cluster: Cluster, lonely: tuple[str, str, str]) -> None:
    """docs/how-to/shards.md: the dashboard shows every shard's pools and names the shards that
    did not answer (the lonely server's peers sb, sc and sd)."""
    from playwright.async_api import expect

    _, http_addr, _ = lonely
    url = f"http://{http_addr}/"
    async with browser_page(url) as (page, _console):
        await page.goto(url)
        await page.evaluate(f"sessionStorage.setItem('cronoq.token', {ADMIN!r})")
        await page.reload()
        note = page.locator("#pools-note")
        await expect(note).to_have_text("Unavailable shards (their pools are not shown): sc, sd, sb")
        await expect(page.locator("#pools-grid")).to_contain_text("a1")
