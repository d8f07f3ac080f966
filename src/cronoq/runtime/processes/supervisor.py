"""The parent side of process children: one :class:`Supervisor` per pool, one child per slot.

Theory of operation
-------------------
A supervisor starts children lazily: an attempt takes an idle child, or starts one when none
is idle, so there are never more children than attempts running at once, which the pool's
capacity (its slots) bounds; when capacity falls, an idle surplus is stopped as attempts start
and end. A child is a ``multiprocessing`` process of the configured start method (forkserver by
default; ``fork`` only while this process runs a single thread) with one duplex pipe. Starting
one blocks (the forkserver's first start imports cronoq), so it happens in a small spawner
thread pool and the loop, heartbeats included, never waits for it; everything else runs on the
event loop: ``loop.add_reader`` watches each child's pipe (progress, heartbeats, results) and
its process sentinel (its exit).

* **Attempt**: :meth:`Supervisor.start` pickles the arguments (an unpicklable argument or
  function fails the attempt permanently, saying so), sends the job and returns a future. The
  result comes back pickled; a failure as the exception (see :mod:`.jobs`).
* **Hard time limit / cancel**: cancelling that future (the scheduler does at a timeout, a
  cancel, a lease loss or at the end of a shutdown's grace; a remote worker at an ``Abort``)
  sends ``cancel`` to the child, then SIGTERM, then SIGKILL ``kill_grace`` seconds later unless
  it exited: this ends code that ignores SIGTERM, spins in pure Python or blocks in C. The child
  is discarded; the next attempt starts a new one — once the killed child has exited, when
  starting one sooner would put more children than the pool's capacity on the machine (a
  killed child may burn a core until its SIGKILL): such an attempt waits in ``_waiting``.
* **The task's own processes**: a child leads a process group of its own (:mod:`.child`), so
  the signals above go to the whole group, and whatever is left of the group when the child is
  gone (killed, crashed, recycled or stopped) is SIGKILLed: no grandchild outlives its child.
* **Crash isolation**: a child that exits while running a job fails only that attempt,
  retryably, with its exit code or signal; the supervisor keeps serving with the others.
* **Recycling**: after ``max_tasks_per_child`` jobs, or when the RSS the child reports after a
  job exceeds ``max_memory_per_child``, the child is stopped once idle — one child at a time:
  while one is being replaced, another due child keeps serving until that one is gone.
* **Close** (shutdown): children still being started are waited for, idle children are asked
  to stop, running ones are killed as above, and anything still alive after ``kill_grace`` +
  1 s is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cronoq.errors import Retryable
from cronoq.runtime.processes.child import child_main
from cronoq.runtime.processes.jobs import pickling_error, raise_failure
from cronoq.runtime.processes.settings import Processes

__all__ = ["Supervisor", "died_message"]

_log = logging.getLogger("cronoq.processes")

Progress = Callable[[float, "float | None", "str | None"], None]
Heartbeat = Callable[[], None]


_SPAWNER: ThreadPoolExecutor | None = None

#: what the forkserver imports before it forks children (:mod:`.forkserver`: no orphans)
_PRELOAD = ["cronoq.runtime.processes.child", "cronoq.runtime.processes.forkserver"]


def _spawner() -> ThreadPoolExecutor:
    """The threads that start children (starting one blocks: the forkserver's first start
    imports cronoq), shared by every supervisor of this process."""
    global _SPAWNER
    if _SPAWNER is None:
        _SPAWNER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cronoq-spawn")
    return _SPAWNER


def died_message(pid: int, exitcode: int | None) -> str:
    """How a child died, for the failed attempt: its exit code or the signal that killed it."""
    if exitcode is None:
        how = "exit status unknown"
    elif exitcode < 0:
        try:
            how = f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exit code {exitcode}"
    return f"the task's process (pid {pid}) died: {how}"


def _signal_group(child: Child, sig: int) -> None:
    """Send ``sig`` to the child's process group (the child and the processes its task
    started); to the child alone while it has not made its group yet (it starts no task
    before that)."""
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(Exception):
            (child.proc.kill if sig == signal.SIGKILL else child.proc.terminate)()
    except OSError:
        pass


class _Job:
    __slots__ = ("fut", "heartbeat", "id", "progress")

    def __init__(
        self, job_id: int, fut: asyncio.Future[Any], progress: Progress, heartbeat: Heartbeat
    ) -> None:
        self.id = job_id
        self.fut = fut
        self.progress = progress
        self.heartbeat = heartbeat


class Child:
    """One child process as its supervisor sees it."""

    __slots__ = (
        "conn",
        "due",
        "exited",
        "fns",
        "job",
        "kill_timer",
        "killed",
        "pid",
        "proc",
        "stopping",
        "tasks",
    )

    def __init__(self, proc: Any, conn: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.proc = proc
        self.conn = conn
        self.pid: int = proc.pid
        self.fns: set[int] = set()  # the functions this child already has
        self.tasks = 0
        self.job: _Job | None = None
        self.due = False  # due for recycling (waits while another child is being replaced)
        self.stopping = False
        self.killed = False  # hard-killed: it may burn a core until it exits
        self.kill_timer: asyncio.TimerHandle | None = None
        self.exited: asyncio.Future[None] = loop.create_future()

    def send(self, msg: tuple[Any, ...]) -> bool:
        try:
            self.conn.send(msg)
        except (OSError, ValueError):
            return False
        return True


class Supervisor:
    """The children of one pool (see the module docstring)."""

    def __init__(self, name: str, settings: Processes) -> None:
        self.name = name
        self.settings = settings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[Child] = []
        self._live: set[Child] = set()  # idle or busy, not stopping
        self._all: set[Child] = set()  # every child not yet exited
        self._retiring: Child | None = None
        #: attempts waiting for a killed child to exit before a child can start for them
        self._waiting: collections.deque[tuple[_Job, tuple[Any, ...]]] = collections.deque()
        #: the children being started (in a spawner thread), until the loop adopts them
        self._spawning: set[asyncio.Future[tuple[Any, Any]]] = set()
        self._fns: dict[int, tuple[object, bytes]] = {}
        self._next_job = 1
        self._closed = False
        #: the pool's capacity now (None: unknown), to stop an idle surplus
        self.capacity: Callable[[], int | None] = lambda: None
        self.started = 0  #: children started so far

    @property
    def pids(self) -> list[int]:
        """The pids of the children alive now."""
        return sorted(c.pid for c in self._all)

    # ------------------------------------------------------------------ attempts

    def start(
        self,
        fn: object,
        ctx_kind: int,
        info: dict[str, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        progress: Progress,
        heartbeat: Heartbeat,
    ) -> asyncio.Future[Any]:
        """Run ``fn(*args, **kwargs)`` (after a context, per ``ctx_kind``) in a child; the
        future of its result. Cancelling the future kills the child (module docstring)."""
        if self._closed:
            raise Retryable("the worker's process pool is shut down")
        try:
            args_bytes = pickle.dumps((args, kwargs))
        except Exception as e:
            raise pickling_error("the task's arguments cannot be pickled for its process", e) from None
        fn_id, fn_bytes = self._pickled_fn(fn)
        loop = self._loop = asyncio.get_running_loop()
        self._trim(keep=1)
        job = _Job(self._next_job, loop.create_future(), progress, heartbeat)
        self._next_job += 1
        send = (fn_id, fn_bytes, ctx_kind, info, args_bytes)
        if self._idle:
            self._dispatch(self._idle.pop(), job, send)
        elif self._full():  # a killed child still runs: the attempt waits for it to exit
            self._waiting.append((job, send))
        else:
            self._spawn(job, send)
        return job.fut

    def _full(self) -> bool:
        """Whether a new child would exceed the pool's capacity, counting the children being
        killed (which may burn a core until their SIGKILL) with the busy and starting ones."""
        cap = self.capacity()
        if cap is None:
            return False
        killed = sum(1 for c in self._all if c.killed)
        busy = sum(1 for c in self._live if c.job is not None)
        return killed > 0 and killed + busy + len(self._spawning) >= max(cap, 1)

    def _spawn(self, job: _Job, send: tuple[Any, ...]) -> None:
        loop = self._loop
        assert loop is not None
        if self.settings.start_method == "fork" and threading.active_count() == 1:
            made = loop.create_future()  # a fork is quick, and only safe from this one thread
            try:
                made.set_result(self._make_process())
            except Exception as e:
                made.set_exception(e)
            self._spawned(made, job, send)
        else:  # a new child, started in a thread: the loop (heartbeats included) never waits for it
            made = loop.run_in_executor(_spawner(), self._make_process)
            self._spawning.add(made)
            made.add_done_callback(lambda f: self._spawned(f, job, send))

    def _start_waiting(self) -> None:
        """Start the attempts that waited for a killed child to exit, as far as room allows."""
        while self._waiting and not self._closed:
            job, send = self._waiting[0]
            if job.fut.done():  # (timed out or cancelled while it waited)
                self._waiting.popleft()
            elif self._idle:
                self._waiting.popleft()
                self._dispatch(self._idle.pop(), job, send)
            elif not self._full():
                self._waiting.popleft()
                self._spawn(job, send)
            else:
                return

    def _dispatch(self, child: Child, job: _Job, send: tuple[Any, ...]) -> None:
        fn_id, fn_bytes, ctx_kind, info, args_bytes = send
        first = fn_id not in child.fns
        if not child.send(("run", job.id, fn_id, fn_bytes if first else None, ctx_kind, info, args_bytes)):
            self._kill(child)
            job.fut.set_exception(Retryable(f"could not send the task to its process (pid {child.pid})"))
            return
        child.fns.add(fn_id)
        child.job = job
        job.fut.add_done_callback(lambda f: self._on_future_done(child, job, f))

    def _spawned(self, made: asyncio.Future[tuple[Any, Any]], job: _Job, send: tuple[Any, ...]) -> None:
        self._spawning.discard(made)
        try:
            proc, conn = made.result()
        except Exception as e:
            if not job.fut.done():
                job.fut.set_exception(
                    Retryable(f"could not start a process for the task: {type(e).__name__}: {e}")
                )
            return
        child = self._adopt(proc, conn)
        if self._closed:
            self._kill(child)
        elif job.fut.done():  # cancelled while the child started: it serves the next attempt
            self._after_job(child, 0)
        else:
            self._dispatch(child, job, send)

    def _pickled_fn(self, fn: object) -> tuple[int, bytes]:
        key = id(fn)
        entry = self._fns.get(key)
        if entry is None or entry[0] is not fn:
            try:
                data = pickle.dumps(fn)
            except Exception as e:
                raise pickling_error("the task's function cannot be pickled for its process", e) from None
            entry = self._fns[key] = (fn, data)
        return key, entry[1]

    def _on_future_done(self, child: Child, job: _Job, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() and child.job is job:  # aborted while the child runs it: hard kill
            child.job = None
            child.send(("cancel", job.id))
            self._kill(child)

    # ------------------------------------------------------------------ children

    def _context(self) -> Any:
        method = self.settings.start_method
        if method == "fork" and threading.active_count() > 1:
            method = "forkserver"  # never fork a process that runs threads
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(list(_PRELOAD))
        return ctx

    def _make_process(self) -> tuple[Any, Any]:
        """Start a child process and its pipe (in a spawner thread: this blocks)."""
        mp = self._context()
        parent_conn, child_conn = mp.Pipe(duplex=True)
        proc = mp.Process(target=child_main, args=(child_conn,), name=f"cronoq-{self.name}", daemon=True)
        try:
            proc.start()
        except BaseException:
            parent_conn.close()
            raise
        finally:
            child_conn.close()
        return proc, parent_conn

    def _adopt(self, proc: Any, conn: Any) -> Child:
        """Watch a started child from the loop: its pipe and its exit."""
        loop = self._loop
        assert loop is not None
        child = Child(proc, conn, loop)
        self._live.add(child)
        self._all.add(child)
        self.started += 1
        loop.add_reader(conn.fileno(), self._on_readable, child)
        loop.add_reader(proc.sentinel, self._on_exit, child)
        return child

    def _on_readable(self, child: Child) -> None:
        conn = child.conn
        try:  # one message per wakeup (the loop calls again while more is buffered): no poll
            self._on_message(child, conn.recv())
        except (EOFError, OSError):
            assert self._loop is not None
            self._loop.remove_reader(conn.fileno())  # the child is going: its sentinel says how

    def _on_message(self, child: Child, msg: tuple[Any, ...]) -> None:
        kind, job_id = msg[0], msg[1]
        job = child.job
        if job is None or job.id != job_id:  # a late message of a job that was cancelled
            if kind == "done" and child.stopping:
                self._sigkill(child)  # it stopped on its own within kill_grace: no need to wait
            return
        if kind == "progress":
            with contextlib.suppress(Exception):
                job.progress(msg[2], msg[3], msg[4])
        elif kind == "heartbeat":
            with contextlib.suppress(Exception):
                job.heartbeat()
        elif kind == "done":
            child.job = None
            child.tasks += 1
            self._settle(job.fut, msg[2], msg[3])
            self._after_job(child, msg[4])

    @staticmethod
    def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            try:
                fut.set_result(pickle.loads(value))
            except Exception as e:
                fut.set_exception(pickling_error("the task's result cannot be unpickled", e))
            return
        try:
            raise_failure(value)
        except Exception as e:
            fut.set_exception(e)

    def _after_job(self, child: Child, rss: int) -> None:
        s = self.settings
        if (s.max_tasks_per_child is not None and child.tasks >= s.max_tasks_per_child) or (
            s.max_memory_per_child is not None and rss > s.max_memory_per_child
        ):
            child.due = True
        if child.due and self._retiring is None:
            self._retiring = child
            self._stop(child)
            return
        cap = self.capacity()
        if cap is not None and len(self._live) > cap:
            self._stop(child)
            return
        self._idle.append(child)
        self._start_waiting()

    def _trim(self, keep: int) -> None:
        """Stop idle children beyond the pool's capacity (keeping ``keep`` idle ones)."""
        cap = self.capacity()
        if cap is None:
            return
        while len(self._idle) > keep and len(self._live) > max(cap, 1):
            self._stop(self._idle.pop(0))

    def _stop(self, child: Child) -> None:
        """Ask an idle child to exit; kill it if it has not after ``kill_grace``."""
        self._live.discard(child)
        if child in self._idle:
            self._idle.remove(child)
        child.stopping = True
        child.send(("stop",))
        if child.kill_timer is None and self._loop is not None:
            child.kill_timer = self._loop.call_later(self.settings.kill_grace + 1.0, self._kill, child)

    def _kill(self, child: Child) -> None:
        """SIGTERM now, SIGKILL after ``kill_grace`` unless it exited."""
        self._live.discard(child)
        if child in self._idle:
            self._idle.remove(child)
        child.stopping = True
        if child.exited.done():
            return
        child.killed = True
        _signal_group(child, signal.SIGTERM)
        if child.kill_timer is not None:
            child.kill_timer.cancel()
        assert self._loop is not None
        child.kill_timer = self._loop.call_later(self.settings.kill_grace, self._sigkill, child)

    @staticmethod
    def _sigkill(child: Child) -> None:
        if not child.exited.done():
            _signal_group(child, signal.SIGKILL)

    def _on_exit(self, child: Child) -> None:
        loop = self._loop
        assert loop is not None
        loop.remove_reader(child.proc.sentinel)
        with contextlib.suppress(EOFError, OSError):
            while child.conn.poll():  # what it sent before it exited (a result, say)
                self._on_message(child, child.conn.recv())
        child.proc.join(1.0)
        code = child.proc.exitcode
        job, child.job = child.job, None
        if job is not None and not job.fut.done():
            job.fut.set_exception(Retryable(died_message(child.pid, code)))
            _log.warning("process child %d of pool '%s' died (exit code %s)", child.pid, self.name, code)
        self._discard(child)

    def _discard(self, child: Child) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(child.conn.fileno())
            with contextlib.suppress(Exception):
                loop.remove_reader(child.proc.sentinel)
        with contextlib.suppress(Exception):
            child.conn.close()
        if child.kill_timer is not None:
            child.kill_timer.cancel()
        with contextlib.suppress(OSError):  # what its tasks started and left behind
            os.killpg(child.pid, signal.SIGKILL)
        self._live.discard(child)
        self._all.discard(child)
        child.killed = False
        if child in self._idle:
            self._idle.remove(child)
        if not child.exited.done():
            child.exited.set_result(None)
        if self._retiring is child:
            self._retiring = None
            due = next((c for c in self._idle if c.due), None)
            if due is not None:  # the next child due for recycling, now that this one is gone
                self._retiring = due
                self._stop(due)
        self._start_waiting()

    # ------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        """Stop idle children, kill running ones; return once every child exited."""
        self._closed = True
        while self._waiting:
            job, _ = self._waiting.popleft()
            job.fut.cancel()
        if self._spawning:  # children being started: adopted (and stopped) below, never left behind
            await asyncio.wait(set(self._spawning), timeout=30.0)
            await asyncio.sleep(0)  # (their adoption callbacks)
        for child in list(self._all):
            if child.job is not None:
                job, child.job = child.job, None
                if not job.fut.done():
                    job.fut.cancel()
                self._kill(child)
            elif not child.stopping:
                self._stop(child)
        pending = [c.exited for c in self._all]
        if not pending:
            return
        _, left = await asyncio.wait(pending, timeout=self.settings.kill_grace + 1.0)
        for child in list(self._all):
            self._sigkill(child)
        if left:
            await asyncio.wait(left, timeout=2.0)
        for child in list(self._all):
            self._discard(child)
