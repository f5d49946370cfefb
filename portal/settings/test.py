"""Settings for the test suite: PostgreSQL from ``DATABASE_URL`` (default: the local server)."""

import os

os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789abcdef")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpu_pool_portal")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")

from portal.settings.base import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=True)  # noqa: F405
# No console handler (pytest captures records); refusals still lose their traceback.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": LOGGING["filters"],  # noqa: F405
    "loggers": {name: {"filters": ["refusal"]} for name in REFUSAL_LOGGERS},  # noqa: F405
}
