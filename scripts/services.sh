#!/usr/bin/env bash
# Installs and starts the real services wfhost's container and Slurm tests
# use, on a Debian machine where this runs as root:
#   - docker: Debian's docker.io, dockerd in the background, and a local
#     test image `wfhost-test/busybox:1` imported from a busybox-static root
#     filesystem (no registry is reachable, so nothing is pulled).
#   - slurm: Debian's slurm-wlm and munge as a one-node cluster (this host,
#     all its CPUs, a partition `debug`): a munge key, munged, a slurm.conf,
#     slurmctld and slurmd; ready once a trivial job has run.
#
# Usage: scripts/services.sh [docker] [slurm]   (default: docker)
# Idempotent: what is installed or running already is left as it is.
# There is no systemd here: daemons are started directly, in the background.
set -euo pipefail

IMAGE=wfhost-test/busybox:1
log() { printf 'services: %s\n' "$*" >&2; }

apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
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

SLURM_CONF=/etc/slurm/slurm.conf

slurm_conf() {
    local node cpus mem
    node=$(hostname -s)
    cpus=$(nproc)
    # Leave the host some memory; jobs ask for little.
    mem=$(( $(free -m | awk '/^Mem:/ {print $2}') * 3 / 4 ))
    cat <<CONF
# Written by wfhost's scripts/services.sh: a one-node test cluster.
ClusterName=wfhost
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to scontrol for 5 minutes: the host reads the
# final state and exit code from there.
MinJobAge=300
# A timed-out or cancelled job is killed quickly.
KillWait=2
OverTimeLimit=0
# Schedule a submitted job at once instead of on the next periodic pass.
SchedulerType=sched/builtin
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0,sched_interval=1
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
}

slurm_node_ready() {
    local state
    state=$(timeout 5 sinfo -h -o %T 2>/dev/null | head -n1)
    case "$state" in
        idle|mixed|allocated|completing) return 0 ;;
        *) return 1 ;;
    esac
}

start_slurm() {
    apt_install slurm-wlm munge
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating a munge key"
        mungekey --create --force
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if ! pgrep -x munged >/dev/null; then
        log "starting munged"
        runuser -u munge -- munged --force
    fi
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    local wanted
    wanted=$(slurm_conf)
    if [ ! -f "$SLURM_CONF" ] || [ "$(cat "$SLURM_CONF")" != "$wanted" ]; then
        log "writing $SLURM_CONF"
        printf '%s\n' "$wanted" > "$SLURM_CONF"
        # A changed configuration needs the daemons restarted; wait until
        # the old ones are gone, or they would be taken for running.
        pkill -x slurmctld 2>/dev/null || true
        pkill -x slurmd 2>/dev/null || true
        for _ in $(seq 1 100); do
            pgrep -x 'slurmctld|slurmd' >/dev/null || break
            sleep 0.1
        done
    fi
    if ! pgrep -x slurmctld >/dev/null; then
        log "starting slurmctld"
        slurmctld || { tail -n 30 /var/log/slurm/slurmctld.log >&2; exit 1; }
    fi
    if ! pgrep -x slurmd >/dev/null; then
        log "starting slurmd"
        slurmd || { tail -n 30 /var/log/slurm/slurmd.log >&2; exit 1; }
    fi
    local deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do
        slurm_node_ready && break
        # A node that came back after a restart may be marked down.
        timeout 5 scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
        sleep 0.5
    done
    if ! slurm_node_ready; then
        log "the Slurm node did not become idle; sinfo says:"
        sinfo >&2 || true
        tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
        exit 1
    fi
    # A real job, end to end.
    local job
    job=$(sbatch --parsable --output=/dev/null --wrap true)
    for _ in $(seq 1 120); do
        [ -z "$(squeue -h -j "$job" -t PD,R,CG,CF 2>/dev/null)" ] && break
        sleep 0.25
    done
    if ! scontrol show job "$job" | grep -q 'JobState=COMPLETED'; then
        log "a trivial Slurm job did not complete:"
        scontrol show job "$job" >&2 || true
        exit 1
    fi
    log "slurm ready, node $(hostname -s), partition debug"
}

[ $# -eq 0 ] && set -- docker
for service in "$@"; do
    case "$service" in
        docker) start_docker ;;
        slurm) start_slurm ;;
        *) log "unknown service $service (known: docker, slurm)"; exit 2 ;;
    esac
done
