"""The app a real ``cronoq worker durable_app:app`` serves in test_serve_durable.py: named
tasks that make durable calls on a remote worker (worker protocol version 7)."""

from __future__ import annotations

from cronoq import App, TaskContext

app = App("durable")

#: how many times each task's step function ran in this worker process (by task id)
STEP_CALLS: dict[int, int] = {}


@app.task(name="durable.square")
async def square(x: int) -> int:
    return x * x


@app.task(name="durable.fanout")
async def fanout(ctx: TaskContext, n: int) -> dict[str, object]:
    """Spawn ``n`` children and wait for them (on a one-slot worker: it parks meanwhile)."""
    ids = await ctx.spawn([square.spec(i) for i in range(n)])
    outs = await ctx.wait_for(ids)
    return {
        "ids": ids,
        "sum": sum(o.output for o in outs),
        "statuses": sorted({o.status for o in outs}),
        "resumes": ctx.resumes,
    }


@app.task(name="durable.stepper")
async def stepper(ctx: TaskContext, naps: int) -> dict[str, object]:
    """A step, then ``naps`` durable sleeps: the step runs once across the resumes."""

    def once() -> int:
        STEP_CALLS[ctx.id] = STEP_CALLS.get(ctx.id, 0) + 1
        return 41

    value = await ctx.step("once", once)
    for _ in range(naps):
        await ctx.sleep_for(0.05)
    return {"step": value, "calls": STEP_CALLS[ctx.id], "resumes": ctx.resumes}


@app.task(name="durable.napper")
async def napper(ctx: TaskContext, seconds: float) -> int:
    await ctx.sleep_for(seconds)
    return ctx.resumes


@app.task(name="durable.approval")
async def approval(ctx: TaskContext, name: str, timeout: float | None = None) -> dict[str, object]:
    try:
        return {"payload": await ctx.wait_signal(name, timeout=timeout)}
    except TimeoutError as e:
        return {"timeout": str(e)}


@app.task(name="durable.fickle")
async def fickle(ctx: TaskContext) -> str:
    """Non-deterministic: its step's name changes from one run to the next."""
    await ctx.step(f"s-{ctx.resumes}", lambda: 1)
    await ctx.sleep_for(0.05)
    return "unreachable"


@app.task(name="durable.fickle_spawn")
async def fickle_spawn(ctx: TaskContext) -> str:
    """Non-deterministic: what it spawns changes from one run to the next."""
    await ctx.spawn([square.spec(ctx.resumes)])
    await ctx.sleep_for(0.05)
    return "unreachable"
