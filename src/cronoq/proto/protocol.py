"""The worker protocol's versions and limits, shared by the server and the remote worker.

Version 3 is the published contract: one report or lease per stream message. Version 4 adds
``WorkerBatch`` / ``ServerBatch`` (several messages in one, handled in order) and nothing else,
so a session speaks ``min(worker's, server's)``: a version-3 worker (the published one) never
receives a batch, and a version-4 worker never sends one to a version-3 server. Version 5 adds
``ProgressReport`` (``WorkerMessage.progress``, also inside a ``WorkerBatch``): a worker sends
it only in a session of version 5 or more, so older servers never see it. Version 6 adds
``Lease.parents`` (how each parent of the task ended, docs/concepts/dependencies.md#outputs-on-edges):
the server fills it only in a session of version 6 or more. Version 7 adds the durable calls
(docs/how-to/durable.md#remote-workers): ``WorkerMessage.durable`` (``DurableCall``, also inside
a ``WorkerBatch``) answered by ``ServerMessage.durable`` (``DurableReply``), and ``Lease.resumes``;
a worker sends a durable call only in a session of version 7 or more (an older session refuses
the call in the task), and a version-6 session that sends one breaks the protocol.

Flushing (both ends): messages queued while the event loop is busy go out together when it
comes round to the stream (the writer is idle), at most :data:`MAX_BATCH_ITEMS` per message and
never more than the peer's ``max_message_bytes`` less :data:`BATCH_MARGIN_BYTES`. Under a trickle
the queue is empty each time, so a writer whose previous flush ended less than
:data:`FLUSH_BUSY_S` ago lingers for company (or until a full batch, or its byte budget, is
queued; :mod:`cronoq.proto.flush`) before it writes, when more can follow (a free slot; other
leases running): the server's leases up to :data:`LEASE_LINGER_S`, the worker's reports up to
:data:`FLUSH_LINGER_S`. A lone message on an idle stream and a burst are never delayed, and a
message in a trickle by at most those bounds. Version-3 sessions never linger.
"""

from __future__ import annotations

__all__ = [
    "BATCH_MARGIN_BYTES",
    "BATCHING_VERSION",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DURABLE_VERSION",
    "FLUSH_BUSY_S",
    "FLUSH_LINGER_S",
    "LEASE_LINGER_S",
    "MAX_BATCH_ITEMS",
    "MESSAGE_OVERHEAD",
    "MIN_VERSION",
    "PARENTS_VERSION",
    "PROGRESS_VERSION",
    "PROTOCOL_VERSION",
    "session_version",
]

#: The highest worker protocol version this package speaks (server and worker alike).
PROTOCOL_VERSION = 7

#: The version that introduced batches.
BATCHING_VERSION = 4

#: The version that introduced progress reports.
PROGRESS_VERSION = 5

#: The version that introduced ``Lease.parents``.
PARENTS_VERSION = 6

#: The version that introduced durable calls (``DurableCall`` / ``DurableReply``).
DURABLE_VERSION = 7

#: What a Register without a version (0) is taken to speak.
MIN_VERSION = 3

#: Messages packed into one batch at most.
MAX_BATCH_ITEMS = 64

#: The longest a version-4 worker waits for more reports before it flushes (seconds).
FLUSH_LINGER_S = 0.002

#: The longest the server waits for more leases before it flushes (seconds). Longer than the
#: reports' bound: a worker's reports follow its lease batches, so a lease batch twice as large
#: halves the messages both ways (in one run of bench/server.py's per-task shape, 4 ms instead
#: of 2 took 7 % off the server's CPU per task and 40 % off the worker's), while a submit in a
#: trickle slower than one per FLUSH_BUSY_S never waits (dispatch p99 unchanged at ~2 ms).
LEASE_LINGER_S = 0.004

#: A writer lingers only when its previous flush ended less than this long ago (seconds): items
#: come faster than one per bound, so more are likely; a lone one on an idle stream goes at once.
FLUSH_BUSY_S = 0.002

#: Bytes kept free in a batch for framing and the fields that are not counted.
BATCH_MARGIN_BYTES = 1024

#: The largest gRPC message either end sends when the peer did not say (the server's default
#: ``max_message_bytes``, and what a worker assumes of a server whose Register left it 0).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

#: Room a ``Lease`` needs beyond the task's payload, content type, kind, key and tags (ids,
#: attempt, times, pool, framing), and a ``Complete`` (and the server's answers carrying the
#: output) beyond the output: the server refuses a submit, and a worker fails an attempt
#: permanently, that would not fit in ``max_message_bytes`` less this.
MESSAGE_OVERHEAD = 1024


def session_version(requested: int) -> int:
    """The version a session speaks when the worker asked for ``requested`` (0 = unknown: 3)."""
    if requested <= 0:
        return MIN_VERSION
    return min(requested, PROTOCOL_VERSION)


#: How a live server that does not lead begins its UNAVAILABLE message (a standby, one shutting
#: down or not yet serving): the request certainly did not run there, and a leader may come soon.
#: The client rides through a failover while it meets these; a shard forwards to the next address.
NOT_LEADING_MESSAGES = ("this server is a standby", "server is shutting down", "server is not serving")
