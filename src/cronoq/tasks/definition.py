"""``TaskDefinition``: a named task function and the ways to call it.

Theory of operation
-------------------
``@app.task`` wraps a function in a :class:`TaskDefinition`, generic in the function's
parameters ``P`` and return type ``R`` (``ParamSpec``), so a type checker checks
``t.submit(...)``'s arguments and knows that ``await handle`` gives an ``R``.

A call (``submit`` / ``enqueue`` / ``spec``) binds its arguments (:class:`~cronoq.tasks.binding.
Binding`: errors before anything is sent), then hands the JSON payload and the task fields to
the app's current target (an in-process scheduler or a server). ``options(**fields)`` returns a
:class:`TaskCall`: the same three calls with per-call fields on top of the definition's, so a
task argument may itself be called ``key`` or ``priority``. A per-call field replaces the
definition's, except the maps ``resources``, ``tags`` and ``labels``, which merge into it
(the call wins per key): ``.options(resources={"db": 1})`` keeps the task's rate limit.

On the worker side, :meth:`TaskDefinition.invoke` decodes a payload, calls the function (an
``async def`` on the loop, a plain ``def`` in the loop's default thread pool, as executors
run; with ``run_in="process"`` in a child process, :mod:`cronoq.runtime.processes`, the
arguments and result pickled) and returns the JSON form of the result.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from cronoq.errors import InvalidSubmission
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.processes import CTX_NONE, CTX_TASK, FnRef, run_in_process
from cronoq.spec.validate import parse_deps
from cronoq.tasks.binding import Binding, Payload
from cronoq.tasks.fields import CALL_FIELDS, check_fields
from cronoq.tasks.lifespan import async_hooks, call_in_hooks
from cronoq.tasks.placeholders import edges_for, encode_call, has_placeholder
from cronoq.tasks.sync_calls import BlockingTaskHandle, run_on_target
from cronoq.tasks.targets import NamedTask

if TYPE_CHECKING:
    from cronoq.tasks.app import App

__all__ = ["MAP_FIELDS", "TaskCall", "TaskDefinition"]

#: the fields whose per-call value merges into the definition's (docs/getting-started/tasks.md)
MAP_FIELDS = ("resources", "tags", "labels")

P = ParamSpec("P")
R = TypeVar("R")


class TaskCall(Generic[P, R]):
    """A task with per-call fields (what ``t.options(...)`` returns): ``submit``, ``enqueue``,
    their blocking forms ``submit_sync`` / ``enqueue_sync``, ``spec`` and ``options`` as on the
    definition."""

    __slots__ = ("_defn", "_fields")

    def __init__(self, definition: TaskDefinition[P, R], fields: dict[str, Any]) -> None:
        self._defn = definition
        self._fields = fields

    @property
    def fields(self) -> dict[str, Any]:
        """The task fields every call of this carries (``kind`` included)."""
        return dict(self._fields)

    @property
    def app(self) -> App:
        """The :class:`cronoq.App` the task belongs to (``app.target()``: where calls go now)."""
        return self._defn._app

    # submit/enqueue are plain functions returning the target's coroutine (one frame less per
    # call than an `async def` awaiting it); arguments and the target are checked when called

    def submit(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, TaskHandle[R]]:
        """Submit one call (``await t.submit(...)``); the handle resolves with the function's
        return value. Bad arguments raise ``SubmitError("invalid")`` before anything is sent."""
        d = self._defn
        target = d._app.target()
        try:
            return target.submit(d._binding, d._binding.encode(args, kwargs), self._fields)
        except (InvalidSubmission, TypeError):
            payload, fields = self._with_holes(args, kwargs)
            return target.submit(d._binding, payload, fields)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, int]:
        """Submit one call without a handle (``await t.enqueue(...)``, cheaper): the task id."""
        d = self._defn
        target = d._app.target()
        try:
            return target.enqueue(d._binding.encode(args, kwargs), self._fields)
        except (InvalidSubmission, TypeError):
            payload, fields = self._with_holes(args, kwargs)
            return target.enqueue(payload, fields)

    def _with_holes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Payload, dict[str, Any]]:
        """A single call holding placeholders (else the encoding error again): its payload and
        its fields with the placeholders' edges (their parents must exist already)."""
        if not any(map(has_placeholder, (*args, *kwargs.values()))):
            raise
        f = self._fields
        n = len(parse_deps(f.get("after"), f.get("deps")) or ())
        payload, holes = encode_call(self._defn._binding, args, kwargs, n)
        return payload, {**f, "deps": [*(f.get("deps") or ()), *edges_for(holes)]}

    def submit_sync(self, *args: P.args, **kwargs: P.kwargs) -> BlockingTaskHandle[R]:
        """The blocking form of :meth:`submit`, for code without asyncio (any thread): the
        handle's ``.result(timeout)`` blocks for the return value (:mod:`cronoq.tasks.sync_calls`)."""
        target = self._defn._app.target()
        handle = run_on_target(target, self.submit(*args, **kwargs), "t.submit_sync()")
        return BlockingTaskHandle(handle, target)

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> int:
        """The blocking form of :meth:`enqueue` (any thread): the task id."""
        target = self._defn._app.target()
        return run_on_target(target, self.enqueue(*args, **kwargs), "t.enqueue_sync()")

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> NamedTask[R]:
        """The call as a :class:`cronoq.Task` for ``submit_batch`` (validated now); its
        ``.output`` is a placeholder for the return value, to pass to another call."""
        d = self._defn
        if not any(map(has_placeholder, (*args, *kwargs.values()))):
            return NamedTask(d._binding.encode(args, kwargs), d._binding, self._fields)
        f = self._fields
        n = len(parse_deps(f.get("after"), f.get("deps")) or ())
        payload, holes = encode_call(d._binding, args, kwargs, n)
        return NamedTask(payload, d._binding, f, holes)

    def options(self, **fields: Any) -> TaskCall[P, R]:
        """A copy with per-call task fields (``key``, ``priority``, ``start_in``, ``after``, ...)."""
        extra = check_fields(fields, CALL_FIELDS, f"task '{self._defn.name}'")
        merged = dict(self._fields)
        for prefix in ("deadline", "start"):  # a per-call instant replaces the other form
            if f"{prefix}_in" in extra or f"{prefix}_at" in extra:
                merged.pop(f"{prefix}_in", None)
                merged.pop(f"{prefix}_at", None)
        for name in MAP_FIELDS:  # per-call maps merge into the definition's: the call wins per key
            if name in extra and isinstance(merged.get(name), Mapping) and isinstance(extra[name], Mapping):
                extra[name] = {**merged[name], **extra[name]}
        merged.update(extra)
        return TaskCall(self._defn, merged)

    def __repr__(self) -> str:
        return f"<TaskCall {self._defn.name!r} {self._fields!r}>"


class TaskDefinition(TaskCall[P, R]):
    """A named task of an :class:`~cronoq.App` (see the module docstring).

    ``t(*args, **kwargs)`` calls the plain function; ``t.name``, ``t.fn``, ``t.fields`` and
    ``t.signature`` describe it.
    """

    __slots__ = ("_app", "_binding", "_ref", "fn", "is_async", "name", "run_in")

    def __init__(
        self, app: App, fn: Callable[..., Any], name: str, fields: dict[str, Any], run_in: str | None = None
    ) -> None:
        self._app = app
        self.fn = fn
        self.name = name
        self.is_async = inspect.iscoroutinefunction(fn)
        #: where the function runs: "loop" (async def), "thread" (plain def) or "process"
        self.run_in: str = run_in or ("loop" if self.is_async else "thread")
        # how a child process finds the function (its module attribute is this definition)
        self._ref = FnRef(fn.__module__, fn.__qualname__, fn, app) if self.run_in == "process" else None
        self._binding = Binding(fn, name)
        super().__init__(self, fields)

    @property
    def kind(self) -> str:
        """The kind its tasks carry (the name unless set at decoration): what workers dispatch by."""
        kind: str = self._fields["kind"]
        return kind

    @property
    def pool(self) -> str | None:
        """The pool its calls go to by default (None: the scheduler's default pool)."""
        return self._fields.get("pool")

    @property
    def takes_context(self) -> bool:
        """True when the first parameter receives the :class:`~cronoq.TaskContext`."""
        return self._binding.takes_context

    @property
    def signature(self) -> inspect.Signature:
        """The arguments of the task (without the TaskContext parameter)."""
        return self._binding.signature

    @property
    def binding(self) -> Binding:
        return self._binding

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the plain function (no scheduling)."""
        return self.fn(*args, **kwargs)

    async def invoke(self, ctx: Any, payload: object) -> object:
        """Run one attempt: decode ``payload``, call the function, return the JSON result.

        Bad arguments raise :class:`~cronoq.Permanent`.
        """
        args, kwargs = self._binding.decode(payload)
        if self._ref is not None:  # run_in="process": the context is made in the child
            kind = CTX_TASK if self._binding.takes_context else CTX_NONE
            result = await run_in_process(ctx, self._ref, tuple(args), kwargs, kind)
            return self._binding.result_to_wire(result)
        if self._binding.takes_context:
            args.insert(0, ctx)
        hooks = self._app.call_hooks
        if self.is_async:
            if hooks:
                async with async_hooks(hooks):
                    result = await self.fn(*args, **kwargs)
            else:
                result = await self.fn(*args, **kwargs)
        else:
            loop = asyncio.get_running_loop()
            call = (
                partial(call_in_hooks, hooks, self.fn, *args, **kwargs)
                if hooks
                else partial(self.fn, *args, **kwargs)
            )
            result = await loop.run_in_executor(None, call)
            if inspect.isawaitable(result):
                result = await result
        return self._binding.result_to_wire(result)

    def __repr__(self) -> str:
        return f"<TaskDefinition {self.name!r} of app {self._app.name!r}>"
