"""Django integration (the ``django`` extra; docs/getting-started/django.md).

* ``"cronoq.contrib.django"`` in ``INSTALLED_APPS``: loads ``settings.CRONOQ["APPS"]`` (the
  project's :class:`cronoq.App` objects) and binds them to the server of
  ``settings.CRONOQ["SERVER"]`` (:mod:`cronoq.contrib.django.apps`), and adds the admin
  section (:mod:`cronoq.contrib.django.admin`).
* :class:`CronoqBackend` — the ``django.tasks`` backend (:mod:`cronoq.contrib.django.backend`).
* ``python manage.py cronoq_worker --pool P`` — the worker
  (:mod:`cronoq.contrib.django.management.commands.cronoq_worker`).
* :func:`submit_on_commit` — submit a cronoq named task once the transaction commits
  (:mod:`cronoq.contrib.django.oncommit`).

Importing this package imports nothing from Django: each name loads its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronoq.contrib.django.backend import CronoqBackend
    from cronoq.contrib.django.oncommit import submit_on_commit

__all__ = ["CronoqBackend", "submit_on_commit"]

_LAZY = {
    "CronoqBackend": "cronoq.contrib.django.backend",
    "submit_on_commit": "cronoq.contrib.django.oncommit",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cronoq.contrib.django' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
