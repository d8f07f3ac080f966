"""A task module that imports in the test process but not in a child process."""

from __future__ import annotations

import multiprocessing
from typing import Any

if multiprocessing.parent_process() is not None:
    raise ImportError("this module refuses to load in a child process")


def task(ctx: Any, payload: Any) -> str:
    return "unreachable"
