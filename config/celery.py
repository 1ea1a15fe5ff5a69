"""The Celery application: the broker carries wake-up hints, the database holds the truth."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("reset_delivery")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
