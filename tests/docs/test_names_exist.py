"""Every API, command-line option and configuration key a docs page names exists.

A page that says ``cronoq.client.Client.wait`` or ``cronoq worker --label`` or
``[limits] max_deps`` promises the reader something; renaming or removing it in the code must
fail here, naming the page and the line, until the page is fixed. Three kinds of names are
checked, in inline code and in code blocks of ``docs/**/*.md`` and the README:

* **dotted Python names** ``cronoq.x.Y.z``: imported (the longest importable module prefix)
  and resolved attribute by attribute; and the methods called on the objects the pages always
  name alike (``sched.replay_where``, ``client.wait``, ``ctx.progress``, ``lease.json``);
* **command-line options**: each ``--flag`` of a ``cronoq CMD ...`` line (shell blocks, and
  inline code that starts with ``cronoq``) must be an option of that click command, of its
  subcommand, or of the root group (client options also go before the command);
* **configuration keys**: keys of ``toml`` blocks by the table they are in, and the
  ``[table] key`` and ``table.key`` spellings in inline code, against the server's
  configuration models (``cronoq.server.config.ConfigFile``).

What is not a name is listed in the allowlists below, each with its reason.
"""

from __future__ import annotations

import importlib
import re
import shlex
import tomllib
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest
from pydantic import BaseModel
from tests.docs.conftest import DOCS, ROOT

from cronoq.cli import cli
from cronoq.server.config import ConfigFile

# ---------------------------------------------------------------------------------------------
# allowlists (each entry with its reason)

#: ``cronoq.<x>`` spellings that are not Python names
NOT_PYTHON = {
    "cronoq.db": "the default SQLite file of `cronoq serve`",
    "cronoq.toml": "the conventional name of the configuration file",
    "cronoq.log": "a log file name in shell examples",
    "cronoq.v1": "the protobuf package of the gRPC services (`cronoq.v1.Tasks/Submit`)",
    "cronoq.replay_of": "a tag a replay carries, not an attribute",
    "cronoq.recurring": "a tag a recurring schedule's tasks carry, not an attribute",
    "cronoq.example": "a host name in examples (`cronoq.example.com`)",
    "cronoq.svc": "a Kubernetes service host name",
    "cronoq.default": "a Kubernetes service host name",
    "cronoq.internal": "a host name in examples",
}

#: top-level tables of the configuration file (``table.key`` in inline code is checked only
#: for these, so ``ctx.attempt`` or ``sched.submit`` are never taken for configuration)
TABLES = tuple(ConfigFile.model_fields)

#: ``table.key`` spellings in inline code that are not configuration keys
NOT_CONFIG = {
    "server.py": "a file name (bench/server.py)",
    "pools.py": "a file name (src/cronoq/server/config/pools.py)",
    "server.yaml": "a file name (a Kubernetes manifest under deploy/)",
    "server.should_exit": "uvicorn's `Server` attribute (docs/tutorials/web-app.md)",
}

# ---------------------------------------------------------------------------------------------
# reading the pages


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    text: str
    lang: str  # "" for inline code


FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)\s*$",
    re.S | re.M,
)
INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def pages() -> list[Path]:
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


@cache
def snippets() -> tuple[Snippet, ...]:
    out: list[Snippet] = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start("body")) + 1
            out.append(Snippet(name, line, m["body"], m["lang"] or "text"))
        # the prose: each block blanked to its newlines, so line numbers stay right
        prose = FENCE.sub(lambda m: "\n" * m[0].count("\n"), text)
        for m in INLINE.finditer(prose):
            out.append(Snippet(name, prose.count("\n", 0, m.start()) + 1, m[2].strip(), ""))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# dotted Python names

#: ``cronoq.a.b``, not a pattern of names (``cronoq.pool.*``)
DOTTED = re.compile(r"(?<![\w./-])cronoq(?:\.[A-Za-z_]\w*)+(?!\w|\.\*)")


def resolve(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if isinstance(obj, type) and attr in getattr(obj, "model_fields", {}):
                obj = obj.model_fields[attr]
                continue
            if isinstance(obj, type) and attr in getattr(obj, "__annotations__", {}):
                obj = None  # an annotated attribute (a dataclass or slotted field)
                continue
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


#: pages whose ``cronoq.x`` names are not Python (page: reason)
OTHER_NAMESPACES = {
    "docs/how-to/opentelemetry.md": "OpenTelemetry instrument and span attribute names "
    "(`cronoq.pool.pending`, `cronoq.task_id`): tests/test_otel.py checks those",
}


def python_names() -> Iterator[tuple[str, str]]:
    for s in snippets():
        if s.lang not in ("", "python", "py", "pycon", "text", "sh", "console", "bash"):
            continue
        if s.page in OTHER_NAMESPACES:
            continue
        for m in DOTTED.finditer(s.text):
            name = m[0]
            if any(name == k or name.startswith(k + ".") for k in NOT_PYTHON):
                continue
            yield f"{s.page}:{s.line}", name


def test_dotted_python_names_resolve() -> None:
    checked = 0
    bad = []
    for where, name in python_names():
        checked += 1
        if not resolve(name):
            bad.append(f"{where}: {name}")
    assert checked > 50, "the pages name the package's API; the scan finds them"
    assert not bad, "names the package does not have:\n" + "\n".join(sorted(set(bad)))


def test_resolve_tells_real_from_made_up() -> None:
    assert resolve("cronoq.client.Client.wait") and resolve("cronoq.Scheduler.replay_where")
    assert resolve("cronoq.testing") and resolve("cronoq.RetryPolicy")
    assert not resolve("cronoq.client.Client.wiat") and not resolve("cronoq.Schedular")


# ---------------------------------------------------------------------------------------------
# methods and attributes of the objects the pages call by their usual names

#: the variable names the pages give these objects, throughout (`sched.replay(...)`)
RECEIVERS = {
    "sched": ("cronoq", "Scheduler"),
    "client": ("cronoq.client", "Client"),
    "ctx": ("cronoq", "TaskContext"),
    "lease": ("cronoq.client.worker", "Lease"),
}
#: `client.py`, `worker.yaml`: file names, not attributes
FILE_SUFFIXES = {"py", "yaml", "yml", "crt", "pem", "toml"}
ATTRIBUTE = re.compile(r"(?<![\w.])(" + "|".join(RECEIVERS) + r")\.([A-Za-z_]\w*)")


def attribute_uses() -> Iterator[tuple[str, str, str]]:
    for s in snippets():
        if s.lang not in ("", "python", "py", "pycon"):
            continue
        for m in ATTRIBUTE.finditer(s.text):
            if m[2] not in FILE_SUFFIXES:
                yield f"{s.page}:{s.line}", m[1], m[2]


def test_methods_called_on_the_usual_objects_exist() -> None:
    classes = {name: getattr(importlib.import_module(mod), cls) for name, (mod, cls) in RECEIVERS.items()}
    checked = 0
    bad = []
    for where, receiver, attr in attribute_uses():
        checked += 1
        if not hasattr(classes[receiver], attr):
            bad.append(f"{where}: {receiver}.{attr} ({classes[receiver].__name__} has no {attr!r})")
    assert checked > 100, "the pages call sched., client. and ctx. methods; the scan finds them"
    assert not bad, "methods the objects do not have:\n" + "\n".join(sorted(set(bad)))


# ---------------------------------------------------------------------------------------------
# command-line options

SHELL_LANGS = ("sh", "console", "bash", "shell", "text")
#: a command line ends at these shell tokens
ENDS = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "<"}


def options_of(cmd: click.Command) -> dict[str, bool]:
    """A command's options: flag -> whether it takes a value."""
    names: dict[str, bool] = {}
    for p in cmd.params:
        takes = isinstance(p, click.Option) and not p.is_flag and not p.count
        names.update({o: takes for o in (*p.opts, *p.secondary_opts) if o.startswith("-")})
    names.update(dict.fromkeys(cmd.get_help_option_names(click.Context(cmd)), False))
    return names


def command_lines() -> Iterator[tuple[str, str]]:
    for s in snippets():
        if s.lang == "":
            if s.text.startswith("cronoq "):
                yield f"{s.page}:{s.line}", s.text
            continue
        if s.lang not in SHELL_LANGS:
            continue
        body = re.sub(r"\\\n", " ", s.text)
        for n, raw in enumerate(body.splitlines()):
            line = raw.strip().removeprefix("$ ").strip()
            line = re.sub(r"^(\.venv/bin/|\S+=\S+ )+", "", line)
            if line.startswith("cronoq "):
                yield f"{s.page}:{s.line + n}", line


def check_command(line: str) -> list[str]:
    """The problems of one ``cronoq ...`` line: an unknown command, or an option the command
    (or the root group) does not have. Output lines (``cronoq serve: leading``) and
    placeholders (``cronoq submit/get/wait``, ``cronoq CMD``) are not command lines."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    words = []
    for tok in tokens[1:]:
        if tok in ENDS or tok.startswith((">", "2>")):
            break
        words.append(tok)
    allowed = options_of(cli)
    cmd: click.Command = cli
    bad: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w.startswith("--") and len(w) > 2:
            flag, eq, _ = w.partition("=")
            if flag not in allowed:
                bad.append(f"{cmd.name} has no option {flag}")
            skip = not eq and allowed.get(flag, False)
            continue
        if w.startswith("-") or not isinstance(cmd, click.Group):
            continue
        if w.endswith(":") or "/" in w or w.isupper():
            return []  # output, or a placeholder
        sub = cmd.commands.get(w)
        if sub is None:
            return [f"no command {w!r}"]
        cmd = sub
        allowed = {**allowed, **options_of(cmd)}
    return bad


def test_command_line_options_exist() -> None:
    checked = 0
    bad = []
    for where, line in command_lines():
        checked += 1
        bad += [f"{where}: {p}  ({line})" for p in check_command(line)]
    assert checked > 30, "the pages show cronoq command lines; the scan finds them"
    assert not bad, "options the commands do not have:\n" + "\n".join(bad)


def test_check_command_tells_real_from_made_up() -> None:
    assert check_command("cronoq worker mod:handle --pool default --slots 8 --label gpu=a100") == []
    assert check_command("cronoq --token T get 1") == []
    assert check_command("cronoq worker mod:handle --pools default") == ["worker has no option --pools"]
    assert check_command("cronoq sumbit '{}'") == ["no command 'sumbit'"]


# ---------------------------------------------------------------------------------------------
# configuration keys


def _model(annotation: object) -> type[BaseModel] | None:
    """The configuration model a field holds (through Annotated, Optional and tuples)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is Ellipsis or arg is type(None):
            continue
        found = _model(arg)
        if found is not None:
            return found
    return None


def _sub_model(f: Any) -> type[BaseModel] | None:
    """The model of a field's sub-table: its type, or the input type a validator declares
    (a pool's ``retry`` is a ``RetryTable`` in the file and a ``RetryPolicy`` in the code)."""
    for meta in f.metadata:
        found = _model(getattr(meta, "json_schema_input_type", None))
        if found is not None:
            return found
    return _model(f.annotation)


def keys_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """A table's keys (aliases and names) and, for each, the model of a sub-table."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, f in model.model_fields.items():
        sub = _sub_model(f)
        for key in {name, f.alias or name}:
            out[key] = sub
    return out


def resolve_key(path: list[str]) -> str | None:
    """None when ``path`` (table names, then a key) exists; else what is wrong."""
    model: type[BaseModel] = ConfigFile
    for i, part in enumerate(path):
        here = ".".join(path[: i + 1])
        keys = keys_of(model)
        if part.endswith("*"):
            return None if any(k.startswith(part[:-1]) for k in keys) else f"no key matches {here}"
        if part not in keys:
            return f"no key {here}"
        sub = keys[part]
        if sub is None:
            if i == len(path) - 1:
                return None
            # a map-valued key (a pool's `tenant_weights`): what follows are the user's names
            field = next(f for n, f in model.model_fields.items() if part in (n, f.alias))
            return None if _is_map(field) else f"{here} is not a table"
        model = sub
    return None


def _is_map(field: Any) -> bool:
    inputs = [getattr(m, "json_schema_input_type", None) for m in field.metadata]
    return any(typing.get_origin(t) is dict for t in inputs) or "Map" in str(field.annotation)


HEADER = re.compile(r"^\s*\[\[?\s*([\w.]+)\s*\]\]?\s*(#.*)?$")
ASSIGN = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*=")
INLINE_TABLE_KEY = re.compile(r"[{,]\s*([A-Za-z_]\w*)\s*=")
SECTION_KEY = re.compile(r"^\[\[?([\w.]+)\]\]?\s+([a-z_]\w*\*?)$")
DOTTED_KEY = re.compile(r"^(" + "|".join(TABLES) + r")((?:\.[a-z_]\w*\*?)+)$")


def config_references() -> Iterator[tuple[str, list[str]]]:
    for s in snippets():
        if s.lang == "toml":
            table: list[str] = []
            for n, line in enumerate(s.text.splitlines()):
                where = f"{s.page}:{s.line + n}"
                if m := HEADER.match(line):
                    table = m[1].split(".")
                    yield where, table
                elif m := ASSIGN.match(line):
                    yield where, [*table, m[1]]
                    value = line.split("=", 1)[1]
                    if value.strip().startswith("{"):
                        sub = _model_at([*table, m[1]])
                        if sub is not None:
                            for k in INLINE_TABLE_KEY.findall(value):
                                yield where, [*table, m[1], k]
        elif s.lang == "":
            where = f"{s.page}:{s.line}"
            if m := SECTION_KEY.match(s.text):
                if m[1].split(".")[0] in TABLES:
                    yield where, [*m[1].split("."), m[2]]
            elif (m := DOTTED_KEY.match(s.text)) and s.text not in NOT_CONFIG:
                yield where, [m[1], *m[2].strip(".").split(".")]


def _model_at(path: list[str]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = ConfigFile
    for part in path:
        if model is None:
            return None
        model = keys_of(model).get(part)
    return model


def test_configuration_keys_exist() -> None:
    checked = 0
    bad = []
    for where, path in config_references():
        checked += 1
        problem = resolve_key(path)
        if problem:
            bad.append(f"{where}: {problem}")
    assert checked > 50, "the pages show configuration; the scan finds it"
    assert not bad, "configuration the server does not have:\n" + "\n".join(bad)


def test_resolve_key_tells_real_from_made_up() -> None:
    assert resolve_key(["limits", "max_deps"]) is None
    assert resolve_key(["limits", "key_retention_*"]) is None
    assert resolve_key(["pools", "retry", "max_attempts"]) is None
    assert resolve_key(["pools", "tenant_weights", "acme"]) is None  # a map: the user's names
    assert resolve_key(["limits", "max_deps", "x"]) == "limits.max_deps is not a table"
    assert resolve_key(["limits", "max_dep"]) == "no key limits.max_dep"
    assert resolve_key(["store", "history_days"]) == "no key store.history_days"


@pytest.mark.parametrize("page", ["docs/how-to/from-celery.md", "docs/concepts/fairness.md"])
def test_pages_fixed_by_the_day_one_trial_are_scanned(page: str) -> None:
    assert any(s.page == page for s in snippets())


# ---------------------------------------------------------------------------------------------
# the extras of pyproject.toml, as the install page and the README list them


def extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    deps = data["project"]["optional-dependencies"]
    return {
        name: [re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in reqs]
        for name, reqs in deps.items()
    }


#: extras for the project's own work, which the install page for users leaves out
DEVELOPER_EXTRAS = {"dev", "docs", "bench"}


def test_the_install_page_lists_every_extra_with_its_packages() -> None:
    text = (DOCS / "getting-started" / "install.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, re.M))
    for name, packages in extras().items():
        if name in DEVELOPER_EXTRAS:
            continue
        assert name in rows, f"install.md has no row for the `{name}` extra"
        listed = [p.strip().lower() for p in rows[name].split(",")]
        assert listed == packages, f"install.md lists {listed} for `{name}`; pyproject.toml has {packages}"
        assert f"'.[{name}]'" in text, f"install.md shows no `pip install '.[{name}]'`"


def test_the_readme_lists_every_extra_with_its_packages() -> None:
    text = re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))
    for name, packages in extras().items():
        found = re.search(rf"`{name}` \(([^)]*)\)", text)
        assert found, f"the README's Dependencies section does not name the `{name}` extra"
        if name not in DEVELOPER_EXTRAS:
            listed = [p.strip().lower() for p in found[1].split(":")[0].split(",")]
            assert listed == packages, (
                f"the README lists {listed} for `{name}`; pyproject.toml has {packages}"
            )
