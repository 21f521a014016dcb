#!/usr/bin/env bash
# Installs and starts the real services wfhost's container and Slurm tests
# use, on a Debian machine where this runs as root:
#   - docker: Debian's docker.io, dockerd in the background, and a local
#     test image `wfhost-test/busybox:1` imported from a busybox-static root
#     filesystem (no registry is reachable, so nothing is pulled).
#   - slurm: Debian's slurm-wlm and munge as a one-node cluster (this host,
#     all its CPUs, a partition `debug`): a munge key, munged, a slurm.conf,
#     slurmctld and slurmd; ready once a trivial job has run.
#   - browser: Debian's chromium (headless) and Node.js for the dashboard's
#     browser tests, which drive it with playwright-core (installed by the
#     test itself from tests/dashboard/package-lock.json).
#   - registry: Debian's docker-registry (the CNCF distribution registry),
#     for the plugin package tests; each test starts its own instance on a
#     free loopback port with its own storage, so nothing runs here.
#
# Usage: scripts/services.sh [docker|slurm|browser|registry|all]...
#        (default: docker; all = every service)
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

# Remove a pid file whose process is gone.
remove_stale_pid() {
    local file=$1 pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        rm -f "$file"
    fi
}

start_docker() {
    apt_install docker.io busybox-static
    if ! docker info >/dev/null 2>&1; then
        # A dockerd killed with the machine's last session leaves its pid
        # file behind, and a new one refuses to start over it.
        remove_stale_pid /var/run/docker.pid
        remove_stale_pid /var/run/docker/containerd/containerd.pid
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

# Debian's slurm-wlm reads /etc/slurm/slurm.conf. No cgroup.conf is needed:
# with proctrack/linuxproc and task/none no cgroup plugin is loaded.
SLURM_CONF=/etc/slurm/slurm.conf
SLURM_LOGS=/var/log/slurm

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
ClusterName=wfhost
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
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
# Debian has no /bin/mail; this keeps slurmctld from logging an error.
MailProg=/bin/true
# A node that comes back (slurmd restarted) is usable again at once.
ReturnToService=2
# Finished jobs stay visible to scontrol for 5 minutes: the host reads the
# final state and exit code from there (sacct has no accounting here).
MinJobAge=300
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
# COMPLETED with exit code 0.
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
}

start_slurm() {
    apt_install slurm-wlm munge
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
    log "slurm ready: node $(hostname -s), partition debug"
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

usage() {
    echo "usage: $0 [docker|slurm|browser|registry|all]...   (default: docker)" >&2
}

[ $# -eq 0 ] && set -- docker
# Check every argument before starting anything.
for service in "$@"; do
    case "$service" in
        docker|slurm|browser|registry|all) ;;
        -h|--help) usage; exit 0 ;;
        *) log "unknown service $service (known: docker, slurm, browser, registry, all)"; usage; exit 2 ;;
    esac
done
for service in "$@"; do
    case "$service" in
        docker) start_docker ;;
        slurm) start_slurm ;;
        browser) start_browser ;;
        registry) start_registry ;;
        all) start_docker; start_slurm; start_browser; start_registry ;;
    esac
done
