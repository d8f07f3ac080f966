"""The base of every configuration table: a frozen pydantic model that validates the way the
file reads.

:class:`Section` is ``frozen`` (hashable, picklable) and ``extra="forbid"``; its fields are
the table's keys, typed with :mod:`.values`. One wrap validator, :meth:`Section._validate`,
runs around pydantic's own validation of every table, nested ones included, and reports every
problem of the table at once:

1. a value that is not a table: ``must be a table (got 3)`` (:attr:`Section.table_what`);
2. unknown keys, in file order, with did-you-mean (:func:`~.translate.unknown_key`);
3. :meth:`Section.prepare`, only while a file is validated (a validation context with ``env``
   is given): rules that read the environment and fill in derived values (a token from
   ``token_env``, the store URL from ``url_env``);
4. pydantic's validation of the keys, its errors translated (:func:`~.translate.from_pydantic`;
   ``required`` carries :attr:`Section.required_notes`);
5. :meth:`Section.rules`: rules between the table's keys (``min <= max``, keys that only go
   with one ``kind``), run even when other keys are wrong, on the keys that are right.

Unknown keys are reported first, then the rest in :meth:`Section.rank` order (missing keys
first, or a table's :attr:`Section.report_order`): the order in which the file reads. The
problems are raised as one ``ValidationError`` (:func:`~.translate.to_pydantic`), so an
outer table adds its location and keeps going: nothing stops at the first problem.

Models may be built from code too, with keyword or (like the dataclasses they replace)
positional arguments; then only steps 1, 2, 4 and 5 apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from .errors import bad
from .translate import Problem, from_pydantic, to_pydantic, unknown_key
from .values import show

__all__ = ["FILE_CONTEXT", "Section", "Valid"]

#: the key of the validation context that marks a file's validation (the environment)
FILE_CONTEXT = "env"

#: ``valid(key)``: the key's value as given when present and right, else None
Valid = Callable[[str], Any]


class Section(BaseModel):
    """A table of the configuration file (see the module docstring)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True, validate_default=False
    )

    #: what the table must be, for ``must be <what> (got ...)``
    table_what: ClassVar[str] = "a table"
    #: the note after ``required`` of a missing key
    required_notes: ClassVar[Mapping[str, str]] = {}
    #: the keys a file may give (None: every field, by alias); the others are derived
    file_keys: ClassVar[tuple[str, ...] | None] = None
    #: the order of the keys' problems when it is not the keys' order
    report_order: ClassVar[tuple[str, ...]] = ()

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:  # positional construction, in field order (as the dataclasses allowed)
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
            data.update(zip(names, args, strict=False))
        super().__init__(**data)

    # (not a "custom" __init__ for pydantic: validation never calls it, only code does)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def table_keys(cls, *, file: bool = True) -> tuple[str, ...]:
        """The keys of the table (``file``: those a file may give, by alias), in order; code
        may also use the fields' names."""
        if file and cls.file_keys is not None:
            return cls.file_keys
        keys = tuple(f.alias or name for name, f in cls.model_fields.items())
        return keys if file else keys + tuple(n for n in cls.model_fields if n not in keys)

    @classmethod
    def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        """File-only rules and derived values: the data to validate, and problems."""
        return raw, []

    @classmethod
    def rules(cls, raw: Mapping[str, Any], valid: Valid) -> list[Problem]:
        """Rules between keys (``valid``: see :data:`Valid`)."""
        return []

    @classmethod
    def default_of(cls, key: str) -> Any:
        return cls.model_fields[key].get_default(call_default_factory=True)

    @classmethod
    def rank(cls, problem: Problem, step: str) -> int:
        """Where a problem goes among the table's (``step``: ``prepare``, ``keys`` or ``rules``):
        by :attr:`report_order` (``""``: the table itself), else missing keys first."""
        loc, msg = problem
        if cls.report_order:
            key = str(loc[0]) if loc else ""
            return cls.report_order.index(key) if key in cls.report_order else len(cls.report_order)
        return 0 if step == "keys" and len(loc) == 1 and msg.startswith("required") else 1

    @model_validator(mode="wrap")
    @classmethod
    def _validate(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise bad(f"must be {cls.table_what} (got {show(data)})")
        ctx = info.context
        env = ctx.get(FILE_CONTEXT) if isinstance(ctx, Mapping) else None
        known = cls.table_keys(file=env is not None)
        unknown = [unknown_key(k, known) for k in data if k not in known]
        found: list[tuple[Problem, str]] = []
        prepared = data
        if env is not None:
            prepared, more = cls.prepare(dict(data), env)
            found += [(p, "prepare") for p in more]
        result: Self | None = None
        try:
            result = handler(prepared)
        except ValidationError as e:
            found += [(p, "keys") for p in from_pydantic(e.errors(), cls.required_notes)]
        wrong = {p[0][0] for p, _ in found if p[0]} | {p[0][0] for p in unknown}

        def valid(key: str) -> Any:
            return data[key] if key in data and key not in wrong and key in known else None

        found += [(p, "rules") for p in cls.rules(data, valid)]
        found.sort(key=lambda f: cls.rank(*f))
        problems = unknown + [p for p, _ in found]
        if problems or result is None:
            raise to_pydantic(cls.__name__, problems)
        return result
