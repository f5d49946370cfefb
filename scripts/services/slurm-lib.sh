# Shell functions shared by scripts/services/slurm.sh (22.05 on the machine) and
# scripts/services/slurm-modern.sh (24.11 in a chroot). Sourced, never run. The caller sets
# T0, TAG (log prefix), and for root_matches ROOT_DIR (the chroot, or empty on the machine).

say() { printf '[%s %3ds] %s\n' "$TAG" "$((SECONDS - T0))" "$*" >&2; }
die() { printf '[%s] SLURM FAILED TO START: %s\n' "$TAG" "$*" >&2; exit 1; }

# root_matches PID: the process lives in our root (always true on the machine itself), so a
# same-named daemon of the other Slurm on this host is never taken for ours
root_matches() {
    [ -z "${ROOT_DIR:-}" ] || [ "$(readlink "/proc/$1/root" 2>/dev/null)" = "$ROOT_DIR" ]
}

# running PIDFILE COMM: the pid in PIDFILE is alive, its /proc comm is COMM, and it is ours.
# COMM-wlm counts too: Debian's slurmd/slurmctld are alternatives links to slurmd-wlm and
# slurmctld-wlm, and 25.05+ re-exec themselves on `scontrol reconfigure` under that name.
running() {
    local pid comm
    [ -s "$1" ] || return 1
    pid=$( { tr -dc '0-9' < "$1"; } 2>/dev/null) || return 1
    [ -n "$pid" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    { [ "$comm" = "$2" ] || [ "$comm" = "$2-wlm" ]; } && root_matches "$pid"
}

# halt PIDFILE COMM: TERM that one pid, wait up to 30 s, then KILL it, then wait for it to go
halt() {
    local file=$1 comm=$2 pid
    if running "$file" "$comm"; then
        pid=$(tr -dc '0-9' < "$file")
        say "stopping $comm (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 60); do running "$file" "$comm" || break; sleep 0.5; done
        running "$file" "$comm" && { kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; }
        # an exiting process in a chroot loses /proc/PID/root before the pid is gone
        for _ in $(seq 20); do [ -e "/proc/$pid" ] || break; sleep 0.5; done
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

# write_env_file PATH TEXT: the tests' env file, private (it names the JWT key), rewritten only
# when it changed
write_env_file() {
    if ! { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }; then
        (umask 077; printf '%s\n' "$2" > "$1")
    fi
}

# slurm_conf CLUSTER STATE CTLD_PORT SLURMD_PORT DBD_HOST DBD_PORT JWT_KEY EXTRA NODE...: the
# slurm.conf both test clusters share (NODE is name:port:gres_type:cards); DBD_HOST is where
# slurmctld, slurmrestd and sacctmgr reach slurmdbd; EXTRA holds release-specific lines.
# Choices: no cgroups (containers and VMs without systemd), short scheduler cycles (a job released
# by a limit change starts within seconds), DefMemPerCPU so several jobs share a node, the nodes
# claim more CPUs than the machine has, and GPUs accounted per type so jobs carry GPU TRES.
# Preemption by QOS (issue #36: the portal's workload classes are QOS whose Preempt list names the
# classes they may displace): PreemptType=preempt/qos with REQUEUE as the cluster default; a QOS's
# own PreemptMode (the portal writes one per class) overrides it for the jobs it preempts.
slurm_conf() {
    local cluster=$1 state=$2 ctld_port=$3 slurmd_port=$4 dbd_host=$5 dbd_port=$6 jwt_key=$7
    local extra=$8
    shift 8
    local node name port gres_type cards node_lines="" accounted="gres/gpu"
    for node in "$@"; do
        IFS=: read -r name port gres_type cards <<<"$node"
        node_lines+="NodeName=$name NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:$gres_type:$cards State=UNKNOWN"$'\n'
        accounted+=",gres/gpu:$gres_type"
    done
    cat <<CONF
ClusterName=$cluster
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$jwt_key
CredType=cred/munge
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
${extra}JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_interval=10
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PreemptType=preempt/qos
PreemptMode=REQUEUE
DefMemPerCPU=256
SlurmdParameters=config_overrides
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$dbd_host
AccountingStoragePort=$dbd_port
AccountingStorageTRES=$accounted
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/none
${node_lines}PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

# gres_conf STATE NODE...: fake GPUs are symlinks to /dev/null (Slurm drops GPUs without File=)
gres_conf() {
    local state=$1 node name gres_type cards
    shift
    echo "AutoDetect=off"
    for node in "$@"; do
        IFS=: read -r name _ gres_type cards <<<"$node"
        echo "NodeName=$name Name=gpu Type=$gres_type File=$state/fakegpu/$gres_type-[0-$((cards - 1))]"
    done
}

# slurmdbd_conf STATE DBD_PORT JWT_KEY MYSQL_HOST MYSQL_PORT DB_USER DB_PASSWORD DB_NAME
slurmdbd_conf() {
    cat <<CONF
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$3
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$2
SlurmUser=slurm
DebugLevel=info
LogFile=$1/log/slurmdbd.log
PidFile=$1/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=$4
StoragePort=$5
StorageUser=$6
StoragePass=$7
StorageLoc=$8
CONF
}

# The caller defines slurm_cmd CMD ARGS...: runs one of this cluster's Slurm clients
# (sacctmgr, scontrol, sinfo, squeue, scancel) with this cluster's configuration.

# register_accounts CLUSTER ADMIN_USER TEST_USERS: the cluster in slurmdbd, the portal's
# AdminLevel=Administrator user, and each test user with default account "sandbox" (a user's
# first association becomes its default, and slurmdbd refuses to delete a default account, so
# tests' own accounts must never be one)
register_accounts() {
    local cluster=$1 admin=$2 users=$3 associations user
    if ! slurm_cmd sacctmgr -n -P list cluster format=cluster | grep -qx "$cluster"; then
        slurm_cmd sacctmgr -i add cluster "$cluster" >/dev/null # before slurmctld first starts
        say "registered cluster $cluster"
    fi
    associations=$(slurm_cmd sacctmgr -n -P list assoc format=cluster,account,user)
    if ! grep -qx "$cluster|root|$admin" <<<"$associations"; then
        slurm_cmd sacctmgr -i add user "$admin" account=root cluster="$cluster" \
            adminlevel=Administrator >/dev/null
        say "added slurmdb administrator $admin"
    fi
    for user in $users; do
        if ! grep -qx "$cluster|sandbox|$user" <<<"$associations"; then
            grep -q "^$cluster|sandbox|$" <<<"$associations" || slurm_cmd sacctmgr -i add account \
                sandbox cluster="$cluster" parent=root description="test users' default" \
                organization=portal >/dev/null
            associations+=$'\n'"$cluster|sandbox|"
            slurm_cmd sacctmgr -i add user "$user" account=sandbox cluster="$cluster" >/dev/null
            slurm_cmd sacctmgr -i modify user "$user" set defaultaccount=sandbox >/dev/null
            say "test user $user: default account sandbox"
        fi
    done
}

node_usable() { # idle, mixed, allocated or completing: not down, drained or invalid
    case "$(slurm_cmd sinfo -h -N -n "$1" -o '%t' 2>/dev/null | head -n1)" in
        idle|mix|alloc|comp) return 0 ;;
        *) return 1 ;;
    esac
}

# resume_nodes LOGFILE NODE...: a node drained by an earlier config or a crash stays drained
# until resumed
resume_nodes() {
    local logfile=$1 node name
    shift
    for node in "$@"; do
        name=${node%%:*}
        if ! node_usable "$name"; then
            sleep 1
            node_usable "$name" || slurm_cmd scontrol update nodename="$name" state=resume \
                2>/dev/null || true
            await "node $name" 60 "$logfile" node_usable "$name"
        fi
    done
}

# cancel_jobs: before stopping, so that no slurmstepd outlives its slurmd
cancel_jobs() {
    local jobs
    jobs=$(slurm_cmd squeue -h -o '%A' 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        say "cancelling jobs $jobs"
        # shellcheck disable=SC2086
        slurm_cmd scancel $jobs 2>/dev/null || true
        for _ in $(seq 30); do
            [ -z "$(slurm_cmd squeue -h -t R,CG -o '%A' 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
}

# drop_orphan_associations MYSQL_CMD DB CLUSTER: a slurmdbd killed mid-transaction (two test runs
# racing on one cluster, seen here with 22.05) can leave user associations whose account
# association is gone, after which slurmdbd segfaults on every start; drop them first
drop_orphan_associations() {
    local db=$2 cluster=$3
    $1 "$db" -e "
        SET @t = (SELECT COUNT(*) FROM information_schema.tables
                  WHERE table_schema = '$db' AND table_name = '${cluster}_assoc_table');
        SET @q = IF(@t = 0, 'SELECT 0', CONCAT(
            'DELETE a FROM \`${cluster}_assoc_table\` a LEFT JOIN \`${cluster}_assoc_table\` p ',
            'ON p.acct = a.acct AND p.user = \'\' WHERE a.user <> \'\' AND p.id_assoc IS NULL'));
        PREPARE cleanup FROM @q; EXECUTE cleanup; DEALLOCATE PREPARE cleanup;" >/dev/null \
        || say "could not check the accounting database for orphaned associations"
}

# db_grant MYSQL_CMD DB USER PASSWORD: the database and its user (both host names MariaDB sees)
db_grant() {
    $1 -e "
        CREATE DATABASE IF NOT EXISTS $2;
        CREATE USER IF NOT EXISTS '$3'@'127.0.0.1' IDENTIFIED BY '$4';
        CREATE USER IF NOT EXISTS '$3'@'localhost' IDENTIFIED BY '$4';
        ALTER USER '$3'@'127.0.0.1' IDENTIFIED BY '$4';
        ALTER USER '$3'@'localhost' IDENTIFIED BY '$4';
        GRANT ALL ON $2.* TO '$3'@'127.0.0.1';
        GRANT ALL ON $2.* TO '$3'@'localhost';"
}

# dispatch_action ACTION ANON_URL: the actions both scripts share. "start" returns (the caller
# goes on to start); "stop" runs the caller's stop_all; "status" exits 0 when slurmrestd answers
# (without root there is no token: a 401 from ANON_URL is enough), else 1; "env" prints
# ENV_FILE. The caller defines stop_all, rest_answers, REST_PORT and ENV_FILE.
dispatch_action() {
    local code
    case "$1" in
        start) return 0 ;;
        env) echo "$ENV_FILE"; exit 0 ;;
        stop)
            [ "$(id -u)" -eq 0 ] || die "stop must run as root"
            stop_all
            say "stopped"
            exit 0
            ;;
        status)
            if [ "$(id -u)" -ne 0 ]; then
                code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$2" || true)
                [ "$code" = 401 ] && { say "slurmrestd answers on 127.0.0.1:$REST_PORT"; exit 0; }
            elif rest_answers; then
                say "slurmrestd answers on 127.0.0.1:$REST_PORT"
                exit 0
            fi
            say "slurmrestd does not answer on 127.0.0.1:$REST_PORT"
            exit 1
            ;;
        *) die "unknown action '$1' (start, stop, status or env)" ;;
    esac
}
