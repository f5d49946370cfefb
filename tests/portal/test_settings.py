"""Settings read from the environment: refuse to start unsafely, and pass ``check --deploy``.

Each case runs in a fresh interpreter with a controlled environment, since settings are read once
per process.
"""

from __future__ import annotations

import os
import re
import secrets
import string
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """Only what Python needs, plus ``extra``: no SECRET_KEY, DEBUG or DATABASE_URL leaks in."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "SYSTEMROOT") if k in os.environ}
    env["PYTHONPATH"] = str(ROOT)
    env["ENV_FILE"] = os.devnull  # a developer's .env must not supply what is under test
    env.update(extra)
    return env


def run(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_debug_off_without_a_secret_key_refuses_to_start(tmp_path):
    code = (
        "import os; os.environ.pop('SECRET_KEY', None); os.environ['DEBUG'] = '0'\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "try:\n"
        "    django.setup()\n"
        "except ImproperlyConfigured as exc:\n"
        "    print('refused:', exc)\n"
        "else:\n"
        "    print('started')\n"
    )

    result = run(["-c", code], clean_env(), tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: SECRET_KEY is not set and DEBUG is off")


def test_debug_on_without_a_secret_key_starts_for_local_development(tmp_path):
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django; django.setup()\n"
        "from django.conf import settings; print(settings.DEBUG, bool(settings.SECRET_KEY))\n"
    )

    result = run(["-c", code], clean_env(DEBUG="1"), tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True"


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    secret = "".join(
        secrets.choice(string.ascii_letters + string.digits + "!@#%^&*(-_=+)") for _ in range(60)
    )
    env = clean_env(
        DEBUG="0",
        SECRET_KEY=secret,
        ALLOWED_HOSTS="portal.example.com",
        DATABASE_URL=f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        DJANGO_SETTINGS_MODULE="portal.settings.base",
        CACHE_URL="redis://127.0.0.1:6379/5",  # not connected to by the checks
    )

    result = run(
        [str(ROOT / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"], env, tmp_path
    )

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "System check identified no issues" in output
    assert "WARNING" not in output and "?: (" not in output


def test_production_defaults_are_secure(tmp_path):
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django; django.setup()\n"
        "from django.conf import settings as s\n"
        "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT,"
        " s.SECURE_HSTS_SECONDS, s.ALLOWED_HOSTS)\n"
    )
    env = clean_env(DEBUG="0", SECRET_KEY="x" * 60, ALLOWED_HOSTS="portal.example.com")

    result = run(["-c", code], env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False True True True 31536000 ['portal.example.com']"


def test_check_deploy_warns_when_lockouts_would_be_counted_per_process(tmp_path):
    env = clean_env(
        DEBUG="0",
        SECRET_KEY="x" * 60,
        ALLOWED_HOSTS="portal.example.com",
        DATABASE_URL=f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        DJANGO_SETTINGS_MODULE="portal.settings.base",
    )

    result = run([str(ROOT / "manage.py"), "check", "--deploy"], env, tmp_path)

    assert "axes.W001" in result.stdout + result.stderr


def test_shared_cache_proxies_and_sqlite_writes_come_from_the_environment(tmp_path):
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django; django.setup()\n"
        "from django.conf import settings as s\n"
        "o = s.DATABASES['default']['OPTIONS']\n"
        "print(s.CACHES['default']['BACKEND'], s.CACHES['default']['LOCATION'],"
        " s.REST_FRAMEWORK['NUM_PROXIES'], o['transaction_mode'], o['timeout'])\n"
    )
    env = clean_env(
        DEBUG="1",
        CACHE_URL="redis://cache:6379/3",
        NUM_PROXIES="2",
        DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
    )

    result = run(["-c", code], env, tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "portal.cache.RedisCacheWithLocalFallback",
        "redis://cache:6379/3",
        "2",
        "IMMEDIATE",
        "20.0",
    ]


def test_without_cache_url_the_cache_is_this_process_and_no_proxy_is_trusted(tmp_path):
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django; django.setup()\n"
        "from django.conf import settings as s\n"
        "print(s.CACHES['default']['BACKEND'], s.REST_FRAMEWORK['NUM_PROXIES'])\n"
    )

    result = run(["-c", code], clean_env(DEBUG="1"), tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.core.cache.backends.locmem.LocMemCache", "0"]


# ``make demo``'s log says what a person trying the portal needs, and production's is unchanged:
# the environment ``make demo`` gives (``DEMO_ENV`` in the Makefile: ``PORTAL_DEMO=1``, DEBUG off,
# one SQLite file, no ``CACHE_URL``) against the same without ``PORTAL_DEMO``.
MAIL = (
    "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
    "import django; django.setup()\n"
    "from django.conf import settings; print(settings.EMAIL_BACKEND)\n"
    "from django.core.mail import EmailMessage\n"
    "m = EmailMessage('GPU statement 2026-10 for NLP: 3.00 EUR', 'BODY-LINE-ONE\\nBODY-LINE-TWO',"
    " to=['bob@example.com', 'carol@example.com'])\n"
    "m.attach('statement-nlp-2026-10.pdf', b'%PDF-1.7 not really', 'application/pdf')\n"
    "print('sent', m.send())\n"
)


def _env(tmp_path, **extra):
    return clean_env(
        DEBUG="0",
        SECRET_KEY="x" * 60,
        DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        DJANGO_SETTINGS_MODULE="portal.settings.base",
        **extra,
    )


def test_the_demo_does_not_warn_about_lockout_counters_it_keeps_in_one_process(tmp_path):
    """The demo is one process, so per-process lockout counters are the whole truth: no
    axes.W001 ("This can leave security holes ...") before each of its commands."""
    result = run([str(ROOT / "manage.py"), "check"], _env(tmp_path, PORTAL_DEMO="1"), tmp_path)

    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "security holes" not in output and "axes.W001" not in output


def test_production_without_a_shared_cache_still_warns(tmp_path):
    result = run([str(ROOT / "manage.py"), "check"], _env(tmp_path), tmp_path)

    assert "axes.W001" in result.stdout + result.stderr


def test_the_demo_logs_one_line_per_email_not_the_message(tmp_path):
    result = run(["-c", MAIL], _env(tmp_path, PORTAL_DEMO="1"), tmp_path)

    assert result.returncode == 0, result.stderr
    # on stdout, in order with the program's own lines, each on its own line
    assert result.stdout.splitlines() == [
        "portal.mail.SubjectOnlyEmailBackend",
        "e-mail to bob@example.com, carol@example.com: GPU statement 2026-10 for NLP: 3.00 EUR"
        " (1 attachment; not sent)",
        "sent 1",
    ]
    assert result.stderr == ""


def test_the_demo_logs_task_failures_not_each_eager_task(tmp_path):
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings.base'\n"
        "import django, logging; django.setup()\n"
        "print(logging.getLogger('celery.app.trace').getEffectiveLevel(),"
        " logging.getLogger('kombu.connection').getEffectiveLevel(),"
        " logging.getLogger('pools').getEffectiveLevel())\n"
    )

    demo = run(["-c", code], _env(tmp_path, PORTAL_DEMO="1"), tmp_path)
    production = run(["-c", code], _env(tmp_path), tmp_path)

    assert demo.stdout.split() == ["30", "40", "20"]  # WARNING, ERROR; the portal's own INFO
    assert production.stdout.split() == ["20", "20", "20"]  # INFO everywhere, as before


def test_production_email_is_unchanged(tmp_path):
    """Without PORTAL_DEMO the default is still Django's console backend (whole message)."""
    result = run(["-c", MAIL], _env(tmp_path), tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "django.core.mail.backends.console.EmailBackend"
    assert "BODY-LINE-ONE" in result.stdout


def test_make_demo_sets_the_demo_flag_and_pip_reports_errors_only():
    """pip's -q once still prints a WARNING per package when pip.conf names index directories that
    do not exist (152 lines on this machine); -q twice prints errors only."""
    makefile = (ROOT / "Makefile").read_text()

    assert re.search(r"^DEMO_ENV := PORTAL_DEMO=1 ", makefile, re.M)
    pip_lines = [line for line in makefile.splitlines() if "pip install" in line]
    assert pip_lines and all("--quiet --quiet" in line for line in pip_lines)
