#!/usr/bin/env bash
# The advance round trip of `wfhost mcp` over stdio with the official
# Python MCP client, at the start and the end of a 150-step workflow, and
# WorkRail's beside it when WORKRAIL_DIR names a WorkRail checkout built
# with `npm install && npx tsc -p tsconfig.build.json` (its
# dist/mcp-server.js). Installs the pinned client into a virtualenv
# (bench/mcp/.venv, or $MCP_BENCH_VENV) and builds wfhost in release mode.
#
#   bench/mcp/run.sh
#   WORKRAIL_DIR=/path/to/workrail MCP_BENCH_ROUNDS=5 bench/mcp/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${MCP_BENCH_VENV:-$here/.venv}

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check mcp==2.3.0

(cd "$root" && cargo build --release --quiet -p wfhost)
target=$(cd "$root" && cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
exec "$venv/bin/python" "$here/compare.py" "$venv/bin/python" "$target/release/wfhost" ${WORKRAIL_DIR:+"$WORKRAIL_DIR"}
