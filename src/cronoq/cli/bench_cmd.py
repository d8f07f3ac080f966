"""``cronoq bench``: a throughput benchmark against a server.

The command parses its options, runs the benchmark and renders the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # pragma: no cover
    from cronoq.client import Client, Lease


from cronoq.cli.common import (
    CALL_TIMEOUT,
    DURATION,
    EPILOG,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_TIMEOUT,
    _dump,
    _need_client,
    _run,
    cli,
    client_options,
    console,
    err_console,
    fail,
    json_option,
)
from cronoq.cli.worker_cmd import _start_worker


@cli.command(epilog=EPILOG)
@client_options
@click.option("--count", "-n", type=click.IntRange(1), default=2000, show_default=True, help="Tasks to run.")
@click.option("--pool", "-p", default="default", show_default=True, help="Pool to run them on.")
@click.option(
    "--slots",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Slots the benchmark's worker asks for (the pool's max caps the grant).",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Tasks per SubmitBatch call.",
)
@click.option(
    "--payload-size", type=click.IntRange(0), default=0, show_default=True, help="Payload bytes per task."
)
@click.option(
    "--timeout", type=DURATION, default=300.0, show_default=True, help="Give up after this long (exit 4)."
)
@json_option
def bench(
    server: str,
    token: str | None,
    tls: bool,
    count: int,
    pool: str,
    slots: int,
    batch: int,
    payload_size: int,
    timeout: float,
    as_json: bool,
) -> None:
    """Throughput benchmark: submit --count no-op tasks in batches to a server and run them
    with an in-process remote worker (this process); report tasks/s end to end.

    Other workers of the pool may take some of the tasks; use an idle pool for clean figures.
    """
    _need_client()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cronoq.client import Client, ClientError, Worker, task

    async def noop(lease: Lease) -> None:
        return None

    payload = b"x" * payload_size if payload_size else None

    async def main() -> int:
        client = Client(server, token=token, tls=tls)
        w = Worker(
            server,
            pool,
            noop,
            slots=slots,
            token=token,
            name=f"cronoq-bench:{os.getpid()}",
            tls=tls,
            reconnect=False,
        )
        async with client:
            try:
                run_task = await _start_worker(w, CALL_TIMEOUT)
            except TimeoutError:
                fail(f"the benchmark worker could not register with {server} within {CALL_TIMEOUT:g}s")
            try:
                return await measure(client, w.granted_slots)
            finally:
                await w.stop(grace=1.0)
                with contextlib.suppress(Exception):
                    await run_task

    async def measure(client: Client, granted: int) -> int:
        submitted: set[int] = set()
        finished: dict[int, str] = {}  # terminal events, possibly before their submit returned
        counted = 0
        progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            disable=as_json,
        )
        all_done = asyncio.Event()
        t0 = time.perf_counter()
        submit_s = 0.0
        with progress:
            p_sub = progress.add_task("submitted", total=count, rate="")
            p_done = progress.add_task("completed", total=count, rate="")
            async with client.watch(pools=[pool]) as events:

                async def collect() -> None:
                    nonlocal counted
                    async for ev in events:
                        finished[ev.id] = ev.status
                        if ev.id in submitted:
                            counted += 1
                        if counted >= count and len(submitted) == count:
                            all_done.set()
                            return

                collector = asyncio.create_task(collect())
                last = 0.0
                try:
                    left = count
                    while left:
                        n = min(batch, left)
                        subs = await client.submit_batch(
                            [task(payload, pool=pool, kind="bench") for _ in range(n)],
                            call_timeout=CALL_TIMEOUT,
                        )
                        for s in subs:
                            submitted.add(s.id)
                            if s.id in finished:
                                counted += 1
                        left -= n
                        progress.update(p_sub, completed=count - left)
                        now = time.perf_counter()
                        if now - last > 0.1:
                            last = now
                            progress.update(p_done, completed=counted, rate=f"{counted / (now - t0):,.0f}/s")
                    submit_s = time.perf_counter() - t0
                    progress.update(p_sub, rate=f"{count / submit_s:,.0f}/s")
                    if counted >= count:
                        all_done.set()
                    deadline = t0 + timeout
                    while not all_done.is_set():
                        if collector.done():
                            collector.result()
                            raise ClientError("aborted", "the event stream ended before every task finished")
                        if time.perf_counter() > deadline:
                            fail(
                                f"only {counted} of {count} tasks finished within {timeout:g}s", EXIT_TIMEOUT
                            )
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(all_done.wait(), 0.1)
                        now = time.perf_counter()
                        progress.update(p_done, completed=counted, rate=f"{counted / (now - t0):,.0f}/s")
                finally:
                    collector.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await collector
            total_s = time.perf_counter() - t0
            progress.update(p_done, completed=counted, rate=f"{count / total_s:,.0f}/s")
        statuses: dict[str, int] = {}
        for i in submitted:
            st = finished.get(i, "unknown")
            statuses[st] = statuses.get(st, 0) + 1
        report = {
            "tasks": count,
            "pool": pool,
            "worker_slots": granted,
            "batch": batch,
            "payload_bytes": payload_size,
            "submit_seconds": round(submit_s, 6),
            "submit_per_s": round(count / submit_s, 1) if submit_s else None,
            "seconds": round(total_s, 6),
            "tasks_per_s": round(count / total_s, 1),
            "statuses": statuses,
        }
        if as_json:
            _dump(report)
        else:
            from rich.table import Table

            t = Table(show_header=False, box=None, title="cronoq bench", title_justify="left")
            t.add_column(style="bold")
            t.add_column()
            t.add_row("tasks", f"{count:,} on pool {pool!r} ({granted} worker slots, batches of {batch})")
            t.add_row(
                "submitted in", f"{submit_s:.2f}s ({count / submit_s:,.0f} tasks/s)" if submit_s else "-"
            )
            t.add_row("completed in", f"{total_s:.2f}s")
            t.add_row("throughput", f"[bold green]{count / total_s:,.0f} tasks/s[/bold green] end to end")
            t.add_row("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
            console.print(t, highlight=False)
        return EXIT_OK if statuses.get("succeeded", 0) == count else EXIT_ERROR

    sys.exit(_run(main(), server))
