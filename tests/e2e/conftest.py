"""Failure reports of the end-to-end tests: a test that fails keeps its servers' logs.

Theory of operation
-------------------
The e2e tests run real ``cronoq serve`` processes whose stderr goes to log files in the test's
``tmp_path``; a flaky failure in CI is only diagnosable from those logs.  This hook records each
phase's report on the test item (``item.stash[PHASE_REPORTS]``) so a fixture's teardown can ask
:func:`failed` and print the logs (pytest shows a failing test's captured teardown output).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

#: the reports of a test item's phases ("setup", "call"), set by the hook below
PHASE_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    item.stash.setdefault(PHASE_REPORTS, {})[report.when] = report
    return report


def failed(item: pytest.Item) -> bool:
    """Whether the test's setup or call phase failed (asked from a fixture's teardown)."""
    reports = item.stash.get(PHASE_REPORTS, {})
    return any(r.failed for r in reports.values())
