"""Checks of a payload at submission, before the engine takes the task (nothing half-submitted).

Theory of operation
-------------------
Two things about a payload can be known to fail before the task exists, so they are refused at
``submit`` / ``enqueue`` / ``submit_batch`` instead of at the first attempt (and the second at
``add_recurring`` too, instead of at every occurrence):

* **the store cannot encode it** (:func:`encode_payload`): with a durable store the payload is
  encoded when the task is submitted (the bytes go into the same commit), and a payload the
  codec refuses is an ``InvalidSubmission`` (``invalid``) naming why;
* **a process pool cannot send it to its child** (:class:`ProcessPayloads`): a plain
  ``Pool(..., run_in="process")`` runs ``fn(ctx, payload)`` in a child process, which receives
  the payload pickled.  A payload that does not pickle (a lock, a socket, a lambda inside it)
  would fail every attempt, so it is refused at once with an ``InvalidSubmission`` saying the
  pool runs its tasks in a process.  Only submissions to such a pool pay for the extra
  ``pickle.dumps``; a scheduler without process pools does nothing here.

A submission whose pool is unknown is left to the engine (it raises ``unknown_pool`` after
looking at the key, so a duplicate is still a duplicate).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cronoq.errors import InvalidSubmission, SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.model import TaskOptions
    from cronoq.runtime.pool import Pool
    from cronoq.store.codec import Codec

__all__ = ["ProcessPayloads", "encode_payload"]


def encode_payload(codec: Codec | None, payload: object) -> bytes:
    """Encode a payload for the store at submission: an unencodable one is ``invalid``."""
    assert codec is not None  # (called only with a store, which always has a codec)
    try:
        data = codec.encode(payload)
    except Exception as e:
        raise InvalidSubmission(f"payload cannot be encoded: {e}") from None
    if type(data) is bytes:  # (the common case, as it is: once per durable submission)
        return data
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidSubmission("the codec did not return bytes")
    return bytes(data)


class ProcessPayloads:
    """Refuses payloads that a process pool could not send to its child (module docstring)."""

    __slots__ = ("_names",)

    def __init__(self, pools: Sequence[Pool]) -> None:
        #: pool index (configuration order, as ``TaskOptions.pool_index``) → name, process pools only
        self._names = {i: p.name for i, p in enumerate(pools) if p.run_in == "process"}

    def check(self, core: Core, opts: TaskOptions, payload: object) -> None:
        """``InvalidSubmission`` when ``opts``' pool runs in a process and ``payload`` does not
        pickle; nothing otherwise (and nothing at all without process pools)."""
        if not self._names:
            return
        try:
            index = core.resolve_pool(opts)
        except SubmitError:
            return  # (the engine says so, after the key)
        name = self._names.get(index)
        if name is None:
            return
        try:
            pickle.dumps(payload)
        except Exception as e:
            raise InvalidSubmission(
                f"pool '{name}' runs its tasks in a process and the payload cannot be pickled for it: "
                f"{type(e).__name__}: {e}"
            ) from None
