"""Request limits checked before anything is converted, shared by the gRPC and HTTP front ends.

Theory of operation
-------------------
What a request may cost the event loop must be bounded by the configured limits, never by
what converting it would build: a 4 MiB JSON body can hold two million dependency ids, and
building a ``Dep`` (or a ``TaskRef``) for each before counting them froze the server for
seconds.  So every count and length of a task is checked on the raw request first, with
``len()`` alone: of the decoded JSON arrays and objects (HTTP, :func:`check_json_task`) or of
the protobuf repeated fields and maps (gRPC, :func:`check_spec`), both through
:func:`check_counts` and :func:`check_text`, so both front ends refuse the same requests
with the same messages, each naming the setting to raise (``too many dependencies (max 1024,
limits.max_deps)``, ``key is longer than 256 characters (limits.max_key_len)``).  Only then
is the task converted, and conversion touches at most the bounded number of items.

Limits (``[limits]``, see docs/how-to/security.md): ``max_deps`` (``deps`` and ``after``
together), ``max_tags``/``max_tag_len``, ``max_resources``, ``max_labels``/``max_label_len``,
``max_key_len``, ``max_kind_len``, ``max_tenant_len``, and ``max_tasks_per_batch`` for
batches (:func:`check_batch`).  The key of a keyed resource (``"customer:<key>"``: what
follows the first ``:`` of a ``resources`` name, :func:`check_resource_keys`) is at most
``max_label_len`` characters, as a label value: every key lives in the server's memory.
Filters (:func:`check_filter`: ``Watch`` / ``/v1/events``,
listings, bulk actions) hold at most ``max_filter_items`` items, their keys, kinds and tags
obey the task limits, and a bulk ``request_key`` is at most ``max_request_key_len``
characters: a Watch keeps its filter for its whole life and a request key is remembered, so
neither may be as large as a message.  Violations are :class:`InvalidArgument`
(INVALID_ARGUMENT / 400 ``invalid``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
    from cronoq.server.config import LimitsConfig

__all__ = [
    "InvalidArgument",
    "check_batch",
    "check_counts",
    "check_filter",
    "check_json_task",
    "check_map",
    "check_resource_keys",
    "check_spec",
    "check_text",
]


class InvalidArgument(ValueError):
    """A request field is malformed or over a limit (INVALID_ARGUMENT / 400 ``invalid``)."""


def check_batch(limits: LimitsConfig, n: int) -> None:
    if n > limits.max_tasks_per_batch:
        raise InvalidArgument(f"batch larger than limits.max_tasks_per_batch ({limits.max_tasks_per_batch})")


def check_counts(limits: LimitsConfig, *, deps: int, tags: int, resources: int, labels: int) -> None:
    """The item counts of one task (``deps`` counts ``deps`` and ``after`` together)."""
    if deps > limits.max_deps:
        raise InvalidArgument(f"too many dependencies (max {limits.max_deps}, limits.max_deps)")
    if resources > limits.max_resources:
        raise InvalidArgument(f"too many resources (max {limits.max_resources}, limits.max_resources)")
    if tags > limits.max_tags:
        raise InvalidArgument(f"too many tags (max {limits.max_tags}, limits.max_tags)")
    if labels > limits.max_labels:
        raise InvalidArgument(f"too many labels (max {limits.max_labels}, limits.max_labels)")


def check_text(name: str, value: object, limit: int, setting: str) -> None:
    """A string field no longer than ``limit`` characters, the ``[limits]`` key ``setting``
    (non-strings are left to conversion)."""
    if isinstance(value, str) and len(value) > limit:
        raise InvalidArgument(f"{name} is longer than {limit} characters (limits.{setting})")


def check_map(what: str, m: Mapping[Any, Any], limit: int) -> None:
    """Keys and values of ``tags`` / ``labels`` (``what`` is ``"tag"`` or ``"label"``)."""
    setting = f"max_{what}_len"
    for k, v in m.items():
        check_text(what, k, limit, setting)
        check_text(f"{what} value", v, limit, setting)


def check_resource_keys(resources: Iterable[object], limit: int) -> None:
    """The keys of keyed resources (``name:key``, the part after the first ``:``) are at most
    ``limit`` characters (``limits.max_label_len``); non-strings are left to conversion."""
    for name in resources:
        if isinstance(name, str) and len(name) > limit:
            base, sep, key = name.partition(":")
            if sep and len(key) > limit:
                raise InvalidArgument(
                    f"resource '{base}': key is longer than {limit} characters (limits.max_label_len)"
                )


def _strings(limits: LimitsConfig, key: object, kind: object, tenant: object) -> None:
    check_text("key", key, limits.max_key_len, "max_key_len")
    check_text("kind", kind, limits.max_kind_len, "max_kind_len")
    check_text("tenant", tenant, limits.max_tenant_len, "max_tenant_len")


def check_spec(spec: pb.TaskSpec, limits: LimitsConfig) -> None:
    """Every count and length of a protobuf ``TaskSpec`` (gRPC; HTTP after conversion)."""
    tags, labels = spec.tags, spec.labels
    n_tags, n_labels = len(tags), len(labels)
    check_counts(limits, deps=len(spec.deps), tags=n_tags, resources=len(spec.resources), labels=n_labels)
    _strings(limits, spec.key, spec.kind, spec.tenant)
    if n_tags:  # (iterating an empty protobuf map still costs a Mapping-mixin round trip)
        check_map("tag", tags, limits.max_tag_len)
    if n_labels:
        check_map("label", labels, limits.max_label_len)
    if spec.resources:
        check_resource_keys(spec.resources, limits.max_label_len)


def _size(v: object, *, scalar: int = 0) -> int:
    if isinstance(v, list | dict):
        return len(v)
    return 0 if v is None else scalar


def check_json_task(obj: Mapping[str, Any], limits: LimitsConfig) -> None:
    """The counts and lengths of a task object of the HTTP API, before it is converted.

    Values of the wrong type count as 0 here: conversion refuses them with its own message.
    """
    after = obj.get("after")
    check_counts(
        limits,
        deps=_size(obj.get("deps")) + _size(after, scalar=1),
        tags=_size(obj.get("tags")),
        resources=_size(obj.get("resources")),
        labels=_size(obj.get("labels")),
    )
    _strings(limits, obj.get("key"), obj.get("kind"), obj.get("tenant"))
    for name, what, limit in (("tags", "tag", limits.max_tag_len), ("labels", "label", limits.max_label_len)):
        m = obj.get(name)
        if isinstance(m, dict):
            check_map(what, m, limit)
    resources = obj.get("resources")
    if isinstance(resources, dict):
        check_resource_keys(resources, limits.max_label_len)


def check_filter(
    limits: LimitsConfig,
    *,
    items: int,
    keys: Iterable[object] = (),
    kinds: Iterable[object] = (),
    tags: Mapping[Any, Any] | None = None,
    request_key: object = None,
) -> None:
    """A filter of ``items`` items in all (ids, keys, pools, kinds, statuses, tags: counted
    with ``len()`` before anything is converted), then its strings."""
    if items > limits.max_filter_items:
        raise InvalidArgument(
            f"filter has too many items ({items}, limits.max_filter_items {limits.max_filter_items})"
        )
    check_text("request_key", request_key, limits.max_request_key_len, "max_request_key_len")
    for k in keys:
        check_text("key", k, limits.max_key_len, "max_key_len")
    for k in kinds:
        check_text("kind", k, limits.max_kind_len, "max_kind_len")
    if tags:
        check_map("tag", tags, limits.max_tag_len)
