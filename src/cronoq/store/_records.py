"""Row encoding shared by the SQL stores: mutations -> row writes, rows -> ``Recovered``.

Task ids are uint64 but both SQL column types are signed 64-bit: :func:`db_id` and
:func:`task_id` map them (two's complement) at this boundary.  Ids of shard numbers >= 128
(docs/how-to/shards.md) are negative in the table; one store holds one shard's ids, which
share their top bit, so the table's order is still the id order.

Task definitions and schedule definitions are stored as compact JSON written and read by the
stdlib ``json`` module (never the user's codec, never code execution).  Payloads and outputs
are separate binary columns in the user's codec format.
"""

from __future__ import annotations

import json
import json.encoder
import logging
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from cronoq.engine.model import LONE_SURROGATE
from cronoq.engine.mutations import (
    BulkKeyChange,
    Mutation,
    PauseChange,
    Recovered,
    RecoveredSchedule,
    RecoveredTask,
    RecoveredTerminal,
    RecurringNext,
    RecurringRecord,
    RecurringRemove,
    RecurringUpsert,
    StatusChange,
    Submitted,
    TaskRecord,
)
from cronoq.engine.parking import JournalPut
from cronoq.store._journal import JOURNAL_MUTATIONS, fold_journal, journals_from_rows, signals_from_rows
from cronoq.store.base import TERMINAL_STATUSES
from cronoq.store.codec import Codec, CodecError

log = logging.getLogger("cronoq.store")

_SPEC_FIELDS = tuple(s for s in TaskRecord.__slots__ if s != "payload")
#: a TaskRecord's definition fields as a tuple, in one C call (fold runs it per submission)
_spec_values = operator.attrgetter(*_SPEC_FIELDS)
_NOT_PLAIN = ("retry", "deps", "resources", "tags", "labels")
#: the definition fields of plain values (all but _NOT_PLAIN), in one C call
_plain_values = operator.attrgetter(*(s for s in _SPEC_FIELDS if s not in _NOT_PLAIN))


def _compact_encoder() -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode`` for the
    definitions this module builds (dicts of plain values, never circular), the same text,
    without making a new C encoder object per call as ``JSONEncoder.encode`` does (about a
    third of encoding a task definition, which happens once per submission).  No circular
    reference memo: a definition cannot hold one (a cycle would end in RecursionError)."""
    enc = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)  # (not in typeshed)
    if make is None:  # pragma: no cover - CPython always has the _json accelerator
        return enc.encode
    c = make(None, enc.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    join = "".join
    return lambda obj: join(c(obj, 0))


_dumps = _compact_encoder()

_U64: Final = 1 << 64
_I64_MAX: Final = (1 << 63) - 1


def db_id(task_id: int) -> int:
    """A uint64 task id as the signed 64-bit value stored in an id column."""
    return task_id - _U64 if task_id > _I64_MAX else task_id


def task_id(stored: int) -> int:
    """The uint64 task id of a signed 64-bit id column value (inverse of :func:`db_id`)."""
    return stored + _U64 if stored < 0 else stored


#: Column order of a task row, as both SQL stores select and insert it.
TASK_COLUMNS = (
    "id",
    "seq",
    "arrival",
    "pool",
    "kind",
    "priority",
    "key",
    "spec",
    "payload",
    "status",
    "attempt",
    "started",
    "finished",
    "message",
    "output",
    "has_output",
)

#: What a NUL character or a lone surrogate of a status message is stored as (in both stores,
#: so they recover the same message): a PostgreSQL text value cannot hold a NUL, neither store
#: can encode a lone surrogate, and such a message (a task's exception text) failed its whole
#: commit for good, which made the leader step down, and the task, recovered without its end,
#: ran and failed again.
UNSTORABLE_AS: Final = "\ufffd"


def storable_message(message: str) -> str:
    """``message`` as both stores keep it: a NUL character, and each lone surrogate, replaced
    by U+FFFD (:data:`UNSTORABLE_AS`).  Such a message failed its whole commit for good (the
    leader stepped down, and the task, recovered without its end, ran again).  A C scan, and a
    regular expression only for a message that is not ASCII."""
    if "\x00" in message:
        message = message.replace("\x00", UNSTORABLE_AS)
    if not message.isascii():
        message = LONE_SURROGATE.sub(UNSTORABLE_AS, message)
    return message


#: Column order of a ``cronoq_bulk_keys`` row (a bulk action's request key and its progress).
BULK_KEY_COLUMNS = ("action", "tenant", "key", "matched", "acted", "done", "at")


def spec_dict(rec: TaskRecord) -> dict[str, Any]:
    return {s: v for s, v in zip(_SPEC_FIELDS, _spec_values(rec)) if v is not None}


#: definition values (and their types) -> their JSON, for the definitions :func:`spec_json` may
#: reuse the text of; cleared when full
_spec_texts: dict[tuple[Any, ...], str] = {}
_SPEC_TEXTS_MAX: Final = 256


def spec_json(rec: TaskRecord) -> str:
    """A task definition (without its payload) as compact JSON.

    Tasks submitted alike have equal definitions (the same pool, kind, priority and options;
    only the payload and the ids differ), so the text of a definition of plain values (no
    retry, deps, resources, tags or labels) is kept and reused: a tuple lookup instead of a
    dict and its JSON, about 2 of the 5 us fold spends per submission (issue #33).  The key
    holds every value and its type, so a reused text is the one this definition encodes to
    (equal ints, and equal strings, of one type have one JSON text; of floats, which the
    engine's nanosecond fields never are, a -0.0 may reuse the text of a 0.0)."""
    if (
        rec.retry is None
        and rec.deps is None
        and rec.resources is None
        and rec.tags is None
        and rec.labels is None
    ):
        values = _plain_values(rec)  # (the others are None: not in the text)
        key = (*values, *map(type, values))
        try:
            text = _spec_texts.get(key)
        except TypeError:  # (an unhashable value where none belongs: encoded as it is)
            return _dumps(spec_dict(rec))
        if text is None:
            text = _dumps(spec_dict(rec))
            if len(_spec_texts) >= _SPEC_TEXTS_MAX:
                _spec_texts.clear()
            _spec_texts[key] = text
        return text
    return _dumps(spec_dict(rec))


def spec_from_dict(d: Any, payload: Any) -> TaskRecord:
    if not isinstance(d, dict) or not isinstance(d.get("pool"), str):
        raise ValueError("task definition is not an object with a pool")
    kw = {k: d[k] for k in _SPEC_FIELDS if k in d}
    retry = kw.get("retry")
    if retry is not None:
        a, b, c, m, j = retry
        kw["retry"] = (int(a), b, c, m, bool(j))
    deps = kw.get("deps")
    if deps is not None:
        kw["deps"] = [(t, int(cond)) for t, cond in deps]
    return TaskRecord(payload=payload, **kw)


def spec_from_json(text: str, payload: Any) -> TaskRecord:
    return spec_from_dict(json.loads(text), payload)


def schedule_json(rec: RecurringRecord) -> str:
    return _dumps(
        {
            "name": rec.name,
            "cron": rec.cron,
            "tz": rec.tz,
            "overlap": rec.overlap,
            "deadline_rel": rec.deadline_rel,
            "template": spec_dict(rec.template),
        }
    )


def schedule_from_json(text: str, payload: Any) -> RecurringRecord:
    d = json.loads(text)
    if not isinstance(d, dict):
        raise ValueError("schedule definition is not an object")
    return RecurringRecord(
        str(d["name"]),
        str(d["cron"]),
        d.get("tz"),
        int(d["overlap"]),
        spec_from_dict(d["template"], payload),
        d.get("deadline_rel"),
    )


def _blob(payload: Any, codec: Codec) -> bytes | None:
    """A payload as stored: bytes as given (encoded at submission); any other object encoded."""
    if payload is None or isinstance(payload, bytes):
        return payload
    if isinstance(payload, bytearray | memoryview):
        return bytes(payload)
    return codec.encode(payload)


class Batch:
    """One commit's worth of row writes, folded per task/schedule."""

    __slots__ = (
        "inserts",
        "updates",
        "schedule_ops",
        "pause_ops",
        "bulk_key_ops",
        "journal_ops",
        "signal_ops",
    )

    def __init__(self) -> None:
        #: full rows in TASK_COLUMNS order (upserted)
        self.inserts: list[tuple[Any, ...]] = []
        #: (status, attempt, message, output, has_output, started, finished, id)
        self.updates: list[tuple[Any, ...]] = []
        #: ("upsert", name, spec, payload) | ("remove", name) | ("next", name, next, last)
        self.schedule_ops: list[tuple[Any, ...]] = []
        #: (kind, name, paused): ``cronoq_paused`` rows to add (paused) or delete, in order
        self.pause_ops: list[tuple[str, str, bool]] = []
        #: ``cronoq_bulk_keys`` rows to upsert, in BULK_KEY_COLUMNS order (the tenant "" for none)
        self.bulk_key_ops: list[tuple[str, str, str, int, int, bool, int]] = []
        #: ("put", task, idx, record, resumes) | ("drop", task), in order (store/_journal.py)
        self.journal_ops: list[tuple[Any, ...]] = []
        #: (name, payload JSON, at) signals to upsert (store/_journal.py)
        self.signal_ops: list[tuple[str, str, int]] = []


def fold(mutations: Iterable[Mutation], codec: Codec) -> Batch:
    """Fold a batch of mutations into at most one write per task, in order per schedule.

    Each task's write is built as the tuple it is written as, at its first mutation, and
    rebuilt when another of the same task follows (a status change of a task submitted in
    the batch, a second change): an insert row (TASK_COLUMNS order) for a task submitted in
    the batch, else an update row (``Batch.updates`` order).  Most tasks have one mutation a
    commit, and a row object per task, filled and read back, cost a submission about as
    much as the rest of its fold (issue #33).

    A spawn's ``JournalPut`` carries the mutations of its submission (``before``: the
    children, and the tasks a policy of theirs cancelled): they are folded in the same pass,
    in their place, so a task the group changed before the spawn and the spawn changed again
    is still one write, the later state (folded apart, the group's earlier change was
    written after the spawn's and undid a cancellation)."""
    rows: dict[int, tuple[Any, ...]] = {}  # tasks not submitted in this batch: their updates
    new: dict[int, tuple[Any, ...]] = {}  # tasks submitted in this batch: their insert rows
    batch = Batch()
    _fold_into(mutations, codec, batch, rows, new)
    batch.inserts.extend(new.values())
    batch.updates.extend(rows.values())
    return batch


def _fold_into(
    mutations: Iterable[Mutation],
    codec: Codec,
    batch: Batch,
    rows: dict[int, tuple[Any, ...]],
    new: dict[int, tuple[Any, ...]],
) -> None:
    """``fold``'s pass over ``mutations``: the tasks' rows into ``rows`` and ``new``, the
    rest into ``batch``."""
    for m in mutations:
        if type(m) is Submitted:
            tid = m.id
            if rows and tid in rows:  # (a second record of one id starts its row afresh)
                del rows[tid]
            spec = m.spec
            payload = spec.payload
            status, finished, message = "submitted", None, None
            if payload is not None and type(payload) is not bytes:
                try:
                    payload = _blob(payload, codec)
                except CodecError as e:  # defensive: the runtime encodes payloads at submission
                    payload, status, finished = None, "failed", m.arrival
                    message = f"payload not stored: {e}"
            new[tid] = (
                db_id(tid), m.seq, m.arrival, spec.pool, spec.kind, spec.priority, spec.key,
                spec_json(spec), payload, status, 0, None, finished, message, None, False,
            )  # fmt: skip
        elif type(m) is StatusChange:
            status = m.status
            message = m.message
            output = None
            has_output = False
            if m.has_output:
                try:
                    output = codec.encode(m.output)
                    has_output = True
                except CodecError as e:
                    note = f"output not stored: {e}"
                    message = note if not message else f"{message} ({note})"
            if message:
                message = storable_message(message)
            finished = m.at if status in TERMINAL_STATUSES else None
            tid = m.id
            row = new.get(tid)
            if row is not None:
                started = row[11]
                if started is None and status == "running":
                    started = m.at
                new[tid] = (*row[:9], status, m.attempt, started, finished, message, output, has_output)
                continue
            prev = rows.get(tid)
            started = None if prev is None else prev[5]
            if started is None and status == "running":
                started = m.at
            rows[tid] = (status, m.attempt, message, output, has_output, started, finished, db_id(tid))
        elif type(m) is RecurringUpsert:
            srec = m.spec
            try:
                blob = _blob(srec.template.payload, codec)
            except CodecError as e:
                log.warning("schedule %r not stored: %s", srec.name, e)
                continue
            batch.schedule_ops.append(("upsert", srec.name, schedule_json(srec), blob))
        elif type(m) is RecurringRemove:
            batch.schedule_ops.append(("remove", m.name))
        elif type(m) is RecurringNext:
            batch.schedule_ops.append(("next", m.name, m.next, db_id(m.last)))
        elif type(m) is PauseChange:
            batch.pause_ops.append((m.kind, m.name, m.paused))
        elif type(m) is BulkKeyChange:
            batch.bulk_key_ops.append((m.action, m.tenant or "", m.key, m.matched, m.acted, m.done, m.at))
        elif type(m) in JOURNAL_MUTATIONS:
            if type(m) is JournalPut and m.before:
                _fold_into(m.before, codec, batch, rows, new)  # (the spawn's submission first)
            fold_journal(m, batch)
        else:
            raise TypeError(f"not a mutation: {m!r}")


def _quarantine(rec: Recovered, row: Sequence[Any], reason: str) -> None:
    """An undecodable row: its id and reason, and what is still readable of it
    (docs/reference/behaviour.md#recovery)."""
    tid, seq, arrival, pool, kind, priority, key = row[:7]
    tid = task_id(tid)
    attempt, started, finished = row[10:13]
    rec.quarantined.append((tid, reason))
    rec.quarantined_rows[tid] = RecoveredTerminal(
        tid, seq, pool, kind, key, "failed", attempt, arrival, started, finished or arrival, reason,
        None, False, priority,
    )  # fmt: skip


def _tenant(spec: str) -> str | None:
    """The tenant of a finished task's definition (its key and visibility are the tenant's);
    the definition is decoded only when it names one."""
    if '"tenant"' not in spec:
        return None
    try:
        t = json.loads(spec).get("tenant")
    except (ValueError, AttributeError):
        return None
    return t if isinstance(t, str) and t else None


def _replay_of(spec: str) -> int | None:
    """The ``cronoq.replay_of`` tag of a finished task's definition (decoded only when the
    definition names it)."""
    if '"cronoq.replay_of"' not in spec:
        return None
    try:
        v = (json.loads(spec).get("tags") or {}).get("cronoq.replay_of")
    except (ValueError, AttributeError):
        return None
    return int(v) if isinstance(v, str) and v.isdigit() else None


def _replay_tag(spec: TaskRecord) -> int | None:
    v = (spec.tags or {}).get("cronoq.replay_of")
    return int(v) if isinstance(v, str) and v.isdigit() else None


def build_recovered(
    task_rows: Iterable[Sequence[Any]],
    schedule_rows: Iterable[Sequence[Any]],
    codec: Codec,
    cutoff_ns: int,
    paused_rows: Iterable[Sequence[Any]] = (),
    bulk_key_rows: Iterable[Sequence[Any]] = (),
    journal_rows: Iterable[Sequence[Any]] = (),
    signal_rows: Iterable[Sequence[Any]] = (),
) -> Recovered:
    """Rows (TASK_COLUMNS order; schedules as (name, spec, payload, next, last); paused names
    as (kind, name); bulk keys in BULK_KEY_COLUMNS order; journals and signals as
    store/_journal.py reads them) -> Recovered."""
    rec = Recovered()
    add_task_rows(rec, task_rows, codec, cutoff_ns)
    return finish_recovered(rec, schedule_rows, codec, paused_rows, bulk_key_rows, journal_rows, signal_rows)


def finished_record(row: Sequence[Any] | None, codec: Codec) -> RecoveredTerminal | None:
    """One task row (TASK_COLUMNS order) as the finished task it records; None for no row, a
    live task or a row that cannot be decoded (a store's history lookup, ``load_finished``)."""
    if row is None or row[12] is None:
        return None
    rec = Recovered()
    add_task_rows(rec, (row,), codec, 0)
    return rec.terminal[0] if rec.terminal else None


#: Rows of one key a history lookup by key reads, newest first: a key is reused once the
#: engine forgets it, and another tenant's rows of the same key are skipped.
KEY_HISTORY_ROWS: Final = 16


def finished_by_key(
    rows: Iterable[Sequence[Any]], tenant: str | None, codec: Codec
) -> RecoveredTerminal | None:
    """The newest of ``rows`` (one key's finished rows, newest first, TASK_COLUMNS order) that
    belongs to ``tenant`` (None: no tenant), as its finished task; None when none does."""
    for row in rows:
        if _tenant(row[7]) == (tenant or None):
            return finished_record(row, codec)
    return None


#: TASK_COLUMNS without the output (NULL in its place): a page of the history for a bulk
#: replay, which never needs the outputs
PAGE_COLUMNS: Final = ", ".join("NULL" if c == "output" else c for c in TASK_COLUMNS)


def finished_records(rows: Iterable[Sequence[Any]], codec: Codec) -> list[RecoveredTerminal]:
    """Finished task rows (TASK_COLUMNS order) as the finished tasks they record, in row
    order (a row that cannot be decoded is left out): a page of the store's history."""
    rec = Recovered()
    add_task_rows(rec, rows, codec, 0)
    return rec.terminal


def add_task_rows(rec: Recovered, task_rows: Iterable[Sequence[Any]], codec: Codec, cutoff_ns: int) -> None:
    """Decode task rows into ``rec`` (call again with the next rows: rows may be streamed)."""
    for row in task_rows:
        (
            tid,
            seq,
            arrival,
            pool,
            kind,
            priority,
            key,
            spec,
            payload,
            status,
            attempt,
            started,
            finished,
            message,
            output,
            has_output,
        ) = row
        tid = task_id(tid)

        if finished is not None:
            if finished < cutoff_ns:
                continue
            try:  # (an undecodable definition only loses the options: the outcome stays)
                spec_rec: TaskRecord | None = spec_from_json(spec, None)
            except Exception:
                spec_rec = None
            out = None
            if has_output and output is not None:
                try:
                    out = codec.decode(bytes(output))
                except Exception as e:
                    _quarantine(rec, row, f"cannot decode output: {e}")
                    continue
            rec.terminal.append(
                RecoveredTerminal(
                    tid,
                    seq,
                    pool,
                    kind,
                    key,
                    status,
                    attempt,
                    arrival,
                    started,
                    finished,
                    message,
                    out,
                    bool(has_output) and output is not None,
                    priority,
                    _tenant(spec) if spec_rec is None else spec_rec.tenant,
                    _replay_of(spec) if spec_rec is None else _replay_tag(spec_rec),
                    spec_rec,
                )
            )
            continue
        try:
            # (the row's payload bytes are not kept beside the decoded payload: recovery holds
            # each payload once, and with a streamed ``task_rows`` never the whole table)
            spec_rec = spec_from_json(spec, None)
        except Exception as e:
            _quarantine(rec, row, f"cannot decode task definition: {e}")
            continue
        try:
            obj = None if payload is None else codec.decode(bytes(payload))
        except Exception as e:
            _quarantine(rec, row, f"cannot decode payload: {e}")
            continue
        rec.tasks.append(RecoveredTask(tid, seq, arrival, spec_rec, obj, status, attempt, started, message))


class HistoryRefs:
    """The finished rows outside a load's window that the loaded state still needs, whatever
    their age (docs/reference/behaviour.md#recovery-window): ``ids`` (stored ids) of the parents that
    live tasks name by id, the tasks that live tasks' journals spawned or wait for
    (engine/parking.py) and the last occurrence of each schedule (engine/recurring.py); and
    ``keys`` (key -> tenants) of the parents named by a key that no loaded row holds."""

    __slots__ = ("ids", "keys")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.keys: dict[str, set[str | None]] = {}


def referenced(
    deps: Iterable[Sequence[Any]],
    journal_records: Iterable[str],
    lasts: Iterable[int | None],
) -> tuple[set[int], set[tuple[str | None, str]]]:
    """What live state refers to in the store's history, the one definition a load
    (:func:`history_refs`) and a prune (:func:`prune_refs`) share: the task ids (uint64) and
    the ``(tenant, key)`` pairs named by ``deps`` (per live task with edges: its tenant and
    its edges' targets, ids or keys, first; anything else after them is ignored), the ids a
    journal record spawned or waits for (``["spawn"|"wait", _, [ids], ...]``, its JSON text)
    and the schedules' last occurrences (``lasts``: stored ids, 0 or None for none)."""
    ids: set[int] = set()
    wanted: set[tuple[str | None, str]] = set()  # (tenant, key)
    for dep in deps:
        tenant = dep[0]
        for target in dep[1]:
            if isinstance(target, str):
                wanted.add((tenant, target))
            elif type(target) is int:
                ids.add(target)
    for text in journal_records:
        if not text.startswith(('["spawn"', '["wait"')):
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, list) and len(record) > 2 and isinstance(record[2], list):
            ids.update(i for i in record[2] if type(i) is int)
    for last in lasts:
        if last:
            ids.add(task_id(last))
    return ids, wanted


def history_refs(
    rec: Recovered, schedule_rows: Iterable[Sequence[Any]], journal_rows: Iterable[Sequence[Any]]
) -> HistoryRefs:
    """What of the store's history ``rec`` (the live rows and the window's finished rows, as
    :func:`add_task_rows` decoded them) refers to but does not hold (see :class:`HistoryRefs`);
    schedules and journals as the stores select them."""
    ids, wanted = referenced(
        ((t.spec.tenant, [e[0] for e in t.spec.deps]) for t in rec.tasks if t.spec.deps),
        (row[2] for row in journal_rows),  # (task, idx, record, resumes)
        (row[4] for row in schedule_rows),  # (name, spec, payload, next, last)
    )
    refs = HistoryRefs()
    if ids:  # (the sets of what was loaded only when something may be missing from it)
        have = {t.id for t in rec.tasks}
        have.update(t.id for t in rec.terminal)
        have.update(rec.quarantined_rows)
        refs.ids = sorted(db_id(i) for i in ids if i not in have and 0 < i < _U64)
    if wanted:
        held = {(t.spec.tenant, t.spec.key) for t in rec.tasks if t.spec.key is not None}
        held.update((t.tenant, t.key) for t in rec.terminal if t.key is not None)
        for tenant, key in wanted - held:
            refs.keys.setdefault(key, set()).add(tenant)
    return refs


#: A prune's reads of what live state refers to (:func:`prune_refs`), both SQL dialects: the
#: ids and definitions of the live rows with edges (through the live rows' index; a
#: definition is compact JSON, so only one with edges holds ``"deps":`` outside a string), the
#: journal records of spawns and waits, the schedules' last occurrences
PRUNE_LIVE_DEPS: Final = (
    "SELECT id, spec FROM {t}cronoq_tasks WHERE finished IS NULL AND spec LIKE '%\"deps\":%'"
)
PRUNE_JOURNALS: Final = (
    "SELECT record FROM {t}cronoq_journal WHERE record LIKE '[\"spawn\"%' OR record LIKE '[\"wait\"%'"
)
PRUNE_LASTS: Final = "SELECT last FROM {t}cronoq_schedules WHERE last <> 0"

#: the most definitions a :class:`RefsCache` holds (a prune parses the others each time)
REFS_CACHE_MAX: Final = 250_000

#: what a prune reads of one live definition (:func:`spec_refs`): its tenant, its edges'
#: targets and the definition's text, which the entry is valid for
SpecRefs = tuple[str | None, tuple[Any, ...], str]


def spec_refs(spec: str) -> SpecRefs:
    """A stored definition (its JSON text) as :func:`referenced` reads it; no targets if it
    cannot be read."""
    try:
        d = json.loads(spec)
    except ValueError:
        return None, (), spec
    if not isinstance(d, dict) or not isinstance(deps := d.get("deps"), list):
        return None, (), spec
    tenant = d.get("tenant")
    targets = tuple(e[0] for e in deps if isinstance(e, list) and e)
    return (tenant if isinstance(tenant, str) and tenant else None), targets, spec


class RefsCache:
    """The :func:`spec_refs` of the live definitions a store's prunes read, by stored id, so a
    prune parses only the definitions it has not seen: parsing every live definition with
    edges each time cost about 5 us each (0.8 s of CPU for 100,000, with SQLite's write lock
    held); docs/benchmarks.md has the figures.

    An entry is valid only for the definition text it was parsed from (the texts are
    compared, not hashed): a row written again under its id with another definition is parsed
    again, so no write has to tell the cache anything, whichever process made it.  Each prune
    keeps only the rows it read (the live definitions with edges), at most ``limit``: a
    finished or deleted row leaves the cache at the next prune, and memory stays bounded by
    the live tasks with edges (about 500 B each: the text, the targets, the entry).
    ``parsed`` counts the definitions parsed (not found).  One store's prunes run one at a
    time: no locking.
    """

    __slots__ = ("entries", "limit", "parsed")

    def __init__(self, limit: int = REFS_CACHE_MAX) -> None:
        self.entries: dict[int, SpecRefs] = {}
        self.limit = limit
        self.parsed = 0

    def refs(self, rows: Iterable[Sequence[Any]]) -> list[SpecRefs]:
        """The :func:`spec_refs` of each ``(id, spec)`` row (as ``PRUNE_LIVE_DEPS`` selects
        them), parsing only the rows not cached with the same text; the cache then holds
        these rows."""
        old = self.entries
        new: dict[int, SpecRefs] = {}
        room = self.limit
        out: list[SpecRefs] = []
        parsed = 0
        for tid, spec in rows:
            e = old.get(tid)
            if e is None or e[2] != spec:
                e = spec_refs(spec)
                parsed += 1
            if room > 0:
                new[tid] = e
                room -= 1
            out.append(e)
        self.entries = new
        self.parsed += parsed
        return out


def prune_refs(
    live_specs: Iterable[Sequence[Any]],
    journal_rows: Iterable[Sequence[Any]],
    last_rows: Iterable[Sequence[Any]],
    cache: RefsCache | None = None,
) -> HistoryRefs:
    """The finished rows a prune must keep whatever their age, as :func:`referenced` defines
    them (what a load reads back past its window, so prune and load agree): ``ids`` (stored
    ids) and ``keys`` (key -> tenants) whose newest finished holder stays (the store selects
    the holders and keeps :func:`newest_holders`).  Rows as ``PRUNE_LIVE_DEPS``,
    ``PRUNE_JOURNALS`` and ``PRUNE_LASTS`` select them; ``cache``: the store's
    :class:`RefsCache` (None: parse every definition).  A key also held by a live task keeps
    its newest finished holder too (one row a key at most: the live rows' keys are not read)."""
    deps = (cache if cache is not None else RefsCache(0)).refs(live_specs)
    ids, wanted = referenced(deps, (str(r[0]) for r in journal_rows), (r[0] for r in last_rows))
    refs = HistoryRefs()
    refs.ids = sorted(db_id(i) for i in ids if 0 < i < _U64)
    for tenant, key in wanted:
        refs.keys.setdefault(key, set()).add(tenant)
    return refs


def newest_holders(rows: Iterable[Sequence[Any]], keys: dict[str, set[str | None]]) -> list[int]:
    """Of ``rows`` (``(id, key, spec)`` of finished rows of ``keys``, newest first), the stored
    ids of the newest holder of each wanted (key, tenant), as :func:`key_history_rows` picks it."""
    out: list[int] = []
    seen: set[tuple[str, str | None]] = set()
    for tid, key, spec in rows:
        tenant = _tenant(spec)
        if tenant in keys.get(key, ()) and (key, tenant) not in seen:
            seen.add((key, tenant))
            out.append(int(tid))
    return out


def key_history_rows(rows: Iterable[Sequence[Any]], keys: dict[str, set[str | None]]) -> list[Sequence[Any]]:
    """Of ``rows`` (finished rows of ``keys``, newest first, TASK_COLUMNS order), the newest of
    each wanted (key, tenant): the one that held the key last, as it would if it were loaded."""
    out: list[Sequence[Any]] = []
    seen: set[tuple[str, str | None]] = set()
    for row in rows:
        key, tenant = row[6], _tenant(row[7])
        if tenant in keys.get(key, ()) and (key, tenant) not in seen:
            seen.add((key, tenant))
            out.append(row)
    return out


def finish_recovered(
    rec: Recovered,
    schedule_rows: Iterable[Sequence[Any]],
    codec: Codec,
    paused_rows: Iterable[Sequence[Any]] = (),
    bulk_key_rows: Iterable[Sequence[Any]] = (),
    journal_rows: Iterable[Sequence[Any]] = (),
    signal_rows: Iterable[Sequence[Any]] = (),
) -> Recovered:
    """Add the schedules, the journals and signals (store/_journal.py), the paused names and
    the bulk request keys (BULK_KEY_COLUMNS order, newest first, as the stores select them),
    and put ``rec`` in id order."""
    rec.paused = [(str(kind), str(name)) for kind, name in paused_rows]
    rec.journals = journals_from_rows(journal_rows)
    rec.signals = signals_from_rows(signal_rows)
    rec.bulk_keys = [
        BulkKeyChange(str(a), str(t) or None, str(k), int(m), int(n), bool(d), int(at))
        for a, t, k, m, n, d, at in bulk_key_rows
    ][::-1]
    for name, spec, payload, nxt, last in schedule_rows:
        try:
            obj = None if payload is None else codec.decode(bytes(payload))
            srec = schedule_from_json(spec, obj)
        except Exception as e:
            log.warning("recurring schedule %r skipped: cannot decode it: %s", name, e)
            continue
        rec.schedules.append(RecoveredSchedule(srec, nxt, task_id(last or 0)))
    rec.tasks.sort(key=lambda t: t.id)
    rec.terminal.sort(key=lambda t: t.id)
    return rec
