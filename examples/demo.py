"""cronoq demo: a server, a remote worker and a submitter, on the embedded defaults.

Run with ``make run`` (or ``.venv/bin/python examples/demo.py``). It starts

1. ``cronoq serve`` as a subprocess — gRPC on 127.0.0.1:7070, the HTTP API and the dashboard on
   http://127.0.0.1:7071/, durable state in ``./cronoq.db`` (SQLite);
2. once the server leads, a remote worker: ``cronoq worker demo_worker:app --pool default
   --slots 4`` (the app of named tasks in ``examples/demo_worker.py``);
3. a submitter (this process: the same app bound to a :class:`cronoq.client.Client`, calling
   ``resize.submit(i)``, ``report.submit(i)``, ...): waves of mixed work — Low
   reports, Normal image resizes, High API calls, Critical alerts with deadlines — a flaky task
   that succeeds on its third attempt, a small DAG (extract → two transforms → load, submitted
   atomically) and a recurring schedule every 5 seconds.

Results are printed as they arrive (from a ``watch`` of the event stream) with a snapshot table
every few seconds. Ctrl-C (or ``--duration SECONDS``) stops everything cleanly: the schedule is
removed, the worker drains, the server shuts down (SIGTERM) and the demo exits 0. Tasks still
pending stay in ``cronoq.db`` and run on the next start. The closing line counts the tasks
this run submitted and how many of them finished; the schedule's occurrences (and tasks of
an earlier run) that finished meanwhile are counted apart, on an "also finished" line.

Options: ``--duration``, ``--grpc-port``/``--http-port`` (0 = any free port), ``--db``,
``--slots``, ``--wave-interval``, ``--snapshot-interval`` (``--help`` says what each does).
Meanwhile, in another terminal: ``.venv/bin/cronoq top``, ``.venv/bin/cronoq watch``,
``.venv/bin/cronoq submit --task resize --args '[7]' --wait`` (the demo worker serves the app's
named tasks only: a plain ``cronoq submit '{"n": 1}'`` would wait for a worker that serves its
kind).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import demo_worker as demo  # the app of named tasks the worker serves (examples/ is sys.path[0])
from rich.console import Console
from rich.markup import escape

from cronoq.cli import snapshot_table
from cronoq.client import Client, ClientError, Event, RetryPolicy
from cronoq.tasks import TaskCall

HERE = Path(__file__).resolve().parent
READY_RE = re.compile(r"cronoq serve: grpc=(\S+) http=(\S+)")
POOL = "default"
# where a finished task the submitter did not submit came from (the closing line counts them apart)
OTHER_SCHEDULE = "schedule occurrence"  # a 'tick' of the app's recurring schedule
OTHER_EARLIER = "task from an earlier run"  # left pending in the database
OTHER_ELSEWHERE = "task submitted elsewhere"  # e.g. `cronoq submit` in another terminal
OTHER_UNKNOWN = "task the server no longer knows"
OTHER_PLURAL = {
    OTHER_SCHEDULE: "schedule occurrences",
    OTHER_EARLIER: "tasks from earlier runs",
    OTHER_ELSEWHERE: "tasks submitted elsewhere",
    OTHER_UNKNOWN: "tasks the server no longer knows",
}

console = Console(highlight=False, soft_wrap=True)  # (long lines wrap in the terminal, not mid-line in a log)


class DemoError(Exception):
    """The demo could not start (a process failed or timed out)."""


# ---------------------------------------------------------------------------------------------
# child processes


class Child:
    """A ``python -m cronoq.cli ...`` subprocess whose output is echoed with a prefix and
    scanned for the readiness lines."""

    def __init__(self, name: str, style: str) -> None:
        self.name = name
        self.style = style
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self.changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self, args: list[str], *, cwd: Path | None = None) -> None:
        env = dict(os.environ)
        env.pop("CRONOQ_CONFIG", None)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("COLUMNS", "160")  # wide log lines (rich wraps at the terminal width)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cronoq.cli",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                break
            line = raw.decode(errors="replace").rstrip()
            if not line.strip():
                continue
            self.lines.append(line)
            self.changed.set()
            console.print(f"[{self.style}]{self.name:>6} │[/{self.style}] [dim]{escape(line)}[/dim]")
        self.changed.set()

    async def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first output line matching ``pattern``; DemoError if the process exits first."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self.lines[seen:]:
                m = pattern.search(line)
                if m:
                    return m
            seen = len(self.lines)
            assert self.proc is not None
            if self.proc.returncode is not None or (self._reader is not None and self._reader.done()):
                await self.proc.wait()
                raise DemoError(f"{self.name} exited with code {self.proc.returncode} before it was ready")
            left = deadline - time.monotonic()
            if left <= 0:
                raise DemoError(f"{self.name} not ready within {timeout:g}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))

    async def stop(self, timeout: float) -> int | None:
        """SIGTERM, wait up to ``timeout`` (then SIGKILL); the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                console.print(f"[red]{self.name} did not stop within {timeout:g}s: killing it[/red]")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5.0)
        return proc.returncode


def server_args(args: argparse.Namespace, tmp: Path) -> list[str]:
    """``serve`` with no configuration on the defaults (the embedded SQLite ``./cronoq.db``,
    ports 7070/7071); otherwise a small TOML file with the ports and database asked for."""
    db = Path(args.db)
    if args.grpc_port == 7070 and args.http_port == 7071 and db == Path("cronoq.db"):
        return ["serve"]
    cfg = tmp / "demo.toml"
    cfg.write_text(
        "[server]\n"
        f'grpc_addr = "127.0.0.1:{args.grpc_port}"\n'
        f'http_addr = "127.0.0.1:{args.http_port}"\n'
        "[store]\n"
        'kind = "sqlite"\n'
        f"path = {json.dumps(str(db.resolve()))}\n"
    )
    return ["serve", "--config", str(cfg)]


# ---------------------------------------------------------------------------------------------
# the submitter


@dataclass
class Sent:
    label: str
    priority: str
    at: float
    show_output: bool = False


class Submitter:
    def __init__(self, client: Client, run: str, wave_interval: float, started: float) -> None:
        self.client = client
        self.run = run  # unique per demo run: the keys stay unique across runs on one database
        self.wave_interval = wave_interval
        self.started = started
        self.wall_started = time.time()
        self.sent: dict[int, Sent] = {}
        self.outcomes: dict[str, int] = {}  # terminal statuses of the tasks in ``sent``
        self.others: dict[str, int] = {}  # other tasks seen finishing, by origin (``OTHER_*``)
        self.retries = 0
        self.rng = random.Random()
        self.counter = itertools.count(1)

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:6.1f}s"

    async def submit(
        self, call: TaskCall[..., Any], label: str, *args: Any, show: bool = False, **kwargs: Any
    ) -> int:
        handle = await call.submit(*args, **kwargs)
        priority = str(call.fields.get("priority", "normal"))
        self.sent[handle.id] = Sent(label, priority, time.monotonic(), show)
        return handle.id

    async def first_wave(self) -> None:
        console.print(f"[bold]{self.elapsed()}  submitting[/bold] a flaky task, a DAG and a schedule")
        retry = RetryPolicy(max_attempts=5, initial_backoff=0.5, max_backoff=2.0)
        call = demo.flaky.options(key=f"flaky-{self.run}", retry=retry)
        await self.submit(call, "flaky fetch", "https://example.com/feed", seconds=0.1, show=True)
        await self.dag(1)
        await demo.app.apply_recurring(self.client)  # the app's schedule: 'tick' every 5 s
        console.print(
            f"[bold]{self.elapsed()}  schedule[/bold] {demo.SCHEDULE!r}: a 'tick' task every 5 seconds"
        )

    async def dag(self, n: int) -> None:
        """extract → (transform-a, transform-b) → load, submitted as one atomic batch."""
        k = f"etl{n}-{self.run}"
        specs = [
            demo.etl_extract.options(key=f"{k}-extract").spec(seconds=0.3),
            demo.etl_transform.options(key=f"{k}-ta", after=f"{k}-extract").spec(seconds=0.4),
            demo.etl_transform.options(key=f"{k}-tb", after=f"{k}-extract").spec(seconds=0.2),
            demo.etl_load.options(key=f"{k}-load", after=[f"{k}-ta", f"{k}-tb"]).spec(seconds=0.2),
        ]
        handles = await demo.app.submit_batch(specs)  # atomic: all four or none
        for h, step in zip(handles, ("extract", "transform a", "transform b", "load")):
            self.sent[h.id] = Sent(f"dag {n}: {step}", "normal", time.monotonic(), step == "load")

    async def wave(self, w: int) -> None:
        for _ in range(3):
            i = next(self.counter)
            await self.submit(demo.report, f"report {i}", i, seconds=0.8)  # Low: the task's priority
        for _ in range(3):
            i = next(self.counter)
            await self.submit(demo.resize, f"resize {i}", i)
        i = next(self.counter)
        await self.submit(demo.api, f"api call {i}", i)  # High
        if w % 3 == 1:
            i = next(self.counter)
            await self.submit(demo.alert.options(deadline_in=3.0), f"alert {i}", "oncall", show=True)
        if w % 5 == 0:
            await self.dag(w // 5 + 1)
        if w % 7 == 3:
            i = next(self.counter)
            await self.submit(demo.broken, f"broken {i}", show=True)

    async def produce(self) -> None:
        await self.first_wave()
        for w in itertools.count(1):
            await self.wave(w)
            await asyncio.sleep(self.wave_interval)

    async def consume(self, events: Any) -> None:
        async for ev in events:
            await self.on_event(ev)

    async def on_event(self, ev: Event) -> None:
        sent = self.sent.get(ev.id)
        if ev.status == "retrying":
            if sent is not None:  # (the closing line counts this run's tasks' retries only)
                self.retries += 1
            label = sent.label if sent else f"task {ev.id}"
            console.print(
                f"{self.elapsed()}  [dark_orange]↻ {escape(label)}[/dark_orange] "
                f"attempt {ev.attempt} failed, retrying: [dim]{escape(ev.message)}[/dim]"
            )
            return
        if not ev.terminal:
            return
        if sent is None:  # a schedule's occurrence, a task from elsewhere, or one not noted yet
            took, show, label, prio, origin = "", True, f"task {ev.id}", "-", OTHER_UNKNOWN
            with contextlib.suppress(ClientError):
                info = await self.client.get(ev.id, call_timeout=2.0)
                prio = info.priority
                if info.kind == "tick":
                    label, origin = "tick (every 5s)", OTHER_SCHEDULE
                elif info.created_at is not None and info.created_at < self.wall_started:
                    label, origin = f"{info.kind} (earlier run)", OTHER_EARLIER
                else:
                    label, origin = f"{info.kind} (not the demo's)", OTHER_ELSEWHERE
            # a task of ours can finish before its submit call returned and noted it
            sent = self.sent.get(ev.id)
            if sent is None:
                self.others[origin] = self.others.get(origin, 0) + 1
        if sent is not None:
            self.outcomes[ev.status] = self.outcomes.get(ev.status, 0) + 1
            label, show, prio = sent.label, sent.show_output, sent.priority
            took = f"{time.monotonic() - sent.at:5.2f}s"
        mark, style = ("✓", "green") if ev.status == "succeeded" else ("✗", "red")
        line = (
            f"{self.elapsed()}  [{style}]{mark} {escape(label):<22}[/{style}] "
            f"[dim]{prio:<8} #{ev.id} {ev.status} {took}[/dim]"
        )
        if ev.status != "succeeded" and ev.message:
            line += f" [red]{escape(ev.message)}[/red]"
        elif show:
            with contextlib.suppress(ClientError):
                result = await self.client.wait(ev.id, timeout=2.0)
                value = result.value()
                if value is not None:
                    line += f" → {escape(str(value))}"
        console.print(line)

    def summary(self) -> str:
        """The closing lines: the demo's own tasks (finished ones among those submitted), then
        whatever else finished meanwhile (schedule occurrences, tasks of earlier runs), apart."""
        done = sum(self.outcomes.values())
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(self.outcomes.items()))
        line = f"[bold]{len(self.sent)} tasks submitted[/bold], {done} of them finished"
        line += f" ({statuses})" if statuses else ""
        line += f", {self.retries} {'retry' if self.retries == 1 else 'retries'}"
        others = [
            f"{n} {o if n == 1 else plural}"
            for o, plural in OTHER_PLURAL.items()
            if (n := self.others.get(o, 0))
        ]
        if others:
            line += "\nalso finished: " + ", ".join(others)
        return line

    async def snapshots(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            snap = await self.client.snapshot()
            console.print()
            console.print(snapshot_table(snap, title=f"snapshot at {self.elapsed().strip()}"))
            console.print()


# ---------------------------------------------------------------------------------------------
# main


async def main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)

    server = Child("server", "cyan")
    worker = Child("worker", "magenta")
    code = 0
    with tempfile.TemporaryDirectory(prefix="cronoq-demo-") as tmp:
        try:
            console.rule("[bold]cronoq demo")
            await server.start(server_args(args, Path(tmp)))
            m = await server.wait_for(READY_RE, 60.0)
            grpc_addr, http_addr = m.group(1), m.group(2)
            await server.wait_for(re.compile(r"cronoq serve: leading"), 60.0)
            await worker.start(
                [
                    "worker",
                    "demo_worker:app",
                    "--app-dir",
                    str(HERE),
                    "--pool",
                    POOL,
                    "--slots",
                    str(args.slots),
                    "--server",
                    grpc_addr,
                    "--name",
                    "demo-worker",
                    "--grace",
                    "5",
                    "--log-level",
                    "warning",
                ]
            )
            await worker.wait_for(re.compile(r"cronoq worker: registered"), 60.0)
            console.print(
                f"\n[bold]server[/bold]     gRPC {grpc_addr} · store {args.db} (SQLite)\n"
                f"[bold]dashboard[/bold]  [link=http://{http_addr}/]http://{http_addr}/[/link]\n"
                f"[bold]worker[/bold]     cronoq worker demo_worker:app --pool {POOL} "
                f"--slots {args.slots}\n"
                f"[bold]try[/bold]        .venv/bin/cronoq top --server {grpc_addr}   ·   "
                f".venv/bin/cronoq watch --server {grpc_addr}\n"
                f"           .venv/bin/cronoq submit --task resize --args '[7]' --wait --server {grpc_addr}\n"
                f"[bold]stop[/bold]       Ctrl-C"
                + (f" (or wait {args.duration:g}s)" if args.duration is not None else "")
                + "\n"
            )
            code = await run_workload(grpc_addr, args, stop)
        except DemoError as e:
            console.print(f"[red]error: {escape(str(e))}[/red]")
            if "serve" in str(e) or "server" in str(e):
                console.print("[red]is another server using the ports? try --grpc-port/--http-port[/red]")
            code = 1
        finally:
            console.rule("[bold]stopping")
            wcode = await worker.stop(15.0)
            scode = await server.stop(30.0)
            console.print(f"worker exited with {wcode}, server exited with {scode}")
            if code == 0 and (wcode not in (0, None) or scode not in (0, None)):
                code = 1
    return code


async def run_workload(grpc_addr: str, args: argparse.Namespace, stop: asyncio.Event) -> int:
    run = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    async with Client(grpc_addr) as client:
        demo.app.bind(client)  # demo.resize.submit(...) etc. now go to the server
        sub = Submitter(client, run, args.wave_interval, time.monotonic())
        async with client.watch(pools=[POOL], all_transitions=True) as events:
            tasks = [
                asyncio.create_task(sub.consume(events)),
                asyncio.create_task(sub.produce()),
                asyncio.create_task(sub.snapshots(args.snapshot_interval)),
                asyncio.create_task(stop.wait()),
            ]
            failed = False
            try:
                done, _ = await asyncio.wait(
                    tasks, timeout=args.duration, return_when=asyncio.FIRST_COMPLETED
                )
                for t in done:
                    if not t.cancelled() and t.exception() is not None and not stop.is_set():
                        failed = True
                        console.print(f"[red]error: {escape(str(t.exception()))}[/red]")
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(ClientError):
                await client.remove_recurring(demo.SCHEDULE, call_timeout=5.0)
            with contextlib.suppress(ClientError):
                snap = await client.snapshot(call_timeout=5.0)
                console.print()
                console.print(snapshot_table(snap, title="final snapshot"))
        console.print("\n" + sub.summary())
    return 1 if failed else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="cronoq demo: server + worker + submitter (Ctrl-C to stop)")
    ap.add_argument("--duration", type=float, default=None, help="stop after this many seconds of workload")
    ap.add_argument("--grpc-port", type=int, default=7070, help="gRPC port (0 = any free port)")
    ap.add_argument("--http-port", type=int, default=7071, help="HTTP/dashboard port (0 = any free port)")
    ap.add_argument("--db", default="cronoq.db", help="SQLite database file (default ./cronoq.db)")
    ap.add_argument("--slots", type=int, default=4, help="the worker's concurrent tasks")
    ap.add_argument("--wave-interval", type=float, default=2.0, help="seconds between submission waves")
    ap.add_argument("--snapshot-interval", type=float, default=5.0, help="seconds between snapshot tables")
    args = ap.parse_args(argv)
    if args.duration is not None and args.duration <= 0:
        ap.error("--duration must be > 0")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
