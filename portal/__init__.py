"""Wiring of gpu-pool-portal: settings, URLs, the API router and the Celery app."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
