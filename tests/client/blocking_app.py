"""The app a real ``cronoq worker blocking_app:app`` serves in test_blocking.py."""

from __future__ import annotations

from cronoq import App

app = App("blocking")


@app.task(name="blocking.double")
async def double(x: int) -> int:
    return 2 * x


@app.task(name="blocking.fail")
def fail(message: str) -> None:  # a plain function: runs in a thread
    raise ValueError(message)
