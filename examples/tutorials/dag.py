"""Tutorial: a DAG with success, failure and complete edges.

A nightly data job as a graph of tasks, referred to by key::

    extract ─┬─> clean-orders ──┬─> load ──> publish ──> notify-customers
             └─> clean-users ───┘    │
                                     ├─(failure)──> alert-on-call
                                     └─(complete)─> cleanup-tmp
    extract ──(complete)──> cleanup-tmp

``load`` fails for good (a schema mismatch), so ``publish`` can never run: it is skipped, and
the skip propagates to ``notify-customers``.  ``alert-on-call`` waits for ``load`` to *fail*,
so it runs; ``cleanup-tmp`` waits for ``extract`` and ``load`` to *finish*, however they end, so
it runs too.  The program prints the final status of every node.

Run it: ``python examples/tutorials/dag.py`` (well under a second).
Walked through in docs/tutorials/dag.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cronoq import Dep, Permanent, Pool, Scheduler, Task, TaskContext

NODES = ["extract", "clean-orders", "clean-users", "load", "publish", "notify-customers"]
NODES += ["alert-on-call", "cleanup-tmp"]


async def step(ctx: TaskContext, payload: dict[str, str]) -> str:
    await asyncio.sleep(0.01)
    if payload["step"] == "load":
        raise Permanent("schema mismatch: column 'total' is missing")
    return f"{payload['step']} ok"


def node(name: str, **edges: Any) -> Task:
    """One node of the graph: a Task whose key is its name."""
    return Task({"step": name}, key=name, **edges)


async def main() -> None:
    async with Scheduler([Pool("etl", step, min=4, max=4)]) as sched:
        events = sched.events()  # to show why skipped nodes were skipped
        # The whole graph goes in as one atomic batch: members may refer to each other's keys
        # (even forward), and either every node is accepted or none is.
        await sched.submit_batch(
            [
                node("extract"),
                node("clean-orders", after="extract"),
                node("clean-users", after="extract"),
                node("load", after=["clean-orders", "clean-users"]),
                node("publish", after="load"),
                node("notify-customers", after="publish"),
                node("alert-on-call", deps=[Dep("load", on="failure")]),
                node("cleanup-tmp", deps=[Dep("extract", on="complete"), Dep("load", on="complete")]),
            ]
        )
        messages: dict[str | None, str | None] = {}
        async for ev in events:  # only terminal events: one per node
            messages[ev.key] = ev.message
            if len(messages) == len(NODES):
                break
        events.close()
        for name in NODES:
            status = await sched.status(name)
            note = f"  ({messages[name]})" if messages[name] else ""
            print(f"{name:<17} {status}{note}")


if __name__ == "__main__":
    asyncio.run(main())
