"""Every citation of a docs page anchor in the code points at an anchor that exists.

Source comments and docstrings cite the reference as ``docs/reference/behaviour.md#score`` (or
``reference/behaviour.md#score``, or ``behaviour.md#score``, with or without ``docs/``). This test
finds every such citation under ``src/``, ``tests/``, ``bench/`` and ``examples/`` and checks the
page exists and has the anchor: an explicit ``{#id}``, a heading's automatic id, or one a
generated block adds (the hook's output is expanded first). Renaming an anchor therefore fails
here, naming every place that still cites the old one.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import cronoq_docs
from tests.docs.conftest import DOCS, ROOT

_CITE = re.compile(r"(docs/)?((?:[a-z-]+/)*[a-z0-9-]+\.md)#([A-Za-z0-9_.-]+)")
_EXPLICIT = re.compile(r"\{[^}]*#([A-Za-z0-9_.-]+)[^}]*\}")
_HEADING = re.compile(r"^#{1,6} +(.+?)\s*$", re.MULTILINE)
_MKDOCSTRINGS = re.compile(r"^::: (\S+)$", re.MULTILINE)


def _slug(title: str) -> str:
    """Python-Markdown's default toc slug."""
    text = re.sub(r"[`*_]", "", title).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text)


@cache
def anchors(page: Path) -> frozenset[str]:
    text = cronoq_docs.expand(page.read_text(encoding="utf-8"), str(page))
    found = set(_EXPLICIT.findall(text))
    for title in _HEADING.findall(text):
        if "{#" not in title:
            found.add(_slug(title))
    found |= set(_MKDOCSTRINGS.findall(text))  # mkdocstrings ids are the objects' paths
    return frozenset(found)


def _resolve(cited: str) -> Path | None:
    for base in (DOCS, DOCS / "reference", DOCS / "architecture"):
        p = base / cited
        if p.is_file():
            return p
    return None


def citations() -> list[tuple[str, int, str, str, bool]]:
    """(file, line, page, anchor, whether it was cited with a ``docs/`` prefix)."""
    out: list[tuple[str, int, str, str, bool]] = []
    for top in ("src", "tests", "bench", "examples"):
        for path in sorted((ROOT / top).rglob("*")):
            if (
                path.suffix not in (".py", ".proto", ".pyi", ".js", ".html", ".toml")
                or "__pycache__" in path.parts
            ):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                for m in _CITE.finditer(line):
                    out.append((str(path.relative_to(ROOT)), n, m[2], m[3], bool(m[1])))
    return out


def test_cited_anchors_exist() -> None:
    bad = []
    for where, line, page, anchor, docs_prefix in citations():
        if where.startswith("tests/docs/"):
            continue
        target = _resolve(page)
        if target is None:
            if docs_prefix:  # other .md#anchor mentions (a README section, say) are not ours to check
                bad.append(f"{where}:{line}: docs/{page} does not exist")
        elif anchor not in anchors(target):
            bad.append(f"{where}:{line}: {page} has no anchor #{anchor}")
    assert not bad, "\n".join(bad)


def test_the_anchor_reader_knows_explicit_generated_and_heading_ids() -> None:
    behaviour = anchors(DOCS / "reference" / "behaviour.md")
    assert {"score", "urgency", "fencing", "ids", "task"} <= behaviour
    config = anchors(DOCS / "reference" / "config.md")
    assert {"limits", "pools", "pools-retry", "rules"} <= config  # "limits" comes from the generated block
    assert "cronoq.Scheduler" in anchors(DOCS / "reference" / "api.md")
    assert _slug("Where to go `next`") == "where-to-go-next"
