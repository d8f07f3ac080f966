"""Every message of the configuration, frozen: ``data/config_messages.json`` holds 459 files
(as decoded TOML) with the exact error lists, in order, that the hand-written parser gave
before the configuration became pydantic models (generated from it by probing every table and
key of the reference page with wrong values, alone and with every array of tables doubled,
with and without ``--shard``; each case adds a message or an order of key paths not seen
before). The models must give the same lists: the messages are the contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cronoq.server.config import ConfigError, parse_config

DATA = json.loads((Path(__file__).parent / "data" / "config_messages.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = DATA["cases"]


def errors(case: dict[str, Any]) -> list[str]:
    try:
        parse_config(case["data"], env=DATA["env"], shard=case["shard"])
    except ConfigError as e:
        return list(e.errors)
    return []


@pytest.mark.parametrize("case", CASES, ids=lambda c: (c["errors"] or ["ok"])[0][:60])
def test_same_messages_in_the_same_order(case: dict[str, Any]) -> None:
    assert errors(case) == case["errors"]
