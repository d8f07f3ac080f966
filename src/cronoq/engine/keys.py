"""Task keys are scoped by tenant: the key index's entries (keys:
docs/reference/behaviour.md#ids-keys-retention; tenants: docs/reference/behaviour.md#fairness).

Theory of operation
-------------------
A key names a task within its *tenant*: tenant ``t2``'s key ``K`` and tenant ``t1``'s key
``K`` are different tasks, so a duplicate submission only ever returns the submitter's own
task, and a dependency on a key resolves among the dependent's tenant's tasks.  Tasks without
a tenant form one tenant of their own (as for fair sharing); pools do not scope keys (every
pool of a tenant shares its namespace).  The engine's key index (``Core.keys``) and its
awaited keys (``Core.awaiting``) are keyed by :func:`scoped_key`: the plain key for tasks
without a tenant (so nothing changes for them), ``(tenant, key)`` otherwise.

A dependency by id on a task of another tenant is refused like an unknown one
(:func:`same_tenant`): tenants never see, or wait on, each other's work.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["ScopedKey", "same_tenant", "scoped_key"]

ScopedKey: TypeAlias = str | tuple[str, str]


def scoped_key(tenant: str | None, key: str) -> ScopedKey:
    """The index entry of ``key`` for ``tenant``."""
    return key if tenant is None else (tenant, key)


def same_tenant(a: str | None, b: str | None) -> bool:
    """Whether two tasks' tenants are the same (no tenant is a tenant of its own)."""
    return (a or None) == (b or None)
