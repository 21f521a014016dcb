#!/usr/bin/env bash
# The peers part of bench/run.sh alone: the echo chain and the 400-task
# fibo chain beside LangGraph, DBOS, Prefect and Snakemake (see
# bench/run.sh and bench/peers/compare.py for the settings).
#
#   bench/peers/run.sh [WFHOST]            # 100 and 1,000 steps, 5 rounds
#   ECHO_SIZES=1000,100000 BENCH_ROUNDS=3 bench/peers/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BENCH_PARTS=${BENCH_PARTS:-peers} exec "$here/../run.sh" "$@"
