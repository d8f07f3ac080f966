"""``Pool``: a named set of worker slots plus the executor that runs its attempts
(docs/reference/behaviour.md#pool-api)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Unpack

from cronoq.engine.config import PoolConfig, PoolOptions, check_pool_options, with_pool_options
from cronoq.runtime.executors import ExecutorKind, is_async_callable, kind_of
from cronoq.runtime.processes.runin import ProcessExecutor, check_run_in
from cronoq.runtime.processes.settings import Processes, check_processes
from cronoq.runtime.scalers import Scaler, SlotScaler

Executor = Callable[..., Any]


class Pool:
    """A worker pool: capacity limits, scaling, retries, queue bounds and its executor.

    The executor is ``async def run(ctx, payload)`` or a plain function, which runs in the
    loop's default thread pool (an awaitable it returns is awaited), or a *starting* executor
    (an async callable with ``start_attempt``); :attr:`kind` says which (:class:`ExecutorKind`).

    ``run_in`` says where the executor runs: ``"loop"`` (the default for an ``async def``),
    ``"thread"`` (the default for a plain function) or ``"process"`` (a child process per slot,
    with a hard time limit; docs/how-to/processes.md), checked now (``ValueError`` saying why).
    ``processes`` (a :class:`cronoq.Processes`) sets how this pool's children run; None: the
    scheduler's ``processes=``.

    ``options`` are the pool's engine options (``min``, ``max``, ``initial``, ``autoscale``,
    ``lease_ttl``, ``max_pending``, ``overflow``, ``retry``, ``unknown_dependency``,
    ``await_timeout``, ``default_duration``, ``reservable_fraction``, ``tenant_weights``,
    ``fair_share``; docs/reference/behaviour.md#pool-api), declared once by
    :class:`~cronoq.engine.config.PoolOptions` and validated by the engine's ``PoolConfig``.
    """

    __slots__ = ("_config", "executor", "is_async", "kind", "processes", "run_in", "scaler")

    def __init__(
        self,
        name: str,
        executor: Executor,
        *,
        scaler: Scaler | None = None,
        run_in: str | None = None,
        processes: Processes | None = None,
        **options: Unpack[PoolOptions],
    ) -> None:
        check_pool_options(options, "Pool.__init__")
        if not callable(executor):
            raise ValueError("executor must be callable")
        self.run_in = check_run_in(executor, run_in, f"pool '{name}'")
        self.processes = check_processes(processes)
        if self.run_in == "process":
            executor = ProcessExecutor(executor)
        self._config = PoolConfig(name, **options)
        self.executor = executor
        self.is_async = is_async_callable(executor)
        self.kind: ExecutorKind = kind_of(executor)
        if scaler is not None and not callable(getattr(scaler, "scale_to", None)):
            raise ValueError("scaler must have a scale_to(pool, desired) method")
        self.scaler: Scaler = scaler if scaler is not None else SlotScaler()

    # (inspect.signature(Pool) lists every option with its default, as if spelled out)
    __init__.__signature__ = with_pool_options(inspect.signature(__init__))  # type: ignore[attr-defined]

    @classmethod
    def from_config(cls, config: PoolConfig, executor: Executor, scaler: Scaler | None = None) -> Pool:
        """A pool from an already validated engine ``PoolConfig`` (the server's path)."""
        if not callable(executor):
            raise ValueError("executor must be callable")
        self = cls.__new__(cls)
        self._config = config
        self.run_in = None
        self.processes = None
        self.executor = executor
        self.is_async = is_async_callable(executor)
        self.kind = kind_of(executor)
        self.scaler = scaler if scaler is not None else SlotScaler()
        return self

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def config(self) -> PoolConfig:
        return self._config

    def __repr__(self) -> str:
        c = self._config
        return f"Pool({c.name!r}, min={c.min}, max={c.max})"
