"""The live views: ``watch`` (a tail of status events) and ``top`` (a per-pool table).

Both run until their stop condition (``--limit``, ``--duration``, ``--once``) or until
SIGINT/SIGTERM, which ends them with exit 0 (:func:`cronoq.cli.common._run` with
``interrupt_ok``). ``watch`` prints one line an event; ``top`` redraws
:func:`snapshot_table` every ``--interval`` (``--json``: one object a line, as the HTTP API's
``/v1/events`` data and ``GET /v1/snapshot``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import sys
from typing import TYPE_CHECKING

import click
from rich.markup import escape

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from cronoq.client import Event, Snapshot


from cronoq.cli.common import (
    CALL_TIMEOUT,
    DURATION,
    EPILOG,
    _client,
    _dump,
    _fmt_seconds,
    _fmt_time,
    _need_client,
    _note,
    _run,
    _status_text,
    cli,
    client_options,
    console,
    json_option,
)


def _print_event(ev: Event) -> None:
    parts = [
        f"[dim]{_fmt_time(ev.at, date=False)}[/dim]",
        f"{ev.id:>6}",
        escape(ev.pool),
        _status_text(ev.status, 13),
        f"attempt {ev.attempt}",
    ]
    if ev.key:
        parts.insert(3, f"[bold]{escape(ev.key)}[/bold]")
    line = "  ".join(parts)
    if ev.message:
        line += f"  [dim]{escape(ev.message)}[/dim]"
    console.print(line, highlight=False, soft_wrap=True)


@cli.command(epilog=EPILOG)
@client_options
@click.option("--pool", "-p", "pools", multiple=True, help="Only these pools (repeatable).")
@click.option("--all-transitions", is_flag=True, help="Every status change, not only terminal ones.")
@click.option(
    "--id",
    "ids",
    multiple=True,
    type=click.IntRange(1, 2**64 - 1),
    help="Only this task id (repeatable; with --key: either matches).",
)
@click.option("--key", "keys", multiple=True, help="Only this task key (repeatable).")
@click.option("--limit", type=click.IntRange(1), default=None, help="Stop after this many events.")
@click.option("--duration", type=DURATION, default=None, help="Stop after this long.")
@json_option
def watch(
    server: str,
    token: str | None,
    tls: bool,
    pools: tuple[str, ...],
    all_transitions: bool,
    ids: tuple[int, ...],
    keys: tuple[str, ...],
    limit: int | None,
    duration: float | None,
    as_json: bool,
) -> None:
    """Live tail of task status events (terminal ones unless --all-transitions).

    Runs until Ctrl-C, --limit events or --duration. `--json` writes one event per line.
    `cronoq watch: live` goes to stderr once the subscription is live.
    """
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            events = client.watch(
                pools=list(pools), ids=list(ids), keys=list(keys), all_transitions=all_transitions
            )
            seen = 0

            async def tail() -> None:
                nonlocal seen
                async with events:
                    _note("cronoq watch: live")
                    async for ev in events:
                        if as_json:
                            _dump(ev.to_json())
                        else:
                            _print_event(ev)
                            sys.stdout.flush()
                        seen += 1
                        if limit is not None and seen >= limit:
                            return

            if duration is None:
                await tail()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(duration):
                        await tail()

    _run(main(), server, interrupt_ok=True)


# ---------------------------------------------------------------------------------------------
# top


def snapshot_table(snap: Snapshot, *, title: str | None = None, caption: str | None = None) -> Table:
    """The per-pool table of ``cronoq top`` (also used by examples/demo.py): workers
    connected, capacity (granted slots), desired (autoscaler), busy (+held), pending in total
    and by class (critical/high/normal/low), wait p50/p99, utilization, succeeded, failed."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        show_edge=False,
    )
    t.add_column("pool", style="bold", no_wrap=True)
    for col in ("workers", "cap", "desired", "busy", "pending"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("c/h/n/l", justify="right", no_wrap=True)
    for col in ("p50", "p99", "util"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("done", justify="right", style="green", no_wrap=True)
    t.add_column("failed", justify="right", style="red", no_wrap=True)
    for p in snap.pools:
        t.add_row(
            escape(p.name) + (" [yellow]paused[/yellow]" if getattr(p, "paused", False) else ""),
            str(p.workers_connected),
            str(p.capacity),
            str(p.desired),
            str(p.busy) + (f"+{p.held}h" if p.held else ""),
            str(p.pending),
            "/".join(str(n) for n in [*p.pending_by_class, 0, 0, 0, 0][:4]),
            _fmt_seconds(p.wait_p50),
            _fmt_seconds(p.wait_p99),
            f"{p.utilization:.0%}",
            str(p.succeeded),
            str(p.failed),
        )
    return t


def _totals_line(snap: Snapshot) -> str:
    tot = ", ".join(f"{k} {v}" for k, v in snap.totals.items() if v)
    # a sharded cluster's snapshot lacks the shards that did not answer (docs/how-to/shards.md)
    down = getattr(snap, "unavailable_shards", None)
    return (
        f"live {snap.live_tasks} · running {snap.running} · pending {snap.pending} · "
        f"workers {snap.workers_connected}"
        + (f" · totals: {tot}" if tot else "")
        + (f"\n[red]unavailable shards: {escape(', '.join(down))}[/red]" if down else "")
    )


@cli.command(epilog=EPILOG)
@client_options
@click.option("--interval", type=DURATION, default=1.0, show_default=True, help="Refresh interval.")
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@json_option
def top(server: str, token: str | None, tls: bool, interval: float, once: bool, as_json: bool) -> None:
    """Live per-pool table: workers, capacity, desired, busy, pending by class, wait p50/p99,
    utilization (refreshed every --interval until Ctrl-C; --once prints one frame).
    `--json` writes one snapshot per line."""
    _need_client()
    if interval <= 0:
        raise click.BadParameter("must be > 0", param_hint="'--interval'")

    async def main() -> None:
        async with _client(server, token, tls) as client:
            snap = await client.snapshot(call_timeout=CALL_TIMEOUT)
            if as_json:
                _dump(snap.to_json())
                while not once:
                    await asyncio.sleep(interval)
                    _dump((await client.snapshot(call_timeout=CALL_TIMEOUT)).to_json())
                return

            def frame(s: Snapshot, note: str = "") -> Table:
                stamp = _dt.datetime.now().strftime("%H:%M:%S")
                caption = _totals_line(s) + (f"\n[red]{note}[/red]" if note else "")
                return snapshot_table(s, title=f"cronoq top · {server} · {stamp}", caption=caption)

            if once:
                console.print(frame(snap), highlight=False)
                return
            from rich.live import Live

            from cronoq.client import ClientError

            with Live(frame(snap), console=console, refresh_per_second=4, auto_refresh=False) as live:
                while True:
                    await asyncio.sleep(interval)
                    try:
                        snap = await client.snapshot(call_timeout=max(interval, 5.0))
                        live.update(frame(snap), refresh=True)
                    except ClientError as e:
                        live.update(frame(snap, f"stale: {e}"), refresh=True)

    _run(main(), server, interrupt_ok=True)
