"""``BlockingClient``: the :class:`~cronoq.client.Client` for code without asyncio — Django
views, Flask, scripts, notebooks (docs/how-to/sync-code.md).

Theory of operation
-------------------
A blocking client owns one private event loop running in a daemon thread (a
:class:`LoopThread`) and one ordinary :class:`Client` whose channels live on that loop. Every
method hands the matching coroutine of the async client to the loop with
``asyncio.run_coroutine_threadsafe`` and waits for its result, so the gRPC channel is only
ever touched from one thread while any number of threads call at once (their concurrent
``submit`` calls are even coalesced into one ``SubmitMany`` call, as on the async client).

The methods are derived from :class:`Client`'s by :func:`blocking` (one line each, the
signature and docstring of the async method, checked by mypy through ``ParamSpec``), and
``tests/client/test_blocking.py`` fails when ``Client`` gains a public method this class
lacks. The two streaming calls get blocking iterators: ``iter_tasks`` a generator,
``watch`` a :class:`BlockingWatch`.

``app.bind(blocking_client)`` binds a :class:`cronoq.App` to the async client on that loop,
so named tasks can be called from any thread with ``t.submit_sync(...)`` /
``t.enqueue_sync(...)`` (:mod:`cronoq.tasks.sync_calls`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from cronoq.client._channel import normalize_targets
from cronoq.client.client import FAILOVER_WAIT_S, Client, Watch
from cronoq.client.errors import ClientError
from cronoq.tasks.targets import ClientTarget

if TYPE_CHECKING:
    import grpc

    from cronoq.client.types import Event, TaskInfo

__all__ = ["BlockingClient", "BlockingWatch", "LoopThread", "blocking"]

P = ParamSpec("P")
R = TypeVar("R")


class LoopThread:
    """An event loop running in a daemon thread; :meth:`run` runs a coroutine on it from any
    other thread and waits for the outcome."""

    __slots__ = ("_stopped", "loop", "thread")

    def __init__(self, name: str = "cronoq-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._stopped = False
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, name=name, daemon=True)
        self.thread.start()
        ready.wait()

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        """Run ``coro`` on the loop and return its result (its exception is raised here);
        ``TimeoutError`` after ``timeout`` seconds (the coroutine is then cancelled)."""
        if self._stopped or self.loop.is_closed():
            coro.close()
            raise ClientError("cancelled", "client is closed")
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking call on the client's own loop thread would deadlock")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout}s") from None

    def stop(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self.thread:
            self.thread.join()
            self.loop.close()


def blocking(
    method: Callable[Concatenate[Client, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[BlockingClient, P], R]:
    """The blocking form of a coroutine method of :class:`Client` (same name, signature and
    docstring): runs it on the blocking client's loop and waits."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: BlockingClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        runner, client = self._ensure()
        return runner.run(getattr(client, name)(*args, **kwargs))

    return call


class BlockingWatch:
    """Blocking view of a :class:`~cronoq.client.Watch`: ``with client.watch(...) as events:``
    returns once the subscription is live; iterate for :class:`~cronoq.client.Event` s
    (``events.next(timeout)`` waits at most ``timeout`` seconds)."""

    __slots__ = ("_runner", "_watch")

    def __init__(self, runner: LoopThread, watch: Watch) -> None:
        self._runner = runner
        self._watch = watch

    def start(self) -> BlockingWatch:
        """Open the subscription and wait until it is live."""
        self._runner.run(self._watch.start())
        return self

    def __enter__(self) -> BlockingWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.next()

    def next(self, timeout: float | None = None) -> Event:
        """The next event; StopIteration when the stream ends, TimeoutError after ``timeout``."""
        try:
            return self._runner.run(self._watch.__anext__(), timeout)
        except StopAsyncIteration:
            raise StopIteration from None

    @property
    def closed(self) -> bool:
        return self._watch.closed

    def close(self) -> None:
        """Cancel the subscription; iteration ends."""
        if not self._watch.closed:
            self._runner.run(self._watch.aclose())


class _BlockingTarget(ClientTarget):
    """An app's target bound to a :class:`BlockingClient`: its ``client`` and ``loop`` are the
    blocking client's current ones, so a forked child uses its own."""

    __slots__ = ("_blocking",)

    def __init__(self, blocking: BlockingClient) -> None:  # (no super().__init__: no slots set)
        self._blocking = blocking

    @property
    def client(self) -> Client:  # type: ignore[override]
        return self._blocking.client

    @property
    def loop(self) -> asyncio.AbstractEventLoop:  # type: ignore[override]
        return self._blocking.runner.loop


class BlockingClient:
    """The calls of :class:`~cronoq.client.Client`, blocking and thread-safe (see the module
    docstring): ``with BlockingClient("127.0.0.1:7070") as client: client.submit(...)``.

    Takes the arguments of ``Client``; ``client.client`` is the async client (on the loop
    thread ``client.runner``). Nothing starts before the first call, and a forked child starts
    its own loop thread and channel on its first call (pre-forking servers: gunicorn
    ``--preload``, uWSGI).
    """

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        token: str | None = None,
        tls: bool = False,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
        coalesce_submits: bool = True,
        failover_wait: float = FAILOVER_WAIT_S,
    ) -> None:
        self._make_client = functools.partial(
            Client,
            target,
            token=token,
            tls=tls,
            credentials=credentials,
            options=options,
            coalesce_submits=coalesce_submits,
            failover_wait=failover_wait,
        )
        self._targets = normalize_targets(target)  # (checks the addresses now)
        self._lock = threading.Lock()
        self._live: tuple[int, LoopThread, Client] | None = None
        self._closed = False

    def _ensure(self) -> tuple[LoopThread, Client]:
        """The loop thread and client of this process, started on first use — and again in a
        forked child (a pre-forking server that imported the app in its master: the thread
        did not survive the fork, and a gRPC channel must not be shared across it)."""
        live = self._live
        pid = os.getpid()
        if live is not None and live[0] == pid:
            return live[1], live[2]
        with self._lock:
            if self._closed:
                raise ClientError("cancelled", "client is closed")
            live = self._live
            if live is None or live[0] != pid:
                live = self._live = (pid, LoopThread(), self._make_client())
            return live[1], live[2]

    @property
    def runner(self) -> LoopThread:
        """The loop thread the calls run on (started on first use)."""
        return self._ensure()[0]

    @property
    def client(self) -> Client:
        """The async client (use it on :attr:`runner`'s loop)."""
        return self._ensure()[1]

    @property
    def targets(self) -> list[str]:
        """The server addresses, in failover order."""
        return list(self._targets)

    @property
    def target(self) -> str:
        """The address calls go to first (the last one that answered)."""
        live = self._live
        return live[2].target if live is not None else self._targets[0]

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channels and stop the loop thread. Idempotent."""
        with self._lock:
            self._closed = True
            live, self._live = self._live, None
        if live is not None and live[0] == os.getpid():
            with contextlib.suppress(ClientError):  # closed already
                live[1].run(live[2].close())
            live[1].stop()

    def bind_target(self) -> ClientTarget:
        """What ``app.bind(blocking_client)`` binds: the async client on its loop, as they are
        in the calling process (see :class:`_BlockingTarget`)."""
        return _BlockingTarget(self)

    # -- the calls of Client ------------------------------------------------------------------

    submit = blocking(Client.submit)
    submit_batch = blocking(Client.submit_batch)
    cancel = blocking(Client.cancel)
    get = blocking(Client.get)
    list_tasks = blocking(Client.list_tasks)
    wait = blocking(Client.wait)
    snapshot = blocking(Client.snapshot)
    add_recurring = blocking(Client.add_recurring)
    remove_recurring = blocking(Client.remove_recurring)
    list_workers = blocking(Client.list_workers)
    list_recurring = blocking(Client.list_recurring)
    pause = blocking(Client.pause)
    resume = blocking(Client.resume)
    pause_recurring = blocking(Client.pause_recurring)
    resume_recurring = blocking(Client.resume_recurring)
    trigger_recurring = blocking(Client.trigger_recurring)
    replay = blocking(Client.replay)
    replay_where = blocking(Client.replay_where)
    cancel_where = blocking(Client.cancel_where)
    signal = blocking(Client.signal)

    def iter_tasks(self, *args: Any, **kwargs: Any) -> Iterator[TaskInfo]:
        """Every matching task (as :meth:`Client.iter_tasks`), fetching pages as needed."""
        runner, client = self._ensure()
        agen = client.iter_tasks(*args, **kwargs)

        async def step() -> tuple[bool, TaskInfo | None]:
            try:
                return True, await anext(agen)
            except StopAsyncIteration:
                return False, None

        while True:
            more, info = runner.run(step())
            if not more:
                return
            assert info is not None
            yield info

    @functools.wraps(Client.watch)
    def watch(self, *args: Any, **kwargs: Any) -> BlockingWatch:
        runner, client = self._ensure()
        return BlockingWatch(runner, client.watch(*args, **kwargs))

    def __repr__(self) -> str:
        return f"BlockingClient({self.client.targets!r})"
