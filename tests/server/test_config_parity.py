"""docs/reference/config.md#auth-tokens, docs/reference/config.md#outputs,
docs/reference/config.md#server-grpc-web: the server-parity sections of the configuration (token labels
in list form, ``[outputs]``, ``[[auth.certs]]``, ``[server.grpc_web]``)."""

from __future__ import annotations

from typing import Any

import pytest

from cronoq.server.config import ConfigError, ServerConfig, loads_config

TOKEN = "s3cret-token-0123456789"
BASE = f'[[pools]]\nname = "a"\n[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "worker"\n'


def cfg(text: str, env: dict[str, str] | None = None, **kw: Any) -> ServerConfig:
    return loads_config(text, env=env or {}, **kw)


def one_error(text: str) -> str:
    with pytest.raises(ConfigError) as ei:
        cfg(text)
    errs = ei.value.errors
    assert len(errs) == 1, errs
    return errs[0]


# ---------------------------------------------------------------------------------------------
# token labels


def test_token_labels_list_form_equals_table_form() -> None:
    listed = cfg(BASE + 'labels = ["zone=z1", "gpu=a100"]\n').tokens[0].labels
    table = cfg(BASE + 'labels = {zone = "z1", gpu = "a100"}\n').tokens[0].labels
    assert dict(listed) == dict(table) == {"zone": "z1", "gpu": "a100"}
    # a value may contain "=" (only the first one splits) and be empty
    assert dict(cfg(BASE + 'labels = ["expr=a=b", "empty="]\n').tokens[0].labels) == {
        "expr": "a=b",
        "empty": "",
    }
    assert dict(cfg(BASE + "labels = []\n").tokens[0].labels) == {}


def test_token_labels_list_form_errors() -> None:
    assert one_error(BASE + 'labels = ["zone"]\n') == (
        'auth.tokens[0].labels: item 0 must be "key=value" (got \'zone\': no "=")'
    )
    assert one_error(BASE + 'labels = ["=z1"]\n') == (
        "auth.tokens[0].labels: item 0 must be \"key=value\" with a non-empty key (got '=z1')"
    )
    assert one_error(BASE + 'labels = ["zone=z1", "gpu=a", "zone=z2"]\n') == (
        "auth.tokens[0].labels: item 2: duplicate label 'zone'"
    )
    assert one_error(BASE + "labels = [1]\n") == (
        'auth.tokens[0].labels: item 0 must be a "key=value" string (got 1)'
    )
    assert one_error(BASE + 'labels = "zone=z1"\n').startswith(
        'auth.tokens[0].labels: must be a table of strings or an array of "key=value" strings'
    )


# ---------------------------------------------------------------------------------------------
# [outputs]


def test_outputs_defaults_and_values() -> None:
    d = cfg("").outputs
    assert (d.cache_entries, d.cache_bytes, d.info_entries) == (100_000, 256 * 1024 * 1024, 1_000_000)
    o = cfg("[outputs]\ncache_entries = 5\ncache_bytes = 4096\ninfo_entries = 10\n").outputs
    assert (o.cache_entries, o.cache_bytes, o.info_entries) == (5, 4096, 10)


def test_outputs_validated() -> None:
    with pytest.raises(ConfigError) as ei:
        cfg('[outputs]\ncache_entries = 0\ncache_bytes = "1M"\ninfo_entries = -1\ncache = 1\n')
    assert ei.value.errors == (
        "outputs.cache: unknown key (did you mean 'cache_bytes'?)",
        "outputs.cache_entries: must be an integer >= 1 (got 0)",
        "outputs.cache_bytes: must be an integer >= 1 (got '1M')",
        "outputs.info_entries: must be an integer >= 1 (got -1)",
    )
    assert one_error("outputs = 3\n") == "outputs: must be a table (got 3)"
