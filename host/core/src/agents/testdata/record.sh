#!/usr/bin/env bash
# Re-records the adapter fixtures of this folder: each CLI of
# tests/agents (scripts/services.sh agents) run offline against
# tests/fixtures/model_server.py with the scenarios here
# (`<cli>-<case>.scenario.json`). Needs root (`unshare -n`). Writes
# `<cli>-<case>.<ext>` (stdout), `<cli>-<case>.stderr` (only where the
# adapter needs it) and `<cli>-<case>.usage.json` (what the server charged).
#
#   host/core/src/agents/testdata/record.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../../.." && pwd)
bin=$repo/tests/agents/node_modules/.bin
offline=$repo/tests/fixtures/offline.sh
root=/tmp/wfhost-agent-fixtures
rm -rf "$root"

# run CLI CASE EXT PROMPT [--keep-ws] CMD...: a fresh workspace (kept for
# a resume with --keep-ws) and HOME per CLI; stdout to CLI-CASE.EXT.
run() {
    local cli=$1 case=$2 ext=$3 prompt=$4
    shift 4
    local ws=$root/$cli/ws
    if [ "$1" = --keep-ws ]; then shift; else rm -rf "$ws"; mkdir -p "$ws/docs"; echo "# the project" >"$ws/README.md"; fi
    local usage=$root/$cli/$case.usage.json status=0
    (cd "$ws" && printf '%s\n' "$prompt" | HOME=$root/$cli/home timeout 120 \
        unshare -n "$offline" "$here/$cli-$case.scenario.json" "$usage" "$@" \
        >"$here/$cli-$case.$ext" 2>"$root/$cli/$case.stderr") || status=$?
    cp "$usage" "$here/$cli-$case.usage.json"
    echo "$cli-$case: exit $status, charged $(cat "$usage")"
}

# Codex: a custom Responses provider on the command line, no config file.
mkdir -p "$root/codex/home"
codex_args=(-m gpt-5.5 -c model_provider=wf -c model_providers.wf.name=wf
    -c model_providers.wf.env_key=OPENAI_API_KEY -c model_providers.wf.wire_api=responses
    --disable plugins --disable remote_plugin --disable apps -c analytics.enabled=false)
# The provider's base_url comes from offline.sh's OPENAI_BASE_URL; the
# prompt is read from stdin (`-`, last).
# shellcheck disable=SC2016
cx=(env OPENAI_API_KEY=sk-test bash -c 'exec "$0" "$@" -c "model_providers.wf.base_url=\"$OPENAI_BASE_URL\"" -' "$bin/codex")
run codex success jsonl "Write docs/hello.md and docs/sh.txt." \
    "${cx[@]}" exec --json -s workspace-write --skip-git-repo-check --ephemeral "${codex_args[@]}"
run codex error jsonl "Say something." \
    "${cx[@]}" exec --json -s workspace-write --skip-git-repo-check --ephemeral "${codex_args[@]}"
run codex exhausted jsonl "Run true." \
    "${cx[@]}" exec --json -s workspace-write --skip-git-repo-check --ephemeral "${codex_args[@]}"
run codex resume-first jsonl "Remember the word PINEAPPLE." \
    "${cx[@]}" exec --json -s workspace-write --skip-git-repo-check "${codex_args[@]}"
id=$(head -1 "$here/codex-resume-first.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["thread_id"])')
run codex resume jsonl "Which word did I ask you to remember?" --keep-ws \
    "${cx[@]}" exec resume --json --skip-git-repo-check -c sandbox_mode='"workspace-write"' "${codex_args[@]}" "$id"

# Gemini CLI: the API key auth selected in settings.json, the workspace trusted.
mkdir -p "$root/gemini/home/.gemini"
echo '{"security":{"auth":{"selectedType":"gemini-api-key"}}}' >"$root/gemini/home/.gemini/settings.json"
gem_auto=(env GEMINI_API_KEY=test-key GEMINI_CLI_TRUST_WORKSPACE=true TMPDIR=$root/gemini "$bin/gemini" --yolo)
gem=("${gem_auto[@]}" -m gemini-2.5-pro)
run gemini success json "Write docs/hello.md and docs/sh.txt." "${gem[@]}" --output-format json -p ""
run gemini success-stream jsonl "Write docs/hello.md and docs/sh.txt." "${gem[@]}" --output-format stream-json -p ""
run gemini error json "Say something." "${gem[@]}" --output-format json -p ""
cp "$root/gemini/error.stderr" "$here/gemini-error.stderr"
run gemini error-stream jsonl "Say something." "${gem[@]}" --output-format stream-json -p ""
run gemini router json "Say done." "${gem_auto[@]}" --output-format json -p ""
run gemini resume-first json "Remember the word PINEAPPLE." "${gem[@]}" --output-format json -p ""
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$here/gemini-resume-first.json")
run gemini resume json "Which word did I ask you to remember?" --keep-ws "${gem[@]}" --output-format json --resume "$id" -p ""

# opencode: an OpenAI-compatible provider in OPENCODE_CONFIG_CONTENT.
mkdir -p "$root/opencode/home"
oc_config='{"provider":{"wf":{"npm":"@ai-sdk/openai-compatible","name":"wf","options":{"baseURL":"{env:MODEL_SERVER_URL}/v1","apiKey":"test-key"},"models":{"test-model":{"name":"test-model"}}}},"model":"wf/test-model","small_model":"wf/test-model"}'
oc=(env OPENCODE_CONFIG_CONTENT="$oc_config" OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 "$bin/opencode" run --format json)
run opencode success jsonl "Write docs/hello.md and docs/sh.txt." "${oc[@]}"
run opencode error jsonl "Say something." "${oc[@]}"
run opencode exhausted jsonl "Run true." "${oc[@]}"
run opencode resume-first jsonl "Remember the word PINEAPPLE." "${oc[@]}"
id=$(head -1 "$here/opencode-resume-first.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionID"])')
run opencode resume jsonl "Which word did I ask you to remember?" --keep-ws "${oc[@]}" -s "$id"
