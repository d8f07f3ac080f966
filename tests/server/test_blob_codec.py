"""How the server stores payloads and outputs (server/app.py ``BlobCodec``)."""

from __future__ import annotations

import struct

import pytest

from cronoq.server.app import BlobCodec
from cronoq.server.workers import Blob


def test_blobs_round_trip_with_their_content_types() -> None:
    c = BlobCodec()
    types = ["application/json", "", "text/plain; charset=utf-8", "application/x-é"]
    # (more content types than the codec keeps prefixes of, each encoded twice)
    types += [f"application/x-{i}" for i in range(2 * BlobCodec._HEADERS_MAX)]
    for _ in range(2):
        for i, ct in enumerate(types):
            data = f"payload {i}".encode()
            stored = c.encode(Blob(data, ct))
            raw = ct.encode()
            assert stored == struct.pack(">H", len(raw)) + raw + data
            assert c.decode(stored) == Blob(data, ct)
    assert len(c._headers) <= BlobCodec._HEADERS_MAX


def test_bytes_and_none_have_no_content_type() -> None:
    c = BlobCodec()
    assert c.decode(c.encode(b"ab")) == Blob(b"ab", "")
    assert c.decode(c.encode(None)) == Blob(b"", "")
    with pytest.raises(TypeError):
        c.encode("text")
