"""docs/how-to/security.md#certificate-principals: the Authenticator maps a verified client
certificate's DNS names to ``[[auth.certs]]`` principals; a sent token takes precedence."""

from __future__ import annotations

import pytest

from cronoq.server.auth import Authenticator, PermissionDenied, Role, Unauthenticated
from cronoq.server.config import CertConfig, ServerConfig, TokenConfig, token_digest

TOKEN = "client-token-0123456789"


def authenticator(*, tokens: bool = True) -> Authenticator:
    return Authenticator(
        ServerConfig(
            tokens=(TokenConfig(token_digest(TOKEN), "client", name="auth.tokens[0]"),) if tokens else (),
            certs=(
                CertConfig("w.example.com", "worker", ("gpu",), {"zone": "z1"}, name="auth.certs[0]"),
                CertConfig("both.example.com", "client", tenant="t1", name="auth.certs[1]"),
                CertConfig("admin.example.com", "admin", name="auth.certs[2]"),
            ),
        )
    )


def test_certificate_maps_to_its_principal() -> None:
    a = authenticator()
    assert a.auth_enabled and a.certs_enabled
    p = a.authenticate(None, ["W.Example.COM."])
    assert p is not None
    assert (p.role, p.pools, dict(p.labels), p.name) == (
        Role.WORKER,
        frozenset({"gpu"}),
        {"zone": "z1"},
        "auth.certs[0]",
    )
    a.check(None, "work", "gpu", peer_dns=["w.example.com"])
    with pytest.raises(PermissionDenied):
        a.check(None, "work", "cpu", peer_dns=["w.example.com"])
    with pytest.raises(PermissionDenied):
        a.check(None, "submit", peer_dns=["w.example.com"])
    # several names: the first configured entry that matches
    p2 = a.authenticate(None, ["admin.example.com", "both.example.com"])
    assert p2 is not None and p2.name == "auth.certs[1]" and p2.tenant == "t1"
    assert a.roles == [Role.CLIENT, Role.WORKER, Role.CLIENT, Role.ADMIN]


def test_unmapped_or_missing_certificate() -> None:
    a = authenticator()
    with pytest.raises(Unauthenticated) as ei:
        a.authenticate(None, ["x.example.com", "a.example.com"])
    assert (
        str(ei.value)
        == "client certificate (DNS a.example.com, x.example.com) is not mapped by [[auth.certs]]"
    )
    with pytest.raises(Unauthenticated) as ei:
        a.authenticate(None)
    assert str(ei.value) == (
        "missing authorization header (expected 'Bearer <token>') and no client certificate mapped by "
        "[[auth.certs]]"
    )


def test_a_sent_token_decides_alone() -> None:
    a = authenticator()
    p = a.authenticate(f"Bearer {TOKEN}", ["admin.example.com"])
    assert p is not None and p.role == Role.CLIENT and p.name == "auth.tokens[0]"
    with pytest.raises(Unauthenticated, match="invalid token"):
        a.authenticate("Bearer wrong-token-0123456789", ["admin.example.com"])
    with pytest.raises(Unauthenticated, match="malformed"):
        a.authenticate("Basic abc", ["admin.example.com"])
    # certificates alone: auth is on, a token cannot match anything
    only = authenticator(tokens=False)
    assert only.auth_enabled
    with pytest.raises(Unauthenticated, match="invalid token"):
        only.authenticate(f"Bearer {TOKEN}", ["admin.example.com"])
    assert Authenticator(ServerConfig()).authenticate(None, ["admin.example.com"]) is None
