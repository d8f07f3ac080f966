r"""Errors of the remote client and worker (docs/reference/behaviour.md#client-worker).

* :class:`ClientError` — a call failed; ``code`` is the lower-case gRPC status name
  (``not_found``, ``invalid_argument``, ``unavailable``, ...), ``message`` the server's details.
* :class:`WaitTimeout` — a wait (``Client.wait``, ``submit(wait=True)``) ran out of time; it is
  both a :class:`ClientError` (code ``deadline_exceeded``) and a built-in :class:`TimeoutError`.
* :class:`Reject` and :class:`CancelTask` — raised by a remote worker's handler to hand a lease
  back unrun (``Nack``) or to end the task ``cancelled``. Like every error cronoq raises on
  purpose, all of these are :class:`~cronoq.CronoqError`\ s.

This module imports no gRPC: :func:`from_rpc_error` only reads ``code()``/``details()``.
"""

from __future__ import annotations

from typing import Any

from cronoq.errors import CronoqError

__all__ = ["CancelTask", "ClientError", "Reject", "RETRYABLE_CODES", "WaitTimeout", "from_rpc_error"]

#: Codes for which trying again (possibly against another server) can succeed.
RETRYABLE_CODES = frozenset({"unavailable", "resource_exhausted"})


class ClientError(CronoqError):
    """A remote call failed with gRPC status ``code`` (lower-case name) and ``message``."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def retryable(self) -> bool:
        """True for ``unavailable`` and ``resource_exhausted``: the call may succeed later."""
        return self.code in RETRYABLE_CODES

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"

    @classmethod
    def from_rpc(cls, err: Any, *, wait: bool = False) -> ClientError:
        """The :class:`ClientError` for a ``grpc.RpcError`` (see :func:`from_rpc_error`)."""
        return from_rpc_error(err, wait=wait)


class WaitTimeout(ClientError, TimeoutError):
    """A wait for a task's outcome timed out (server DEADLINE_EXCEEDED or the call deadline)."""

    def __init__(self, code: str = "deadline_exceeded", message: str = "wait timed out") -> None:
        super().__init__(code, message)


def from_rpc_error(err: Any, *, wait: bool = False) -> ClientError:
    """Translate a ``grpc.RpcError`` into a :class:`ClientError` (a :class:`WaitTimeout` for
    ``deadline_exceeded`` when ``wait`` is set)."""
    try:
        status = err.code()
        code = status.name.lower() if status is not None else "unknown"
    except Exception:
        code = "unknown"
    try:
        message = err.details() or ""
    except Exception:
        message = str(err)
    if wait and code == "deadline_exceeded":
        return WaitTimeout(code, message or "wait timed out")
    return ClientError(code, message)


class Reject(CronoqError):
    """Raised by a worker handler: hand the lease back unrun (``Nack{reason}``); the server
    offers it to another worker within the same attempt."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason,))


class CancelTask(CronoqError):
    """Raised by a worker handler: end the task ``cancelled`` (``Cancelled{lease}``)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason,))
