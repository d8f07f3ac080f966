"""A task definition's JSON text (store/_records.py ``spec_json``): a text reused for
definitions submitted alike is the one each encodes to."""

from __future__ import annotations

from typing import Any

from cronoq.engine.mutations import TaskRecord
from cronoq.store import _records
from cronoq.store._records import spec_from_json, spec_json


class Name(str):
    pass


def _fresh(rec: TaskRecord) -> str:
    return _records._dumps(_records.spec_dict(rec))


def _specs() -> list[TaskRecord]:
    out: list[dict[str, Any]] = [
        {"pool": "p"},
        {"pool": "p", "priority": 1},
        {"pool": "p", "priority": True},  # equal to 1, another type: another text
        {"pool": "p", "priority": 1, "key": "k"},
        {"pool": "p", "timeout": 5},
        {"pool": "p", "timeout": 5.0},  # equal to 5, another text
        {"pool": Name("p")},
        {"pool": "p", "tenant": "acme", "recurring": "nightly", "deadline": 2**62},
        {"pool": "p", "retry": (3, 0.5, 2.0, 10.0, False)},  # (not reused: retry)
        {"pool": "p", "retry": (3, 0.5, 2, 10, False)},
        {"pool": "p", "tags": {"a": "b"}, "labels": {"gpu": "yes"}},
        {"pool": "p", "deps": [(7, 0)], "resources": {"db": 1}},
    ]
    return [TaskRecord(payload=b"x", **kw) for kw in out]


def test_every_definition_gets_its_own_text_and_reads_back() -> None:
    _records._spec_texts.clear()
    for _ in range(3):  # (the first round fills the cache, the others reuse it)
        for rec in _specs():
            text = spec_json(rec)
            assert text == _fresh(rec), rec
            back = spec_from_json(text, rec.payload)
            assert back == rec
            assert type(back.priority) is type(rec.priority) and type(back.timeout) is type(rec.timeout)


def test_the_reused_texts_are_bounded() -> None:
    _records._spec_texts.clear()
    for i in range(3 * _records._SPEC_TEXTS_MAX):
        rec = TaskRecord(pool="p", key=f"k{i}")
        assert spec_json(rec) == _fresh(rec)
        assert len(_records._spec_texts) <= _records._SPEC_TEXTS_MAX
