"""Mutations folded into row writes (store/_records.py ``fold``): one write per task a commit,
in the order the SQL stores write them."""

from __future__ import annotations

from typing import Any

from cronoq.engine.mutations import StatusChange, Submitted, TaskRecord
from cronoq.engine.parking import JournalPut
from cronoq.store._records import TASK_COLUMNS, UNSTORABLE_AS, db_id, fold, spec_json
from cronoq.store.codec import JsonCodec

codec = JsonCodec()
SPEC = TaskRecord(pool="p", payload=b'"x"')


def row(tid: int, **cols: Any) -> tuple[Any, ...]:
    """The insert row of task ``tid`` submitted with SPEC (seq = tid, arrival = 100 + tid)."""
    base = dict.fromkeys(TASK_COLUMNS)
    base.update(
        id=db_id(tid), seq=tid, arrival=100 + tid, pool="p", kind="default", priority=2,
        spec=spec_json(SPEC), payload=b'"x"', status="submitted", attempt=0, has_output=False,
    )  # fmt: skip
    base.update(cols)
    return tuple(base[c] for c in TASK_COLUMNS)


def sub(tid: int, spec: TaskRecord = SPEC) -> Submitted:
    return Submitted(tid, tid, 100 + tid, spec)


def test_new_tasks_are_insert_rows_in_submission_order() -> None:
    big = 2**63 + 5  # (an id of a shard >= 128: negative in the table)
    b = fold([sub(3), sub(1), sub(big)], codec)
    assert b.inserts == [row(3), row(1), row(big)]
    assert b.updates == []
    assert b.inserts[2][0] == big - 2**64


def test_changes_of_a_task_submitted_in_the_batch_fold_into_its_insert() -> None:
    b = fold(
        [
            sub(1),
            sub(2),
            StatusChange(1, "running", 1, 500),
            StatusChange(2, "running", 1, 510),
            StatusChange(1, "retrying", 1, 600, "boom"),
            StatusChange(1, "running", 2, 700),
            StatusChange(1, "succeeded", 2, 800, None, {"ok": 1}, True),
        ],
        codec,
    )
    assert b.inserts == [
        row(1, status="succeeded", attempt=2, started=500, finished=800, output=b'{"ok":1}', has_output=True),
        row(2, status="running", attempt=1, started=510),
    ]
    assert b.updates == []


def test_changes_of_other_tasks_fold_into_one_update_each() -> None:
    b = fold(
        [
            StatusChange(7, "running", 1, 500),
            StatusChange(8, "failed", 3, 505, "gave up"),
            StatusChange(7, "retrying", 1, 510, "boom"),
            StatusChange(7, "running", 2, 520),
            StatusChange(7, "succeeded", 2, 530, None, [1], True),
            StatusChange(2**64 - 1, "cancelled", 0, 540),
        ],
        codec,
    )
    assert b.inserts == []
    # (status, attempt, message, output, has_output, started, finished, id)
    assert b.updates == [
        ("succeeded", 2, None, b"[1]", True, 500, 530, 7),
        ("failed", 3, "gave up", None, False, None, 505, 8),
        ("cancelled", 0, None, None, False, None, 540, -1),
    ]


def test_a_later_change_clears_an_earlier_output_and_message() -> None:
    b = fold([StatusChange(7, "failed", 1, 500, "x", None, False), StatusChange(7, "running", 2, 510)], codec)
    assert b.updates == [("running", 2, None, None, False, 510, None, 7)]
    ended = StatusChange(1, "succeeded", 1, 500, None, 5, True)
    b = fold([sub(1), ended, StatusChange(1, "running", 2, 510)], codec)
    assert b.inserts == [row(1, status="running", attempt=2, started=510)]


def test_a_submission_after_a_change_of_its_id_starts_its_row_afresh() -> None:
    b = fold([StatusChange(1, "running", 1, 500), sub(1)], codec)
    assert b.inserts == [row(1)]
    assert b.updates == []


def test_a_spawns_submission_folds_in_its_place_among_the_groups_changes() -> None:
    # engine/parking.py spawn: JournalPut.before holds the children's mutations and a
    # cancellation their on_limit policy made (here of task 7, whose start the group holds
    # first): one write of task 7, the cancellation; apart, the start was written after it
    # and task 7 was stored running (a cancelled task run again after a restart)
    cancel = StatusChange(7, "cancelled", 1, 600, "cancelled: on_limit")
    put = JournalPut(5, 0, ["spawn", "fp", [9], False], 0, [sub(9), cancel])
    b = fold([StatusChange(7, "running", 1, 500), put, StatusChange(9, "running", 1, 700)], codec)
    assert b.inserts == [row(9, status="running", attempt=1, started=700)]
    assert b.updates == [("cancelled", 1, "cancelled: on_limit", None, False, 500, 600, 7)]
    assert [op[:3] for op in b.journal_ops] == [("put", 5, 0)]


def test_payloads_and_outputs_the_codec_cannot_store() -> None:
    odd = TaskRecord(pool="p", payload=object())  # type: ignore[arg-type]
    mem = TaskRecord(pool="p", payload=bytearray(b"[2]"))  # type: ignore[arg-type]
    b = fold([sub(1, odd), sub(2, mem), StatusChange(3, "succeeded", 1, 500, "done", object(), True)], codec)
    assert b.inserts[0][TASK_COLUMNS.index("payload")] is None
    assert b.inserts[0][TASK_COLUMNS.index("status")] == "failed"
    assert b.inserts[0][TASK_COLUMNS.index("finished")] == 101
    assert b.inserts[0][TASK_COLUMNS.index("message")].startswith("payload not stored:")
    assert b.inserts[1][TASK_COLUMNS.index("payload")] == b"[2]"
    assert type(b.inserts[1][TASK_COLUMNS.index("payload")]) is bytes
    status, _, message, output, has_output, _, finished, tid = b.updates[0]
    assert (status, output, has_output, finished, tid) == ("succeeded", None, False, 500, 3)
    assert message.startswith("done (output not stored:")


def test_a_nul_in_a_message_is_stored_as_a_replacement_character() -> None:
    """PostgreSQL's text holds no NUL: a message with one (a task's exception text) failed the
    whole commit there; both stores keep the same message, the NUL replaced."""
    b = fold(
        [
            sub(1),
            StatusChange(1, "failed", 1, 500, "bad\x00byte"),
            StatusChange(2, "retrying", 1, 500, "\x00"),
        ],
        codec,
    )
    assert b.inserts[0][TASK_COLUMNS.index("message")] == f"bad{UNSTORABLE_AS}byte"
    assert b.updates[0][2] == UNSTORABLE_AS
