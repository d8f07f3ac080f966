"""docs/reference/behaviour.md#auth, docs/reference/behaviour.md#server-details: bearer tokens (SHA-256
digests, constant-time compare), roles × actions, pool restriction, tenant stamping, and the loopback Host
check (DNS-rebinding protection)."""

from __future__ import annotations

import hashlib
import hmac
import pickle
from typing import Any

import pytest

from cronoq.errors import CronoqError
from cronoq.server import auth as auth_mod
from cronoq.server.auth import (
    GRPC_METHOD_ACTIONS,
    ROLE_ACTIONS,
    Action,
    Authenticator,
    PermissionDenied,
    Principal,
    Role,
    Unauthenticated,
    allows_pool,
    authorize,
    check_pool,
    check_tenant,
    host_is_loopback,
    parse_bearer,
    restrict_pools,
    stamp_labels,
    stamp_tenant,
)
from cronoq.server.config import ServerConfig, loads_config

CLIENT = "client-token-0123456789"
WORKER = "worker-token-0123456789"
METRICS = "metrics-token-012345678"
ADMIN = "admin-token-01234567890"
SCOPED = "scoped-token-0123456789"

CONFIG = f"""
[[pools]]
name = "default"
[[pools]]
name = "emails"
[[pools]]
name = "reports"

[[auth.tokens]]
token = "{CLIENT}"
role = "client"

[[auth.tokens]]
token = "{WORKER}"
role = "worker"
pools = ["emails"]
labels = {{ gpu = "a100" }}

[[auth.tokens]]
token = "{METRICS}"
role = "metrics"

[[auth.tokens]]
token = "{ADMIN}"
role = "admin"

[[auth.tokens]]
token = "{SCOPED}"
role = "client"
pools = ["emails", "reports"]
tenant = "acme"
"""


@pytest.fixture
def config() -> ServerConfig:
    return loads_config(CONFIG, env={})


@pytest.fixture
def authn(config: ServerConfig) -> Authenticator:
    return Authenticator(config)


def bearer(token: str) -> str:
    return f"Bearer {token}"


# ---------------------------------------------------------------------------------------------
# digests and constant-time comparison


def test_tokens_kept_only_as_sha256_digests(config: ServerConfig, authn: Authenticator) -> None:
    digests = [t.digest for t in config.tokens]
    assert digests == [hashlib.sha256(t.encode()).digest() for t in (CLIENT, WORKER, METRICS, ADMIN, SCOPED)]
    blob = pickle.dumps(config) + repr(config).encode() + repr(authn._entries).encode()
    for token in (CLIENT, WORKER, METRICS, ADMIN, SCOPED):
        assert token.encode() not in blob
    assert all(len(d) == 32 for d, _ in authn._entries)


def test_compare_digest_used_against_every_token(
    authn: Authenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth_mod.hmac, "compare_digest", spy)
    # a match on the first entry still compares against all (no early exit)
    assert authn.authenticate(bearer(CLIENT)) is not None
    assert len(calls) == 5
    assert all(isinstance(a, bytes) and len(a) == 32 and len(b) == 32 for a, b in calls)
    assert all(b == hashlib.sha256(CLIENT.encode()).digest() for _, b in calls)
    calls.clear()
    with pytest.raises(Unauthenticated):
        authn.authenticate(bearer("not-a-valid-token-at-all"))
    assert len(calls) == 5


def test_authenticate_principals(authn: Authenticator) -> None:
    assert authn.auth_enabled
    p = authn.authenticate(bearer(CLIENT))
    assert p == Principal(Role.CLIENT, None, {}, None, "auth.tokens[0]")
    w = authn.authenticate(bearer(WORKER))
    assert w is not None
    assert (w.role, w.pools, dict(w.labels), w.tenant) == (
        Role.WORKER,
        frozenset({"emails"}),
        {"gpu": "a100"},
        None,
    )
    s = authn.authenticate(bearer(SCOPED))
    assert s is not None and s.tenant == "acme" and s.pools == frozenset({"emails", "reports"})
    a = authn.authenticate(bearer(ADMIN))
    assert a is not None and a.role is Role.ADMIN and a.pools is None


@pytest.mark.parametrize(
    "header",
    [
        f"bearer {CLIENT}",
        f"BEARER {CLIENT}",
        f"Bearer   {CLIENT}  ",
        f"  Bearer {CLIENT}",
    ],
)
def test_bearer_scheme_case_and_spaces(authn: Authenticator, header: str) -> None:
    p = authn.authenticate(header)
    assert p is not None and p.role is Role.CLIENT


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "missing authorization header"),
        ("", "missing authorization header"),
        ("   ", "missing authorization header"),
        (CLIENT, "malformed authorization header"),
        (f"Basic {CLIENT}", "malformed authorization header"),
        ("Bearer", "malformed authorization header"),
        ("Bearer ", "malformed authorization header"),
        ("Bearer wrong-token-0123456789", "invalid token"),
        (f"Bearer {CLIENT}x", "invalid token"),
        (f"Bearer {CLIENT[:-1]}", "invalid token"),
    ],
)
def test_unauthenticated(authn: Authenticator, header: str | None, message: str) -> None:
    with pytest.raises(Unauthenticated) as ei:
        authn.authenticate(header)
    assert message in str(ei.value)
    assert ei.value.code == "unauthenticated" and ei.value.http_status == 401


def test_parse_bearer() -> None:
    assert parse_bearer("Bearer abc") == "abc"
    with pytest.raises(Unauthenticated):
        parse_bearer("Token abc")


def test_auth_off_without_tokens() -> None:
    a = Authenticator(loads_config("", env={}))
    assert a.auth_enabled is False
    assert a.authenticate(None) is None
    assert a.authenticate("Bearer whatever-it-is-ignored") is None
    assert a.authenticate("garbage") is None
    assert a.check(None, Action.ADD_RECURRING, "default") is None


def test_auth_applies_on_loopback_once_tokens_exist(config: ServerConfig, authn: Authenticator) -> None:
    assert config.server.grpc_addr.startswith("127.0.0.1")
    with pytest.raises(Unauthenticated):
        authn.authenticate(None)


def test_errors_are_cronoq_errors_and_pickle() -> None:
    for cls in (Unauthenticated, PermissionDenied):
        e = cls("boom")
        assert isinstance(e, CronoqError) and str(e) == "boom"
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is cls and str(e2) == "boom" and e2.message == "boom"
    assert PermissionDenied.code == "permission_denied" and PermissionDenied.http_status == 403


# ---------------------------------------------------------------------------------------------
# roles × actions

TASKS = {
    "submit",
    "submit_batch",
    "cancel",
    "get",
    "list_tasks",
    "wait",
    "watch",
    # docs/how-to/operations.md: replays and bulk actions are task actions
    "replay",
    "replay_where",
    "cancel_where",
    # docs/how-to/durable.md#signals: sending a signal is a task action
    "signal",
}
EXPECTED: dict[Role, set[str]] = {
    Role.CLIENT: TASKS,
    Role.WORKER: {"work"},
    Role.METRICS: {"snapshot", "list_workers", "list_recurring", "metrics"},
    Role.ADMIN: {a.value for a in Action},
}


def test_action_enumeration() -> None:
    assert {a.value for a in Action} == TASKS | {
        "work",
        "snapshot",
        "list_workers",
        "list_recurring",
        "metrics",
        "add_recurring",
        "remove_recurring",
        "pause_pool",
        "resume_pool",
        "pause_recurring",
        "resume_recurring",
        "trigger_recurring",
    }
    assert {r.value for r in Role} == {"client", "worker", "metrics", "admin"}
    assert {r: {a.value for a in acts} for r, acts in ROLE_ACTIONS.items()} == EXPECTED


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("action", list(Action))
def test_role_action_matrix(role: Role, action: Action) -> None:
    p = Principal(role)
    allowed = action.value in EXPECTED[role]
    assert p.can(action) is allowed
    assert p.can(action.value) is allowed
    if allowed:
        authorize(p, action)
        authorize(p, action.value, "any-pool")
    else:
        with pytest.raises(PermissionDenied) as ei:
            authorize(p, action)
        assert str(ei.value) == f"role '{role.value}' is not allowed to {action.value}"


@pytest.mark.parametrize(
    ("token", "action", "ok"),
    [
        (CLIENT, Action.SUBMIT, True),
        (CLIENT, Action.WORK, False),
        (CLIENT, Action.SNAPSHOT, False),
        (WORKER, Action.WORK, True),
        (WORKER, Action.SUBMIT, False),
        (METRICS, Action.METRICS, True),
        (METRICS, Action.LIST_TASKS, False),
        (METRICS, Action.ADD_RECURRING, False),
        (ADMIN, Action.ADD_RECURRING, True),
        (ADMIN, Action.WORK, True),
    ],
)
def test_check_end_to_end(authn: Authenticator, token: str, action: Action, ok: bool) -> None:
    if ok:
        p = authn.check(bearer(token), action)
        assert p is not None
    else:
        with pytest.raises(PermissionDenied):
            authn.check(bearer(token), action)


def test_unknown_action_rejected() -> None:
    with pytest.raises(ValueError):
        authorize(Principal(Role.ADMIN), "drop_everything")


def test_no_principal_means_auth_off() -> None:
    for action in Action:
        authorize(None, action, "x")
    check_pool(None, "x")
    assert allows_pool(None, "x")


def test_grpc_method_map_covers_every_rpc() -> None:
    from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

    rpcs = {
        f"/{svc.full_name}/{m.name}" for svc in pb.DESCRIPTOR.services_by_name.values() for m in svc.methods
    }
    assert set(GRPC_METHOD_ACTIONS) == rpcs  # every RPC of the contract has its action
    assert set(GRPC_METHOD_ACTIONS.values()) == set(Action) - {Action.METRICS}
    assert GRPC_METHOD_ACTIONS["/cronoq.v1.Tasks/SubmitMany"] is Action.SUBMIT
    assert GRPC_METHOD_ACTIONS["/cronoq.v1.Workers/Work"] is Action.WORK
    assert GRPC_METHOD_ACTIONS["/cronoq.v1.Admin/ListRecurring"] is Action.LIST_RECURRING


# ---------------------------------------------------------------------------------------------
# pool restriction


def test_pool_restriction(authn: Authenticator) -> None:
    scoped = authn.authenticate(bearer(SCOPED))
    authorize(scoped, Action.SUBMIT, "emails")
    authorize(scoped, Action.GET, "reports")
    with pytest.raises(PermissionDenied) as ei:
        authorize(scoped, Action.SUBMIT, "default")
    assert str(ei.value) == "token is not allowed to use pool 'default'"
    # the role is checked first
    with pytest.raises(PermissionDenied, match="role 'client'"):
        authorize(scoped, Action.WORK, "emails")
    worker = authn.authenticate(bearer(WORKER))
    authorize(worker, Action.WORK, "emails")
    with pytest.raises(PermissionDenied, match="pool 'reports'"):
        authorize(worker, Action.WORK, "reports")
    # unrestricted tokens reach every pool
    client = authn.authenticate(bearer(CLIENT))
    authorize(client, Action.SUBMIT, "reports")
    assert allows_pool(client, "anything")
    assert allows_pool(scoped, "emails") and not allows_pool(scoped, "default")
    with pytest.raises(PermissionDenied):
        check_pool(scoped, "default")


def test_restrict_pools(authn: Authenticator) -> None:
    scoped = authn.authenticate(bearer(SCOPED))
    client = authn.authenticate(bearer(CLIENT))
    assert restrict_pools(None) is None
    assert restrict_pools(None, ["a", "a", "b"]) == ["a", "b"]
    assert restrict_pools(client) is None
    assert restrict_pools(client, ["default"]) == ["default"]
    assert restrict_pools(scoped) == ["emails", "reports"]
    assert restrict_pools(scoped, []) == ["emails", "reports"]
    assert restrict_pools(scoped, ["reports"]) == ["reports"]
    with pytest.raises(PermissionDenied, match="pool 'default'"):
        restrict_pools(scoped, ["emails", "default"])


# ---------------------------------------------------------------------------------------------
# tenant stamping and enforcement


def test_stamp_tenant(authn: Authenticator) -> None:
    scoped = authn.authenticate(bearer(SCOPED))
    client = authn.authenticate(bearer(CLIENT))
    assert stamp_tenant(scoped, None) == "acme"
    assert stamp_tenant(scoped, "") == "acme"
    assert stamp_tenant(scoped, "acme") == "acme"
    with pytest.raises(PermissionDenied) as ei:
        stamp_tenant(scoped, "evil")
    assert str(ei.value) == "token may only submit for tenant 'acme' (got 'evil')"
    assert stamp_tenant(client, "anyone") == "anyone"
    assert stamp_tenant(client, None) is None
    assert stamp_tenant(client, "") is None
    assert stamp_tenant(None, "t") == "t"
    assert stamp_tenant(None, None) is None


def test_check_tenant(authn: Authenticator) -> None:
    scoped = authn.authenticate(bearer(SCOPED))
    check_tenant(scoped, "acme")
    for other in ("evil", None, ""):
        with pytest.raises(PermissionDenied, match="tenant 'acme'"):
            check_tenant(scoped, other)
    check_tenant(authn.authenticate(bearer(CLIENT)), "evil")
    check_tenant(None, "evil")


def test_stamp_labels(authn: Authenticator) -> None:
    worker = authn.authenticate(bearer(WORKER))
    assert stamp_labels(worker, None) == {"gpu": "a100"}
    assert stamp_labels(worker, {"zone": "eu"}) == {"zone": "eu", "gpu": "a100"}
    assert stamp_labels(worker, {"gpu": "a100"}) == {"gpu": "a100"}
    with pytest.raises(PermissionDenied, match="gpu"):
        stamp_labels(worker, {"gpu": "t4"})
    assert stamp_labels(None, {"a": "b"}) == {"a": "b"}
    assert stamp_labels(authn.authenticate(bearer(CLIENT)), {"a": "b"}) == {"a": "b"}


def test_principal_is_frozen_and_hashable() -> None:
    p = Principal(Role.CLIENT, frozenset({"a"}), tenant="t")
    with pytest.raises(AttributeError):
        p.tenant = "u"  # type: ignore[misc]
    assert hash(p) == hash(Principal(Role.CLIENT, frozenset({"a"}), tenant="t"))


# ---------------------------------------------------------------------------------------------
# loopback Host check (DNS-rebinding protection)


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:7071",
        "LocalHost:7071",
        "localhost.",
        "127.0.0.1",
        "127.0.0.1:7071",
        "127.255.0.9:80",
        "[::1]",
        "[::1]:7071",
        "::1",
        " localhost:7071 ",
    ],
)
def test_loopback_hosts_accepted(host: str) -> None:
    assert host_is_loopback(host) is True


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example",
        "evil.example:7071",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "0.0.0.0:7071",
        "10.0.0.1",
        "[::]:7071",
        "[::2]:1",
        "localhost:http",
        "localhost:99999",
        "localhost:",
        "[::1",
        "[::1]x",
        ":7071",
    ],
)
def test_other_hosts_rejected(host: str | None) -> None:
    assert host_is_loopback(host) is False


def test_check_http_host_only_without_auth_on_loopback(authn: Authenticator) -> None:
    off = Authenticator(loads_config("", env={}))
    assert off.host_check_required("127.0.0.1:7071")
    off.check_http_host("127.0.0.1:7071", "localhost:7071")
    with pytest.raises(PermissionDenied, match="not a loopback name"):
        off.check_http_host("127.0.0.1:7071", "evil.example:7071")
    with pytest.raises(PermissionDenied):
        off.check_http_host("127.0.0.1:7071", None)
    # --insecure-no-auth beyond loopback: the Host cannot be checked
    assert not off.host_check_required("0.0.0.0:7071")
    off.check_http_host("0.0.0.0:7071", "evil.example")
    # with auth the token protects the server
    assert not authn.host_check_required("127.0.0.1:7071")
    authn.check_http_host("127.0.0.1:7071", "evil.example")


def test_roles_listing(authn: Authenticator) -> None:
    assert list(authn.roles) == [Role.CLIENT, Role.WORKER, Role.METRICS, Role.ADMIN, Role.CLIENT]
