#!/usr/bin/env bash
# A real single-machine Slurm 22.05 for the integration tests, from Debian's packages.
#
#   scripts/services/slurm.sh [start]   install what is missing, start what is not running, wait
#                                       until slurmrestd answers, write the env file (idempotent;
#                                       about 1 s when everything already runs)
#   scripts/services/slurm.sh stop      cancel jobs, stop the daemons this script started
#   scripts/services/slurm.sh status    exit 0 when slurmrestd answers, 1 otherwise (any user)
#   scripts/services/slurm.sh env       print the env file's path
#
# What runs (no systemd; every daemon is found again through its pid file, never by name):
#   munged -> slurmdbd (on the machine's MariaDB at 127.0.0.1:3306, database slurm_acct_db)
#   -> slurmctld -> three slurmd on 127.0.0.1 (gpu-a100-01: gpu:a100:4 on port 17001,
#   gpu-4090-01: gpu:rtx4090:2 on port 17002, gpu-h100-01: gpu:h100:8 on port 17003, a DGX
#   H100's eight cards for the whole-node 1 x 8 shape; the "devices" are symlinks to /dev/null because
#   22.05 drops GPUs without File=) -> slurmrestd with JWT on 127.0.0.1:6820, as user slurmrestd
#   (it refuses to run as root). Cluster "portal", one partition "gpu". slurmdbd is reached at
#   127.0.0.22, a loopback address whose route ACKs at once (see "slurmdbd's address" below).
#
# Tests read $SLURM_TEST_ROOT/slurm-test.env: SLURMRESTD_URL, SLURM_API_VERSION, SLURM_CLUSTER,
# SLURM_PARTITION, SLURM_JWT_KEY (HS256 key path, root/slurm only), SLURM_ADMIN_USER (an
# AdminLevel=Administrator slurmdb user), SLURM_TEST_USERS (unix users that may run jobs) and
# SLURM_SCONTROL=1 (this machine's scontrol reaches the cluster: reservations are on).
# Tokens are not written: whoever can read the key mints them (see scheduler_adapters.slurm.transport).
#
# Knobs: SLURM_TEST_ROOT (/var/lib/slurm-test), SLURM_TEST_REST_PORT (6820),
# SLURM_TEST_DBD_ADDR (127.0.0.22: any 127.x address no other service uses),
# SLURM_TEST_MYSQL_HOST/PORT (127.0.0.1/3306, user root without password),
# SLURM_TEST_USERS ("alice bob"). Pitfalls behind each choice: ../shared/research/slurm/NOTES.md.
set -euo pipefail

T0=$SECONDS
TAG=slurm.sh
ACTION="${1:-start}"
ROOT="${SLURM_TEST_ROOT:-/var/lib/slurm-test}"
CONF_DIR=/etc/slurm
CLUSTER=portal
PARTITION=gpu
API_VERSION=v0.0.38
REST_PORT="${SLURM_TEST_REST_PORT:-6820}"
DBD_ADDR="${SLURM_TEST_DBD_ADDR:-127.0.0.22}"
MYSQL_HOST="${SLURM_TEST_MYSQL_HOST:-127.0.0.1}"
MYSQL_PORT="${SLURM_TEST_MYSQL_PORT:-3306}"
ADMIN_USER=portal
TEST_USERS="${SLURM_TEST_USERS:-alice bob}"
REST_USER=slurmrestd
JWT_KEY="$CONF_DIR/jwt_hs256.key"
ENV_FILE="$ROOT/slurm-test.env"
HEADER="# Written by gpu-pool-portal scripts/services/slurm.sh; rerun it rather than editing."
# node name : slurmd port : GRES type : cards
NODES=("gpu-a100-01:17001:a100:4" "gpu-4090-01:17002:rtx4090:2" "gpu-h100-01:17003:h100:8")
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd slurmrestd slurm-wlm-jwt-plugin
          slurm-wlm-mysql-plugin mariadb-client curl iproute2)

# shellcheck source=scripts/services/slurm-lib.sh
. "$(dirname "$0")/slurm-lib.sh"
slurm_cmd() { "$@"; }

mysql_root() { mariadb --no-defaults -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$@"; }

rest_answers() { # both halves of the API: slurmctld (ping) and slurmdbd (diag)
    local token side code
    token=$(scontrol token username="$ADMIN_USER" lifespan=60 2>/dev/null) || return 1
    token=${token#SLURM_JWT=}
    for side in "slurm/$API_VERSION/ping" "slurmdb/$API_VERSION/diag"; do
        code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-NAME: $ADMIN_USER" \
            -H "X-SLURM-USER-TOKEN: $token" "http://127.0.0.1:$REST_PORT/$side") || return 1
        [ "$code" = 200 ] || return 1
    done
}

stop_all() {
    running "$ROOT/run/slurmctld.pid" slurmctld && cancel_jobs
    halt "$ROOT/run/slurmrestd.pid" slurmrestd
    for node in "${NODES[@]}"; do halt "$ROOT/run/slurmd-${node%%:*}.pid" slurmd; done
    halt "$ROOT/run/slurmctld.pid" slurmctld
    halt "$ROOT/run/slurmdbd.pid" slurmdbd
    halt "$ROOT/run/munged.pid" munged # present only when this script started munged
}

dispatch_action "$ACTION" "http://127.0.0.1:$REST_PORT/slurm/$API_VERSION/ping"

[ "$(id -u)" -eq 0 ] || die "must run as root (installs packages, starts daemons)"

# --------------------------------------------------------------------------- packages
missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    policy_added=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # maintainer scripts must not start daemons: this script starts them itself
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_added=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
        > /tmp/slurm-sh-apt.log 2>&1 || { tail -n 20 /tmp/slurm-sh-apt.log >&2; \
        [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d; die "apt-get install failed"; }
    [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi
SLURM_RELEASE=$(slurmd -V | awk '{print $2}')
case "$SLURM_RELEASE" in 22.05.*) ;; *) say "warning: built for Slurm 22.05, found $SLURM_RELEASE" ;; esac

# --------------------------------------------------------------------------- users, dirs, keys
id "$REST_USER" >/dev/null 2>&1 || useradd --system --user-group --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin "$REST_USER"
for user in $ADMIN_USER $TEST_USERS; do
    id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
done

install -d -m 0755 "$ROOT" "$ROOT/fakegpu" "$CONF_DIR"
install -d -m 0755 -o slurm -g slurm "$ROOT/run" "$ROOT/log" "$ROOT/spool"
install -d -m 0700 -o slurm -g slurm "$ROOT/ctld"
for node in "${NODES[@]}"; do
    IFS=: read -r name _ gres_type cards <<<"$node"
    install -d -m 0755 "$ROOT/spool/$name"
    for ((i = 0; i < cards; i++)); do ln -sfn /dev/null "$ROOT/fakegpu/$gres_type-$i"; done
done
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
if [ ! -s "$JWT_KEY" ]; then
    head -c 32 /dev/urandom > "$JWT_KEY"
    say "created the HS256 key $JWT_KEY"
fi
chown slurm:slurm "$JWT_KEY"
chmod 0600 "$JWT_KEY"
[ -s "$ROOT/.dbpass" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$ROOT/.dbpass")
DB_PASSWORD=$(cat "$ROOT/.dbpass")

# --------------------------------------------------------------------------- slurmdbd's address
# 22.05 sends each message as two writes, its length and then its body. On the connections kept
# open to slurmdbd (slurmctld's, and each sacctmgr's and each slurmrestd accounting request's,
# several messages each) Nagle's algorithm holds the body until the peer's delayed ACK (40 ms):
# 80-90 ms a message, 0.37 s a `sacctmgr show assoc`, 0.3-0.5 s a slurmdbd call over REST
# (24.11: 0.05 s, 26.05: 0.02 s). So slurmdbd, which listens on every address, is
# reached at a loopback address of its own whose route ACKs at once (quickack). The route's src
# makes it the connections' source address too, so the ACKs both ways are immediate; nothing else
# on the machine uses the address. Without CAP_NET_ADMIN the address still works, only slowly.
if ! ip route replace local "$DBD_ADDR/32" dev lo table local src "$DBD_ADDR" quickack 1; then
    say "warning: cannot route $DBD_ADDR with quickack; slurmdbd calls take ~0.4 s each"
fi

# --------------------------------------------------------------------------- configuration
# 22.05 needs task/none and switch/none named (24.11 has neither)
install_file "$CONF_DIR/slurm.conf" 0644 root:root "$HEADER
$(slurm_conf "$CLUSTER" "$ROOT" 6817 6818 "$DBD_ADDR" 6819 "$JWT_KEY" \
    $'TaskPlugin=task/none\nSwitchType=switch/none\n' "${NODES[@]}")"
install_file "$CONF_DIR/gres.conf" 0644 root:root "$HEADER
$(gres_conf "$ROOT" "${NODES[@]}")"
install_file "$CONF_DIR/slurmdbd.conf" 0600 slurm:slurm "$HEADER
$(slurmdbd_conf "$ROOT" 6819 "$JWT_KEY" "$MYSQL_HOST" "$MYSQL_PORT" slurm "$DB_PASSWORD" slurm_acct_db)"

if [ "$CONFIG_CHANGED" = 1 ]; then
    say "configuration changed: restarting the Slurm daemons that run"
    halt "$ROOT/run/slurmrestd.pid" slurmrestd
    for node in "${NODES[@]}"; do halt "$ROOT/run/slurmd-${node%%:*}.pid" slurmd; done
    halt "$ROOT/run/slurmctld.pid" slurmctld
    halt "$ROOT/run/slurmdbd.pid" slurmdbd
fi

# --------------------------------------------------------------------------- munged
if ! { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }; then
    install -d -m 0755 -o munge -g munge /run/munge
    start-stop-daemon --start --quiet --chuid munge:munge --exec /usr/sbin/munged -- --force
    await "munged" 20 /var/log/munge/munged.log sh -c 'munge -n | unmunge'
    cp /run/munge/munged.pid "$ROOT/run/munged.pid" # marks munged as ours for "stop"
    say "munged started"
fi

# --------------------------------------------------------------------------- slurmdbd on MariaDB
if ! running "$ROOT/run/slurmdbd.pid" slurmdbd; then
    if ! mysql_root -e 'SELECT 1' >/dev/null 2>&1; then
        say "MariaDB does not answer on $MYSQL_HOST:$MYSQL_PORT; trying to start it"
        if ! dpkg-query -W -f='${Status}' mariadb-server 2>/dev/null | grep -q 'install ok installed'; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                mariadb-server > /tmp/slurm-sh-apt.log 2>&1 || die "cannot install mariadb-server"
        fi
        service mariadb start > /dev/null 2>&1 || true
        await "MariaDB on $MYSQL_HOST:$MYSQL_PORT" 60 /var/log/mysql/error.log mysql_root -e 'SELECT 1'
    fi
    db_grant mysql_root slurm_acct_db slurm "$DB_PASSWORD" \
        || die "cannot create the slurm database user in MariaDB ($MYSQL_HOST:$MYSQL_PORT as root)"
    drop_orphan_associations mysql_root slurm_acct_db "$CLUSTER"
    slurmdbd
    await "slurmdbd" 60 "$ROOT/log/slurmdbd.log" sacctmgr -n list cluster
    say "slurmdbd started"
fi
register_accounts "$CLUSTER" "$ADMIN_USER" "$TEST_USERS"

# --------------------------------------------------------------------------- slurmctld, slurmd
if ! running "$ROOT/run/slurmctld.pid" slurmctld; then
    slurmctld
    await "slurmctld" 60 "$ROOT/log/slurmctld.log" sh -c 'scontrol ping | grep -q UP'
    say "slurmctld started"
fi
for node in "${NODES[@]}"; do
    name=${node%%:*}
    if ! running "$ROOT/run/slurmd-$name.pid" slurmd; then
        slurmd -N "$name"
        await "slurmd $name" 30 "$ROOT/log/slurmd-$name.log" running "$ROOT/run/slurmd-$name.pid" slurmd
        say "slurmd $name started"
    fi
done
resume_nodes "$ROOT/log/slurmctld.log" "${NODES[@]}"

# --------------------------------------------------------------------------- slurmrestd
if ! running "$ROOT/run/slurmrestd.pid" slurmrestd; then
    touch "$ROOT/log/slurmrestd.log"
    chown "$REST_USER:$REST_USER" "$ROOT/log/slurmrestd.log"
    # SLURM_JWT=daemon: slurmrestd passes each client's token on instead of using munge
    SLURM_JWT=daemon start-stop-daemon --start --background --make-pidfile \
        --pidfile "$ROOT/run/slurmrestd.pid" --chuid "$REST_USER:$REST_USER" --chdir / \
        --output "$ROOT/log/slurmrestd.log" --exec /usr/sbin/slurmrestd -- \
        -a rest_auth/jwt "127.0.0.1:$REST_PORT"
    say "slurmrestd started on 127.0.0.1:$REST_PORT"
fi
await "slurmrestd" 60 "$ROOT/log/slurmrestd.log" rest_answers

# --------------------------------------------------------------------------- env file for tests
write_env_file "$ENV_FILE" "$HEADER
SLURMRESTD_URL=http://127.0.0.1:$REST_PORT
SLURM_API_VERSION=$API_VERSION
SLURM_CLUSTER=$CLUSTER
SLURM_PARTITION=$PARTITION
SLURM_JWT_KEY=$JWT_KEY
SLURM_ADMIN_USER=$ADMIN_USER
SLURM_TEST_USERS=\"$TEST_USERS\"
SLURM_SCONTROL=1
SLURM_RELEASE=$SLURM_RELEASE"
say "ready: http://127.0.0.1:$REST_PORT (Slurm $SLURM_RELEASE, env file $ENV_FILE)"
