"""The lifecycle picture of docs/concepts/lifecycle.md cannot drift from the engine.

``scripts/docs_diagrams.py`` draws ``docs/assets/concepts/lifecycle.svg`` from the engine's
transition table. Here the committed DOT source must be exactly what the script makes from the
table today, and both the DOT source and the rendered SVG must list exactly the table's
transitions (each edge once, nothing else besides the entry edge ``submit -> blocked``).
"""

from __future__ import annotations

import html
import importlib.util
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

from cronoq.engine.model import EVENT_NAMES, STATUS_NAMES, TRANSITIONS

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "docs" / "assets" / "concepts"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_diagrams", ROOT / "scripts" / "docs_diagrams.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def table() -> Counter[tuple[str, str]]:
    return Counter((STATUS_NAMES[f], STATUS_NAMES[t]) for (f, _e), t in TRANSITIONS.items())


def test_committed_dot_source_is_fresh() -> None:
    assert (ASSETS / "lifecycle.dot").read_text() == script().lifecycle_dot(), (
        "docs/assets/concepts/lifecycle.dot is stale: run scripts/docs_diagrams.py"
    )


def test_dot_source_lists_exactly_the_transitions() -> None:
    edges = re.findall(
        r"^\s+(\w+) -> (\w+) \[.*// event=(\w+)$", (ASSETS / "lifecycle.dot").read_text(), re.M
    )
    got = {(f, e, t) for f, t, e in edges}
    want = {(STATUS_NAMES[f], EVENT_NAMES[e], STATUS_NAMES[t]) for (f, e), t in TRANSITIONS.items()}
    assert len(edges) == len(got)
    assert got == want


def test_rendered_svg_draws_exactly_the_transitions() -> None:
    svg = (ASSETS / "lifecycle.svg").read_text()
    titles = re.findall(r'<g id="edge\d+" class="edge">\s*<title>(.*?)</title>', svg)
    drawn = Counter(tuple(html.unescape(t).split("->")) for t in titles)
    assert drawn.pop(("submit", "blocked")) == 1
    assert drawn == table()
    nodes = {
        html.unescape(t) for t in re.findall(r'<g id="node\d+" class="node">\s*<title>(.*?)</title>', svg)
    }
    assert nodes == {*STATUS_NAMES, "submit"}


def test_every_event_has_a_label() -> None:
    assert set(script().EDGE_LABELS) == set(EVENT_NAMES)
