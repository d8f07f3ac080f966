"""Runs the documentation's code blocks as tests (sybil).

Every fenced ```python block in a page under docs/ is executed, in page order, in one namespace
per page, so a page reads as one program. A block that must not run (it needs a server, or shows
a fragment) is preceded by ``<!-- skip: next -->``. Shell, TOML and console blocks are never run.
Tutorial programs live under examples/ and are run whole by tests/examples/.
"""

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["*.md"],
    path="./docs",
).pytest()
