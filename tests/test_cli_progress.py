"""``cronoq get`` rows for progress, links and the attempt timeline (docs/how-to/progress.md)."""

from __future__ import annotations

from cronoq.cli.task_cmds import _detail_rows, _progress_text
from cronoq.client.types import TaskInfo
from cronoq.engine.attempts import AttemptRecord
from cronoq.engine.progress import Progress
from cronoq.outcome import Outcome


def info(**kw: object) -> TaskInfo:
    base: dict[str, object] = dict(
        id=1, status="running", pool="p", key=None, kind="default", attempt=2, max_attempts=3,
        created_at=1.0, started_at=2.0, finished_at=None, message="", output_available=False,
        tenant=None, priority="normal",
    )  # fmt: skip
    base.update(kw)
    return TaskInfo(**base)  # type: ignore[arg-type]


def test_progress_text() -> None:
    assert _progress_text(Progress(3, 10, "resizing", 1e9, 2)).startswith(
        "3 of 10 (30%) - resizing (attempt 2, "
    )
    assert _progress_text(Progress(7.5, None, None, 1e9, 1)).startswith("7.5 (attempt 1, ")


def test_detail_rows() -> None:
    assert _detail_rows(info()) == [("progress", "-")]
    rows = dict(
        _detail_rows(
            info(
                name="thumbs.make",
                progress=Progress(1, 2, None, 1e9, 2),
                parents=(4, 5),
                children=(9,),
                attempts=(
                    AttemptRecord(1, 1e9, 1e9 + 1, "w1", "failed", "boom"),
                    AttemptRecord(2, 1e9 + 2, None, "", "running", None),
                ),
            )
        )
    )
    assert rows["name"] == "thumbs.make" and rows["parents"] == "4, 5" and rows["children"] == "9"
    assert rows["attempt 1"].startswith("failed: ") and rows["attempt 1"].endswith("on w1 (boom)")
    assert rows["attempt 2"].startswith("running since ") and " - " not in rows["attempt 2"]


def test_detail_rows_show_the_parents_outcomes() -> None:
    outcomes = (Outcome(4, "a", "succeeded"), Outcome(5, None, "failed", None, "boom"))
    rows = dict(_detail_rows(info(parents=(4, 5), parent_outcomes=outcomes)))
    assert rows["parents"] == "4 succeeded, 5 failed (boom)"
