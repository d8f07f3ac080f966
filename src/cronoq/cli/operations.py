"""Operations on many tasks or a pool: ``pause``, ``resume``, ``replay``, ``cancel``.

``cancel REF`` and ``replay REF`` act on one task; without ``REF`` they act on every task the
filter options (:func:`bulk_options`, :func:`bulk_filter`) match, after a confirmation prompt
(``--yes`` skips it), and report the operation's counts (docs/how-to/operations.md).
``pause`` / ``resume`` stop and restart a pool's dispatch.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # pragma: no cover
    pass


from cronoq.cli.common import (
    CALL_TIMEOUT,
    DURATION,
    EPILOG,
    DurationType,
    F,
    _client,
    _dump,
    _fmt_time,
    _key_values,
    _need_client,
    _ref_arg,
    _run,
    cli,
    client_options,
    console,
    json_option,
)


def _since(value: str | None, what: str) -> float | None:
    """A time on the command line: an ISO 8601 / RFC 3339 time (local time when it names no
    offset), a time of day today (``10:00``), or a duration ago (``30m``)."""
    if value is None:
        return None
    text = value.strip()
    if DurationType._RE.match(text):
        return time.time() - DURATION.convert(text, None, None)
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", text)
    try:
        if m is not None:
            h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
            d = _dt.datetime.now().astimezone().replace(hour=h, minute=mi, second=sec, microsecond=0)
        else:
            d = _dt.datetime.fromisoformat(text)
            if d.tzinfo is None:
                d = d.astimezone()
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time (e.g. 2026-01-31T10:00:00Z, 10:00 or 30m for 30 minutes ago)",
            param_hint=f"'{what}'",
        ) from None
    return d.timestamp()


def bulk_filter(
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    *,
    finished: bool,
) -> dict[str, Any]:
    """The bulk filter keywords of ``cancel`` / ``replay`` options (``--since`` / ``--until``
    bound the finish time for a replay, the creation time for a cancel)."""
    lo, hi = ("finished_after", "finished_before") if finished else ("created_after", "created_before")
    kw: dict[str, Any] = {
        "pools": list(pools) or None,
        "statuses": list(statuses) or None,
        "kinds": list(kinds) or None,
        "tags": tags or None,
        "tenant": tenant,
        lo: _since(since, "--since"),
        hi: _since(until, "--until"),
        "limit": limit,
    }
    return {k: v for k, v in kw.items() if v is not None}


def _describe_filter(kw: dict[str, Any]) -> str:
    parts = []
    for k, v in kw.items():
        if isinstance(v, list):
            v = ",".join(v)
        elif isinstance(v, dict):
            v = ",".join(f"{a}={b}" for a, b in v.items())
        elif isinstance(v, float):
            v = _fmt_time(v)
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _statuses(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """``--status`` values: task status names (a misspelt one is a usage error, before the
    confirmation prompt; whether the action applies to it is the server's to say)."""
    from cronoq.proto import enums

    names = [n for v, n in sorted(enums.TASK_STATUS.names.items()) if v]
    for v in values:
        if v.lower() not in names:
            raise click.BadParameter(
                f"unknown status {v!r} (expected one of: {', '.join(names)})", ctx=ctx, param=param
            )
    return values


def bulk_options(f: F) -> F:
    """The filter options of a bulk ``cancel`` / ``replay``."""
    for opt in reversed(
        [
            click.option("--pool", "pools", multiple=True, help="Only this pool (repeatable)."),
            click.option(
                "--status",
                "statuses",
                multiple=True,
                callback=_statuses,
                help="Only this status (repeatable).",
            ),
            click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable)."),
            click.option(
                "--tag",
                "tags",
                multiple=True,
                callback=_key_values,
                metavar="KEY=VALUE",
                help="Tag equality (repeatable).",
            ),
            click.option("--tenant", default=None, help="Only this tenant's tasks."),
            click.option("--since", default=None, help="From this time (ISO time, 10:00, or 30m ago)."),
            click.option("--until", default=None, help="Up to this time (same forms as --since)."),
            click.option("--limit", type=click.IntRange(1), default=None, help="Act on at most N tasks."),
            click.option("--request-key", default="", help="Idempotency key: a retry with it acts once."),
            click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
        ]
    ):
        f = opt(f)
    return f


def _run_bulk(
    action: str,
    kw: dict[str, Any],
    server: str,
    token: str | None,
    tls: bool,
    yes: bool,
    request_key: str,
    as_json: bool,
    force: bool = False,
) -> None:
    if not kw:
        raise click.UsageError(
            f"{action} needs a task REF or at least one filter option (--pool, --status, ...)"
        )
    if not yes:
        click.confirm(f"{action} every task matching {_describe_filter(kw)}?", abort=True, err=True)

    async def main() -> None:
        async with _client(server, token, tls) as client:
            if action == "replay":
                res = await client.replay_where(
                    force=force, request_key=request_key, call_timeout=CALL_TIMEOUT, **kw
                )
            else:
                res = await client.cancel_where(request_key=request_key, call_timeout=CALL_TIMEOUT, **kw)
        if as_json:
            from cronoq.spec.json_shapes import bulk_json

            _dump(bulk_json(res.matched, res.acted, list(res.unavailable_shards), res.resumed))
        else:
            verb = "replayed" if action == "replay" else "cancelled"
            console.print(f"{res.matched} tasks matched, {res.acted} {verb}", highlight=False)
            if res.resumed:  # (the counts include what the interrupted first call did)
                console.print("resumed an interrupted call with this request key", highlight=False)
            if res.unavailable_shards:  # (a sharded server: their tasks are not counted)
                names = ", ".join(res.unavailable_shards)
                console.print(f"unavailable shards (not counted): {names}", highlight=False)

    _run(main(), server)


def _opt_ref_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    return None if value is None else _ref_arg(ctx, param, value)


@cli.command(epilog=EPILOG)
@click.argument("pool")
@client_options
@json_option
def pause(pool: str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Pause POOL (admin token): it dispatches nothing new until `cronoq resume POOL`; running
    attempts finish, submissions are still accepted."""
    _pause_cmd(pool, True, server, token, tls, as_json)


@cli.command(epilog=EPILOG)
@click.argument("pool")
@client_options
@json_option
def resume(pool: str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Resume a paused POOL (admin token): its backlog dispatches at once."""
    _pause_cmd(pool, False, server, token, tls, as_json)


def _pause_cmd(pool: str, paused: bool, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            if paused:
                changed = await client.pause(pool, call_timeout=CALL_TIMEOUT)
            else:
                changed = await client.resume(pool, call_timeout=CALL_TIMEOUT)
        state = "paused" if paused else "resumed"
        if as_json:
            _dump({"changed": changed})
        elif changed:
            console.print(f"pool {pool} {state}", highlight=False)
        else:
            console.print(f"pool {pool} was already {'paused' if paused else 'running'}", highlight=False)

    _run(main(), server)


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="[REF]", required=False, callback=_opt_ref_arg)
@click.option("--force", is_flag=True, help="Also replay succeeded tasks (and, by filter, replayed ones).")
@bulk_options
@client_options
@json_option
def replay(
    ref: int | str | None,
    force: bool,
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    request_key: str,
    yes: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """Replay a finished task that did not succeed (id or key; --force: also a succeeded one)
    as a new task, or, with filter options instead of REF, every matching one
    (`cronoq replay --pool P --status dead_lettered --since 10:00`; asks first unless --yes;
    --since/--until bound the finish time)."""
    _need_client()
    kw = bulk_filter(pools, statuses, kinds, tags, tenant, since, until, limit, finished=True)
    if ref is not None and kw:
        raise click.UsageError("give a task REF or filter options, not both")
    if ref is None:
        _run_bulk("replay", kw, server, token, tls, yes, request_key, as_json, force)
        return

    async def main() -> None:
        async with _client(server, token, tls) as client:
            sub = await client.replay(ref, force=force, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump(sub.to_json())
        else:
            console.print(f"replayed task {ref} as task {sub.id}", highlight=False)

    _run(main(), server)


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="[REF]", required=False, callback=_opt_ref_arg)
@bulk_options
@client_options
@json_option
def cancel(
    ref: int | str | None,
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    request_key: str,
    yes: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """Cancel a task (id or key). Exit 0 also when it had already finished (then nothing changes).
    With filter options instead of REF, cancel every matching task that has not finished
    (`cronoq cancel --pool P --status ready`; asks first unless --yes; --since/--until bound
    the creation time)."""
    _need_client()
    kw = bulk_filter(pools, statuses, kinds, tags, tenant, since, until, limit, finished=False)
    if ref is not None and kw:
        raise click.UsageError("give a task REF or filter options, not both")
    if ref is None:
        _run_bulk("cancel", kw, server, token, tls, yes, request_key, as_json)
        return

    async def main() -> None:
        async with _client(server, token, tls) as client:
            cancelled = await client.cancel(ref, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump({"cancelled": cancelled})
        elif cancelled:
            console.print(f"cancelled task {ref}", highlight=False)
        else:
            console.print(f"task {ref} had already finished: not cancelled", highlight=False)

    _run(main(), server)


@cli.command(name="signal", epilog=EPILOG)
@click.argument("name")
@click.argument("payload", metavar="[JSON]", required=False)
@client_options
@json_option
def signal_cmd(
    name: str, payload: str | None, server: str, token: str | None, tls: bool, as_json: bool
) -> None:
    """Send signal NAME with an optional JSON payload (docs/how-to/durable.md#signals): tasks
    waiting in `ctx.wait_signal(NAME)` get it. Write-once: a second signal of NAME is a
    duplicate and changes nothing."""
    import json

    try:
        value = None if payload is None else json.loads(payload)
    except ValueError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint="JSON") from None
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            res = await client.signal(name, value, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump({"name": res.name, "duplicate": res.duplicate})
        elif res.duplicate:
            console.print(f"signal {name} already sent (duplicate: nothing changed)", highlight=False)
        else:
            console.print(f"signal {name} sent", highlight=False)

    _run(main(), server)
