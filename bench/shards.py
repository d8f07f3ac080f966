"""cronoq shards benchmark: one shard against two, and forwarded against direct submission,
in one run (docs/how-to/shards.md).

Run ``python bench/shards.py`` (``--quick`` for a smoke-sized run, ``--json PATH`` for the
output, default ``bench/results/shards.json``).

Servers are ``python -m cronoq.cli serve`` processes on loopback with a SQLite store each (a
shard's own file); workers (:class:`cronoq.client.Worker`, a no-op handler) and the load
(:class:`cronoq.client.Client`) run in this driver.  Figures, each for ``batch``
(``submit_batch`` of 500) and ``per-task`` (``submit`` from 64 coroutines; the client coalesces
them into ``SubmitMany``):

``1 shard``
    one server, pool ``p1``; every task to it.
``2 shards direct``
    shards ``sa`` (``p1``) and ``sb`` (``p2``); half the tasks to each, through its own shard.
``2 shards forwarded``
    the same cluster; every task through ``sa``, half of them for ``p2`` (forwarded to ``sb``).

Each figure has the aggregate tasks/s (submit of the first → the last success recorded, from
the servers' ``succeeded`` totals) and each leader's CPU seconds per 1,000 tasks of the figure
(``/proc/PID/stat``; with two shards each leader runs half of them).  On a 2-core machine the
aggregate cannot double — the servers, the workers and the load share the cores — so the
per-leader CPU per task is the figure that tells the capacity of N shards on N cores; the
forwarded/direct CPU ratio of ``sa`` is the forwarding overhead: ``sa`` receives every task
when forwarding and half when direct, so ``forwarded_vs_local_task`` = (forwarded - direct) /
direct is what a forwarded task costs it against a local one (target: <= 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronoq.client import Client, Worker, task

READY = re.compile(r"^cronoq serve: grpc=(\S+) ", re.M)
SIZES = {"full": {"n": 20_000, "slots": 64}, "quick": {"n": 600, "slots": 16}}
CONCURRENCY = 64
BATCH = 500


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    grpc: str
    log: Path

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)


def config(directory: Path, shards: dict[str, tuple[int, str, int]] | None) -> str:
    """``shards``: name → (number, pool, port); None: one unsharded server with pool p1."""
    pools = ["p1"] if shards is None else [p for _, p, _ in shards.values()]
    lines = ["[server]", 'http_addr = "127.0.0.1:0"', "shutdown_grace_s = 1", "[store]", 'kind = "sqlite"']
    lines.append(f'path = "{directory}/{{shard}}.db"' if shards else f'path = "{directory}/one.db"')
    for p in pools:
        lines += ["[[pools]]", f'name = "{p}"', "min = 0", "max = 1000"]
    for name, (number, pool, port) in (shards or {}).items():
        lines += [
            "[[shards]]",
            f'name = "{name}"',
            f"number = {number}",
            f'pools = ["{pool}"]',
            f'endpoint = "http://127.0.0.1:{port}"',
        ]
    return "\n".join(lines) + "\n"


def start(directory: Path, text: str, name: str, port: int, shard: str | None) -> Server:
    cfg = directory / f"{name}.toml"
    cfg.write_text(text.replace("[server]\n", f'[server]\ngrpc_addr = "127.0.0.1:{port}"\n', 1))
    log = directory / f"{name}.log"
    cmd = [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(cfg), "--log-level", "warning"]
    if shard:
        cmd += ["--shard", shard]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("CRONOQ_CONFIG", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while True:
        text_ = log.read_text(errors="replace")
        m = READY.search(text_)
        if m and "cronoq serve: leading" in text_:
            return Server(proc, m[1], log)
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server {name} did not start:\n{text_}")
        time.sleep(0.05)


async def noop(lease: Any) -> None:
    return None


async def succeeded(c: Client) -> int:
    return int((await c.snapshot()).totals.succeeded)


async def run_load(
    targets: list[tuple[str, str]], mode: str, n: int, watch: list[str], base: list[int]
) -> float:
    """``n`` tasks spread over ``targets`` ((server, pool) pairs); seconds until every one
    succeeded (as the servers in ``watch`` count them, from their totals ``base``)."""
    clients = [Client(t) for t, _ in targets]
    watchers = [Client(w) for w in watch]
    try:
        share = n // len(targets)
        t0 = time.perf_counter()

        async def feed(c: Client, pool: str) -> None:
            if mode == "batch":
                for i in range(0, share, BATCH):
                    await c.submit_batch([task(b"", pool=pool) for _ in range(min(BATCH, share - i))])
            else:
                left = share

                async def one() -> None:
                    nonlocal left
                    while left > 0:
                        left -= 1
                        await c.submit(b"", pool=pool)

                await asyncio.gather(*(one() for _ in range(CONCURRENCY // len(targets))))

        await asyncio.gather(*(feed(c, p) for c, (_, p) in zip(clients, targets, strict=True)))
        while True:
            done = sum([await succeeded(w) for w in watchers]) - sum(base)
            if done >= share * len(targets):
                return time.perf_counter() - t0
            await asyncio.sleep(0.005)
    finally:
        for c in clients + watchers:
            await c.close()


async def measure(
    label: str, servers: dict[str, Server], targets: list[tuple[str, str]], n: int
) -> list[dict[str, Any]]:
    out = []
    for mode in ("batch", "per-task"):
        watch = [s.grpc for s in servers.values()]
        base = []
        for w in watch:
            async with Client(w) as c:
                base.append(await succeeded(c))
        cpu0 = {k: s.cpu() for k, s in servers.items()}
        secs = await run_load(targets, mode, n, watch, base)
        cpu = {k: s.cpu() - cpu0[k] for k, s in servers.items()}
        fig = {
            "name": f"{label} {mode}",
            "tasks_per_s": n / secs,
            "cpu_s_per_1000_tasks": {k: 1000 * v / n for k, v in cpu.items()},
        }
        print(
            f"{fig['name']:<28} {fig['tasks_per_s']:8.0f} tasks/s  cpu/1000: "
            + ", ".join(f"{k} {v:.3f}" for k, v in fig["cpu_s_per_1000_tasks"].items()),
            flush=True,
        )
        out.append(fig)
    return out


async def workers_for(
    pairs: list[tuple[str, str]], slots: int
) -> tuple[list[Worker], list[asyncio.Task[None]]]:
    ws = [Worker(t, p, noop, slots=slots) for t, p in pairs]
    runs = [asyncio.ensure_future(w.run()) for w in ws]
    for w in ws:
        await asyncio.wait_for(w.wait_registered(), 30)
    return ws, runs


async def stop_workers(ws: list[Worker], runs: list[asyncio.Task[None]]) -> None:
    for w in ws:
        await w.stop(1.0)
    for r in runs:
        r.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


async def amain(n: int, slots: int) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d)
        # one shard
        one = start(directory, config(directory, None), "one", free_port(), None)
        try:
            ws, runs = await workers_for([(one.grpc, "p1")], slots)
            results += await measure("1 shard", {"one": one}, [(one.grpc, "p1")], n)
            await stop_workers(ws, runs)
        finally:
            one.proc.terminate()
            one.proc.wait()
        # two shards
        pa, pb = free_port(), free_port()
        text = config(directory, {"sa": (1, "p1", pa), "sb": (2, "p2", pb)})
        sa = start(directory, text, "sa", pa, "sa")
        sb = start(directory, text, "sb", pb, "sb")
        try:
            ws, runs = await workers_for([(sa.grpc, "p1"), (sb.grpc, "p2")], slots)
            both = {"sa": sa, "sb": sb}
            results += await measure("2 shards direct", both, [(sa.grpc, "p1"), (sb.grpc, "p2")], n)
            results += await measure("2 shards forwarded", both, [(sa.grpc, "p1"), (sa.grpc, "p2")], n)
            await stop_workers(ws, runs)
        finally:
            for s in (sa, sb):
                s.proc.terminate()
                s.proc.wait()
    by = {r["name"]: r for r in results}
    for mode in ("batch", "per-task"):
        direct = by[f"2 shards direct {mode}"]["cpu_s_per_1000_tasks"]["sa"]
        fwd = by[f"2 shards forwarded {mode}"]["cpu_s_per_1000_tasks"]["sa"]
        ratio = fwd / direct if direct else float("nan")
        # sa receives every task when forwarding, half when direct: the extra CPU is that of
        # the forwarded half, set against what its own half costs it (received and run)
        per_forwarded = (fwd - direct) / direct if direct else float("nan")
        by[f"2 shards forwarded {mode}"]["sa_cpu_vs_direct"] = ratio
        by[f"2 shards forwarded {mode}"]["forwarded_vs_local_task"] = per_forwarded
        print(
            f"forwarding ({mode}): sa's CPU forwarded/direct {ratio:.2f}; "
            f"a forwarded task costs sa {per_forwarded:.2f}x a local one",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "shards.json"))
    args = ap.parse_args(argv)
    sz = SIZES["quick" if args.quick else "full"]
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f}", flush=True)
    results = asyncio.run(amain(sz["n"], sz["slots"]))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"sizes": sz, "loadavg_before": load[0], "loadavg_after": os.getloadavg()[0], "results": results}
    out.write_text(json.dumps(doc, indent=2))
    with contextlib.suppress(Exception):
        print(f"load average after: {os.getloadavg()[0]:.2f}; written {out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
