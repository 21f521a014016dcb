//! Agent presets with the real CLI: Claude Code (`config.preset:
//! "claude-code"`, the version pinned in `tests/agents/package.json`),
//! offline, against the scripted model server of
//! `tests/fixtures/model_server.py`. The whole `wfhost run` runs in a
//! network namespace with loopback only (`unshare -n`), the server inside
//! it, so nothing can leave the machine.
//!
//! Needs the CLI (`scripts/services.sh agents`) and `unshare -n` (root);
//! without them the tests skip saying why, or fail under
//! `WFHOST_REQUIRE_SERVICES=1`.

use super::*;

/// The agent CLIs' bin directory with `program` in it, or why the tests
/// cannot run.
pub(super) fn agents_bin(program: &str) -> Result<PathBuf, String> {
    let bin = repo().join("tests/agents/node_modules/.bin");
    if !bin.join(program).exists() {
        return Err(format!(
            "`{program}` is not installed in {} (install it with `scripts/services.sh agents`)",
            bin.display()
        ));
    }
    let probe = Command::new("unshare")
        .args(["-n", "true"])
        .output()
        .map_err(|e| format!("`unshare` cannot run: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "`unshare -n` is refused here (it needs root): {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    Ok(bin)
}

fn claude_or_skip() -> Option<PathBuf> {
    cli_or_skip("claude")
}

/// The bin directory with `program`, or `None` after saying why the test
/// skips (a failure under `WFHOST_REQUIRE_SERVICES=1`).
pub(super) fn cli_or_skip(program: &str) -> Option<PathBuf> {
    match agents_bin(program) {
        Ok(bin) => Some(bin),
        Err(why) => {
            assert!(
                std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "the {program} preset tests cannot run: {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

pub(super) struct Offline {
    pub(super) scratch: tempfile::TempDir,
    pub(super) ws: PathBuf,
    pub(super) bin: PathBuf,
}

impl Offline {
    pub(super) fn new(bin: PathBuf) -> Offline {
        let scratch = tempfile::tempdir().unwrap();
        let ws = workspace_in(scratch.path());
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        std::fs::write(ws.join("README.md"), "# the project\n").unwrap();
        Offline { scratch, ws, bin }
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    /// `wfhost run` of a one-block workflow (`block` is the agent block)
    /// offline with `scenario`: its exit code, its JSON report, and what
    /// the model server charged.
    fn run(
        &self,
        block: serde_json::Value,
        scenario: serde_json::Value,
    ) -> (Option<i32>, serde_json::Value, serde_json::Value) {
        let wf = serde_json::json!({
            "id": "preset",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "write", "blocks": {"write": block}}}
        });
        self.run_workflow(wf, scenario)
    }

    /// `wfhost run` of the workflow `wf` offline with `scenario`: its exit
    /// code, its JSON report, and what the model server charged.
    pub(super) fn run_workflow(
        &self,
        wf: serde_json::Value,
        scenario: serde_json::Value,
    ) -> (Option<i32>, serde_json::Value, serde_json::Value) {
        self.run_workflow_with(wf, scenario, &[])
    }

    /// The same, with `env` in wfhost's environment.
    pub(super) fn run_workflow_with(
        &self,
        wf: serde_json::Value,
        scenario: serde_json::Value,
        env: &[(&str, &str)],
    ) -> (Option<i32>, serde_json::Value, serde_json::Value) {
        let manifest = self.path("wf.json");
        std::fs::write(&manifest, wf.to_string()).unwrap();
        let scenario_file = self.path("scenario.json");
        std::fs::write(&scenario_file, scenario.to_string()).unwrap();
        let usage = self.path("usage.json");
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = command(self.scratch.path())
            .env("PATH", path)
            .env("HOME", self.path("user-home"))
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("OPENAI_API_KEY", "test-key")
            .env("GEMINI_API_KEY", "test-key")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env_remove("ANTHROPIC_MODEL")
            .envs(env.iter().copied())
            .output_of_offline(
                &repo().join("tests/fixtures/offline.sh"),
                &scenario_file,
                &usage,
                &[
                    env!("CARGO_BIN_EXE_wfhost"),
                    "run",
                    manifest.to_str().unwrap(),
                    "-w",
                    self.ws.to_str().unwrap(),
                    "--json",
                ],
            );
        let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a JSON report ({e}; {:?}): {}{}",
                out.status,
                stdout(&out),
                stderr(&out)
            )
        });
        let charged = serde_json::from_str(&std::fs::read_to_string(&usage).unwrap()).unwrap();
        (out.status.code(), report, charged)
    }

    /// The model requests of the agents' own loops (with tools), in order.
    pub(super) fn loop_requests(&self) -> Vec<serde_json::Value> {
        let log = std::fs::read_to_string(self.path("usage.json.requests.jsonl")).unwrap();
        log.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }

    pub(super) fn block_output(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.ws.join(".output/block-dev.write.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

/// Runs a command as `unshare -n offline.sh SCENARIO USAGE ARGV…` with
/// the command's environment.
trait OfflineExt {
    fn output_of_offline(
        &mut self,
        wrapper: &Path,
        scenario: &Path,
        usage: &Path,
        argv: &[&str],
    ) -> Output;
}

impl OfflineExt for Command {
    fn output_of_offline(
        &mut self,
        wrapper: &Path,
        scenario: &Path,
        usage: &Path,
        argv: &[&str],
    ) -> Output {
        let envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = self
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
            .collect();
        let mut cmd = Command::new("unshare");
        cmd.arg("-n")
            .arg(wrapper)
            .arg(scenario)
            .arg(usage)
            .args(argv);
        for (k, v) in envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.output().expect("unshare runs")
    }
}

fn agent_block(extra: serde_json::Value) -> serde_json::Value {
    let mut block = serde_json::json!({
        "worker": "agent",
        "timeout": "2m",
        "file_restrictions": ["docs/**"],
        "prompt": {"task": "Write docs/hello.md saying hello."},
        "config": {"preset": "claude-code", "model": "claude-test-1"},
        "transitions": [
            {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
            {"on_signal": "SIGNAL:FAILED", "action": "FAIL:the agent failed"}
        ]
    });
    if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    block
}

fn write_turn(path: &str, input: u64, output: u64) -> serde_json::Value {
    serde_json::json!({
        "tool_use": {"name": "Write", "input": {"file_path": format!("{{cwd}}/{path}"), "content": "hello\n"}},
        "usage": {"input_tokens": input, "output_tokens": output}
    })
}

/// The CLI writes over an existing file only after reading it.
fn read_turn(path: &str, input: u64, output: u64) -> serde_json::Value {
    serde_json::json!({
        "tool_use": {"name": "Read", "input": {"file_path": format!("{{cwd}}/{path}")}},
        "usage": {"input_tokens": input, "output_tokens": output}
    })
}

pub(super) fn tokens(charged: &serde_json::Value) -> u64 {
    [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    .iter()
    .map(|k| charged[k].as_u64().unwrap())
    .sum()
}

#[test]
fn claude_code_writes_inside_its_restrictions_and_its_tokens_are_counted() {
    let Some(bin) = claude_or_skip() else { return };
    let t = Offline::new(bin);
    let scenario = serde_json::json!({"turns": [
        write_turn("docs/hello.md", 1200, 80),
        {"text": "Wrote docs/hello.md.",
         "usage": {"input_tokens": 1500, "output_tokens": 20, "cache_read_input_tokens": 700, "cache_creation_input_tokens": 33}}
    ]});
    let (code, report, charged) = t.run(agent_block(serde_json::json!({})), scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["status"], "succeeded", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/hello.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(charged["turns"], 2, "{charged}");
    let expected = tokens(&charged);
    assert_eq!(expected, 1200 + 80 + 1500 + 20 + 700 + 33);
    // Exactly what the server charged: in the run's statistics, the
    // block's output and its completion event.
    assert_eq!(report["statistics"]["tokens_used"], expected, "{report:#}");
    let output = t.block_output();
    assert_eq!(output["status"], "completed", "{output:#}");
    assert_eq!(output["summary"], "Wrote docs/hello.md.");
    assert_eq!(output["filesCreated"], serde_json::json!(["docs/hello.md"]));
    let usage = &output["usage"];
    assert_eq!(usage["inputTokens"], 2700);
    assert_eq!(usage["outputTokens"], 100);
    assert_eq!(usage["cacheReadTokens"], 700);
    assert_eq!(usage["cacheCreationTokens"], 33);
    assert_eq!(usage["model"], "claude-test-1");
    assert!(usage["sessionId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(usage["costUsd"].as_f64().is_some_and(|c| c > 0.0));
    let run = report["run_id"].as_str().unwrap();
    let events = run_events(t.scratch.path(), run);
    let completed: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["statistics"]["tokens_used"].as_u64() == Some(expected))
        .collect();
    assert!(
        !completed.is_empty(),
        "no event records the tokens: {events:#?}"
    );
    // Broken down as the CLI reported it, in the event.
    let usage = &completed[0]["statistics"]["usage"];
    assert_eq!(
        (
            usage["input_tokens"].as_u64(),
            usage["output_tokens"].as_u64(),
            usage["cache_read_tokens"].as_u64(),
            usage["cache_creation_tokens"].as_u64()
        ),
        (Some(2700), Some(100), Some(700), Some(33)),
        "{usage}"
    );
    assert!(usage["cost_micro_usd"].as_u64().is_some_and(|c| c > 0));
    let show = wfhost(&["show", run], t.scratch.path());
    assert!(
        stdout(&show).contains(&format!(
            "{expected} tokens (in 2700 · out 100 · cache 700 read, 33 written · $"
        )),
        "{}",
        stdout(&show)
    );
    // `show` sums them per run.
    let show = wfhost(&["show", run, "--json"], t.scratch.path());
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["statistics"]["tokens_used"], expected, "{shown:#}");
    assert_eq!(
        shown["blocks"]["dev.write"]["tokens_used"], expected,
        "{shown:#}"
    );
    // The CLI was offline: every request it made went to the server.
    let requests = std::fs::read_to_string(t.path("usage.json.requests.jsonl")).unwrap();
    assert_eq!(
        requests.lines().count() as u64,
        charged["requests"].as_u64().unwrap()
    );
}

#[test]
fn claude_code_is_refused_writes_outside_its_restrictions() {
    let Some(bin) = claude_or_skip() else { return };
    let t = Offline::new(bin);
    let scenario = serde_json::json!({"turns": [
        read_turn("README.md", 60, 5),
        write_turn("README.md", 100, 10),
        {"text": "I could not write README.md.", "usage": {"input_tokens": 150, "output_tokens": 8}}
    ]});
    let (code, report, charged) = t.run(agent_block(serde_json::json!({})), scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("README.md")).unwrap(),
        "# the project\n"
    );
    let output = t.block_output();
    let summary = output["summary"].as_str().unwrap();
    assert!(
        summary.contains("the CLI's permissions refused: Write README.md"),
        "{summary}\n{report:#}"
    );
    assert_eq!(report["statistics"]["tokens_used"], tokens(&charged));
}

#[test]
fn claude_code_writes_outside_are_rolled_back_when_its_own_permissions_are_overridden() {
    let Some(bin) = claude_or_skip() else { return };
    let t = Offline::new(bin);
    let scenario = serde_json::json!({"turns": [
        read_turn("README.md", 60, 5),
        write_turn("README.md", 100, 10),
        {"text": "Rewrote README.md.", "usage": {"input_tokens": 150, "output_tokens": 8}}
    ]});
    // The block's own command replaces the preset's argv: edits anywhere
    // are accepted by the CLI, and the host undoes the one outside.
    let block = agent_block(serde_json::json!({"config": {
        "preset": "claude-code",
        "command": ["claude", "-p", "--output-format", "json", "--model", "claude-test-1", "--permission-mode", "acceptEdits"]
    }}));
    let (code, report, charged) = t.run(block, scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("README.md")).unwrap(),
        "# the project\n",
        "the write outside the restrictions is undone"
    );
    let payload = serde_json::to_string(&report["payload"]).unwrap();
    assert!(
        payload.contains("outside the file restrictions (rolled back): README.md"),
        "{report:#}"
    );
    assert_eq!(report["statistics"]["tokens_used"], tokens(&charged));
}

#[test]
fn claude_code_without_a_final_result_fails_with_the_reason() {
    let Some(bin) = claude_or_skip() else { return };
    let t = Offline::new(bin);
    // The API refuses the first request: the CLI reports an error.
    let scenario = serde_json::json!({"turns": [
        {"error": {"status": 400, "type": "invalid_request_error", "message": "scripted refusal"}}
    ]});
    let (code, report, _) = t.run(agent_block(serde_json::json!({})), scenario);
    assert_eq!(code, Some(1), "{report:#}");
    let output = t.block_output();
    assert_eq!(output["status"], "failed");
    let summary = output["summary"].as_str().unwrap();
    assert!(summary.contains("scripted refusal"), "{summary}");
    assert!(!t.ws.join("docs/hello.md").exists());

    // A CLI that prints no result at all (here: not the CLI, whose
    // command the block replaced) fails saying so.
    let t = Offline::new(t.bin.clone());
    let block = agent_block(serde_json::json!({"config": {
        "preset": "claude-code", "command": ["true"]
    }}));
    let (code, report, _) = t.run(block, serde_json::json!({"turns": []}));
    assert_eq!(code, Some(1), "{report:#}");
    let summary = t.block_output()["summary"].as_str().unwrap().to_string();
    assert!(
        summary.contains("the CLI printed no final result"),
        "{summary}"
    );
}

#[test]
fn an_unknown_preset_is_refused_before_the_run_listing_the_presets() {
    let scratch = tempfile::tempdir().unwrap();
    let wf = serde_json::json!({
        "id": "preset",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "write", "blocks": {"write": {
            "worker": "agent",
            "config": {"preset": "claude"},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    for args in [
        vec!["validate", manifest.to_str().unwrap()],
        vec!["run", manifest.to_str().unwrap()],
    ] {
        let out = wfhost(&args, scratch.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("/nodes/dev/blocks/write/config/preset")
                && err.contains("`claude` is not an agent preset; the presets are `claude-code`"),
            "{err}"
        );
    }
}

/// A preset whose CLI is not installed fails its block with one line that
/// names the program and how to install it, before anything runs.
#[test]
fn a_preset_whose_cli_is_missing_says_how_to_install_it() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let wf = serde_json::json!({
        "id": "preset",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "write", "blocks": {"write": {
            "worker": "agent",
            "config": {"preset": "claude-code"},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    let empty = scratch.path().join("no-programs");
    std::fs::create_dir(&empty).unwrap();
    let out = command(scratch.path())
        .env("PATH", &empty)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("runs `claude`, which is not on PATH: install it with `npm install -g @anthropic-ai/claude-code@2.1.197`"),
        "{said}"
    );
}

pub(super) fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path.display().to_string());
        }
    }
    found
}
