"""The errors of the server configuration: :class:`ConfigError` (what users see) and the
one pydantic error type every check of the package raises.

Every rule of the configuration, whether a value type of :mod:`.values`, a table's own rule
(:mod:`.base`) or a rule between tables (:mod:`.checks`), reports its problem as our message,
never pydantic's: :func:`bad` wraps it in a ``PydanticCustomError`` of type :data:`CUSTOM`
whose context carries the text, so it travels through pydantic's validation (which adds the key
path as ``loc``) unchanged. :mod:`.translate` turns the locations into ``pools[0].max`` paths
and :class:`ConfigError` renders the list: one line, or ``N configuration errors:``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pydantic_core import PydanticCustomError

__all__ = ["CUSTOM", "Bad", "ConfigError", "bad"]

#: the pydantic error type of every problem this package reports (its ``ctx["msg"]`` is the text)
CUSTOM: Final = "cronoq"


class ConfigError(ValueError):
    """An invalid configuration; ``errors`` lists every problem as ``<key path>: <message>``."""

    def __init__(self, errors: str | Sequence[str], source: str | None = None) -> None:
        self.errors: tuple[str, ...] = (errors,) if isinstance(errors, str) else tuple(errors)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        if len(self.errors) == 1:
            return prefix + self.errors[0]
        lines = "\n".join(f"  {e}" for e in self.errors)
        return f"{prefix}{len(self.errors)} configuration errors:\n{lines}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors, self.source))


class Bad(Exception):
    """A value failed a check; the message has no key path (validation adds it)."""


def bad(msg: str) -> PydanticCustomError:
    """Our message as the pydantic error of type :data:`CUSTOM`."""
    return PydanticCustomError(CUSTOM, "{msg}", {"msg": msg})
