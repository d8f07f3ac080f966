"""The tables of ``[[pools]]`` (with ``retry`` and ``scaler``), ``[[resources]]`` and
``[[shards]]`` (see :mod:`.base` for how a table validates).

A pool's ``retry`` is validated as :class:`RetryTable` (the file's keys, in seconds) and kept
as the engine's ``RetryPolicy``; its ``scaler`` is the string ``"external"`` or a table. The
rules between keys are the tables' :meth:`~.base.Section.rules`: ``min <= max``, the keys that
only go with one scaler or resource ``kind``. Rules that need other tables (unique names,
pools of a shard) are :mod:`.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, PlainValidator, SecretStr, ValidationInfo

from cronoq.engine.model import RetryPolicy
from cronoq.engine.resources import ResourceConfig

from .base import Section, Valid
from .errors import bad
from .translate import Problem
from .values import (
    Bool,
    Duration,
    Endpoints,
    EnvName,
    Fraction,
    FrozenMap,
    HttpUrl,
    Int0,
    Int1,
    Limits,
    Name,
    NonNegative,
    OnLimit,
    OpenFraction,
    Overflow,
    Positive,
    PositiveDuration,
    ResourceKind,
    ScalerKind,
    ShardNumber,
    StrList,
    TypeName,
    Weights,
    is_env_name,
)

__all__ = ["PoolSpec", "ResourceSpec", "RetryTable", "ScalerConfig", "ShardSpec"]

DEFAULT_POOL = "default"
_RETRY = RetryPolicy()


class RetryTable(Section):
    """A pool's ``retry`` as the file gives it (→ ``RetryPolicy``, :meth:`policy`)."""

    table_what: ClassVar[str] = "a table {max_attempts, initial_backoff_s, ...}"

    max_attempts: Int1 = Field(_RETRY.max_attempts, description="attempts in total (1 = no retry)")
    initial_backoff_s: Duration = Field(
        _RETRY.initial_backoff, description="delay after the first failed attempt"
    )
    multiplier: Positive = Field(_RETRY.multiplier, description="factor per further attempt")
    max_backoff_s: Duration = Field(_RETRY.max_backoff, description="cap on the delay")
    jitter: Bool = Field(_RETRY.jitter, description="draw each delay uniformly in [delay/2, delay]")

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            self.max_attempts, self.initial_backoff_s, self.multiplier, self.max_backoff_s, self.jitter
        )


def _retry(v: Any, info: ValidationInfo) -> RetryPolicy:
    if isinstance(v, RetryPolicy):
        return v
    return RetryTable.model_validate(v, context=info.context).policy()


Retry = Annotated[RetryPolicy, PlainValidator(_retry, json_schema_input_type=RetryTable), TypeName("table")]


class ScalerConfig(Section):
    """A pool's scaler: ``external`` (KEDA/HPA read ``desired``; workers bring capacity) or
    ``webhook`` (``url``, with ``Bearer $token_env`` if set). Both are validated, but in this
    version the server calls no webhook: every pool only publishes ``desired``
    (docs/concepts/autoscaling.md)."""

    table_what: ClassVar[str] = '"external" or a table {kind, url, token_env}'
    file_keys: ClassVar[tuple[str, ...] | None] = ("kind", "url", "token_env")

    kind: ScalerKind = Field("external", description="`external` or `webhook`")
    url: HttpUrl | None = Field(None, description="webhook URL (validated, not called yet)")
    token_env: EnvName | None = Field(
        None, description="environment variable with a bearer token for the webhook"
    )
    #: (derived) the value of ``$token_env``
    token: SecretStr | None = Field(None, repr=False, description="the value of `token_env`")

    @classmethod
    def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        if "kind" not in raw:  # a url implies a webhook
            raw["kind"] = "webhook" if "url" in raw else "external"
        if raw["kind"] == "external":  # (its url / token_env are only reported as unused)
            return {k: v for k, v in raw.items() if k not in ("url", "token_env")}, []
        name = raw.get("token_env")
        if raw["kind"] != "webhook" or not is_env_name(name):
            return raw, []
        value = env.get(name)
        if not value:
            return raw, [(("token_env",), f"environment variable {name!r} is not set")]
        raw["token"] = value
        return raw, []

    @classmethod
    def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
        kind = valid("kind") or ("webhook" if "url" in raw else "external")
        if kind == "external":
            return [((k,), 'only used with kind = "webhook"') for k in ("url", "token_env") if k in raw]
        if kind == "webhook" and "url" not in raw:
            return [(("url",), "required for a webhook scaler")]
        return []


def _scaler_form(v: Any) -> Any:
    """``scaler = "external"`` is the default table; any other string is wrong."""
    if not isinstance(v, str):
        return v
    if v == "webhook":
        raise bad('a webhook scaler needs a url: scaler = {kind = "webhook", url = "..."}')
    if v != "external":
        raise bad(f'must be "external" or a table {{kind, url, token_env}} (got {v!r})')
    return {}


Scaler = Annotated[ScalerConfig, BeforeValidator(_scaler_form)]


class PoolSpec(Section):
    """One ``[[pools]]`` entry; defaults are the in-process ``Pool`` defaults
    (docs/reference/behaviour.md#pool-api)."""

    name: Name = Field(description="the pool's name (unique)")
    min: Int0 = Field(1, description="lower bound of the autoscaler's `desired`")
    max: Int1 = Field(10, description="upper bound of `desired` and of one worker's grant")
    autoscale: Bool = Field(
        True, description="compute `desired` (exported as `cronoq_pool_desired` and sent to the scaler)"
    )
    scaler: Scaler = Field(
        default_factory=ScalerConfig,
        description='who acts on `desired`: `"external"` or a `[pools.scaler]` table',
    )
    #: (ours) a lease not heartbeaten for this long is lost (the attempt is retried): a worker
    #: that is connected but hung never holds its tasks and slots forever
    lease_ttl_s: PositiveDuration | None = Field(
        30.0, description="workers must heartbeat within this (server default 30 s)"
    )
    max_pending: Int1 = Field(
        100_000, description="not-yet-running tasks of the pool (default `limits.max_pending_per_pool`)"
    )
    overflow: Overflow = Field(
        "wait",
        description="what a full pool does with a new task: `wait`, `reject`, `shed_lowest`, `shed_oldest`",
    )
    retry: Retry = Field(
        default_factory=RetryPolicy, description="the pool's default retry policy (`[pools.retry]`)"
    )
    default_duration_s: Duration = Field(1.0, description="expected duration before any run time was learned")
    reservable_fraction: Fraction = Field(
        0.5, description="share of `max` that fixed-start reservations may overlap on"
    )
    await_unknown_dependencies_s: Duration | None = Field(
        None, description="await unknown dependency keys this long (unset = reject them)"
    )
    target_utilization: OpenFraction = Field(0.75, description="autoscaler's target busy share")
    drain_time_s: PositiveDuration = Field(30.0, description="autoscaler: drain the backlog within this")
    cooldown_s: Duration = Field(30.0, description="autoscaler: at most one step down per cooldown")
    cost_per_worker_second: NonNegative = Field(
        0.0, description="price of one slot-second, for the `cost` figure"
    )
    max_slots_per_worker: Int1 | None = Field(None, description="cap on one worker's grant in this pool")
    fair_share: Bool = Field(False, description="weighted fair share between tenants within a class")
    tenant_weights: Weights = Field(
        default_factory=FrozenMap, description="`{tenant = weight}`; unlisted tenants weigh 1"
    )

    @classmethod
    def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
        mn, mx = valid("min"), valid("max")
        mn = cls.default_of("min") if mn is None else mn
        mx = cls.default_of("max") if mx is None else mx
        if mn > mx:
            return [(("min",), f"must be <= max (got min = {mn}, max = {mx})")]
        return []


class ResourceSpec(Section):
    """One ``[[resources]]`` entry: a semaphore (``permits``) or a token bucket (``rate``, ``burst``)."""

    required_notes: ClassVar[Mapping[str, str]] = {"kind": "(semaphore or token_bucket)"}

    name: Name = Field(description="the resource's name (unique), used in a task's `resources`")
    kind: ResourceKind = Field(description="`semaphore` or `token_bucket`")
    permits: Int1 | None = Field(None, description="semaphore: units held while running")
    rate: Positive | None = Field(None, description="token bucket: refill per second")
    burst: Int1 | None = Field(None, description="token bucket: capacity (it starts full)")
    #: the shard that owns the resource (required in a sharded config)
    shard: Name | None = Field(
        None, description="the shard that owns the resource (required with `[[shards]]`)"
    )
    per_key: Bool = Field(False, description='one unit per key: tasks ask for `"name:key"`')
    on_limit: OnLimit = Field(
        "queue",
        description="the excess: `queue`, `cancel_newest`, or (semaphores) `cancel_oldest`, `keep_latest`",
    )
    limits: Limits = Field(default_factory=FrozenMap, description="per_key: the capacity of given keys")
    max_keys: Int1 = Field(100_000, description="per_key: live keys at most (a new one past it is refused)")
    idle_ttl_s: Duration = Field(3600.0, description="per_key: a key idle this long is forgotten")

    @classmethod
    def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        """Only the keys of the resource's kind are validated (the others are reported)."""
        kinds = {"semaphore": ("permits",), "token_bucket": ("rate", "burst")}
        kind = raw.get("kind")
        keep = kinds.get(kind, ()) if isinstance(kind, str) else ()
        return {k: v for k, v in raw.items() if k in keep or k not in ("permits", "rate", "burst")}, []

    @classmethod
    def rank(cls, problem: Problem, step: str) -> int:
        """Missing keys, then ``name`` and ``kind``, then the kind's rules, then the rest."""
        loc, msg = problem
        if step == "keys" and len(loc) == 1 and msg.startswith("required"):
            return 0
        if step == "keys" and loc[:1] in (("name",), ("kind",)):
            return 1
        return 2 if step == "rules" else 3

    @classmethod
    def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
        kind = valid("kind")
        out: list[Problem] = []
        if kind == "semaphore":
            out += [((k,), 'only used with kind = "token_bucket"') for k in ("rate", "burst") if k in raw]
            if "permits" not in raw:
                out.append((("permits",), "required for a semaphore (an integer >= 1)"))
        elif kind == "token_bucket":
            if "permits" in raw:
                out.append((("permits",), 'only used with kind = "semaphore"'))
            out += [((k,), "required for a token_bucket") for k in ("rate", "burst") if k not in raw]
            if valid("on_limit") in ("cancel_oldest", "keep_latest"):
                out.append((("on_limit",), "cancel_oldest and keep_latest are for semaphores only"))
        name, per_key = valid("name"), valid("per_key")
        if per_key and isinstance(name, str) and ":" in name:
            out.append((("name",), "a keyed resource's name may not contain ':' (it separates the key)"))
        if not per_key:
            keyed_only = ("limits", "max_keys", "idle_ttl_s")
            out += [((k,), "only used with per_key = true") for k in keyed_only if k in raw]
        return out

    def to_engine(self) -> ResourceConfig:
        keyed: dict[str, Any] = {"per_key": self.per_key, "on_limit": self.on_limit}
        if self.per_key:
            keyed.update(limits=dict(self.limits) or None, max_keys=self.max_keys, idle_ttl=self.idle_ttl_s)
        if self.kind == "semaphore":
            assert self.permits is not None
            return ResourceConfig.semaphore(self.name, self.permits, **keyed)
        assert self.rate is not None and self.burst is not None
        return ResourceConfig.token_bucket(self.name, self.rate, self.burst, **keyed)


class ShardSpec(Section):
    """One ``[[shards]]`` entry: a group of pools served by one HA group of servers.

    ``endpoints`` are the gRPC endpoints (``http(s)://host:port``) of that shard: its Service,
    or the addresses of its servers (requests go to whichever leads); ``endpoint`` is the first.
    """

    required_notes: ClassVar[Mapping[str, str]] = {
        "name": "(a unique name)",
        "number": "(a unique integer in 1..255)",
        "pools": "(a list of pool names)",
        "endpoint": "(http(s)://host:port)",
    }

    name: Name = Field(description="the shard's name (unique)")
    number: ShardNumber = Field(description="1..255, unique, carried in the top 8 bits of its task ids")
    pools: StrList = Field(description="the pools this shard serves")
    endpoints: Endpoints = Field(
        alias="endpoint",
        description="`http(s)://host:port` of its leader (a Service), or a list of its servers",
    )

    @property
    def endpoint(self) -> str:
        return self.endpoints[0]
