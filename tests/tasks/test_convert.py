"""Converters: native JSON checks and pydantic-backed annotations (cronoq.tasks.convert)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import typing
import uuid
from typing import Any, Literal, Optional

import pydantic
import pytest

from cronoq.tasks.convert import ConversionError, TaskDefinitionError, converter_for, is_json, json_copy


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Order(pydantic.BaseModel):
    id: int
    total: decimal.Decimal


@pytest.mark.parametrize(
    ("annotation", "good", "bad"),
    [
        (int, [0, -3, 10**20], [1.5, "1", True, None]),
        (float, [1.5, 2, -0.0], ["1", True, float("nan"), float("inf")]),
        (str, ["", "x"], [1, b"x"]),
        (bool, [True, False], [0, 1, "true"]),
        (None, [None], [0, ""]),
        (list[int], [[], [1, 2], (1,)], [[1, "2"], {"a": 1}, "12"]),
        (dict[str, float], [{}, {"a": 1, "b": 2.5}], [{"a": "x"}, {1: 2}, []]),
        (Optional[int], [None, 3], ["3"]),  # noqa: UP045 - the typing form is what is tested
        (int | str, [1, "a"], [1.5]),
        (Literal["a", 1], ["a", 1], ["b", 2, True]),
        (tuple[int, ...], [(1, 2), [3]], [("a",)]),
        (Any, [1, "x", None, [1, {"a": [2.5]}]], [{1, 2}, object(), {"a": float("nan")}, {1: "x"}]),
    ],
)
def test_native_annotations_check_without_pydantic(annotation: Any, good: list[Any], bad: list[Any]) -> None:
    conv = converter_for(annotation, "t")
    assert conv.native
    for v in good:
        wire = conv.to_wire(v)
        assert wire == json_copy(v)
        back = conv.from_wire(wire)
        assert back == (tuple(v) if typing.get_origin(annotation) is tuple else wire)
        if isinstance(v, (list, tuple, dict)):  # containers are copies both ways
            assert wire is not v and back is not wire
        else:
            assert wire is v and back is v
    for v in bad:
        with pytest.raises(ConversionError):
            conv.to_wire(v)


def test_containers_travel_as_copies_and_tuples_come_back_as_tuples() -> None:
    nested = converter_for(list[list[int]], "t")
    value = [[1], [2]]
    wire = nested.to_wire(value)
    value[0].append(3)
    assert wire == [[1], [2]]
    back = nested.from_wire(wire)
    back[1].append(4)
    assert wire == [[1], [2]] and back == [[1], [2, 4]]
    optional = converter_for(tuple[int, ...] | None, "t")
    assert optional.to_wire((1, 2)) == [1, 2] and optional.from_wire([1, 2]) == (1, 2)
    assert optional.from_wire(None) is None and optional.to_wire(None) is None
    either = converter_for(list[int] | tuple[str, ...], "t")
    assert either.from_wire([1]) == [1] and either.from_wire(["a"]) == ("a",)
    deep = converter_for(dict[str, tuple[str, ...]], "t")
    assert deep.from_wire({"a": ["x"]}) == {"a": ("x",)}
    assert converter_for(Any, "t").from_wire([(1,), {"a": (2,)}]) == [[1], {"a": [2]}]  # JSON's forms
    assert converter_for(int, "t").plain and not nested.plain


def test_non_json_values_say_so() -> None:
    conv = converter_for(Any, "t")
    with pytest.raises(ConversionError, match="a value of type set is not JSON-serializable"):
        conv.to_wire({1, 2})
    # the part JSON cannot carry, and where it is (not "a value of type list"); an object
    # whose type the annotation did not give: how to have it converted
    for value, message in [
        (
            dt.date(2026, 1, 1),
            "a value of type date is not JSON-serializable (annotate it with its type, e.g.",
        ),
        (float("nan"), "nan is not JSON-serializable (JSON has no NaN or infinity)"),
        ([1.0, float("inf")], "inf at [1] is not JSON-serializable (JSON has no NaN or infinity)"),
        ({"a": [{2}]}, "a value of type set at ['a'][0] is not JSON-serializable (annotate it with its type"),
        ([{"a": 1, 2: 3}], "the key 2 at [0] is not JSON-serializable (JSON object keys are strings)"),
    ]:
        with pytest.raises(ConversionError) as ei:
            conv.to_wire(value)
        assert str(ei.value).startswith(message), str(ei.value)
    with pytest.raises(ConversionError, match="expected int, got 'x'"):
        converter_for(int, "t").to_wire("x")


@pytest.mark.parametrize(
    ("annotation", "value", "wire"),
    [
        (dt.datetime, dt.datetime(2024, 5, 1, 3, 0, tzinfo=dt.UTC), "2024-05-01T03:00:00Z"),
        (dt.date, dt.date(2024, 5, 1), "2024-05-01"),
        (uuid.UUID, uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (decimal.Decimal, decimal.Decimal("1.10"), "1.10"),
        (Color, Color.RED, "red"),
        (Point, Point(1, 2), {"x": 1, "y": 2}),
        (Order, Order(id=1, total=decimal.Decimal("9.99")), {"id": 1, "total": "9.99"}),
        (list[dt.date], [dt.date(2024, 1, 2)], ["2024-01-02"]),
    ],
)
def test_pydantic_annotations_round_trip(annotation: Any, value: Any, wire: Any) -> None:
    conv = converter_for(annotation, "t")
    assert not conv.native
    assert conv.to_wire(value) == wire
    assert is_json(conv.to_wire(value))
    assert conv.from_wire(wire) == value


def test_pydantic_validation_errors_are_conversion_errors() -> None:
    conv = converter_for(Order, "t")
    with pytest.raises(ConversionError, match="id: Input should be a valid integer"):
        conv.from_wire({"id": "x", "total": "1"})


def test_an_annotation_pydantic_cannot_handle_fails_at_decoration() -> None:
    class Opaque:
        pass

    with pytest.raises(
        TaskDefinitionError, match="task 'x', argument 'a': pydantic cannot handle the annotation"
    ):
        converter_for(Opaque, "task 'x', argument 'a'")


def test_without_pydantic_such_annotations_fail_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pydantic", None)  # `import pydantic` now raises ImportError
    with pytest.raises(TaskDefinitionError, match=r"needs pydantic v2.*pip install 'cronoq\[tasks\]'"):
        converter_for(dt.datetime, "task 'x', argument 'when'")
    assert converter_for(int, "t").native  # JSON annotations need nothing
