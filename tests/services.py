"""What a test does when a service it uses (PostgreSQL, Chromium) is not there.

Theory of operation
-------------------
On a developer's machine a missing service skips the tests that need it, and the skip says
which service and why (``-rs`` is in pytest's ``addopts``, so every skip reason is listed at the
end of a run).  In CI a missing service is a failure, not a skip: a run that skipped the
PostgreSQL store tests because the database did not start would look green while testing less.
``.ci/run`` sets :data:`REQUIRE_ENV` (``CRONOQ_REQUIRE_SERVICES=1``); ``CI=true``, which most CI
systems set, has the same effect.

:func:`missing_service` is called where a test finds its service missing (fixtures, probes);
:func:`unless_missing` is the ``skipif`` mark for a whole test or module: under CI it does not
skip, and the test's fixture calls :func:`missing_service`, which fails it with the reason.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = [
    "CHROMIUM",
    "REQUIRE_ENV",
    "browser_missing",
    "missing_service",
    "services_required",
    "unless_missing",
]

#: set (to anything but "" or "0") by .ci/run: a missing service fails the tests that need it
REQUIRE_ENV = "CRONOQ_REQUIRE_SERVICES"
#: Debian's Chromium, driven by Playwright for Python (no browser download)
CHROMIUM = "/usr/bin/chromium"


def services_required() -> bool:
    """Whether a missing service is a failure (CI) rather than a skip."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0") or os.environ.get("CI", "") == "true"


def missing_service(service: str, why: str) -> NoReturn:
    """Skip the running test because ``service`` is missing (``why``), or fail it in CI."""
    reason = f"{service} is not available: {why}"
    if services_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV} or CI=true: a missing service is a failure)", pytrace=False)
    pytest.skip(reason)


def unless_missing(service: str, why: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark: skip when ``why`` is non-empty, except in CI (module docstring)."""
    reason = f"{service} is not available: {why}"
    return pytest.mark.skipif(bool(why) and not services_required(), reason=reason)


def browser_missing() -> str:
    """Why the browser tests cannot run here ("" when Playwright and Chromium are there)."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (`pip install playwright`, in the dev extra)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (`apt-get install -y chromium`; .ci/run installs it)"
    return ""
