#!/usr/bin/env bash
# Make sure what the test suite needs is running; start what can be started, fail loudly
# (exit 1, naming it) when something cannot be had. Needed now: PostgreSQL on 127.0.0.1:5432,
# Debian's chromium for the browser tests, the single-machine Slurms of
# scripts/services/slurm-modern.sh (24.11 with slurmrestd on 127.0.0.1:6920, 26.05 on :7020)
# and scripts/services/slurm.sh (22.05 on :6820) for the Slurm integration tests,
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

# Slurm: the scripts are idempotent (about 1 s when everything already runs) and need root to
# install packages and start daemons; without root, an already running cluster is enough.
# 24.11 (slurm-modern.sh, Debian trixie in a chroot) is the one every Slurm integration test
# runs on; the Makefile runs the same tier again on 26.05 (forky, in a second chroot) and on the
# machine's own 22.05 (slurm.sh). 26.05 is ClusterName "forky", 24.11 "portal": the two-cluster
# test registers both in one portal, which refuses two clusters with one ClusterName; a 26.05
# root still running as "portal" is restarted under "forky" by slurm-modern.sh (about 20 s).
slurm_start() { # slurm_start NAME SCRIPT [VAR=value...]
  local name=$1 path
  path="$(dirname "$0")/services/$2"
  shift 2
  if [ "$(id -u)" = 0 ]; then
    if ! env "$@" bash "$path"; then
      say "REQUIRED SERVICE MISSING: Slurm $name (scripts/services/${path##*/} failed; its log directory is named above)"
      fail=1
    fi
  elif ! env "$@" bash "$path" status >/dev/null 2>&1; then
    say "REQUIRED SERVICE MISSING: Slurm $name (not running; start it as root: sudo make services)"
    fail=1
  fi
}
slurm_start 24.11 slurm-modern.sh
slurm_start 26.05 slurm-modern.sh SLURM_MODERN_SUITE=forky SLURM_MODERN_ROOT=/opt/portal-slurm-forky \
  SLURM_MODERN_PORTS=70 SLURM_MODERN_NODE_PORTS=172
slurm_start 22.05 slurm.sh

# Prometheus (Debian's package) on 127.0.0.1:9090 for the idle-scan integration tests; the
# tests start their own backfilled instance through the same script.
if ! bash "$(dirname "$0")/services/prometheus.sh"; then
  say "REQUIRED SERVICE MISSING: Prometheus (scripts/services/prometheus.sh failed; apt-get install prometheus)"
  fail=1
fi

exit "$fail"
