"""Settings as a Django team on MySQL writes them, with recheck as the tasks backend. Where the
test's servers are: DJANGO_DB_NAME, DJANGO_DB_PORT, REDIS_URL (and MAX_ATTEMPTS, KEY_PREFIX)."""

import os
from importlib.util import find_spec

import pymysql

if find_spec("MySQLdb") is None:  # mysqlclient, Django's driver for MySQL, when it is installed
    pymysql.install_as_MySQLdb()  # else PyMySQL stands in for it (recheck depends on it already)
    pymysql.version_info = (2, 2, 8, "final", 0)  # what Django 6.1 asks of mysqlclient

SECRET_KEY = "test"
DEBUG = False
USE_TZ = True
TIME_ZONE = "Europe/Paris"  # not UTC: times must survive the trip
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    *([] if find_spec("django.tasks") else ["django_tasks"]),  # Django 5.2: the backport
    "recheck.django",
    "taskapp",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ["DJANGO_DB_NAME"],
        "USER": "root",
        "HOST": "127.0.0.1",
        "PORT": os.environ["DJANGO_DB_PORT"],
    }
}
TASKS = {
    "default": {
        "BACKEND": "recheck.django.RecheckBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {
            "REDIS_URL": os.environ["REDIS_URL"],
            "MAX_ATTEMPTS": int(os.environ.get("MAX_ATTEMPTS", "2")),
            "RECHECK": {
                "CONCURRENCY": 4,
                "KEY_PREFIX": os.environ.get("KEY_PREFIX", "recheck"),
                "RETRY_BASE": 0.2,
            },
        },
    }
}
ROOT_URLCONF = "tasksite.urls"
ALLOWED_HOSTS = ["testserver"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False}
