"""``[[resources]]`` keyed keys (docs/reference/config.md): ``per_key``, ``on_limit``,
``limits``, ``max_keys``, ``idle_ttl_s``; each bad value is a clear error at load."""

from __future__ import annotations

import pytest

from cronoq.server.config import ConfigError, loads_config
from cronoq.server.config.engine import resource_configs

SEM = '[[resources]]\nname = "customer"\nkind = "semaphore"\npermits = 2\n'
BUCKET = '[[resources]]\nname = "api"\nkind = "token_bucket"\nrate = 5\nburst = 10\n'


def errors(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as ei:
        loads_config(text, env={})
    return ei.value.errors


def test_keyed_keys_reach_the_engine() -> None:
    text = (
        SEM + 'per_key = true\non_limit = "keep_latest"\nlimits = {vip-7 = 10}\nmax_keys = 500\n'
        "idle_ttl_s = 60\n" + BUCKET + 'per_key = true\non_limit = "cancel_newest"\n'
    )
    sem, bucket = resource_configs(loads_config(text, env={}))
    assert (sem.per_key, sem.on_limit, sem.limits, sem.max_keys, sem.idle_ttl) == (
        True, "keep_latest", {"vip-7": 10}, 500, 60.0,
    )  # fmt: skip
    assert (bucket.per_key, bucket.on_limit, bucket.max_keys, bucket.idle_ttl) == (
        True, "cancel_newest", 100_000, 3600.0,
    )  # fmt: skip


def test_defaults_are_unkeyed_and_queue() -> None:
    (r,) = resource_configs(loads_config(SEM, env={}))
    assert (r.per_key, r.on_limit, r.limits) == (False, "queue", None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SEM.replace('"customer"', '"a:b"') + "per_key = true\n",
            "resources[0].name: a keyed resource's name",
        ),
        (SEM + 'on_limit = "drop"\n', "resources[0].on_limit: must be one of queue, cancel_newest"),
        (BUCKET + 'on_limit = "cancel_oldest"\n', "resources[0].on_limit: cancel_oldest and keep_latest"),
        (BUCKET + 'on_limit = "keep_latest"\n', "resources[0].on_limit: cancel_oldest and keep_latest"),
        (SEM + "per_key = true\nlimits = {a = 0}\n", "resources[0].limits: limits must be integers >= 1"),
        (SEM + 'per_key = true\nlimits = {a = "x"}\n', "resources[0].limits: limits must be integers >= 1"),
        (SEM + "per_key = true\nmax_keys = 0\n", "resources[0].max_keys: must be an integer >= 1"),
        (SEM + "per_key = true\nidle_ttl_s = -1\n", "resources[0].idle_ttl_s: must be a number of seconds"),
        (SEM + "limits = {a = 2}\n", "resources[0].limits: only used with per_key = true"),
        (SEM + 'per_key = "yes"\n', "resources[0].per_key: must be true or false"),
    ],
)
def test_bad_keyed_keys_are_refused_at_load(text: str, expected: str) -> None:
    errs = errors(text)
    assert len(errs) == 1 and errs[0].startswith(expected), errs
