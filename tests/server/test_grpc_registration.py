"""The gRPC services are added to the server through generic handlers only (grpc_api.add_generic_only):
every method of the proto is served, none as a *registered* method (see the function's doc)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from cronoq.server import grpc_api, grpc_workers


class RecordingServer:
    def __init__(self) -> None:
        self.generic: list[Any] = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.registered.append(service)

    def handler(self, method: str) -> grpc.RpcMethodHandler | None:
        details = Details(method)
        for h in self.generic:
            found = h.service(details)
            if found is not None:
                return found  # type: ignore[no-any-return]
        return None


class Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def _methods(service: str) -> list[str]:
    desc = cronoq_pb2.DESCRIPTOR.services_by_name[service]
    return [f"/cronoq.v1.{service}/{m.name}" for m in desc.methods]


def test_every_method_is_served_by_a_generic_handler() -> None:
    server = RecordingServer()
    app: Any = object()  # the servicers only keep it
    grpc_api.register(server, app)
    grpc_workers.register(server, app)
    assert server.registered == []
    for service in ("Tasks", "Admin", "Workers"):
        for method in _methods(service):
            h = server.handler(method)
            assert h is not None, method
    work = server.handler("/cronoq.v1.Workers/Work")
    assert work is not None and work.request_streaming and work.response_streaming
    assert server.handler("/cronoq.v1.Tasks/Nope") is None


@pytest.mark.parametrize("generic_first", [True, False])
def test_stubs_that_only_register_methods_are_served_generically(generic_first: bool) -> None:
    handlers = {"Submit": grpc.unary_unary_rpc_method_handler(lambda req, ctx: None)}

    def add(servicer: Any, server: Any) -> None:  # a generated add_*_to_server of either style
        if generic_first:
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler("cronoq.v1.Tasks", handlers),)
            )
        server.add_registered_method_handlers("cronoq.v1.Tasks", handlers)

    server = RecordingServer()
    grpc_api.add_generic_only(add, object(), server)
    assert server.registered == []
    assert len(server.generic) == 1
    assert server.handler("/cronoq.v1.Tasks/Submit") is handlers["Submit"]


def test_generated_stubs_still_do_both() -> None:
    """If a regenerated stub stops adding a generic handler, add_generic_only still serves it;
    this pins what the current one does."""
    server = RecordingServer()
    add: Callable[[Any, Any], None] = pb_grpc.add_TasksServicer_to_server
    add(pb_grpc.TasksServicer(), server)
    assert server.registered == ["cronoq.v1.Tasks"] and len(server.generic) == 1
