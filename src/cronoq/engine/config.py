"""Engine configuration: validated once, immutable afterwards.

The public constructors (``AutoscaleConfig``, and ``PoolConfig`` behind the runtime's
``Pool``) raise ``ValueError`` with the documented messages (docs/reference/behaviour.md#autoscaling,
docs/reference/behaviour.md#pool-api).  The engine converts seconds to integer nanoseconds once, here, so
nothing on the hot path does float work.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, TypedDict, Unpack

from cronoq.engine.model import CLASS_NAMES, DEFAULT_RETRY, Priority, RetryPolicy, check_stored_text
from cronoq.engine.stats import RUN_EWMA_ALPHA
from cronoq.engine.time import NS, check_seconds, show_number, to_ns

if TYPE_CHECKING:
    from cronoq.engine.resources import ResourceConfig

#: an ``slo`` map: priority class (a ``Priority``, its number or its name) to seconds
SloMap: TypeAlias = (
    Mapping[Priority | int | str, float]
    | Mapping[Priority, float]
    | Mapping[int, float]
    | Mapping[str, float]
)

OVERFLOW_POLICIES: Final = ("wait", "reject", "shed_lowest", "shed_oldest")
UNKNOWN_DEP_POLICIES: Final = ("reject", "await")


class PriorityConfig:
    """Per-class score parameters: ``base + min(aging_rate * wait_s, age_cap) + urgency``."""

    __slots__ = ("age_cap", "aging_rate", "base")

    def __init__(
        self,
        base: Sequence[float] = (10000.0, 1000.0, 100.0, 10.0),
        aging_rate: Sequence[float] = (2.0, 2.0, 2.0, 2.0),
        age_cap: Sequence[float] = (800.0, 800.0, 800.0, 800.0),
    ) -> None:
        for name, seq in (("base", base), ("aging_rate", aging_rate), ("age_cap", age_cap)):
            if len(seq) != 4 or not all(math.isfinite(x) and x >= 0 for x in seq):
                raise ValueError(f"{name} must be 4 finite, non-negative numbers")
        self.base = tuple(float(x) for x in base)
        self.aging_rate = tuple(float(x) for x in aging_rate)
        self.age_cap = tuple(float(x) for x in age_cap)


class UrgencyConfig:
    """Deadline urgency curve (docs/reference/behaviour.md#urgency)."""

    __slots__ = ("max", "overdue_cap", "overdue_rate", "window")

    def __init__(
        self,
        max: float = 5000.0,
        window: float = 5.0,
        overdue_rate: float = 100.0,
        overdue_cap: float = 1000.0,
    ) -> None:
        for name, v in (("max", max), ("overdue_rate", overdue_rate), ("overdue_cap", overdue_cap)):
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"urgency {name} must be finite and >= 0")
        check_seconds("window", window)
        self.max = float(max)
        self.window = float(window)
        self.overdue_rate = float(overdue_rate)
        self.overdue_cap = float(overdue_cap)


def _parse_slo(slo: SloMap | None) -> dict[int, float]:
    out: dict[int, float] = {}
    for k, v in (slo or {}).items():
        p = Priority.parse(k)
        out[int(p)] = check_seconds(f"slo[{CLASS_NAMES[p]}]", v)
        if out[int(p)] <= 0:
            raise ValueError(f"slo[{CLASS_NAMES[p]}] must be > 0")
    return out


class AutoscaleConfig:
    """Queue-pressure autoscaling parameters (docs/reference/behaviour.md#autoscaling)."""

    __slots__ = (
        "cooldown",
        "cost_per_worker_second",
        "drain_time",
        "ewma_alpha",
        "interval",
        "max_step_down",
        "max_step_up_abs",
        "max_step_up_ratio",
        "reservation_horizon",
        "slo",
        "stabilization_window",
        "target_utilization",
    )

    def __init__(
        self,
        interval: float = 1.0,
        target_utilization: float = 0.75,
        drain_time: float = 30.0,
        slo: SloMap | None = None,
        reservation_horizon: float = 60.0,
        stabilization_window: float = 60.0,
        cooldown: float = 30.0,
        max_step_up_abs: int = 4,
        max_step_down: int = 1,
        cost_per_worker_second: float = 0.0,
    ) -> None:
        self.interval = check_seconds("interval", interval)
        if self.interval <= 0:
            raise ValueError("interval must be > 0")
        if (
            isinstance(target_utilization, bool)
            or not isinstance(target_utilization, (int, float))
            or not (0 < target_utilization <= 1)
        ):
            raise ValueError(f"target_utilization must be in (0, 1] (got {show_number(target_utilization)})")
        self.target_utilization = float(target_utilization)
        self.drain_time = check_seconds("drain_time", drain_time)
        if self.drain_time <= 0:
            raise ValueError("drain_time must be > 0")
        self.slo = _parse_slo(slo)
        self.reservation_horizon = check_seconds("reservation_horizon", reservation_horizon)
        self.stabilization_window = check_seconds("stabilization_window", stabilization_window)
        self.cooldown = check_seconds("cooldown", cooldown)
        for name, v in (("max_step_up_abs", max_step_up_abs), ("max_step_down", max_step_down)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0 (got {v!r})")
        self.max_step_up_abs = max_step_up_abs
        self.max_step_down = max_step_down
        if (
            isinstance(cost_per_worker_second, bool)
            or not isinstance(cost_per_worker_second, (int, float))
            or not math.isfinite(cost_per_worker_second)
            or cost_per_worker_second < 0
        ):
            raise ValueError("cost_per_worker_second must be finite and >= 0")
        self.cost_per_worker_second = float(cost_per_worker_second)
        self.ewma_alpha = 0.3
        self.max_step_up_ratio = 1.0

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__[:10])
        return f"AutoscaleConfig({fields})"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class PoolOptions(TypedDict, total=False):
    """A pool's options, declared once: ``PoolConfig(name, **options)`` validates them and
    ``Pool(name, executor, **options)`` forwards them (docs/reference/behaviour.md#pool-api; the
    defaults are :data:`POOL_DEFAULTS`)."""

    min: int
    max: int
    initial: int | None
    autoscale: AutoscaleConfig | bool | None
    lease_ttl: float | None
    max_pending: int | None
    overflow: str
    retry: RetryPolicy | None
    unknown_dependency: str
    await_timeout: float | None
    default_duration: float
    reservable_fraction: float
    tenant_weights: Mapping[str, float] | None
    fair_share: bool


#: What a pool option is when it is left out.
POOL_DEFAULTS: Final[PoolOptions] = {
    "min": 1,
    "max": 10,
    "initial": None,
    "autoscale": None,
    "lease_ttl": None,
    "max_pending": None,
    "overflow": "wait",
    "retry": None,
    "unknown_dependency": "reject",
    "await_timeout": None,
    "default_duration": 1.0,
    "reservable_fraction": 0.5,
    "tenant_weights": None,
    "fair_share": False,
}


def check_pool_options(options: Mapping[str, object], owner: str) -> None:
    """A ``TypeError`` naming the first of ``options`` that is not a pool option, as Python
    says it of an unexpected keyword argument of ``owner``."""
    for k in options:
        if k not in POOL_DEFAULTS:
            raise TypeError(f"{owner}() got an unexpected keyword argument '{k}'")


def with_pool_options(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` (of a callable taking ``**options: Unpack[PoolOptions]``) with ``**options``
    spelled out as keyword-only parameters, each with its default, before the other
    keyword-only ones: what ``inspect.signature`` shows of ``Pool`` and ``PoolConfig``."""
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    front = [p for p in params if p.kind is not p.KEYWORD_ONLY]
    back = [p for p in params if p.kind is p.KEYWORD_ONLY]
    types = PoolOptions.__annotations__
    options = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=getattr(types[name], "__forward_arg__", types[name]),
        )
        for name, default in POOL_DEFAULTS.items()
    ]
    return sig.replace(parameters=[*front, *options, *back])


class PoolConfig:
    """A pool's engine configuration (docs/reference/behaviour.md#pool-api), validated at
    construction from its :class:`PoolOptions`."""

    __slots__ = (
        "autoscale",
        "await_timeout",
        "cost_per_worker_second",
        "default_duration",
        "fair_share",
        "initial",
        "lease_ttl",
        "max",
        "max_pending",
        "min",
        "name",
        "overflow",
        "reservable_fraction",
        "retry",
        "tenant_weights",
        "unknown_dependency",
    )

    def __init__(self, name: str, **options: Unpack[PoolOptions]) -> None:
        check_pool_options(options, "PoolConfig.__init__")
        o: PoolOptions = {**POOL_DEFAULTS, **options}
        min, max, initial, autoscale = o["min"], o["max"], o["initial"], o["autoscale"]
        lease_ttl, max_pending, overflow, retry = o["lease_ttl"], o["max_pending"], o["overflow"], o["retry"]
        unknown_dependency, await_timeout = o["unknown_dependency"], o["await_timeout"]
        default_duration, reservable_fraction = o["default_duration"], o["reservable_fraction"]
        tenant_weights, fair_share = o["tenant_weights"], o["fair_share"]
        if not isinstance(name, str) or not name:
            raise ValueError("pool name must be a non-empty string")
        check_stored_text("pool name", name, ValueError)
        if not _is_int(max) or max < 1:
            raise ValueError("max must be >= 1")
        if not _is_int(min) or min < 0:
            raise ValueError("min must be >= 0")
        if min > max:
            raise ValueError("min must be <= max")
        if initial is not None and (not _is_int(initial) or initial < 0):
            raise ValueError("initial must be an int >= 0")
        if autoscale is None or autoscale is True:
            autoscale = AutoscaleConfig()
        elif autoscale is False:
            autoscale = None
        elif not isinstance(autoscale, AutoscaleConfig):
            raise ValueError("autoscale must be None, a bool or an AutoscaleConfig")
        if lease_ttl is not None:
            if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, (int, float)) or not lease_ttl > 0:
                raise ValueError("lease_ttl must be > 0")
            check_seconds("lease_ttl", lease_ttl)
        if max_pending is not None and (not _is_int(max_pending) or max_pending < 1):
            raise ValueError(f"max_pending must be an int >= 1 or None (got {max_pending!r})")
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError("overflow must be wait, reject, shed_lowest or shed_oldest")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ValueError("retry must be a RetryPolicy")
        if unknown_dependency not in UNKNOWN_DEP_POLICIES:
            raise ValueError("unknown_dependency must be 'reject' or 'await'")
        if await_timeout is not None:
            check_seconds("await_timeout", await_timeout)
        check_seconds("default_duration", default_duration)
        if (
            isinstance(reservable_fraction, bool)
            or not isinstance(reservable_fraction, (int, float))
            or not (0 <= reservable_fraction <= 1)
        ):
            got = show_number(reservable_fraction)
            raise ValueError(f"reservable_fraction must be in [0, 1] (got {got})")
        weights: dict[str, float] = {}
        for t, w in (tenant_weights or {}).items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
                raise ValueError("tenant weights must be finite and > 0")
            weights[str(t)] = float(w)
        self.name = name
        self.min = min
        self.max = max
        self.initial = initial
        self.autoscale: AutoscaleConfig | None = autoscale
        self.lease_ttl = None if lease_ttl is None else to_ns(float(lease_ttl))
        self.max_pending = max_pending
        self.overflow = overflow
        self.retry = retry or DEFAULT_RETRY
        self.unknown_dependency = unknown_dependency
        self.await_timeout = None if await_timeout is None else to_ns(float(await_timeout))
        self.default_duration = to_ns(float(default_duration))
        self.reservable_fraction = float(reservable_fraction)
        self.tenant_weights = weights
        self.fair_share = bool(fair_share)
        self.cost_per_worker_second = autoscale.cost_per_worker_second if autoscale else 0.0

    __init__.__signature__ = with_pool_options(inspect.signature(__init__))  # type: ignore[attr-defined]

    @property
    def initial_capacity(self) -> int:
        """docs/reference/behaviour.md#autoscaling: ``initial`` (default ``min``), clamped to ``max``."""
        base = self.min if self.initial is None else self.initial
        return base if base < self.max else self.max


class CoreConfig:
    """Whole-engine configuration."""

    __slots__ = (
        "resources",
        "emit_transitions",
        "ewma_alpha",
        "keep_payloads",
        "max_hold",
        "persist",
        "pools",
        "priority",
        "retention",
        "retention_max",
        "seed",
        "time_base",
        "urgency",
        "window",
    )

    def __init__(
        self,
        pools: Sequence[PoolConfig],
        *,
        emit_transitions: bool = False,
        retention: float = 3600.0,
        retention_max: int = 1_000_000,
        seed: int = 0,
        time_base: int = 0,
        persist: bool = False,
        priority: PriorityConfig | None = None,
        urgency: UrgencyConfig | None = None,
        window: float = 60.0,
        resources: Sequence[ResourceConfig] = (),
        keep_payloads: bool | None = None,
    ) -> None:
        if not pools:
            raise ValueError("at least one pool is required")
        names: set[str] = set()
        for p in pools:
            if p.name in names:
                raise ValueError(f"duplicate pool name '{p.name}'")
            names.add(p.name)
        self.pools = tuple(pools)
        self.emit_transitions = emit_transitions
        self.retention = to_ns(check_seconds("retention", retention))
        if not _is_int(retention_max) or retention_max < 0:
            raise ValueError("retention_max must be an int >= 0")
        self.retention_max = retention_max
        self.seed = seed
        #: Unix ns at engine time zero, used only to stamp events and records.
        self.time_base = time_base
        self.persist = persist
        #: ended tasks keep their payloads, for replays (docs/how-to/operations.md#replay);
        #: None: unless ``persist`` (a durable store holds them, the shell reads them back)
        self.keep_payloads = (not persist) if keep_payloads is None else bool(keep_payloads)
        self.priority = priority or PriorityConfig()
        self.urgency = urgency or UrgencyConfig()
        self.window = to_ns(check_seconds("window", window))
        self.max_hold = NS
        self.ewma_alpha = RUN_EWMA_ALPHA
        rnames: set[str] = set()
        for r in resources:
            if r.name in rnames:
                raise ValueError(f"duplicate resource name '{r.name}'")
            rnames.add(r.name)
        self.resources = tuple(resources)

    def default_pool_index(self) -> int:
        """docs/reference/behaviour.md#concepts: the first pool is the default; a pool named ``default`` wins
        if present."""
        for i, p in enumerate(self.pools):
            if p.name == "default":
                return i
        return 0
