"""The docs name the worker protocol's versions as :mod:`cronoq.proto.protocol` declares them:
every "versions N to M" range in the reference and architecture pages runs from
``MIN_VERSION`` to ``PROTOCOL_VERSION``, and the list of what each version added stops at the
current one (a bump that forgets the docs fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from cronoq.proto.protocol import MIN_VERSION, PROTOCOL_VERSION

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("reference/grpc.md", "architecture/index.md")


def test_version_ranges_match_protocol() -> None:
    found = []
    for page in PAGES:
        text = (DOCS / page).read_text()
        for low, high in re.findall(r"versions (\d+) to (\d+)", text):
            found.append((page, int(low), int(high)))
    assert found, "no 'versions N to M' in the docs"
    for page, low, high in found:
        assert (low, high) == (MIN_VERSION, PROTOCOL_VERSION), page


def test_each_version_has_its_section() -> None:
    text = (DOCS / "reference/grpc.md").read_text()
    for version in range(MIN_VERSION + 1, PROTOCOL_VERSION + 1):
        assert f"{{#protocol-v{version}}}" in text, version
    assert f"protocol_version=3..{PROTOCOL_VERSION}" in text
