"""The worker protocol's versions and limits, shared by the server and the remote worker.

Version 3 is the published contract: one report or lease per stream message. Version 4 adds
``WorkerBatch`` / ``ServerBatch`` (several messages in one, handled in order) and nothing else,
so a session speaks ``min(worker's, server's)``: a version-3 worker (the published one) never
receives a batch, and a version-4 worker never sends one to a version-3 server. Version 5 adds
``ProgressReport`` (``WorkerMessage.progress``, also inside a ``WorkerBatch``): a worker sends
it only in a session of version 5 or more, so older servers never see it.

Flushing (both ends): messages queued while the event loop is busy go out together when it
comes round to the stream (the writer is idle), at most :data:`MAX_BATCH_ITEMS` per message and
never more than the peer's ``max_message_bytes`` less :data:`BATCH_MARGIN_BYTES`; nothing waits
on a timer, so a lone message is never delayed.
"""

from __future__ import annotations

__all__ = [
    "BATCH_MARGIN_BYTES",
    "BATCHING_VERSION",
    "MAX_BATCH_ITEMS",
    "MIN_VERSION",
    "PROGRESS_VERSION",
    "PROTOCOL_VERSION",
    "session_version",
]

#: The highest worker protocol version this package speaks (server and worker alike).
PROTOCOL_VERSION = 5

#: The version that introduced batches.
BATCHING_VERSION = 4

#: The version that introduced progress reports.
PROGRESS_VERSION = 5

#: What a Register without a version (0) is taken to speak.
MIN_VERSION = 3

#: Messages packed into one batch at most.
MAX_BATCH_ITEMS = 64

#: Bytes kept free in a batch for framing and the fields that are not counted.
BATCH_MARGIN_BYTES = 1024


def session_version(requested: int) -> int:
    """The version a session speaks when the worker asked for ``requested`` (0 = unknown: 3)."""
    if requested <= 0:
        return MIN_VERSION
    return min(requested, PROTOCOL_VERSION)
