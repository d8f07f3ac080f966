"""Seeded workload generation for the simulator (and the Hypothesis machine).

A :class:`Scenario` is everything the simulator derives from its seed before the first step:
the engine configuration (pools, retry policies, overflow policies, lease ttls, retention,
priority/urgency parameters), the operation mix and the fault rates.  A :class:`Workload`
turns a scenario into :class:`TaskSpec` values.

Task generation is a chain of *features* (``TASK_FEATURES``): small functions that each fill in
one aspect of a spec (pool, priority, key, deadline, ...).  Later features (dependencies, fixed
starts, cron, resources, tenants, labels) plug in as further functions plus their scenario
knobs, without touching the simulator loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cronoq.engine.config import AutoscaleConfig, CoreConfig, PoolConfig, PriorityConfig, UrgencyConfig
from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, RetryPolicy, TaskOptions
from cronoq.engine.resources import ResourceConfig
from cronoq.engine.time import MS, NS

from .cronmodel import OTHER_ZONES, TRANSITIONS

UNKNOWN_POOL = "no-such-pool"


@dataclass
class TaskSpec:
    """One task as the client submits it (engine units: ns, class ints)."""

    pool: str | None = None
    priority: int = 2
    key: str | None = None
    deadline: int | None = None  # absolute engine ns
    timeout: int | None = None  # ns
    retry: RetryPolicy | None = None
    hint: int | None = None  # duration hint, ns
    kind: str = "default"
    # later features (tests/sim/featsim.py); the defaults keep the base simulator unchanged
    deps: list[tuple[int | str, int]] | None = None  # (target id or key, ON_* condition)
    start_at: int | None = None  # absolute engine ns
    tolerance: int = NS
    on_miss: int = 0  # 0 run_late, 1 skip, 2 fail
    resources: dict[str, int] | None = None
    labels: dict[str, str] | None = None
    tenant: str | None = None

    def options(self) -> TaskOptions:
        return TaskOptions(
            pool=self.pool,
            kind=self.kind,
            priority=self.priority,
            timeout=self.timeout,
            retry=self.retry,
            duration_hint=self.hint,
            tolerance=self.tolerance,
            on_miss=self.on_miss,
            labels=self.labels,
            tenant=self.tenant,
            resources=self.resources,
        )

    def batch_item(self) -> tuple[object, ...]:
        """``Core.submit_batch`` item: (opts, payload, key, deadline, start_at, deps, blob)."""
        return (self.options(), None, self.key, self.deadline, self.start_at, self.deps, None)

    def short(self) -> str:
        parts = [f"p{self.priority}"]
        if self.pool is not None:
            parts.append(self.pool)
        if self.key is not None:
            parts.append(f"key={self.key}")
        if self.deadline is not None:
            parts.append(f"dl={self.deadline / NS:.3f}")
        if self.timeout is not None:
            parts.append(f"to={self.timeout / NS:.3f}")
        if self.retry is not None:
            parts.append(f"retry={self.retry.max_attempts}")
        if self.hint is not None:
            parts.append(f"hint={self.hint / NS:.3f}")
        if self.deps:
            parts.append("deps=" + "+".join(f"{t}/{'sfc'[c]}" for t, c in self.deps))
        if self.start_at is not None:
            parts.append(f"start={self.start_at / NS:.3f}~{self.tolerance / NS:.3f}/{self.on_miss}")
        if self.resources:
            parts.append(f"res={self.resources}")
        if self.labels:
            parts.append(f"labels={self.labels}")
        if self.tenant is not None:
            parts.append(f"tenant={self.tenant}")
        return "Task(" + ",".join(parts) + ")"


def random_retry(rng: random.Random) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=rng.choice((1, 2, 3, 3, 4, 6)),
        initial_backoff=rng.choice((0.0, 0.05, 0.2, 1.0, 2.0)),
        multiplier=rng.choice((0.5, 1.0, 2.0, 3.0)),
        max_backoff=rng.choice((0.3, 5.0, 60.0)),
        jitter=rng.random() < 0.5,
    )


@dataclass
class Scenario:
    """What a seed decides up front."""

    config: CoreConfig
    pool_names: list[str]
    max_capacity: int
    # operation mix (relative weights of client operations per step)
    op_weights: dict[str, float]
    # task shape
    class_weights: list[float]
    p_key: float
    key_space: int
    p_deadline: float
    p_timeout: float
    p_hint: float
    p_task_retry: float
    p_unknown_pool: float
    batch_max: int
    p_batch_dup_key: float
    kinds: list[str]
    mean_run: float  # seconds
    # faults (per attempt unless noted)
    p_fail: float
    p_permanent: float
    p_retry_after: float
    p_hang: float
    p_slow: float
    p_lose_lease: float
    p_zombie: float  # an aborted worker still reports later (stale completion)
    p_dup_report: float  # a worker reports twice
    p_wait: float  # a submitter told "full" waits for space (else gives up)
    extra: dict[str, object] = field(default_factory=dict)  # knobs of later features


def make_scenario(rng: random.Random) -> Scenario:
    """Derive a scenario from the simulator's RNG (consumes it deterministically)."""
    npools = rng.choice((1, 1, 2, 3))
    names = ["default", "fast", "slow"][:npools]
    if npools > 1 and rng.random() < 0.3:
        names[0] = "first"  # no pool named "default": the first pool is the default
    max_capacity = rng.choice((2, 4, 8))
    pools = []
    for name in names:
        pools.append(
            PoolConfig(
                name,
                min=0,
                max=max(max_capacity, 1),
                initial=rng.randint(0, max_capacity),
                autoscale=False,
                lease_ttl=rng.choice((None, None, 0.5, 2.0)),
                max_pending=rng.choice((None, None, 3, 10, 40)),
                overflow=rng.choice(("wait", "reject", "shed_lowest", "shed_oldest")),
                retry=random_retry(rng) if rng.random() < 0.7 else None,
                default_duration=rng.choice((0.1, 1.0)),
            )
        )
    priority = None
    if rng.random() < 0.3:
        base = sorted((rng.uniform(0, 2000) for _ in range(4)), reverse=True)
        priority = PriorityConfig(
            base=base,
            aging_rate=[rng.choice((0.0, 2.0, 50.0)) for _ in range(4)],
            age_cap=[rng.choice((0.0, 800.0, 3000.0)) for _ in range(4)],
        )
    urgency = None
    if rng.random() < 0.3:
        urgency = UrgencyConfig(
            max=rng.choice((0.0, 500.0, 5000.0)),
            window=rng.choice((0.0, 1.0, 5.0)),
            overdue_rate=rng.choice((0.0, 100.0)),
            overdue_cap=rng.choice((0.0, 1000.0)),
        )
    config = CoreConfig(
        pools,
        emit_transitions=True,
        retention=rng.choice((3600.0, 30.0, 2.0)),
        retention_max=rng.choice((1_000_000, 1_000_000, 25, 0)),
        seed=rng.getrandbits(32),
        priority=priority,
        urgency=urgency,
        window=rng.choice((60.0, 5.0)),
    )
    faulty = rng.random() < 0.8
    cls_w = [rng.uniform(0.2, 1.0) for _ in range(4)]
    return Scenario(
        config=config,
        pool_names=names,
        max_capacity=max_capacity,
        op_weights={
            "submit": rng.uniform(2, 6),
            "batch": rng.uniform(0, 1.5),
            "cancel": rng.uniform(0, 1),
            "capacity": rng.uniform(0, 0.6),
            "stale": rng.uniform(0, 0.3),
            "advance": rng.uniform(3, 8),
        },
        class_weights=cls_w,
        p_key=rng.choice((0.0, 0.3, 0.8)),
        key_space=rng.choice((3, 20, 200)),
        p_deadline=rng.choice((0.0, 0.3, 0.7)),
        p_timeout=rng.choice((0.0, 0.3, 0.8)),
        p_hint=rng.choice((0.0, 0.5)),
        p_task_retry=rng.choice((0.0, 0.3)),
        p_unknown_pool=0.01,
        batch_max=rng.choice((2, 5, 12)),
        p_batch_dup_key=0.05,
        kinds=["a", "b"][: rng.choice((1, 2))],
        mean_run=rng.choice((0.05, 0.3, 1.5)),
        p_fail=rng.uniform(0, 0.3) if faulty else 0.0,
        p_permanent=rng.uniform(0, 0.3),
        p_retry_after=rng.uniform(0, 0.5),
        p_hang=rng.uniform(0, 0.08) if faulty else 0.0,
        p_slow=rng.uniform(0, 0.1) if faulty else 0.0,
        p_lose_lease=rng.uniform(0, 0.1) if faulty else 0.0,
        p_zombie=rng.uniform(0, 0.5),
        p_dup_report=rng.uniform(0, 0.05) if faulty else 0.0,
        p_wait=rng.choice((0.0, 0.8, 1.0)),
    )


# ------------------------------------------------------------------------------- task features

Feature = Callable[[random.Random, Scenario, int, TaskSpec], None]


def f_pool(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_unknown_pool:
        spec.pool = UNKNOWN_POOL
    elif len(sc.pool_names) > 1 or rng.random() < 0.5:
        spec.pool = rng.choice(sc.pool_names)
    # else: None -> the default pool


def f_priority(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    spec.priority = rng.choices(range(4), weights=sc.class_weights)[0]
    spec.kind = rng.choice(sc.kinds)


def f_key(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_key:
        spec.key = f"k{rng.randrange(sc.key_space)}"


def f_deadline(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_deadline:
        # some already overdue, most within or just beyond the urgency window
        spec.deadline = max(0, now + int(rng.uniform(-2.0, 12.0) * NS))


def f_timeout(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_timeout:
        spec.timeout = rng.choice((0, 1 * MS, 100 * MS, NS, 3 * NS)) if rng.random() < 0.95 else 0


def f_retry(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_task_retry:
        spec.retry = random_retry(rng)


def f_hint(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < sc.p_hint:
        spec.hint = rng.choice((0, 10 * MS, 500 * MS, 3 * NS, 20 * NS))


#: The order matters only for determinism (each feature consumes the RNG).
TASK_FEATURES: list[Feature] = [f_pool, f_priority, f_key, f_deadline, f_timeout, f_retry, f_hint]


class Workload:
    """Generates task specs from a scenario."""

    def __init__(self, scenario: Scenario, rng: random.Random, features: list[Feature] | None = None) -> None:
        self.sc = scenario
        self.rng = rng
        self.features = TASK_FEATURES if features is None else features

    def task(self, now: int) -> TaskSpec:
        spec = TaskSpec()
        for f in self.features:
            f(self.rng, self.sc, now, spec)
        return spec

    def batch(self, now: int) -> list[TaskSpec]:
        rng = self.rng
        items = [self.task(now) for _ in range(rng.randint(1, self.sc.batch_max))]
        if len(items) > 1 and rng.random() < self.sc.p_batch_dup_key:
            items[-1].key = items[0].key = f"k{rng.randrange(self.sc.key_space)}"
        return items


# ------------------------------------------------------------------------ later features
#
# Used by the feature simulator (tests/sim/featsim.py): dependencies, fixed starts, shared
# resources, worker labels, tenants, crash/recovery.  Their knobs live in ``Scenario.extra``.

#: label sets of the labelled worker groups (task labels are subsets of these)
LABEL_SETS: list[dict[str, str]] = [{"gpu": "1"}, {"zone": "a"}, {"gpu": "1", "zone": "a"}]
TENANTS = ["t0", "t1", "t2"]
TIME_BASE = 1_700_000_000 * NS  # a Unix time base: mutations carry Unix ns


def make_feature_scenario(rng: random.Random) -> Scenario:
    """A scenario for the feature simulator (consumes ``rng`` deterministically)."""
    names = ["default", "b"][: rng.choice((1, 2, 2))]
    max_capacity = rng.choice((2, 4, 6))
    pools = []
    for name in names:
        fair = rng.random() < 0.5
        pools.append(
            PoolConfig(
                name,
                min=0,
                max=max_capacity,
                initial=rng.randint(0, max_capacity),
                autoscale=False,
                lease_ttl=rng.choice((None, None, 1.0)),
                retry=random_retry(rng) if rng.random() < 0.7 else None,
                default_duration=rng.choice((0.1, 1.0)),
                unknown_dependency=rng.choice(("reject", "await", "await")),
                await_timeout=rng.choice((None, 1.0, 5.0)),
                reservable_fraction=rng.choice((0.0, 0.5, 1.0)),
                fair_share=fair,
                tenant_weights={"t0": 1.0, "t1": 2.0, "t2": 0.5} if fair and rng.random() < 0.5 else None,
            )
        )
    resources = [
        ResourceConfig.semaphore("sem", rng.choice((1, 2, 3))),
        ResourceConfig.semaphore("sem2", rng.choice((1, 4))),
        ResourceConfig.token_bucket("bucket", rng.choice((0.5, 2.0, 10.0)), rng.choice((1, 3))),
    ]
    crash = rng.random() < 0.7
    engine_seed = rng.getrandbits(32)
    faulty = rng.random() < 0.8
    extra: dict[str, object] = {
        "crash": crash,
        "p_crash": rng.choice((1 / 300, 1 / 1000)) if crash else 0.0,
        "p_commit": rng.choice((1.0, 0.7, 0.3)),
        "p_deps": rng.choice((0.2, 0.5)),
        "p_structure": rng.uniform(0.5, 2.0),  # op weight of chains/diamonds
        "p_start": rng.choice((0.0, 0.15, 0.4)),
        "p_resources": rng.choice((0.0, 0.2, 0.5)),
        "p_labels": rng.choice((0.0, 0.2, 0.4)),
        "p_tenant": 0.8 if any(p.fair_share for p in pools) else 0.0,
        "recent_ids": [],  # maintained by the simulator: acknowledged ids, for id references
        "next_struct": 0,
    }
    op_weights = {
        "submit": rng.uniform(2, 5),
        "structure": float(extra["p_structure"]),  # type: ignore[arg-type]
        "cancel": rng.uniform(0, 0.6),
        "capacity": rng.uniform(0.1, 0.6),
        "advance": rng.uniform(3, 8),
    }
    sc = Scenario(
        config=None,  # type: ignore[arg-type]  # built below
        pool_names=names,
        max_capacity=max_capacity,
        op_weights=op_weights,
        class_weights=[rng.uniform(0.2, 1.0) for _ in range(4)],
        p_key=rng.choice((0.3, 0.6)),
        key_space=rng.choice((8, 30)),
        p_deadline=0.0,
        p_timeout=rng.choice((0.0, 0.3)),
        p_hint=rng.choice((0.0, 0.5)),
        p_task_retry=rng.choice((0.0, 0.3)),
        p_unknown_pool=0.0,
        batch_max=1,
        p_batch_dup_key=0.0,
        kinds=["a"],
        mean_run=rng.choice((0.05, 0.3, 1.0)),
        p_fail=rng.uniform(0, 0.3) if faulty else 0.0,
        p_permanent=rng.uniform(0, 0.4),
        p_retry_after=rng.uniform(0, 0.5),
        p_hang=rng.uniform(0, 0.05) if faulty else 0.0,
        p_slow=0.0,
        p_lose_lease=rng.uniform(0, 0.05) if faulty else 0.0,
        p_zombie=rng.uniform(0, 0.5),
        p_dup_report=0.0,
        p_wait=0.0,
        extra=extra,
    )
    # later knobs are drawn last, so the ones above keep their draws
    time_base = TIME_BASE
    if rng.random() < 0.6:  # recurring schedules, in their own pool "cron"
        extra["recurring"] = True
        if rng.random() < 0.8:  # start shortly before a DST transition of the zone
            tz, trans = rng.choice(TRANSITIONS)
            time_base = (trans - rng.randint(3, 90)) * NS + rng.randrange(NS)
        else:
            tz = rng.choice(OTHER_ZONES)
            time_base = TIME_BASE + rng.randrange(10**6) * NS + rng.randrange(NS)
        extra["tz"] = tz
        pools.append(
            PoolConfig(
                CRON_POOL,
                min=0,
                max=max_capacity,
                initial=rng.randint(0, max_capacity),
                autoscale=False,
                # (no lease ttl or timeout that is a whole second: they would fire at cron
                # instants, where the shadow's ordering of same-instant timers stops being exact)
                lease_ttl=rng.choice((None, 0.75)),
                retry=random_retry(rng) if rng.random() < 0.5 else None,
                default_duration=0.1,
                reservable_fraction=rng.choice((0.5, 1.0)),
                fair_share=False,
            )
        )
        op_weights["recur_add"] = rng.uniform(0.1, 0.4)
        op_weights["recur_remove"] = rng.uniform(0.0, 0.08)
        op_weights["recur_cancel"] = rng.uniform(0.0, 0.3)
        op_weights["recur_list"] = 0.05
        extra["overlap_weights"] = [rng.uniform(0.2, 1.0) for _ in range(4)]
        extra["recur_names"] = rng.choice((2, 4, 8))
    if rng.random() < 0.5:  # autoscaling, with a simulated scaler (featsim.FeatureSimulator._scale)
        extra["scaler"] = rng.choice(("slot", "slot", "lag", "quota", "ignore"))
        quota: dict[str, int] = {}
        for p in pools:
            if rng.random() < 0.3:
                continue
            p.autoscale = AutoscaleConfig(
                # (intervals that are no round number: evaluations never coincide with cron
                # instants or other timers, whose order within one tick the shadow would need)
                interval=rng.choice((0.2500003, 0.7000001, 1.0000003)),
                target_utilization=rng.choice((0.5, 0.75, 1.0)),
                drain_time=rng.choice((2.0, 10.0, 30.0)),
                slo=rng.choice((None, {0: 1.0}, {1: 2.0, 3: 20.0})),
                reservation_horizon=rng.choice((5.0, 60.0)),
                stabilization_window=rng.choice((0.0, 2.0, 10.0)),
                cooldown=rng.choice((0.0, 1.0, 5.0)),
                max_step_up_abs=rng.choice((1, 4)),
                max_step_down=rng.choice((0, 1, 2)),
            )
            p.min = min(p.max, rng.choice((0, 1, 2)))
            quota[p.name] = rng.randint(1, p.max)
        extra["quota"] = quota
    sc.config = CoreConfig(
        pools,
        emit_transitions=True,
        retention=10.0**7,  # keys stay reserved: the base simulator covers retention
        seed=engine_seed,
        window=60.0,
        resources=resources,
        persist=crash,
        time_base=time_base,
    )
    return sc


CRON_POOL = "cron"


def recurring_template(rng: random.Random, sc: Scenario, name: str) -> TaskSpec:
    """The occurrence template of schedule ``name`` (pool ``cron``).

    The template key is one of two per name: a replacement of the schedule may keep it (the
    replaced schedule's occurrence ahead stays the one for its instant; the new schedule's
    first comes after it, so a duplicate key shows up only rarely).  Two schedules of
    different names never share one: docs/reference/behaviour.md#cron does not say how their overlap rules
    would combine (the engine chains ``skip`` through the shared occurrence, so a schedule's own
    earlier run can be overlapped)."""
    return TaskSpec(
        pool=CRON_POOL,
        priority=rng.choices(range(4), weights=sc.class_weights)[0],
        key=rng.choice((None, f"{name}.a", f"{name}.b", f"{name}.a")),
        kind="a",
        timeout=rng.choice((None, None, 350 * MS, 1250 * MS)),
        retry=random_retry(rng) if rng.random() < 0.3 else None,
        hint=rng.choice((10 * MS, 300 * MS, 1500 * MS)),
        tolerance=rng.choice((0, 50 * MS, 300 * MS, NS, 2500 * MS)),
        on_miss=rng.choice((0, 1, 2)),
        resources={"sem2": 1} if rng.random() < 0.1 else None,
        labels=dict(rng.choice(LABEL_SETS)) if rng.random() < 0.1 else None,
    )


def _cond(rng: random.Random) -> int:
    return rng.choices((ON_SUCCESS, ON_FAILURE, ON_COMPLETE), weights=(6, 1, 3))[0]


def f_deps(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    """Edges to keys of the key space (existing, finished, or not yet submitted: awaited or
    ``unknown_dependency``) and to recently acknowledged ids."""
    if rng.random() >= float(sc.extra["p_deps"]):  # type: ignore[arg-type]
        return
    recent: list[int] = sc.extra["recent_ids"]  # type: ignore[assignment]
    deps: list[tuple[int | str, int]] = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if recent and rng.random() < 0.3:
            deps.append((rng.choice(recent[-50:]), _cond(rng)))
        else:
            deps.append((f"k{rng.randrange(sc.key_space)}", _cond(rng)))
    spec.deps = deps


def f_fixed_start(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() >= float(sc.extra["p_start"]):  # type: ignore[arg-type]
        return
    spec.start_at = max(0, now + int(rng.uniform(-0.5, 8.0) * NS))
    spec.tolerance = rng.choice((0, 10 * MS, 200 * MS, NS, 3 * NS))
    spec.on_miss = rng.choice((0, 1, 2))
    if spec.hint is None:  # a known expected duration: exact reservation windows
        spec.hint = rng.choice((10 * MS, 300 * MS, NS))


def f_resources(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() >= float(sc.extra["p_resources"]):  # type: ignore[arg-type]
        return
    caps = {r.name: r.capacity for r in sc.config.resources}
    res: dict[str, int] = {}
    for name in rng.sample(sorted(caps), rng.choice((1, 1, 2))):
        res[name] = rng.randint(1, caps[name])
    spec.resources = res


def f_labels(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < float(sc.extra["p_labels"]):  # type: ignore[arg-type]
        spec.labels = dict(rng.choice(LABEL_SETS))


def f_tenant(rng: random.Random, sc: Scenario, now: int, spec: TaskSpec) -> None:
    if rng.random() < float(sc.extra["p_tenant"]):  # type: ignore[arg-type]
        spec.tenant = rng.choice(TENANTS)


FEATURE_TASK_FEATURES: list[Feature] = [
    f_pool,
    f_priority,
    f_key,
    f_timeout,
    f_retry,
    f_hint,
    f_deps,
    f_fixed_start,
    f_resources,
    f_labels,
    f_tenant,
]


def structure(wl: Workload, now: int) -> tuple[list[TaskSpec], bool]:
    """A chain or a diamond of fresh keys: ``(specs, as_batch)``.

    As a batch the members come in a random order (forward references by key); as single
    submissions, sometimes dependents first, so their edges wait for awaited keys.
    """
    rng, sc = wl.rng, wl.sc
    n0 = int(sc.extra["next_struct"])  # type: ignore[call-overload]
    shape = rng.choice(("chain", "diamond"))
    size = rng.randint(2, 5) if shape == "chain" else 4
    sc.extra["next_struct"] = n0 + 1
    keys = [f"s{n0}.{i}" for i in range(size)]
    specs = []
    for i in range(size):
        s = wl.task(now)
        s.key = keys[i]
        if shape == "chain":
            parents = [i - 1] if i else []
        else:
            parents = [[], [0], [0], [1, 2]][i]
        edges: list[tuple[int | str, int]] = [(keys[j], _cond(rng)) for j in parents]
        s.deps = edges + (s.deps or []) if edges else s.deps
        specs.append(s)
    as_batch = rng.random() < 0.6
    if as_batch:
        rng.shuffle(specs)
    elif rng.random() < 0.5:
        specs.reverse()  # dependents first: awaited keys (or unknown_dependency)
    return specs, as_batch
