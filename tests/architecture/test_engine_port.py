"""The engine's port: ``Core`` alone changes a task's status, its modules use its public
operations only (issue #27, the ``engine/core.py`` header: "The port").

Every module of ``src/cronoq`` is parsed with :mod:`ast`.

* **Status.**  An assignment to ``<x>.status`` (``=``, ``+=``, annotated, inside a tuple target,
  or ``setattr(x, "status", ...)``) is a task's status change unless it is one of:

  - in ``engine/core.py``, inside one of the functions :meth:`Core.move`'s docstring names (the
    move itself and its hot-path exceptions): the test also fails when the docstring names a
    function that assigns no status, so the list stays the truth;
  - ``self.status`` in the body of a class other than ``TaskState`` (a mutation record, a store
    row, an error, an HTTP answer: that class's own field, not a task's);
  - ``self.status`` in ``TaskState.__init__`` (a task's first status);
  - listed in ``NOT_A_TASK`` with the reason the object is not a ``TaskState``.

* **Persist.**  A ``Persist`` action is constructed only in ``Core.persist``.

* **Privates.**  No engine module other than ``core.py`` reads or calls a private name that
  ``Core`` defines (``core._x``, ``self.core._x``, ``c._x``...), whatever the base expression:
  the names are taken from ``Core``'s class body and its ``self._x`` assignments.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.architecture.test_private_access import attr_by_string

SRC = Path(__file__).resolve().parents[2] / "src" / "cronoq"
CORE = "engine/core.py"

#: (module relative to src/cronoq, "base.status") → why that object is not a TaskState
NOT_A_TASK: dict[tuple[str, str], str] = {
    ("engine/recovery.py", "row.status"): (
        "a RecoveredTerminal store row (a status name) that recovery quarantines before it is "
        "retained through terminal_state(), which builds the TaskState with its status"
    ),
    ("server/grpc_workers.py", "p.status"): "a protobuf Lease.parents entry on the wire",
}


def _modules(src: Path = SRC) -> dict[str, ast.Module]:
    out = {}
    for path in sorted(src.rglob("*.py")):
        if "__pycache__" in path.parts or path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        out[path.relative_to(src).as_posix()] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return out


def _targets(node: ast.AST) -> list[ast.expr]:
    """The attribute targets an assignment statement writes (tuples unpacked)."""
    if isinstance(node, ast.Assign):
        raw = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        raw = [node.target]
    else:
        return []
    out: list[ast.expr] = []
    while raw:
        t = raw.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            raw.extend(t.elts)
        elif isinstance(t, ast.Starred):
            raw.append(t.value)
        else:
            out.append(t)
    return out


def status_writes(tree: ast.Module) -> list[tuple[int, str, str | None, str | None]]:
    """``(line, "base.status", enclosing class, enclosing function)`` for every status write."""
    out: list[tuple[int, str, str | None, str | None]] = []

    def visit(node: ast.AST, cls: str | None, fn: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, None)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, cls, child.name)
                continue
            for t in _targets(child):
                if isinstance(t, ast.Attribute) and t.attr == "status":
                    out.append((child.lineno, f"{ast.unparse(t.value)}.status", cls, fn))
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in ("setattr", "object.__setattr__")
                and len(child.args) >= 2
                and isinstance(child.args[1], ast.Constant)
                and child.args[1].value == "status"
            ):
                out.append((child.lineno, f"{ast.unparse(child.args[0])}.status", cls, fn))
            visit(child, cls, fn)

    visit(tree, None, None)
    return out


def move_exceptions(trees: dict[str, ast.Module]) -> set[str]:
    """The functions ``Core.move``'s docstring names as changing a status: itself and the
    ``:meth:`` references of its paragraph about the hot-path exceptions."""
    for node in ast.walk(trees[CORE]):
        if isinstance(node, ast.ClassDef) and node.name == "Core":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "move":
                    doc = ast.get_docstring(item) or ""
                    para = next((p for p in doc.split("\n\n") if "hot-path exception" in p), "")
                    return {"move", *re.findall(r":meth:`~?([A-Za-z_]\w*)`", para)}
    raise AssertionError("Core.move not found in engine/core.py")


def status_violations(trees: dict[str, ast.Module]) -> list[str]:
    allowed_in_core = move_exceptions(trees)
    out = []
    for rel, tree in trees.items():
        for line, what, cls, fn in status_writes(tree):
            where = f"{rel}:{line}: {what} (in {cls or '-'}.{fn or '-'})"
            if rel == CORE:
                if cls == "Core" and fn in allowed_in_core:
                    continue
                out.append(f"{where}: Core changes a status only in move and its named exceptions")
            elif what == "self.status" and cls is not None and cls != "TaskState":
                continue  # that class's own field
            elif what == "self.status" and cls == "TaskState" and fn == "__init__":
                continue  # a task's first status
            elif (rel, what) not in NOT_A_TASK:
                out.append(f"{where}: a task's status changes only in Core.move (engine/core.py)")
    return out


def test_a_task_status_changes_only_in_core_move() -> None:
    found = status_violations(_modules())
    assert not found, "status assignments outside Core.move:\n" + "\n".join(found)


def test_every_exception_named_by_move_assigns_a_status() -> None:
    trees = _modules()
    named = move_exceptions(trees)
    assert {"move", "_create", "release", "_dispatch", "complete"} <= named, named
    writers = {fn for _, _, cls, fn in status_writes(trees[CORE]) if cls == "Core"}
    assert named == writers, f"Core.move's docstring names {sorted(named)}, these assign: {sorted(writers)}"


def test_every_not_a_task_entry_is_still_needed() -> None:
    trees = _modules()
    seen = {(rel, what) for rel, tree in trees.items() for _, what, _, _ in status_writes(tree)}
    assert set(NOT_A_TASK) <= seen, f"unused entries: {set(NOT_A_TASK) - seen}"


_FAKE_CORE = (
    "class Core:\n    def move(self, t):\n"
    '        """Port.\n\n        With hot-path exceptions :meth:`release`.\n        """\n'
    "        t.status = 1\n    def release(self, t):\n        t.status = 2\n"
)


def _status_check(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in {CORE: _FAKE_CORE, **files}.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return status_violations(_modules(tmp_path))


def test_the_status_check_sees_assignments(tmp_path: Path) -> None:
    cases = {
        "engine/starts.py": "def f(t):\n    t.status = 3\n",
        "engine/deps.py": "def f(t, u):\n    t.status, u.x = 3, 4\n",
        "engine/bulk.py": "def f(t):\n    setattr(t, 'status', 3)\n",
        "runtime/x.py": "class Handle:\n    def f(self, t):\n        t.status += 1\n",
        "engine/model.py": "class TaskState:\n    def reset(self):\n        self.status = 0\n",
    }
    for name, code in cases.items():
        found = _status_check(tmp_path / name.replace("/", "_"), {name: code})
        assert any(name in v for v in found), (name, found)
    assert _status_check(tmp_path / "core", {}) == []
    # a Core method that the docstring of move does not name
    extra = _FAKE_CORE + "    def _other(self, t):\n        t.status = 1\n"
    found = _status_check(tmp_path / "extra", {CORE: extra})
    assert any("Core._other" in v for v in found), found


def test_the_status_check_allows_records(tmp_path: Path) -> None:
    code = (
        "class StatusChange:\n    def __init__(self, status):\n        self.status = status\n"
        "class TaskState:\n    def __init__(self):\n        self.status = 0\n"
    )
    assert _status_check(tmp_path, {"engine/mutations.py": code}) == []


# ------------------------------------------------------------------ Core's privates


def core_private_names(tree: ast.Module) -> set[str]:
    """The private names ``Core`` defines: methods and class attributes, ``self._x`` fields."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Core":
            names = set()
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item in node.body:
                    names.add(item.name)
                elif (
                    isinstance(item, ast.Attribute)
                    and isinstance(item.ctx, ast.Store)
                    and isinstance(item.value, ast.Name)
                    and item.value.id == "self"
                ):
                    names.add(item.attr)
            return {n for n in names if n.startswith("_") and not n.startswith("__")}
    raise AssertionError("class Core not found")


def private_violations(trees: dict[str, ast.Module]) -> list[str]:
    names = core_private_names(trees[CORE])
    out = []
    for rel, tree in trees.items():
        if not rel.startswith("engine/") or rel == CORE:
            continue
        own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        own |= {  # and the fields its own classes set on self
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in names):
                continue
            base = ast.unparse(node.value)
            if base == "self" and node.attr in own:
                continue  # the module's own class defines the same name
            out.append(f"{rel}:{node.lineno}: {base}.{node.attr}: a private name of Core")
        for node in ast.walk(tree):
            if attr_by_string(node) in names:
                out.append(f"{rel}:{node.lineno}: {ast.unparse(node)}: a private name of Core")
    return out


def test_engine_modules_use_only_cores_public_operations() -> None:
    trees = _modules()
    assert {"_dispatch", "_fill", "_free_slot"} <= core_private_names(trees[CORE])
    found = private_violations(trees)
    assert not found, "engine modules reaching into Core's privates:\n" + "\n".join(found)


def test_the_private_check_sees_a_reach_into_core(tmp_path: Path) -> None:
    core = (
        "class Core:\n    def __init__(self):\n        self._n = 0\n"
        "    def _fill(self):\n        pass\n    def move(self):\n        self._fill()\n"
    )
    cases = {
        "def f(core):\n    core._fill()\n": "core._fill",
        "class P:\n    def f(self):\n        return self.core._n\n": "self.core._n",
        "def f(c):\n    return getattr(c, '_fill')\n": "getattr(c, '_fill')",
    }
    for i, (code, needle) in enumerate(cases.items()):
        root = tmp_path / str(i)
        for name, text in {CORE: core, "engine/parking.py": code}.items():
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        found = private_violations(_modules(root))
        assert any(needle in v for v in found), (needle, found)


def persist_calls(tree: ast.Module) -> list[tuple[int, str | None]]:
    """``(line, enclosing function)`` of every ``Persist(...)`` call of a module."""
    out: list[tuple[int, str | None]] = []

    def visit(node: ast.AST, fn: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Call) and ast.unparse(child.func).split(".")[-1] == "Persist":
                out.append((child.lineno, fn))
            visit(child, fn)

    visit(tree, None)
    return out


def test_persist_actions_are_made_only_by_core_persist() -> None:
    """Every ``Persist`` action comes from ``Core.persist`` (one operation, one place)."""
    trees = _modules()
    found = [
        f"{rel}:{line}: Persist(...) in {fn}"
        for rel, tree in trees.items()
        for line, fn in persist_calls(tree)
        if not (rel == CORE and fn == "persist")
    ]
    assert not found, "Persist actions made outside Core.persist:\n" + "\n".join(found)
    assert [fn for _, fn in persist_calls(trees[CORE])] == ["persist"]


def persist_flag_reads(trees: dict[str, ast.Module]) -> list[str]:
    """``core.persist`` used as a value: before issue #27 it was the durable flag (now
    ``core.durable``); as a bound method it is always true, so a stale ``if core.persist:``
    would persist for every core.  Only ``CoreConfig.persist`` (the option) is a value."""
    out = []
    for rel, tree in trees.items():
        if not rel.startswith("engine/") or rel == "engine/config.py":
            continue
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "persist" and id(node) not in called:
                base = ast.unparse(node.value)
                if not base.endswith("config"):
                    out.append(f"{rel}:{node.lineno}: {base}.persist (the flag is {base}.durable)")
    return out


def test_core_persist_is_only_called() -> None:
    found = persist_flag_reads(_modules())
    assert not found, "Core.persist used as a flag:\n" + "\n".join(found)


def test_the_flag_check_sees_a_stale_read(tmp_path: Path) -> None:
    p = tmp_path / "engine" / "bulk.py"
    p.parent.mkdir(parents=True)
    code = "def f(core, m):\n    if core.persist:\n        core.persist(m)\n"
    p.write_text(code + "    return core.config.persist\n")
    found = persist_flag_reads(_modules(tmp_path))
    assert found == ["engine/bulk.py:2: core.persist (the flag is core.durable)"]
