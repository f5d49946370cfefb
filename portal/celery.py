"""The Celery application.

With no ``CELERY_BROKER_URL`` in the environment the settings make every task run eagerly in
the calling process (the zero-setup demo); production and the integration tests use Redis.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The worker's liveness heartbeat (a file the probe reads; started at worker_init).
import portal.worker_health  # noqa: E402, F401
