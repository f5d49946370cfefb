# Production image: gunicorn serving the portal; the same image runs the Celery worker, beat and
# the one-shot migration (docker compose service `migrate`, Helm hook Job).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# WeasyPrint (PDF statements) renders with Pango. Not version-pinned (DL3008): bookworm's
# security updates replace the exact versions, so a pin would break the build within weeks.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 \
    && rm -rf /var/lib/apt/lists/*

# An unprivileged user the processes run as (uid/gid 10001, matched by the chart's
# securityContext); it owns nothing in /app, so the code cannot be rewritten at run time.
RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid portal --no-create-home --home-dir /nonexistent portal

WORKDIR /app
COPY pyproject.toml README.md ./
COPY portal portal
COPY pools pools
COPY billing billing
COPY scheduler_adapters scheduler_adapters
RUN pip install --no-cache-dir .
COPY . .

# Hashed, compressed static files (WhiteNoise CompressedManifestStaticFilesStorage, DEBUG off).
# The key is a placeholder used only by this build step; the running container needs its own.
RUN DEBUG=0 SECRET_KEY=collectstatic-build-step-only DATABASE_URL=sqlite:////tmp/build.sqlite3 \
    python manage.py collectstatic --noinput \
    && rm -f /tmp/build.sqlite3

USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
