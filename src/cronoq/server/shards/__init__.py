"""Shards: pools split between leaders (docs/how-to/shards.md).

Theory of operation
-------------------
Every server of every shard reads the same configuration; ``server.shard`` names its own.  Its
engine runs only its shard's pools and resources, and its task ids carry its shard number
(``id >> 56``).  :mod:`.topology` answers which shard owns a pool, an id or a resource;
:mod:`.peers` holds one pooled ``grpc.aio`` channel per peer shard and the forwarding rule;
:mod:`.router` is the gRPC routing layer in front of the local ``Tasks``/``Admin`` handlers
(one table, :data:`~.router.ROUTES`, maps each method to its ownership rule: owner, key
lookup on every shard, batch, per item, fan-out, merged stream); :mod:`.http_routes` puts the
HTTP routes through the same router.  Forwarded calls carry ``cronoq-forwarded`` and are never
forwarded again, so a loop is impossible.
"""

from cronoq.server.shards.topology import FORWARDED_KEY, SHARD_ENDPOINT_KEY, SHARD_KEY, Topology

__all__ = ["FORWARDED_KEY", "SHARD_ENDPOINT_KEY", "SHARD_KEY", "Topology"]
