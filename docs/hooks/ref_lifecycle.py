"""The transition table of the behaviour reference, rendered from the engine's own table.

``cronoq.engine.model.TRANSITIONS`` is the lifecycle: ``(from status, event) -> to status``,
and nothing else moves a task. Each row of the page is one entry of it; only what each event
means is written here (:data:`EVENTS`), checked by :func:`problems` against
``EVENT_NAMES``.
"""

from __future__ import annotations

from collections.abc import Mapping

#: What happens, for each engine event name.
EVENTS: Mapping[str, str] = {
    "unblock": (
        "every dependency edge is satisfied (or a parked task's wait holds) and there is no fixed start"
        " in the future"
    ),
    "unblock_later": (
        "every dependency edge is satisfied; the fixed start (or a durable sleep's end) is in the future"
    ),
    "edge_broken": "an edge can no longer be satisfied, or an awaited key timed out",
    "start_due": "the fixed start time (or the end of a durable sleep) is reached",
    "miss_skip": 'not started by start + tolerance, `on_miss="skip"`',
    "miss_fail": 'not started by start + tolerance, `on_miss="fail"`',
    "dispatch": "a slot, its resources and its labels are free: an attempt starts",
    "succeed": "the executor returned",
    "permanent": "the executor raised `Permanent`",
    "retry": "a retryable failure, a timeout or a lost lease, with attempts left",
    "exhausted": "a retryable failure, a timeout or a lost lease, with no attempts left",
    "backoff_done": "the retry backoff elapsed",
    "cancel": "`cancel(ref)` (a running attempt is aborted)",
    "shed": "evicted by the pool's overflow policy under overload",
    "occurrence_skip": 'a cron occurrence came due while the previous one still runs (`overlap="skip"`)',
    "park": (
        "the running task waits without a slot (`ctx.wait_for`, `ctx.sleep_for`, `ctx.wait_signal`):"
        " not an attempt"
    ),
}


def render() -> str:
    from cronoq.engine.model import EVENT_NAMES, STATUS_NAMES, TRANSITIONS

    rows = [
        "| from | event | to |",
        "|---|---|---|",
        "| (submit) | always | `blocked` (momentary when no dependency is unmet) |",
    ]
    by_event: dict[tuple[int, int], list[int]] = {}
    for (src, ev), dst in TRANSITIONS.items():
        by_event.setdefault((ev, dst), []).append(src)
    for (ev, dst), sources in by_event.items():
        froms = ", ".join(f"`{STATUS_NAMES[s]}`" for s in sources)
        what = EVENTS.get(EVENT_NAMES[ev], f"`{EVENT_NAMES[ev]}`")
        rows.append(f"| {froms} | {what} | `{STATUS_NAMES[dst]}` |")
    return "\n".join(rows)


def problems() -> list[str]:
    from cronoq.engine.model import EVENT_NAMES

    out = [
        f"engine event {e!r} has no description in docs/hooks/ref_lifecycle.py"
        for e in EVENT_NAMES
        if e not in EVENTS
    ]
    out += [
        f"docs/hooks/ref_lifecycle.py describes {e!r}, which is no engine event"
        for e in EVENTS
        if e not in EVENT_NAMES
    ]
    return out
