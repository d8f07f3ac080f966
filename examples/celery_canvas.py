"""Celery's canvas in cronoq (docs/how-to/from-celery.md#chains-groups-and-chords): a chain, a
group, a chord, a chord that runs after failures, link_error, a chain continued after the fact
and ctx.parents, as named tasks passing outputs along edges.

Run: ``python examples/celery_canvas.py`` (in process, no server); tests/examples runs it."""

import asyncio

import cronoq

shop = cronoq.App("canvas")


@shop.task
async def fetch(n: int) -> dict[str, int]:
    if n < 0:
        raise cronoq.Permanent(f"no order {n}")
    return {"id": n, "total": n * 10}


@shop.task
async def render(order: dict[str, int]) -> str:
    return f"invoice {order['id']}: {order['total']}"


@shop.task
async def email(invoice: str) -> str:
    return f"sent {invoice}"


@shop.task
async def total(orders: list[dict[str, int]]) -> int:
    return sum(o["total"] for o in orders)


@shop.task
async def report(outcomes: list[cronoq.Outcome]) -> str:
    return ", ".join(f"{o.key}:{o.status}" for o in outcomes)


@shop.task
async def cleanup(outcome: cronoq.Outcome) -> str:
    return f"cleaned up after {outcome.key}: {outcome.message}"


@shop.task
async def audit(ctx: cronoq.TaskContext, invoice: str) -> str:
    parent = ctx.parents[0]  # Celery's result.parent: one Outcome per edge
    return f"{invoice} (from task {parent.id}, {parent.status})"


async def canvas() -> None:
    async with shop.scheduler():
        # chain(fetch.s(42), render.s(), email.s())
        f = fetch.spec(42)
        r = render.spec(f.output)
        e = email.spec(r.output)
        _, invoice, sent = await shop.submit_batch([f, r, e])
        assert await sent == "sent invoice 42: 420"
        # group(fetch.s(n) for n in ...): one atomic batch
        group = await shop.submit_batch([fetch.spec(n) for n in (1, 2)])
        assert [await h for h in group] == [{"id": 1, "total": 10}, {"id": 2, "total": 20}]
        # chord(group, total.s()): runs when every member succeeded, skipped otherwise
        parts = [fetch.options(key=f"part-{n}").spec(n) for n in (1, 2, -3)]
        chord = total.spec([p.output for p in parts[:2]])
        strict = total.spec([p.output for p in parts])
        # a chord that runs after failures too, and sees them
        everyone = report.spec([cronoq.outcome_of(p) for p in parts])
        *_, ok, skipped, seen = await shop.submit_batch([*parts, chord, strict, everyone])
        assert await ok == 30
        try:
            await skipped
        except cronoq.TaskFailed as err:
            assert err.status == "skipped" and "ended as failed" in err.message
        assert await seen == "part-1:succeeded, part-2:succeeded, part--3:failed"
        # link_error: runs only if the task failed, and sees why
        bad = fetch.options(key="bad-order").spec(-1)
        on_error = cleanup.options(deps=[cronoq.Dep("bad-order", on="failure")])
        _, handler = await shop.submit_batch([bad, on_error.spec(cronoq.outcome_of("bad-order"))])
        assert await handler == "cleaned up after bad-order: no order -1"
        # a chain continued after the fact: by handle (or id, or key); ctx.parents in the task
        later = await audit.submit(cronoq.output_of(invoice))
        assert await later == f"invoice 42: 420 (from task {invoice.id}, succeeded)"


if __name__ == "__main__":
    asyncio.run(canvas())
    print("chain, group, chord, link_error: ok")
