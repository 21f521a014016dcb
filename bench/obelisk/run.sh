#!/usr/bin/env bash
# Obelisk (Rust, wasmtime, WIT, SQLite), the closest design to wfhost,
# beside wfhost on the fibo chain: tasks in series, each computing
# fibo(FIBO_N) (default 10) in a WASM component, OBELISK_TASKS long
# (default 100,400). Obelisk runs its own benchmark components (the Rust
# activity `fiboa` and workflow `fibow` of obeli-sk/benchmark-fibo);
# wfhost runs the bench's fibo worker plugin (bench/fibo/worker) as a
# chain of blocks. Method and figures: docs/dev/benchmarks.md,
# "Beside Obelisk".
#
#   bench/obelisk/run.sh [WFHOST]      # or $WFHOST_BIN; bench/run.sh passes it
#   OBELISK_ROOT=/opt/obelisk OBELISK_FIBO_SRC=/src/benchmark-fibo BENCH_ROUNDS=3 bench/obelisk/run.sh
#
# What it needs, each found or built here:
# - obelisk $OBELISK_VERSION (default 0.38.3) at $OBELISK_BIN, else
#   $OBELISK_ROOT/bin/obelisk (default root bench/obelisk/.root); with
#   OBELISK_INSTALL=1 built there from crates.io:
#     cargo install obelisk --version 0.38.3 --locked --root bench/obelisk/.root
#   (20-40 minutes of both cores on a 2-core machine; niced; needs protoc,
#   Debian's protobuf-compiler).
# - benchmark-fibo's source at commit $OBELISK_FIBO_COMMIT (the last one on
#   obelisk 0.38.3, before its move to 0.39): $OBELISK_FIBO_SRC (a
#   directory: a clone, or `git archive` of that commit), else a clone into
#   bench/obelisk/.src from GitHub.
# - its two Rust components, built with cargo for wasm32-wasip2 (the
#   Justfile's `build-rs` recipe as plain cargo commands) into
#   $CARGO_TARGET_DIR, else bench/.build/target. Upstream builds the
#   workflow for wasm32-unknown-unknown; this bench builds it for
#   wasm32-wasip2 (the target the bench already needs) and deploys it with
#   `stub_wasi = true`, Obelisk's setting for workflows built that way. The
#   toolchain is wfhost's (rust-toolchain.toml at the repository's root),
#   not the 1.96 that benchmark-fibo pins.
# - wfhost's side: $WFHOST_BIN (or the first argument) and the fibo worker
#   plugin (bench/fibo/build_worker.sh); without a wfhost binary, Obelisk
#   runs alone.
#
# BENCH_ROUNDS (default 5) alternating rounds; each Obelisk round starts a
# fresh server (a new SQLite directory; the compiled-code cache is kept)
# and times `obelisk execution submit --follow` of fibow.fiboa, then stops
# that server. With strace installed, one more untimed run of each engine
# counts its fsyncs (OBELISK_STRACE=0 skips it).
#
# Anything missing is named with how to get it, and the script exits 0
# (Obelisk is a peer); it exits 1 only when a wfhost run failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/.." && pwd)
version=${OBELISK_VERSION:-0.38.3}
fibo_commit=${OBELISK_FIBO_COMMIT:-a5a4b8e7cedd9cc32fc5d3a2b1757a8bf0628013}
fibo_repo=https://github.com/obeli-sk/benchmark-fibo
root=${OBELISK_ROOT:-$here/.root}
obelisk=${OBELISK_BIN:-$root/bin/obelisk}
wfhost=${1:-${WFHOST_BIN:-}}

if [ ! -x "$obelisk" ]; then
  if [ "${OBELISK_INSTALL:-0}" = 1 ] && ! command -v protoc >/dev/null && [ -z "${PROTOC:-}" ]; then
    echo "obelisk: skipped: building obelisk needs protoc (apt-get install protobuf-compiler, or set PROTOC)"
    exit 0
  elif [ "${OBELISK_INSTALL:-0}" = 1 ]; then
    echo "obelisk: building obelisk $version from crates.io into $root (cargo install --locked; 20-40 minutes on two cores)"
    if ! nice -n 19 cargo install obelisk --version "$version" --locked --root "$root"; then
      echo "obelisk: cargo install obelisk --version $version failed; skipped"
      exit 0
    fi
  else
    echo "obelisk: not found at $obelisk; skipped. Build it with OBELISK_INSTALL=1 bench/run.sh"
    echo "  (cargo install obelisk --version $version --locked --root $root, 20-40 minutes on two cores),"
    echo "  or set OBELISK_BIN (or OBELISK_ROOT) to an installed one"
    exit 0
  fi
fi
found=$("$obelisk" --version 2>&1 | head -1)
echo "obelisk: $found at $obelisk"
case " $found " in
  *" $version "*) ;;
  *) echo "obelisk: expected version $version (the benchmark components are pinned to it); going on with $found" ;;
esac

# benchmark-fibo's source at the pinned commit.
src=${OBELISK_FIBO_SRC:-}
if [ -z "$src" ]; then
  src=$here/.src
  if [ "$(git -C "$src" rev-parse HEAD 2>/dev/null)" != "$fibo_commit" ]; then
    rm -rf "$src"
    echo "obelisk: cloning $fibo_repo at ${fibo_commit:0:7} into $src"
    if ! { GIT_TERMINAL_PROMPT=0 timeout 300 git clone --quiet "$fibo_repo" "$src" \
      && git -C "$src" -c advice.detachedHead=false checkout --quiet "$fibo_commit"; }; then
      rm -rf "$src"
      echo "obelisk: skipped: could not clone $fibo_repo at $fibo_commit."
      echo "  Set OBELISK_FIBO_SRC to a directory holding benchmark-fibo at that commit, e.g. from any clone:"
      echo "    mkdir -p DIR && git -C CLONE archive $fibo_commit | tar -x -C DIR"
      exit 0
    fi
  fi
elif [ ! -d "$src" ]; then
  echo "obelisk: skipped: OBELISK_FIBO_SRC=$src is not a directory"
  exit 0
fi
src=$(cd "$src" && pwd)
if [ ! -f "$src/activity/rs/Cargo.toml" ] || [ ! -f "$src/workflow/rs/Cargo.toml" ]; then
  echo "obelisk: skipped: $src holds no benchmark-fibo Rust components (activity/rs, workflow/rs)"
  exit 0
fi
at=$(git -C "$src" rev-parse HEAD 2>/dev/null || true)
if [ -n "$at" ] && [ "$at" != "$fibo_commit" ]; then
  echo "obelisk: note: $src is at ${at:0:7}, not the pinned ${fibo_commit:0:7}"
fi

# The Justfile's build-rs, as cargo commands. Run from this directory so
# that rustup picks wfhost's toolchain, and cargo ignores benchmark-fibo's
# .cargo/config.toml (its targets are given here).
target=${CARGO_TARGET_DIR:-${BENCH_BUILD_DIR:-$bench/.build}/target}
echo "obelisk: building benchmark-fibo's fiboa (activity) and fibow (workflow) for wasm32-wasip2 from $src"
if ! (cd "$here" \
  && CARGO_TARGET_DIR=$target cargo build --quiet --locked --manifest-path "$src/Cargo.toml" \
    -p fiboa-rs --profile release_activity --target wasm32-wasip2 \
  && CARGO_TARGET_DIR=$target cargo build --quiet --locked --manifest-path "$src/Cargo.toml" \
    -p fibow-rs --profile release_workflow --target wasm32-wasip2); then
  echo "obelisk: skipped: benchmark-fibo's Rust components did not build (cargo, target wasm32-wasip2:"
  echo "  rustup target add wasm32-wasip2; their dependencies come from crates.io)"
  exit 0
fi
fiboa=$target/wasm32-wasip2/release_activity/fiboa_rs.wasm
fibow=$target/wasm32-wasip2/release_workflow/fibow_rs.wasm

args=("$obelisk" "$fiboa" "$fibow")
if [ -z "$wfhost" ]; then
  echo "obelisk: no wfhost binary given (first argument or WFHOST_BIN): Obelisk runs alone"
elif [ ! -x "$wfhost" ]; then
  echo "obelisk: no wfhost binary at $wfhost: Obelisk runs alone"
elif ! fibo_wasm=$("$bench/fibo/build_worker.sh"); then
  echo "obelisk: the fibo worker plugin (bench/fibo/worker) did not build: Obelisk runs alone"
  exit 1
else
  args+=("$wfhost" "$fibo_wasm")
fi
OBELISK_FIBO_COMMIT=$fibo_commit exec python3 "$here/bench.py" "${args[@]}"
