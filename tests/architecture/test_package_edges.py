"""Which package may import which (docs/architecture/index.md#declared-once).

``cronoq.spec`` holds what a task is (the field table, the validators, the ``Submission``
value, its wire form); it sits below ``runtime``, ``client`` and ``server``, which take tasks
and so import it, never one another for it:

* ``client`` never imports ``server`` nor ``runtime``, except the process machinery a
  ``Worker`` shares with an in-process ``Pool`` (:data:`CLIENT_MAY_USE`);
* ``server`` never imports ``client``; of ``runtime`` it uses the scheduler it serves through
  the modules in :data:`SERVER_MAY_USE` (its seam and public classes), not the runtime's
  internals (its task-field handling among them: that is ``spec``'s);
* ``spec`` imports only the engine's model and time, the errors and the wire stubs, never a
  layer above it.

Every import statement counts, inside functions and ``TYPE_CHECKING`` blocks too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "cronoq"

#: runtime modules the client may import (None: any name of it), with why
CLIENT_MAY_USE: dict[str, frozenset[str] | None] = {
    # a Worker runs handlers in processes with the same machinery as an in-process Pool
    "cronoq.runtime.processes": None,
}
#: runtime modules (and names) the server may import: the scheduler it serves and its
#: documented surface (docs/architecture/index.md#seam)
SERVER_MAY_USE: dict[str, frozenset[str] | None] = {
    "cronoq.runtime.scheduler": frozenset({"Scheduler"}),
    "cronoq.runtime.pool": frozenset({"Pool"}),
    "cronoq.runtime.scalers": frozenset({"ExternalScaler"}),
    "cronoq.runtime.events": frozenset({"EventStream", "ProgressEventStream"}),
    "cronoq.runtime.context": frozenset({"TaskContext"}),
    # the kind the remote executor declares (reports its outcomes on the context, as values)
    "cronoq.runtime.executors": frozenset({"ExecutorKind"}),
    # a remote attempt's durable calls run the in-process implementation on its TaskContext:
    # one place for the journal, its replay, the determinism check and parking
    "cronoq.runtime.parking": None,
    # the batch member Scheduler.submit_batch takes (not the runtime's field handling)
    "cronoq.runtime.task": frozenset({"Task"}),
}
#: what spec may import besides itself
SPEC_MAY_USE = ("cronoq.engine.model", "cronoq.engine.time", "cronoq.errors", "cronoq.proto")

Edge = tuple[str, str | None]  # (module, the name imported from it, or None: the module)


def imports_of(package: str) -> dict[str, set[Edge]]:
    """module path (relative to src/cronoq) → the cronoq imports it makes."""
    out: dict[str, set[Edge]] = {}
    for path in sorted((SRC / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: set[Edge] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update((node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                found.update((a.name, None) for a in node.names)
        out[path.relative_to(SRC).as_posix()] = {e for e in found if _under(e[0], "cronoq")}
    return out


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _offending(
    package: str, forbidden: str, allowed: dict[str, frozenset[str] | None] | None = None
) -> list[str]:
    bad = []
    for rel, edges in imports_of(package).items():
        for module, name in sorted(edges, key=str):
            if not _under(module, forbidden):
                continue
            ok = next((v for k, v in (allowed or {}).items() if _under(module, k)), False)
            if ok is None or (ok and name in ok):
                continue
            bad.append(f"{rel}: {module}" + ("" if name is None else f".{name}"))
    return bad


def test_client_and_server_never_import_each_other() -> None:
    assert _offending("client", "cronoq.server") == []
    assert _offending("server", "cronoq.client") == []


def test_the_client_uses_no_runtime_but_the_process_machinery() -> None:
    assert _offending("client", "cronoq.runtime", CLIENT_MAY_USE) == []


def test_the_server_uses_the_runtime_through_its_public_surface_only() -> None:
    assert _offending("server", "cronoq.runtime", SERVER_MAY_USE) == []


@pytest.mark.parametrize("layer", ["client", "server", "runtime", "tasks"])
def test_every_layer_that_takes_tasks_imports_spec(layer: str) -> None:
    used = {m for edges in imports_of(layer).values() for m, _ in edges}
    assert any(_under(m, "cronoq.spec") for m in used), layer


def test_spec_is_below_the_layers() -> None:
    bad = []
    for rel, edges in imports_of("spec").items():
        for module, _ in sorted(edges, key=str):
            if not any(_under(module, a) for a in ("cronoq.spec", *SPEC_MAY_USE)):
                bad.append(f"{rel}: {module}")
    assert bad == []


def test_the_check_sees_an_edge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "client"
    pkg.mkdir()
    (pkg / "x.py").write_text("def f():\n    from cronoq.server.app import ServerApp\n")
    (pkg / "y.py").write_text("import cronoq.runtime.pool\nfrom cronoq.runtime.processes import Processes\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert _offending("client", "cronoq.server") == ["client/x.py: cronoq.server.app.ServerApp"]
    assert _offending("client", "cronoq.runtime", CLIENT_MAY_USE) == ["client/y.py: cronoq.runtime.pool"]
    server = tmp_path / "server"
    server.mkdir()
    (server / "z.py").write_text("from cronoq.runtime.task import Task, make_options\n")
    assert _offending("server", "cronoq.runtime", SERVER_MAY_USE) == [
        "server/z.py: cronoq.runtime.task.make_options"
    ]
