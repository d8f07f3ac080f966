"""One task from the command line: ``submit``, ``tasks``, ``get``, ``wait``.

``submit`` builds a task spec from its options (a payload, or ``--task NAME`` of an app with
JSON arguments), checks it locally first (a bad field is a usage error, exit 2), submits it and
with ``--wait`` waits for its outcome; ``tasks`` lists an app's tasks and can create its
recurring schedules; ``get`` shows one task, ``wait`` its outcome (exit 5 when it did not
succeed). ``--json`` output has the shapes of the HTTP/JSON API (:mod:`cronoq.spec.json_shapes`).
"""

from __future__ import annotations

import dataclasses
import json
import mimetypes
import sys
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

if TYPE_CHECKING:  # pragma: no cover
    from cronoq.client import Client


from cronoq.cli.common import (
    _PRIORITIES,
    CALL_TIMEOUT,
    DURATION,
    EPILOG,
    EXIT_OK,
    EXIT_TASK_FAILED,
    _check_spec,
    _client,
    _dump,
    _fmt_time,
    _key_values,
    _need_client,
    _print_result,
    _ref,
    _ref_arg,
    _run,
    _status_text,
    app_dir_option,
    cli,
    client_options,
    console,
    err_console,
    json_option,
)
from cronoq.cli.worker_cmd import load_app


def _json_option(name: str, text: str | None, kind: type, default: Any) -> Any:
    if text is None:
        return default
    try:
        value = json.loads(text)
    except ValueError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=f"'{name}'") from None
    if not isinstance(value, kind):
        what = "array" if kind is list else "object"
        raise click.BadParameter(f"must be a JSON {what} (got {text!r})", param_hint=f"'{name}'")
    return value


def _named_task_call(
    name: str, args_text: str | None, kwargs_text: str | None, app_ref: str | None, app_dir: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``{"args", "kwargs"}`` payload of ``submit --task`` and (with ``--app``) the task's
    own fields as defaults, its ``kind`` among them (workers dispatch by it, and it is not the
    name when set at decoration); a call that does not fit the app's task is a usage error."""
    args = _json_option("--args", args_text, list, [])
    kwargs = _json_option("--kwargs", kwargs_text, dict, {})
    if app_ref is None:
        return {"args": args, "kwargs": kwargs}, {}
    app = load_app(app_ref, app_dir)
    defn = app.tasks.get(name)
    if defn is None:
        known = ", ".join(sorted(app.tasks)) or "none"
        raise click.BadParameter(
            f"app '{app.name}' has no task '{name}' (tasks: {known})", param_hint="'--task'"
        )
    try:
        payload = defn.binding.encode(tuple(args), kwargs)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    return payload, defn.fields


async def _serving_pool(client: Client, name: str) -> str:
    """The pool of ``submit --task NAME`` given neither ``--pool`` nor ``--app``: the one pool
    where a connected worker registered task NAME (docs/how-to/deploys.md); a usage error
    asking for ``--pool`` when none or several do, or the workers cannot be listed."""
    from cronoq.client import ClientError

    try:
        workers = await client.list_workers(call_timeout=CALL_TIMEOUT)
    except ClientError as e:
        raise click.UsageError(
            f"cannot tell which pool serves task '{name}' ({e.message}): give --pool"
        ) from None
    pools = sorted({w.pool for w in workers if name in w.kinds})
    if len(pools) == 1:
        return pools[0]
    if not pools:
        raise click.UsageError(f"no connected worker serves task '{name}': give --pool")
    raise click.UsageError(f"task '{name}' is served in pools {', '.join(pools)}: give --pool")


def _read_payload_file(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise click.BadParameter(
            f"cannot read {path!r}: {e.strerror or e}", param_hint="'--payload-file'"
        ) from None


def _submit_payload(
    payload: str | None, payload_file: str | None, content_type: str | None
) -> tuple[object, str | None]:
    """``submit``'s payload and content type: PAYLOAD (JSON when it parses, else text) or the
    bytes of --payload-file (its content type guessed from the name unless given)."""
    if payload is not None and payload_file is not None:
        raise click.UsageError("give PAYLOAD or --payload-file, not both")
    value: object = None
    if payload_file is not None:
        value = _read_payload_file(payload_file)
        if content_type is None:
            content_type = mimetypes.guess_type(payload_file)[0] if payload_file != "-" else None
    elif payload is not None:
        try:
            value = json.loads(payload)
        except ValueError:
            value = payload
    return value, content_type


@cli.command(epilog=EPILOG)
@click.argument("payload", required=False)
@client_options
@click.option("--pool", "-p", default=None, help="Target pool (server default: 'default').")
@click.option(
    "--priority",
    type=click.Choice(_PRIORITIES, case_sensitive=False),
    default=None,
    help="Priority class (default normal).",
)
@click.option("--key", default=None, help="Idempotency key: a second submit with it is a duplicate.")
@click.option("--kind", default=None, help="Task kind (for metrics and duration estimates).")
@click.option("--deadline-in", type=DURATION, default=None, help="Deadline from now (e.g. 30s).")
@click.option("--start-in", type=DURATION, default=None, help="Fixed start from now (e.g. 5m).")
@click.option("--timeout", type=DURATION, default=None, help="Per-attempt timeout.")
@click.option("--max-attempts", type=click.IntRange(1), default=None, help="Attempts before giving up.")
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="REF",
    help="Run after this task (id or key) succeeded (repeatable).",
)
@click.option(
    "--tag", "tags", multiple=True, callback=_key_values, metavar="KEY=VALUE", help="Tag (repeatable)."
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    callback=_key_values,
    metavar="KEY=VALUE",
    help="Required worker label (repeatable).",
)
@click.option("--tenant", default=None, help="Tenant (fair share).")
@click.option(
    "--payload-file",
    type=str,
    default=None,
    metavar="FILE",
    help="Send this file's bytes as the payload ('-' = stdin).",
)
@click.option(
    "--content-type",
    default=None,
    help="Content type of the payload (default: guessed; JSON for a PAYLOAD that parses).",
)
@click.option(
    "--task",
    "task_name",
    default=None,
    metavar="NAME",
    help="Submit the named task NAME (a cronoq.App task).",
)
@click.option(
    "--args",
    "task_args",
    default=None,
    metavar="JSON",
    help="With --task: positional arguments, a JSON array.",
)
@click.option(
    "--kwargs",
    "task_kwargs",
    default=None,
    metavar="JSON",
    help="With --task: keyword arguments, a JSON object.",
)
@click.option(
    "--app",
    "app_ref",
    default=None,
    metavar="MODULE:APP",
    help="With --task: check the arguments against the app's task and use its task fields as defaults.",
)
@app_dir_option("With --app: directory put first on sys.path before importing MODULE.")
@click.option("--wait", is_flag=True, help="Wait for the outcome and print it.")
@click.option(
    "--wait-timeout", type=DURATION, default=None, help="With --wait: give up after this long (exit 4)."
)
@json_option
def submit(
    payload: str | None,
    server: str,
    token: str | None,
    tls: bool,
    pool: str | None,
    priority: str | None,
    key: str | None,
    kind: str | None,
    deadline_in: float | None,
    start_in: float | None,
    timeout: float | None,
    max_attempts: int | None,
    after: tuple[str, ...],
    tags: dict[str, str],
    labels: dict[str, str],
    tenant: str | None,
    payload_file: str | None,
    content_type: str | None,
    task_name: str | None,
    task_args: str | None,
    task_kwargs: str | None,
    app_ref: str | None,
    app_dir: str,
    wait: bool,
    wait_timeout: float | None,
    as_json: bool,
) -> None:
    """Submit one task. PAYLOAD is sent as JSON when it parses as JSON, else as text.
    With --task NAME, a named task: the payload is {"args": [...], "kwargs": {...}} from
    --args and --kwargs, and the kind is NAME (with --app, the task's kind, which a kind= at
    decoration sets); without --pool or --app it goes to the pool
    where a connected worker serves NAME (or asks for --pool).

    \b
    cronoq submit '{"image": 42}' --priority high --deadline-in 30s --wait
    cronoq submit --payload-file report.csv --kind report --after ingest-1
    cronoq submit --task shop.resize --args '[42]' --kwargs '{"size": 128}' --wait
    """
    _need_client()
    from cronoq.client import RetryPolicy

    value, content_type = _submit_payload(payload, payload_file, content_type)
    if wait_timeout is not None and not wait:
        raise click.UsageError("--wait-timeout needs --wait")
    task_defaults: dict[str, Any] = {}
    if task_name is not None:
        if payload is not None or payload_file is not None or kind is not None or content_type is not None:
            raise click.UsageError(
                "--task takes its payload from --args/--kwargs: no PAYLOAD, --payload-file, --kind"
                " or --content-type"
            )
        value, task_defaults = _named_task_call(task_name, task_args, task_kwargs, app_ref, app_dir)
        kind = task_defaults.pop("kind", task_name)
    elif task_args is not None or task_kwargs is not None or app_ref is not None:
        raise click.UsageError("--args, --kwargs and --app go with --task NAME")
    fields: dict[str, Any] = {
        "pool": pool,
        "priority": priority.lower() if priority else None,
        "key": key,
        "kind": kind,
        "deadline_in": deadline_in,
        "start_in": start_in,
        "timeout": timeout,
        "after": [_ref(a) for a in after] or None,
        "tags": tags or None,
        "labels": labels or None,
        "tenant": tenant,
        "content_type": content_type,
    }
    if max_attempts is not None:
        fields["retry"] = RetryPolicy(max_attempts=max_attempts)
    fields = {**task_defaults, **{k: v for k, v in fields.items() if v is not None}}
    _check_spec(value, fields)

    async def main() -> int:
        async with _client(server, token, tls) as client:
            if task_name is not None and pool is None and app_ref is None:
                fields["pool"] = await _serving_pool(client, task_name)
            sub = await client.submit(value, call_timeout=CALL_TIMEOUT, **fields)
            if not wait:
                if as_json:
                    _dump(sub.to_json())
                else:
                    dup = " (duplicate: a task with this key exists)" if sub.duplicate else ""
                    console.print(f"submitted task {sub.id}{dup}", highlight=False)
                return EXIT_OK
            if not as_json:
                dup = " (duplicate)" if sub.duplicate else ""
                err_console.print(f"submitted task {sub.id}{dup}; waiting...", highlight=False)
            result = await client.wait(sub.id, timeout=wait_timeout)
            if as_json:
                _dump(dataclasses.replace(sub, result=result).to_json())
            else:
                _print_result(result)
            return EXIT_OK if result.ok else EXIT_TASK_FAILED

    sys.exit(_run(main(), server))


@cli.command(epilog=EPILOG)
@click.argument("app_ref", metavar="MODULE:APP")
@app_dir_option()
@click.option(
    "--apply-recurring",
    is_flag=True,
    help="Create (or replace: applying again changes nothing) the app's recurring schedules on the server.",
)
@client_options
@json_option
def tasks(
    app_ref: str,
    app_dir: str,
    apply_recurring: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """List the tasks of a cronoq.App: name, kind, pool, arguments, task fields, schedules.

    \b
    cronoq tasks shop.tasks:app
    cronoq tasks shop.tasks:app --apply-recurring --server cronoq:7070
    """
    app = load_app(app_ref, app_dir)
    rows = app.describe()
    if as_json:
        _dump({"app": app.name, "tasks": rows})
    else:
        from rich import box
        from rich.table import Table

        t = Table(title=f"app {app.name}: {len(rows)} tasks", title_justify="left", box=box.SIMPLE_HEAD)
        aliased = any(r["kind"] != r["name"] for r in rows)  # a kind column only when one differs
        for col in ("task", *(("kind",) if aliased else ()), "pool", "arguments", "fields", "recurring"):
            t.add_column(col, overflow="fold", no_wrap=col == "task")
        for r in rows:
            fields = " ".join(f"{k}={v}" for k, v in r["fields"].items())
            recurring = ", ".join(
                f"{x['name']}: {x['cron']}" + (f" ({x['tz']})" if x["tz"] else "") for x in r["recurring"]
            )
            kind = (r["kind"],) if aliased else ()
            cells = (r["name"], *kind, r["pool"] or "(default)", r["signature"], fields, recurring)
            t.add_row(*(escape(c) for c in cells))
        console.print(t)
    if not apply_recurring:
        return
    _need_client()

    async def main() -> int:
        async with _client(server, token, tls) as client:
            names = await app.apply_recurring(client)
        what = "1 recurring schedule" if len(names) == 1 else f"{len(names)} recurring schedules"
        err_console.print(f"cronoq tasks: applied {what}: {', '.join(names) or 'none'}")
        return EXIT_OK

    sys.exit(_run(main(), server))


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="REF", callback=_ref_arg)
@client_options
@json_option
def get(ref: int | str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Show a task: REF is its id (digits) or its key."""
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            info = await client.get(ref, call_timeout=CALL_TIMEOUT)
            if as_json:  # (the HTTP API's TaskInfo, as it is)
                _dump(info.to_json())
                return
        from rich.table import Table

        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold")
        t.add_column()
        rows = [
            ("id", str(info.id)),
            ("status", _status_text(info.status)),
            ("pool", info.pool),
            ("key", info.key or "-"),
            ("kind", info.kind),
            ("priority", info.priority),
            ("attempt", f"{info.attempt} of {info.max_attempts}"),
            ("tenant", info.tenant or "-"),
            ("created", _fmt_time(info.created_at)),
            ("started", _fmt_time(info.started_at)),
            ("finished", _fmt_time(info.finished_at)),
            ("message", info.message or "-"),
            ("output", "available" if info.output_available else "-"),
            *_detail_rows(info),
        ]
        for k, v in rows:
            t.add_row(k, v if k == "status" else escape(v))
        console.print(t, highlight=False)

    _run(main(), server)


def _progress_text(p: Any) -> str:
    """``3 of 10 (30%) - message`` (``3`` without a total), with the attempt that reported it."""
    done = f"{p.done:g}"
    text = done if p.total is None else f"{done} of {p.total:g} ({100 * p.done / p.total:.0f}%)"
    if p.message:
        text += f" - {p.message}"
    return f"{text} (attempt {p.attempt}, {_fmt_time(p.at)})"


def _detail_rows(info: Any) -> list[tuple[str, str]]:
    """The rows of ``cronoq get`` for progress, named-task name, links (with the parents'
    outcomes) and attempts (docs/how-to/progress.md)."""
    rows: list[tuple[str, str]] = []
    if info.name:
        rows.append(("name", info.name))
    if info.waiting:
        rows.append(("waiting", info.waiting))  # why it is not running
    rows.append(("progress", "-" if info.progress is None else _progress_text(info.progress)))
    if info.parent_outcomes:  # in edge order, as the task receives them
        shown = (
            f"{o.id} {o.status}" + (f" ({o.message})" if o.message else "") for o in info.parent_outcomes
        )
        rows.append(("parents", ", ".join(shown)))
    elif info.parents:
        rows.append(("parents", ", ".join(map(str, info.parents))))
    if info.children:
        rows.append(("children", ", ".join(map(str, info.children))))
    for a in info.attempts:
        if a.ended_at is None:  # (the attempt under way)
            text = f"{a.outcome} since {_fmt_time(a.started_at)}"
        else:
            text = f"{a.outcome}: {_fmt_time(a.started_at)} - {_fmt_time(a.ended_at)}"
        if a.worker:
            text += f" on {a.worker}"
        if a.message:
            text += f" ({a.message})"
        rows.append((f"attempt {a.number}", text))
    return rows


@cli.command("wait", epilog=EPILOG)
@click.argument("ref", metavar="REF", callback=_ref_arg)
@client_options
@click.option(
    "--timeout", type=DURATION, default=None, help="Give up after this long (exit 4). Default: no limit."
)
@json_option
def wait_cmd(
    ref: int | str, server: str, token: str | None, tls: bool, timeout: float | None, as_json: bool
) -> None:
    """Wait until a task has finished and print its outcome (exit 0 if it succeeded, 5 if not)."""
    _need_client()

    async def main() -> int:
        async with _client(server, token, tls) as client:
            result = await client.wait(ref, timeout=timeout)
        if as_json:
            _dump(result.to_json())
        else:
            _print_result(result)
        return EXIT_OK if result.ok else EXIT_TASK_FAILED

    sys.exit(_run(main(), server))
