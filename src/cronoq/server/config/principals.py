"""The tables of ``[auth]``: bearer tokens and certificate principals.

A file's ``[[auth.tokens]]`` entry is a :class:`TokenEntry` (``token`` or ``token_env``; the
token from the environment is read and checked while the file validates); the server keeps a
:class:`TokenConfig`, which holds only the token's SHA-256 digest. ``[[auth.certs]]`` entries
are :class:`CertConfig` as given (``name`` is derived: where the entry came from). Rules over
all entries (no two tokens alike, pools that exist, certificates need mutual TLS) are
:mod:`.checks`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, PlainValidator, SecretStr

from .base import Section
from .errors import Bad, bad
from .translate import Problem
from .values import (
    ROLES,
    DnsName,
    EnvName,
    FrozenMap,
    Labels,
    Name,
    Role,
    StrList,
    TypeName,
    check_token,
    is_env_name,
    show,
)

__all__ = ["AuthSection", "CertConfig", "TokenConfig", "TokenEntry", "tables", "token_digest"]

_ROLE_NOTE = f"(one of {', '.join(ROLES)})"


def token_digest(token: str) -> bytes:
    """SHA-256 of a token (UTF-8), the only form in which tokens are kept."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def _token(v: Any) -> SecretStr:
    try:
        return SecretStr(check_token(v.get_secret_value() if isinstance(v, SecretStr) else v))
    except Bad as e:
        raise bad(str(e)) from None


def tables(header: str, empty: str | None = None) -> BeforeValidator:
    """An array of tables (``[[pools]]``); ``empty``: the message when it has no entry."""

    def check(v: Any) -> Any:
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, (dict, Section)) for x in v):
            raise bad(f"must be an array of tables ({header}) (got {show(v)})")
        if empty is not None and not v:
            raise bad(empty)
        return v

    return BeforeValidator(check)


Token = Annotated[SecretStr, PlainValidator(_token, json_schema_input_type=str), TypeName("string")]


class TokenEntry(Section):
    """One ``[[auth.tokens]]`` entry as the file gives it (→ :class:`TokenConfig`)."""

    required_notes: ClassVar[Mapping[str, str]] = {"role": _ROLE_NOTE}
    report_order: ClassVar[tuple[str, ...]] = ("role", "pools", "labels", "tenant", "token", "token_env", "")

    token: Token | None = Field(
        None, repr=False, description="the token itself (kept only as its SHA-256 digest)"
    )
    token_env: EnvName | None = Field(None, description="the environment variable holding the token")
    role: Role = Field(
        description="`client` (Tasks), `worker` (Workers.Work), `metrics` (read-only), `admin` (all)"
    )
    pools: StrList | None = Field(None, description="restrict the token to these pools (default: every pool)")
    labels: Labels = Field(
        default_factory=FrozenMap,
        description="worker labels the token's workers register with: a table or a list "
        '`["zone=z1", "gpu=a100"]`',
    )
    tenant: Name | None = Field(None, description="stamp and enforce this tenant on the token's submissions")

    @classmethod
    def prepare(cls, raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        """Exactly one of ``token`` and ``token_env``; the token of ``$token_env``."""
        if "token" in raw and "token_env" in raw:
            return raw, [((), "give token or token_env, not both")]
        if "token" in raw:
            return raw, []
        if "token_env" not in raw:
            return raw, [((), "token or token_env is required")]
        name = raw["token_env"]
        if not is_env_name(name):
            return raw, []  # (the key's own problem)
        value = env.get(name)
        if not value:
            return raw, [(("token_env",), f"environment variable {name!r} is not set")]
        try:
            raw["token"] = check_token(value)
        except Bad as e:
            return raw, [(("token_env",), f"the token in ${name} {e}")]
        return raw, []


class TokenConfig(Section):
    """One ``[[auth.tokens]]`` entry. The token itself is kept only as its SHA-256 digest."""

    digest: bytes = Field(repr=False)
    role: Role
    #: None = every pool; else the only pools this token may touch.
    pools: StrList | None = None
    labels: Labels = Field(default_factory=FrozenMap)
    tenant: Name | None = None
    #: where the token came from, for messages and logs: ``"auth.tokens[0]"``.
    name: str = ""
    #: the environment variable it was read from, if any.
    token_env: str | None = None


class CertConfig(Section):
    """One ``[[auth.certs]]`` entry: a client certificate (mutual TLS) whose DNS subject
    alternative name equals ``dns`` gets ``role`` with the restrictions of a token."""

    required_notes: ClassVar[Mapping[str, str]] = {
        "role": _ROLE_NOTE,
        "dns": "(a client certificate's DNS subjectAltName)",
    }
    file_keys: ClassVar[tuple[str, ...] | None] = ("dns", "role", "pools", "labels", "tenant")
    report_order: ClassVar[tuple[str, ...]] = ("role", "dns", "pools", "labels", "tenant")

    dns: DnsName = Field(
        description="the DNS subjectAltName a client certificate must carry (case-insensitive)"
    )
    role: Role = Field(description="`client`, `worker`, `metrics` or `admin`, as for a token")
    pools: StrList | None = Field(
        None, description="restrict the certificate to these pools (default: every pool)"
    )
    labels: Labels = Field(
        default_factory=FrozenMap,
        description="worker labels the certificate's workers register with (table or list)",
    )
    tenant: Name | None = Field(
        None, description="stamp and enforce this tenant on the certificate's submissions"
    )
    #: ``"auth.certs[0]"``, for messages and logs
    name: str = ""


class AuthSection(Section):
    """``[auth]``."""

    tokens: Annotated[tuple[TokenEntry, ...], tables("[[auth.tokens]]")] = Field(
        (), description="the `[[auth.tokens]]` entries"
    )
    certs: Annotated[tuple[CertConfig, ...], tables("[[auth.certs]]")] = Field(
        (), description="the `[[auth.certs]]` entries (certificate principals, mutual TLS)"
    )
