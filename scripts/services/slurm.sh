#!/usr/bin/env bash
# A real single-machine Slurm 22.05 for the integration tests, from Debian's packages.
#
#   scripts/services/slurm.sh [start]   install what is missing, start what is not running, wait
#                                       until slurmrestd answers, write the env file (idempotent;
#                                       about 1 s when everything already runs)
#   scripts/services/slurm.sh stop      cancel jobs, stop the daemons this script started
#   scripts/services/slurm.sh status    exit 0 when slurmrestd answers, 1 otherwise (any user)
#
# What runs (no systemd; every daemon is found again through its pid file, never by name):
#   munged -> slurmdbd (on the machine's MariaDB at 127.0.0.1:3306, database slurm_acct_db)
#   -> slurmctld -> two slurmd on 127.0.0.1 (gpu-a100-01: gpu:a100:4 on port 17001,
#   gpu-4090-01: gpu:rtx4090:2 on port 17002; the "devices" are symlinks to /dev/null because
#   22.05 drops GPUs without File=) -> slurmrestd with JWT on 127.0.0.1:6820, as user slurmrestd
#   (it refuses to run as root). Cluster "portal", one partition "gpu".
#
# Tests read $SLURM_TEST_ROOT/slurm-test.env: SLURMRESTD_URL, SLURM_API_VERSION, SLURM_CLUSTER,
# SLURM_PARTITION, SLURM_JWT_KEY (HS256 key path, root/slurm only), SLURM_ADMIN_USER (an
# AdminLevel=Administrator slurmdb user) and SLURM_TEST_USERS (unix users that may run jobs).
# Tokens are not written: whoever can read the key mints them (see scheduler_adapters.slurm.client).
#
# Knobs: SLURM_TEST_ROOT (/var/lib/slurm-test), SLURM_TEST_REST_PORT (6820),
# SLURM_TEST_MYSQL_HOST/PORT (127.0.0.1/3306, user root without password),
# SLURM_TEST_USERS ("alice bob"). Pitfalls behind each choice: ../shared/research/slurm/NOTES.md.
set -euo pipefail

T0=$SECONDS
ACTION="${1:-start}"
ROOT="${SLURM_TEST_ROOT:-/var/lib/slurm-test}"
CONF_DIR=/etc/slurm
CLUSTER=portal
PARTITION=gpu
API_VERSION=v0.0.38
REST_PORT="${SLURM_TEST_REST_PORT:-6820}"
MYSQL_HOST="${SLURM_TEST_MYSQL_HOST:-127.0.0.1}"
MYSQL_PORT="${SLURM_TEST_MYSQL_PORT:-3306}"
ADMIN_USER=portal
TEST_USERS="${SLURM_TEST_USERS:-alice bob}"
REST_USER=slurmrestd
JWT_KEY="$CONF_DIR/jwt_hs256.key"
ENV_FILE="$ROOT/slurm-test.env"
HEADER="# Written by gpu-pool-portal scripts/services/slurm.sh; rerun it rather than editing."
# node name : slurmd port : GRES type : cards
NODES=("gpu-a100-01:17001:a100:4" "gpu-4090-01:17002:rtx4090:2")
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd slurmrestd slurm-wlm-jwt-plugin
          slurm-wlm-mysql-plugin mariadb-client curl)

say() { printf '[slurm.sh %2ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { printf '[slurm.sh] SLURM FAILED TO START: %s\n' "$*" >&2; exit 1; }

# running PIDFILE COMM: the pid in PIDFILE is alive and its /proc comm is COMM
running() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(tr -dc '0-9' < "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# halt PIDFILE COMM: TERM that one pid, wait up to 30 s, then KILL it
halt() {
    local file=$1 comm=$2 pid
    if running "$file" "$comm"; then
        pid=$(tr -dc '0-9' < "$file")
        say "stopping $comm (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 60); do running "$file" "$comm" || break; sleep 0.5; done
        running "$file" "$comm" && { kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; }
    fi
    rm -f "$file"
}

# await WHAT SECONDS LOGFILE CMD...: poll CMD every 0.5 s; on timeout show LOGFILE and die
await() {
    local what=$1 limit=$2 logfile=$3
    shift 3
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            [ -f "$logfile" ] && tail -n 25 "$logfile" >&2
            die "$what did not come up within ${limit}s (log: $logfile)"
        fi
        sleep 0.5
    done
}

# install_file PATH MODE OWNER TEXT: write only when the content differs; sets CONFIG_CHANGED
CONFIG_CHANGED=0
install_file() {
    local path=$1 mode=$2 owner=$3 text=$4 tmp
    tmp=$(mktemp)
    printf '%s\n' "$text" > "$tmp"
    if [ -f "$path" ] && cmp -s "$tmp" "$path"; then
        rm -f "$tmp"
    else
        install -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$tmp" "$path"
        rm -f "$tmp"
        say "wrote $path"
        CONFIG_CHANGED=1
    fi
}

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

node_usable() { # idle, mixed, allocated or completing: not down, drained or invalid
    case "$(sinfo -h -N -n "$1" -o '%t' 2>/dev/null | head -n1)" in
        idle|mix|alloc|comp) return 0 ;;
        *) return 1 ;;
    esac
}

stop_all() {
    if running "$ROOT/run/slurmctld.pid" slurmctld; then
        # cancel first, so that no slurmstepd outlives its slurmd
        local jobs
        jobs=$(squeue -h -o '%A' 2>/dev/null | tr '\n' ' ')
        if [ -n "${jobs// /}" ]; then
            say "cancelling jobs $jobs"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for _ in $(seq 30); do
                [ -z "$(squeue -h -t R,CG -o '%A' 2>/dev/null)" ] && break
                sleep 0.5
            done
        fi
    fi
    halt "$ROOT/run/slurmrestd.pid" slurmrestd
    for node in "${NODES[@]}"; do halt "$ROOT/run/slurmd-${node%%:*}.pid" slurmd; done
    halt "$ROOT/run/slurmctld.pid" slurmctld
    halt "$ROOT/run/slurmdbd.pid" slurmdbd
    halt "$ROOT/run/munged.pid" munged # present only when this script started munged
}

case "$ACTION" in
    start) ;;
    stop)
        [ "$(id -u)" -eq 0 ] || die "stop must run as root"
        stop_all
        say "stopped"
        exit 0
        ;;
    status)
        if [ "$(id -u)" -ne 0 ]; then
            # no token without root; slurmrestd answering 401 to an anonymous ping is enough
            code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' \
                "http://127.0.0.1:$REST_PORT/slurm/$API_VERSION/ping" || true)
            [ "$code" = 401 ] && { say "slurmrestd answers on 127.0.0.1:$REST_PORT"; exit 0; }
        fi
        rest_answers && { say "slurmrestd answers on 127.0.0.1:$REST_PORT"; exit 0; }
        say "slurmrestd does not answer on 127.0.0.1:$REST_PORT"
        exit 1
        ;;
    *) die "unknown action '$ACTION' (start, stop or status)" ;;
esac

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

# --------------------------------------------------------------------------- configuration
node_lines=""
gres_lines=""
accounted_tres="gres/gpu"
for node in "${NODES[@]}"; do
    IFS=: read -r name port gres_type cards <<<"$node"
    node_lines+="NodeName=$name NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:$gres_type:$cards State=UNKNOWN"$'\n'
    gres_lines+="NodeName=$name Name=gpu Type=$gres_type File=$ROOT/fakegpu/$gres_type-[0-$((cards - 1))]"$'\n'
    accounted_tres+=",gres/gpu:$gres_type"
done

install_file "$CONF_DIR/slurm.conf" 0644 root:root "$HEADER
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
CommunicationParameters=NoInAddrAny
StateSaveLocation=$ROOT/ctld
SlurmdSpoolDir=$ROOT/spool/%n
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd-%n.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# no cgroups: runs in containers and VMs without systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
# short cycles: a job released by a limit change starts within seconds, not a minute
SchedulerParameters=bf_interval=5,sched_interval=10
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default every job takes a whole node's memory and only one runs per node
DefMemPerCPU=256
# the nodes claim more CPUs than the machine has
SlurmdParameters=config_overrides
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=$accounted_tres
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/none
${node_lines}PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP"

install_file "$CONF_DIR/gres.conf" 0644 root:root "$HEADER
AutoDetect=off
${gres_lines%$'\n'}"

install_file "$CONF_DIR/slurmdbd.conf" 0600 slurm:slurm "$HEADER
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
DebugLevel=info
LogFile=$ROOT/log/slurmdbd.log
PidFile=$ROOT/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=$MYSQL_HOST
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$DB_PASSWORD
StorageLoc=slurm_acct_db"

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
    mysql_root -e "
        CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
        ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
        ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
        || die "cannot create the slurm database user in MariaDB ($MYSQL_HOST:$MYSQL_PORT as root)"
    # A slurmdbd killed mid-transaction (two test runs racing on one cluster, seen here) can leave
    # user associations whose account association is gone; 22.05 then segfaults on every start.
    # Drop such orphans (and their account rows) before starting it.
    mysql_root slurm_acct_db -e "
        SET @t = (SELECT COUNT(*) FROM information_schema.tables
                  WHERE table_schema = 'slurm_acct_db' AND table_name = '${CLUSTER}_assoc_table');
        SET @q = IF(@t = 0, 'SELECT 0', CONCAT(
            'DELETE a FROM \`${CLUSTER}_assoc_table\` a LEFT JOIN \`${CLUSTER}_assoc_table\` p ',
            'ON p.acct = a.acct AND p.user = \'\' WHERE a.user <> \'\' AND p.id_assoc IS NULL'));
        PREPARE cleanup FROM @q; EXECUTE cleanup; DEALLOCATE PREPARE cleanup;" \
        || say "could not check the accounting database for orphaned associations"
    slurmdbd
    await "slurmdbd" 60 "$ROOT/log/slurmdbd.log" sacctmgr -n list cluster
    say "slurmdbd started"
fi
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null # before slurmctld first starts
    say "registered cluster $CLUSTER"
fi
associations=$(sacctmgr -n -P list assoc format=cluster,account,user)
if ! grep -qx "$CLUSTER|root|$ADMIN_USER" <<<"$associations"; then
    sacctmgr -i add user "$ADMIN_USER" account=root cluster="$CLUSTER" adminlevel=Administrator >/dev/null
    say "added slurmdb administrator $ADMIN_USER"
fi
# The test users' default account: a user's first association becomes its default, and
# slurmdbd refuses to delete a default account, so tests' own accounts must never be one.
for user in $TEST_USERS; do
    if ! grep -qx "$CLUSTER|sandbox|$user" <<<"$associations"; then
        grep -q "^$CLUSTER|sandbox|$" <<<"$associations" || sacctmgr -i add account sandbox \
            cluster="$CLUSTER" parent=root description="test users' default" organization=portal >/dev/null
        associations+=$'\n'"$CLUSTER|sandbox|"
        sacctmgr -i add user "$user" account=sandbox cluster="$CLUSTER" >/dev/null
        sacctmgr -i modify user "$user" set defaultaccount=sandbox >/dev/null
        say "test user $user: default account sandbox"
    fi
done

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
for node in "${NODES[@]}"; do
    name=${node%%:*}
    if ! node_usable "$name"; then
        # a node drained by an earlier config or a crash stays drained until resumed
        sleep 1
        node_usable "$name" || scontrol update nodename="$name" state=resume 2>/dev/null || true
        await "node $name" 60 "$ROOT/log/slurmctld.log" node_usable "$name"
    fi
done

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
env_text="$HEADER
SLURMRESTD_URL=http://127.0.0.1:$REST_PORT
SLURM_API_VERSION=$API_VERSION
SLURM_CLUSTER=$CLUSTER
SLURM_PARTITION=$PARTITION
SLURM_JWT_KEY=$JWT_KEY
SLURM_ADMIN_USER=$ADMIN_USER
SLURM_TEST_USERS=\"$TEST_USERS\"
SLURM_RELEASE=$SLURM_RELEASE"
if ! { [ -f "$ENV_FILE" ] && [ "$(cat "$ENV_FILE")" = "$env_text" ]; }; then
    (umask 077; printf '%s\n' "$env_text" > "$ENV_FILE")
fi
say "ready: http://127.0.0.1:$REST_PORT (Slurm $SLURM_RELEASE, env file $ENV_FILE)"
