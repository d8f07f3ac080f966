"""Every HTTP route and query parameter a docs page names exists (issue #34's docs check, for
the HTTP API: test_names_exist.py does Python names, command-line options and configuration).

A page that says ``GET /v1/tasks/{id}/output`` or ``GET /v1/tasks?kinds=...`` promises the
reader an endpoint; the server answers a route it does not have with 404 and a query parameter
it does not take with 400 (``cronoq.server.http_query``). Each mention of a ``/v1/`` path in
``docs/**/*.md`` and the README, with its method when one is written before it, is matched
against the OpenAPI operations the server serves (``http_query.allowed_params``: the same
table that refuses unknown parameters), and each ``?name=`` after it against the parameters of
that operation (or of any operation of that path when no method is written).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import pytest
from tests.docs.conftest import DOCS, ROOT

pytest.importorskip("starlette")

from cronoq.server.http_query import allowed_params

#: a method (optional), a /v1/ path not inside a file path (``cronoq/v1/cronoq.proto``), and
#: its query string
MENTION = re.compile(
    r"(?:\b(?P<method>GET|POST|PUT|DELETE|PATCH)\s+)?(?<![\w./])(?P<path>/v1/[\w{}:./\-]*)"
    r"(?:\?(?P<query>[^\s`)\"'|]*))?"
)


@dataclass(frozen=True)
class Mention:
    page: str
    line: int
    method: str | None
    path: str
    params: tuple[str, ...]

    def __str__(self) -> str:
        method = f"{self.method} " if self.method else ""
        query = f"?{'&'.join(self.params)}" if self.params else ""
        return f"{self.page}:{self.line}: {method}{self.path}{query}"


def mentions(text: str, page: str) -> Iterator[Mention]:
    for n, line in enumerate(text.splitlines(), 1):
        for m in MENTION.finditer(line):
            path = m["path"].rstrip(".,:")
            query = m["query"] or ""
            params = tuple(p.split("=", 1)[0] for p in query.split("&") if p and "=" in p)
            yield Mention(page, n, m["method"], path, params)


@cache
def routes() -> list[tuple[re.Pattern[str], str, frozenset[str]]]:
    """(the path template as a pattern, METHOD, its query parameters) of every operation."""
    out = []
    for (path, method), params in allowed_params().items():
        pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", r"[^/?#]+", re.escape(path)) + "$")
        out.append((pattern, method, params))
    return out


def check(m: Mention) -> str | None:
    """Why mention ``m`` names no route or parameter of the server (None: it does)."""
    if m.path == "/v1/":  # the prefix itself ("the /v1/ endpoints")
        return None
    ops = [(method, params) for pattern, method, params in routes() if pattern.match(m.path)]
    if not ops:
        return "no such route"
    if m.method is not None:
        ops = [(method, params) for method, params in ops if method == m.method]
        if not ops:
            return f"the route does not take {m.method}"
    takes = frozenset().union(*(params for _, params in ops))
    unknown = [p for p in m.params if p not in takes]
    return f"unknown query parameter(s) {', '.join(unknown)}" if unknown else None


def pages() -> list[tuple[str, str]]:
    files = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files]


def test_every_http_route_and_parameter_the_docs_name_exists() -> None:
    found = [m for page, text in pages() for m in mentions(text, page)]
    assert len(found) > 50, "the pages name the HTTP API often: the scan must find those mentions"
    bad = [f"{m}: {why}" for m in found if (why := check(m)) is not None]
    assert bad == [], "pages name HTTP routes or parameters the server does not have:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("`GET /v1/tasks/{ref}/result`", None),
        ("`POST /v1/tasks:replay`", None),
        ("`GET /v1/tasks?kind=report&kinds=a&limit=10`", None),
        ("see `/v1/tasks/123/cancel`", None),
        ("`GET /v1/tasks/{id}/output`", "no such route"),
        ("`DELETE /v1/tasks/{ref}/result`", "the route does not take DELETE"),
        ("`GET /v1/tasks?knd=report`", "unknown query parameter(s) knd"),
        ("in `src/cronoq/proto/cronoq/v1/cronoq.proto`", "(not a mention)"),
    ],
)
def test_check_tells_real_from_made_up(text: str, why: str | None) -> None:
    found = list(mentions(text, "page.md"))
    if why == "(not a mention)":
        assert found == []
        return
    (m,) = found
    assert check(m) == why
