"""The main loop of a process child (runs in the child only).

Theory of operation
-------------------
A child is started by :mod:`cronoq.runtime.processes.supervisor` with one end of a duplex pipe.
It first makes a process group of its own (``setpgid``): the processes its tasks start
(a ``subprocess`` call, a pool of their own) are in it, so the supervisor signals the whole
group at a hard kill and SIGKILLs what is left of it once the child is gone. Then it ties its
life to its parent's: on Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (through
ctypes) kills it when its parent dies — the forkserver, which itself exits when the worker
does (the child closes the forkserver's "alive" pipe it inherits, which would keep it up, and
the forkserver SIGKILLs its children's groups as it exits: :mod:`.forkserver`), or the worker
under ``spawn``/``fork`` —, and a *reader* thread that owns the receiving
side of the pipe SIGKILLs the child's group, itself included, as soon as the pipe reaches EOF,
that is when the worker is gone, however it died. So no child outlives its worker, even one
SIGKILLed, and neither do the processes its tasks started (unless they left the group, with
``start_new_session=True`` say).

The reader thread hands ``run`` messages to the main thread through a queue, and a ``cancel``
for the running job sets the flag ``ctx.is_cancelled()`` reads. The main thread runs one job
at a time: it unpickles the function (cached by id) and the arguments, enters the lifespan of
the function's app once per child (:mod:`.lifespans`: a named task's ``@app.lifespan``, its
state is ``ctx.state``), calls the function inside the app's call hooks with a
:class:`ChildContext` or :class:`ChildLease` first when asked (an awaitable result is run on
the child's own event loop), pickles the result and sends ``done`` with its RSS. At ``stop``
it leaves the lifespans before exiting. Every failure —
an import error while unpickling the function included — is a ``done`` with a failure
(:func:`~cronoq.runtime.processes.jobs.failure_of`): the child stays up, so a module that does
not import fails each attempt permanently without a respawn storm. SIGINT is ignored (were
the child in the worker's process group, a terminal's Ctrl-C would reach it: the worker decides
when children stop);
SIGTERM keeps its default action (the parent's hard kill starts with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import queue
import signal
import sys
import threading
from typing import Any

from cronoq.engine.progress import check_progress
from cronoq.outcome import Outcome
from cronoq.runtime.processes.jobs import CTX_LEASE, CTX_NONE, FnRef, failure_of, pickling_error
from cronoq.runtime.processes.lifespans import ChildLifespans, owner_of

__all__ = ["ChildContext", "ChildLease", "child_main", "rss_bytes"]

_PR_SET_PDEATHSIG = 1


def _own_group() -> bool:
    """Lead a process group of this child's own (the processes a task starts join it, so the
    supervisor ends them with the child); False when that is not possible here."""
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):  # pragma: no cover - no process groups
        return False
    return os.getpgrp() == os.getpid()


def _end_group(leader: bool) -> None:
    """Exit now, with every process of this child's group when it leads one (the worker is gone)."""
    if leader:
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)  # (this process included)
    os._exit(0)


def _release_forkserver() -> None:
    """Close this child's copy of the forkserver's "alive" pipe (inherited from the forkserver or
    a forking worker): held by children, it kept the forkserver — this child's parent, whose
    death sends the PDEATHSIG — alive after the worker died (:mod:`.forkserver`)."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (best effort elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ppid = os.getppid()
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != ppid:  # the parent died before the call: too late for the signal
            os._exit(1)
    except Exception:  # pragma: no cover - no libc: the pipe watchdog still applies
        pass


def rss_bytes() -> int:
    """This process's resident set size now (Linux: /proc; else the peak, from getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class _Channel:
    """The child's end of the pipe: sends from any thread, and the job being run."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.job = 0
        self.cancelled: set[int] = set()

    def send(self, msg: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.send(msg)


class _Attempt:
    """What the contexts of a child share: the attempt's info and its controls over the pipe."""

    def __init__(self, info: dict[str, Any], chan: _Channel, job: int) -> None:
        self._info = info
        self._chan = chan
        self._job = job
        self.attempt: int = info["attempt"]
        self.kind: str = info["kind"]
        self.key: str | None = info["key"]
        self.pool: str = info["pool"]
        self.timeout: float | None = info["timeout"]
        self.deadline: float | None = info["deadline"]
        self.tags: dict[str, str] = dict(info["tags"])

    @property
    def parents(self) -> tuple[Outcome, ...]:
        """How each parent ended, one :class:`~cronoq.Outcome` per dependency edge in edge
        order (as ``TaskContext.parents``; docs/concepts/dependencies.md#outputs-on-edges)."""
        raw = self._info.get("parents")
        return tuple(Outcome(*row) for row in pickle.loads(raw)) if raw else ()

    def _is_cancelled(self) -> bool:
        return self._job in self._chan.cancelled

    def _report(self, done: float, total: float | None, message: str | None) -> None:
        d, t, m = check_progress(done, total, message)
        if not self._is_cancelled():
            self._chan.send(("progress", self._job, d, t, m))

    def heartbeat(self) -> None:
        """Renew the lease (the parent also does, while the child runs)."""
        if not self._is_cancelled():
            self._chan.send(("heartbeat", self._job))


class ChildContext(_Attempt):
    """The task context inside a child: ``id``, ``kind``, ``key``, ``attempt``, ``tags``,
    ``deadline``, ``timeout``, ``pool``, ``lease``, ``group``, ``state``, ``parents``; ``progress()`` and
    ``heartbeat()`` go over the pipe; ``is_cancelled()`` turns True on the parent's cancel."""

    def __init__(self, info: dict[str, Any], chan: _Channel, job: int, state: Any = None) -> None:
        super().__init__(info, chan, job)
        self.id: int = info["id"]
        self.lease: int = info["lease"]
        #: what the app's ``@app.lifespan`` yielded in this child (None without one)
        self.state = state
        self.group: dict[str, str] = dict(info.get("group") or {})
        self.abort_reason: str | None = None

    def is_cancelled(self) -> bool:
        return self._is_cancelled()

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self._report(done, total, message)

    def note_worker(self, name: str) -> None:
        """(A no-op in a child: the worker is already named.)"""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return f"<ChildContext id={self.id} attempt={self.attempt} pid={os.getpid()}>"


class _Flag:
    """``lease.cancelled`` in a child: truthy once the parent cancelled the job."""

    def __init__(self, lease: ChildLease) -> None:
        self._lease = lease

    def __bool__(self) -> bool:
        return self._lease._is_cancelled()

    def is_set(self) -> bool:
        return self._lease._is_cancelled()


class ChildLease(_Attempt):
    """A remote worker's lease inside a child (``cronoq worker --run-in process``): the lease's
    fields, ``json()``/``text()``/``value()``, ``cancelled``, ``heartbeat()`` and progress."""

    def __init__(self, info: dict[str, Any], chan: _Channel, job: int) -> None:
        super().__init__(info, chan, job)
        self.id: int = info["lease"]
        self.task_id: int = info["id"]
        self.payload: bytes = info["payload"]
        self.content_type: str = info["content_type"]
        self.priority: str = info["priority"]
        self.lease_ttl: float | None = info["lease_ttl"]
        self.cancel_reason = ""

    @property
    def cancelled(self) -> _Flag:
        return _Flag(self)

    def json(self) -> Any:
        import json

        return json.loads(self.payload) if self.payload else None

    def text(self) -> str:
        return self.payload.decode("utf-8")

    def value(self) -> Any:
        from cronoq.client.encoding import decode_payload

        return decode_payload(self.payload, self.content_type)

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self._report(done, total, message)

    def report_progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self._report(done, total, message)

    def __repr__(self) -> str:
        return f"ChildLease(id={self.id}, task_id={self.task_id}, attempt={self.attempt}, pid={os.getpid()})"


def _reader(chan: _Channel, jobs: queue.SimpleQueue[tuple[Any, ...] | None], leader: bool) -> None:
    """Own the receiving side: queue jobs, note cancels, exit the process at EOF (parent gone)."""
    while True:
        try:
            msg = chan.conn.recv()
        except (EOFError, OSError):
            _end_group(leader)  # the worker is gone: never outlive it, nor let the task's processes
        if msg[0] == "run":
            jobs.put(msg)
        elif msg[0] == "cancel":
            chan.cancelled.add(msg[1])
        else:  # "stop"
            jobs.put(None)


def _load(fn_bytes: bytes) -> tuple[Any, Any] | BaseException:
    """``(function, owner)`` from its pickle (:mod:`.lifespans`), or the error loading it."""
    try:
        fn = pickle.loads(fn_bytes)
    except Exception as e:
        return pickling_error("cannot load the task in the child process", e)
    if not isinstance(fn, FnRef):
        return fn, owner_of(fn)
    try:
        return fn.target()
    except Exception as e:
        return pickling_error("cannot load the task in the child process", e)


def _run(chan: _Channel, fns: dict[int, Any], msg: tuple[Any, ...], lifespans: ChildLifespans) -> Any:
    _, job, fn_id, fn_bytes, ctx_kind, info, args_bytes = msg
    target = fns.get(fn_id)
    if target is None:
        target = fns[fn_id] = _load(fn_bytes)  # (a load error is kept: the parent sends it once)
    if isinstance(target, BaseException):
        raise target
    fn, owner = target
    try:
        args, kwargs = pickle.loads(args_bytes)
    except Exception as e:
        raise pickling_error("cannot unpickle the arguments in the child process", e) from None
    state = lifespans.state(owner)  # the owner's lifespan, entered once per child
    if ctx_kind != CTX_NONE:
        first = ChildLease(info, chan, job) if ctx_kind == CTX_LEASE else ChildContext(info, chan, job, state)
        args = (first, *args)
    return lifespans.call(owner, fn, args, kwargs)


def child_main(conn: Any) -> None:
    """The child's entry point (the target of its ``multiprocessing.Process``)."""
    leader = _own_group()
    _release_forkserver()
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chan = _Channel(conn)
    jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
    reader = threading.Thread(target=_reader, args=(chan, jobs, leader), name="cronoq-child-reader")
    reader.daemon = True
    reader.start()
    from cronoq.runtime.processes.registry import CURRENT, IN_THREADS

    CURRENT.set(IN_THREADS)  # a process task met inside a child (a worker's app) runs in a thread
    fns: dict[int, Any] = {}
    loop = asyncio.new_event_loop()
    lifespans = ChildLifespans(loop)
    while (msg := jobs.get()) is not None:
        job = msg[1]
        chan.job = job
        try:
            result = _run(chan, fns, msg, lifespans)
            try:
                out: tuple[Any, ...] = ("done", job, True, pickle.dumps(result), 0)
            except Exception as e:
                out = ("done", job, False, failure_of(pickling_error("the result cannot be pickled", e)), 0)
        except BaseException as e:  # every outcome (SystemExit included) goes back to the parent
            out = ("done", job, False, failure_of(e), 0)
        chan.cancelled.discard(job)
        chan.send((*out[:4], rss_bytes()))
    lifespans.close()  # stopping normally: leave the lifespans this child entered
    loop.close()
