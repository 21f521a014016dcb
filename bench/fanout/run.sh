#!/usr/bin/env bash
# A fan-out of N trivial tasks (`echo ITEM > FILE`), side by side:
# Snakemake locally and on Slurm (one job per task, a job array, grouped
# jobs) and wfhost's `parallel.over` block locally and on Slurm. Prints a
# markdown table (wall time, per-task ms, sbatch calls, status queries) and
# writes it to bench/fanout/last-results.md.
#
#   bench/fanout/run.sh [WFHOST]       # WFHOST: a built wfhost binary, else
#                                      # $WFHOST_BIN, else target/release/wfhost,
#                                      # else target/debug/wfhost (never built here)
#   FANOUT_ITEMS=100 bench/fanout/run.sh
#   FANOUT_PARTS=smk-local,wfhost-local bench/fanout/run.sh
#
# Time: each part is cut at FANOUT_PART_TIMEOUT (150 s), so the default run
# takes about 13 minutes on the one-node 2-CPU cluster of
# scripts/services.sh (15 with 180 s), where Snakemake on Slurm gets through
# 40-80 tasks in 180 s (each task starts two Snakemake processes in its job)
# and wfhost's job array about 2 tasks a second (Slurm's own pace on one
# slurmd: all 1,000 take ~480 s); with FANOUT_ITEMS=100
# FANOUT_PART_TIMEOUT=900 every part finishes (~22 minutes there).
#
# Settings (environment):
#   FANOUT_ITEMS         N, the number of tasks (default 1000)
#   FANOUT_PARTS         comma-separated, default all, in this order:
#                        smk-local, smk-slurm, smk-slurm-array, smk-slurm-group,
#                        wfhost-local, wfhost-slurm
#   FANOUT_PART_TIMEOUT  seconds one part may take (default 150); a part that
#                        takes longer is interrupted (SIGINT, SIGKILL 20 s
#                        later), its jobs cancelled, and its row says how many
#                        of the N tasks were done
#   FANOUT_PARTITION     the Slurm partition (default: sinfo's default one)
#   FANOUT_LOCAL_CORES   Snakemake's --cores and wfhost's max_concurrent
#                        locally (default 2)
#   FANOUT_SMK_GROUP     tasks per Slurm job in smk-slurm-group (default 50);
#                        each group job gets the partition's CPUs
#                        (`--resources cpus_per_task=CPUS`, which Snakemake
#                        also takes as the limit of all its running jobs)
#   FANOUT_SMK_ARRAY_LIMIT  tasks per job array in smk-slurm-array (default 64:
#                        the plugin passes a whole array's commands in one
#                        sbatch argument; past ~85 tasks it exceeds Linux's
#                        128 KiB and the plugin's fallback, a script on stdin,
#                        is broken in 2.8.0: every task runs the first one)
#   FANOUT_LANES_DIR     WFHOST_LANES_DIR for the wfhost runs (default: wfhost's,
#                        /dev/shm when it has room)
#   FANOUT_SMK_ARGS      more arguments for every Snakemake-on-Slurm run,
#                        e.g. "--slurm-init-seconds-before-status-checks 2"
#   FANOUT_MERGE         the wfhost block's merge_strategy (default concatenate)
#   FANOUT_WORK          scratch directory (default $TMPDIR/wfhost-fanout; the
#                        workspaces must be visible to the Slurm nodes at the
#                        same path: this one-node cluster sees all of /tmp)
#   FANOUT_VENV          the virtualenv (default bench/fanout/.venv)
#
# Counting: a directory of shims (sbatch, squeue, sacct, scontrol, scancel,
# sinfo, srun, sacctmgr) is put first on PATH for every engine; each shim
# appends its name to a log (with `@job` when it runs inside a Slurm job)
# and execs the real program (resolved with `command -v` before the shims
# are on PATH); shims/args.log in the scratch directory keeps every call's
# time and arguments (sbatch's script on stdin aside). wfhost runs sbatch, squeue,
# sacct, scontrol and scancel by name from its PATH
# (host/exec/src/slurm/mod.rs); Snakemake's plugin does the same, and the
# jobs inherit the PATH (sbatch exports the environment), so srun calls
# inside Snakemake's jobs are counted too.
#
# Needs python3 (venv) and a reachable PyPI for the first install; the Slurm
# parts need a cluster (scripts/services.sh slurm starts a one-node one) and
# are skipped with a message without it. The wfhost parts are skipped with a
# message when there is no binary or it refuses the manifest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${FANOUT_VENV:-$here/.venv}
work=${FANOUT_WORK:-${TMPDIR:-/tmp}/wfhost-fanout}
mkdir -p "$work"
work=$(cd "$work" && pwd)

# --- Snakemake and its Slurm plugin, pinned -------------------------------
if [ ! -x "$venv/bin/python" ]; then
  echo "fanout: creating the virtualenv $venv (python3 -m venv)"
  python3 -m venv "$venv"
fi
echo "fanout: installing into $venv (pip install -r bench/fanout/requirements.txt):"
grep -v '^#' "$here/requirements.txt" | sed '/^$/d; s/^/  /'
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "fanout: installed: $("$venv/bin/python" -m pip freeze --disable-pip-version-check | grep -i '^snakemake' | tr '\n' ' ')"

# --- wfhost ----------------------------------------------------------------
wfhost=${1:-${WFHOST_BIN:-}}
if [ -z "$wfhost" ]; then
  for candidate in "$root/target/release/wfhost" "$root/target/debug/wfhost"; do
    if [ -x "$candidate" ]; then wfhost=$candidate; break; fi
  done
fi
if [ -n "$wfhost" ] && [ -x "$wfhost" ]; then
  wfhost=$(cd "$(dirname "$wfhost")" && pwd)/$(basename "$wfhost")
  echo "fanout: wfhost: $wfhost ($("$wfhost" --version 2>&1 || echo 'no --version'))"
else
  echo "fanout: no wfhost binary (${wfhost:-none given; none at target/release/wfhost or target/debug/wfhost}): the wfhost parts are skipped (build it: cargo build --release -p wfhost)"
  wfhost=
fi

# --- Slurm -------------------------------------------------------------------
slurm=1
partition=${FANOUT_PARTITION:-}
accounting=0
cluster_cpus=
if ! command -v sinfo >/dev/null || ! command -v sbatch >/dev/null; then
  echo "fanout: Slurm is not installed (no sinfo/sbatch on PATH): the Slurm parts are skipped (start it: scripts/services.sh slurm, as root)"
  slurm=0
elif ! partitions=$(timeout 20 sinfo -h -o '%P' 2>&1); then
  echo "fanout: Slurm does not answer (sinfo: $partitions): the Slurm parts are skipped (scripts/services.sh slurm; see /tmp/services.log)"
  slurm=0
else
  if [ -z "$partition" ]; then
    partition=$(printf '%s\n' "$partitions" | sed -n 's/\*$//p' | head -n 1)
    [ -n "$partition" ] || partition=$(printf '%s\n' "$partitions" | head -n 1)
  fi
  if timeout 20 sacct -n -X -S now-1minutes >/dev/null 2>&1; then
    accounting=1
  fi
  cluster_cpus=$(timeout 20 sinfo -h -p "$partition" -o '%C' 2>/dev/null | awk -F/ 'NR == 1 { print $4 }' || true)
  echo "fanout: Slurm partition $partition (${cluster_cpus:-?} CPUs); accounting (sacct): $([ "$accounting" = 1 ] && echo yes || echo 'no: Snakemake polls with squeue, wfhost with squeue and its markers')"
fi

# --- the counting shims ------------------------------------------------------
shims=$work/shims
rm -rf "$shims"
mkdir -p "$shims"
: >"$shims/calls.log"
: >"$shims/args.log"
for name in sbatch squeue sacct scontrol scancel sinfo srun sacctmgr; do
  real=$(command -v "$name" || true)
  [ -n "$real" ] || continue
  case $name in
    sbatch)
      # sbatch's output is also logged (the job id), so that the jobs of an
      # interrupted part can be cancelled, and only those.
      cat >"$shims/$name" <<EOF
#!/bin/sh
echo $name\${SLURM_JOB_ID:+@job} >>'$shims/calls.log'
echo "\$(date +%T.%N | cut -c1-12) $name \$*" >>'$shims/args.log'
out=\$('$real' "\$@"); rc=\$?
[ -z "\$out" ] || printf '%s\n' "\$out"
printf 'sbatch-output %s\n' "\$out" >>'$shims/calls.log'
exit \$rc
EOF
      ;;
    *)
      cat >"$shims/$name" <<EOF
#!/bin/sh
echo $name\${SLURM_JOB_ID:+@job} >>'$shims/calls.log'
echo "\$(date +%T.%N | cut -c1-12) $name \$*" >>'$shims/args.log'
exec '$real' "\$@"
EOF
      ;;
  esac
  chmod +x "$shims/$name"
  printf 'FANOUT_REAL_%s=%s\n' "$name" "$real" >>"$shims/real.env"
done

export FANOUT_ROOT=$root FANOUT_WORK=$work FANOUT_SHIMS=$shims FANOUT_SLURM=$slurm \
  FANOUT_PARTITION=$partition FANOUT_ACCOUNTING=$accounting FANOUT_WFHOST=$wfhost FANOUT_CLUSTER_CPUS=$cluster_cpus \
  FANOUT_RESULTS=${FANOUT_RESULTS:-$here/last-results.md}
exec "$venv/bin/python" "$here/compare.py"
