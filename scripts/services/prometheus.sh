#!/usr/bin/env bash
# Debian's Prometheus (2.42, package `prometheus`) on loopback for the integration tests.
# Adapted from ../shared/research/k8s_prom/setup_prometheus.sh.
#
#   prometheus.sh [start]   idempotent: install if missing (root), start on $PROM_PORT unless
#                           something already answers /-/ready there; prints the PID and URL
#   prometheus.sh stop      kill exactly the PID this script recorded in $PROM_DIR
#   prometheus.sh status    exit 0 when /-/ready answers on $PROM_PORT
#
# Env: PROM_PORT (default 9090), PROM_DIR (default /tmp/portal-prometheus: config, pid, log,
#      data), PROM_BACKFILL: an OpenMetrics file (timestamps in SECONDS, ending "# EOF") turned
#      into TSDB blocks with `promtool tsdb create-blocks-from openmetrics` BEFORE start --
#      blocks added to a running Prometheus show up only after ~60 s.
set -euo pipefail
cmd=${1:-start}
PROM_PORT=${PROM_PORT:-9090}
PROM_DIR=${PROM_DIR:-/tmp/portal-prometheus}
URL="http://127.0.0.1:${PROM_PORT}"

ready() { curl -fsS -m 2 "$URL/-/ready" >/dev/null 2>&1; }

case "$cmd" in
  status) ready; exit $? ;;
  stop)
    if [ -f "$PROM_DIR/prometheus.pid" ]; then
      kill "$(cat "$PROM_DIR/prometheus.pid")" 2>/dev/null || true
      rm -f "$PROM_DIR/prometheus.pid"
    fi
    exit 0 ;;
  start) ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # --no-install-recommends keeps prometheus-node-exporter (:9100) out; policy-rc.d in
    # containers stops the packaged service from starting on :9090.
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
          apt-get install -y -qq --no-install-recommends prometheus)) >/dev/null 2>&1 || true
  fi
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "prometheus.sh: Prometheus is not installed (apt-get install --no-install-recommends prometheus)" >&2
    exit 1
  fi
fi

if [ -z "${PROM_BACKFILL:-}" ] && ready; then
  echo "prometheus already ready on $URL"
  exit 0
fi

mkdir -p "$PROM_DIR/data"
if [ -n "${PROM_BACKFILL:-}" ]; then
  promtool tsdb create-blocks-from openmetrics "$PROM_BACKFILL" "$PROM_DIR/data" >/dev/null
fi
cat > "$PROM_DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 15s
scrape_configs: []
YAML
promtool check config "$PROM_DIR/prometheus.yml" >/dev/null

nohup prometheus \
  --config.file="$PROM_DIR/prometheus.yml" \
  --storage.tsdb.path="$PROM_DIR/data" \
  --storage.tsdb.retention.time=3650d \
  --web.listen-address="127.0.0.1:${PROM_PORT}" \
  --log.level=warn >"$PROM_DIR/prometheus.log" 2>&1 &
echo $! > "$PROM_DIR/prometheus.pid"

for i in $(seq 1 100); do
  if ready; then
    echo "prometheus pid $(cat "$PROM_DIR/prometheus.pid") ready on $URL after ~$((i * 100)) ms"
    exit 0
  fi
  sleep 0.1
done
echo "prometheus.sh: Prometheus did not become ready on $URL; log:" >&2
cat "$PROM_DIR/prometheus.log" >&2
exit 1
