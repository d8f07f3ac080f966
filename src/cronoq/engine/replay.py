"""Replays: a finished task submitted again as a new task (docs/how-to/operations.md#replay).

Theory of operation
-------------------
A replay is an ordinary submission built from a retained task: the same options (pool, kind,
priority, retry, timeout, resources, labels, tenant, tags) and payload, a new id, and the tag
``cronoq.replay_of=<original id>``.  Its deadline, fixed start and dependencies are not
carried over (they were instants and edges of the original run): a replay is ready at once.
Its payload's placeholders of its parents' outputs are filled by the shell when it is made
(``runtime/operations.py``, ``Operations._payload``), from the original's ``parents``.
If the original holds its key, the key *moves* to the replay (lookups by key find the replay;
the original stays retained and findable by id); a key already held by another task (an
earlier replay) stays where it is and the replay has none.

:func:`check` refuses, with a :class:`~cronoq.errors.ReplayError`, a task that is unknown
(or another tenant's), not finished, or succeeded without ``force``.  The payload comes from
the engine when it kept it (``Core.keep_payloads``: no durable store) or from the shell (read
back from the store: :func:`payload_of` is None then); with neither it is
``payload_unavailable``.

Links: the replay's ``replay_of`` is its tag, so it is as durable as the task; the
original's ``replayed_by`` (the latest replay) is a ``TaskState`` field set here, and after a
restart rebuilt from the replays' tags (:func:`link_replays`), so no extra mutation exists.

From the store's history: a task the engine has forgotten (finished longer ago than its
retention) but a durable store still keeps (``store.keep_finished_s``) is rebuilt from its row
with its whole definition (``recovery.terminal_state``, not inserted into the core) and
replayed by :func:`replay_forgotten`: the same checks and options; the key it had moves to the
replay if no task holds it now.  Its ``replayed_by`` is not kept (the engine holds no state
for it); the replay's ``replay_of`` tag is, as for any replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cronoq.engine.keys import scoped_key
from cronoq.engine.model import FIRST_TERMINAL, SUCCEEDED, TaskState
from cronoq.engine.mutations import Recovered
from cronoq.errors import ReplayError

if TYPE_CHECKING:
    from cronoq.engine.core import Core

REPLAY_TAG: Final = "cronoq.replay_of"

__all__ = [
    "REPLAY_TAG",
    "check",
    "link_replays",
    "payload_of",
    "replay",
    "replay_forgotten",
    "replay_of",
    "replayed_by",
]


def replay_of(t: TaskState) -> int | None:
    """The id of the task ``t`` replays (its ``cronoq.replay_of`` tag), or None."""
    tags = t.opts.tags
    if not tags:
        return None
    v = tags.get(REPLAY_TAG)
    return int(v) if v is not None and v.isdigit() else None


def replayed_by(t: TaskState) -> int | None:
    """The id of the latest replay of ``t``, or None."""
    return t.replayed_by


def check(t: TaskState | None, ref: int | str, force: bool) -> TaskState:
    """``t`` (the task ``ref`` names) may be replayed; else ReplayError."""
    if t is None:
        raise ReplayError("unknown_task", f"unknown task {ref!r}")
    if t.status < FIRST_TERMINAL:
        raise ReplayError("not_finished", f"task {t.id} is not finished")
    if t.status == SUCCEEDED and not force:
        raise ReplayError("succeeded", f"task {t.id} succeeded (replay it with force)")
    return t


def payload_of(core: Core, t: TaskState) -> tuple[bool, object]:
    """``(held, payload)``: whether the engine still holds ``t``'s payload, and the payload."""
    if core.keep_payloads:
        return True, t.payload
    return False, None


def replay(core: Core, now: int, t: TaskState, payload: object, blob: bytes | None) -> int:
    """Submit the replay of finished task ``t`` with ``payload`` (``blob``: its encoding, for
    a durable store); returns the new id.  SubmitError as for ``Core.submit`` (the key then
    stays with ``t``)."""
    opts = t.opts.unresolved()
    opts.tags = {**(t.opts.tags or {}), REPLAY_TAG: str(t.id)}
    key = t.key
    sk = None
    if key is not None:
        sk = scoped_key(t.opts.tenant, key)
        if core.keys.find(sk) == t.id:
            core.keys.free(sk, t.id)
        else:
            key = sk = None  # held by another task (an earlier replay): the replay has no key
    try:
        tid, _dup = core.submit(now, opts, payload, key, None, None, None, blob)
    except BaseException:
        if sk is not None:
            core.keys.reserve(sk, t.id)
        raise
    t.replayed_by = tid
    return tid


def link_replays(core: Core, rec: Recovered) -> None:
    """Recovery: set ``replayed_by`` on the originals of the recovered replays (id order, so
    the latest replay wins)."""
    tasks = core.tasks
    pairs: list[tuple[int, int]] = []
    for term in rec.terminal:
        if term.replay_of is not None:
            pairs.append((term.id, term.replay_of))
    for r in rec.tasks:
        tags = r.spec.tags
        v = tags.get(REPLAY_TAG) if tags else None
        if v is not None and v.isdigit():
            pairs.append((r.id, int(v)))
    for tid, orig in sorted(pairs):
        t = tasks.get(orig)
        if t is not None and tid in tasks:
            t.replayed_by = tid


def replay_forgotten(core: Core, now: int, t: TaskState, payload: object, blob: bytes | None) -> int:
    """Submit the replay of ``t``, a finished task rebuilt from the store's history that the
    core no longer holds; its key moves to the replay when no task holds it."""
    sk = None if t.key is None else scoped_key(t.opts.tenant, t.key)
    if sk is not None and core.keys.find(sk) is None:
        core.keys.reserve(sk, t.id)  # (so that replay() moves it)
    else:
        sk = None
    try:
        return replay(core, now, t, payload, blob)
    except BaseException:
        if sk is not None:
            core.keys.free(sk, t.id)
        raise
