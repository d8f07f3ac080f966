"""Settings of the test project: a SQLite file ($DJANGO_DB) and a cronoq server ($CRONOQ_SERVER)."""

import os

SECRET_KEY = "not-a-secret-tests-only"
DEBUG = True
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "cronoq.contrib.django",
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "proj.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["DJANGO_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

# $SHOP_SERVER_IN_TASKS_ONLY instead of $CRONOQ_SERVER: only the backend's OPTIONS name the server
SERVER = os.environ.get("CRONOQ_SERVER") or os.environ["SHOP_SERVER_IN_TASKS_ONLY"]
CRONOQ = {"APPS": ["shop.cronoq_tasks:app"]}
if not os.environ.get("SHOP_SERVER_IN_TASKS_ONLY"):
    CRONOQ["SERVER"] = SERVER
if os.environ.get("SHOP_BAD_APP"):  # a cronoq app module that cannot be imported
    CRONOQ["APPS"].append("shop.nope:app")
TASKS = {
    "default": {
        "BACKEND": "cronoq.contrib.django.CronoqBackend",
        "QUEUES": ["django", "nowhere"],  # "nowhere" is no pool of the server
        "OPTIONS": {"server": SERVER},
    }
}
