#!/usr/bin/env bash
# A real single-machine Slurm 24.11 (slurmrestd v0.0.40-v0.0.42) for the integration tests: Debian
# trixie's packages in a debootstrapped chroot, beside the machine's own 22.05 (slurm.sh) and
# sharing nothing with it but MariaDB.
#
#   scripts/services/slurm-modern.sh [start]  build the root when missing (debootstrap + apt inside
#                                             it: about 90 s unloaded, 4 min on a busy machine),
#                                             start what is not running, wait until slurmrestd
#                                             answers, write the env file (idempotent; about 1 s
#                                             when everything runs)
#   scripts/services/slurm-modern.sh stop     cancel jobs, stop the daemons (the root is kept)
#   scripts/services/slurm-modern.sh status   exit 0 when slurmrestd answers, 1 otherwise
#   scripts/services/slurm-modern.sh env      print the env file's path (API version discovered;
#                                             slurm-test-v0.0.41.env beside it pins v0.0.41)
#
# Why a chroot: bookworm (this machine) has only 22.05 and bookworm-backports no Slurm at all;
# installing trixie's 24.11 on the machine would replace the 22.05 the other tier runs on. The
# root shares the network and PID namespaces (daemons talk over 127.0.0.1; the host sees their
# pids, and every pid file is checked to belong to a process inside the root). Its /run is its
# own, so it has its own munged and munge key.
#
#                 22.05 (slurm.sh)            24.11 (this script)
#   ports         6817-6820, slurmd 17001-3   6917-6920, slurmd 17101-3
#   database      slurm_acct_db / slurm       slurm_modern_acct_db / slurm_modern
#   state         /var/lib/slurm-test         ROOT/var/lib/slurm-test
#
# Same cluster layout as slurm.sh: cluster "portal" (26.05: "forky"), partition "gpu", gpu-a100-01 (gpu:a100:4),
# gpu-4090-01 (gpu:rtx4090:2), gpu-h100-01 (gpu:h100:8, a DGX H100's eight cards: the whole-node
# 1 x 8 shape), admin "portal", test users alice and bob (default account sandbox).
# The env file (`env` prints its path) has the keys the integration tier reads, plus
# SLURM_MODERN_ROOT: run the Slurm commands through `chroot` into that root.
#
# Knobs: SLURM_MODERN_ROOT (/opt/portal-slurm-modern), SLURM_MODERN_SUITE (trixie; "forky"
# gives 26.05 with v0.0.42-v0.0.45: use another ROOT and SLURM_MODERN_PORTS=70
# SLURM_MODERN_NODE_PORTS=172 to run it beside 24.11; its database is slurm_<suite>_acct_db and
# its ClusterName the suite's name), SLURM_MODERN_CLUSTER (the ClusterName; a root started under
# another name has its slurmctld state cleared and is restarted under the new one),
# SLURM_MODERN_MIRROR (default: the Debian mirror this machine's apt uses),
# SLURM_TEST_MYSQL_HOST/PORT (127.0.0.1/3306, root without password).
# 24.11 pitfalls behind the choices below: ../shared/research/slurm-modern/NOTES.md.
set -euo pipefail

T0=$SECONDS
TAG=slurm-modern.sh
ACTION="${1:-start}"
ROOT_DIR=$(realpath -m "${SLURM_MODERN_ROOT:-/opt/portal-slurm-modern}")
SUITE="${SLURM_MODERN_SUITE:-trixie}"
STATE=/var/lib/slurm-test           # inside the root
HS="$ROOT_DIR$STATE"                # the same, seen from the machine
CONF_DIR=/etc/slurm                 # inside the root
# ClusterName: "portal" for 24.11, the suite's name for another ("forky" for 26.05), so the two
# running side by side are two clusters to the portal, which refuses two with one ClusterName
if [ "$SUITE" = trixie ]; then CLUSTER=portal; else CLUSTER="$SUITE"; fi
CLUSTER="${SLURM_MODERN_CLUSTER:-$CLUSTER}"
ADMIN_USER=portal
TEST_USERS="alice bob"
REST_USER=slurmrestd
PORTS="${SLURM_MODERN_PORTS:-69}"      # slurmctld ${PORTS}17, slurmd 18, slurmdbd 19, slurmrestd 20
NODE_PORTS="${SLURM_MODERN_NODE_PORTS:-171}"  # the three slurmd: ${NODE_PORTS}01 to ${NODE_PORTS}03
REST_PORT=${PORTS}20
MYSQL_HOST="${SLURM_TEST_MYSQL_HOST:-127.0.0.1}"
MYSQL_PORT="${SLURM_TEST_MYSQL_PORT:-3306}"
if [ "$SUITE" = trixie ]; then DB_NAME=slurm_modern_acct_db; DB_USER=slurm_modern
else DB_NAME="slurm_${SUITE}_acct_db"; DB_USER="slurm_$SUITE"; fi
JWT_KEY="$CONF_DIR/jwt_hs256.key"
ENV_FILE="$HS/slurm-test.env"
HEADER="# Written by gpu-pool-portal scripts/services/slurm-modern.sh; rerun it rather than editing."
NODES=("gpu-a100-01:${NODE_PORTS}01:a100:4" "gpu-4090-01:${NODE_PORTS}02:rtx4090:2"
       "gpu-h100-01:${NODE_PORTS}03:h100:8")
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd slurmrestd slurm-wlm-jwt-plugin
          slurm-wlm-mysql-plugin mariadb-client curl)
# newest first: the version the env file names is the newest this slurmrestd serves
API_CANDIDATES=(v0.0.45 v0.0.44 v0.0.43 v0.0.42 v0.0.41 v0.0.40)

# shellcheck source=scripts/services/slurm-lib.sh
. "$(dirname "$0")/slurm-lib.sh"

# inroot CMD...: CMD inside the root, with a clean environment (none of the machine's SLURM_*)
inroot() {
    chroot "$ROOT_DIR" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 "$@"
}
slurm_cmd() { inroot "$@"; }
mysql_root() { inroot mariadb --no-defaults --skip-ssl -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$@"; }

token() { # token USER LIFESPAN: a JWT from the root's slurmctld
    local t
    t=$(inroot scontrol token username="$1" lifespan="$2" 2>/dev/null) || return 1
    printf '%s\n' "${t#SLURM_JWT=}"
}

served_version() { # the newest data parser this slurmrestd serves (404 = not served)
    local t v code
    t=$(token "$ADMIN_USER" 60) || return 1
    for v in "${API_CANDIDATES[@]}"; do
        code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-TOKEN: $t" \
            "http://127.0.0.1:$REST_PORT/slurm/$v/ping") || true
        [ "$code" = 200 ] && { echo "$v"; return 0; }
    done
    return 1
}

rest_answers() { # both halves of the API: slurmctld (ping) and slurmdbd (diag)
    local t v side code
    [ -x "$ROOT_DIR/usr/bin/scontrol" ] || return 1
    t=$(token "$ADMIN_USER" 60) || return 1
    v=$(served_version) || return 1
    for side in "slurm/$v/ping" "slurmdb/$v/diag"; do
        code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-TOKEN: $t" \
            "http://127.0.0.1:$REST_PORT/$side") || return 1
        [ "$code" = 200 ] || return 1
    done
}

stop_all() {
    running "$HS/run/slurmctld.pid" slurmctld && cancel_jobs
    halt "$HS/run/slurmrestd.pid" slurmrestd
    for node in "${NODES[@]}"; do halt "$HS/run/slurmd-${node%%:*}.pid" slurmd; done
    halt "$HS/run/slurmctld.pid" slurmctld
    halt "$HS/run/slurmdbd.pid" slurmdbd
    halt "$ROOT_DIR/run/munge/munged.pid" munged
    local target
    for target in dev sys proc; do
        if mountpoint -q "$ROOT_DIR/$target"; then umount -l "$ROOT_DIR/$target" || true; fi
    done
}

dispatch_action "$ACTION" "http://127.0.0.1:$REST_PORT/openapi/v3"

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mounts, daemons)"

# --------------------------------------------------------------------------- the root
debian_mirror() { # the archive this machine's apt already uses; the script names no host
    if [ -n "${SLURM_MODERN_MIRROR:-}" ]; then echo "$SLURM_MODERN_MIRROR"; return; fi
    {
        awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' /etc/apt/sources.list.d/*.sources
        awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; break}}' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list
    } 2>/dev/null | grep -E '/debian/?$' | head -n1 || true
}

BASE_MARK="$ROOT_DIR/.portal-slurm-modern-base"
if [ ! -e "$BASE_MARK" ]; then
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no Debian mirror in /etc/apt (set SLURM_MODERN_MIRROR)"
    if [ -n "$(ls -A "$ROOT_DIR" 2>/dev/null)" ]; then
        # a debootstrap that died half-way: start over, unless something is mounted inside
        findmnt -rn -o TARGET | grep -q "^$ROOT_DIR/" && die "$ROOT_DIR is half-built and has mounts"
        case "$ROOT_DIR" in /|/opt|/usr|/var|/var/lib|/etc|/home|/root) die "refusing to clear $ROOT_DIR" ;; esac
        say "clearing the half-built $ROOT_DIR"
        rm -rf --one-file-system "$ROOT_DIR"
    fi
    if ! command -v debootstrap >/dev/null; then
        say "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
            > /tmp/slurm-modern-apt.log 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get \
                 install -y -qq --no-install-recommends debootstrap >> /tmp/slurm-modern-apt.log 2>&1; } \
            || { tail -n 20 /tmp/slurm-modern-apt.log >&2; die "cannot install debootstrap"; }
    fi
    say "debootstrap --variant=minbase $SUITE into $ROOT_DIR"
    mkdir -p "$ROOT_DIR"
    # bookworm's debootstrap has no script for suites newer than trixie; sid's fits testing
    script=()
    [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=(/usr/share/debootstrap/scripts/sid)
    nice -n 19 debootstrap --variant=minbase "$SUITE" "$ROOT_DIR" "$mirror" "${script[@]}" \
        > /tmp/slurm-modern-debootstrap.log 2>&1 \
        || { tail -n 20 /tmp/slurm-modern-debootstrap.log >&2; die "debootstrap failed"; }
    rm -f "$ROOT_DIR/etc/apt/sources.list" "$ROOT_DIR/var/log/bootstrap.log" \
        /tmp/slurm-modern-debootstrap.log
    touch "$BASE_MARK"
fi

for target in proc sys dev; do
    mountpoint -q "$ROOT_DIR/$target" && continue
    case $target in
        proc) mount -t proc proc "$ROOT_DIR/proc" ;;
        *) mount --bind "/$target" "$ROOT_DIR/$target" ;;  # /sys without cgroup submounts
    esac
done

missing=()
for package in "${PACKAGES[@]}"; do
    inroot dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} inside the root"
    printf 'deb %s %s main\n' "$(debian_mirror)" "$SUITE" > "$ROOT_DIR/etc/apt/sources.list"
    # maintainer scripts must not start daemons: this script starts them itself
    printf '#!/bin/sh\nexit 101\n' > "$ROOT_DIR/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT_DIR/usr/sbin/policy-rc.d"
    # a testing suite's Release file expires within days; the machine's mirror may be older
    apt_opts=()
    [ "$SUITE" = trixie ] || apt_opts=(-o Acquire::Check-Valid-Until=false)
    { inroot nice -n 19 apt-get "${apt_opts[@]}" update -qq && inroot env \
        DEBIAN_FRONTEND=noninteractive nice -n 19 apt-get "${apt_opts[@]}" install -y -qq \
        --no-install-recommends "${missing[@]}"; } \
        > /tmp/slurm-modern-apt.log 2>&1 || { tail -n 20 /tmp/slurm-modern-apt.log >&2; \
        die "apt-get install inside the root failed"; }
    inroot apt-get clean
    rm -f "$ROOT_DIR/etc/apt/sources.list" /tmp/slurm-modern-apt.log
    rm -rf "$ROOT_DIR"/var/lib/apt/lists/*
fi
SLURM_RELEASE=$(inroot slurmd -V | awk '{print $2}')
# a minbase root has no /etc/hosts, and without it "localhost" does not resolve
for f in /etc/hosts /etc/resolv.conf; do
    if [ -f "$f" ] && ! cmp -s "$f" "$ROOT_DIR$f"; then cp -fL "$f" "$ROOT_DIR$f"; fi
done

# --------------------------------------------------------------------------- users, dirs, keys
inroot sh -c "id $REST_USER >/dev/null 2>&1 || useradd --system --user-group --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin $REST_USER"
for user in $ADMIN_USER $TEST_USERS; do
    inroot sh -c "id $user >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $user"
done
ids() { inroot id -u "$1"; inroot id -g "$1"; }
read -r -d '' SLURM_UID SLURM_GID < <(ids slurm) || true
read -r -d '' MUNGE_UID MUNGE_GID < <(ids munge) || true
read -r -d '' REST_UID REST_GID < <(ids "$REST_USER") || true

install -d -m 0755 "$HS" "$HS/fakegpu" "$ROOT_DIR$CONF_DIR"
install -d -m 0755 -o "$SLURM_UID" -g "$SLURM_GID" "$HS/run" "$HS/log" "$HS/spool"
install -d -m 0700 -o "$SLURM_UID" -g "$SLURM_GID" "$HS/ctld"
install -d -m 0755 -o "$MUNGE_UID" -g "$MUNGE_GID" "$ROOT_DIR/run/munge"
for node in "${NODES[@]}"; do
    IFS=: read -r name _ gres_type cards <<<"$node"
    install -d -m 0755 "$HS/spool/$name"
    for ((i = 0; i < cards; i++)); do ln -sfn /dev/null "$HS/fakegpu/$gres_type-$i"; done
done
[ -s "$ROOT_DIR/etc/munge/munge.key" ] || inroot mungekey --create --keyfile=/etc/munge/munge.key
chown "$MUNGE_UID:$MUNGE_GID" "$ROOT_DIR/etc/munge/munge.key"
chmod 0600 "$ROOT_DIR/etc/munge/munge.key"
if [ ! -s "$ROOT_DIR$JWT_KEY" ]; then
    head -c 32 /dev/urandom > "$ROOT_DIR$JWT_KEY"
    say "created the HS256 key $ROOT_DIR$JWT_KEY"
fi
chown "$SLURM_UID:$SLURM_GID" "$ROOT_DIR$JWT_KEY"
chmod 0600 "$ROOT_DIR$JWT_KEY"
[ -s "$HS/.dbpass" ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$HS/.dbpass")
DB_PASSWORD=$(cat "$HS/.dbpass")

# --------------------------------------------------------------------------- configuration
# 24.11 has no task/none or switch/none plugin: TaskPlugin and SwitchType stay unset
install_file "$ROOT_DIR$CONF_DIR/slurm.conf" 0644 0:0 "$HEADER
$(slurm_conf "$CLUSTER" "$STATE" "${PORTS}17" "${PORTS}18" localhost "${PORTS}19" "$JWT_KEY" "" \
    "${NODES[@]}")"
install_file "$ROOT_DIR$CONF_DIR/gres.conf" 0644 0:0 "$HEADER
$(gres_conf "$STATE" "${NODES[@]}")"
# 24.11's slurmd sets up a cgroup plugin even with proctrack/linuxproc and fails without
# /sys/fs/cgroup; "disabled" is new in 23.x
install_file "$ROOT_DIR$CONF_DIR/cgroup.conf" 0644 0:0 "$HEADER
CgroupPlugin=disabled"
install_file "$ROOT_DIR$CONF_DIR/slurmdbd.conf" 0600 "$SLURM_UID:$SLURM_GID" "$HEADER
$(slurmdbd_conf "$STATE" "${PORTS}19" "$JWT_KEY" "$MYSQL_HOST" "$MYSQL_PORT" "$DB_USER" "$DB_PASSWORD" "$DB_NAME")"

if [ "$CONFIG_CHANGED" = 1 ]; then
    say "configuration changed: restarting the Slurm daemons that run"
    running "$HS/run/slurmctld.pid" slurmctld && cancel_jobs
    halt "$HS/run/slurmrestd.pid" slurmrestd
    for node in "${NODES[@]}"; do halt "$HS/run/slurmd-${node%%:*}.pid" slurmd; done
    halt "$HS/run/slurmctld.pid" slurmctld
    halt "$HS/run/slurmdbd.pid" slurmdbd
fi
# a root first started under another ClusterName (before 26.05 had its own): slurmctld refuses
# state files of another cluster ("CLUSTER NAME MISMATCH"); its jobs and reservations are
# dropped with them (the old cluster's accounts stay in slurmdbd under the old name)
state_cluster=$(cut -d'|' -f1 "$HS/ctld/clustername" 2>/dev/null || true)
if [ -n "$state_cluster" ] && [ "$state_cluster" != "$CLUSTER" ]; then
    halt "$HS/run/slurmctld.pid" slurmctld
    say "ClusterName changed from $state_cluster to $CLUSTER: clearing slurmctld's state"
    find "$HS/ctld" -mindepth 1 -delete
fi

# --------------------------------------------------------------------------- munged (the root's)
if ! running "$ROOT_DIR/run/munge/munged.pid" munged; then
    # munged daemonizes and writes ROOT/run/munge/munged.pid; start-stop-daemon --exec would
    # match the machine's own munged by its path, so it is not used
    inroot setpriv --reuid="$MUNGE_UID" --regid="$MUNGE_GID" --clear-groups /usr/sbin/munged --force
    await "munged" 20 "$ROOT_DIR/var/log/munge/munged.log" inroot sh -c 'munge -n | unmunge'
    say "munged started"
fi

# --------------------------------------------------------------------------- slurmdbd on MariaDB
if ! running "$HS/run/slurmdbd.pid" slurmdbd; then
    mysql_root -e 'SELECT 1' >/dev/null 2>&1 \
        || die "MariaDB does not answer on $MYSQL_HOST:$MYSQL_PORT (root without password)"
    db_grant mysql_root "$DB_NAME" "$DB_USER" "$DB_PASSWORD" \
        || die "cannot create database $DB_NAME / user $DB_USER in MariaDB"
    drop_orphan_associations mysql_root "$DB_NAME" "$CLUSTER"
    inroot slurmdbd
    await "slurmdbd" 90 "$HS/log/slurmdbd.log" inroot sacctmgr -n list cluster
    say "slurmdbd started"
fi
register_accounts "$CLUSTER" "$ADMIN_USER" "$TEST_USERS"

# --------------------------------------------------------------------------- slurmctld, slurmd
if ! running "$HS/run/slurmctld.pid" slurmctld; then
    inroot slurmctld
    await "slurmctld" 60 "$HS/log/slurmctld.log" inroot sh -c 'scontrol ping | grep -q UP'
    say "slurmctld started"
fi
for node in "${NODES[@]}"; do
    name=${node%%:*}
    if ! running "$HS/run/slurmd-$name.pid" slurmd; then
        inroot slurmd -N "$name"
        await "slurmd $name" 30 "$HS/log/slurmd-$name.log" running "$HS/run/slurmd-$name.pid" slurmd
        say "slurmd $name started"
    fi
done
resume_nodes "$HS/log/slurmctld.log" "${NODES[@]}"

# --------------------------------------------------------------------------- slurmrestd
if ! running "$HS/run/slurmrestd.pid" slurmrestd; then
    touch "$HS/log/slurmrestd.log"
    chown "$REST_UID:$REST_GID" "$HS/log/slurmrestd.log"
    # --pidfile without --exec: inside a chroot --exec would match the machine's slurmrestd.
    # SLURM_JWT=daemon: slurmrestd passes each client's token on instead of using munge.
    inroot SLURM_JWT=daemon start-stop-daemon --start --background --make-pidfile \
        --pidfile "$STATE/run/slurmrestd.pid" --chuid "$REST_USER:$REST_USER" --chdir / \
        --output "$STATE/log/slurmrestd.log" --startas /usr/sbin/slurmrestd -- \
        -a rest_auth/jwt "127.0.0.1:$REST_PORT"
    say "slurmrestd started on 127.0.0.1:$REST_PORT"
fi
await "slurmrestd" 60 "$HS/log/slurmrestd.log" rest_answers

# --------------------------------------------------------------------------- env file for tests
# SLURM_API_VERSION is left empty: the adapter discovers it, as it would on a site's cluster
write_env_file "$ENV_FILE" "$HEADER
SLURMRESTD_URL=http://127.0.0.1:$REST_PORT
SLURM_API_VERSION=
SLURM_CLUSTER=$CLUSTER
SLURM_PARTITION=gpu
SLURM_JWT_KEY=$ROOT_DIR$JWT_KEY
SLURM_ADMIN_USER=$ADMIN_USER
SLURM_TEST_USERS=\"$TEST_USERS\"
SLURM_RELEASE=$SLURM_RELEASE
SLURM_MODERN_ROOT=$ROOT_DIR"
# the same cluster pinned to the older data parser 24.11 serves, so the tier runs on both
if [ "$SUITE" = trixie ]; then
    pinned="$HS/slurm-test-v0.0.41.env"
    sed 's/^SLURM_API_VERSION=$/SLURM_API_VERSION=v0.0.41/' "$ENV_FILE" > "$pinned.tmp"
    chmod 600 "$pinned.tmp"
    if cmp -s "$pinned.tmp" "$pinned"; then rm -f "$pinned.tmp"; else mv -f "$pinned.tmp" "$pinned"; fi
fi
say "ready: http://127.0.0.1:$REST_PORT (Slurm $SLURM_RELEASE, newest API $(served_version), env file $ENV_FILE)"
