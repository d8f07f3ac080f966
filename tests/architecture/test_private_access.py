"""No package reaches into another package's private names (docs/architecture/index.md#rules).

Every module of ``src/cronoq`` is parsed with :mod:`ast`.  A *unit* is a subpackage of
``cronoq`` (``cronoq/server/...`` is ``server``) or a top-level module (``cronoq/otel.py`` is
``otel``).  For each unit the test collects the underscore names it defines: attributes assigned
on ``self``/``cls`` (or on any object), ``__slots__`` entries, names bound in a class body, and
module-level functions, classes and assignments.  Then it fails on

* an attribute access ``x._name`` (``x`` not ``self``/``cls``, ``_name`` not a dunder) whose
  name the accessing unit does not define: the object can only be another unit's;
* an access ``x._name`` outside ``runtime``/``engine`` to a name that ``Scheduler``, ``Core``
  or another class of those packages defines, unless the accessing *module* defines it too:
  the scheduler's and the engine's internals are reached through ``Scheduler.seam``
  (:mod:`cronoq.runtime.seam`), never directly, even where a name happens to be shared;
* ``from <another unit> import _name``, and ``getattr(x, "_name")`` with a literal name.

Without type inference the first rule is a heuristic (a name defined in both units passes), so
the second one pins down the case the rule exists for.  ``ALLOWED`` lists the few exceptions,
each with its reason.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "cronoq"
#: the packages behind the seam: their private names are theirs alone
SEAM_UNITS = frozenset({"runtime", "engine"})

#: (module path relative to src/cronoq, "base._name") → why it is allowed
_SONORA = (
    "sonora 0.2.3 packs unary trailers wrongly (public/sonora#67) and sends a stream's headers only "
    "with its first message; grpc_web.Sonora overrides both methods, which read the pending headers "
    "and metadata that sonora keeps on its private context attributes"
)

ALLOWED: dict[tuple[str, str], str] = {
    ("otel.py", 'getattr(api.context, "_RUNTIME_CONTEXT")'): (
        "opentelemetry-api keeps its context runtime private; context_probe reads it to test "
        "cheaply whether a span is current, falling back to the public API when it is absent"
    ),
    ("otel.py", 'getattr(rc, "_current_context")'): "the same opentelemetry internal (see above)",
    ("cli/worker_cmd.py", "os._exit"): (
        "os._exit is the stdlib's documented way to end a process without waiting for its threads: "
        "cronoq worker uses it after the grace, when a plain function is stuck in its thread"
    ),
    ("runtime/processes/child.py", "os._exit"): (
        "os._exit is the stdlib's documented way for a child process to exit at once (no atexit "
        "handlers, no flushing of state inherited from its parent): a process child uses it when "
        "its worker is gone"
    ),
    ("runtime/processes/child.py", 'getattr(forkserver, "_forkserver")'): (
        "multiprocessing gives each forkserver child a copy of the forkserver's 'alive' pipe, "
        "kept only in its private _forkserver state; a process child closes it, or the "
        "forkserver (its parent, whose death sends the child's PDEATHSIG) outlives a SIGKILLed "
        "worker while the child runs"
    ),
    ("runtime/processes/forkserver.py", "sys._getframe"): (
        "the one way for a preload module to tell that multiprocessing's forkserver main is "
        "importing it (it registers its exit hook there only)"
    ),
    ("server/grpc_web.py", "context._trailing_metadata"): _SONORA,
    ("server/grpc_web.py", "context._response_headers"): _SONORA,
    ("server/grpc_web.py", "context._initial_metadata"): _SONORA,
}


#: names with a leading underscore that are public API (namedtuple's methods and fields)
_PUBLIC_UNDERSCORED = frozenset(("_replace", "_asdict", "_fields", "_make", "_field_defaults"))


def _is_private(name: str) -> bool:
    if name in _PUBLIC_UNDERSCORED:
        return False
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def attr_by_string(node: ast.AST) -> str | None:
    """The attribute name of ``getattr``/``setattr``/``hasattr(x, "<literal>", ...)``, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "setattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def unit_of(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def modules(src: Path = SRC) -> dict[Path, ast.Module]:
    out: dict[Path, ast.Module] = {}
    for path in sorted(src.rglob("*.py")):
        if "__pycache__" in path.parts or path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue  # generated stubs: not ours to keep (scripts/gen_proto.py)
        out[path.relative_to(src)] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return out


def defined_names(tree: ast.Module) -> set[str]:
    """The underscore names a module defines (see the module docstring)."""
    out: set[str] = set()
    for stmt in tree.body:  # module level
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            out.add(t.id)
                            if t.id == "__slots__" and item.value is not None:
                                out.update(
                                    e.value
                                    for e in ast.walk(item.value)
                                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                                )
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return {n for n in out if _is_private(n)}


def violations(trees: dict[Path, ast.Module]) -> list[str]:
    by_module = {rel: defined_names(tree) for rel, tree in trees.items()}
    by_unit: dict[str, set[str]] = defaultdict(set)
    for rel, names in by_module.items():
        by_unit[unit_of(rel)] |= names
    seam_names = set().union(*(by_unit[u] for u in SEAM_UNITS if u in by_unit))
    out: list[str] = []

    def report(rel: Path, node: ast.AST, what: str, why: str) -> None:
        if (rel.as_posix(), what) not in ALLOWED:
            out.append(f"{rel.as_posix()}:{getattr(node, 'lineno', 0)}: {what}: {why}")

    for rel, tree in trees.items():
        unit = unit_of(rel)
        own_unit, own_module = by_unit[unit], by_module[rel]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                base = ast.unparse(node.value)
                if base in ("self", "cls"):
                    continue
                what = f"{base}.{node.attr}"
                if node.attr not in own_unit:
                    report(rel, node, what, f"'{node.attr}' is private to another package")
                elif unit not in SEAM_UNITS and node.attr in seam_names and node.attr not in own_module:
                    report(rel, node, what, "a runtime/engine private name: use Scheduler.seam")
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[0] != "cronoq" or len(parts) < 2 or parts[1] == unit:
                    continue
                for alias in node.names:
                    if _is_private(alias.name):
                        what = f"from {node.module} import {alias.name}"
                        report(rel, node, what, "a private name of another package")
            elif (name := attr_by_string(node)) is not None and _is_private(name) and name not in own_module:
                assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                what = f'{node.func.id}({ast.unparse(node.args[0])}, "{name}")'
                report(rel, node, what, "a private name reached by its string")
    return out


def test_no_package_reaches_into_another_packages_private_names() -> None:
    found = violations(modules())
    assert not found, "private names reached across packages:\n" + "\n".join(found)


def test_every_allowance_is_still_needed() -> None:
    """An exception that no longer matches anything is removed from ``ALLOWED``."""
    saved = dict(ALLOWED)
    try:
        ALLOWED.clear()
        found = "\n".join(violations(modules()))
    finally:
        ALLOWED.update(saved)
    for path, what in saved:
        assert f"{path}:" in found and what in found, f"unused allowance: {path} {what}"


def _check(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return violations(modules(tmp_path))


RUNTIME = {
    "runtime/scheduler.py": (
        "class Scheduler:\n    __slots__ = ('_loop',)\n    def __init__(self):\n"
        "        self._core = None\n    def _kick(self):\n        pass\n"
    )
}


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("def f(sched):\n    return sched._core\n", "sched._core"),
        ("def f(sched):\n    sched._kick()\n", "sched._kick"),
        ("def f(sched):\n    return sched._loop\n", "sched._loop"),
        ("from cronoq.runtime.scheduler import _helper\n", "import _helper"),
        ("def f(sched):\n    return getattr(sched, '_core')\n", 'getattr(sched, "_core")'),
    ],
)
def test_the_check_sees_a_reach_into_the_scheduler(tmp_path: Path, code: str, needle: str) -> None:
    # (server/other.py defines `_core` too: still the scheduler's when reached from server/app.py)
    files = dict(RUNTIME, **{"server/app.py": code, "server/other.py": "class X:\n    _core = 1\n"})
    found = _check(tmp_path, files)
    assert any(needle in v for v in found), found


def test_the_check_allows_what_a_package_owns(tmp_path: Path) -> None:
    code = (
        "class Session:\n    def __init__(self):\n        self._slots = 1\n\n"
        "def f(s: Session):\n    return s._slots, s.__class__\n"
    )
    assert _check(tmp_path, dict(RUNTIME, **{"server/workers.py": code})) == []
    # within the seam packages, one module may use another's internals
    inner = "def f(sched):\n    return sched._core\n"
    assert _check(tmp_path, dict(RUNTIME, **{"runtime/seam.py": inner})) == []
