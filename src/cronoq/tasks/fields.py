"""Which task fields a named task takes where, and their validation.

A task definition carries defaults for every call (``@app.task(pool=..., priority=...)``); a
call may override them (``t.options(key=..., start_in=...)``); a recurring schedule takes its
own set. Every set is validated when it is written, with the same rules and messages as a plain
submission (``Submission.from_kwargs`` does the checking), so a bad field fails at
decoration or at ``options()``, never halfway through a submission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronoq.errors import ArgumentTypeError
from cronoq.spec import fields as task_fields
from cronoq.spec.submission import Submission

__all__ = ["CALL_FIELDS", "DEFINITION_FIELDS", "RECURRING_FIELDS", "check_fields"]

#: what ``@app.task(...)`` takes besides ``name``: the defaults of every call (the task options
#: of spec.fields, and a relative deadline)
DEFINITION_FIELDS = task_fields.names(option=True) | {"deadline_in"}

#: what ``t.options(...)`` takes: per-call overrides (``kind`` is fixed: it names the task)
CALL_FIELDS = (DEFINITION_FIELDS - {"kind"}) | {
    "key",
    "deadline_at",
    "start_in",
    "start_at",
    "after",
    "deps",
}

#: what ``@app.recurring(...)`` takes besides its own arguments
RECURRING_FIELDS = (DEFINITION_FIELDS - {"kind"}) | {"key"}


def check_fields(fields: Mapping[str, Any], allowed: frozenset[str], where: str) -> dict[str, Any]:
    """``fields`` without the ``None`` values, validated; ArgumentTypeError for an unknown name,
    the usual task-field errors (ValueError) for a bad value."""
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise ArgumentTypeError(
            f"{where}: unexpected task field '{unknown[0]}' (allowed: {', '.join(sorted(allowed))})"
        )
    out = {k: v for k, v in fields.items() if v is not None}
    Submission.from_kwargs(None, **out)  # the plain submission's validation, same messages
    return out
