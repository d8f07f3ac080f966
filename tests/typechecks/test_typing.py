"""mypy checks named-task calls: the typing file passes, and wrong calls are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

WRONG = """
from cronoq import App, TaskContext

app = App("wrong")


@app.task
async def add(x: int, y: int = 1) -> int:
    return x + y


@app.task(name="greet")
def greet(ctx: TaskContext, who: str) -> str:
    return who


async def calls() -> None:
    await add.submit("one")
    await add.options(priority="high").enqueue(1, z=2)
    await greet.submit()
    text: str = await (await add.submit(1))
    await add.submit(greet.spec("x").output)
"""


def _mypy(*args: str) -> tuple[str, int]:
    out, err, code = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary", *args]
    )
    return out + err, code


def test_the_typing_file_is_clean() -> None:
    out, code = _mypy(str(HERE / "typing_tasks.py"))
    assert code == 0, out


def test_wrong_calls_fail_to_type_check(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong_calls.py"
    wrong.write_text(WRONG)
    out, code = _mypy(str(wrong))
    assert code == 1, out
    assert 'Argument 1 to "submit" of "TaskCall" has incompatible type "str"; expected "int"' in out
    assert 'Unexpected keyword argument "z" for "enqueue" of "TaskCall"' in out
    assert 'Missing positional argument "who" in call to "submit" of "TaskCall"' in out
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out
    # a placeholder has its task's return type: a str output does not fit an int parameter
    assert out.count('has incompatible type "str"; expected "int"') == 2, out
