"""The error reference: classes, SubmitError codes and their gRPC/HTTP statuses, from the code.

The class table is read from ``cronoq.errors.__all__`` (bases from each class's MRO, the
summary from its docstring); the code table joins ``cronoq.errors.SUBMIT_ERROR_CODES`` with the
server's own maps ``cronoq.server.convert.SUBMIT_STATUS`` (code → gRPC status) and
``HTTP_STATUS`` (gRPC status → HTTP status). Only the example messages are written here
(:data:`MESSAGES`); a code without one, or a message for a code that no longer exists, is
reported by :func:`problems` (a build warning and a test failure).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

#: What users see for each SubmitError code (the engine's and server's messages).
MESSAGES: Mapping[str, str] = {
    "unknown_pool": "`unknown pool '<name>'`",
    "unknown_resource": "`unknown resource '<name>'`",
    "resource_exceeds_capacity": "`requested amount exceeds capacity of resource '<name>' "
    "(the task needs <k> units, its capacity is <n>)`",
    "reservation_conflict": "`fixed-start reservation conflict`",
    "cycle": "`dependency cycle: task '<key>' depends on itself`, `dependency cycle in batch`, "
    "`dependency cycle through awaited key '<key>'`",
    "unknown_dependency": "`unknown dependency '<ref>'`",
    "full": "`pool '<name>' is full` (the pool is at `max_pending` and its overflow policy is `wait`; "
    "in-process `submit` waits instead of raising)",
    "overloaded": "`pool '<name>' is overloaded`; on the server also `too many pending tasks "
    "(limits.max_pending_total <n>)`",
    "duplicate_key_in_batch": "`duplicate key '<key>' in batch`",
    "invalid": "the field and the problem, e.g. `timeout must be a finite, non-negative number of seconds "
    "(got -1)`, `resource amount must be an int >= 1 (got 0 for 'gpu')`, "
    "`key must not contain a NUL character (U+0000)`",
}


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return re.sub(r":[a-z]+:`([^`]*)`", r"`\1`", text).replace("``", "`")


def classes() -> str:
    import cronoq.errors as errors

    rows = ["| class | is a | when |", "|---|---|---|"]
    for name in errors.__all__:
        obj = getattr(errors, name)
        if not isinstance(obj, type):
            continue
        bases = [b.__name__ for b in obj.__mro__[1:] if b not in (object, BaseException, Exception)]
        exported = name in __import__("cronoq").__all__
        shown = f"[`{name}`](api.md#cronoq.{name})" if exported else f"`cronoq.errors.{name}`"
        rows.append(f"| {shown} | {', '.join(f'`{b}`' for b in bases) or '-'} | {_summary(obj)} |")
    return "\n".join(rows)


def submit_codes() -> str:
    from cronoq.errors import SUBMIT_ERROR_CODES
    from cronoq.server.convert import HTTP_STATUS, SUBMIT_STATUS

    rows = ["| code | gRPC status | HTTP status | message |", "|---|---|---|---|"]
    for code in sorted(SUBMIT_ERROR_CODES, key=lambda c: (HTTP_STATUS.get(SUBMIT_STATUS.get(c, ""), 0), c)):
        grpc_name = SUBMIT_STATUS.get(code, "invalid_argument")
        http = HTTP_STATUS.get(grpc_name, 500)
        rows.append(
            f"| `{code}` | `{grpc_name.upper()}` | {http} | {MESSAGES.get(code, '**not described yet**')} |"
        )
    return "\n".join(rows)


def status_map() -> str:
    from cronoq.server.convert import HTTP_STATUS

    rows = ["| gRPC status | HTTP status | error body `code` |", "|---|---|---|"]
    for name, http in HTTP_STATUS.items():
        rows.append(f"| `{name.upper()}` | {http} | `{name}` (or the SubmitError code) |")
    return "\n".join(rows)


def problems() -> list[str]:
    from cronoq.errors import SUBMIT_ERROR_CODES

    out = [
        f"SubmitError code {c!r} has no message in docs/hooks/ref_errors.py"
        for c in sorted(SUBMIT_ERROR_CODES - set(MESSAGES))
    ]
    out += [
        f"docs/hooks/ref_errors.py describes {c!r}, which is no SubmitError code"
        for c in sorted(set(MESSAGES) - SUBMIT_ERROR_CODES)
    ]
    return out
