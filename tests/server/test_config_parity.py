"""docs/reference/config.md#auth, docs/reference/config.md#outputs,
docs/reference/config.md#grpc-web: the server-parity sections of the configuration (token labels
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
