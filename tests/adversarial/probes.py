"""Shared pieces of the adversarial probes: a real ``cronoq serve`` on loopback
(``server.procs.start_server``) plus a bounded ``/healthz`` sampler.

:class:`HealthSampler` runs in a thread of the test process and asks ``/healthz`` every
``interval`` seconds with a blocking client (independent of the event loop it measures), for
at most ``limit`` seconds; ``worst`` is the longest answer time it saw (a request that got no
answer within ``timeout`` counts as ``timeout``).  Every probe stops by itself: the sampler's
loop is bounded by time, the posts by their count.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

__all__ = ["HealthSampler", "post_raw"]


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def post_raw(addr: str, path: str, body: bytes, *, timeout: float = 60.0) -> tuple[int, Any]:
    """POST ``body`` to ``http://addr/path``; ``(status, decoded JSON body)``."""
    host, port = _split(addr)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()


class HealthSampler:
    """Times ``GET /healthz`` in a background thread (see the module docstring)."""

    def __init__(
        self, addr: str, *, interval: float = 0.02, timeout: float = 30.0, limit: float = 120.0
    ) -> None:
        self.host, self.port = _split(addr)
        self.interval = interval
        self.timeout = timeout
        self.limit = limit
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="healthz-sampler", daemon=True)

    def _once(self) -> float:
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
        except OSError:
            return self.timeout
        finally:
            conn.close()
        return time.perf_counter() - t0

    def _run(self) -> None:
        end = time.monotonic() + self.limit
        while not self._stop.is_set() and time.monotonic() < end:
            self.samples.append(self._once())
            self._stop.wait(self.interval)

    @property
    def worst(self) -> float:
        return max(self.samples, default=0.0)

    def __enter__(self) -> HealthSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)
