"""Reading the configuration: a file or TOML text → :class:`~.document.ServerConfig`.

``load_config(path)`` reads a TOML file (stdlib ``tomllib``); without a path it uses the file
named by ``$CRONOQ_CONFIG`` or, failing that, the defaults. ``parse_config`` validates decoded
TOML in two steps, and reports the problems of both at once:

1. the file's shape: ``ConfigFile.model_validate(data, context={"env": env})`` (every table,
   its keys and its own rules; see :mod:`.base`), its ``ValidationError`` read as problems;
2. the rules between tables (:func:`~.checks.check`), on the keys that step 1 found right.

With no problem, :func:`_build` makes the ``ServerConfig``: tokens as digests, certificates
and tokens named after their entries, the own shard and ``--insecure-no-auth`` applied.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from .base import FILE_CONTEXT
from .checks import check, merge
from .document import ConfigFile, ServerConfig
from .engine import pool_config
from .errors import ConfigError
from .principals import TokenConfig, token_digest
from .translate import Problem, from_pydantic, line
from .values import SHARD_PLACEHOLDER

__all__ = ["CONFIG_ENV", "load_config", "loads_config", "parse_config"]

CONFIG_ENV: Final = "CRONOQ_CONFIG"


def _build(
    doc: ConfigFile, data: Mapping[str, Any], *, source: str | None, own: str | None, insecure: bool
) -> ServerConfig:
    limits = doc.limits
    raw_pools = data.get("pools") or ()
    pools = (
        tuple(
            p if "max_pending" in raw else p.model_copy(update={"max_pending": limits.max_pending_per_pool})
            for p, raw in zip(doc.pools, raw_pools, strict=False)
        )
        or doc.pools
    )
    tokens = tuple(
        TokenConfig(
            digest=token_digest(t.token.get_secret_value()),
            role=t.role,
            pools=t.pools,
            labels=t.labels,
            tenant=t.tenant,
            name=f"auth.tokens[{i}]",
            token_env=t.token_env,
        )
        for i, t in enumerate(doc.auth.tokens)
        if t.token is not None
    )
    certs = tuple(c.model_copy(update={"name": f"auth.certs[{i}]"}) for i, c in enumerate(doc.auth.certs))
    store = doc.store
    if own is not None:
        update = {k: getattr(store, k).replace(SHARD_PLACEHOLDER, own) for k in ("schema", "path")}
        store = store.model_copy(update=update)
    server = doc.server.model_copy(
        update={"shard": own, "insecure_no_auth": doc.server.insecure_no_auth or insecure}
    )
    return ServerConfig(
        server=server,
        tokens=tokens,
        store=store,
        limits=limits,
        pools=pools,
        resources=doc.resources,
        source=source,
        certs=certs,
        outputs=doc.outputs,
        shards=doc.shards,
    )


def _engine_problems(cfg: ServerConfig) -> list[str]:
    """Belt and braces: the engine must accept every pool we accepted."""
    out: list[str] = []
    for i, p in enumerate(cfg.pools):
        try:
            pool_config(p)
        except ValueError as e:  # pragma: no cover
            out.append(f"pools[{i}]: {e}")
    return out


def parse_config(
    data: Mapping[str, Any],
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    source: str | None = None,
    shard: str | None = None,
) -> ServerConfig:
    """Validate already-decoded TOML (a dict); ``insecure_no_auth`` and ``shard`` are the CLI
    flags (``--shard`` wins over ``server.shard`` and ``$CRONOQ_SHARD``)."""
    data = dict(data)
    doc: ConfigFile | None = None
    problems: list[Problem] = []
    try:
        doc = ConfigFile.model_validate(data, context={FILE_CONTEXT: env})
    except ValidationError as e:
        problems = from_pydantic(e.errors(), {})
    outcome = check(data, problems, env=env, insecure_no_auth=insecure_no_auth, shard=shard)
    errors = [line(p) for p in merge(problems, outcome, ConfigFile.report_order)]
    if doc is not None and not errors:
        cfg = _build(doc, data, source=source, own=outcome.own_shard, insecure=insecure_no_auth)
        errors = _engine_problems(cfg)
        if not errors:
            return cfg
    raise ConfigError(errors, source)


#: the deepest nesting of tables and arrays a configuration may have (the schema needs 5)
MAX_DEPTH: Final = 32


def too_deep(data: Mapping[str, Any]) -> str | None:
    """The dotted path (shortened) of a value nested deeper than :data:`MAX_DEPTH`, or None;
    iterative, so a 5,000-level ``[a.a.a...]`` header is measured without recursing."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return ".".join(path[:3]) + "..."
        items = (
            value.items()
            if isinstance(value, Mapping)
            else enumerate(value)
            if isinstance(value, list)
            else ()
        )
        for k, v in items:
            if isinstance(v, Mapping | list):
                stack.append((v, (*path, str(k))))
    return None


def loads_config(
    text: str,
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    source: str | None = None,
    shard: str | None = None,
) -> ServerConfig:
    """Parse and validate TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"invalid TOML: {e}", source) from None
    except RecursionError:  # (tomllib recurses per nesting level of arrays and inline tables)
        raise ConfigError("invalid TOML: values are nested too deeply", source) from None
    deep = too_deep(data)
    if deep is not None:  # (a dotted header nests without recursion in tomllib, not after it)
        raise ConfigError(f"{deep}: tables and arrays nested more than {MAX_DEPTH} levels deep", source)
    return parse_config(data, env=env, insecure_no_auth=insecure_no_auth, source=source, shard=shard)


def load_config(
    path: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    shard: str | None = None,
) -> ServerConfig:
    """Load the server configuration.

    ``path`` None → the file named by ``$CRONOQ_CONFIG`` (when set and non-empty), else the
    defaults. ``insecure_no_auth`` is the ``--insecure-no-auth`` flag (or-ed with the file's).
    Raises :class:`ConfigError` naming the file and every invalid key.
    """
    if path is None:
        path = env.get(CONFIG_ENV) or None
    if path is None:
        return parse_config({}, env=env, insecure_no_auth=insecure_no_auth, shard=shard)
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError("config file not found", source) from None
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror or e}", source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("config file is not valid UTF-8", source) from None
    return loads_config(text, env=env, insecure_no_auth=insecure_no_auth, source=source, shard=shard)
