"""Tutorial: a web app that submits tasks and streams their progress (Starlette + uvicorn).

The app owns an in-process ``Scheduler`` for its whole life (Starlette's lifespan):

* ``POST /jobs`` with ``{"video": "...", "priority": "high"}`` submits a transcoding job and
  answers ``201 {"id": "...", "events": "/jobs/<id>/events"}`` at once;
* ``GET /jobs/{id}/events`` streams that job's status changes as Server-Sent Events
  (``event: status``, then ``event: result`` with the output once it succeeded), read from
  ``sched.events()``; the stream ends when the job does.

Run directly, the program starts the app with uvicorn on a free loopback port, submits three
jobs with httpx (one fails once and is retried), prints every event it receives and exits.

Run it: ``python examples/tutorials/web_app.py`` (about a second).  Needs starlette, uvicorn
(both in ``cronoq[server]``) and httpx.  Walked through in docs/tutorials/web-app.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cronoq import Pool, Retryable, RetryPolicy, Scheduler, StatusEvent, TaskContext

TERMINAL = {"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"}


# ----------------------------------------------------------------------------- the work


async def transcode(ctx: TaskContext, job: dict[str, str]) -> dict[str, str]:
    await asyncio.sleep(0.1)  # stands in for the real work
    if job["video"].startswith("flaky") and ctx.attempt == 1:
        raise Retryable("encoder crashed", retry_after=0.1)
    return {"video": job["video"], "url": f"https://cdn.example.com/{job['video']}.mp4"}


# ----------------------------------------------------------------------------- the app


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    pool = Pool("transcode", transcode, min=2, max=2, retry=RetryPolicy(max_attempts=3))
    # emit_transitions=True: publish every transition (ready, running, retrying, ...), not only
    # the final one, so that clients can follow a job's progress
    async with Scheduler([pool], emit_transitions=True) as sched:
        app.state.sched = sched
        yield
    # leaving the block shuts the scheduler down: running jobs get shutdown_grace to finish


async def submit_job(request: Request) -> Response:
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("video"), str):
        return JSONResponse({"error": "body must be {'video': str, 'priority'?: str}"}, status_code=400)
    sched: Scheduler = request.app.state.sched
    try:
        handle = await sched.submit({"video": body["video"]}, priority=body.get("priority", "normal"))
    except ValueError as e:  # an unknown priority name, for instance
        return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse({"id": str(handle.id), "events": f"/jobs/{handle.id}/events"}, status_code=201)


def sse(event: str, data: dict[str, Any]) -> str:
    """One Server-Sent Event."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def event_data(ev: StatusEvent) -> dict[str, Any]:
    return {"id": str(ev.id), "status": ev.status, "attempt": ev.attempt, "message": ev.message}


async def job_events(request: Request) -> Response:
    sched: Scheduler = request.app.state.sched
    task_id: int = request.path_params["id"]
    # Subscribe *before* reading the current status: a stream sees only events published after
    # it was created, so this order cannot miss a transition in between.
    stream = sched.events()
    status = await sched.status(task_id)
    if status is None:
        stream.close()
        return JSONResponse({"error": f"unknown job {task_id}"}, status_code=404)

    async def body() -> AsyncIterator[str]:
        try:
            yield sse("status", {"id": str(task_id), "status": status, "attempt": None, "message": None})
            last = status
            while last not in TERMINAL:
                ev = await anext(stream)
                if ev.id == task_id:  # the stream carries every task's events: keep this job's
                    last = ev.status
                    yield sse("status", event_data(ev))
            if last == "succeeded":
                handle = await sched.handle(task_id)
                assert handle is not None
                yield sse("result", {"id": str(task_id), "output": await handle})
        except StopAsyncIteration:  # the scheduler shut down
            pass
        finally:
            stream.close()  # also when the client goes away mid-stream

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


app = Starlette(
    routes=[
        Route("/jobs", submit_job, methods=["POST"]),
        Route("/jobs/{id:int}/events", job_events, methods=["GET"]),
    ],
    lifespan=lifespan,
)


# ----------------------------------------------------------------------------- a client


async def follow(client: httpx.AsyncClient, video: str, priority: str = "normal") -> None:
    """Submit one job, then print its event stream until it ends."""
    r = await client.post("/jobs", json={"video": video, "priority": priority})
    r.raise_for_status()
    job = r.json()
    print(f"{video}: submitted as job {job['id']}")
    async with client.stream("GET", job["events"]) as resp:
        event = ""
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                if event == "result":
                    print(f"{video}: result {data['output']['url']}")
                else:
                    extra = f" ({data['message']})" if data["message"] else ""
                    attempt = (
                        f" attempt {data['attempt']}"
                        if data["status"] == "running" and data["attempt"]
                        else ""
                    )
                    print(f"{video}: {data['status']}{attempt}{extra}")


async def main() -> None:
    # Bind and listen on a free port first: clients can connect at once (the kernel queues
    # them until uvicorn accepts), so there is nothing to poll for.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        await asyncio.gather(
            follow(client, "holiday"),
            follow(client, "flaky-upload"),
            follow(client, "keynote", priority="high"),
        )
        r = await client.post("/jobs", json={"video": "x", "priority": "urgent"})
        print(f"bad priority: {r.status_code} {r.json()['error']}")
    server.should_exit = True
    await serving
    print("server stopped")


if __name__ == "__main__":
    asyncio.run(main())
