"""The cronoq section of the Django admin, through Django's test client, against the real
server of conftest.py (tasks on the "default" pool, which no worker serves, stay ready)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.contrib.conftest import DjangoProject

pytest.importorskip("django")


@pytest.fixture(scope="module")
def staff(django_project: DjangoProject) -> Any:
    from django.contrib.auth.models import User
    from django.test import Client as HttpClient

    user, _ = User.objects.get_or_create(username="ops", defaults={"is_staff": True})
    http = HttpClient()
    http.force_login(user)
    return http


def _client() -> Any:
    from cronoq.contrib.django.conf import default_client

    return default_client()


def test_staff_only(django_project: DjangoProject) -> None:
    from django.contrib.auth.models import User
    from django.test import Client as HttpClient

    assert HttpClient().get("/admin/cronoq/servertask/").status_code == 302  # to the login page
    user, _ = User.objects.get_or_create(username="customer", defaults={"is_staff": False})
    http = HttpClient()
    http.force_login(user)
    assert http.get("/admin/cronoq/servertask/").status_code == 302
    assert http.post("/admin/cronoq/serverpool/", {"pool": "default", "action": "pause"}).status_code == 302
    assert not any(p.paused for p in _client().snapshot().pools if p.name == "default")


def test_list_filter_cancel_and_replay(staff: Any) -> None:
    client = _client()
    ids = [client.submit({"n": i}, pool="default", kind="admin.demo").id for i in range(3)]
    other = client.submit({"n": 9}, pool="default", kind="admin.other").id
    page = staff.get(
        "/admin/cronoq/servertask/", {"kind": "admin.demo", "status": "ready", "pool": "default"}
    )
    assert page.status_code == 200
    listed = [int(i) for i in re.findall(r'data-id="(\d+)"', page.content.decode())]
    assert listed == ids  # filtered: not the other kind
    assert staff.get("/admin/").content.decode().count("/admin/cronoq/") >= 2  # on the admin index

    # one row's own button, then two ticked rows at once
    staff.post("/admin/cronoq/servertask/", {"single": f"cancel:{ids[0]}"})
    r = staff.post("/admin/cronoq/servertask/", {"action": "cancel", "ids": [ids[1], ids[2]]}, follow=True)
    assert [client.get(i).status for i in ids] == ["cancelled"] * 3
    assert f"cancelled: {ids[1]}, {ids[2]}" in r.content.decode().lower()  # (the admin capitalizes)
    r = staff.post("/admin/cronoq/servertask/", {"action": "replay", "ids": ids[:2]}, follow=True)
    replays = [client.get(i).replayed_by for i in ids[:2]]
    assert all(replays) and [client.get(r_id).status for r_id in replays] == ["ready", "ready"]  # type: ignore[arg-type]
    r = staff.post("/admin/cronoq/servertask/", {"single": f"replay:{other}"}, follow=True)
    assert f"not replayed: {other} (failed_precondition" in r.content.decode().lower()  # still ready: refused
    client.cancel_where(pools=["default"])


def test_pause_and_resume_a_pool(staff: Any) -> None:
    def paused() -> bool:
        return next(p.paused for p in _client().snapshot().pools if p.name == "default")

    page = staff.get("/admin/cronoq/serverpool/")
    assert page.status_code == 200 and 'data-pool="django"' in page.content.decode()
    staff.post("/admin/cronoq/serverpool/", {"pool": "default", "action": "pause"})
    assert paused()
    r = staff.post("/admin/cronoq/serverpool/", {"pool": "default", "action": "resume"}, follow=True)
    assert not paused() and "default: resumed" in r.content.decode().lower()
    r = staff.post("/admin/cronoq/serverpool/", {"pool": "no-such-pool", "action": "pause"}, follow=True)
    assert "no-such-pool: " in r.content.decode().lower() and "not_found" in r.content.decode()


def test_the_server_comes_from_tasks_when_cronoq_names_none(staff: Any) -> None:
    from django.test import override_settings

    with override_settings(CRONOQ={}):  # the TASKS backend's OPTIONS["server"] is used
        assert staff.get("/admin/cronoq/serverpool/").content.decode().count('data-pool="') >= 2
    with override_settings(CRONOQ={}, TASKS={}):
        for page in ("/admin/cronoq/serverpool/", "/admin/cronoq/servertask/"):
            r = staff.get(page)
            assert r.status_code == 200 and "SERVER" in r.content.decode()
        r = staff.post("/admin/cronoq/servertask/", {"single": "cancel:1"}, follow=True)
        assert r.status_code == 200 and "SERVER" in r.content.decode()
