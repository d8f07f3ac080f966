"""The generated reference pages cover what the code has, and nothing it no longer has.

The generators (``docs/hooks/ref_*.py``) read the code at build time; what they cannot read
(the meaning of a config key, the message of a SubmitError code, what an engine event is) is
written beside them, and these tests fail when the two disagree. They also check that the
Python API pages document every public name.
"""

from __future__ import annotations

import re

# docs/hooks, put on sys.path by conftest.py
import cronoq_docs
import pytest
import ref_config
import ref_errors
import ref_http
import ref_lifecycle
import ref_metrics
from tests.docs.conftest import DOCS


def _directives(page: str) -> set[str]:
    text = (DOCS / "reference" / page).read_text(encoding="utf-8")
    return set(re.findall(r"^::: (\S+)$", text, re.MULTILINE))


def test_every_public_name_is_documented() -> None:
    """Each name of ``cronoq.__all__`` has a ``::: cronoq.NAME`` on a reference page (api.md, or
    the page of its feature, e.g. tasks.md); api.md documents nothing that is not public."""
    import cronoq

    public = {f"cronoq.{n}" for n in cronoq.__all__}
    documented = set().union(*(_directives(p.name) for p in (DOCS / "reference").glob("*.md")))
    assert public - documented == set()
    assert _directives("api.md") - public == set()


def test_client_page_documents_every_public_name() -> None:
    import cronoq
    import cronoq.client

    documented = _directives("client.md")
    # names re-exported from cronoq are documented once, on the api page
    own = {n for n in cronoq.client.__all__ if getattr(cronoq.client, n) is not getattr(cronoq, n, None)}
    assert {f"cronoq.client.{n}" for n in own} - documented == set()


@pytest.mark.parametrize("check", [ref_config.problems, ref_errors.problems, ref_lifecycle.problems])
def test_written_parts_match_the_code(check) -> None:  # type: ignore[no-untyped-def]
    assert check() == []


def test_config_keys_are_read_from_the_parser() -> None:
    from cronoq.server.config import LimitsConfig

    limits = next(t for t in ref_config.tables() if t.name == "[limits]")
    keys, required = ref_config.known_keys(limits)
    assert sorted(keys) == sorted(LimitsConfig.model_fields)
    assert required == {}
    pools = next(t for t in ref_config.tables() if t.name == "[[pools]]")
    keys, required = ref_config.known_keys(pools)
    assert keys[0] == "name" and "required" in required["name"]
    assert ref_config.rules(pools, "max") == ["must be an integer >= 1"]
    page = ref_config.render()
    assert "| `max_pending_per_pool` | integer | `100,000` | must be an integer >= 1 |" in page
    assert "**not described yet**" not in page


def test_http_page_lists_every_operation_and_schema() -> None:
    doc = ref_http.document()
    page = ref_http.render()
    for path, item in doc["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}` {{#{ref_http.op_anchor(method, path)}}}" in page
    for name in doc["components"]["schemas"]:
        assert f"{{#{ref_http.schema_anchor(name)}}}" in page
    # every schema link on the page points at a schema section of the page
    for anchor in re.findall(r"\]\(#(schema-[a-z]+)\)", page):
        assert f"{{#{anchor}}}" in page


def test_metrics_page_lists_what_the_server_and_otel_export() -> None:
    series, instruments = ref_metrics.collect()
    names = {s.name for s in series}
    for required in (
        "cronoq_pool_capacity",
        "cronoq_pool_desired",
        "cronoq_pool_busy",
        "cronoq_pool_held",
        "cronoq_pool_pending",
        "cronoq_pool_utilization",
        "cronoq_pool_wait_seconds",
        "cronoq_workers_connected",
        "cronoq_leader",
        "cronoq_tasks_submitted_total",
    ):
        assert required in names
    pending = next(s for s in series if s.name == "cronoq_pool_pending")
    assert pending.labels == ("pool", "class")
    otel = {i.name for i in instruments}
    assert {"cronoq.pool.capacity", "cronoq.pool.pending", "cronoq.tasks.submitted"} <= otel
    assert all(n.startswith(("cronoq.pool.", "cronoq.tasks.")) for n in otel)


def test_every_generated_block_a_page_asks_for_exists() -> None:
    asked = set()
    for page in DOCS.rglob("*.md"):
        asked |= set(
            re.findall(r"^<!-- cronoq:([a-z0-9-]+) -->$", page.read_text(encoding="utf-8"), re.MULTILINE)
        )
    assert asked - set(cronoq_docs.BLOCKS) == set()
    expanded = cronoq_docs.expand("a\n<!-- cronoq:cli-exit-codes -->\nb")
    assert "| 0 | success |" in expanded and "cronoq:" not in expanded
