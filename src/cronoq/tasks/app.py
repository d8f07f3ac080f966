"""``cronoq.App``: a registry of named, typed tasks and recurring schedules.

Theory of operation
-------------------
An app is a plain registry: constructing it does no I/O, decorating a function only validates
and records it. ``@app.task`` turns a function into a
:class:`~cronoq.tasks.TaskDefinition` registered under its name (``"<module>.<qualname>"``
by default) and kind (the name, unless set). ``@app.recurring`` above it records a cron
schedule that calls it.

Calls (``t.submit`` / ``t.enqueue`` / ``app.submit_batch``) go to the app's *target*: the
innermost running ``app.scheduler(...)`` (an :class:`~cronoq.tasks.AppScheduler` attaches
itself while it runs), else what ``app.bind(...)`` set (a :class:`cronoq.client.Client` or a
:class:`~cronoq.Scheduler`); with neither, a call raises :class:`~cronoq.SchedulerError`
saying what to do.

Workers dispatch by kind: the pools of ``app.scheduler(...)`` (and ``app.pool(...)``) run the
app's :class:`~cronoq.tasks.dispatch.TaskExecutor`; ``app.handler()`` is the handler of a
remote :class:`cronoq.client.Worker` (what ``cronoq worker MODULE:APP`` serves).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from cronoq.engine.model import check_stored_text
from cronoq.errors import InvalidSubmission, SchedulerError
from cronoq.runtime.context import TaskContext
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.pool import Pool
from cronoq.runtime.processes.runin import check_run_in
from cronoq.runtime.scheduler import Scheduler
from cronoq.tasks.convert import TaskDefinitionError
from cronoq.tasks.definition import TaskDefinition
from cronoq.tasks.dispatch import LeaseHandler, TaskExecutor
from cronoq.tasks.fields import DEFINITION_FIELDS, RECURRING_FIELDS, check_fields
from cronoq.tasks.lifespan import CallHook, Lifespan
from cronoq.tasks.placeholders import has_placeholder, resolve_edges
from cronoq.tasks.recurring import RecurringDefinition, check_schedule
from cronoq.tasks.scheduler import AppScheduler
from cronoq.tasks.targets import ClientTarget, NamedTask, SchedulerTarget, Target

if TYPE_CHECKING:
    from cronoq.client import BlockingClient, Client, Worker

__all__ = ["App"]

P = ParamSpec("P")
R = TypeVar("R")

_NOT_BOUND = (
    "app '{name}' has nowhere to send tasks: run them inside `async with app.scheduler(pools=...)` "
    "(in process) or call `app.bind(client)` with a cronoq.client.Client first"
)


class TaskDecorator:
    """What ``@app.task(name=..., **fields)`` returns: apply it to the task function."""

    __slots__ = ("_app", "_fields", "_name", "_run_in")

    def __init__(self, app: App, name: str | None, fields: dict[str, Any], run_in: str | None = None) -> None:
        self._app = app
        self._name = name
        self._fields = fields
        self._run_in = run_in

    @overload
    def __call__(
        self, fn: Callable[Concatenate[TaskContext, P], Awaitable[R]], /
    ) -> TaskDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> TaskDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[TaskContext, P], R], /) -> TaskDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> TaskDefinition[P, R]: ...

    def __call__(self, fn: Callable[..., Any], /) -> TaskDefinition[Any, Any]:
        return self._app._register(fn, self._name, self._fields, self._run_in)


class App:
    """A registry of named tasks (see the module docstring): ``app = cronoq.App("shop")``."""

    __slots__ = (
        "_bound",
        "_by_kind",
        "_executor",
        "_hooks",
        "_lifespan",
        "_name",
        "_recurring",
        "_stack",
        "_tasks",
    )

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"an app's name must be a non-empty string (got {name!r})")
        self._name = name
        self._tasks: dict[str, TaskDefinition[Any, Any]] = {}
        self._by_kind: dict[str, TaskDefinition[Any, Any]] = {}
        self._recurring: dict[str, RecurringDefinition] = {}
        self._executor = TaskExecutor(self._by_kind)
        self._bound: Target | None = None
        self._stack: list[Target] = []
        self._lifespan = Lifespan()
        self._hooks: tuple[CallHook, ...] = ()

    @property
    def name(self) -> str:
        return self._name

    @property
    def tasks(self) -> MappingProxyType[str, TaskDefinition[Any, Any]]:
        """Name → task definition (read-only)."""
        return MappingProxyType(self._tasks)

    @property
    def recurring_schedules(self) -> tuple[RecurringDefinition, ...]:
        """The recurring schedules, in definition order."""
        return tuple(self._recurring.values())

    # ------------------------------------------------------------------ defining

    @overload
    def task(self, fn: Callable[Concatenate[TaskContext, P], Awaitable[R]], /) -> TaskDefinition[P, R]: ...
    @overload
    def task(self, fn: Callable[P, Awaitable[R]], /) -> TaskDefinition[P, R]: ...
    @overload
    def task(self, fn: Callable[Concatenate[TaskContext, P], R], /) -> TaskDefinition[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> TaskDefinition[P, R]: ...
    @overload
    def task(self, fn: None = None, /, *, name: str | None = None, **fields: Any) -> TaskDecorator: ...

    def task(
        self, fn: Callable[..., Any] | None = None, /, *, name: str | None = None, **fields: Any
    ) -> TaskDefinition[Any, Any] | TaskDecorator:
        """Register a task: ``@app.task`` or ``@app.task(name=..., pool=..., retry=..., ...)``.

        ``name`` defaults to ``"<module>.<qualname>"``; the other arguments are the task fields
        every call carries (``pool``, ``priority``, ``retry``, ``timeout``, ``resources``,
        ``labels``, ``tags``, ``tenant``, ``duration_hint``, ``kind`` — the name by default —,
        ``tolerance``, ``on_miss``, ``deadline_in``). A first parameter annotated
        :class:`~cronoq.TaskContext` receives the attempt's context. ``run_in`` says where the
        function runs: ``"loop"`` (default for ``async def``), ``"thread"`` (default for a plain
        ``def``) or ``"process"`` (a child process with a hard time limit,
        docs/how-to/processes.md); it is not sent with the calls.
        """
        if name is not None and (not isinstance(name, str) or not name):
            raise TaskDefinitionError(f"a task name must be a non-empty string (got {name!r})")
        run_in = fields.pop("run_in", None)
        checked = check_fields(fields, DEFINITION_FIELDS, f"task '{name}'" if name else "@app.task")
        if fn is None:
            return TaskDecorator(self, name, checked, run_in)
        return self._register(fn, name, checked, run_in)

    def _register(
        self, fn: Callable[..., Any], name: str | None, fields: dict[str, Any], run_in: str | None = None
    ) -> TaskDefinition[Any, Any]:
        if isinstance(fn, TaskDefinition):
            raise TaskDefinitionError(f"{fn!r} is already a task; apply @app.task to the function once")
        if not callable(fn) or isinstance(fn, type):
            raise TaskDefinitionError(f"@app.task applies to a function (got {fn!r})")
        if name is None:
            module = getattr(fn, "__module__", None) or "__main__"
            qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
            if not qualname:
                raise TaskDefinitionError(f"cannot name the task {fn!r}: pass name=...")
            name = f"{module}.{qualname}"
        if name in self._tasks:
            raise TaskDefinitionError(f"app '{self._name}' already has a task named '{name}'")
        if "kind" not in fields:  # (an explicit kind was checked with the other fields)
            try:
                check_stored_text("kind", name)
            except InvalidSubmission as e:
                raise TaskDefinitionError(
                    f"task {name!r}: its name is its kind, which a store must hold: {e.message}"
                    " (rename it, or pass kind=...)"
                ) from None
        kind = fields.setdefault("kind", name)
        if kind in self._by_kind:
            raise TaskDefinitionError(
                f"task '{name}': kind '{kind}' is already the kind of task '{self._by_kind[kind].name}'"
                " (workers dispatch by kind: it must be unique in the app)"
            )
        where = f"task '{name}'"
        checked_run_in = check_run_in(fn, run_in, where, by_reference=True)
        defn: TaskDefinition[Any, Any] = TaskDefinition(self, fn, name, fields, checked_run_in)
        self._tasks[name] = defn
        self._by_kind[kind] = defn
        return defn

    def recurring(
        self,
        cron: str,
        *,
        name: str | None = None,
        tz: str | None = None,
        overlap: str = "skip",
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Callable[[TaskDefinition[P, R]], TaskDefinition[P, R]]:
        """A cron schedule that calls the task below it: ``@app.recurring("0 3 * * *")`` stacked
        above ``@app.task(...)`` (or ``app.recurring(...)(task_definition)``); returns the task
        definition. ``args``/``kwargs`` are the call's arguments, ``fields`` task fields of each
        occurrence on top of the task's. ``name`` defaults to the task's name."""
        where = f"recurring schedule '{name}'" if name else f"recurring schedule '{cron}'"
        check_schedule(cron, tz, overlap, where)
        if name is not None and (not isinstance(name, str) or not name):
            raise TaskDefinitionError(f"a schedule name must be a non-empty string (got {name!r})")
        if isinstance(args, (str, bytes)) or not isinstance(args, Iterable):
            raise TaskDefinitionError(f"{where}: args must be a list or tuple (got {args!r})")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TaskDefinitionError(f"{where}: kwargs must be a dict (got {kwargs!r})")
        extra = check_fields(fields, RECURRING_FIELDS, where)
        call_args, call_kwargs = tuple(args), dict(kwargs or {})
        if any(map(has_placeholder, (*call_args, *call_kwargs.values()))):
            raise TaskDefinitionError(
                f"{where}: a placeholder (output_of / outcome_of / .output) cannot be an argument of a "
                "recurring schedule: each occurrence has no parent to take it from"
            )

        def apply(defn: TaskDefinition[P, R]) -> TaskDefinition[P, R]:
            if not isinstance(defn, TaskDefinition):
                raise TaskDefinitionError(
                    f"{where}: @app.recurring goes above @app.task (got {defn!r}, which is not a task)"
                )
            if self._tasks.get(defn.name) is not defn:
                raise TaskDefinitionError(
                    f"{where}: unknown task '{defn.name}' in app '{self._name}' (tasks: "
                    f"{', '.join(sorted(self._tasks)) or 'none'})"
                )
            schedule_name = name or defn.name
            if schedule_name in self._recurring:
                raise TaskDefinitionError(
                    f"app '{self._name}' already has a recurring schedule named '{schedule_name}'"
                    " (pass name=... to tell them apart)"
                )
            try:
                payload = defn.binding.encode(call_args, call_kwargs)
                payload = {"args": list(payload["args"]), "kwargs": payload["kwargs"]}  # (a stored value)
            except InvalidSubmission as e:
                raise TaskDefinitionError(f"recurring schedule '{schedule_name}': {e.message}") from None
            self._recurring[schedule_name] = RecurringDefinition(
                schedule_name, cron, tz, overlap, defn.name, payload, {**defn.fields, **extra}
            )
            return defn

        return apply

    # ------------------------------------------------------------------ worker resources

    def lifespan(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``@app.lifespan``: an async context manager function (or an async generator function
        that yields once) run once per scheduler or worker process around its life; what it
        yields is ``ctx.state`` in every task (docs/how-to/resources-per-worker.md)."""
        self._lifespan.set(fn, self._name)
        return fn

    def lifespan_context(self) -> AbstractAsyncContextManager[Any]:
        """Enter the app's lifespan (a no-op without one), yielding the state: what every
        runner of the app's tasks enters around its life (nested entries share one)."""
        return self._lifespan.running()

    @property
    def state(self) -> Any:
        """What the running lifespan yielded (None when none runs)."""
        return self._lifespan.state

    def add_call_hook(self, hook: CallHook) -> None:
        """Run every task function of this app inside ``hook``'s contexts (a framework's app
        context, connection hygiene): see :class:`cronoq.tasks.lifespan.CallHook`."""
        if not callable(getattr(hook, "sync_context", None)) or not callable(
            getattr(hook, "async_context", None)
        ):
            raise ValueError(f"a call hook has sync_context() and async_context() (got {hook!r})")
        self._hooks = (*self._hooks, hook)

    @property
    def call_hooks(self) -> tuple[CallHook, ...]:
        return self._hooks

    # ------------------------------------------------------------------ running

    def pool(self, name: str, **options: Any) -> Pool:
        """A :class:`~cronoq.Pool` that runs this app's tasks (``Pool`` options as usual)."""
        return Pool(name, self._executor, **options)

    def make_pools(self, pools: Iterable[str | Pool] | None = None) -> list[Pool]:
        """Pools for a scheduler of this app: names become ``app.pool(name)``, ``Pool`` objects
        are kept as given. ``None``: one pool per pool named by a task, plus ``"default"``
        when a task names none."""
        if pools is None:
            names = {t.pool for t in self._tasks.values()}
            ordered = (["default"] if None in names or not names else []) + sorted(n for n in names if n)
            return [self.pool(n) for n in ordered]
        if isinstance(pools, (str, Pool)):
            pools = [pools]
        out = []
        for p in pools:
            if isinstance(p, str):
                out.append(self.pool(p))
            elif isinstance(p, Pool):
                out.append(p)
            else:
                raise ValueError(f"pools must be pool names or Pool objects (got {p!r})")
        return out

    def scheduler(self, pools: Iterable[str | Pool] | None = None, **options: Any) -> AppScheduler:
        """An in-process :class:`~cronoq.Scheduler` (``async with``) whose pools run this app's
        tasks, dispatched by name; while it runs, the app's calls go to it. ``options`` are the
        Scheduler's (``store``, ``resources``, ``emit_transitions``, ``clock``, ...)."""
        return AppScheduler(self, self.make_pools(pools), **options)

    def handler(self) -> LeaseHandler:
        """The handler of a remote :class:`cronoq.client.Worker` serving this app's tasks."""
        return LeaseHandler(self._by_kind, self._lifespan)

    def worker(self, target: str | Sequence[str], pool: str, **options: Any) -> Worker:
        """A remote :class:`cronoq.client.Worker` serving ``pool`` with this app's tasks."""
        from cronoq.client import Worker

        return Worker(target, pool, self.handler(), **options)

    # ------------------------------------------------------------------ targets

    def bind(self, target: Client | BlockingClient | Scheduler | None) -> None:
        """Send this app's calls to a server (a :class:`cronoq.client.Client`, or a
        :class:`cronoq.client.BlockingClient` for ``t.submit_sync`` from any thread) or to a
        running :class:`~cronoq.Scheduler` whose pools serve the app; ``None`` unbinds. A
        running ``app.scheduler(...)`` still takes precedence while it runs."""
        if target is None:
            self._bound = None
        elif isinstance(target, Scheduler):
            self._bound = SchedulerTarget(target)
        elif callable(bind_target := getattr(target, "bind_target", None)):  # a BlockingClient
            self._bound = bind_target()
        elif callable(getattr(target, "submit", None)) and callable(getattr(target, "wait", None)):
            self._bound = ClientTarget(target)  # type: ignore[arg-type]
        else:
            raise ValueError(f"bind takes a cronoq.client.Client or a Scheduler (got {target!r})")

    def attach(self, target: Target) -> None:
        """Make ``target`` the current one until :meth:`detach` (what AppScheduler does)."""
        self._stack.append(target)

    def detach(self, target: Target) -> None:
        if target in self._stack:
            self._stack.remove(target)

    def target(self) -> Target:
        """Where calls go now; SchedulerError saying what to do when nowhere."""
        if self._stack:
            return self._stack[-1]
        if self._bound is not None:
            return self._bound
        raise SchedulerError(_NOT_BOUND.format(name=self._name))

    async def submit_batch(self, tasks: Iterable[NamedTask]) -> list[TaskHandle[Any]]:
        """Submit ``t.spec(...)`` calls atomically (all or none) to the current target."""
        batch = list(tasks)
        for t in batch:
            if not isinstance(t, NamedTask):
                raise ValueError(f"app.submit_batch takes t.spec(...) calls (got {t!r})")
        members = {id(t) for t in batch}
        for t in batch:  # placeholders become edges: to members, to earlier tasks
            if t.holes:
                resolve_edges(t, members)
        handles = await self.target().submit_batch(batch)
        for t, h in zip(batch, handles):
            t.submitted_id = int(h.id)
        return handles

    async def apply_recurring(self, client: Client) -> list[str]:
        """Create (or replace, so applying again changes nothing) every recurring schedule of
        this app on a server; returns their names."""
        for schedule in self._recurring.values():
            await schedule.apply_to_client(client)
        return list(self._recurring)

    def describe(self) -> list[dict[str, Any]]:
        """One JSON-ready entry per task: name, kind, pool, signature, fields, schedules."""
        out = []
        for t in self._tasks.values():
            out.append(
                {
                    "name": t.name,
                    "kind": t.kind,
                    "pool": t.pool,
                    "async": t.is_async,
                    "run_in": t.run_in,
                    "signature": str(t.signature),
                    "fields": {k: _plain(v) for k, v in t.fields.items() if k != "kind"},
                    "recurring": [
                        {"name": r.name, "cron": r.cron, "tz": r.tz, "overlap": r.overlap}
                        for r in self._recurring.values()
                        if r.task == t.name
                    ],
                }
            )
        return out

    def __repr__(self) -> str:
        return f"App({self._name!r}, tasks={sorted(self._tasks)})"


def _plain(value: object) -> object:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)
