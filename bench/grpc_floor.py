"""The gRPC floor: a bare ``grpc.aio`` server with one unary echo method, driven like
``cronoq serve`` is by ``bench/server.py`` (``--clients`` processes, each making one awaited call
after another), so every server figure can also be read as a ratio to what one Python process
can answer at all.

    python bench/grpc_floor.py                 # 8 client processes x 2,000 calls
    python bench/grpc_floor.py --quick --json bench/results/grpc_floor.json

Reports calls/s (first call sent → last answer, whole system), the echo server's CPU
seconds per 1,000 calls (``/proc/PID/stat``) and its clients' (each load process's own
``time.process_time`` over its calls, summed). ``bench/server.py`` measures it in the same run
(group ``throughput``) and records each cronoq figure's ratio to it in ``extra``
(``floor_ratio``: tasks/s over the floor's calls/s; ``cpu_vs_floor``: server CPU per task over
the floor's CPU per call).

Internals: ``python bench/grpc_floor.py serve`` prints ``PORT <n>`` and echoes until stdin
closes; ``python bench/grpc_floor.py load PORT N`` prints ``READY``, waits for a line on stdin,
makes ``N`` calls and prints ``DONE <seconds> <CPU seconds>``. The method has no (de)serializers: bytes in,
the same bytes out, so the figure is gRPC's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
METHOD = "/cronoq.bench.Floor/Echo"
PAYLOAD = b"x" * 32  # about a small task's SubmitResponse


@dataclass
class Floor:
    """One measurement of the floor."""

    calls_per_s: float
    cpu_s_per_1k: float
    calls: int
    clients: int
    seconds: float
    client_cpu_s_per_1k: float = 0.0  # the load processes' CPU seconds per 1,000 calls

    def to_json(self) -> dict[str, float | int]:
        return {
            "calls_per_s": self.calls_per_s,
            "cpu_s_per_1k": self.cpu_s_per_1k,
            "calls": self.calls,
            "clients": self.clients,
            "seconds": self.seconds,
            "client_cpu_s_per_1k": self.client_cpu_s_per_1k,
        }


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def _serve() -> None:
    import grpc
    import grpc.aio

    async def echo(request: bytes, context: object) -> bytes:
        return request

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "cronoq.bench.Floor", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"PORT {port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the driver closes stdin
    await server.stop(0)


async def _load(port: int, n: int) -> None:
    import grpc.aio

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        await call(PAYLOAD)  # connected and warm before the start line
        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            await call(PAYLOAD)
        print(f"DONE {time.perf_counter() - t0:.6f} {time.process_time() - c0:.6f}", flush=True)


async def _readline(proc: asyncio.subprocess.Process, prefix: str) -> str:
    assert proc.stdout is not None
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not raw:
            raise RuntimeError(f"floor child {proc.pid} ended before printing {prefix!r}")
        line = raw.decode().strip()
        if line.startswith(prefix):
            return line


async def measure(clients: int = 8, calls: int = 2000) -> Floor:
    """Run the echo server and ``clients`` load processes of ``calls`` calls each."""
    me = str(Path(__file__).resolve())
    pipe = asyncio.subprocess.PIPE
    server = await asyncio.create_subprocess_exec(sys.executable, me, "serve", stdin=pipe, stdout=pipe)
    loads: list[asyncio.subprocess.Process] = []
    try:
        port = int((await _readline(server, "PORT")).split()[1])
        for _ in range(clients):
            loads.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, me, "load", str(port), str(calls), stdin=pipe, stdout=pipe
                )
            )
        for p in loads:
            await _readline(p, "READY")
        cpu0 = _cpu_seconds(server.pid)
        t0 = time.perf_counter()
        for p in loads:
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            await p.stdin.drain()
        client_cpu = 0.0
        for p in loads:
            client_cpu += float((await _readline(p, "DONE")).split()[2])
        seconds = time.perf_counter() - t0
        cpu = _cpu_seconds(server.pid) - cpu0
    finally:
        for p in loads:
            if p.returncode is None:
                p.kill()
            await p.wait()
        if server.stdin is not None:
            server.stdin.close()
        try:
            await asyncio.wait_for(server.wait(), 10)
        except TimeoutError:
            server.kill()
            await server.wait()
    total = clients * calls
    return Floor(total / seconds, cpu / total * 1000, total, clients, seconds, client_cpu / total * 1000)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        asyncio.run(_serve())
        return 0
    if argv[:1] == ["load"]:
        asyncio.run(_load(int(argv[1]), int(argv[2])))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="500 calls per client (smoke run)")
    p.add_argument("--clients", type=int, default=8, help="load processes (default 8)")
    p.add_argument("--calls", type=int, default=None, help="calls per client (default 2000)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args(argv)
    calls = args.calls or (500 if args.quick else 2000)
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}   cpus: {os.cpu_count()}")
    floor = asyncio.run(measure(args.clients, calls))
    print(
        f"grpc.aio unary echo, {floor.clients} client processes: {floor.calls_per_s:,.0f} calls/s, "
        f"server CPU {floor.cpu_s_per_1k:.3f} s per 1,000 calls, clients' {floor.client_cpu_s_per_1k:.3f}"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(floor.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
