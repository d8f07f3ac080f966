"""Binding a task's arguments to its signature: the ``{"args", "kwargs"}`` payload, both ways.

Theory of operation
-------------------
:class:`Binding` is built once per task at decoration: it reads the signature and the
resolved type hints, notes whether the first parameter takes the :class:`~cronoq.TaskContext`
(annotated so), and builds one :class:`~cronoq.tasks.convert.Converter` per parameter and one
for the return value.

* :meth:`Binding.encode` (submission) turns ``(*args, **kwargs)`` into the wire payload
  ``{"args": [...], "kwargs": {...}}``. The common call — positional arguments only, exactly
  the positional parameters, every converter native — is checked in one loop without
  ``inspect``; anything else goes through ``Signature.bind`` (missing or extra arguments) and
  then the converters. Errors are ``SubmitError("invalid", ...)`` (a ``ValueError``) naming
  the task and the argument, raised before anything is submitted.
* :meth:`Binding.decode` (the worker's side) checks the payload's shape, binds it the same
  way and converts each value back into its annotated type; errors are
  :class:`~cronoq.Permanent` (retrying cannot fix bad arguments).
* :meth:`Binding.result_to_wire` / :meth:`Binding.result_from_wire` carry the return value.

Containers (lists, tuples, dicts) are copied on both sides, the fast paths included
(:mod:`~cronoq.tasks.convert`): what a call sends is a snapshot of its arguments, and each
attempt gets arguments of its own.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from cronoq.errors import InvalidSubmission, Permanent
from cronoq.runtime.context import TaskContext
from cronoq.tasks.convert import (
    ConversionError,
    Converter,
    Load,
    TaskDefinitionError,
    converter_for,
    json_copy,
)

__all__ = ["Binding", "Payload"]

Payload = dict[str, Any]

_EMPTY = inspect.Parameter.empty
_PAYLOAD_KEYS = frozenset(("args", "kwargs"))
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Binding:
    """Signature, converters and payload codec of one task function (see the module docstring)."""

    __slots__ = (
        "_convs",
        "_checks",
        "_exact",
        "_fast",
        "_loads",
        "_n_positional",
        "_sig",
        "_var_kw",
        "_var_pos",
        "all_native",
        "name",
        "result",
        "takes_context",
    )

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise TaskDefinitionError(f"task '{name}': cannot read the signature of {fn!r}: {e}") from None
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as e:
            raise TaskDefinitionError(
                f"task '{name}': cannot resolve the annotations of {fn!r}: {e}"
            ) from None
        params = list(sig.parameters.values())
        self.takes_context = bool(params) and hints.get(params[0].name) is TaskContext
        if self.takes_context:
            if params[0].kind not in _POSITIONAL:
                raise TaskDefinitionError(f"task '{name}': the TaskContext parameter must be positional")
            params = params[1:]
        for p in params:
            if hints.get(p.name) is TaskContext:
                raise TaskDefinitionError(
                    f"task '{name}': only the first parameter may take the TaskContext (got '{p.name}')"
                )
        shown = {k: None if v is type(None) else v for k, v in hints.items()}  # (`-> None`, not NoneType)
        params = [p.replace(annotation=shown[p.name]) if p.name in shown else p for p in params]
        self._sig = sig.replace(
            parameters=params, return_annotation=shown.get("return", sig.return_annotation)
        )
        self._convs: dict[str, Converter] = {}
        self._var_pos: str | None = None
        self._var_kw: str | None = None
        for p in params:
            self._convs[p.name] = converter_for(hints.get(p.name, Any), f"task '{name}', argument '{p.name}'")
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                self._var_pos = p.name
            elif p.kind is inspect.Parameter.VAR_KEYWORD:
                self._var_kw = p.name
            if p.default is not _EMPTY:
                try:
                    self._convs[p.name].to_wire(p.default)
                except ConversionError as e:
                    raise TaskDefinitionError(
                        f"task '{name}': the default of argument '{p.name}' does not fit: {e}"
                    ) from None
        ret = hints.get("return", Any)  # (for an async def, the hint is the awaited type)
        self.result = converter_for(ret, f"task '{name}', return value")
        positional = [p for p in params if p.kind in _POSITIONAL]
        self._n_positional = len(positional)
        self.all_native = all(c.native for c in self._convs.values())
        # the fast path: a call with exactly the positional parameters, no keywords
        self._fast: tuple[Converter, ...] | None = (
            tuple(self._convs[p.name] for p in positional) if len(positional) == len(params) else None
        )
        # ... the containers among them: copied when sent, loaded into fresh objects when received
        self._loads: tuple[tuple[int, Load], ...] = tuple(
            (i, c.load) for i, c in enumerate(self._fast or ()) if c.load is not None
        )
        # ... and when every one of them is native, just their checks (the hot path: JSON arguments)
        checks = tuple(c.check for c in self._fast or ())
        self._checks: tuple[Callable[[object], bool], ...] | None = (
            checks if self._fast is not None and all(c is not None for c in checks) else None  # type: ignore[assignment]
        )
        # ... and when they are all int/str/bool, their exact types: a check without a call
        exact = tuple(c.annotation for c in self._fast or ())
        self._exact: tuple[type, ...] | None = (
            exact  # type: ignore[assignment]
            if self._fast is not None and all(t in (int, str, bool) for t in exact)
            else None
        )

    @property
    def signature(self) -> inspect.Signature:
        """The task's signature without its TaskContext parameter."""
        return self._sig

    # ---------------------------------------------------------------- submission side

    def encode(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Payload:
        """The wire payload of a call; ``SubmitError("invalid")`` if it does not fit.

        On the hot path ``args`` is the call's own tuple (JSON encodes it as an array).
        """
        exact = self._exact
        if exact is not None and not kwargs and len(args) == len(exact):  # (inlined: the hot path)
            for v, t in zip(args, exact):
                if type(v) is not t:
                    break
            else:
                return {"args": args, "kwargs": {}}
        if not kwargs and self._native_ok(args):
            if self._loads:
                out = list(args)
                for i, _ in self._loads:
                    out[i] = json_copy(out[i])
                return {"args": out, "kwargs": {}}
            return {"args": args, "kwargs": {}}
        fast = self._fast
        if fast is not None and not kwargs and len(args) == len(fast):
            out = list(args)
            for i, conv in enumerate(fast):
                v = out[i]
                try:
                    w = conv.to_wire(v)
                except ConversionError as e:
                    raise self._invalid(self._param_at(i), e) from None
                if w is not v:
                    out[i] = w
            return {"args": out, "kwargs": {}}
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InvalidSubmission(self._unbound(e, args)) from None
        return {"args": self._encode_args(bound.args), "kwargs": self._encode_kwargs(bound.kwargs)}

    def encode_holes(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], is_hole: Callable[[object], bool]
    ) -> Payload:
        """As :meth:`encode`, but arguments for which ``is_hole`` holds (they hold placeholder
        markers, tasks/placeholders.py) travel as they are: converted when substituted."""
        fast = self._fast
        if fast is not None and not kwargs and len(args) == len(fast):  # (no Signature.bind)
            out = [
                v if is_hole(v) else self._wire_at(i, conv, v) for i, (conv, v) in enumerate(zip(fast, args))
            ]
            return {"args": out, "kwargs": {}}
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InvalidSubmission(self._unbound(e, args)) from None
        return {
            "args": self._encode_args(bound.args, is_hole),
            "kwargs": self._encode_kwargs(bound.kwargs, is_hole),
        }

    def _unbound(self, e: TypeError, args: object) -> str:
        """The message of arguments that do not bind (``Signature.bind``'s, with what the task
        takes when there are too many positional ones: that message names none)."""
        msg = str(e)
        if msg == "too many positional arguments" and isinstance(args, (list, tuple)):
            names = [p.name for p in self._sig.parameters.values() if p.kind in _POSITIONAL]
            msg = f"{msg}: it takes {len(names)} ({', '.join(names) or 'none'}), got {len(args)}"
        return f"task '{self.name}': {msg}"

    def _wire_at(self, i: int, conv: Converter, v: object) -> object:
        try:
            return conv.to_wire(v)
        except ConversionError as e:
            raise self._invalid(self._param_at(i), e) from None

    def _param_at(self, i: int) -> str:
        names = list(self._convs)
        return names[i] if i < len(names) else (self._var_pos or "?")

    def _invalid(self, param: str, e: Exception) -> InvalidSubmission:
        return InvalidSubmission(f"task '{self.name}', argument '{param}': {e}")

    def _encode_args(
        self, args: tuple[Any, ...], is_hole: Callable[[object], bool] | None = None
    ) -> list[Any]:
        names = list(self._convs)
        out = []
        for i, v in enumerate(args):
            name = names[i] if i < self._n_positional else self._var_pos
            assert name is not None
            if is_hole is not None and is_hole(v):
                out.append(v)
                continue
            try:
                out.append(self._convs[name].to_wire(v))
            except ConversionError as e:
                raise self._invalid(name, e) from None
        return out

    def _encode_kwargs(
        self, kwargs: dict[str, Any], is_hole: Callable[[object], bool] | None = None
    ) -> dict[str, Any]:
        out = {}
        for k, v in kwargs.items():
            if is_hole is not None and is_hole(v):
                out[k] = v
                continue
            conv = self._convs.get(k)
            if conv is None:
                assert self._var_kw is not None
                conv = self._convs[self._var_kw]
            try:
                out[k] = conv.to_wire(v)
            except ConversionError as e:
                raise self._invalid(k, e) from None
        return out

    # ---------------------------------------------------------------- worker side

    def fast_args(self, payload: object) -> list[Any] | tuple[Any, ...] | None:
        """The positional arguments of the common payload — ``{"args": [...], "kwargs": {}}``
        whose values pass the native checks — or None (then :meth:`decode` has the answer).
        Containers among them are fresh objects: the payload's own are never handed out."""
        if type(payload) is not dict or len(payload) != 2:
            return None
        args = payload.get("args")
        if (type(args) is not list and type(args) is not tuple) or payload.get("kwargs") != {}:
            return None
        if not self._native_ok(args):
            return None
        return self._loaded(args) if self._loads else args

    def _loaded(self, args: list[Any] | tuple[Any, ...]) -> list[Any]:
        out = list(args)
        for i, load in self._loads:
            out[i] = load(out[i])
        return out

    def _native_ok(self, args: list[Any] | tuple[Any, ...]) -> bool:
        """True when ``args`` are exactly the positional parameters and pass their native checks
        (by exact type for int/str/bool: no call per argument)."""
        exact = self._exact
        if exact is not None:
            if len(args) != len(exact):
                return False
            for v, t in zip(args, exact):  # noqa: SIM110 - a loop: no generator frame on the hot path
                if type(v) is not t:
                    return False
            return True
        checks = self._checks
        if checks is None or len(args) != len(checks):
            return False
        for v, check in zip(args, checks):  # noqa: SIM110 - as above
            if not check(v):
                return False
        return True

    def decode(self, payload: object) -> tuple[list[Any], dict[str, Any]]:
        """``(args, kwargs)`` for the function from a wire payload; Permanent if invalid."""
        if payload is None:
            args: object = []
            kwargs: object = {}
        elif type(payload) is dict:
            args = payload.get("args", [])
            kwargs = payload.get("kwargs", {})
            if not payload.keys() <= _PAYLOAD_KEYS:
                extra = sorted(payload.keys() - _PAYLOAD_KEYS)
                raise Permanent(
                    f"task '{self.name}': unexpected payload keys {extra} (expected args, kwargs)"
                )
        else:
            raise Permanent(
                f"task '{self.name}': the payload must be a JSON object"
                f' {{"args": [...], "kwargs": {{...}}}} (got {type(payload).__name__})'
            )
        if not isinstance(args, (list, tuple)) or type(kwargs) is not dict:
            raise Permanent(f"task '{self.name}': payload args must be a list and kwargs an object")
        if not kwargs and self._native_ok(args):
            return self._loaded(args), {}
        fast = self._fast
        if fast is not None and not kwargs and len(args) == len(fast):
            out = list(args)
            for i, conv in enumerate(fast):
                try:
                    out[i] = conv.from_wire(out[i])
                except ConversionError as e:
                    raise Permanent(f"task '{self.name}', argument '{self._param_at(i)}': {e}") from None
            return out, {}
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise Permanent(self._unbound(e, args)) from None
        names = list(self._convs)
        out_args = []
        for i, v in enumerate(bound.args):
            name = names[i] if i < self._n_positional else self._var_pos
            assert name is not None
            out_args.append(self._load(name, v))
        out_kwargs = {}
        for k, v in bound.kwargs.items():
            out_kwargs[k] = self._load(k if k in self._convs else self._var_kw or k, v, shown=k)
        return out_args, out_kwargs

    def _load(self, name: str, value: object, shown: str | None = None) -> object:
        try:
            return self._convs[name].from_wire(value)
        except ConversionError as e:
            raise Permanent(f"task '{self.name}', argument '{shown or name}': {e}") from None

    # ---------------------------------------------------------------- return value

    def result_to_wire(self, value: object) -> object:
        """The JSON form of the function's return value; Permanent if it does not fit."""
        try:
            return self.result.to_wire(value)
        except ConversionError as e:
            raise Permanent(f"task '{self.name}', return value: {e}") from None

    def result_from_wire(self, value: object) -> object:
        """The annotated return value from its JSON form (the submitter's side)."""
        return self.result.from_wire(value)
