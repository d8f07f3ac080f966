"""No module of ``src/cronoq`` over ~1,100 lines, no function over ~100 (issue #16), no class
over 50 methods (issue #27).

A big module is where a newcomer loses the most time and where every feature lands; a long
function mixes steps that read better as named ones.  Every module of ``src/cronoq`` is read
(the generated protobuf/gRPC stubs excepted: ``scripts/gen_proto.py`` writes them) and every
function or method in it is measured with :mod:`ast`, from its ``def`` line (decorators not
counted) to its last line, docstring and comments included.  A class counts the functions
defined directly in its body (properties and static methods included); a class past 50 moves
cohesive groups into the modules that own them.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "cronoq"

MAX_MODULE_LINES = 1100
MAX_FUNCTION_LINES = 100


def _modules() -> list[tuple[str, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("proto/") and path.stem.endswith(("_pb2", "_pb2_grpc")):
            continue  # generated
        out.append((rel, path.read_text(encoding="utf-8")))
    return out


def test_the_modules_are_found() -> None:
    names = {rel for rel, _ in _modules()}
    assert {"engine/core.py", "runtime/scheduler.py", "server/run.py"} <= names
    assert not any(n.endswith("_pb2.py") for n in names)


def test_no_module_is_over_the_limit() -> None:
    long = {rel: n for rel, text in _modules() if (n := len(text.splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split by concern): {long}"


def test_no_function_is_over_the_limit() -> None:
    long = {}
    for rel, text in _modules():
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{rel}:{node.lineno} {node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split into named steps): {long}"


MAX_CLASS_METHODS = 50


def class_methods() -> dict[str, int]:
    """``"module:Class"`` → the functions defined directly in its body (properties included)."""
    out = {}
    for rel, text in _modules():
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef)) for i in node.body)
                out[f"{rel}:{node.name}"] = n
    return out


def test_no_class_has_over_50_methods() -> None:
    """A class past 50 methods owns too much: move cohesive groups into the modules that own
    them (issue #27), rather than merging functions or mixing in a second class."""
    counts = class_methods()
    assert counts["engine/core.py:Core"] <= MAX_CLASS_METHODS
    assert counts["runtime/scheduler.py:Scheduler"] <= MAX_CLASS_METHODS
    big = {name: n for name, n in counts.items() if n > MAX_CLASS_METHODS}
    assert not big, f"classes over {MAX_CLASS_METHODS} methods (move cohesive groups out): {big}"
