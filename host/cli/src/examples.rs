//! The EXAMPLES section of each command's `--help`.

pub const RUN: &str = "\
Examples:
  wfhost run examples/hello/workflow.json --workspace /tmp/hello
  wfhost run review.json -w ./repo --executor container:python:3.12
  wfhost run wf.json -w ./ws --json > report.json      # a machine-readable report
  WFHOST_DURABILITY=normal wfhost run wf.json -w ./ws  # faster, survives crashes but not power loss";

pub const RESUME: &str = "\
Examples:
  wfhost resume 3c1f0a                 # any unique part of the run id
  wfhost resume run-20261122-024925-3c1f0a --branch 2";

pub const FORK: &str = "\
Examples:
  wfhost show 3c1f0a                   # lists each step's snapshot id
  wfhost fork 3c1f0a --at sn-5d2c9a1e  # continue from there as a new branch
  wfhost fork 3c1f0a --at 4            # run step 4 again as a new branch
  wfhost fork 3c1f0a --at main.review  # run the block's last execution again";

pub const GATES: &str = "\
Examples:
  wfhost gates
  wfhost gates --json";

pub const GATE: &str = "\
Examples:
  wfhost gate 3c1f0a UD-1 approved
  wfhost gate 3c1f0a UD-1 'changes-requested:split the plan into two steps'
  wfhost gate 3c1f0a UD-2 use-lane:api         # a fan-in gate: keep lane api's files
  wfhost gate 3c1f0a UD-APPROVE-DESIGN approved
  wfhost gate 3c1f0a UD-REVIEW-STRATEGY per-batch   # or single-final";

pub const RUNS: &str = "\
Examples:
  wfhost runs
  wfhost runs --status failed --since 1d
  wfhost runs --workflow release --limit 5
  wfhost runs --grep /srv/ws --json | jq -r '.[].id'";

pub const RERUN: &str = "\
Examples:
  wfhost rerun 3c1f0a
  wfhost rerun 3c1f0a --from 4
  wfhost rerun 3c1f0a --from main.build
  wfhost rerun 3c1f0a --definition pinned";

pub const CONFIG: &str = "\
Examples:
  wfhost config
  wfhost config --json | jq -r '.[] | select(.source != \"built-in\") | .key'

A wfhost.toml in the project (this directory or one above it):
  durability = \"normal\"
  workspace = \"work\"          # relative to the file
  executor = \"container:python:3.12\"
  [serve]
  listen = \"127.0.0.1:7464\"
  local_agents = 2";

pub const SHOW: &str = "\
Examples:
  wfhost show 3c1f0a
  wfhost show 3c1f0a --branch 2 --json";

pub const EVENTS: &str = "\
Examples:
  wfhost events 3c1f0a
  wfhost events 3c1f0a --follow --json   # one JSON object per line, live";

pub const LOGS: &str = "\
Examples:
  wfhost logs 3c1f0a                   # every block's log lines and command output
  wfhost logs 3c1f0a build.compile     # one block (node.block, or just the block)
  wfhost logs 3c1f0a -f                # follow a live run";

pub const CANCEL: &str = "\
Examples:
  wfhost cancel 3c1f0a                          # a live run stops; a waiting one closes
  wfhost cancel 3c1f0a --reason 'wrong branch'";

pub const RM: &str = "\
Examples:
  wfhost rm 3c1f0a 9e41b2
  wfhost runs --json | jq -r '.[] | select(.status == \"failed\") | .id' | xargs wfhost rm";

pub const EXPORT: &str = "\
Examples:
  wfhost export 3c1f0a -o run.bundle.json
  wfhost export 3c1f0a -o - | gzip > run.bundle.json.gz";

pub const IMPORT: &str = "\
Examples:
  wfhost import run.bundle.json
  wfhost import --home /srv/wfhost run.bundle.json   # into another store";

pub const SESSION: &str = "\
Examples:
  wfhost session list
  wfhost session export chat-42 -o chat-42.session.json
  wfhost session import chat-42.session.json";

pub const SCHEDULE: &str = "\
Examples:
  wfhost schedule add nightly --cron '0 2 * * *' --tz Europe/Berlin build.json -w ~/src/app
  wfhost schedule add report --cron '@hourly' report.json --set channel=ops --overlap queue
  wfhost schedule ls
  wfhost schedule show nightly
  wfhost schedule pause nightly && wfhost schedule resume nightly
  wfhost schedule trigger nightly
  wfhost schedule rm nightly";

pub const HOOK: &str = "\
Examples:
  wfhost secret set GITHUB_HOOK
  wfhost hook add deploy deploy.json --secret GITHUB_HOOK --map branch=/ref --map repo=/repository/full_name -w '/srv/runs/{run}'
  wfhost hook add ci build.json --format sha256 --secret CI_HOOK --set env=staging
  wfhost hook ls
  wfhost hook show deploy
  wfhost hook rm deploy";

pub const NOTIFY: &str = "\
Examples:
  wfhost notify add ops https://hooks.slack.com/services/T000/B000/XXXX --format slack --on run.failed,gate.opened
  wfhost secret set NOTIFY_KEY && wfhost notify add ci https://ci.example.com/wfhost --secret NOTIFY_KEY
  wfhost notify add nightly-only http://127.0.0.1:9000/hook --workflow nightly-build
  wfhost notify ls
  wfhost notify rm ops";

pub const GC: &str = "\
Examples:
  wfhost gc --dry-run
  wfhost gc --older-than 7d --include-unfinished";

pub const STORE: &str = "\
Examples:
  wfhost store migrate --to postgres://wfhost:PASSWORD@db.example/wfhost
  wfhost store migrate --to \"$DATABASE_URL\" --json";

pub const SECRET: &str = "\
Examples:
  printf %s \"$TOKEN\" | wfhost secret set TOKEN   # the value on stdin, never an argument
  wfhost secret ls
  wfhost secret rm TOKEN
A block refers to it in an env value: \"env\": {\"TOKEN\": {\"secret\": \"TOKEN\"}}";

pub const VALIDATE: &str = "\
Examples:
  wfhost validate examples/hello/workflow.json
  wfhost validate workflow.json --strict    # warnings fail too";

pub const INSPECT: &str = "\
Examples:
  wfhost inspect examples/subroutines/workflow.json
  wfhost inspect workflow.json --format mermaid > graph.md
  wfhost inspect workflow.json --format dot | dot -Tsvg > graph.svg";

pub const LIST: &str = "\
Examples:
  wfhost list examples
  wfhost list --json";

pub const SCHEMA: &str = "\
Examples:
  wfhost schema > workflow.schema.json   # point an editor at it with \"$schema\"
  wfhost schema --list                   # the objects --json commands print
  wfhost schema Run                      # what `wfhost show RUN --json` prints
  wfhost runs --json | jq '.[0]'         # a RunSummary (wfhost schema RunSummary)";

pub const COMPLETIONS: &str = "\
Examples:
  wfhost completions bash > ~/.local/share/bash-completion/completions/wfhost
  wfhost completions zsh > \"${fpath[1]}/_wfhost\"
  wfhost completions fish > ~/.config/fish/completions/wfhost.fish";

/// The examples of `wfhost` itself, on its manual page.
pub const WFHOST: &str = "\
Examples:
  mkdir -p /tmp/hello && wfhost run examples/hello/workflow.json --workspace /tmp/hello
  wfhost validate workflow.json          # check a workflow and its plugins
  wfhost runs                            # the runs in the store
  wfhost resume 3c1f0a                   # continue a run whose host stopped
  wfhost serve                           # the HTTP API and the dashboard";

pub const MAN: &str = "\
Examples:
  wfhost man | man -l -
  wfhost man --dir ~/.local/share/man/man1";

pub const MCP: &str = "\
Examples:
  wfhost mcp --workflows ./workflows --workspace .   # by hand, in a project
  wfhost mcp rotate-key                              # sign new tokens with a new key
  /home/me/.cargo/bin/wfhost mcp --workflows /home/me/proj/workflows \\
      --workspace /home/me/proj --home /home/me/.local/share/wfhost   # as a client's configuration says

An MCP client (Claude Code, Cursor, the MCP SDKs) starts `wfhost mcp` in a
directory of its choosing and speaks MCP over its standard input and
output: its configuration names the binary, --workflows, --workspace and
--home (or WFHOST_HOME) with absolute paths. Its tools: workflow_list,
workflow_inspect, workflow_start, workflow_advance, workflow_checkpoint, and
WorkRail's names for them. See docs/guide/mcp.md.";

pub const SERVE: &str = "\
Examples:
  wfhost serve
  wfhost serve --listen 127.0.0.1:8080 --home /srv/wfhost
  curl -s http://127.0.0.1:7464/v1/runs?status=waiting
  curl -sN http://127.0.0.1:7464/v1/runs/RUN/events/stream
  wfhost serve --listen 0.0.0.0:7464 --auth-token-file ~/.config/wfhost/tokens.json
  wfhost serve --local-agents 0      (only remote agents run blocks)";

pub const AGENT: &str = "\
Examples:
  wfhost agent --server http://127.0.0.1:7464
  wfhost agent --server http://build-host:7464 --name gpu-1 --capabilities wasm,exec,slurm --concurrency 4 \\
      --token-file ~/.config/wfhost/agent-token
The agent and the server must see run workspaces at the same path (a shared filesystem).";

pub const AGENTS: &str = "\
Examples:
  wfhost agents submit --slurm 4 --server http://head-node:7464 --partition batch
  wfhost agents submit --slurm 4 --server http://head-node:7464 --print   # the batch script only
  scancel 81234                                                          # stop them";

pub const AGENTS_SUBMIT: &str = "\
Examples:
  wfhost agents submit --slurm 4 --server http://head-node:7464
  wfhost agents submit --slurm 16 --server http://head-node:7464 --partition batch --time 1-00:00:00 \\
      --capabilities wasm,exec,slurm --concurrency 2 --token-file ~/.config/wfhost/agent-token \\
      --sbatch-arg=--account=lab --sbatch-arg=--mem=8G
  wfhost agents submit --slurm 4 --server http://head-node:7464 --print > agents.sh   # adapt, then: sbatch agents.sh
  scancel 81234                          # the array job id it printed: each agent hands back its job and stops
Each agent runs on a node: the wfhost executable, the token file, the log directory, the runs'
workspaces and WFHOST_LANES_DIR must be at the same paths there (a shared filesystem).";

pub const PLUGIN: &str = "\
Examples:
  wfhost plugin new greeter && cd greeter   # a worker crate with a test and a sample workflow
  cargo test && wfhost plugin build          # its logic natively, then the component
  wfhost plugin call target/wfhost/greeter.wasm --block-config '{\"greeting\": \"hi\"}'
  mkdir -p /tmp/ws && wfhost run workflow.json -w /tmp/ws
  wfhost plugin keygen --out ~/publisher.key            # once: a signing key and its .pub
  wfhost plugin pack                                     # reads ./wfhost-plugin.toml
  wfhost plugin sign target/wfhost-package/greeter-0.1.0 --key ~/publisher.key
  wfhost plugin push target/wfhost-package/greeter-0.1.0 oci://registry.example/acme/greeter
  wfhost plugin trust publisher.pub                      # a user, once per publisher
  wfhost plugin install oci://registry.example/acme/greeter:0.1.0 --allow exec
  wfhost plugin install                                  # everything wfhost.lock pins
  wfhost plugin update oci://registry.example/acme/greeter:0.1.0
  wfhost plugin ls";

pub const PLUGIN_NEW: &str = "\
Examples:
  wfhost plugin new greeter                          # ./greeter, a block worker
  wfhost plugin new router --world action-handler --dir plugins/router";

pub const PLUGIN_BUILD: &str = "\
Examples:
  wfhost plugin build                   # in the crate, after cargo test; prints target/wfhost/<name>.wasm
  wfhost plugin build --release         # the optimized component, to pack and publish
  wfhost plugin build --dir greeter";

pub const PLUGIN_CALL: &str = "\
Examples:
  wfhost plugin call greeter.wasm --block-config '{\"greeting\": \"hi\"}'
  wfhost plugin call greeter.wasm --payload '[{\"id\": \"q-1\", \"type\": \"QUESTION\", \"content\": \"why?\"}]' --json
  wfhost plugin call tool.wasm -w ./repo --grant exec     # a real workspace, the exec capability
  wfhost plugin call router.wasm --action SKIP_TO:finish  # an action handler";
