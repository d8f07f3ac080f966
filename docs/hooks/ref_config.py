"""The configuration reference of ``cronoq serve``, generated from the config models.

The tables are the pydantic models of :mod:`cronoq.server.config`, walked from
``ConfigFile`` (the file's top level): a field whose type is a model is a table
(``[server.tls]``), a tuple of models an array of tables (``[[pools]]``). For every key the
page shows what the models declare:

- the keys themselves, in the model's order (``Section.table_keys()``: those a file may give);
- the type (the ``TypeName`` of the key's ``Annotated`` type), the default (the field's) and
  the meaning (the field's ``description``);
- the validation column: the key is set to a few wrong values and the parser's messages
  (``must be an integer >= 1``, ``must be one of memory, sqlite, postgres``, ...) become the
  rules; a probe of an empty table reports the keys that are ``required``.

Only what is not about one key is written here: each table's introduction
(:data:`INTROS`) and the values a probe needs beside the probed key (:data:`BASES`). A key
without a ``description`` fails the build (strict mode) and ``tests/docs``, and so does a
table without an introduction or an introduction of a table that no longer exists.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

PROBE_KEY = "qqqqqqqq"

Loc = tuple[str | int, ...]


class _Probe:
    """A value no converter accepts; shown as ``PROBE`` in messages."""

    def __str__(self) -> str:
        return "PROBE"

    __repr__ = __str__


#: Wrong values tried on every key (their messages, minus the "(got ...)" part, are the rules).
PROBES: tuple[Any, ...] = (_Probe(), "", "x y", -1, 10**12)


def _no_base(key: str) -> dict[str, Any]:
    return {}


def _resource_base(key: str) -> dict[str, Any]:
    return {"name": "r", "kind": "token_bucket" if key in ("rate", "burst") else "semaphore"}


#: the other keys a probe of ``key`` needs in a table, so that only ``key`` is wrong
BASES: Mapping[str, Callable[[str], dict[str, Any]]] = {
    "[[auth.tokens]]": lambda key: {"role": "client"},
    "[[auth.certs]]": lambda key: {"role": "client", "dns": "w.example.com"},
    "[[pools]]": lambda key: {"name": "p"},
    "[pools.scaler]": lambda key: {"kind": "webhook", "url": "http://h"},
    "[[resources]]": _resource_base,
    "[[shards]]": lambda key: {"name": "s", "number": 1, "pools": ["p"], "endpoint": "http://h:1"},
}

#: The introduction of every table.
INTROS: Mapping[str, str] = {
    "top level": "The file's top-level tables.",
    "[server]": "Listeners, TLS and shutdown.",
    "[server.tls]": "TLS for both listeners (PEM files). `client_ca` turns on mutual TLS.",
    "[server.grpc_web]": "gRPC-Web for browser clients on the HTTP listener (off when absent); see "
    "[gRPC-Web](../how-to/grpc-web.md).",
    "[server.peer_tls]": "TLS of calls to `https://` peer shards (PEM files); without `ca` the system roots. "
    "`cert` and `key` (a client certificate) go together.",
    "[auth]": "Authentication.",
    "[[auth.tokens]]": "One entry per bearer token. Give `token` or `token_env`, not both. Once any token is "
    "configured, auth applies on every address (loopback included).",
    "[[auth.certs]]": "Certificate principals (mutual TLS, needs `server.tls.client_ca`): a client "
    "certificate whose DNS subjectAltName equals `dns` gets `role`, with the restrictions of a token. "
    "See [certificate principals](../how-to/security.md#certificate-principals).",
    "[store]": "Where durable state lives.",
    "[limits]": "Bounds on requests, streams and memory.",
    "[outputs]": "The leader's in-memory cache of recent outputs and finished task records, which "
    "answers `Wait`/`Get` after completion. Beyond `cache_entries` outputs or "
    "`cache_bytes` bytes (data and content type) the oldest outputs are dropped: the task "
    "answers `succeeded` with `output_available` false (the newest output always stays). "
    "Beyond `info_entries` finished tasks (or `limits.key_retention_max`, the smaller) the "
    "oldest are forgotten (`not_found`, their keys free). The store keeps its copy for "
    "`store.keep_finished_s`.",
    "[[pools]]": "One entry per pool. Only `name` is required; every other key has the in-process "
    "[`Pool`](api.md#cronoq.Pool) default. Without `[[pools]]` there is one pool `default`.",
    "[pools.retry]": "A pool's retry policy, e.g. `retry = {max_attempts = 5, initial_backoff_s = 0.5}`.",
    "[pools.scaler]": 'A pool\'s scaler: the string `"external"` (the default: KEDA/HPA read `desired`, '
    'workers bring the capacity) or a table; `kind = "webhook"` (implied by `url`) requires `url`. '
    "In this version the server calls no webhook: every pool only publishes `desired` "
    "([autoscaling](../concepts/autoscaling.md)).",
    "[[resources]]": "Shared resources: a semaphore (`permits`, required) or a token bucket (`rate` and "
    "`burst`, required).",
    "[[shards]]": "One entry per shard ([Scaling out with shards](../how-to/shards.md)): every pool in "
    "exactly one shard; every server of every shard reads the same file.",
}


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of the file: its name in the docs, its model, and its location (``("pools",
    0, "retry")``; the index of an array of tables is 0)."""

    name: str
    model: Any
    loc: Loc

    @property
    def path(self) -> str:
        from cronoq.server.config.translate import path

        return path(self.loc)

    def base(self, key: str) -> dict[str, Any]:
        return BASES.get(self.name, _no_base)(key)

    def build(self, t: dict[str, Any]) -> dict[str, Any]:
        """A whole file holding the table ``t`` (with what its outer tables need)."""
        data: Any = t
        for k in range(len(self.loc) - 1, -1, -1):
            part = self.loc[k]
            if isinstance(part, int):
                data = [data]
                continue
            outer = _name(self.loc[:k]) if k else None
            data = {**(BASES.get(outer, _no_base)(part) if outer else {}), part: data}
        assert isinstance(data, dict)
        return data

    def field(self, key: str) -> Any:
        for name, f in self.model.model_fields.items():
            if (f.alias or name) == key:
                return f
        raise KeyError(key)


def _name(loc: Loc) -> str:
    if not loc:
        return "top level"
    dotted = ".".join(str(p) for p in loc if isinstance(p, str))
    return f"[[{dotted}]]" if isinstance(loc[-1], int) else f"[{dotted}]"


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """A type without ``Annotated`` and ``| None``, and the metadata found on the way."""
    meta: list[Any] = []
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            meta += list(tp.__metadata__)
            tp = tp.__origin__
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        else:
            return tp, meta


def _sub_table(field: Any) -> tuple[Any, bool] | None:
    """The model of a key that is a table (and whether it is an array of tables)."""
    from pydantic import BaseModel

    tp, meta = _unwrap(field.annotation)
    meta += list(field.metadata)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp, False
    if typing.get_origin(tp) is tuple:
        arg = typing.get_args(tp)[0]
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg, True
    for m in meta:  # a table kept as another type (a pool's retry: RetryTable → RetryPolicy)
        given = getattr(m, "json_schema_input_type", None)
        if isinstance(given, type) and issubclass(given, BaseModel):
            return given, False
    return None


def _walk(model: Any, loc: Loc) -> Iterator[Table]:
    yield Table(_name(loc), model, loc)
    table = Table(_name(loc), model, loc)
    for key in model.table_keys():
        sub = _sub_table(table.field(key))
        if sub is not None:
            yield from _walk(sub[0], (*loc, key, 0) if sub[1] else (*loc, key))


def tables() -> list[Table]:
    """Every table of the file, from ``ConfigFile`` down."""
    from cronoq.server.config import ConfigFile

    return list(_walk(ConfigFile, ()))


def _errors(data: dict[str, Any]) -> tuple[str, ...]:
    from cronoq.server.config import ConfigError, parse_config

    try:
        parse_config(data, env={})
    except ConfigError as e:
        return e.errors
    return ()


def _key_path(table: Table, key: str) -> str:
    return f"{table.path}.{key}" if table.path else key


def known_keys(table: Table) -> tuple[list[str], dict[str, str]]:
    """The keys ``table`` accepts, in the model's order, and the required ones with their note."""
    keys = list(table.model.table_keys())
    required: dict[str, str] = {}
    prefix = _key_path(table, "")
    for e in _errors(table.build({})):
        path, _, msg = e.partition(": ")
        key = path[len(prefix) :] if path.startswith(prefix) else ""
        if key in keys and msg.startswith("required"):
            required[key] = msg
    return keys, required


def rules(table: Table, key: str) -> list[str]:
    """The parser's messages for wrong values of ``key`` (without the "(got ...)" part)."""
    out: list[str] = []
    for probe in PROBES:
        for e in _errors(table.build({**table.base(key), key: probe})):
            path, _, msg = e.partition(": ")
            if path != _key_path(table, key):
                continue
            msg = _GOT_RE.sub("", msg)
            msg = re.sub(r": ('x y'|''|PROBE|-1)$", "", msg)
            if msg not in out:
                out.append(msg)
    return out


_GOT_RE = re.compile(r" \(got .*\)$")


def type_name(table: Table, key: str) -> str:
    """The key's type as the page names it."""
    from cronoq.server.config.values import TypeName

    field = table.field(key)
    sub = _sub_table(field)
    if sub is not None:
        return "array of tables" if sub[1] else "table"
    _, meta = _unwrap(field.annotation)
    for m in [*meta, *field.metadata]:
        if isinstance(m, TypeName):
            return m.name
    return "-"


def _toml(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "`true`" if v else "`false`"
    if isinstance(v, str):
        return f'`"{v}"`'
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer():
            return f"`{int(v):_}`".replace("_", ",") if abs(v) >= 10_000 else f"`{int(v)}`"
        return f"`{v}`"
    if isinstance(v, int):
        return f"`{v:,}`"
    if isinstance(v, Mapping):
        return "`{}`" if not v else f"`{dict(v)}`"
    if isinstance(v, (tuple, list)):
        return f"`{list(v)}`"
    kind = getattr(v, "kind", None)
    if isinstance(kind, str):  # ScalerConfig
        return f'`"{kind}"`'
    if hasattr(v, "max_attempts"):  # RetryPolicy
        return "[`RetryPolicy()`](#pools-retry)"
    return f"`{v}`"


def default(table: Table, key: str) -> str:
    field = table.field(key)
    v = field.get_default(call_default_factory=True)
    if _sub_table(field) is not None and key not in _SHOWN_TABLE_DEFAULTS.get(table.name, ()):
        return "-"  # a table: its keys have the defaults
    return _toml(v)


#: tables whose key that is a table has a default worth a cell: a pool's retry and scaler
_SHOWN_TABLE_DEFAULTS: Mapping[str, tuple[str, ...]] = {"[[pools]]": ("retry", "scaler")}


def undocumented() -> list[str]:
    """Keys of the models without a ``description``."""
    return [f"{t.name} {k}" for t in tables() for k in t.model.table_keys() if not t.field(k).description]


def problems() -> list[str]:
    out = [f"config key {k} has no Field(description=...) in cronoq.server.config" for k in undocumented()]
    names = [t.name for t in tables()]
    out += [
        f"config table {n} has no introduction in docs/hooks/ref_config.py INTROS"
        for n in names
        if n not in INTROS
    ]
    out += [
        f"docs/hooks/ref_config.py INTROS has {n}, which the config no longer has"
        for n in INTROS
        if n not in names
    ]
    out += [
        f"docs/hooks/ref_config.py BASES has {n}, which the config no longer has"
        for n in BASES
        if n not in names
    ]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    lines: list[str] = []
    for table in tables():
        keys, required = known_keys(table)
        anchor = re.sub(r"[^a-z0-9]+", "-", table.name.lower()).strip("-")
        lines += [f"### `{table.name}` {{#{anchor}}}" if table.path else f"### Top level {{#{anchor}}}", ""]
        lines += [INTROS.get(table.name, ""), ""]
        lines += ["| key | type | default | validation | meaning |", "|---|---|---|---|---|"]
        for key in keys:
            desc = table.field(key).description or "**not described yet**"
            checks = rules(table, key)
            if key in required:
                checks.insert(0, f"**{required[key]}**")
            rule = _cell("; ".join(checks)) or "-"
            dflt = "-" if key in required else default(table, key)
            lines.append(f"| `{key}` | {_cell(type_name(table, key))} | {dflt} | {rule} | {_cell(desc)} |")
        lines.append("")
    return "\n".join(lines)


def serve_options() -> str:
    """The options of ``cronoq serve`` with their environment variables (from the click command)."""
    import click

    from cronoq.cli import serve

    lines = ["| option | environment | default | meaning |", "|---|---|---|---|"]
    for p in serve.params:
        if not isinstance(p, click.Option):
            continue
        flags = ", ".join(f"`{o}`" for o in p.opts)
        if not p.is_flag and p.metavar is None and isinstance(p.type, click.Choice):
            flags += " `LEVEL`"
        elif not p.is_flag:
            flags += " `PATH`" if isinstance(p.type, click.Path) else " `VALUE`"
        env = p.envvar if isinstance(p.envvar, str) else ", ".join(p.envvar or ())
        dflt = "-" if p.default in (None, False) or p.is_flag else f"`{p.default}`"
        meaning = p.help or (p.name or "").replace("_", " ")
        if isinstance(p.type, click.Choice):
            meaning += " (one of " + ", ".join(f"`{c}`" for c in p.type.choices) + ")"
        lines.append(f"| {flags} | {f'`{env}`' if env else '-'} | {dflt} | {_cell(meaning)} |")
    return "\n".join(lines)
