"""Tutorial: a FastAPI app in front of ``cronoq serve``, with the work on remote workers.

The web app holds no scheduler: its lifespan opens one :class:`cronoq.client.Client` for the
app's whole life and binds the app of named tasks to it (``shop.bind(client)``), so
``checkout.submit(...)`` in a request handler goes to the server. A remote worker process runs
the tasks; ``checkout`` itself submits a task (``send_receipt``), which works because the
worker's copy of the app is bound to the worker's own client.

Run directly, the program starts the three processes a deployment has, on free loopback ports
and a throwaway SQLite store:

1. ``cronoq serve`` (a subprocess);
2. a worker (this file again, ``worker`` mode: ``shop.worker(...)`` with the app bound);
3. the FastAPI app on uvicorn (this process), which it then calls with httpx: two orders,
   one placed twice (the key makes the second a duplicate), and an invalid one (422).

Run it: ``python examples/tutorials/web_app_server.py`` (a few seconds).  Needs the ``server``
extra, FastAPI and httpx (walked through in docs/tutorials/web-app.md#on-the-server-instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, HTTPException

import cronoq
from cronoq.client import Client, ClientError

SERVER = os.environ.get("CRONOQ_SERVER", "127.0.0.1:7070")

# ---------------------------------------------------------------------------------------------
# the tasks: imported by the web app (to submit) and by the worker (to run)

shop = cronoq.App("shop")


@shop.task(name="shop.send_receipt")
async def send_receipt(order_id: int, email: str) -> str:
    return f"receipt for order {order_id} sent to {email}"


@shop.task(name="shop.checkout", retry=cronoq.RetryPolicy(max_attempts=3))
async def checkout(order_id: int, email: str) -> dict[str, Any]:
    # a task that submits a task: the worker's app is bound to a Client, so this goes to the
    # server like any other submission (the key makes a retried checkout send one receipt)
    receipt = await send_receipt.options(key=f"receipt-{order_id}").submit(order_id, email)
    return {"order": order_id, "receipt": f"receipt-{order_id}", "new": not receipt.duplicate}


# ---------------------------------------------------------------------------------------------
# the web app


@contextlib.asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    # one Client (one gRPC channel) for the app's life, opened on uvicorn's event loop
    async with Client(SERVER) as client:
        api.state.client = client
        shop.bind(client)
        yield
        shop.bind(None)


api = FastAPI(lifespan=lifespan)


@api.post("/orders/{order_id}", status_code=202)
async def place_order(order_id: int, email: str) -> dict[str, Any]:
    # the key is derived from the request: a client that retries the POST gets the same task
    handle = await checkout.options(key=f"checkout-{order_id}").submit(order_id, email)
    return {"task": str(handle.id), "duplicate": handle.duplicate}


@api.get("/orders/{order_id}")
async def order_status(order_id: int) -> dict[str, Any]:
    client: Client = api.state.client
    try:
        done = await client.wait(f"checkout-{order_id}", timeout=10)
        receipt = await client.wait(f"receipt-{order_id}", timeout=10)
    except ClientError as e:
        if e.code != "not_found":
            raise
        raise HTTPException(404, f"no order {order_id}") from None
    return {"checkout": done.status, "output": done.json(), "receipt": receipt.json()}


# ---------------------------------------------------------------------------------------------
# the worker process


async def serve_tasks(server: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Client(server) as client:
        shop.bind(client)  # where tasks submitted by tasks go
        async with shop.worker(server, "default", slots=4) as worker:
            await worker.wait_registered(timeout=30)
            print("worker: registered", flush=True)
            await stop.wait()


# ---------------------------------------------------------------------------------------------
# running the three processes


def start_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    cfg = tmp / "cronoq.toml"
    cfg.write_text(
        '[server]\ngrpc_addr = "127.0.0.1:0"\nhttp_addr = "127.0.0.1:0"\n'
        f'[store]\nkind = "sqlite"\npath = {json.dumps(str(tmp / "cronoq.db"))}\n'
    )
    log = tmp / "serve.log"
    with open(log, "wb") as out:
        cmd = [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(cfg)]
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        text = log.read_text()
        found = re.search(r"cronoq serve: grpc=(\S+)", text)
        if found and "cronoq serve: leading" in text:
            return proc, found[1]
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"cronoq serve did not start:\n{log.read_text()}")


def start_worker(server: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "worker", server]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker has registered (or died)
    if line.strip() != "worker: registered":
        raise SystemExit(f"the worker did not start (exit {proc.wait()})")
    return proc


async def call_the_app() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(api, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(web.serve(sockets=[sock]))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=15) as http:
        for order_id in (7, 8, 7):
            r = await http.post(f"/orders/{order_id}", params={"email": "ann@example.com"})
            print(f"POST /orders/{order_id}: {r.status_code} duplicate={r.json()['duplicate']}")
        for order_id in (7, 8):
            body = (await http.get(f"/orders/{order_id}")).json()
            print(f"order {order_id}: {body['checkout']}, {body['receipt']}")
        r = await http.post("/orders/seven", params={"email": "ann@example.com"})
        print(f"POST /orders/seven: {r.status_code}")
    web.should_exit = True
    await serving


def main() -> None:
    global SERVER
    with tempfile.TemporaryDirectory() as tmp:
        server, SERVER = start_server(Path(tmp))
        try:
            worker = start_worker(SERVER)
            try:
                asyncio.run(call_the_app())
            finally:
                worker.terminate()
                print(f"worker exited with {worker.wait(30)}")
        finally:
            server.terminate()
            print(f"server exited with {server.wait(30)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(serve_tasks(sys.argv[2]))
    else:
        main()
