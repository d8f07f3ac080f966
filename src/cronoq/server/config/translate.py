"""Pydantic's validation errors → our ``<key path>: <message>`` lines.

A problem is ``(loc, message)``: ``loc`` is pydantic's location tuple relative to some table
(``("pools", 0, "max")``), the message is already ours. The pieces:

- :func:`from_pydantic` reads the ``errors()`` of one table's validation (see
  :mod:`.base`): our own errors (type :data:`~.errors.CUSTOM`) keep their text; ``missing``
  becomes ``required`` plus the table's note for the key; pydantic's ``extra_forbidden`` is
  dropped, as the table reports unknown keys itself (:func:`unknown_key`, with did-you-mean)
  before anything else, the way the file reads; anything else keeps pydantic's words.
- :func:`to_pydantic` turns problems back into one ``ValidationError``, so an inner table's
  problems travel up through pydantic, which prefixes their locations.
- :func:`path` renders a location (``pools[0].max``) and :func:`line` a problem.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from .errors import CUSTOM, bad
from .values import show

__all__ = ["Loc", "Problem", "close_hint", "from_pydantic", "line", "path", "to_pydantic", "unknown_key"]

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]


def path(loc: Loc) -> str:
    """``("pools", 0, "max")`` → ``pools[0].max``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else part
    return out


def line(problem: Problem) -> str:
    loc, msg = problem
    return f"{path(loc)}: {msg}"


def close_hint(word: str, known: Sequence[str], *, label: str) -> str:
    """`` (did you mean 'x'?)`` or `` (<label>: a, b)``."""
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" ({label}: {', '.join(known)})"


def unknown_key(key: str, known: Sequence[str]) -> Problem:
    return (key,), f"unknown key{close_hint(key, known, label='known')}"


def from_pydantic(errors: Iterable[Mapping[str, Any]], notes: Mapping[str, str]) -> list[Problem]:
    """One table's pydantic errors as problems (locations relative to the table)."""
    out: list[Problem] = []
    for e in errors:
        loc: Loc = tuple(e["loc"])
        kind = e["type"]
        if kind == CUSTOM:
            out.append((loc, e["ctx"]["msg"]))
        elif kind == "extra_forbidden" and len(loc) == 1:
            continue  # reported by the table itself, with did-you-mean
        elif kind == "missing" and len(loc) == 1:
            note = notes.get(str(loc[0]))
            out.append((loc, f"required {note}" if note else "required"))
        else:  # pragma: no cover - every rule says it our way
            out.append((loc, f"{e['msg']} (got {show(e.get('input'))})"))
    return out


def to_pydantic(title: str, problems: Iterable[Problem]) -> ValidationError:
    details = [InitErrorDetails(type=bad(msg), loc=loc, input=None) for loc, msg in problems]
    return ValidationError.from_exception_data(title, details)
