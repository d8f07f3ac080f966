"""The ``CRONOQ`` setting, the process's shared clients and the project's cronoq apps.

Theory of operation
-------------------
``settings.CRONOQ`` is a dict (every key optional)::

    CRONOQ = {
        "SERVER": "127.0.0.1:7070",      # HOST:PORT of cronoq serve (or a list, for failover)
        "TOKEN": None,                   # bearer token
        "TLS": False,                    # TLS with the system roots
        "APPS": ["shop.tasks:app"],      # the project's cronoq.App objects, MODULE:ATTR
    }

:func:`settings` reads and checks it (``ImproperlyConfigured`` naming the key), as
:func:`backend_options` does a ``CronoqBackend``'s ``OPTIONS`` (``server``, ``token``, ``tls``;
a key it leaves out is ``CRONOQ``'s): a misspelt key is refused, never replaced in silence. Clients are
shared per process and per ``(server, token, tls)`` (:func:`shared_client`): Django makes a
task backend per thread, and each :class:`~cronoq.client.BlockingClient` owns a loop thread and
a channel, so one is made once and reused by every thread. :func:`load_apps` imports the
``APPS`` references (the app config does it in ``ready()``; the worker refuses to start when one
cannot be imported).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronoq.client import BlockingClient
    from cronoq.tasks.app import App

__all__ = [
    "BackendOptions",
    "CronoqSettings",
    "backend_options",
    "default_client",
    "default_connection",
    "load_apps",
    "settings",
    "shared_client",
]

_KEYS = {"SERVER", "TOKEN", "TLS", "APPS"}
_clients: dict[tuple[tuple[str, ...], str | None, bool], BlockingClient] = {}
_lock = threading.Lock()


def improperly_configured(message: str) -> Exception:
    from django.core.exceptions import ImproperlyConfigured

    return ImproperlyConfigured(message)


@dataclass(frozen=True)
class CronoqSettings:
    """``settings.CRONOQ``, checked."""

    server: tuple[str, ...]
    token: str | None
    tls: bool
    apps: tuple[str, ...]


def settings() -> CronoqSettings:
    """``settings.CRONOQ`` checked (``ImproperlyConfigured`` naming what is wrong)."""
    from django.conf import settings as django_settings

    raw = _checked_dict(getattr(django_settings, "CRONOQ", None), "settings.CRONOQ", _KEYS)
    server = servers(raw.get("SERVER"), "settings.CRONOQ['SERVER']", required=False)
    token = _token(raw.get("TOKEN"), "settings.CRONOQ['TOKEN']")
    apps = raw.get("APPS", [])
    if (
        isinstance(apps, str)
        or not isinstance(apps, (list, tuple))
        or not all(isinstance(a, str) for a in apps)
    ):
        raise improperly_configured("settings.CRONOQ['APPS'] must be a list of 'MODULE:ATTR' strings")
    return CronoqSettings(server, token, _flag(raw.get("TLS", False), "settings.CRONOQ['TLS']"), tuple(apps))


def _checked_dict(value: Any, where: str, keys: set[str]) -> dict[str, Any]:
    """A settings dict (None or empty: ``{}``) whose keys are all among ``keys``."""
    value = value or {}
    if not isinstance(value, dict):
        raise improperly_configured(f"{where} must be a dict (got {type(value).__name__})")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise improperly_configured(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(keys))})")
    return value


def _token(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise improperly_configured(f"{where} must be a string or None")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise improperly_configured(f"{where} must be True or False (got {value!r})")
    return value


_OPTION_KEYS = {"server", "token", "tls"}


@dataclass(frozen=True)
class BackendOptions:
    """A ``CronoqBackend``'s ``OPTIONS``, checked, with ``settings.CRONOQ``'s values for the keys
    it leaves out (``server`` empty: neither names one)."""

    server: tuple[str, ...]
    token: str | None
    tls: bool


def backend_options(alias: str, options: Any) -> BackendOptions:
    """``TASKS[alias]["OPTIONS"]`` checked (``ImproperlyConfigured`` naming what is wrong)."""
    where = f"TASKS[{alias!r}]['OPTIONS']"
    options = _checked_dict(options, where, _OPTION_KEYS)
    base = settings()
    server = servers(options.get("server"), f"{where}['server']", required=False) or base.server
    token = _token(options.get("token", base.token), f"{where}['token']")
    tls = _flag(options.get("tls", base.tls), f"{where}['tls']")
    return BackendOptions(server, token, tls)


def servers(value: Any, where: str, *, required: bool = True) -> tuple[str, ...]:
    """A server address or a list of them, checked."""
    if value is None or value == "" or value == []:
        if required:
            raise improperly_configured(f"{where} is required: the cronoq server's 'HOST:PORT'")
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(s, str) and ":" in s for s in items):
        raise improperly_configured(f"{where} must be 'HOST:PORT' or a list of them (got {value!r})")
    return tuple(items)


def shared_client(server: Sequence[str], token: str | None, tls: bool) -> BlockingClient:
    """The process's client for ``(server, token, tls)`` (made on first use)."""
    from cronoq.client import BlockingClient

    key = (tuple(server), token, bool(tls))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = BlockingClient(list(server), token=token, tls=tls)
        return client


BACKEND_PATH = "cronoq.contrib.django.CronoqBackend"


def default_connection() -> BackendOptions | None:
    """The server of ``settings.CRONOQ`` (with its token and TLS), else of the first ``TASKS``
    backend that is a ``CronoqBackend`` naming one in its ``OPTIONS``; None when none does.
    What the project's cronoq apps are bound to, the admin reads and ``cronoq_worker`` serves."""
    from django.conf import settings as django_settings

    s = settings()
    if s.server:
        return BackendOptions(s.server, s.token, s.tls)
    for alias, config in (getattr(django_settings, "TASKS", None) or {}).items():
        if isinstance(config, dict) and config.get("BACKEND") == BACKEND_PATH:
            options = backend_options(alias, config.get("OPTIONS"))
            if options.server:
                return options
    return None


def default_client() -> BlockingClient:
    """The client of :func:`default_connection` (``ImproperlyConfigured`` when nothing names a
    server)."""
    connection = default_connection()
    if connection is None:
        raise improperly_configured(
            "settings.CRONOQ['SERVER'] is required (or a TASKS backend of cronoq.contrib.django.CronoqBackend"
            " with OPTIONS['server']): the cronoq server's 'HOST:PORT'"
        )
    return shared_client(connection.server, connection.token, connection.tls)


def load_apps(refs: Sequence[str]) -> list[App]:
    """Import each ``MODULE:ATTR`` and check it is a :class:`cronoq.App`."""
    from cronoq.tasks.app import App

    out = []
    for ref in refs:
        module_name, sep, attr = ref.partition(":")
        if not sep or not module_name or not attr:
            raise improperly_configured(f"settings.CRONOQ['APPS']: expected 'MODULE:ATTR' (got {ref!r})")
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as e:
            raise improperly_configured(f"settings.CRONOQ['APPS']: cannot import {module_name!r}: {e}") from e
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if not isinstance(obj, App):
            raise improperly_configured(f"settings.CRONOQ['APPS']: {ref} is not a cronoq.App (got {obj!r})")
        out.append(obj)
    return out
