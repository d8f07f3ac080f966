"""``ServerApp.submit_many`` (what ``SubmitMany`` runs) on a led in-process server with a real
SQLite store: every item is created or refused on its own, in order, without awaiting (so the
limits each item meets count the items before it), then one commit barrier for the call; no
item is answered before its commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.app import ApiError

from .test_http_support import serve


def _base(db: Path) -> str:
    return f"""
[store]
kind = "sqlite"
path = "{db}"

[limits]
max_key_len = 16
max_pending_bytes = 1000

[[pools]]
name = "default"

[[pools]]
name = "small"
max_pending = 1
"""


def _committed_ids(db: Path) -> set[int]:
    """The task ids in the database file, read by a connection of its own."""
    con = sqlite3.connect(db)
    try:
        return {row[0] for row in con.execute("SELECT id FROM cronoq_tasks")}
    finally:
        con.close()


async def test_items_succeed_and_fail_each_on_its_own_in_one_call(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    async with serve(base=_base(db)) as (app, _):
        specs = [
            pb.TaskSpec(key="a"),  # 0 created
            pb.TaskSpec(pool="nope"),  # 1 unknown pool
            pb.TaskSpec(key="k" * 17),  # 2 invalid: key past limits.max_key_len
            pb.TaskSpec(key="a"),  # 3 a duplicate of item 0 (its first use, in this call)
            pb.TaskSpec(pool="small"),  # 4 created: the one pending task "small" holds
            pb.TaskSpec(pool="small"),  # 5 full
            pb.TaskSpec(payload=b"x" * 600),  # 6 created, its payload held
            pb.TaskSpec(payload=b"y" * 600),  # 7 over limits.max_pending_bytes (with item 6)
            pb.TaskSpec(key="b"),  # 8 created after all the refusals
        ]
        out = await app.submit_many(None, specs)
        assert len(out) == len(specs)
        errors = {i: (o.status, o.code) for i, o in enumerate(out) if isinstance(o, ApiError)}
        assert errors == {
            1: ("not_found", "unknown_pool"),
            2: ("invalid_argument", "invalid"),
            5: ("resource_exhausted", "full"),
            7: ("resource_exhausted", "overloaded"),
        }
        created = {i: o for i, o in enumerate(out) if isinstance(o, tuple)}
        assert [i for i, (_, dup) in created.items() if dup] == [3]
        assert created[3][0] == created[0][0]
        fresh = [created[i][0] for i in (0, 4, 6, 8)]
        assert fresh == sorted(fresh) and len(set(fresh)) == 4  # in request order
        assert set(fresh) <= _committed_ids(db)  # answered once committed
        assert app.payloads.held == 600


async def test_no_item_is_answered_before_its_commit(tmp_path: Path) -> None:
    """The answer follows the call's commit: every id it acknowledges is already in the
    database file when it returns (it would not be if the call answered before its barrier)."""
    db = tmp_path / "ack.db"
    async with serve(base=_base(db)) as (app, _):
        for round_ in range(3):
            specs = [pb.TaskSpec(key=f"r{round_}-{i}") for i in range(64)]
            out = await app.submit_many(None, specs)
            ids = [o[0] for o in out if isinstance(o, tuple)]
            assert len(ids) == 64
            assert set(ids) <= _committed_ids(db), "acknowledged before its commit"
