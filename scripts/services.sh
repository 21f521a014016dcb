#!/usr/bin/env bash
# Installs and starts the real services wfhost's container and Slurm tests
# use, on a Debian machine where this runs as root:
#   - docker: Debian's docker.io, dockerd in the background, and a local
#     test image `wfhost-test/busybox:1` imported from a busybox-static root
#     filesystem (no registry is reachable, so nothing is pulled). Also
#     strace, with which the budget tests count a run's syncs.
#   - slurm: Debian's slurm-wlm and munge as a one-node cluster (this host,
#     all its CPUs, a partition `debug`): a munge key, munged, a slurm.conf,
#     slurmctld and slurmd; ready once a trivial job has run. With job
#     accounting, so that `sacct` answers: Debian's mariadb-server (mariadbd,
#     a database slurm_acct_db and its user) and slurmdbd (a slurmdbd.conf,
#     the cluster registered), started before slurmctld; ready once sacct
#     shows the trivial job COMPLETED. WFHOST_SLURM_ACCOUNTING=0 starts the
#     cluster without accounting instead (accounting_storage/none; slurmdbd
#     is stopped, MariaDB is neither installed nor started nor stopped), to
#     try the no-sacct path by hand; running again without it switches back.
#   - browser: Debian's chromium (headless) and Node.js for the dashboard's
#     browser tests, which drive it with playwright-core (installed by the
#     test itself from tests/dashboard/package-lock.json).
#   - agents: the agent CLIs the preset tests run (tests/e2e/presets.rs):
#     claude, codex, gemini and opencode, pinned in tests/agents/package.json
#     and package-lock.json, installed with `npm ci` into
#     tests/agents/node_modules (Debian's nodejs and npm when node is
#     missing); again only when the lock file changed. Each must then print
#     its version (its native binary is an optional per-platform package).
#     The tests run them offline, against tests/fixtures/model_server.py.
#   - postgres: Debian's postgresql (its default cluster, started with
#     pg_ctlcluster, listening on 127.0.0.1:5432) and a role wfhost_test
#     (password wfhost_test, CREATEDB) for the store's tests on
#     PostgreSQL, which create and drop a database of their own each
#     (WFHOST_TEST_POSTGRES names another server).
#   - registry: Debian's docker-registry (the CNCF distribution registry),
#     for the plugin package tests; each test starts its own instance on a
#     free loopback port with its own storage, so nothing runs here.
#
# Usage: scripts/services.sh [docker|slurm|browser|registry|agents|postgres|all]...
#        (default: docker; all = every service)
#        WFHOST_SLURM_ACCOUNTING=0|1 (default 1): Slurm job accounting.
# Idempotent: what is installed or running already is left as it is.
# There is no systemd here: daemons are started directly, in the background.
set -euo pipefail

IMAGE=wfhost-test/busybox:1
log() { printf 'services: %s\n' "$*" >&2; }

APT_UPDATED=false
apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! $APT_UPDATED; then
        apt-get update -qq >/dev/null
        APT_UPDATED=true
    fi
    local extra=()
    [ "${NO_RECOMMENDS:-false}" = true ] && extra=(--no-install-recommends)
    apt-get install -y -qq "${extra[@]}" "${missing[@]}" >/dev/null
}

# remove_stale_pid FILE NAME: remove FILE unless the process it names is
# still running as NAME. A pid outlives its process: after a reboot or a
# killed session the number is often reused by something else (a kernel
# worker, once), and dockerd refuses to start over the file.
remove_stale_pid() {
    local file=$1 name=$2 pid comm
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    if [ -z "$pid" ] || [ "$comm" != "$name" ]; then
        rm -f "$file"
    fi
}

start_docker() {
    apt_install docker.io busybox-static strace
    if ! docker info >/dev/null 2>&1; then
        # A dockerd killed with the machine's last session leaves its pid
        # file behind, and a new one refuses to start over it.
        remove_stale_pid /var/run/docker.pid dockerd
        remove_stale_pid /var/run/docker/containerd/containerd.pid containerd
        log "starting dockerd"
        nohup dockerd >/var/log/wfhost-dockerd.log 2>&1 &
        local dockerd=$!
        for _ in $(seq 1 120); do
            docker info >/dev/null 2>&1 && break
            kill -0 "$dockerd" 2>/dev/null || break
            sleep 0.5
        done
        docker info >/dev/null 2>&1 || {
            log "dockerd did not come up; its log:"
            tail -n 30 /var/log/wfhost-dockerd.log >&2
            exit 1
        }
    fi
    if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
        log "building $IMAGE from busybox-static"
        local root
        root=$(mktemp -d)
        mkdir -p "$root/bin" "$root/tmp" "$root/workspace"
        cp /bin/busybox "$root/bin/busybox"
        for applet in $("$root/bin/busybox" --list); do
            [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
        done
        tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
        rm -rf "$root"
    fi
    log "docker ready, image $IMAGE"
}

# Debian's slurm-wlm reads /etc/slurm/slurm.conf, slurmdbd
# /etc/slurm/slurmdbd.conf. No cgroup.conf is needed: with
# proctrack/linuxproc, task/none and jobacct_gather/linux (which reads
# /proc) no cgroup plugin is loaded.
SLURM_CONF=/etc/slurm/slurm.conf
SLURMDBD_CONF=/etc/slurm/slurmdbd.conf
SLURM_LOGS=/var/log/slurm
SLURM_CLUSTER=wfhost
# true: slurmctld records jobs through slurmdbd into MariaDB, and sacct
# answers; false (WFHOST_SLURM_ACCOUNTING=0): no accounting at all.
SLURM_ACCOUNTING=true
# slurmdbd's database and MariaDB user. A test-only password: MariaDB
# listens on loopback only (Debian's default), and slurmdbd.conf is 0600.
SLURM_DB=slurm_acct_db
SLURM_DB_USER=slurm
SLURM_DB_PASS=wfhost-slurmdbd
MARIADB_LOG=$SLURM_LOGS/mariadb.log
# Finished jobs are purged from slurmctld (and so from scontrol and
# squeue) once they are MinJobAge seconds old, on slurmctld's next purge
# pass: 12-18 s after they ended, measured here (the compiled-in purge
# interval, 60 s, bounds it at about 70 s). With accounting the host then
# reads the final state from sacct. Slurm's default is 300 s; it is low
# here so that tests see a finished job purged from the controller in
# reasonable time. It must stay non-zero: Slurm needs that for job arrays.
SLURM_MIN_JOB_AGE=10
# Slurm's default, set explicitly: array indices 0-1000 at most (an array
# may have up to MaxArraySize - 1 as its highest index). Tests rely on
# this value to split larger arrays into several submissions.
SLURM_MAX_ARRAY_SIZE=1001

slurm_conf() {
    local node cpus mem
    node=$(hostname -s)
    cpus=$(nproc)
    # Total memory, not free memory: the file must come out the same on
    # every run, or each run would rewrite it and restart the daemons. A
    # quarter is left to the host; slurmd refuses a node that claims more
    # than it has.
    mem=$(( $(free -m | awk '/^Mem:/ {print $2}') * 3 / 4 ))
    cat <<CONF
# Written by wfhost's scripts/services.sh: a one-node test cluster.
ClusterName=$SLURM_CLUSTER
# Addressed as 127.0.0.1, so that the host name need not resolve.
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$SLURM_LOGS/slurmctld.log
SlurmdLogFile=$SLURM_LOGS/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that asks for no memory is given all of the
# node's, and jobs then run one at a time.
DefMemPerCPU=512
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Per-job usage (MaxRSS, CPU time) from /proc, no cgroups needed.
JobAcctGatherType=jobacct_gather/linux
$(slurm_accounting_conf)
JobCompType=jobcomp/none
MpiDefault=none
# Debian has no /bin/mail; this keeps slurmctld from logging an error.
MailProg=/bin/true
# A node that comes back (slurmd restarted) is usable again at once.
ReturnToService=2
# Finished jobs leave scontrol and squeue 10-70 s after they end (see
# SLURM_MIN_JOB_AGE in scripts/services.sh); sacct keeps them.
MinJobAge=$SLURM_MIN_JOB_AGE
# Slurm's default, explicit: tests split arrays larger than this.
MaxArraySize=$SLURM_MAX_ARRAY_SIZE
# A timed-out or cancelled job gets SIGKILL 2 s after SIGTERM, and no
# grace minutes beyond its limit. slurmctld checks time limits every 30 s
# (compiled in), so a job ends 0-30 s after its limit.
KillWait=2
OverTimeLimit=0
# Scheduling: slurmctld starts a submitted batch job (and a pending one
# after another ends) on its next pass, run from a once-a-second loop
# once batch_sched_delay (default 3 s) has passed since the last pass.
# With 0, a trivial job goes from sbatch to COMPLETED in 0.05-1.1 s
# (median about 0.5 s here) instead of 1.4-2.8 s; the 1 s loop is
# compiled in. sched_interval=1 (default 60) makes a full pass every
# second. FIFO sched/builtin is as fast as sched/backfill on one node.
# (Not sched_min_interval: sched/builtin would misread it as its own
# "interval=" and log an error.)
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_interval=1
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
}

# The accounting lines of slurm.conf.
slurm_accounting_conf() {
    if $SLURM_ACCOUNTING; then
        cat <<CONF
# Jobs are recorded by slurmdbd (port 6819 on this host), so sacct works.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
CONF
    else
        cat <<CONF
# No accounting (WFHOST_SLURM_ACCOUNTING=0): sacct has nothing to show.
AccountingStorageType=accounting_storage/none
CONF
    fi
}

# On Debian's MariaDB defaults slurmdbd logs "error: Database settings not
# recommended values: innodb_buffer_pool_size innodb_lock_wait_timeout" at
# each start; that matters for large databases only, not for this one.
slurmdbd_conf() {
    cat <<CONF
# Written by wfhost's scripts/services.sh: slurmdbd for the test cluster.
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=/run/slurmdbd.pid
LogFile=$SLURM_LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
# localhost: MariaDB's unix socket.
StorageHost=localhost
StorageUser=$SLURM_DB_USER
StoragePass=$SLURM_DB_PASS
StorageLoc=$SLURM_DB
CONF
}

# Print the tails of the given logs to stderr.
show_logs() {
    local file
    for file in "$@"; do
        [ -f "$file" ] || continue
        printf -- '--- last lines of %s\n' "$file" >&2
        tail -n 30 "$file" >&2
    done
}

# The pids of the live processes named exactly $1. A daemon killed a moment
# ago can linger as a zombie until init reaps it; it does not count.
daemon_pids() {
    { ps -C "$1" -o pid=,stat= 2>/dev/null || true; } | awk '$2 !~ /^Z/ {print $1}'
}

daemon_running() {
    [ -n "$(daemon_pids "$1")" ]
}

# Stop the daemon named $1 and wait until it is gone.
stop_daemon() {
    local name=$1 pids
    pids=$(daemon_pids "$name")
    [ -n "$pids" ] || return 0
    log "stopping $name"
    # shellcheck disable=SC2086 # one pid a word
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 100); do
        daemon_running "$name" || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.5
}

start_munge() {
    local restart=false
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating a munge key"
        mungekey --create --force
        # A munged already running holds another key.
        restart=true
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if $restart; then
        stop_daemon munged
    fi
    if ! daemon_running munged; then
        log "starting munged"
        # --force: start over a socket left by a munged that was killed.
        runuser -u munge -- munged --force ||
            { show_logs /var/log/munge/munged.log; exit 1; }
    fi
    # A munge client retries for about 2 s when munged does not answer.
    local deadline=$((SECONDS + 15))
    while [ "$SECONDS" -lt "$deadline" ]; do
        timeout 5 munge -n </dev/null 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    log "munge does not work: a credential does not decode"
    show_logs /var/log/munge/munged.log
    exit 1
}

mariadb_answers() {
    timeout 5 mariadb-admin --silent ping >/dev/null 2>&1
}

# MariaDB for slurmdbd. The package has initialized its data directory
# (its own start of the server is refused by policy-rc.d in a container,
# and there is no systemd), so mariadbd is started directly, unless a
# server answers already (started by the package's init script elsewhere).
start_mariadb() {
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld
    if ! mariadb_answers && ! daemon_running mariadbd && ! daemon_running mysqld; then
        log "starting mariadbd"
        touch "$MARIADB_LOG"
        chown mysql:mysql "$MARIADB_LOG"
        nohup mariadbd --user=mysql --log-error="$MARIADB_LOG" >/dev/null 2>&1 &
    fi
    local deadline=$((SECONDS + 60))
    until mariadb_answers; do
        if [ "$SECONDS" -ge "$deadline" ] ||
            { ! daemon_running mariadbd && ! daemon_running mysqld; }; then
            log "MariaDB does not answer"
            show_logs "$MARIADB_LOG"
            exit 1
        fi
        sleep 0.25
    done
    # Root logs in through the unix socket (Debian's unix_socket auth).
    mariadb <<SQL || { log "could not create the database $SLURM_DB"; exit 1; }
CREATE DATABASE IF NOT EXISTS $SLURM_DB;
CREATE USER IF NOT EXISTS '$SLURM_DB_USER'@'localhost' IDENTIFIED BY '$SLURM_DB_PASS';
ALTER USER '$SLURM_DB_USER'@'localhost' IDENTIFIED BY '$SLURM_DB_PASS';
GRANT ALL ON $SLURM_DB.* TO '$SLURM_DB_USER'@'localhost';
SQL
}

# slurmdbd answers a client; sacctmgr finds it through slurm.conf's
# AccountingStorageHost.
slurmdbd_answers() {
    timeout 5 sacctmgr -n -P list cluster format=Cluster >/dev/null 2>&1
}

# slurmdbd, on MariaDB, with this cluster registered. slurm.conf must be
# written already.
start_slurmdbd() {
    local wanted
    wanted=$(slurmdbd_conf)
    if [ ! -f "$SLURMDBD_CONF" ] || [ "$(cat "$SLURMDBD_CONF")" != "$wanted" ]; then
        log "writing $SLURMDBD_CONF"
        (umask 077; printf '%s\n' "$wanted" > "$SLURMDBD_CONF")
        stop_daemon slurmdbd
    fi
    # slurmdbd refuses a configuration that others can read or that its
    # SlurmUser (root) does not own.
    chown root:root "$SLURMDBD_CONF"
    chmod 0600 "$SLURMDBD_CONF"
    if ! daemon_running slurmdbd; then
        log "starting slurmdbd"
        slurmdbd || { show_logs "$SLURM_LOGS/slurmdbd.log"; exit 1; }
    fi
    # On a new database slurmdbd first creates its tables.
    local deadline=$((SECONDS + 90))
    until slurmdbd_answers; do
        if ! daemon_running slurmdbd; then
            log "slurmdbd exited"
            show_logs "$SLURM_LOGS/slurmdbd.log" "$MARIADB_LOG"
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "slurmdbd does not answer"
            show_logs "$SLURM_LOGS/slurmdbd.log" "$MARIADB_LOG"
            exit 1
        fi
        sleep 0.25
    done
    # The cluster must be known to slurmdbd before slurmctld registers
    # with it, or its jobs are not recorded; a slurmctld that registered
    # before is restarted below.
    if ! timeout 5 sacctmgr -n -P list cluster format=Cluster | grep -qx "$SLURM_CLUSTER"; then
        log "registering cluster $SLURM_CLUSTER with slurmdbd"
        timeout 15 sacctmgr -i add cluster "$SLURM_CLUSTER" >/dev/null || {
            log "sacctmgr could not add cluster $SLURM_CLUSTER"
            show_logs "$SLURM_LOGS/slurmdbd.log"
            exit 1
        }
        stop_daemon slurmctld
    fi
}

# The node's state as sinfo prints it: idle, mixed, allocated, down*, ...
# (a trailing * means slurmd does not answer). Empty if the controller
# does not.
slurm_node_state() {
    timeout 5 sinfo -h -n "$(hostname -s)" -o %T 2>/dev/null | head -n1 || true
}

# Wait until the node takes jobs, resuming it if it comes up down or
# drained (after an unclean stop, or a configuration it once refused).
wait_for_slurm_node() {
    local node state daemon deadline=$((SECONDS + 60))
    node=$(hostname -s)
    while :; do
        # A daemon that exits after daemonizing (a port in use, a bad
        # state file) would otherwise be waited for in vain.
        for daemon in slurmctld slurmd; do
            daemon_running "$daemon" && continue
            log "$daemon exited"
            show_logs "$SLURM_LOGS/$daemon.log"
            exit 1
        done
        state=$(slurm_node_state)
        case "$state" in
            idle|mixed|allocated|completing) return 0 ;;
            down|drain*|fail*)
                log "node $node is $state; resuming it"
                timeout 5 scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
                ;;
        esac
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "the Slurm node did not become idle (state: ${state:-no answer from slurmctld})"
            timeout 15 sinfo -N -l >&2 || true
            show_logs "$SLURM_LOGS/slurmctld.log" "$SLURM_LOGS/slurmd.log"
            exit 1
        fi
        sleep 0.25
    done
}

# A trivial job, end to end: submitted, run, and seen by scontrol as
# COMPLETED with exit code 0. Its id is left in SLURM_CHECK_JOB.
SLURM_CHECK_JOB=
check_slurm_job() {
    local job info state t0 ms
    t0=${EPOCHREALTIME//[.,]/}
    job=$(sbatch --parsable --chdir=/tmp --output=/dev/null --time=1 \
        --job-name=services-check --wrap true) || {
        log "sbatch failed"
        show_logs "$SLURM_LOGS/slurmctld.log"
        exit 1
    }
    for _ in $(seq 1 300); do
        info=$(timeout 5 scontrol show job -o "$job" 2>/dev/null || true)
        state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
        case "$state" in
            PENDING|CONFIGURING|RUNNING|COMPLETING|"") sleep 0.1 ;;
            *) break ;;
        esac
    done
    ms=$(( (${EPOCHREALTIME//[.,]/} - t0) / 1000 ))
    if [ "$state" != COMPLETED ] || ! grep -q ' ExitCode=0:0 ' <<<"$info"; then
        log "a trivial Slurm job did not complete (state: ${state:-unknown}):"
        printf '%s\n' "$info" >&2
        scancel "$job" 2>/dev/null || true
        show_logs "$SLURM_LOGS/slurmctld.log" "$SLURM_LOGS/slurmd.log"
        exit 1
    fi
    log "slurm job $job: sbatch to COMPLETED in $ms ms"
    SLURM_CHECK_JOB=$job
}

# The trivial job as sacct shows it: COMPLETED, exit code 0:0. slurmctld
# sends the job's records to slurmdbd asynchronously, so this polls (up
# to 20 s). Here sacct showed a single job COMPLETED 0.1-0.2 s after
# scontrol did (before that, PENDING); the tasks of a job array appeared
# up to about 4 s after the array left squeue.
check_slurm_accounting() {
    local job=$1 line t0 ms deadline=$((SECONDS + 20))
    t0=${EPOCHREALTIME//[.,]/}
    while :; do
        line=$(timeout 5 sacct -X --parsable2 --noheader --starttime now-1hour \
            --format=JobID,JobIDRaw,State,ExitCode -j "$job" 2>&1 || true)
        [ "$line" = "$job|$job|COMPLETED|0:0" ] && break
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "sacct does not show job $job COMPLETED with exit code 0:0; it shows:"
            printf '%s\n' "${line:-(nothing)}" >&2
            show_logs "$SLURM_LOGS/slurmdbd.log" "$SLURM_LOGS/slurmctld.log"
            exit 1
        fi
        sleep 0.2
    done
    ms=$(( (${EPOCHREALTIME//[.,]/} - t0) / 1000 ))
    log "slurm accounting: sacct shows job $job COMPLETED 0:0 (after $ms ms)"
}

start_slurm() {
    if $SLURM_ACCOUNTING; then
        apt_install slurm-wlm munge slurmdbd mariadb-server
    else
        apt_install slurm-wlm munge
    fi
    # Order: munge, (MariaDB, slurmdbd), slurmctld, slurmd.
    start_munge
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$SLURM_LOGS"
    local wanted
    wanted=$(slurm_conf)
    if [ ! -f "$SLURM_CONF" ] || [ "$(cat "$SLURM_CONF")" != "$wanted" ]; then
        log "writing $SLURM_CONF"
        printf '%s\n' "$wanted" > "$SLURM_CONF"
        # Daemons running on another configuration are restarted; wait
        # until they are gone, or they would be taken for running.
        stop_daemon slurmctld
        stop_daemon slurmd
    fi
    if $SLURM_ACCOUNTING; then
        start_mariadb
        start_slurmdbd
    else
        stop_daemon slurmdbd
    fi
    # Both daemonize once their configuration is read and their log open;
    # a non-zero exit here is a configuration or startup error.
    if ! daemon_running slurmctld; then
        log "starting slurmctld"
        slurmctld || { show_logs "$SLURM_LOGS/slurmctld.log"; exit 1; }
    fi
    if ! daemon_running slurmd; then
        log "starting slurmd"
        slurmd || { show_logs "$SLURM_LOGS/slurmd.log"; exit 1; }
    fi
    wait_for_slurm_node
    check_slurm_job
    if $SLURM_ACCOUNTING; then
        check_slurm_accounting "$SLURM_CHECK_JOB"
        log "slurm ready: node $(hostname -s), partition debug, accounting (sacct)"
    else
        log "slurm ready: node $(hostname -s), partition debug, no accounting"
    fi
}

start_browser() {
    NO_RECOMMENDS=true apt_install chromium fonts-dejavu-core
    # Node.js with npm: Debian's, unless one is installed already (a
    # nodesource nodejs carries its own npm and conflicts with Debian's).
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    local version
    version=$(chromium --headless --no-sandbox --version 2>/dev/null || chromium --version)
    log "browser ready: $version, node $(node --version)"
}

start_registry() {
    NO_RECOMMENDS=true apt_install docker-registry
    log "registry ready: $(docker-registry --version 2>/dev/null | head -1)"
}

# The pinned agent CLIs, from the lock file (npm ci), into the project.
start_agents() {
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    local dir
    dir="$(cd "$(dirname "$0")/.." && pwd)/tests/agents"
    local stamp=$dir/node_modules/.wfhost-lock
    local programs=(claude codex gemini opencode)
    # Every CLI with its version (or what was wrong): each starts offline,
    # so this also checks that its native binary (an optional, per-platform
    # npm dependency) was installed.
    versions() {
        local p v out=() home
        home=$(mktemp -d)
        for p in "${programs[@]}"; do
            v=$(HOME=$home timeout 30 "$dir/node_modules/.bin/$p" --version 2>/dev/null | tail -1) || v=
            out+=("$p ${v:-MISSING}")
        done
        rm -rf "$home"
        local joined
        printf -v joined '%s; ' "${out[@]}"
        echo "${joined%; }"
    }
    installed() {
        local p
        for p in "${programs[@]}"; do
            [ -x "$dir/node_modules/.bin/$p" ] || return 1
        done
        [ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp"
    }
    if installed; then
        log "agents ready (installed): $(versions)"
        return
    fi
    log "installing the agent CLIs from $dir/package-lock.json"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    local v
    v=$(versions)
    case "$v" in
        *MISSING*) log "agents: a CLI does not start: $v"; return 1 ;;
    esac
    cp "$dir/package-lock.json" "$stamp"
    log "agents ready: $v"
}

# The cluster Debian's postgresql package made (the newest if several).
postgres_cluster() {
    pg_lsclusters --no-header 2>/dev/null | sort -V | tail -1 | awk '{print $1, $2}'
}

start_postgres() {
    NO_RECOMMENDS=true apt_install postgresql
    local cluster version name
    cluster=$(postgres_cluster)
    if [ -z "$cluster" ]; then
        log "no PostgreSQL cluster: making one"
        version=$(ls /usr/lib/postgresql | sort -V | tail -1)
        pg_createcluster "$version" main >/dev/null
        cluster=$(postgres_cluster)
    fi
    read -r version name <<<"$cluster"
    if ! pg_lsclusters --no-header | awk -v v="$version" -v n="$name" '$1==v && $2==n {print $4}' | grep -q online; then
        log "starting PostgreSQL $version/$name"
        pg_ctlcluster "$version" "$name" start
    fi
    local i
    for i in $(seq 1 30); do
        su postgres -c "psql -qAt -c 'SELECT 1'" >/dev/null 2>&1 && break
        sleep 1
    done
    su postgres -c "psql -qAt -c 'SELECT 1'" >/dev/null || { log "PostgreSQL does not answer"; return 1; }
    su postgres -c "psql -qAt -v ON_ERROR_STOP=1" >/dev/null <<'SQL'
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'wfhost_test') THEN
        CREATE ROLE wfhost_test LOGIN CREATEDB PASSWORD 'wfhost_test';
    END IF;
END
$$;
SQL
    PGPASSWORD=wfhost_test psql -qAt -h 127.0.0.1 -U wfhost_test -d postgres -c 'SELECT 1' >/dev/null \
        || { log "PostgreSQL: the role wfhost_test cannot log in over TCP"; return 1; }
    log "postgres ready: $(su postgres -c "psql -qAt -c 'SHOW server_version'") on 127.0.0.1:5432 (role wfhost_test)"
}

usage() {
    echo "usage: $0 [docker|slurm|browser|registry|agents|postgres|all]...   (default: docker)" >&2
}

[ $# -eq 0 ] && set -- docker
# Check every argument before starting anything.
case "${WFHOST_SLURM_ACCOUNTING:-1}" in
    1) SLURM_ACCOUNTING=true ;;
    0) SLURM_ACCOUNTING=false ;;
    *) log "WFHOST_SLURM_ACCOUNTING must be 0 or 1, not $WFHOST_SLURM_ACCOUNTING"; exit 2 ;;
esac
for service in "$@"; do
    case "$service" in
        docker|slurm|browser|registry|agents|postgres|all) ;;
        -h|--help) usage; exit 0 ;;
        *) log "unknown service $service (known: docker, slurm, browser, registry, agents, postgres, all)"; usage; exit 2 ;;
    esac
done
for service in "$@"; do
    case "$service" in
        docker) start_docker ;;
        slurm) start_slurm ;;
        browser) start_browser ;;
        registry) start_registry ;;
        agents) start_agents ;;
        postgres) start_postgres ;;
        all) start_docker; start_slurm; start_browser; start_registry; start_agents; start_postgres ;;
    esac
done
