"""``import cronoq`` stays light: no integration, no web framework, no gRPC."""

from __future__ import annotations

import contextlib
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


#: what each framework extra's documented way of running cronoq imports (with Django set up)
_SETUP = (
    "import django; from django.conf import settings; settings.configure("
    "INSTALLED_APPS=['django.contrib.admin', 'django.contrib.auth', 'django.contrib.contenttypes',"
    " 'django.contrib.sessions', 'django.contrib.messages', 'cronoq.contrib.django']); django.setup()"
)
_USES = {
    "django": (
        f"{_SETUP}; import cronoq.contrib.django.backend, cronoq.contrib.django.admin,"
        " cronoq.contrib.django.oncommit, cronoq.contrib.django.management.commands.cronoq_worker,"
        " cronoq.cli.worker_cmd"  # (what the command runs)
    ),
    "flask": "import cronoq.contrib.flask, cronoq.client, cronoq.cli.worker_cmd",  # + cronoq worker
}


def _requirement_closure(extra: str) -> set[str]:
    """The distributions ``pip install 'cronoq[extra]'`` brings: the extra's and the core
    requirements, and theirs (as installed here), names normalized."""
    import importlib.metadata as md
    import re
    import tomllib
    from pathlib import Path

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    todo = [*project["dependencies"], *project["optional-dependencies"][extra]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        if ";" in req and "extra ==" in req.split(";", 1)[1]:
            continue  # another extra of that distribution
        name = norm(re.split(r"[<>=!~\[ ;(]", req, maxsplit=1)[0])
        if name in seen:
            continue
        seen.add(name)
        with contextlib.suppress(md.PackageNotFoundError):  # (a requirement not installed here)
            todo += md.requires(name) or []
    return seen


#: what other packages import when it is there, and do without otherwise
_OPTIONAL = {
    "colorama",  # django.core.management.color
    "grpcio-tools",  # grpc/__init__.py (as grpc.tools)
}


def test_each_framework_extra_brings_what_its_commands_import() -> None:
    """``pip install 'cronoq[django]'`` must be enough for ``manage.py cronoq_worker`` (which
    runs ``cronoq worker``'s command line), and ``cronoq[flask]`` for ``cronoq worker``."""
    import re

    for extra, code in _USES.items():
        listing = (  # the distributions of the modules imported after start-up (not .pth hooks)
            f"import sys; before = set(sys.modules); {code}; import importlib.metadata as md;"
            " dists = md.packages_distributions(); print('\\n'.join(sorted({d for m in"
            " set(sys.modules) - before for d in dists.get(m.split('.')[0], [])})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", listing], capture_output=True, text=True, timeout=120, check=True
        )
        imported = {re.sub(r"[-_.]+", "-", d).lower() for d in out.stdout.split()} - {"cronoq", *_OPTIONAL}
        missing = imported - _requirement_closure(extra)
        assert not missing, f"the {extra} extra does not bring {sorted(missing)}"
