#!/usr/bin/env bash
# All of wfhost's side-by-side benches in one command; prints per-step
# medians and each engine's time as a multiple of wfhost's (method:
# docs/DEVELOPMENT.md, "Benchmarks").
#
#   bench/run.sh [WFHOST]        # WFHOST: a built wfhost binary (or $WFHOST_BIN);
#                                # without one, builds it: cargo build --release -p wfhost
#   BENCH_ROUNDS=2 FIBO_TASKS=100 ECHO_SIZES=100 bench/run.sh /path/to/wfhost
#   ECHO_SIZES=1000,100000 BENCH_PARTS=peers bench/run.sh
#
# Parts (BENCH_PARTS, default peers,server,obelisk):
# - peers: bench/peers/compare.py, the echo chain and the 400-task fibo
#   chain beside LangGraph, DBOS, Prefect, Snakemake (pinned in
#   bench/peers/requirements.txt, installed into bench/peers/.venv or
#   $PEERS_VENV) and a native spawn reference. BENCH_SHAPES, BENCH_ROUNDS,
#   ECHO_SIZES, PEERS_MAX_STEPS, FIBO_TASKS, FIBO_N, PEERS, PEER_TIMEOUT:
#   see compare.py.
# - server: bench/server/bench.py (a 3-block run from POST /v1/runs to its
#   end, local and remote agent; a chain's per-step cost through serve
#   against wfhost run; SERVER_RUNS, SERVER_CHAIN) and
#   bench/server/concurrent_runs.py (CONCURRENT_RUNS runs of
#   CONCURRENT_STEPS steps at once on one serve).
# - obelisk: bench/obelisk/run.sh, Obelisk 0.38.3 on the fibo chain with
#   its own benchmark components beside wfhost's (OBELISK_INSTALL=1 builds
#   Obelisk; OBELISK_FIBO_SRC: benchmark-fibo's source; see that script).
#
# Builds the native fibo program and its launcher with gcc and the fibo
# worker plugin (bench/fibo/worker) for wasm32-wasip2 into $BENCH_BUILD_DIR
# (default bench/.build; the plugin's cargo target directory is
# $CARGO_TARGET_DIR, else bench/.build/target). Exits non-zero only when a
# wfhost run (or the build of the bench's own plugin) failed; a peer that
# is missing or fails is reported and skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
venv=${PEERS_VENV:-$here/peers/.venv}
build=${BENCH_BUILD_DIR:-$here/.build}
parts=,${BENCH_PARTS:-peers,server,obelisk},
status=0
mkdir -p "$build"

wfhost=${1:-${WFHOST_BIN:-}}
if [ -z "$wfhost" ]; then
  (cd "$root" && cargo build --release --quiet -p wfhost)
  target=$(cd "$root" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  wfhost=$target/release/wfhost
fi
wfhost=$(cd "$(dirname "$wfhost")" && pwd)/$(basename "$wfhost")
[ -x "$wfhost" ] || { echo "bench: no wfhost binary at $wfhost" >&2; exit 1; }
echo "wfhost: $wfhost ($("$wfhost" --version))"

if [[ $parts == *,peers,* ]]; then
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || echo "bench: could not create the peers' virtualenv $venv (python3 -m venv); peers are skipped"
  fi
  python=python3
  if [ -x "$venv/bin/python" ]; then
    python=$venv/bin/python
    "$python" -m pip install --quiet --disable-pip-version-check -r "$here/peers/requirements.txt" \
      || echo "bench: pip could not install every pinned peer (bench/peers/requirements.txt); missing ones are skipped"
  fi

  fibo_args=()
  if [[ ,${BENCH_SHAPES:-echo,fibo}, != *,fibo,* ]]; then
    :
  elif command -v gcc >/dev/null; then
    gcc -O2 -o "$build/fibo" "$here/fibo/fibo.c"
    gcc -O2 -o "$build/spawn_chain" "$here/fibo/spawn_chain.c"
    if fibo_wasm=$(BENCH_BUILD_DIR=$build "$here/fibo/build_worker.sh"); then
      fibo_args=("$build/fibo" "$build/spawn_chain" "$fibo_wasm")
    else
      echo "bench: the fibo worker plugin (bench/fibo/worker, wfhost's SDK) did not build: the fibo chain is skipped"
      status=1
    fi
  else
    echo "bench: gcc not found (apt-get install gcc): the fibo chain is skipped"
  fi
  "$python" "$here/peers/compare.py" "$wfhost" "$python" "${fibo_args[@]}" || status=1
fi

if [[ $parts == *,server,* ]]; then
  echo
  python3 "$here/server/bench.py" "$wfhost" --runs "${SERVER_RUNS:-60}" \
    --rounds "${BENCH_ROUNDS:-5}" --chain "${SERVER_CHAIN:-100}" || status=1
  echo
  python3 "$here/server/concurrent_runs.py" "$wfhost" --runs "${CONCURRENT_RUNS:-100}" \
    --steps "${CONCURRENT_STEPS:-100}" || status=1
fi

if [[ $parts == *,obelisk,* ]]; then
  echo
  WFHOST_BIN=$wfhost "$here/obelisk/run.sh" || status=1
fi
exit $status
