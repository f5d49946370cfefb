#!/usr/bin/env bash
# Make sure what the test suite needs is running; start what can be started, fail loudly
# (exit 1, naming it) when something cannot be had. Needed now: PostgreSQL on 127.0.0.1:5432,
# Debian's chromium for the browser tests, the single-machine Slurm 24.11 of
# scripts/services/slurm-modern.sh (slurmrestd on 127.0.0.1:6920) and 22.05 of
# scripts/services/slurm.sh (127.0.0.1:6820) for the Slurm integration tests,
# and Redis on 127.0.0.1:6379 (the Celery broker of the real-worker integration test).
set -u
fail=0

say() { printf '%s\n' "ensure_services: $*" >&2; }

pg_up() { pg_isready -q -h "${PGHOST:-127.0.0.1}" -p "${PGPORT:-5432}" 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1; then
  say "PostgreSQL client tools are missing (apt-get install postgresql)."
  fail=1
elif ! pg_up; then
  say "PostgreSQL is not answering on ${PGHOST:-127.0.0.1}:${PGPORT:-5432}; trying to start it"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for version in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
    done
  fi
  for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
  if pg_up; then say "PostgreSQL started"; else say "REQUIRED SERVICE MISSING: PostgreSQL"; fail=1; fi
fi

redis_up() {
  python3 - <<'PY' 2>/dev/null
import socket
with socket.create_connection(("127.0.0.1", 6379), timeout=2) as s:
    s.sendall(b"PING\r\n")
    raise SystemExit(0 if s.recv(16).startswith(b"+PONG") else 1)
PY
}
if ! redis_up; then
  say "Redis is not answering on 127.0.0.1:6379; trying to start it"
  if command -v redis-server >/dev/null 2>&1; then
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1 || true
  fi
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  if redis_up; then say "Redis started"; else say "REQUIRED SERVICE MISSING: Redis"; fail=1; fi
fi

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium for the browser tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1
  fi
  if ! command -v chromium >/dev/null 2>&1; then
    say "REQUIRED TOOL MISSING: chromium (apt-get install chromium)"; fail=1
  fi
fi

# Slurm: both scripts are idempotent (about 1 s when everything already runs) and need root to
# install packages and start daemons; without root, an already running cluster is enough.
# 24.11 (slurm-modern.sh, in a chroot) is the one every Slurm integration test runs on; 22.05
# (slurm.sh, the machine's own packages) runs the same tier a second time (see the Makefile).
for script in slurm-modern.sh slurm.sh; do
  path="$(dirname "$0")/services/$script"
  if [ "$(id -u)" = 0 ]; then
    if ! bash "$path"; then
      say "REQUIRED SERVICE MISSING: Slurm (scripts/services/$script failed; its log directory is named above)"
      fail=1
    fi
  elif ! bash "$path" status >/dev/null 2>&1; then
    say "REQUIRED SERVICE MISSING: Slurm (not running; start it as root: sudo bash scripts/services/$script)"
    fail=1
  fi
done

# Prometheus (Debian's package) on 127.0.0.1:9090 for the idle-scan integration tests; the
# tests start their own backfilled instance through the same script.
if ! bash "$(dirname "$0")/services/prometheus.sh"; then
  say "REQUIRED SERVICE MISSING: Prometheus (scripts/services/prometheus.sh failed; apt-get install prometheus)"
  fail=1
fi

exit "$fail"
