"""The cronoq section of the Django admin: the server's tasks and pools, through the client.

Theory of operation
-------------------
Two entries under "cronoq" (unmanaged models, no table: :mod:`cronoq.contrib.django.models`)
whose change lists are views of the server, read with the process's client
(``settings.CRONOQ``): **Tasks** lists one page of ``Client.list_tasks`` (filters: status,
pool, kind; "next page" follows ``next_after``) with *cancel* and *replay* on each row (a
button) and on the ticked rows (bulk); **Pools** lists the snapshot's pools with *pause* / *resume*. Actions
are POSTs (CSRF-protected) that redirect back with a message per outcome (a refused one — a
finished task cancelled, an unfinished one replayed — is reported, not raised).

Only active staff users see the section (``has_view_permission``); nothing can be added,
changed or deleted through the model admin itself.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from cronoq.client import ClientError
from cronoq.contrib.django.conf import default_client
from cronoq.contrib.django.models import ServerPool, ServerTask
from cronoq.engine.model import STATUS_NAMES

PAGE = 50


class _ServerAdmin(admin.ModelAdmin):
    """Staff may view; nothing is added, changed or deleted as a model."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _forbidden(self, request: HttpRequest) -> HttpResponse | None:
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        return None

    def _context(self, request: HttpRequest, **extra: Any) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "opts": self.opts, **extra}


@admin.register(ServerTask)
class ServerTaskAdmin(_ServerAdmin):
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        self._forbidden(request)
        if request.method == "POST":
            self._act(request)
            return HttpResponseRedirect(request.get_full_path())
        filters = {k: request.GET.get(k, "") for k in ("status", "pool", "kind")}
        after = request.GET.get("after", "0")
        page = None
        try:
            page = default_client().list_tasks(
                pools=filters["pool"] or None,
                statuses=filters["status"] or None,
                kinds=filters["kind"] or None,
                after=int(after) if after.isdigit() else 0,
                limit=PAGE,
            )
        except (ClientError, ValueError, ImproperlyConfigured) as e:
            messages.error(request, f"cronoq server: {e}")
        context = self._context(
            request,
            title="Tasks on the cronoq server",
            tasks=page.tasks if page else [],
            next_after=page.next_after if page else None,
            filters=filters,
            statuses=STATUS_NAMES,
        )
        return TemplateResponse(request, "admin/cronoq/tasks.html", context)

    def _act(self, request: HttpRequest) -> None:
        action = request.POST.get("action", "")
        ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()]
        single = request.POST.get("single", "")  # a row's own button: "cancel:ID" / "replay:ID"
        if single:
            action, _, one = single.partition(":")
            ids = [int(one)] if one.isdigit() else []
        if action not in ("cancel", "replay") or not ids:
            messages.warning(request, "choose cancel or replay and at least one task")
            return
        try:
            client = default_client()
        except ImproperlyConfigured as e:
            messages.error(request, f"cronoq server: {e}")
            return
        done: list[str] = []
        refused: list[str] = []
        for task_id in ids:
            try:
                if action == "cancel":
                    (done if client.cancel(task_id) else refused).append(f"{task_id}")
                else:
                    done.append(f"{task_id} → {client.replay(task_id).id}")
            except ClientError as e:
                refused.append(f"{task_id} ({e.code}: {e.message})")
        verb = "cancelled" if action == "cancel" else "replayed"
        if done:
            messages.success(request, f"{verb}: {', '.join(done)}")
        if refused:
            messages.warning(request, f"not {verb}: {', '.join(refused)}")


@admin.register(ServerPool)
class ServerPoolAdmin(_ServerAdmin):
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        self._forbidden(request)
        try:
            client = default_client()
        except ImproperlyConfigured as e:
            messages.error(request, f"cronoq server: {e}")
            return TemplateResponse(request, "admin/cronoq/pools.html", self._context(request, pools=[]))
        if request.method == "POST":
            pool, action = request.POST.get("pool", ""), request.POST.get("action", "")
            try:
                if action not in ("pause", "resume"):
                    raise ValueError(f"unknown action {action!r}")
                changed = client.pause(pool) if action == "pause" else client.resume(pool)
                verb = "paused" if action == "pause" else "resumed"
                messages.success(request, f"{pool}: {verb}" if changed else f"{pool}: already {verb}")
            except (ClientError, ValueError) as e:
                messages.error(request, f"{pool}: {e}")
            return HttpResponseRedirect(request.get_full_path())
        pools: list[Any] = []
        try:
            pools = client.snapshot().pools
        except ClientError as e:
            messages.error(request, f"cronoq server: {e}")
        context = self._context(request, title="Pools of the cronoq server", pools=pools)
        return TemplateResponse(request, "admin/cronoq/pools.html", context)
