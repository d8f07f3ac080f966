"""The recurring totals (``recurring_conflicts``, ``recurring_rejected``, ``recurring_invalid``)
as a server shows them: in ``/metrics`` with their own help texts, and in the ``Totals`` of the
gRPC ``Snapshot`` and ``GET /v1/snapshot`` (proto fields 140-142, read as 0 from a server
without them), as ``cronoq.client.Snapshot`` exposes them."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from prometheus_client.parser import text_string_to_metric_families

from cronoq.client.types import Snapshot
from cronoq.engine.snapshot import TOTAL_NAMES
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

from .test_http_support import serve

RECURRING = ("recurring_conflicts", "recurring_rejected", "recurring_invalid")


def test_every_engine_total_is_a_totals_field() -> None:
    fields = pb.Totals.DESCRIPTOR.fields_by_name
    assert [n for n in TOTAL_NAMES if n not in fields] == []
    assert [fields[n].number for n in RECURRING] == [140, 141, 142]


def test_a_server_without_the_recurring_fields_reads_as_zero() -> None:
    """What a server of before these fields sends (totals 1-13 only): the client reads 0."""
    old = pb.SnapshotResponse(totals=pb.Totals(submitted=3, stale_completions=1)).SerializeToString()
    totals = Snapshot.from_wire(pb.SnapshotResponse.FromString(old)).totals
    assert (totals.submitted, totals.stale_completions) == (3, 1)
    assert [totals[n] for n in RECURRING] == [0, 0, 0]


async def test_recurring_totals_reach_the_snapshot_the_client_and_metrics() -> None:
    async with serve() as (app, c):
        # 30 February: a schedule that never fires, counted in recurring_invalid
        r = await c.put("/v1/recurring/feb30", json={"cron": "0 0 30 2 *"})
        assert r.status_code == 200, r.text
        totals = (await c.get("/v1/snapshot")).json()["totals"]
        assert (totals["recurring_invalid"], totals["recurring_conflicts"]) == (1, 0)
        snap = Snapshot.from_wire(await app.snapshot_msg(None))  # (the gRPC Snapshot's message)
        assert (snap.totals.recurring_invalid, snap.totals["recurring_rejected"]) == (1, 0)
        text = (await c.get("/metrics")).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["cronoq_tasks_recurring_invalid"].samples[0].value == 1
        for name in TOTAL_NAMES:  # every total has its own help text, not the generic one
            doc = fams[f"cronoq_tasks_{name}"].documentation
            assert doc != f"Total {name.replace('_', ' ')}.", name
        assert "reservation" in fams["cronoq_tasks_recurring_conflicts"].documentation
