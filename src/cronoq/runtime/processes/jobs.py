"""What crosses the pipe between a worker and its process children, and what it means.

Theory of operation
-------------------
Everything on the pipe is a tuple of plain, picklable values (a ``multiprocessing.Connection``
pickles them), never a live object such as a manager proxy:

* parent → child: ``("run", job_id, fn_id, fn_bytes | None, ctx_kind, info, args_bytes)``
  (``fn_bytes`` only the first time that child sees ``fn_id``; ``args_bytes`` is the pickled
  ``(args, kwargs)``), ``("cancel", job_id)`` and ``("stop",)``;
* child → parent: ``("progress", job_id, done, total, message)``, ``("heartbeat", job_id)``
  and ``("done", job_id, ok, value, rss)``: ``ok`` with ``value`` the pickled result, else
  ``value`` a :data:`Failure`; ``rss`` the child's resident set size in bytes after the job.

A failure carries the pickled exception when it pickles (so ``Permanent``, ``Retryable`` and a
remote worker's ``Reject`` keep their type and meaning) plus a fallback used when it does not
unpickle in the parent: ``(exc_bytes | None, permanent, message, retry_after)``.
:func:`failure_of` builds one in the child, :func:`raise_failure` turns it back into the
exception the scheduler or worker reports (docs/reference/behaviour.md#reliability).

A function is sent by pickle (by reference: module and qualified name). A named task's function
is sent as a :class:`FnRef`, because its module attribute is the
:class:`~cronoq.tasks.TaskDefinition` that wraps it, not the function itself; the definition
also names the task's app, whose lifespan and call hooks the child applies (:mod:`.lifespans`).
"""

from __future__ import annotations

import importlib
import pickle
from typing import Any

from cronoq.errors import Permanent, Retryable

__all__ = ["Failure", "FnRef", "failure_of", "raise_failure"]

#: (pickled exception or None, permanent, message, retry_after)
Failure = tuple[bytes | None, bool, str, float | None]

#: ``ctx_kind`` values: what the function gets first (nothing, a task context, a worker lease)
CTX_NONE, CTX_TASK, CTX_LEASE = 0, 1, 2


class FnRef:
    """A module-level function named by ``module`` and ``qualname``, resolved in the child; a
    :class:`~cronoq.tasks.TaskDefinition` found there stands for the function it wraps."""

    __slots__ = ("local", "module", "owner", "qualname")

    def __init__(self, module: str, qualname: str, local: Any = None, owner: Any = None) -> None:
        self.module = module
        self.qualname = qualname
        #: the function itself, in this process (never pickled): what the test kit's threads run
        self.local = local
        #: its app, in this process (never pickled): whose call hooks the test kit's threads run
        self.owner = owner

    def __reduce__(self) -> tuple[Any, ...]:
        return (FnRef, (self.module, self.qualname))

    def resolve(self) -> Any:
        return self.target()[0]

    def target(self) -> tuple[Any, Any]:
        """``(function, owner)``: the owner is the :class:`~cronoq.App` of a named task (whose
        lifespan and call hooks a child applies, :mod:`.lifespans`), else None."""
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        fn = getattr(obj, "fn", None)
        if callable(fn) and hasattr(obj, "binding"):
            return fn, getattr(obj, "app", None)
        return obj, None

    def __repr__(self) -> str:
        return f"FnRef({self.module}:{self.qualname})"


def failure_of(exc: BaseException) -> Failure:
    """The failure the child reports for ``exc`` (see the module docstring)."""
    data: bytes | None = None
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)  # an exception whose class cannot be rebuilt falls back below
        data = pickled
    except Exception:
        pass
    if isinstance(exc, Permanent):
        return (data, True, exc.message, None)
    if isinstance(exc, Retryable):
        ra = exc.retry_after
        return (data, False, exc.message, ra if isinstance(ra, (int, float)) else None)
    return (data, False, f"{type(exc).__name__}: {exc}", None)


def raise_failure(failure: Failure) -> None:
    """Raise what the child's job raised (or the fallback when it does not unpickle here)."""
    data, permanent, message, retry_after = failure
    exc: BaseException | None = None
    if data is not None:
        try:
            exc = pickle.loads(data)
        except Exception:
            exc = None
    if isinstance(exc, Exception):
        raise exc
    if permanent:
        raise Permanent(message)
    raise Retryable(message, retry_after)


def pickling_error(what: str, exc: BaseException) -> Permanent:
    """The permanent failure for something that does not cross the pipe: ``"<what>: <Type>:
    <message>"`` (retrying cannot make it picklable)."""
    return Permanent(f"{what}: {type(exc).__name__}: {exc}")
