"""The configuration as pydantic models (cronoq.server.config): what the models promise beyond
the messages (tests/server/test_config*.py hold those): secrets out of repr, pickling and
hashing, construction from code, derived keys not settable from a file, the reference page
covering every key, and ``import cronoq`` staying free of pydantic."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from cronoq.server.config import (
    ConfigFile,
    PoolSpec,
    ScalerConfig,
    ServerConfig,
    ShardSpec,
    TlsConfig,
    TokenConfig,
    loads_config,
)
from cronoq.server.config.base import Section

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "hooks"))

import ref_config  # noqa: E402  (docs/hooks)

PG_URL = "postgresql://cronoq:pg-secret-pw@db/cronoq"
HOOK = "hook-secret-value-123"
TOKEN = "s3cret-token-0123456789"
TEXT = f"""
[[auth.tokens]]
token = "{TOKEN}"
role = "admin"
[store]
kind = "postgres"
[[pools]]
name = "a"
scaler = {{ url = "https://scaler.example/hook", token_env = "HOOK" }}
"""


def full() -> ServerConfig:
    return loads_config(TEXT, env={"DATABASE_URL": PG_URL, "HOOK": HOOK})


def test_secrets_never_in_repr_or_str() -> None:
    c = full()
    assert c.store.url == PG_URL
    scaler = c.pools[0].scaler
    assert isinstance(scaler.token, SecretStr) and scaler.token.get_secret_value() == HOOK
    for text in (repr(c), str(c), repr(c.store), str(c.pools[0]), repr(c.tokens)):
        assert "pg-secret-pw" not in text and HOOK not in text and TOKEN not in text
    assert TOKEN.encode() not in pickle.dumps(c)


def test_pickle_round_trip_equality_and_hash() -> None:
    c = full()
    c2 = pickle.loads(pickle.dumps(c))
    assert c2 == c and hash(c2) == hash(c)
    assert c2.pools[0].scaler.token == c.pools[0].scaler.token


def test_models_are_frozen_and_copied_with_updates() -> None:
    c = full()
    with pytest.raises(ValidationError, match="frozen"):
        c.store.kind = "memory"  # type: ignore[misc]
    moved = c.model_copy(update={"source": "x.toml"})
    assert moved.source == "x.toml" and c.source is None and moved.store is c.store


def test_construction_from_code() -> None:
    assert PoolSpec("a", 0, 5) == PoolSpec(name="a", min=0, max=5)
    assert ShardSpec("s", 1, ("a",), ("http://h:1",)).endpoint == "http://h:1"
    assert TlsConfig("/nonexistent/c.pem", "/nonexistent/k.pem").client_ca is None  # no file check
    assert ScalerConfig("webhook", "http://h", "E", "t").token == SecretStr("t")
    with pytest.raises(TypeError):
        TlsConfig("a", "b", "c", "d")
    with pytest.raises(ValidationError):
        PoolSpec("a", 5, 1)  # min <= max holds for models built in code too


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            '[[pools]]\nname = "a"\nscaler = {url = "http://h", token = "t"}\n',
            "pools[0].scaler.token: unknown key (did you mean 'token_env'?)",
        ),
        (
            '[[auth.certs]]\ndns = "a.b"\nrole = "client"\nname = "x"\n',
            "auth.certs[0].name: unknown key (known: dns, role, pools, labels, tenant)",
        ),
    ],
)
def test_derived_keys_are_not_file_keys(text: str, error: str) -> None:
    with pytest.raises(Exception) as ei:
        loads_config(text, env={})
    assert error in ei.value.errors  # type: ignore[attr-defined]


def _subclasses(cls: type[Section]) -> set[type[Section]]:
    out = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out


def test_reference_page_covers_every_key_of_every_table() -> None:
    page = ref_config.render()
    tables = ref_config.tables()
    names = {t.name for t in tables}
    assert {"[server.tls]", "[[auth.tokens]]", "[pools.retry]", "[pools.scaler]", "[[shards]]"} <= names
    for t in tables:
        assert f"### `{t.name}`" in page or t.name == "top level"
        for key in t.model.table_keys():
            field = t.field(key)
            assert field.description, f"{t.name} {key}"
            assert f"| `{key}` | {ref_config.type_name(t, key)} |" in page
    # every table model is on the page (only the results, ServerConfig and TokenConfig, are not)
    assert {t.model for t in tables} == _subclasses(Section) - {ServerConfig, TokenConfig}
    assert tables[0].model is ConfigFile
    assert ref_config.problems() == []


def test_a_key_without_description_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    field = PoolSpec.model_fields["max"]
    monkeypatch.setattr(field, "description", None)
    assert ref_config.problems() == [
        "config key [[pools]] max has no Field(description=...) in cronoq.server.config"
    ]


def test_import_cronoq_does_not_import_pydantic() -> None:
    code = "import sys, cronoq; assert 'pydantic' not in sys.modules, 'pydantic imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
