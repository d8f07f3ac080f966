"""``import cronoq`` stays light: no integration, no web framework, no gRPC."""

from __future__ import annotations

import subprocess
import sys


def test_import_cronoq_imports_no_framework() -> None:
    code = (
        "import sys, cronoq, cronoq.contrib.django; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'django_tasks', 'flask', 'fastapi', 'starlette', 'grpc') "
        "or m in ('cronoq.client', 'cronoq.contrib.asgi', 'cronoq.contrib.flask', "
        "'cronoq.contrib.django.backend')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
