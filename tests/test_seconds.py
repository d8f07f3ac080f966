"""cronoq.seconds: the one rule for a duration in seconds, and that it stays a leaf."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from cronoq.engine.time import check_seconds
from cronoq.errors import Retryable, outcome_of
from cronoq.seconds import MAX_SECONDS, valid_seconds


@pytest.mark.parametrize("value", [True, "1", None, -1, -0.5, math.nan, math.inf, 10**400])
def test_invalid_is_none(value: object) -> None:
    assert valid_seconds(value) is None


def test_valid_and_cut() -> None:
    assert valid_seconds(0) == 0.0
    assert valid_seconds(1.5) == 1.5
    assert valid_seconds(MAX_SECONDS * 4) == MAX_SECONDS
    assert check_seconds("x", MAX_SECONDS * 4) == MAX_SECONDS


def test_check_seconds_raises_where_valid_seconds_says_none() -> None:
    with pytest.raises(TypeError):
        check_seconds("x", "1")
    with pytest.raises(ValueError, match=r"x must be a finite, non-negative number of seconds \(got -1\)"):
        check_seconds("x", -1)


def test_outcome_of_ignores_a_bad_retry_after() -> None:
    assert outcome_of(Retryable("m", retry_after=-1)).retry_after is None
    assert outcome_of(Retryable("m", retry_after=2)).retry_after == 2.0


def test_leaf() -> None:
    import cronoq.seconds as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    ]
    assert not [m for m in imported if m and m.startswith("cronoq")]
