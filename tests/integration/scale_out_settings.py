"""Production settings with one difference: static files are collected with Django's manifest
storage (hashed names, ``staticfiles.json``) but not compressed. WhiteNoise's compressed
storage spends about a minute brotli-compressing 43 MB (mostly Swagger UI) that the scale-out
test never asks for compressed; ``tests/portal/test_static.py`` covers the compressed files."""

from portal.settings.base import *  # noqa: F403

STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"  # noqa: F405
