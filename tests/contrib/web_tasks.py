"""The cronoq app of the FastAPI test (served by ``cronoq worker web_tasks:app --pool web``)."""

from __future__ import annotations

from cronoq import App

app = App("web")


@app.task(name="web.greet", pool="web")
async def greet(name: str) -> str:
    return f"hello {name}"
