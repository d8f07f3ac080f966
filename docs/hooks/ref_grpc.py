"""The gRPC reference tables, read from the compiled descriptors of ``cronoq.v1``.

:func:`services` lists every method of every service with its request and response messages
and whether each side streams; :func:`worker_messages` lists the variants of the worker
stream's ``WorkerMessage`` and ``ServerMessage`` with their fields. Both come from
``cronoq.proto.cronoq.v1.cronoq_pb2.DESCRIPTOR`` (generated from ``cronoq.proto``, whose
freshness ``tests/proto`` checks), so a method or field added to the contract appears here at
the next build. :func:`proto_text` is the ``.proto`` file itself, published as
``reference/cronoq.proto``.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

_TYPES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
}


def _descriptor() -> Any:
    from cronoq.proto.cronoq.v1 import cronoq_pb2

    return cronoq_pb2.DESCRIPTOR


def proto_text() -> str:
    return (
        resources.files("cronoq.proto").joinpath("cronoq", "v1", "cronoq.proto").read_text(encoding="utf-8")
    )


def _type(fd: Any) -> str:
    if fd.message_type is not None:
        mt = fd.message_type
        if mt.GetOptions().map_entry:
            return f"map<{_type(mt.fields_by_name['key'])}, {_type(mt.fields_by_name['value'])}>"
        return mt.name
    if fd.enum_type is not None:
        return fd.enum_type.name
    return _TYPES.get(fd.type, str(fd.type))


def _synthetic_or_no_oneof(fd: Any) -> bool:
    """Not in a real oneof (proto3 ``optional`` fields sit in a synthetic ``_name`` oneof)."""
    return fd.containing_oneof is None or fd.containing_oneof.name.startswith("_")


def _field(fd: Any) -> str:
    t = _type(fd)
    if fd.is_repeated and not (fd.message_type is not None and fd.message_type.GetOptions().map_entry):
        t = f"repeated {t}"
    elif fd.has_presence and fd.message_type is None and _synthetic_or_no_oneof(fd):
        t = f"optional {t}"
    return f"`{fd.name}` ({t.replace('<', '&lt;')})"


def services() -> str:
    lines: list[str] = []
    for svc in _descriptor().services_by_name.values():
        lines += [f"#### `{svc.full_name}` {{#service-{svc.name.lower()}}}", ""]
        lines += ["| method | request | response |", "|---|---|---|"]
        for m in svc.methods:
            req = ("stream " if m.client_streaming else "") + f"`{m.input_type.name}`"
            resp = ("stream " if m.server_streaming else "") + f"`{m.output_type.name}`"
            lines.append(f"| `{m.name}` | {req} | {resp} |")
        lines.append("")
    return "\n".join(lines)


def worker_messages() -> str:
    desc = _descriptor()
    lines: list[str] = []
    for outer, direction in (("WorkerMessage", "worker → server"), ("ServerMessage", "server → worker")):
        msg = desc.message_types_by_name[outer]
        lines += [f"#### `{outer}` ({direction}) {{#{outer.lower()}}}", ""]
        lines += ["| variant | fields |", "|---|---|"]
        for fd in msg.oneofs_by_name["msg"].fields:
            fields = ", ".join(_field(f) for f in fd.message_type.fields) or "-"
            lines.append(f"| `{fd.message_type.name}` | {fields} |")
        lines.append("")
    return "\n".join(lines)
