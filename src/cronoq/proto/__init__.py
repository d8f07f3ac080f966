"""Wire contract of the cronoq server: ``cronoq/v1/cronoq.proto`` and its generated stubs.

Importing this package is cheap; the stubs (which need grpcio/protobuf, the ``client`` or
``server`` extra) load from :mod:`cronoq.proto.cronoq.v1` only when imported. The worker
protocol's versions and limits live in :mod:`cronoq.proto.protocol`.
"""
