"""The README stays a good first page: two quick-start commands, links that resolve into the
docs, nothing pointing at documents outside the repository."""

from __future__ import annotations

import re

from tests.docs.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_is_two_commands() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    commands = [line.split("#", 1)[0].strip() for line in block[1].splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_links_resolve_and_go_to_the_docs() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local, "the README links to the docs pages"
    for link in local:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
    assert any(link.startswith("docs/") for link in local)


def test_no_documents_outside_the_repository() -> None:
    for name in ("SPEC.md", "DESIGN.md", "SPEC §"):
        assert name not in README
    assert "make docs" in README


def test_python_blocks_are_programs_that_compile() -> None:
    """A newcomer pastes the README's snippets into a file: each must be a valid module (no
    top-level ``await`` / ``async with``; the docs pages' blocks are run by sybil, these are not)."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert len(blocks) >= 3
    for i, code in enumerate(blocks):
        try:
            compile(code, f"README.md python block {i}", "exec")
        except SyntaxError as e:
            raise AssertionError(f"README python block {i} does not compile: {e}\n{code}") from None
