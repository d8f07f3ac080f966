"""The cronoq error family (docs/reference/behaviour.md#types).

Every error is a plain exception class that round-trips through pickle with its attributes
(``__reduce__`` passes the constructor arguments back), so errors can cross process
boundaries (thread pools, multiprocessing, the server) unchanged.  ``str(err)`` is the
message, except for :class:`TaskFailed` whose string names the task and its status.
:func:`outcome_of` is the one rule turning an executor's exception into the failure it
reports (in-process scheduler and remote worker alike).
"""

from __future__ import annotations

from types import FrameType
from typing import Any, NamedTuple

from cronoq.seconds import valid_seconds

__all__ = [
    "CronoqError",
    "SubmitError",
    "InvalidSubmission",
    "ArgumentTypeError",
    "SchedulerError",
    "NotStartedError",
    "ConfigurationError",
    "Fenced",
    "TaskFailed",
    "ReplayError",
    "REPLAY_ERROR_CODES",
    "EventsLagged",
    "Retryable",
    "Permanent",
    "SUBMIT_ERROR_CODES",
    "Outcome",
    "outcome_of",
]

#: Every code a :class:`SubmitError` may carry (docs/reference/behaviour.md#types).
SUBMIT_ERROR_CODES = frozenset(
    {
        "unknown_pool",
        "unknown_resource",
        "resource_exceeds_capacity",
        "reservation_conflict",
        "cycle",
        "unknown_dependency",
        "full",
        "overloaded",
        "duplicate_key_in_batch",
        "invalid",
    }
)


class CronoqError(Exception):
    """Base class of every error cronoq raises on purpose."""


class SubmitError(CronoqError):
    """A submission was rejected; ``code`` is one of :data:`SUBMIT_ERROR_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"SubmitError({self.code!r}, {self.message!r})"


class ArgumentTypeError(ValueError, TypeError):
    """An argument of the wrong type: a ValueError (every bad input is one) that is also
    a TypeError, as the published implementation raises for these (``except`` either works)."""


class InvalidSubmission(SubmitError, ValueError):
    """A task field is invalid: a SubmitError with code ``invalid`` that is also a ValueError."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid", message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))

    def __repr__(self) -> str:
        return f"InvalidSubmission({self.message!r})"


class SchedulerError(CronoqError):
    """The scheduler cannot do what was asked (configuration, lifecycle, store)."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))

    def __str__(self) -> str:
        return self.message


NOT_STARTED_MESSAGE = "scheduler not started; call `await scheduler.start()` first"


class NotStartedError(SchedulerError, RuntimeError):
    """A call was made before ``start()`` or after ``shutdown()``."""

    def __init__(self, message: str = NOT_STARTED_MESSAGE) -> None:
        super().__init__(message)


class ConfigurationError(SchedulerError):
    """A schedule's cron, time zone or pool is invalid (``add_recurring``): the message starts
    ``configuration error:``; ``code`` is the submit error code behind it (``unknown_pool``),
    if one was."""

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.code))


class Fenced(SchedulerError):
    """A durable write was refused because another instance took over leadership."""


class TaskFailed(CronoqError):
    """A task ended without an output (any terminal status but ``succeeded``)."""

    def __init__(self, status: str, message: str, task_id: int | None = None) -> None:
        super().__init__(status, message, task_id)
        self.status = status
        self.message = message
        self.task_id = task_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.message, self.task_id))

    def __str__(self) -> str:
        return f"task {self.task_id} ended as {self.status}: {self.message}"

    def __repr__(self) -> str:
        return f"TaskFailed({self.status!r}, {self.message!r}, {self.task_id!r})"


#: Every code a :class:`ReplayError` may carry (docs/how-to/operations.md#replay).
REPLAY_ERROR_CODES = frozenset({"unknown_task", "not_finished", "succeeded", "payload_unavailable"})


class ReplayError(CronoqError):
    """A replay was refused; ``code`` is one of :data:`REPLAY_ERROR_CODES`: ``unknown_task``
    (unknown, no longer retained, or another tenant's), ``not_finished``, ``succeeded`` (pass
    ``force=True`` to replay it anyway) or ``payload_unavailable`` (its payload is no longer
    held, e.g. a task finished before a restart)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))


class EventsLagged(CronoqError):
    """An event subscriber fell behind; ``skipped`` events were dropped."""

    def __init__(self, skipped: int) -> None:
        super().__init__(f"event stream fell behind; {skipped} events were dropped")
        self.skipped = skipped

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.skipped,))


class Retryable(CronoqError):
    """Raised by an executor: this attempt failed, try again (optionally after ``retry_after`` s).

    ``retry_after`` is used as is (docs/reference/behaviour.md#reliability) when it is a finite number >= 0;
    any other value is ignored and the retry policy's backoff applies (never an error raised from an error
    path).
    """

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.retry_after))

    def __str__(self) -> str:
        return self.message


class Permanent(CronoqError):
    """Raised by an executor: this task cannot succeed; it ends ``failed`` without retries."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))

    def __str__(self) -> str:
        return self.message


class Outcome(NamedTuple):
    """How a failed attempt is reported: its message, whether it is permanent, and the delay
    (seconds) before the retry that the executor asked for (None: the retry policy's)."""

    message: str
    permanent: bool = False
    retry_after: float | None = None


def outcome_of(exc: BaseException) -> Outcome:
    """The failure an executor's exception reports (docs/reference/behaviour.md#reliability).

    :class:`Permanent` ends the task ``failed`` with its message; :class:`Retryable` is
    retried, after its ``retry_after`` when that is a valid duration; anything else (an
    ``asyncio.CancelledError`` the executor raised itself included) is retried with the
    message ``"<Type>: <str(exc)>"``.
    """
    if isinstance(exc, Permanent):
        return Outcome(exc.message, permanent=True)
    if isinstance(exc, Retryable):
        return Outcome(exc.message, retry_after=valid_seconds(exc.retry_after))
    return Outcome(f"{type(exc).__name__}: {exc}")


def closing(frame: FrameType | None) -> bool:
    """Whether the coroutine of ``frame`` (an attempt runner's, inside ``except
    GeneratorExit``) is being closed — its task destroyed, its loop gone — rather than run by
    its task: that ``GeneratorExit`` unwinds it and reports nothing, while one the executor
    raised itself fails the attempt like any exception (docs/reference/behaviour.md#reliability).
    """
    import asyncio  # (here only: the engine imports this module and stays free of asyncio)

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop running: closed by the garbage collector or at exit
        return True
    return task is None or getattr(task.get_coro(), "cr_frame", None) is not frame
