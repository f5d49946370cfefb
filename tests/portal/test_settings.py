"""Settings read from the environment: refuse to start unsafely, and pass ``check --deploy``.

Each case runs in a fresh interpreter with a controlled environment, since settings are read once
per process.
"""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys
from pathlib import Path

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
