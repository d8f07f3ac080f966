"""Two unmanaged models with no table: the admin's entries for the server's tasks and pools
(:mod:`cronoq.contrib.django.admin` lists them through the client, never the database)."""

from __future__ import annotations

from django.db import models


class ServerTask(models.Model):
    """The admin's "Tasks" entry (no table)."""

    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "task"
        verbose_name_plural = "tasks"


class ServerPool(models.Model):
    """The admin's "Pools" entry (no table)."""

    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "pool"
        verbose_name_plural = "pools"
