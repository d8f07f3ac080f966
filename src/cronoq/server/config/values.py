"""The value types of the configuration: pydantic types that say what is wrong our way.

Each type is an ``Annotated`` pydantic type. Where pydantic can state the rule, the rule is a
``Field`` constraint (``strict=True, ge=1``: also what the JSON schema and the reference page
show) and a ``WrapValidator`` (:func:`_says`) replaces pydantic's wording with ours plus
``(got <value>)``: ``must be an integer >= 1 (got 0)``. Rules pydantic has no words for
(addresses, DNS names, label lists, ...) are plain functions that raise :class:`~.errors.Bad`,
attached as ``AfterValidator`` / ``PlainValidator``. Strict mode throughout: TOML has real
types, so ``"3"``, ``true`` and ``2.0`` are not integers.

Values read from the file system (``ExistingFile``) are checked only while a file is validated
(a validation context is given), not when code builds a model.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, Literal, TypeGuard, TypeVar

from pydantic import (
    AfterValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from cronoq.engine.config import OVERFLOW_POLICIES
from cronoq.engine.keyed import POLICIES

from .addresses import listen_addr, split_host_port
from .errors import Bad, bad

__all__ = [
    "DAY",
    "MAX_DURATION_S",
    "MIN_TOKEN_LEN",
    "ROLES",
    "SHARD_PLACEHOLDER",
    "FrozenMap",
    "TypeName",
    "check_pg_url",
    "check_token",
    "dns_name",
    "is_env_name",
    "show",
]

DAY: Final = 86_400
MAX_DURATION_S: Final = 365 * DAY
MIN_TOKEN_LEN: Final = 16
#: the highest shard number (ids carry it in their top 8 bits)
MAX_SHARD_NUMBER: Final = 255
ROLES: Final = ("client", "worker", "metrics", "admin")
#: replaced by the server's shard name in ``store.schema`` / ``store.path`` (ours)
SHARD_PLACEHOLDER: Final = "{shard}"
SCHEMA_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_ENV_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOKEN_RE: Final = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces (header-safe)
_DNS_LABEL: Final = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_DNS_RE: Final = re.compile(rf"^(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*$")

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V], Generic[K, V]):
    """An immutable, hashable, picklable mapping (equal to a dict with the same items)."""

    __slots__ = ("_d",)

    def __init__(self, data: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._d: dict[K, V] = dict(data)

    def __getitem__(self, key: K) -> V:
        return self._d[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        return hash(frozenset(self._d.items()))

    def __repr__(self) -> str:
        return repr(self._d)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._d,))


@dataclass(frozen=True)
class TypeName:
    """The type of a key as the reference page names it (``Annotated`` metadata)."""

    name: str


def show(v: Any) -> str:
    """A value as the file spells it: ``'x'``, ``true``, ``3``."""
    return repr(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def _fmt(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else str(s)


def _says(msg: str) -> WrapValidator:
    """Pydantic's checks (the ``Field`` constraints before it), reported as ``msg (got v)``."""

    def wrap(v: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(v)
        except ValidationError:
            raise bad(f"{msg} (got {show(v)})") from None

    return WrapValidator(wrap)


def _checked(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def run(v: Any) -> Any:
        try:
            return fn(v)
        except Bad as e:
            raise bad(str(e)) from None

    return run


def _after(fn: Callable[[Any], Any]) -> AfterValidator:
    return AfterValidator(_checked(fn))


def _plain(fn: Callable[[Any], Any], input_type: Any) -> PlainValidator:
    return PlainValidator(_checked(fn), json_schema_input_type=input_type)


# ---- numbers ---------------------------------------------------------------------------------

_INT: Final = TypeName("integer")
_SECONDS: Final = TypeName("seconds")
_NUMBER: Final = TypeName("number")

Int0 = Annotated[int, Field(strict=True, ge=0), _says("must be an integer >= 0"), _INT]
Int1 = Annotated[int, Field(strict=True, ge=1), _says("must be an integer >= 1"), _INT]
MessageBytes = Annotated[
    int, Field(strict=True, ge=1024, le=2**31 - 1), _says("must be an integer in 1024..2147483647"), _INT
]
ShardNumber = Annotated[
    int,
    Field(strict=True, ge=1, le=MAX_SHARD_NUMBER),
    _says(f"must be an integer in 1..{MAX_SHARD_NUMBER}"),
    _INT,
]
Duration = Annotated[
    float,
    Field(strict=True, ge=0, le=MAX_DURATION_S, allow_inf_nan=False),
    _says("must be a number of seconds >= 0 and <= 365 days"),
    _SECONDS,
]
PositiveDuration = Annotated[
    float,
    Field(strict=True, gt=0, le=MAX_DURATION_S, allow_inf_nan=False),
    _says("must be a number of seconds > 0 and <= 365 days"),
    _SECONDS,
]
Fraction = Annotated[
    float, Field(strict=True, ge=0, le=1, allow_inf_nan=False), _says("must be a number in [0, 1]"), _NUMBER
]
OpenFraction = Annotated[
    float, Field(strict=True, gt=0, le=1, allow_inf_nan=False), _says("must be a number in (0, 1]"), _NUMBER
]
NonNegative = Annotated[
    float, Field(strict=True, ge=0, allow_inf_nan=False), _says("must be a finite number >= 0"), _NUMBER
]
Positive = Annotated[
    float, Field(strict=True, gt=0, allow_inf_nan=False), _says("must be a finite number > 0"), _NUMBER
]
Bool = Annotated[bool, Field(strict=True), _says("must be true or false"), TypeName("boolean")]

# ---- choices ---------------------------------------------------------------------------------

_CHOICE: Final = TypeName("string")


def _one_of(options: Iterable[str]) -> WrapValidator:
    return _says(f"must be one of {', '.join(options)}")


Role = Annotated[Literal["client", "worker", "metrics", "admin"], _one_of(ROLES), _CHOICE]
StoreKind = Annotated[
    Literal["memory", "sqlite", "postgres"], _one_of(("memory", "sqlite", "postgres")), _CHOICE
]
SqliteSync = Annotated[Literal["full", "normal"], _one_of(("full", "normal")), _CHOICE]
ScalerKind = Annotated[Literal["external", "webhook"], _one_of(("external", "webhook")), _CHOICE]
ResourceKind = Annotated[
    Literal["semaphore", "token_bucket"], _one_of(("semaphore", "token_bucket")), _CHOICE
]
OnLimit = Annotated[
    Literal["queue", "cancel_newest", "cancel_oldest", "keep_latest"], _one_of(POLICIES), _CHOICE
]
Overflow = Annotated[
    Literal["wait", "reject", "shed_lowest", "shed_oldest"], _one_of(OVERFLOW_POLICIES), _CHOICE
]

# ---- strings ---------------------------------------------------------------------------------

_STR: Final = TypeName("string")
_NONEMPTY: Final = Field(strict=True, min_length=1)
_SAYS_NONEMPTY: Final = _says("must be a non-empty string")


def _name(s: str) -> str:
    if s != s.strip() or any(ord(c) < 32 or ord(c) == 127 for c in s):
        raise Bad(f"must not have surrounding spaces or control characters (got {s!r})")
    return s


def is_env_name(v: Any) -> TypeGuard[str]:
    """An environment variable name (``[A-Za-z_][A-Za-z0-9_]*``)."""
    return isinstance(v, str) and _ENV_NAME_RE.match(v) is not None


def _env_name(s: str) -> str:
    if not is_env_name(s):
        raise Bad(f"must be an environment variable name (got {s!r})")
    return s


def _addr(s: str) -> str:
    listen_addr(s)
    return s


def _existing_file(s: str, info: ValidationInfo) -> str:
    if info.context is not None and not os.path.isfile(s):
        raise bad(f"file not found: {s!r}")
    return s


def _http_url(s: str) -> str:
    if not re.match(r"^https?://[^/\s]+", s):
        raise Bad(f"must be an http:// or https:// URL (got {s!r})")
    return s


def check_pg_url(s: str) -> str:
    """A PostgreSQL URL (``store.url``, or the value of ``$url_env``)."""
    if not re.match(r"^postgres(ql)?://", s):
        raise Bad("must be a postgresql:// (or postgres://) URL")
    return s


def _schema(s: str) -> str:
    if not SCHEMA_RE.match(s.replace(SHARD_PLACEHOLDER, "s")):
        raise Bad(f"must be an SQL identifier (letters, digits, _; at most 63) (got {s!r})")
    return s


def check_token(v: Any) -> str:
    """A bearer token: a string of >= 16 printable ASCII characters without spaces."""
    if not isinstance(v, str):
        raise Bad(f"must be a string (got {show(v)})")
    if len(v) < MIN_TOKEN_LEN:
        raise Bad(f"must be at least {MIN_TOKEN_LEN} characters (got {len(v)})")
    if not _TOKEN_RE.match(v):
        raise Bad("must be printable ASCII without spaces")
    return v


def dns_name(v: Any) -> str:
    """A DNS name as it appears in a certificate's subjectAltName (compared case-insensitively)."""
    if not isinstance(v, str) or not v:
        raise Bad(f"must be a non-empty DNS name (got {show(v)})")
    name = v.lower().rstrip(".")
    if not _DNS_RE.match(name):
        raise Bad(f"must be a DNS name such as 'worker-1.example.com' (got {v!r})")
    return name


Str = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _STR]
Name = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _after(_name), _STR]
EnvName = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _after(_env_name), TypeName("environment variable")]
Addr = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _after(_addr), TypeName("host:port")]
ExistingFile = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, AfterValidator(_existing_file), TypeName("file")]
HttpUrl = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _after(_http_url), TypeName("URL")]
SqlSchema = Annotated[str, _NONEMPTY, _SAYS_NONEMPTY, _after(_schema), _STR]
DnsName = Annotated[str, _plain(dns_name, str), TypeName("DNS name")]

# ---- arrays and tables -------------------------------------------------------------------------


def _str_list(v: Any) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or not v:
        raise Bad(f"must be a non-empty array of strings (got {show(v)})")
    out: list[str] = []
    for i, x in enumerate(v):
        if not isinstance(x, str) or not x:
            raise Bad(f"item {i} must be a non-empty string (got {show(x)})")
        if x not in out:
            out.append(x)
    return tuple(out)


def _str_map(v: Any) -> FrozenMap[str, str]:
    if not isinstance(v, Mapping):
        raise Bad(f"must be a table of strings (got {show(v)})")
    for k, x in v.items():
        if not k:
            raise Bad("keys must be non-empty")
        if not isinstance(x, str):
            raise Bad(f"{k!r} must be a string (got {show(x)})")
    return FrozenMap(v)


def _labels(v: Any) -> FrozenMap[str, str]:
    """A token's ``labels``: a table of strings, or the list form ``["zone=z1", "gpu=a100"]``
    (docs/reference/config.md#auth)."""
    if isinstance(v, Mapping):
        return _str_map(v)
    if not isinstance(v, list):
        raise Bad(f'must be a table of strings or an array of "key=value" strings (got {show(v)})')
    out: dict[str, str] = {}
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise Bad(f'item {i} must be a "key=value" string (got {show(x)})')
        k, eq, val = x.partition("=")
        k = k.strip()
        if not eq:
            raise Bad(f'item {i} must be "key=value" (got {x!r}: no "=")')
        if not k:
            raise Bad(f'item {i} must be "key=value" with a non-empty key (got {x!r})')
        if k in out:
            raise Bad(f"item {i}: duplicate label {k!r}")
        out[k] = val.strip()
    return FrozenMap(out)


def _origins(v: Any) -> tuple[str, ...]:
    """``allowed_origins``: browser origins ``scheme://host[:port]`` (no path), as sent in ``Origin``."""
    if not isinstance(v, (list, tuple)):
        raise Bad(f'must be an array of origins such as "https://dash.example.com" (got {show(v)})')
    out: list[str] = []
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise Bad(f"item {i} must be a string (got {show(x)})")
        if x == "*":
            raise Bad(f"item {i}: '*' is not allowed; list each origin")
        m = re.match(r"^(https?)://([^/?#@\s]+)$", x.rstrip("/"))
        if not m:
            raise Bad(f"item {i} must be an origin 'http(s)://host[:port]' without a path (got {x!r})")
        scheme, host = m.group(1), m.group(2).lower()
        default_port = ":443" if scheme == "https" else ":80"
        if host.endswith(default_port):  # browsers leave the default port out of Origin
            host = host[: -len(default_port)]
        origin = f"{scheme}://{host}"
        if origin not in out:
            out.append(origin)
    return tuple(out)


def _weights(v: Any) -> FrozenMap[str, float]:
    if not isinstance(v, Mapping):
        raise Bad(f"must be a table of tenant = weight (got {show(v)})")
    out: dict[str, float] = {}
    for k, x in v.items():
        num = isinstance(x, (int, float)) and not isinstance(x, bool)
        if not (num and math.isfinite(x) and x > 0):
            raise Bad(f"tenant weights must be finite and > 0 (got {k} = {show(x)})")
        out[k] = float(x)
    return FrozenMap(out)


def _limits(v: Any) -> FrozenMap[str, int]:
    """A keyed resource's ``limits``: key = capacity, each an integer >= 1."""
    if not isinstance(v, Mapping):
        raise Bad(f"must be a table of key = capacity (got {show(v)})")
    for k, x in v.items():
        if not k:
            raise Bad("keys must be non-empty")
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise Bad(f"limits must be integers >= 1 (got {k} = {show(x)})")
    return FrozenMap(v)


def _endpoint(v: Any) -> str:
    """A shard endpoint: ``http(s)://host:port``, no userinfo, no path (a trailing ``/`` is
    dropped)."""
    if not isinstance(v, str) or not v:
        raise Bad(f"must be a non-empty string (got {show(v)})")
    m = re.match(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", v)
    if m is None or m["scheme"].lower() not in ("http", "https"):
        raise Bad(f"must be http://host:port or https://host:port (got {v!r})")
    rest = m["rest"]
    if "@" in rest:
        raise Bad(f"must not carry userinfo (user@ or user:password@) (got {v!r})")
    authority, _, path = rest.partition("/")
    if path or "?" in authority or "#" in authority:
        raise Bad(f"must not have a path, query or fragment: http(s)://host:port only (got {v!r})")
    try:
        host, port = split_host_port(authority)
    except ValueError as e:
        raise Bad(f"must be http(s)://host:port ({e}) (got {v!r})") from None
    if not host or port is None or not port.isdigit() or not (1 <= int(port) <= 65535):
        raise Bad(f"must be http(s)://host:port with a port 1..65535 (got {v!r})")
    return f"{m['scheme'].lower()}://{authority}"


def _endpoints(v: Any) -> tuple[str, ...]:
    """One endpoint, or a non-empty array of them (the addresses of the shard's servers)."""
    if isinstance(v, (list, tuple)):
        if not v:
            raise Bad("must be an endpoint or a non-empty array of endpoints (got [])")
        return tuple(_endpoint(x) for x in v)
    return (_endpoint(v),)


def _to_dict(m: Mapping[Any, Any]) -> dict[Any, Any]:
    return dict(m)


_MAP_OUT: Final = PlainSerializer(_to_dict)

StrList = Annotated[tuple[str, ...], _plain(_str_list, list[str]), TypeName("array of strings")]
Labels = Annotated[
    FrozenMap[str, str],
    _plain(_labels, dict[str, str] | list[str]),
    _MAP_OUT,
    TypeName('table or array of "key=value"'),
]
Origins = Annotated[tuple[str, ...], _plain(_origins, list[str]), TypeName("array of origins")]
Limits = Annotated[
    FrozenMap[str, int], _plain(_limits, dict[str, int]), _MAP_OUT, TypeName("table of integers")
]
Weights = Annotated[
    FrozenMap[str, float], _plain(_weights, dict[str, float]), _MAP_OUT, TypeName("table of numbers")
]
Endpoints = Annotated[
    tuple[str, ...], _plain(_endpoints, str | list[str]), TypeName("endpoint or array of endpoints")
]
