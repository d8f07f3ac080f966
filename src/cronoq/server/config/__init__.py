"""Server configuration (docs/reference/behaviour.md#server-start-up,
docs/reference/config.md): TOML → validated, frozen pydantic models.

``load_config(path)`` reads a TOML file; without a path it uses the file named by
``$CRONOQ_CONFIG`` or, failing that, the defaults (one pool ``default``, gRPC on
127.0.0.1:7070, HTTP on 127.0.0.1:7071, SQLite store ``./cronoq.db``, no auth on loopback).

Theory of operation. Every table of the file is one pydantic model (``extra="forbid"``,
frozen), declared once: its fields are the keys, their types the rules (:mod:`.values`), their
``description`` the reference page (docs/hooks/ref_config.py renders it from the models). All
tables validate through one wrap validator (:mod:`.base`) that reports every problem of the
table, in our words, and keeps going; the rules between tables run afterwards on the keys that
were right (:mod:`.checks`); :mod:`.translate` renders pydantic's locations as key paths.
Every problem is reported at once as ``<key path>: <message>``, e.g.
``pools[0].max: must be an integer >= 1 (got 0)``, with did-you-mean for unknown keys.

Durations are integers or floats of seconds, finite, >= 0 and <= 365 days. Listening on
``grpc_addr`` / ``http_addr`` beyond loopback needs ``[[auth.tokens]]`` or ``[[auth.certs]]``
(or ``server.insecure_no_auth`` / ``--insecure-no-auth``); ``metrics_addr`` serves only the
unauthenticated /metrics, /healthz and /readyz. Certificate principals need mutual TLS
(``server.tls.client_ca``).

Secrets are not kept in clear: tokens are stored as SHA-256 digests (``TokenConfig.digest``);
the store URL is excluded from ``repr`` and the webhook token is a ``SecretStr``.

The modules: :mod:`.errors` (``ConfigError``), :mod:`.addresses`, :mod:`.values` (key types),
:mod:`.translate`, :mod:`.base` (the table model), :mod:`.sections`, :mod:`.pools`,
:mod:`.principals` (the tables), :mod:`.document` (the file, the result), :mod:`.checks`,
:mod:`.load` (the entry points) and :mod:`.engine` (engine objects: :func:`pool_config`,
:func:`resource_configs`).

Pydantic is imported here only: ``import cronoq`` never loads this package.
"""

from __future__ import annotations

from .addresses import is_loopback, split_host_port
from .checks import SHARD_ENV
from .document import DEFAULT_POOL, ConfigFile, ServerConfig
from .engine import autoscale_config, pool_config, resource_configs
from .errors import ConfigError
from .load import CONFIG_ENV, load_config, loads_config, parse_config
from .pools import PoolSpec, ResourceSpec, RetryTable, ScalerConfig, ShardSpec
from .principals import AuthSection, CertConfig, TokenConfig, TokenEntry, token_digest
from .sections import (
    GrpcWebConfig,
    LimitsConfig,
    OutputsConfig,
    PeerTlsConfig,
    ServerSection,
    StoreConfig,
    TlsConfig,
)
from .values import MAX_DURATION_S, MIN_TOKEN_LEN, FrozenMap

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_POOL",
    "FrozenMap",
    "MAX_DURATION_S",
    "MIN_TOKEN_LEN",
    "AuthSection",
    "CertConfig",
    "ConfigError",
    "ConfigFile",
    "GrpcWebConfig",
    "OutputsConfig",
    "LimitsConfig",
    "PoolSpec",
    "ResourceSpec",
    "RetryTable",
    "ScalerConfig",
    "ServerConfig",
    "ServerSection",
    "SHARD_ENV",
    "PeerTlsConfig",
    "ShardSpec",
    "StoreConfig",
    "TlsConfig",
    "TokenConfig",
    "TokenEntry",
    "autoscale_config",
    "is_loopback",
    "load_config",
    "loads_config",
    "parse_config",
    "pool_config",
    "resource_configs",
    "split_host_port",
    "token_digest",
]
