"""``BlockingScheduler`` is generated from ``Scheduler`` (scripts/gen_blocking.py): the committed
``runtime/blocking.py`` is what the script writes now, and the mirror has every public method
and every constructor parameter of ``Scheduler`` (the drift this replaced had lost ``id_shard``)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from cronoq.runtime.blocking import BlockingScheduler
from cronoq.runtime.scheduler import Scheduler

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_blocking.py"


def test_the_generated_file_is_fresh() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "fresh" in out.stdout


def test_constructor_takes_every_scheduler_parameter() -> None:
    ours = inspect.signature(BlockingScheduler.__init__).parameters
    theirs = inspect.signature(Scheduler.__init__).parameters
    assert list(ours) == list(theirs)
    assert "id_shard" in ours
    for name, p in theirs.items():
        assert (ours[name].kind, ours[name].default) == (p.kind, p.default), name


def test_every_public_method_is_mirrored_with_its_parameters() -> None:
    for name, fn in inspect.getmembers(Scheduler, inspect.isfunction):
        if name.startswith("_"):
            continue
        mine = getattr(BlockingScheduler, name)
        assert list(inspect.signature(mine).parameters) == list(inspect.signature(fn).parameters), name


def test_id_shard_reaches_the_scheduler() -> None:
    from cronoq import Pool

    async def run(ctx: object, payload: object) -> None:
        return None

    bs = BlockingScheduler([Pool("p", run)], id_shard=3)
    assert bs.scheduler.id_shard == 3
