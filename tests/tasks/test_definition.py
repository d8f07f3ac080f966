"""``TaskDefinition.options``: per-call fields on top of the decorator's
(docs/getting-started/tasks.md#per-call-fields): the maps ``resources``, ``tags`` and ``labels``
merge (the call wins per key), every other field replaces."""

from __future__ import annotations

import cronoq
import cronoq.testing
from cronoq import Resource

app = cronoq.App("merge")


@app.task(
    name="merge.call", tags={"team": "billing", "tier": "1"}, labels={"zone": "a"}, resources={"api": 1}
)
async def call(n: int) -> int:
    return n


limited = cronoq.App("limited")


@limited.task(name="limited.fetch", resources={"api": 1})
async def fetch(n: int) -> int:
    return n


def test_per_call_maps_merge_into_the_definitions() -> None:
    c = call.options(tags={"customer": "42", "tier": "2"}, labels={"gpu": "yes"}, resources={"db": 1})
    assert c.fields["tags"] == {"team": "billing", "tier": "2", "customer": "42"}
    assert c.fields["labels"] == {"zone": "a", "gpu": "yes"}
    assert c.fields["resources"] == {"api": 1, "db": 1}
    # chained options keep merging; the definition itself is unchanged
    assert c.options(resources={"api": 3}).fields["resources"] == {"api": 3, "db": 1}
    assert call.fields["resources"] == {"api": 1} and call.fields["tags"] == {"team": "billing", "tier": "1"}
    # other fields still replace
    assert call.options(priority="high").options(priority="low").fields["priority"] == "low"


async def test_a_per_call_resource_keeps_the_tasks_rate_limit() -> None:
    # the bucket allows one call an hour: with the maps merged, the second call waits for a
    # token although it asked for a semaphore permit only
    resources = [Resource.token_bucket("api", rate=1 / 3600, burst=1), Resource.semaphore("db", 10)]
    async with cronoq.testing.run(limited, autojump=False, resources=resources) as env:
        first = await fetch.options(resources={"db": 1}).submit(1)
        await env.settle()
        assert first.done() and await first == 1
        second = await fetch.options(resources={"db": 1}).submit(2)
        await env.advance(600)
        assert not second.done() and await env.scheduler.status(second.id) == "ready"
        await env.advance(3600)
        assert await second == 2
