"""The architecture page's module map lists exactly the packages and modules in the tree.

The tree is read when the test runs (``src/cronoq``): every directory (a package, or a data
directory such as the dashboard's static files) and every ``.py`` module except the
``__init__.py`` files (a package's row covers its ``__init__``). A module added, moved or
removed without its row in ``docs/architecture/index.md`` fails here, naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.conftest import DOCS, ROOT

SRC = ROOT / "src"
PAGE = DOCS / "architecture" / "index.md"
_ROW = re.compile(r"^\| `(cronoq/[^`]*)` \|", re.MULTILINE)


def tree_entries(src: Path = SRC) -> set[str]:
    out: set[str] = set()
    for path in (src / "cronoq").rglob("*"):
        rel = path.relative_to(src).as_posix()
        if "__pycache__" in path.parts:
            continue
        if path.is_dir():
            out.add(rel + "/")
        elif path.suffix == ".py" and path.name != "__init__.py":
            out.add(rel)
    out.add("cronoq/")
    return out


def page_entries(text: str) -> list[str]:
    return _ROW.findall(text)


def test_module_map_matches_the_tree() -> None:
    listed = page_entries(PAGE.read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), "a module is listed twice"
    tree = tree_entries()
    missing = sorted(tree - set(listed))
    stale = sorted(set(listed) - tree)
    assert not missing, f"modules without a row in docs/architecture/index.md: {missing}"
    assert not stale, f"rows in docs/architecture/index.md for modules that no longer exist: {stale}"


def test_every_row_says_what_the_module_is_for() -> None:
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if _ROW.match(line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert len(cells) >= 2 and cells[1], f"empty description: {line}"


def test_the_check_sees_a_new_module(tmp_path: Path) -> None:
    pkg = tmp_path / "cronoq" / "engine"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "split_out.py").write_text("")
    (tmp_path / "cronoq" / "__init__.py").write_text("")
    assert tree_entries(tmp_path) == {"cronoq/", "cronoq/engine/", "cronoq/engine/split_out.py"}
