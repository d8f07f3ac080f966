"""A task the server no longer knows (docs/reference/behaviour.md#ids-keys-retention): every
NOT_FOUND for a task names the setting that decides how long a finished task is retained, for
get, wait, cancel and replay alike, and whether it never existed, is no longer retained or is
not the caller's cannot be told apart."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from .test_http_support import serve

MESSAGE = (
    "unknown task '{}': not live, and not retained if it existed "
    "(a finished task is kept for limits.key_retention_s, 90 s)"
)


async def test_not_found_names_the_retention_setting() -> None:
    async with serve("[limits]\nkey_retention_s = 90\n") as (_app, c):
        for ref in ("12345", "nightly-3am"):
            for method, path in (
                ("GET", "/v1/tasks/{}"),
                ("GET", "/v1/tasks/{}/result?timeout=0"),
                ("POST", "/v1/tasks/{}/cancel"),
                ("POST", "/v1/tasks/{}/replay"),
            ):
                r = await c.request(method, path.format(ref))
                assert r.status_code == 404, (method, path, r.text)
                assert r.json() == {"error": MESSAGE.format(ref), "code": "not_found"}, (method, path)
