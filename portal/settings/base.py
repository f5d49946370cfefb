"""Settings read from the environment (django-environ).

Variables: ``DATABASE_URL`` (default: a SQLite file beside manage.py, for the demo only),
``CELERY_BROKER_URL`` (default: none, tasks run eagerly in-process), ``SECRET_KEY`` (required
when ``DEBUG`` is off), ``DEBUG``, ``TIME_ZONE``, ``ALLOWED_HOSTS``, ``CSRF_TRUSTED_ORIGINS``,
``SECURE_SSL_REDIRECT``, ``INVENTORY_UPLOAD_MAX_BYTES``, ``CACHE_URL`` (default: per-process
memory), ``NUM_PROXIES`` (trusted reverse proxies, default 0), ``LOGIN_FAILURE_LIMIT``,
``LOGIN_COOLOFF_MINUTES``, ``LOGIN_THROTTLE_RATE``, ``TOKEN_THROTTLE_RATE``,
``CALENDAR_FEED_THROTTLE_RATE``,
``API_TOKEN_TTL_DAYS``, ``STATIC_ROOT``, ``SQLITE_TIMEOUT_S``, ``TASK_TIME_LIMIT_S``,
``REQUEST_TIMEOUT_S``, ``CELERY_QUEUE``, ``PORTAL_DEMO`` (``make demo`` only: a quiet log),
``EMAIL_BACKEND``.
"""

from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from pools.tokenflow.extract import (
    DEFAULT_OUTCOME_PATHS,
    DEFAULT_TASK_ID_HEADER,
    DEFAULT_TASK_ID_PATHS,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
# A .env beside manage.py fills in what the environment lacks; ENV_FILE points elsewhere
# (``ENV_FILE=/dev/null`` reads none, as the settings tests do).
environ.Env.read_env(env.str("ENV_FILE", default=str(BASE_DIR / ".env")), overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# Set by ``make demo`` only (one process, DEBUG off as users see it): keeps its log to what a
# person trying the portal needs. Production never sets it.
DEMO = env.bool("PORTAL_DEMO", default=False)
# ``make demo`` has no Celery beat: its ``demo_clock`` command runs the allocation lifecycle
# (windows open and close) every this many seconds, and pages say so; 0 (production): beat does.
DEMO_CLOCK_S = env.int("DEMO_CLOCK_S", default=0)

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set and DEBUG is off: refusing to start. "
            "Set SECRET_KEY in the environment (or DEBUG=1 for local development)."
        )
    SECRET_KEY = "insecure-development-key-only-for-debug-mode"  # noqa: S105

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_htmx",
    "template_partials",
    "django_prometheus",
    "axes",
    "csp",
    "pools",
    "billing",
]

MIDDLEWARE = [
    # Request counts and latencies for /metrics: first and last, so they time the whole stack.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A request past REQUEST_TIMEOUT_S answers 503 "timeout" before gunicorn kills its worker.
    "portal.middleware.RequestDeadlineMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.ApiBodyLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Says "queued, will run when the broker is back" when a committed write's job could not
    # be sent (portal.middleware.DeferredJobsMiddleware).
    "portal.middleware.DeferredJobsMiddleware",
    # After sign-in and messages, so a refused path gets the portal's own 404 page.
    "portal.middleware.InputCharactersMiddleware",
    # A page's empty 405 (a form's address opened or reloaded) becomes the portal's 405 page.
    "portal.middleware.MethodNotAllowedPageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # django-htmx's request.htmx, false for htmx's history restore (which wants the whole page)
    "portal.middleware.HtmxMiddleware",
    "portal.middleware.LoginRequiredMiddleware",
    # Last before the metrics: turns a sign-in lockout into portal.throttling.lockout_response.
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pools.tenancy.context_processors.roles",
            ],
        },
    }
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'portal-demo.sqlite3'}")
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
if DATABASES["default"].get("ENGINE") == "django.db.backends.postgresql":
    # No JIT: it compiles any plan whose estimated cost passes jit_above_cost (100,000), and the
    # planner guesses 100 rows for every jsonb_to_recordset/unnest call, so the shape check's
    # 60 ms query spent 1.1 s compiling (issue #20). Short OLTP queries never repay it.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
    if env.bool("DB_SERVER_SIDE_BINDING", default=False):
        # Parameters bound by the server, and a statement run DB_PREPARE_THRESHOLD times on one
        # connection prepared there (planned once): issue #29 item 7 measured it.
        DATABASES["default"]["OPTIONS"].update(
            server_side_binding=True,
            prepare_threshold=env.int("DB_PREPARE_THRESHOLD", default=5),
        )
elif DATABASES["default"].get("ENGINE") == "django.db.backends.sqlite3":
    # The demo database under concurrent writes: every transaction takes SQLite's write lock
    # when it begins (IMMEDIATE), so two approvals queue instead of one failing with "database
    # is locked" when its read lock cannot be upgraded; a writer waits up to SQLITE_TIMEOUT_S
    # (seconds) for the lock. WAL lets readers carry on while one transaction writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": env.float("SQLITE_TIMEOUT_S", default=20.0),
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

# Throttle counters, sign-in lockouts and anything else cached are shared by every process:
# Redis when CACHE_URL is set (production), one process's memory otherwise (the demo, tests).
CACHE_URL = env.str("CACHE_URL", default="")
# A Redis that does not answer falls back to this process's memory for a while (logged), so
# sign-in, throttles and lockouts keep working per process (portal.cache).
CACHES = {
    "default": (
        {
            "BACKEND": "portal.cache.RedisCacheWithLocalFallback",
            "LOCATION": CACHE_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
        }
        if CACHE_URL.startswith(("redis://", "rediss://", "unix://"))
        else env.cache_url_config(CACHE_URL or "locmemcache://")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Single sign-on (OpenID Connect), off unless OIDC_RP_CLIENT_ID is set. Users are matched or
# created by e-mail; staff (pool admin) rights stay a decision made in the portal's admin.
OIDC_ENABLED = bool(env.str("OIDC_RP_CLIENT_ID", default=""))
# django-axes first: it refuses a locked-out client before any backend checks a password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
if OIDC_ENABLED:
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.insert(1, "mozilla_django_oidc.auth.OIDCAuthenticationBackend")
    OIDC_RP_CLIENT_ID = env.str("OIDC_RP_CLIENT_ID")
    OIDC_RP_CLIENT_SECRET = env.str("OIDC_RP_CLIENT_SECRET", default="")
    OIDC_RP_SIGN_ALGO = env.str("OIDC_RP_SIGN_ALGO", default="RS256")
    OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pools:landing"  # by role: pool admins to Fleet, members to My teams
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# Security: secure defaults when DEBUG is off; `manage.py check --deploy` is clean with them.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
# Probes answer over plain HTTP inside the cluster/compose network. Django matches these against
# the path without its leading slash (SecurityMiddleware reads SECURE_REDIRECT_EXEMPT).
# /metrics too: Prometheus (the production ServiceMonitor) scrapes the pods over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp; Django 5.2 has none of its own, 6.0 will): scripts only
# from the portal's own static files, and inline ones only with the nonce drawn for the page
# (``<script nonce="{{ request.csp_nonce }}">``); no inline event handlers (static/js/portal.js
# reads data-confirm / data-autosubmit instead). Inline style attributes stay allowed: the
# templates use them for layout, and htmx adds its indicator style.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# HSTS preload is a commitment to browser vendors that a site makes on purpose
# (SECURE_HSTS_PRELOAD=1), so its absence is not a deployment warning.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # SQLite has no NULLS NOT DISTINCT: the two such constraints are kept by their writers
    # there (billing.budgets.services._save checks the scope; pools.calibration rebuilds its
    # records from a dict keyed by the constraint's fields), so the demo's log stays quiet.
    SILENCED_SYSTEM_CHECKS.append("models.W047")
    # SQLite has no covering indexes: the holding allocations' partial indexes are built there
    # without their INCLUDE columns (only PostgreSQL's plans need them), so no warning either.
    SILENCED_SYSTEM_CHECKS.append("models.W040")

# Seconds a request may run before it is stopped with a 503 (code "timeout"); keep it a few
# seconds under gunicorn's --timeout (30 s by default, as the image and compose run it; the
# Kubernetes ConfigMap sets --timeout 60 and REQUEST_TIMEOUT_S 55). 0 turns it off.
REQUEST_TIMEOUT_S = env.float("REQUEST_TIMEOUT_S", default=25.0)

# Uploads: inventory files are read in memory up to this size; larger ones get a clear error.
INVENTORY_UPLOAD_MAX_BYTES = env.int("INVENTORY_UPLOAD_MAX_BYTES", default=20 * 1024 * 1024)
# Inventory files larger than this (bytes) are imported by a Celery task with progress, not in
# the request (pools/inventory/services/uploads.py).
INVENTORY_ASYNC_IMPORT_BYTES = env.int("INVENTORY_ASYNC_IMPORT_BYTES", default=1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes "no or wrong credentials" a 401 (DRF
    # answers 403 when the first class is the session's, which has none); a browser without an
    # Authorization header still signs in by its session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's three, the JSON one refusing a body nested past 64 levels (a 400, not a 500)
    "DEFAULT_PARSER_CLASSES": [
        "portal.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "portal.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "portal.api.StrictFilterBackend",  # django-filter's, refusing unreadable booleans
    ],
    # drf-spectacular's, with every operation's error answers documented (portal.openapi)
    "DEFAULT_SCHEMA_CLASS": "portal.openapi.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    "DEFAULT_THROTTLE_RATES": {
        "token": env.str("TOKEN_THROTTLE_RATE", default="20/minute"),
        "login": env.str("LOGIN_THROTTLE_RATE", default="30/minute"),  # portal.throttling
        # a team's secret calendar feed, per client address (pools/calendar/views.py)
        "calendar_feed": env.str("CALENDAR_FEED_THROTTLE_RATE", default="60/minute"),
    },
    # Trusted reverse proxies in front of the portal (ingress, load balancer); see
    # portal/throttling.py. 0: X-Forwarded-For is ignored and REMOTE_ADDR is the client.
    "NUM_PROXIES": env.int("NUM_PROXIES", default=0),
}

# API tokens (django-rest-knox, pools.access.models.ApiToken): one per client, stored as a
# SHA-512 digest, sent as "Authorization: Token <token>", ending API_TOKEN_TTL_DAYS after they
# are made (90 by default: the CIS AWS Foundations Benchmark has access keys rotated every 90
# days or less).
KNOX_TOKEN_MODEL = "pools.ApiToken"
# knox's own migrations create its AuthToken table even when the model is swapped out (its
# CreateModel is not marked swappable); that unused table's key to auth_user then blocks the
# TRUNCATE that empties test databases. Without migrations, no table is made for a swapped model.
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env.int("API_TOKEN_TTL_DAYS", default=90)),
    "AUTH_HEADER_PREFIX": "Token",
}

# Sign-in lockout (django-axes), for the login page, the admin and the token endpoint: after
# AXES_FAILURE_LIMIT failures for one username from one client address, that pair is refused
# for AXES_COOLOFF_TIME; the same user from another address, and other users, are not. Counters
# live in the shared cache (no database rows).
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "portal.throttling.client_ip"
AXES_LOCKOUT_CALLABLE = "portal.throttling.lockout_response"
AXES_VERBOSE = False
if (DEBUG or DEMO) and not CACHE_URL:
    # The demo is one process, so its in-memory counters are the whole truth; in production
    # (DEBUG off, no PORTAL_DEMO) axes.W001 stays a warning until CACHE_URL names a shared cache.
    SILENCED_SYSTEM_CHECKS.append("axes.W001")
FILTERS_EMPTY_CHOICE_LABEL = "Any"

SPECTACULAR_SETTINGS = {
    "TITLE": "gpu-pool-portal API",
    "DESCRIPTION": "Inventory, pools, allocations, sizing and chargeback of a pooled GPU fleet. "
    "[← Back to the portal](/) · errors are JSON with a machine-readable `code`.",
    "VERSION": "1.0.0",
    # one tag per resource (gpus, nodes, requests, ...): the path segment after /api/v1/
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Node.last_source, InventoryImport.source and the upload's source share one choice set.
    "ENUM_NAME_OVERRIDES": {
        "InventorySourceEnum": "pools.common.choices.InventorySource",
        "EstimateStatusEnum": "pools.common.choices.EstimateStatus",
        "NodeStateEnum": "pools.common.choices.NodeState",
        "IdleFindingStateEnum": "pools.common.choices.IdleFindingState",
        "RequestKindEnum": "pools.common.choices.RequestKind",
        "AllocationStatusEnum": "pools.common.choices.AllocationStatus",
        "ClusterKindEnum": "pools.clusters.models.CLUSTER_KIND_CHOICES",
    },
}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
# The queue every task goes to: a name of its own lets several portals (or test runs) share one
# Redis database.
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="celery")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The longest a task may run (seconds; hard limit, the worker kills it), and 30 s before it the
# soft limit (SoftTimeLimitExceeded raised inside the task: a sizing estimate is marked failed
# with the reason, other tasks fail with it in the worker's log). The longest tasks are the
# usage imports and the idle scan, whose Prometheus queries each stop at PROMETHEUS_TIMEOUT_S.
TASK_TIME_LIMIT_S = env.int("TASK_TIME_LIMIT_S", default=15 * 60)
CELERY_TASK_TIME_LIMIT = TASK_TIME_LIMIT_S
CELERY_TASK_SOFT_TIME_LIMIT = max(TASK_TIME_LIMIT_S - 30, 1)
# Redis hands an unacknowledged message to another worker after the visibility timeout (kombu's
# default: 1 hour), which is how the task of a hard-killed worker comes back (acks_late). It must
# outlast the longest task (else a running task is delivered twice) and the longest retry
# countdown (pools.jobs.retry_countdown: 600 s; a message waiting for its ETA is unacknowledged
# too), plus a minute so a task stopped at its limit is acknowledged first.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": max(TASK_TIME_LIMIT_S, 600) + 60,
    "socket_connect_timeout": 2,
}
CELERY_BEAT_SCHEDULE = {
    # Jobs the broker could not take when they were queued (pools.jobs.outbox).
    "outbox-drain": {"task": "pools.jobs.tasks.outbox_drain_task", "schedule": 60},
    # Estimates whose job was lost (pending or running longer than TASK_TIME_LIMIT_S).
    "sizing-requeue-stranded": {
        "task": "pools.sizing.tasks.sizing_requeue_stranded_task",
        "schedule": 5 * 60,
    },
    "scheduler-reconcile": {"task": "pools.capacity.tasks.reconcile_task", "schedule": 10 * 60},
    # Recurring reservations: quota up within the 15-minute lead of an occurrence, down after.
    "recurring-sync": {"task": "pools.recurring.tasks.recurring_sync_task", "schedule": 5 * 60},
    # Maintenance windows: Slurm MAINT reservations made, and deleted once cancelled.
    "maintenance-sync": {
        "task": "pools.maintenance.tasks.maintenance_sync_task",
        "schedule": 5 * 60,
    },
    # Temporary overrides: expired at their date, the team's caps / quota / QOS put back.
    "override-expire": {"task": "pools.overrides.tasks.override_expire_task", "schedule": 5 * 60},
    # Each cluster's connection checked in its own task (pools.clusters): a down cluster makes
    # its pools read-only until a check finds it answering again.
    "clusters-check": {"task": "pools.clusters.tasks.clusters_check_task", "schedule": 5 * 60},
    "allocation-lifecycle": {
        "task": "pools.capacity.tasks.allocation_lifecycle_task",
        "schedule": 5 * 60,
    },
    "idle-scan": {"task": "pools.reclamation.tasks.idle_scan_task", "schedule": 5 * 60},
    # The dashboard's stranded-capacity snapshot (pools.dashboards.stranded.SNAPSHOT_EVERY).
    "stranded-snapshot": {
        "task": "pools.dashboards.tasks.stranded_snapshot_task",
        "schedule": 10 * 60,
    },
    # The dashboard's utilisation from Prometheus, while someone looks at it
    # (pools.dashboards.utilisation_store.REFRESH_EVERY).
    "dashboard-utilisation": {
        "task": "pools.dashboards.tasks.utilisation_refresh_task",
        "schedule": 2 * 60,
    },
    # The elastic loop judges every minute (its rules count minutes: 5 up, 30 down).
    "elastic-scan": {"task": "pools.elastic.tasks.elastic_scan_task", "schedule": 60},
    # Waiting work: read every minute, only while someone looks (pools.waiting.services).
    "pending-work-refresh": {
        "task": "pools.waiting.tasks.pending_work_refresh_task",
        "schedule": 60,
    },
    # Serving signals: one rollup per 5-minute bucket, compacted hourly (pools.serving).
    "serving-rollup": {"task": "pools.serving.tasks.serving_rollup_task", "schedule": 5 * 60},
    "serving-compact": {
        "task": "pools.serving.tasks.serving_compact_task",
        "schedule": crontab(minute=17),
    },
    # Hourly: measured against sized, from the serving rollups (pools.calibration).
    "calibration-refresh": {
        "task": "pools.calibration.tasks.calibration_refresh_task",
        "schedule": crontab(minute=23),
    },
    # The advisor judges every running allocation after each rollup (pools.advisor), and
    # sends the weekly digest to the managers who asked (daily check, once a week each).
    "advisor-pass": {"task": "pools.advisor.tasks.advisor_pass_task", "schedule": 5 * 60},
    "advisor-digest": {
        "task": "pools.advisor.tasks.advisor_digest_task",
        "schedule": crontab(hour=6, minute=53),
    },
    # Daily: agent calls past TOKENFLOW_CALL_RETENTION_DAYS go; their tasks' totals stay.
    "tokenflow-prune": {
        "task": "pools.tokenflow.tasks.tokenflow_prune_task",
        "schedule": crontab(hour=3, minute=41),
    },
    # Hourly: pre-scale plans for the next two hours from four weeks of token rates.
    "elastic-forecast": {"task": "pools.elastic.tasks.elastic_forecast_task", "schedule": 3600},
    # Hourly; the task acts only on the 1st in BILLING_TIME_ZONE and is idempotent.
    "statements-close-month": {
        "task": "billing.tasks.statements_close_month_task",
        "schedule": crontab(minute=7),
    },
    # Hourly; records are keyed by billing day, re-importing is harmless.
    "usage-import-prometheus": {
        "task": "billing.tasks.usage_import_prometheus_task",
        "schedule": crontab(minute=37),
    },
    # Hourly; storage / egress of the months of the last 48 h from Prometheus, one record per
    # charge, team and month, replaced on each run (billing.services.extra_charges_prometheus).
    "extra-charges-prometheus": {
        "task": "billing.tasks.extra_charges_prometheus_task",
        "schedule": crontab(minute=39),
    },
    # Hourly, after the usage imports; each threshold is sent once per period.
    "budget-alerts": {"task": "billing.tasks.budget_alerts_task", "schedule": crontab(minute=47)},
    "budget-slurm-minutes": {
        "task": "billing.tasks.budget_minutes_sync_task",
        "schedule": crontab(minute=52),
    },
}
BILLING_TIME_ZONE = env.str("BILLING_TIME_ZONE", default="UTC")
# Who runs the pool, as FOCUS exports name it (ProviderName, PublisherName, InvoiceIssuerName).
FOCUS_PROVIDER_NAME = env.str("FOCUS_PROVIDER_NAME", default="GPU pool")
BILLING_CURRENCY = env.str("BILLING_CURRENCY", default="EUR")
# The budget check submission and approval ask (pools/capacity/budget_gate.py); "" turns
# budgets off. A dotted path so pools need not import billing.
BUDGET_CHECK = env.str("BUDGET_CHECK", default="billing.budgets.enforcement.budget_check")
# The same check of many requests at once (the approval queue judges its page as of now).
BUDGET_CHECK_MANY = env.str(
    "BUDGET_CHECK_MANY", default="billing.budgets.enforcement.budget_checks"
)
ALLOCATION_EXPIRY_WARNING_DAYS = env.int("ALLOCATION_EXPIRY_WARNING_DAYS", default=3)
# Run after an inventory import changed nodes: the windows it left holding more cards than
# usable. A dotted path because the inventory sits below capacity and imports none of it.
INVENTORY_OVERCOMMIT_CHECK = "pools.capacity.overcommit.overcommitted_windows"
# Prometheus with dcgm-exporter metrics for the idle scan; empty: the scan reports it and stops.
PROMETHEUS_URL = env.str("PROMETHEUS_URL", default="")
PROMETHEUS_TIMEOUT_S = env.float("PROMETHEUS_TIMEOUT_S", default=30.0)
# gzip-compressed answers from Prometheus: worth their CPU over a slow link only (the idle scan
# reads ~100 MiB of JSON at 100,800 GPUs; scheduler_adapters.prometheus.PrometheusAdapter)
PROMETHEUS_COMPRESS = env.bool("PROMETHEUS_COMPRESS", default=False)
# The capacity dashboard's utilisation task (pools.dashboards.utilisation_store): a short limit
# per query, so a hung Prometheus delays the next reading by seconds, never a page.
PROMETHEUS_DASHBOARD_TIMEOUT_S = env.float("PROMETHEUS_DASHBOARD_TIMEOUT_S", default=5.0)
# Storage (GB-months) and egress (GB) charges per team from Prometheus (issue 35): PromQL of
# bytes held per namespace and a selector of byte counters per namespace; "" reads that charge
# from the CSV import only. Examples and units: billing/services/extra_charges_prometheus.py.
EXTRA_CHARGES_STORAGE_PROMQL = env.str("EXTRA_CHARGES_STORAGE_PROMQL", default="")
EXTRA_CHARGES_EGRESS_PROMQL = env.str("EXTRA_CHARGES_EGRESS_PROMQL", default="")
EXTRA_CHARGES_STEP_S = env.int("EXTRA_CHARGES_STEP_S", default=300)
# Serving rollups (pools.serving): 5-minute rows kept this many days, then hourly rows this many
# months; a card is busy in a bucket when its mean utilisation is at or above SERVING_BUSY_PCT.
SERVING_ROLLUP_5M_DAYS = env.int("SERVING_ROLLUP_5M_DAYS", default=35)
SERVING_ROLLUP_HOURLY_MONTHS = env.int("SERVING_ROLLUP_HOURLY_MONTHS", default=13)
SERVING_BUSY_PCT = env.float("SERVING_BUSY_PCT", default=30.0)
# The cards an elastic allocation held over time (its scale events), which the rollup stores as
# cards held; a dotted path because pools.elastic is pools.serving's peer.
SERVING_HELD_TIMELINES = "pools.elastic.selectors.held_timelines"
# The advisor (pools.advisor): its rules read this many hours of 5-minute rollups, the
# framebuffer-decay rule this many days; ADVISOR_THRESHOLDS (JSON object) overrides the rules'
# thresholds by name (pools.advisor.rules.Thresholds: each with its source in the seeds).
ADVISOR_WINDOW_HOURS = env.int("ADVISOR_WINDOW_HOURS", default=24)
ADVISOR_DECAY_DAYS = env.int("ADVISOR_DECAY_DAYS", default=7)
ADVISOR_THRESHOLDS = env.json("ADVISOR_THRESHOLDS", default={})
# Token flow per agent task (pools.tokenflow): per-call rows kept this many days (each task's
# totals are kept for good); where a gateway record names its task (dotted JSON paths, tried in
# order, then a logged request header) and the call's outcome. Defaults and their sources:
# pools/tokenflow/extract.py.
TOKENFLOW_CALL_RETENTION_DAYS = env.int("TOKENFLOW_CALL_RETENTION_DAYS", default=35)
TOKENFLOW_TASK_ID_PATHS = tuple(
    env.list("TOKENFLOW_TASK_ID_PATHS", default=list(DEFAULT_TASK_ID_PATHS))
)
TOKENFLOW_TASK_ID_HEADER = env.str("TOKENFLOW_TASK_ID_HEADER", default=DEFAULT_TASK_ID_HEADER)
TOKENFLOW_OUTCOME_PATHS = tuple(
    env.list("TOKENFLOW_OUTCOME_PATHS", default=list(DEFAULT_OUTCOME_PATHS))
)

# Scheduler connections (scheduler_adapters.registry keys). Without one, allocations of that
# scheduler's pools are reserved in the portal only (the demo).
# The sizing page's prices: the rate card's reserved card-hour rate in force now (billing hands it
# to pools by this name; pools does not import billing).
SIZING_CARD_HOUR_PRICES = "billing.sizing_prices.reserved_card_hour_prices"
# My teams' money this month (cost so far and forecast), priced by billing's statement path.
TEAM_COSTS_SO_FAR = "billing.dashboards.costs.teams_cost_so_far"
# An allocation's reserved cost so far (its page and the API), priced the same way.
ALLOCATION_COSTS_SO_FAR = "billing.dashboards.costs.allocations_cost_so_far"
# The cards an allocation held over time after a reclamation shrink, end or undo (the rule the
# reservation import charges by); a dotted path because pools.reclamation sits above
# pools.capacity, whose API counts an allocation's window card-hours with it.
ALLOCATION_CARD_PIECES = "pools.reclamation.card_timeline.allocations_card_pieces"
# The same for the allocations a reclamation changed after an instant: the past hours of the
# timeline, the admin dashboard's plan and the capacity calendar count the cards held then.
ALLOCATION_CARD_PIECES_SINCE = "pools.reclamation.card_timeline.card_pieces_changed_since"
# What elastic scale decisions added or released, and the period's burst, priced as burst lines.
ELASTIC_SCALE_COSTS = "billing.elastic_costs.elastic_scale_costs"
# Issue 35: a what-if's burst priced with and without the burst pool (pools do not import billing).
ELASTIC_BURST_WHATIF_MONEY = "billing.elastic_costs.burst_whatif_money"
# Issue 35: each burst pool's card-hour prices on the rate card in force (the opt-in page).
ELASTIC_BURST_POOL_PRICES = "billing.elastic_costs.burst_pool_prices"
# make demo's clock accrues this month's usage with it on every tick, as beat's hourly usage
# import would (pools do not import billing); blank: the clock imports no usage.
DEMO_CLOCK_USAGE = "billing.demo.demo_usage_accrue"

SCHEDULERS = {}
if env.str("SLURM_REST_URL", default=""):
    SCHEDULERS["slurm"] = {
        "BACKEND": "slurm",
        "URL": env.str("SLURM_REST_URL"),
        "USER": env.str("SLURM_ADMIN_USER", default="portal"),
        "CLUSTER": env.str("SLURM_CLUSTER", default="portal"),
        "JWT_KEY_PATH": env.str("SLURM_JWT_KEY_PATH", default="") or None,
        "TOKEN": env.str("SLURM_TOKEN", default="") or None,
        "API_VERSION": env.str("SLURM_API_VERSION", default="") or None,
        "TIME_ZONE": env.str("SLURM_TIME_ZONE", default="UTC"),
    }
    SCHEDULERS["slurm"] = {k: v for k, v in SCHEDULERS["slurm"].items() if v is not None}
# Slurm reservations of recurring reservations are named ``<prefix>-recur-<id>``: a second
# portal (a staging copy, a test run) on the same cluster takes another prefix.
SLURM_RESERVATION_PREFIX = env.str("SLURM_RESERVATION_PREFIX", default="portal")
# KUBERNETES_IN_CLUSTER=1: manage the cluster the portal runs in, as its pods' ServiceAccount
# (deploy/kubernetes/base/rbac.yaml), when no kubeconfig is given.
if (
    env.str("KUBERNETES_KUBECONFIG", default="")
    or env.str("KUBERNETES_DRY_RUN_DIR", default="")
    or env.bool("KUBERNETES_IN_CLUSTER", default=False)
):
    SCHEDULERS["kubernetes"] = {
        "BACKEND": "kubernetes",
        "KUBECONFIG": env.str("KUBERNETES_KUBECONFIG", default=""),
        "KUEUE": env.bool("KUBERNETES_KUEUE", default=False),
        # taint GPU nodes by card class, tolerations for the teams (issue #36)
        "CARD_CLASS_TAINTS": env.bool("KUBERNETES_CARD_CLASS_TAINTS", default=False),
        "DRY_RUN": not (
            env.str("KUBERNETES_KUBECONFIG", default="")
            or env.bool("KUBERNETES_IN_CLUSTER", default=False)
        ),
        "DRY_RUN_DIR": env.str("KUBERNETES_DRY_RUN_DIR", default=""),
    }
    SCHEDULERS["kubernetes"] = {k: v for k, v in SCHEDULERS["kubernetes"].items() if v != ""}

EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND",
    default="portal.mail.SubjectOnlyEmailBackend"
    if DEMO
    else "django.core.mail.backends.console.EmailBackend",
)

# Django logs a 403 or 400 it answers from an exception (a member opening a pool-admin page, a
# page number that is not a number) with the exception's traceback; a refusal is one line.
# A logger's filters see only the records made on it, so each django.security logger Django
# writes a SuspiciousOperation to is named.
REFUSAL_LOGGERS = ("django.request",) + tuple(
    f"django.security.{name}"
    for name in (
        "SuspiciousOperation", "DisallowedHost", "DisallowedRedirect", "InvalidSessionKey",
        "RequestDataTooBig", "SuspiciousFileOperation", "SuspiciousMultipartForm",
        "SuspiciousSession", "TooManyFieldsSent", "TooManyFilesSent",
    )
)  # fmt: skip
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"refusal": {"()": "portal.log_filters.RefusalWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {name: {"filters": ["refusal"]} for name in REFUSAL_LOGGERS},
}
if DEMO:
    # The demo runs tasks eagerly with no broker: Celery's "Task ... succeeded in 0.002s" line per
    # task and kombu's "No hostname was supplied" (there is no broker host to supply) say nothing
    # to a person trying the portal. Failures still show (WARNING and above).
    LOGGING["loggers"] |= {
        "celery.app.trace": {"level": "WARNING"},
        "kombu.connection": {"level": "ERROR"},
    }
    # The demo's log lines (an e-mail "sent", a failed task) go where its commands write their
    # own (stdout), in the order they happened: on stderr they reached a terminal or a log file
    # apart from, and out of step with, the command's lines ("21 draft statementse-mail to …"
    # where a reader joined the two streams).
    LOGGING["handlers"]["console"]["stream"] = "ext://sys.stdout"
