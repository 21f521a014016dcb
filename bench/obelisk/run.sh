#!/usr/bin/env bash
# Obelisk (Rust, wasmtime, WIT, SQLite), the closest design to wfhost.
# Finds obelisk $OBELISK_VERSION (default 0.38.3) at $OBELISK_BIN, else in
# the bench-local root bench/obelisk/.root (or $OBELISK_ROOT); with
# OBELISK_INSTALL=1 builds it there from crates.io:
#   cargo install obelisk --version 0.38.3 --locked --root bench/obelisk/.root
# (about 20 minutes of both cores on a 2-core machine; niced).
#
# The comparison drives Obelisk with its own benchmark fibo components
# (a workflow calling a fibo activity in series). They live in the
# obeli-sk/benchmark-fibo repository and are published neither on
# crates.io nor inside the obelisk crate, and this bench fetches no
# repositories: so once Obelisk is found, this script says so and skips
# the run. Always exits 0 (Obelisk is a peer).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${OBELISK_VERSION:-0.38.3}
root=${OBELISK_ROOT:-$here/.root}
obelisk=${OBELISK_BIN:-$root/bin/obelisk}

if [ ! -x "$obelisk" ]; then
  if [ "${OBELISK_INSTALL:-0}" = 1 ]; then
    echo "obelisk: building obelisk $version from crates.io into $root (cargo install --locked; about 20 minutes on two cores)"
    if ! nice -n 10 cargo install obelisk --version "$version" --locked --root "$root"; then
      echo "obelisk: cargo install obelisk --version $version failed; skipped"
      exit 0
    fi
  else
    echo "obelisk: not found at $obelisk; skipped. Build it with OBELISK_INSTALL=1 bench/run.sh"
    echo "  (cargo install obelisk --version $version --locked --root $root, about 20 minutes on two cores), or set OBELISK_BIN"
    exit 0
  fi
fi
echo "obelisk: $("$obelisk" --version 2>&1 | head -1) at $obelisk"
echo "obelisk: skipped: its benchmark fibo components (repository obeli-sk/benchmark-fibo) are not"
echo "  published on crates.io, as a crate or inside the obelisk crate, and this bench fetches no repositories"
exit 0
