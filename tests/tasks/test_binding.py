"""Binding: a signature ↔ the {"args", "kwargs"} payload, fast and general paths."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cronoq import Permanent, SubmitError, TaskContext
from cronoq.tasks.binding import Binding


async def exact(n: int, name: str, flag: bool) -> int:
    return n


async def checked(x: float, tags: list[str]) -> None: ...


def general(ctx: TaskContext, a: int, *rest: int, when: dt.date | None = None, **extra: str) -> str:
    return ""


def test_the_exact_type_fast_path() -> None:
    b = Binding(exact, "t")
    assert b.encode((1, "a", True), {}) == {"args": (1, "a", True), "kwargs": {}}  # the call's tuple
    assert b.fast_args({"args": [1, "a", False], "kwargs": {}}) == [1, "a", False]
    for bad in (
        {"args": [True, "a", False], "kwargs": {}},
        {"args": [1, "a"], "kwargs": {}},
        {"args": [1, "a", True], "kwargs": {"x": 1}},
        {"args": {1: 2}, "kwargs": {}},
        [1],
    ):
        assert b.fast_args(bad) is None  # fmt: skip
    with pytest.raises(SubmitError, match="argument 'n': expected int, got True"):
        b.encode((True, "a", True), {})
    assert b.encode((), {"n": 1, "name": "a", "flag": False}) == {"args": [1, "a", False], "kwargs": {}}


def test_the_checks_fast_path() -> None:
    b = Binding(checked, "t")
    assert b.encode((1, ["x"]), {}) == {"args": [1, ["x"]], "kwargs": {}}
    assert b.fast_args({"args": [1.5, ["x"]], "kwargs": {}}) == [1.5, ["x"]]
    assert b.fast_args({"args": (1.5, ["x"]), "kwargs": {}}) == [1.5, ["x"]]
    assert b.fast_args({"args": [1.5, [1]], "kwargs": {}}) is None
    with pytest.raises(SubmitError, match="argument 'tags': expected list\\[str\\], got \\[1\\]"):
        b.encode((1.0, [1]), {})
    with pytest.raises(SubmitError, match="argument 'x': a value of type complex is not JSON-serializable"):
        b.encode((1j, []), {})


def test_the_general_path_with_context_var_args_and_pydantic() -> None:
    b = Binding(general, "g")
    assert b.takes_context and str(b.signature).startswith("(a: int, *rest: int, when: datetime.date | None")
    payload = b.encode((1, 2, 3), {"when": dt.date(2026, 2, 3), "note": "n"})
    assert payload == {"args": [1, 2, 3], "kwargs": {"when": "2026-02-03", "note": "n"}}
    assert b.fast_args(payload) is None
    args, kwargs = b.decode(payload)
    assert args == [1, 2, 3] and kwargs == {"when": dt.date(2026, 2, 3), "note": "n"}
    with pytest.raises(SubmitError, match="argument 'rest': expected int"):
        b.encode((1, "x"), {})
    with pytest.raises(SubmitError, match="argument 'note': expected str"):
        b.encode((1,), {"note": 5})
    with pytest.raises(Permanent, match=r"argument 'when': .*valid date"):
        b.decode({"args": [1], "kwargs": {"when": "soon"}})
    with pytest.raises(Permanent, match="missing a required argument: 'a'"):
        b.decode({"kwargs": {}})


def test_too_many_positional_arguments_say_what_the_task_takes() -> None:
    # Signature.bind's own message names nothing: the task's positional parameters are added
    b = Binding(exact, "t")
    with pytest.raises(SubmitError) as ei:
        b.encode((1, "a", True, 4), {})
    assert ei.value.message == "task 't': too many positional arguments: it takes 3 (n, name, flag), got 4"
    with pytest.raises(Permanent, match=r"it takes 3 \(n, name, flag\), got 4"):
        b.decode({"args": [1, "a", True, 4], "kwargs": {}})
    kw_only = Binding(container_kwargs, "k")
    with pytest.raises(SubmitError, match=r"it takes 1 \(todo\), got 2"):
        kw_only.encode((["a"], {}), {})


@pytest.mark.parametrize("fn", [exact, checked])
def test_results_are_checked(fn: Any) -> None:
    b = Binding(fn, "t")
    with pytest.raises(Permanent, match="return value"):
        b.result_to_wire("not an int" if fn is exact else 1)


async def containers(
    ctx: TaskContext, todo: list[str], point: tuple[int, ...], named: dict[str, list[int]]
) -> None: ...


async def container_kwargs(todo: list[str], *, named: dict[str, tuple[int, ...]] | None = None) -> None: ...


def test_containers_are_copied_both_ways_on_every_path() -> None:
    # in process nothing else copies them: a caller reusing a list after submitting, or an
    # attempt mutating its argument, must not change what another attempt receives
    b = Binding(containers, "c")
    todo, point, named = ["a"], (1, 2), {"k": [1]}
    payload = b.encode((todo, point, named), {})
    todo.append("b")
    named["k"].append(2)
    assert payload == {"args": [["a"], [1, 2], {"k": [1]}], "kwargs": {}}  # a tuple travels as an array
    for args in (b.fast_args(payload), b.decode(payload)[0]):
        assert args == [["a"], (1, 2), {"k": [1]}]  # the annotated tuple comes back
        assert args[0] is not payload["args"][0] and args[2]["k"] is not payload["args"][2]["k"]
        args[0].append("mutated")
        args[2]["k"].append(3)
    assert payload == {"args": [["a"], [1, 2], {"k": [1]}], "kwargs": {}}

    g = Binding(container_kwargs, "g")
    payload = g.encode((todo,), {"named": named})
    todo.clear()
    named.clear()
    assert payload == {"args": [["a", "b"]], "kwargs": {"named": {"k": [1, 2]}}}
    args, kwargs = g.decode(payload)
    assert args == [["a", "b"]] and kwargs == {"named": {"k": (1, 2)}}
    args[0].clear()
    assert payload["args"] == [["a", "b"]]
