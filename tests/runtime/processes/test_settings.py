"""``cronoq.Processes`` and ``run_in``: bad input is a ValueError saying why, at construction."""

from __future__ import annotations

from typing import Any

import pytest
from tests.runtime.processes import tasks

import cronoq
from cronoq import Pool, Processes


def test_defaults_and_sizes() -> None:
    p = Processes()
    assert (p.max_tasks_per_child, p.max_memory_per_child, p.kill_grace, p.start_method) == (
        None,
        None,
        5.0,
        "forkserver",
    )
    assert Processes(max_memory_per_child="512MiB").max_memory_per_child == 512 * 1024**2
    assert Processes(max_memory_per_child="2GB").max_memory_per_child == 2 * 1000**3
    assert Processes(max_memory_per_child=1000).max_memory_per_child == 1000
    assert Processes(max_memory_per_child=1.5e9).max_memory_per_child == 1_500_000_000
    assert Processes(max_memory_per_child="1.5 GiB").max_memory_per_child == 1536 * 1024**2
    assert Processes(max_tasks_per_child=3) == Processes(max_tasks_per_child=3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tasks_per_child": 0}, "max_tasks_per_child must be an int >= 1"),
        ({"max_tasks_per_child": -1}, "max_tasks_per_child must be an int >= 1"),
        ({"max_memory_per_child": 0}, "max_memory_per_child must be > 0"),
        ({"max_memory_per_child": -5}, "max_memory_per_child must be > 0"),
        ({"max_memory_per_child": "12 parsecs"}, "such as '512MiB'"),
        ({"max_memory_per_child": float("nan")}, "max_memory_per_child must be > 0"),
        ({"kill_grace": -1}, "kill_grace must be"),
        ({"start_method": "vfork"}, "start_method must be one of"),
    ],
)
def test_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Processes(**kwargs)


def _nested() -> Any:
    def inner(ctx: Any, payload: Any) -> None:
        return None

    return inner


async def _async_fn(ctx: Any, payload: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("fn", "run_in", "message"),
    [
        (lambda ctx, p: None, "process", "cannot take a lambda"),
        (_nested(), "process", "cannot take the nested function"),
        (tasks.pid, "loop", "run_in='loop' takes an async def"),
        (_async_fn, "thread", "run_in='thread' takes a plain function"),
        (tasks.pid, "fork", "run_in must be 'loop', 'thread' or 'process'"),
    ],
)
def test_bad_run_in_on_pool(fn: Any, run_in: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pool("p", fn, run_in=run_in)


def test_unpicklable_callable_object() -> None:
    class Local:
        def __call__(self, ctx: Any, payload: Any) -> None:
            return None

    with pytest.raises(ValueError, match="needs a function that can be pickled"):
        Pool("p", Local(), run_in="process")


def test_pool_accepts_process_and_async_def() -> None:
    assert Pool("p", tasks.pid, run_in="process").run_in == "process"
    assert Pool("p", tasks.async_pid, run_in="process").is_async
    with pytest.raises(ValueError, match=r"processes must be a cronoq\.Processes"):
        Pool("p", tasks.pid, processes={"kill_grace": 1})  # type: ignore[arg-type]


def test_bad_run_in_on_task() -> None:
    app = cronoq.App("t")
    with pytest.raises(ValueError, match="cannot take a lambda"):
        app.task(name="l", run_in="process")(lambda: None)
    with pytest.raises(ValueError, match="cannot take the nested function"):

        @app.task(run_in="process")
        def nested() -> None:
            return None

    with pytest.raises(ValueError, match="run_in must be"):
        app.task(name="x", run_in="gpu")(tasks.leak)
    assert app.tasks == {}
