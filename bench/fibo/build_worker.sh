#!/usr/bin/env bash
# Builds the bench's fibo worker plugin (bench/fibo/worker, wfhost's SDK)
# for wasm32-wasip2 and prints the path of its .wasm on stdout. The cargo
# target directory is $CARGO_TARGET_DIR, else bench/.build/target (or
# $BENCH_BUILD_DIR/target). Used by bench/run.sh and bench/obelisk/run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=${CARGO_TARGET_DIR:-${BENCH_BUILD_DIR:-$here/../.build}/target}
(cd "$here/worker" && CARGO_TARGET_DIR=$target \
  cargo build --release --locked --quiet --target wasm32-wasip2) >&2
echo "$target/wasm32-wasip2/release/wfhost_bench_fibo.wasm"
