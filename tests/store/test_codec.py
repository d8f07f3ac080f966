"""Codecs (docs/reference/behaviour.md#stores): compact UTF-8 JSON, decoding never runs code, clear encode
errors."""

from __future__ import annotations

import json
import math

import pytest

from cronoq.errors import CronoqError
from cronoq.store import Codec, CodecError, JsonCodec


def test_round_trip_and_compact_utf8() -> None:
    c = JsonCodec()
    obj = {"a": [1, 2.5, None, True], "s": "héllo ✓", "n": {"x": -3}}
    data = c.encode(obj)
    assert data == '{"a":[1,2.5,null,true],"s":"héllo ✓","n":{"x":-3}}'.encode()
    assert c.decode(data) == obj
    assert c.decode(bytearray(data)) == obj and c.decode(memoryview(data)) == obj


def test_tuples_come_back_as_lists() -> None:
    c = JsonCodec()
    assert c.decode(c.encode((1, (2, 3)))) == [1, [2, 3]]


@pytest.mark.parametrize("bad", [object(), {1, 2}, b"bytes", math.nan, math.inf, {(1, 2): 3}])
def test_unencodable_values_raise_a_clear_error(bad: object) -> None:
    with pytest.raises(CodecError, match="cannot be encoded as JSON") as ei:
        JsonCodec().encode(bad)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, CronoqError)


def test_circular_value_raises_codec_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CodecError):
        JsonCodec().encode(loop)


@pytest.mark.parametrize("data", [b"\xff\xfe", b"{not json", b"", b"cos\nsystem\n(S'echo hi'\ntR."])
def test_undecodable_bytes_raise_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError, match="not valid JSON"):
        JsonCodec().decode(data)


def test_decoding_never_runs_code() -> None:
    # a pickle that would run code is just invalid JSON; JSON that looks like code is data
    assert JsonCodec().decode(b"\"__import__('os').system('false')\"") == "__import__('os').system('false')"


def test_protocol() -> None:
    class Custom:
        def encode(self, obj: object) -> bytes:
            return repr(obj).encode()

        def decode(self, data: bytes) -> object:
            return data.decode()

    assert isinstance(JsonCodec(), Codec) and isinstance(Custom(), Codec)
    assert not isinstance(object(), Codec)
    assert repr(JsonCodec()) == "JsonCodec()"


def test_definitions_encode_as_json_encoder_does() -> None:
    # store/_records.py keeps one C encoder instead of JSONEncoder.encode's per call: same text
    from cronoq.store._records import _dumps

    ref = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    for obj in (
        {"pool": "p", "retry": (3, 1.0, 2.0, 60.0, True), "tags": {"é": 'x\n"y'}, "deps": [[1, 0]]},
        {},
        {"big": 1e300, "inf": float("inf"), "none": None, "list": []},
    ):
        assert _dumps(obj) == ref(obj)
