"""Journals and signals in the SQL stores (engine/parking.py; docs/how-to/durable.md#durability).

Theory of operation
-------------------
Two tables, the same in SQLite and PostgreSQL:

* ``cronoq_journal(task, idx, record, resumes)`` - one row per journal record of a live task
  (``record`` the compact JSON of the engine's list, ``idx`` its index; index -1 is the park
  marker), upserted by ``JournalPut`` and deleted per task by ``JournalDrop`` (the task ended);
* ``cronoq_signals(name, payload, at)`` - one row per signal (``payload`` JSON, ``at`` Unix
  ns), upserted by ``SignalPut`` (the engine decides duplicates: a name past retention may be
  sent again), and read back while retained.

:func:`fold_journal` turns the three mutations into ``Batch.journal_ops`` (in order) and
``Batch.signal_ops``.  A ``JournalPut`` of a spawn carries its submission's mutations
(``before``: the children, and the tasks a policy of theirs cancelled); :func:`~cronoq.store.
_records.fold` folds them in the same pass as the rest of the group, just before the record, so
the children and the record go in one transaction and a task changed both by the group and by
the spawn is one write of its latest state.  :func:`journals_from_rows`
rebuilds ``Recovered.journals`` from the rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from cronoq.engine.model import LONE_SURROGATE
from cronoq.engine.parking import PARK_INDEX, JournalDrop, JournalPut, SignalPut

if TYPE_CHECKING:
    from cronoq.store._records import Batch

__all__ = [
    "JOURNAL_MUTATIONS",
    "SQLITE_SCHEMA",
    "fold_journal",
    "journals_from_rows",
    "pg_schema",
    "signals_from_rows",
]

JOURNAL_MUTATIONS: Final = (JournalPut, JournalDrop, SignalPut)
_dumps_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_dumps_ascii = json.JSONEncoder(separators=(",", ":")).encode


def _dumps(value: object) -> str:
    """The JSON text of a record or a signal's payload, non-ASCII text as is unless it holds a
    lone surrogate, which neither store can write (the whole commit failed for good): then
    all escaped (``\\udcff``), which reads back the same."""
    text = _dumps_text(value)
    if not text.isascii() and LONE_SURROGATE.search(text) is not None:
        return _dumps_ascii(value)
    return text


SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS cronoq_journal (
    task INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    record TEXT NOT NULL,
    resumes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, idx)
);
CREATE TABLE IF NOT EXISTS cronoq_signals (
    name TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    at INTEGER NOT NULL
);
"""

#: upserts and deletes, ``?`` placeholders (SQLite)
SQLITE_PUT: Final = (
    "INSERT INTO cronoq_journal (task, idx, record, resumes) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (task, idx) DO UPDATE SET record = excluded.record, resumes = excluded.resumes"
)
SQLITE_DROP: Final = "DELETE FROM cronoq_journal WHERE task = ?"
SQLITE_SIGNAL: Final = (
    "INSERT INTO cronoq_signals (name, payload, at) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET payload = excluded.payload, at = excluded.at"
)


SQLITE_LOAD: Final = "SELECT task, idx, record, resumes FROM cronoq_journal ORDER BY task, idx"
SQLITE_LOAD_SIGNALS: Final = "SELECT name, payload, at FROM cronoq_signals WHERE at >= ?"


def sqlite_write(conn: Any, batch: Batch) -> None:
    """Apply ``batch``'s journal and signal writes on a SQLite connection (in its transaction)."""
    for op in batch.journal_ops:
        if op[0] == "put":
            conn.execute(SQLITE_PUT, op[1:])
        else:
            conn.execute(SQLITE_DROP, op[1:])
    if batch.signal_ops:
        conn.executemany(SQLITE_SIGNAL, batch.signal_ops)


async def pg_write(conn: Any, q: str, batch: Batch) -> None:
    """Apply ``batch``'s journal and signal writes on a PostgreSQL connection (in its transaction)."""
    put, drop, signal = pg_statements(q)
    for op in batch.journal_ops:
        if op[0] == "put":
            await conn.execute(put, *op[1:])
        else:
            await conn.execute(drop, op[1])
    if batch.signal_ops:
        await conn.executemany(signal, batch.signal_ops)


def pg_schema(q: str) -> str:
    """The PostgreSQL tables in schema ``q`` (quoted)."""
    return f"""
    CREATE TABLE IF NOT EXISTS {q}.cronoq_journal (
        task bigint NOT NULL,
        idx integer NOT NULL,
        record text NOT NULL,
        resumes integer NOT NULL DEFAULT 0,
        PRIMARY KEY (task, idx)
    );
    CREATE TABLE IF NOT EXISTS {q}.cronoq_signals (
        name text PRIMARY KEY,
        payload text NOT NULL,
        at bigint NOT NULL
    );
    """


def pg_statements(q: str) -> tuple[str, str, str]:
    """(put, drop, signal) statements for schema ``q``, ``$n`` placeholders."""
    return (
        f"INSERT INTO {q}.cronoq_journal (task, idx, record, resumes) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (task, idx) DO UPDATE SET record = excluded.record, resumes = excluded.resumes",
        f"DELETE FROM {q}.cronoq_journal WHERE task = $1",
        f"INSERT INTO {q}.cronoq_signals (name, payload, at) VALUES ($1, $2, $3) "
        "ON CONFLICT (name) DO UPDATE SET payload = excluded.payload, at = excluded.at",
    )


def fold_journal(m: Any, batch: Batch) -> None:
    """Add journal/signal mutation ``m`` to ``batch`` (a spawn's ``before``: folded by the
    caller, ``_records.fold``, in the same pass and first)."""
    from cronoq.store._records import db_id

    if type(m) is JournalPut:
        batch.journal_ops.append(("put", db_id(m.task_id), m.index, _dumps(m.record), m.resumes))
    elif type(m) is JournalDrop:
        batch.journal_ops.append(("drop", db_id(m.task_id)))
    else:
        batch.signal_ops.append((m.name, _dumps(m.payload), m.at))


def journals_from_rows(rows: Iterable[Sequence[Any]]) -> dict[int, tuple[list[list[Any]], int, int | None]]:
    """``Recovered.journals`` from ``(task, idx, record, resumes)`` rows in (task, idx) order."""
    from cronoq.store._records import task_id

    out: dict[int, tuple[list[list[Any]], int, int | None]] = {}
    for task, idx, record, resumes in rows:
        tid = task_id(int(task))
        records, old, parked = out.get(tid, ([], 0, None))
        rec = json.loads(record)
        if idx == PARK_INDEX:
            parked = rec[2]
        else:
            records.append(rec)
        out[tid] = (records, max(old, int(resumes)), parked)
    return out


def signals_from_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[str, object, int]]:
    """``Recovered.signals`` from ``(name, payload, at)`` rows."""
    return [(str(n), json.loads(p), int(at)) for n, p, at in rows]
