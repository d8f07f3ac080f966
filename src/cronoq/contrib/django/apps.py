"""The Django app ``"cronoq.contrib.django"``: loads the project's cronoq apps and binds them.

In ``ready()`` it reads ``settings.CRONOQ`` (:mod:`cronoq.contrib.django.conf`), imports every
``APPS`` reference and, when a server is named (``CRONOQ["SERVER"]``, else the ``OPTIONS`` of a
``CronoqBackend`` in ``TASKS``), binds each app to the process's shared
:class:`~cronoq.client.BlockingClient` — so views call ``t.submit_sync(...)``,
``t.enqueue_sync(...)`` or :func:`cronoq.contrib.django.submit_on_commit`. The client's
channel opens on the first call (a management command that submits nothing never connects).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from cronoq.tasks.app import App


class CronoqConfig(AppConfig):
    name = "cronoq.contrib.django"
    label = "cronoq"
    verbose_name = "cronoq"
    default_auto_field = "django.db.models.AutoField"

    #: the project's cronoq apps (``settings.CRONOQ["APPS"]``), loaded in ready()
    cronoq_apps: list[App] = []  # noqa: RUF012 - set per instance in ready()

    def ready(self) -> None:
        from cronoq.contrib.django.conf import default_connection, load_apps, settings, shared_client

        self.cronoq_apps = load_apps(settings().apps)
        connection = default_connection()
        if connection is not None:
            client = shared_client(connection.server, connection.token, connection.tls)
            for app in self.cronoq_apps:
                app.bind(client)
