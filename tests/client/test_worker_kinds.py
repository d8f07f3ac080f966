"""``Worker(kinds=...)``: the task kinds a remote worker registers (docs/how-to/deploys.md).
An app's handler brings its task kinds, a plain handler none (any kind); bad kinds are refused
when the worker is built, before anything connects."""

from __future__ import annotations

import pytest

from cronoq import App
from cronoq.client import Worker

app = App("shop")


@app.task(name="shop.charge")
async def charge(cents: int) -> int:
    return cents


@app.task(name="shop.refund", kind="refunds")
async def refund(cents: int) -> int:
    return -cents


async def plain(lease: object) -> None:
    return None


def test_an_apps_worker_serves_its_task_kinds_and_a_plain_handler_any() -> None:
    assert app.worker("127.0.0.1:1", "default").kinds == ("shop.charge", "refunds")
    assert Worker("127.0.0.1:1", "default", plain).kinds == ()
    assert Worker("127.0.0.1:1", "default", plain, kinds=["a", "b", "a"]).kinds == ("a", "b")


@pytest.mark.parametrize(
    ("kinds", "message"),
    [("shop.charge", "not a string"), ([""], "non-empty strings"), ([3], "non-empty strings")],
)
def test_bad_kinds_are_refused(kinds: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Worker("127.0.0.1:1", "default", plain, kinds=kinds)  # type: ignore[arg-type]
