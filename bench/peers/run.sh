#!/usr/bin/env bash
# wfhost side by side with the durable engines a user would pick instead:
# a chain of N no-op steps, each durably recorded in SQLite, run in
# alternation. Installs pinned peers into a virtualenv (bench/peers/.venv,
# or $PEERS_VENV) from PyPI, builds wfhost in release mode, and prints
# per-step medians and ratios.
#
#   bench/peers/run.sh                     # 100 and 1,000 steps, 5 rounds
#   PEERS_SIZES=1000,10000 PEERS_ROUNDS=3 bench/peers/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${PEERS_VENV:-$here/.venv}

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  langgraph==1.2.22 langgraph-checkpoint-sqlite==3.1.2 dbos==3.4.0

(cd "$root" && cargo build --release --quiet -p wfhost)
target=$(cd "$root" && cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
exec "$venv/bin/python" "$here/compare.py" "$target/release/wfhost" "$venv/bin/python"
