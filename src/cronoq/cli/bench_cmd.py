"""``cronoq bench``: a throughput benchmark against a server, rendered.

The benchmark itself (a worker in this process, batches of no-op tasks, the event count) is
library code, :mod:`cronoq.benchmark`; this command only turns its options into a
:class:`~cronoq.benchmark.BenchOptions`, draws the run as two progress bars on stderr (a
:class:`~cronoq.benchmark.BenchObserver`), and prints the :class:`~cronoq.benchmark.BenchReport`
as a table, or as JSON with ``--json``. Exit 0 when every task succeeded, 1 otherwise, 4 when
the run timed out (``--timeout``).
"""

from __future__ import annotations

import sys

import click

from cronoq.benchmark import BenchObserver, BenchReport
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
    from cronoq.benchmark import BenchOptions, BenchTimeout, WorkerNotRegistered, run_benchmark

    opts = BenchOptions(
        server=server,
        count=count,
        pool=pool,
        slots=slots,
        batch=batch,
        payload_size=payload_size,
        timeout=timeout,
        token=token,
        tls=tls,
        call_timeout=CALL_TIMEOUT,
    )

    async def main() -> BenchReport:
        try:
            return await run_benchmark(opts, _ProgressBars(count, disable=as_json))
        except WorkerNotRegistered as e:
            fail(str(e))
        except BenchTimeout as e:
            fail(str(e), EXIT_TIMEOUT)

    report = _run(main(), server)
    if as_json:
        _dump(report.to_json())
    else:
        _print_report(report)
    sys.exit(EXIT_OK if report.all_succeeded else EXIT_ERROR)


class _ProgressBars(BenchObserver):
    """Two rich progress bars on stderr (submitted, completed) with their rates: a
    :class:`cronoq.benchmark.BenchObserver` (``--json``: drawn nowhere)."""

    def __init__(self, count: int, *, disable: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.count = count
        self.progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            disable=disable,
        )
        self.p_sub = self.progress.add_task("submitted", total=count, rate="")
        self.p_done = self.progress.add_task("completed", total=count, rate="")

    def started(self, count: int) -> None:
        self.progress.start()

    def submitted(self, submitted: int) -> None:
        self.progress.update(self.p_sub, completed=submitted)

    def completed(self, completed: int, elapsed: float) -> None:
        self.progress.update(self.p_done, completed=completed, rate=f"{completed / elapsed:,.0f}/s")

    def submit_finished(self, seconds: float) -> None:
        self.progress.update(self.p_sub, rate=f"{self.count / seconds:,.0f}/s")

    def finished(self, completed: int, seconds: float) -> None:
        self.progress.update(self.p_done, completed=completed, rate=f"{self.count / seconds:,.0f}/s")

    def stopped(self) -> None:
        self.progress.stop()


def _print_report(report: BenchReport) -> None:
    from rich.table import Table

    count, submit_s, total_s = report.tasks, report.submit_seconds, report.seconds
    t = Table(show_header=False, box=None, title="cronoq bench", title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "tasks",
        f"{count:,} on pool {report.pool!r} ({report.worker_slots} worker slots, batches of {report.batch})",
    )
    t.add_row("submitted in", f"{submit_s:.2f}s ({count / submit_s:,.0f} tasks/s)" if submit_s else "-")
    t.add_row("completed in", f"{total_s:.2f}s")
    t.add_row("throughput", f"[bold green]{count / total_s:,.0f} tasks/s[/bold green] end to end")
    t.add_row("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.items())))
    console.print(t, highlight=False)
