"""`cronoq serve`: the gRPC + HTTP server around the scheduler (docs/reference/behaviour.md#server).

Kept free of imports: ``cronoq.server.config`` and ``cronoq.server.auth`` need only the stdlib
and ``cronoq.engine``; the listeners (grpcio, HTTP) are imported only by the modules that need
them.
"""
