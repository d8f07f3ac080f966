"""A task's payload read back for ``Get`` with ``include_payload`` (``TaskInfo.payload``).

Theory of operation
-------------------
The engine holds a task's payload (a :class:`~cronoq.server.workers.Blob`) while the task is
live; once it ended the engine drops it, and a durable store keeps it in the task's row for as
long as that row is kept (``store.keep_finished_s``).  So the payload is the engine's when it
still holds one, else the store's (``load_payload``, decoded by the server's
:class:`~cronoq.server.app.BlobCodec`), else unavailable (an in-memory server after the task
ended, or a row pruned since): ``TaskInfo.payload`` then stays unset.

Reading the store is a plain read (no commit, no epoch): a standby never gets here (``Get``
asks for the leader first).  A store that fails to answer is a failed read (UNAVAILABLE,
retryable, "the store could not be read": ``app.store_read_failure``), like any other read of
the history.

Who uses it: the Django ``django.tasks`` backend's ``get_result`` (its ``TaskResult.args`` /
``kwargs``), and anyone who wants to see what a task was given.
"""

from __future__ import annotations

from cronoq.errors import SchedulerError
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.app import ApiError, BlobCodec, ServerApp, store_read_failure
from cronoq.server.workers import Blob

__all__ = ["add_payload", "task_payload"]


async def task_payload(app: ServerApp, task_id: int, held: object) -> Blob | None:
    """Task ``task_id``'s payload: ``held`` (the engine's) when it is one, else the store's."""
    if isinstance(held, Blob):
        return held
    store = app.sched.seam.store
    load = getattr(store, "load_payload", None)
    if load is None:
        return None
    try:
        data = await load(task_id)
    except SchedulerError as e:
        raise store_read_failure(e) from None
    if data is None:
        return None
    try:
        return BlobCodec().decode(data)
    except ValueError as e:  # (a row not written by a server: say so rather than guess)
        raise ApiError("internal", f"task {task_id}: its stored payload cannot be read ({e})") from None


async def add_payload(app: ServerApp, info: pb.TaskInfo, held: object) -> None:
    """Set ``info.payload`` / ``payload_content_type`` when the payload is available."""
    blob = await task_payload(app, info.id, held)
    if blob is not None:
        info.payload = blob.data
        info.payload_content_type = blob.content_type
