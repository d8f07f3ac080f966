"""The rules between tables, run after the tables validated, on the keys that are right.

The tables' own rules are in their models (:mod:`.base`); what needs several tables is here:
unique pool and resource names, the pools a token, certificate or shard names, unique tokens
and certificate principals, certificates need mutual TLS, the sharding rules (every pool in one
shard, ``server.shard`` names a shard, resources name their shard, ``{shard}`` placeholders,
no endpoint reaches two shards or points back at this server), authentication beyond loopback,
distinct listeners.

They read the file's data through a :class:`View`, which answers a key's value only when the
key is present and validated without a problem (else its default, as the rest of the file is
still checked): every problem of the file is reported at once, the rules' included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .addresses import is_loopback, listen_addr, split_host_port
from .errors import Bad
from .pools import DEFAULT_POOL, PoolSpec, ResourceSpec, ShardSpec
from .principals import CertConfig, TokenEntry, token_digest
from .sections import ServerSection, StoreConfig
from .translate import Loc, Problem, close_hint
from .values import SCHEMA_RE, SHARD_PLACEHOLDER, check_token, dns_name

__all__ = ["SHARD_ENV", "Outcome", "View", "check", "merge"]

#: (docs/how-to/shards.md) names the server's own shard when neither --shard nor server.shard does
SHARD_ENV: Final = "CRONOQ_SHARD"


class View:
    """The file's data, seen through the problems found so far."""

    def __init__(self, data: Mapping[str, Any], problems: Sequence[Problem]) -> None:
        self.data = data
        self.wrong = [loc for loc, _ in problems]

    def _raw(self, loc: Loc) -> tuple[bool, Any]:
        v: Any = self.data
        for i, part in enumerate(loc):
            if isinstance(part, int):
                if not isinstance(v, list) or part >= len(v):
                    return False, None
            elif not isinstance(v, dict) or part not in v:
                return False, None
            v = v[part]
            if i < len(loc) - 1 and not isinstance(v, dict) and loc[: i + 1] in self.wrong:
                return False, None  # a wrong array or value above
        return True, v

    def ok(self, *loc: str | int) -> bool:
        """Present and without a problem at or below it."""
        present, _ = self._raw(loc)
        return present and not any(w[: len(loc)] == loc for w in self.wrong)

    def get(self, *loc: str | int, default: Any = None) -> Any:
        return self._raw(loc)[1] if self.ok(*loc) else default

    def entries(self, *loc: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The tables of an array of tables (none when it is not one)."""
        present, v = self._raw(loc)
        if not present or loc in self.wrong or not isinstance(v, list):
            return
        for i, t in enumerate(v):
            if isinstance(t, dict):
                yield i, t

    def clean(self, *loc: str | int) -> bool:
        """Present and no problem at, below or in the table around it."""
        return self.ok(*loc) and not any(loc[: len(w)] == w for w in self.wrong)


@dataclass
class Outcome:
    """The problems of the cross-table rules and the server's own shard.

    ``entries``: the problems of one entry of an array of tables (a duplicate name, an unknown
    pool), reported among that entry's own problems (:func:`merge`); ``problems``: the rest,
    reported after all the tables'.
    """

    problems: list[Problem] = field(default_factory=list)
    entries: list[Problem] = field(default_factory=list)
    #: index in ``entries`` → the key it is placed after, when not its own
    placed: dict[int, str] = field(default_factory=dict)
    own_shard: str | None = None

    def add(self, loc: Loc, msg: str) -> None:
        self.problems.append((loc, msg))

    def inline(self, loc: Loc, msg: str, *, after: str | None = None) -> None:
        """An entry's problem, placed after the entry's problems up to its key (or ``after``)."""
        self.entries.append((loc, msg))
        if after is not None:
            self.placed[len(self.entries) - 1] = after


#: the key order of the entries of each array of tables ("": the entry itself)
_ENTRY_ORDER: Final[Mapping[Loc, tuple[str, ...]]] = {
    ("pools",): PoolSpec.table_keys(),
    ("resources",): ResourceSpec.table_keys(),
    ("shards",): ShardSpec.table_keys(),
    ("auth", "tokens"): TokenEntry.report_order,
    ("auth", "certs"): (*CertConfig.report_order, ""),
}


def _split(loc: Loc) -> tuple[Loc, int, str] | None:
    """``("pools", 0, "name")`` → ``(("pools",), 0, "name")``; None outside an entry."""
    for k, part in enumerate(loc):
        if isinstance(part, int):
            rest = loc[k + 1 : k + 2]
            return loc[:k], part, str(rest[0]) if rest else ""
    return None


def _slot(out: Sequence[Problem], problem: Problem, sections: Sequence[str], after: str | None) -> int:
    where = _split(problem[0])
    assert where is not None
    arr, i, key = where
    key = key if after is None else after
    order = _ENTRY_ORDER.get(arr, ())
    pos = order.index(key) if key in order else len(order)
    last: int | None = None  # the last problem that goes before it
    for j, (loc, msg) in enumerate(out):
        other = _split(loc)
        if other is None or other[0] != arr:
            continue
        k = other[2]
        rank = order.index(k) if k in order else len(order)
        # missing and unknown keys of the entry itself come first in an entry
        direct = len(loc) == len(arr) + 2
        first = direct and (msg == "required" or msg.startswith(("required (", "unknown key")))
        if other[1] < i or (other[1] == i and (first or rank <= pos)):
            last = j
        else:  # a later entry's, or a later key's of the same entry
            return j if last is None else last + 1
    if last is not None:
        return last + 1
    at = sections.index(str(arr[0])) if arr[0] in sections else len(sections)
    before = [j for j, (loc, _) in enumerate(out) if loc and loc[0] in sections[: at + 1]]
    return before[-1] + 1 if before else 0


def merge(problems: Sequence[Problem], outcome: Outcome, sections: Sequence[str]) -> list[Problem]:
    """The tables' problems with the entries' cross-table problems among them, then the rest."""
    out = list(problems)
    for n, p in enumerate(outcome.entries):
        out.insert(_slot(out, p, sections, outcome.placed.get(n)), p)
    return out + outcome.problems


def _names(v: View, section: str, what: str, out: Outcome) -> list[str]:
    """The valid names of an array of tables (duplicates reported)."""
    names: list[str] = []
    seen: dict[str, str] = {}
    for i, _ in v.entries(section):
        name = v.get(section, i, "name")
        if name is None:
            continue
        if name in seen:
            out.inline((section, i, "name"), f"duplicate {what} name {name!r} (also {seen[name]})")
        else:
            seen[name] = f"{section}[{i}]"
        names.append(name)
    return names


def _pools_known(v: View, loc: Loc, pool_names: Sequence[str], out: Outcome) -> None:
    pools = v.get(*loc)
    for p in pools or ():
        if p not in pool_names:
            out.inline(loc, f"unknown pool {p!r} (pools: {', '.join(pool_names)})")


def _token_of(v: View, i: int, t: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    if "token" in t and "token_env" in t:
        return None
    if "token" in t:
        return v.get("auth", "tokens", i, "token")
    name = v.get("auth", "tokens", i, "token_env")
    try:
        return check_token(env.get(name)) if name else None
    except Bad:
        return None


def _auth(v: View, env: Mapping[str, str], pool_names: Sequence[str], out: Outcome) -> bool:
    """Tokens and certificates; True when authentication is configured (or meant to be)."""
    configured = any(loc[:1] == ("auth",) for loc in v.wrong)
    digests: dict[bytes, str] = {}
    for i, t in v.entries("auth", "tokens"):
        _pools_known(v, ("auth", "tokens", i, "pools"), pool_names, out)
        token = _token_of(v, i, t, env)
        if token is None or v.get("auth", "tokens", i, "role") is None:
            continue
        configured = True
        digest = token_digest(token)
        if digest in digests:
            out.inline(("auth", "tokens", i), f"duplicate token (same as {digests[digest]})")
        else:
            digests[digest] = f"auth.tokens[{i}]"
    principals: dict[str, str] = {}
    for i, _ in v.entries("auth", "certs"):
        _pools_known(v, ("auth", "certs", i, "pools"), pool_names, out)
        raw = v.get("auth", "certs", i, "dns")
        if raw is None or v.get("auth", "certs", i, "role") is None:
            continue
        configured = True
        dns = dns_name(raw)
        if dns in principals:
            msg = f"duplicate certificate principal {dns!r} (same as {principals[dns]})"
            out.inline(("auth", "certs", i, "dns"), msg, after="")  # (checked last)
        else:
            principals[dns] = f"auth.certs[{i}]"
    tls_ok = v.ok("server", "tls", "cert") and v.ok("server", "tls", "key")
    if principals and not (tls_ok and v.ok("server", "tls", "client_ca")):
        out.add(("auth", "certs"), "certificate principals need mutual TLS: set server.tls.client_ca")
    return configured


def _shards(v: View, pool_names: Sequence[str], out: Outcome) -> list[str]:
    """``[[shards]]``: unique names and numbers, every pool in exactly one shard."""
    names: dict[str, str] = {}
    numbers: dict[int, str] = {}
    owner: dict[str, str] = {}
    entries = list(v.entries("shards"))
    for i, _ in entries:
        path = f"shards[{i}]"
        name = v.get("shards", i, "name")
        if name in names:
            out.inline(("shards", i, "name"), f"duplicate shard name {name!r} (also {names[name]})")
        elif name:
            names[name] = path
        number = v.get("shards", i, "number")
        if number in numbers:
            out.inline(("shards", i, "number"), f"duplicate shard number {number} (also {numbers[number]})")
        elif number:
            numbers[number] = path
        for pool in v.get("shards", i, "pools") or ():
            if pool not in pool_names:
                hint = close_hint(pool, pool_names, label="pools")
                out.inline(("shards", i, "pools"), f"unknown pool {pool!r}{hint}")
            elif pool in owner:
                out.inline(("shards", i, "pools"), f"pool {pool!r} is already in shard {owner[pool]!r}")
            else:
                owner[pool] = name or path
    if entries:
        for pool in pool_names:
            if pool not in owner:
                out.add(("shards",), f"pool {pool!r} is in no shard (every pool must be in exactly one)")
    return list(names)


def _sharding(v: View, env: Mapping[str, str], flag: str | None, names: Sequence[str], out: Outcome) -> None:
    """The rules between [[shards]] and the rest; the server's own shard (flag, file, env)."""
    file_shard = v.get("server", "shard")
    own = flag or file_shard or env.get(SHARD_ENV) or None
    where = "--shard" if flag else "server.shard" if file_shard else f"${SHARD_ENV}"
    resources = [i for i, _ in v.entries("resources") if v.clean("resources", i)]
    store = StoreConfig()
    if "shards" not in v.data:
        if flag or file_shard:  # (a deployment-wide $CRONOQ_SHARD is ignored)
            out.add(("server", "shard"), f"{where} = {own!r} needs [[shards]] (there are none)")
        for i in resources:
            if v.get("resources", i, "shard") is not None:
                out.add(("resources", i, "shard"), "only used with [[shards]]")
        for key in ("schema", "path"):
            if SHARD_PLACEHOLDER in v.get("store", key, default=getattr(store, key)):
                out.add(("store", key), f"{SHARD_PLACEHOLDER} needs [[shards]] (there are none)")
        return
    if own is None:
        out.add(
            ("server", "shard"),
            f"required with [[shards]]: name this server's shard (server.shard, --shard or "
            f"${SHARD_ENV}; shards: {', '.join(names)})",
        )
    elif own not in names and names:
        hint = close_hint(own, names, label="shards").strip()[1:-1]
        out.add(("server", "shard"), f"{where} names no shard: {own!r} ({hint})")
    for i in resources:
        shard = v.get("resources", i, "shard")
        if shard is None:
            out.add(("resources", i, "shard"), "required with [[shards]] (the shard that owns the resource)")
        elif shard not in names and names:
            hint = close_hint(shard, names, label="shards").strip()[1:-1]
            out.add(("resources", i, "shard"), f"unknown shard {shard!r} ({hint})")
    if own is not None:
        schema = v.get("store", "schema", default=store.schema).replace(SHARD_PLACEHOLDER, own)
        if v.get("store", "kind", default=store.kind) == "postgres" and not SCHEMA_RE.match(schema):
            out.add(
                ("store", "schema"), f"with the shard name {own!r} it is not an SQL identifier ({schema!r})"
            )
    out.own_shard = own


_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})


def _authority(endpoint: str) -> tuple[str, int] | None:
    """``(host, port)`` of an ``http(s)://host:port`` endpoint, loopback names as one."""
    try:
        host, port = split_host_port(endpoint.partition("://")[2].rstrip("/"))
    except ValueError:
        return None
    if port is None or not port.isdigit():
        return None
    host = host.lower().rstrip(".")
    return ("loopback" if is_loopback(host) else host), int(port)


def _endpoints(v: View, i: int) -> list[str]:
    eps = v.get("shards", i, "endpoint")
    return [eps] if isinstance(eps, str) else [e for e in eps or () if isinstance(e, str)]


def _shard_endpoints(v: View, own: str | None, out: Outcome) -> None:
    """A call to a shard must reach that shard: no endpoint listed by two shards, and no other
    shard's endpoint is this server's own gRPC listener (a loop: the call comes back here)."""
    grpc_addr = v.get("server", "grpc_addr", default=ServerSection().grpc_addr)
    try:
        host, port = listen_addr(grpc_addr)
    except (Bad, ValueError):
        host, port = "", 0
    own_auth = ("loopback" if is_loopback(host) else host.lower(), port)
    seen: dict[tuple[str, int], str] = {}
    for i, _ in v.entries("shards"):
        name = v.get("shards", i, "name")
        for ep in _endpoints(v, i):
            auth = _authority(ep)
            if auth is None:
                continue
            other = seen.get(auth)
            if other is not None and other != name:
                out.inline(
                    ("shards", i, "endpoint"),
                    f"endpoint {ep!r} is also shard {other!r}'s: each endpoint must reach one shard",
                )
            seen.setdefault(auth, name)
            # (a wildcard listener is reached through loopback here; other hosts are other machines)
            same_host = auth[0] == "loopback" if host in _WILDCARDS else auth[0] == own_auth[0]
            here = port != 0 and auth[1] == port and same_host
            if own is not None and name != own and here:
                out.inline(
                    ("shards", i, "endpoint"),
                    f"endpoint {ep!r} of shard {name!r} is this server's own server.grpc_addr "
                    f"({grpc_addr!r}, shard {own!r}): calls to {name!r} would come back here",
                )


def _listeners(v: View, auth: bool, insecure: bool, out: Outcome) -> None:
    """Beyond loopback needs auth (metrics_addr is unauthenticated by design); distinct ports."""
    d = ServerSection()
    addrs = {k: v.get("server", k, default=getattr(d, k)) for k in ("grpc_addr", "http_addr", "metrics_addr")}
    if not auth and not (insecure or v.get("server", "insecure_no_auth", default=False)):
        for key in ("grpc_addr", "http_addr"):
            if not is_loopback(addrs[key]):
                out.add(
                    ("server", key),
                    f"listening on {addrs[key]!r} (beyond loopback) requires [[auth.tokens]] "
                    "(or server.insecure_no_auth = true / --insecure-no-auth)",
                )
    seen: dict[tuple[str, int], str] = {}
    for key, addr in addrs.items():
        if addr is None:
            continue
        hp = listen_addr(addr)
        if hp[1] != 0 and hp in seen:
            out.add(("server", key), f"must differ from server.{seen[hp]} (both {addr!r})")
        seen.setdefault(hp, key)


def check(
    data: Mapping[str, Any],
    problems: Sequence[Problem],
    *,
    env: Mapping[str, str],
    insecure_no_auth: bool,
    shard: str | None,
) -> Outcome:
    """Every rule between tables, given the tables' own ``problems``."""
    v = View(data, problems)
    out = Outcome()
    pool_names = _names(v, "pools", "pool", out)
    if not any(True for _ in v.entries("pools")):
        pool_names = [DEFAULT_POOL]  # (no [[pools]], or none valid: the default pool)
    _names(v, "resources", "resource", out)
    auth = _auth(v, env, pool_names, out)
    names = _shards(v, pool_names, out)
    _sharding(v, env, shard, names, out)
    _shard_endpoints(v, out.own_shard, out)
    _listeners(v, auth, insecure_no_auth, out)
    return out
