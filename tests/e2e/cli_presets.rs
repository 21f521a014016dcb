//! The four presets with the real CLIs (the
//! versions pinned in `tests/agents/package.json`), offline: the whole
//! `wfhost run` in a network namespace with loopback only, against the
//! scripted model server (`tests/fixtures/model_server.py`), which speaks
//! each CLI's dialect and counts what it charges. The same cases for each
//! CLI, with its own tool names (`presets.rs` has more of Claude Code's).
//!
//! Needs the CLIs (`scripts/services.sh agents`) and `unshare -n` (root);
//! without them the tests skip saying why, or fail under
//! `WFHOST_REQUIRE_SERVICES=1`.

use super::presets::{Offline, cli_or_skip, tokens, walk};
use super::*;

/// One CLI: its preset, program, model and how the scripted server calls
/// its tools.
pub(super) struct Cli {
    preset: &'static str,
    program: &'static str,
    model: &'static str,
    /// A turn that writes `path` (workspace-relative) with its file tool.
    write: fn(&str) -> serde_json::Value,
    /// A turn that runs `command` with its shell tool.
    shell: fn(&str) -> serde_json::Value,
}

const CLAUDE: Cli = Cli {
    preset: "claude-code",
    program: "claude",
    model: "claude-test-1",
    write: |path| {
        serde_json::json!({"name": "Write",
            "input": {"file_path": format!("{{cwd}}/{path}"), "content": "hello\n"}})
    },
    shell: |command| serde_json::json!({"name": "Bash", "input": {"command": command}}),
};

const CODEX: Cli = Cli {
    preset: "codex",
    program: "codex",
    model: "gpt-5.5",
    write: |path| {
        serde_json::json!({"name": "apply_patch",
            "input": format!("*** Begin Patch\n*** Add File: {{cwd}}/{path}\n+hello\n*** End Patch\n")})
    },
    shell: |command| serde_json::json!({"name": "exec_command", "input": {"cmd": command}}),
};

const GEMINI: Cli = Cli {
    preset: "gemini",
    program: "gemini",
    model: "gemini-2.5-pro",
    write: |path| {
        serde_json::json!({"name": "write_file",
            "input": {"file_path": format!("{{cwd}}/{path}"), "content": "hello\n"}})
    },
    shell: |command| {
        serde_json::json!({"name": "run_shell_command",
            "input": {"command": command, "description": "a command"}})
    },
};

const OPENCODE: Cli = Cli {
    preset: "opencode",
    program: "opencode",
    model: "test-model",
    write: |path| {
        serde_json::json!({"name": "write",
            "input": {"filePath": format!("{{cwd}}/{path}"), "content": "hello\n"}})
    },
    shell: |command| {
        serde_json::json!({"name": "bash",
            "input": {"command": command, "description": "a command"}})
    },
};

impl Cli {
    fn block(&self, extra: serde_json::Value) -> serde_json::Value {
        let mut block = serde_json::json!({
            "worker": "agent",
            "timeout": "2m",
            "file_restrictions": ["docs/**"],
            "prompt": {"task": "Write docs/hello.md saying hello."},
            "config": {"preset": self.preset, "model": self.model},
            "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                {"on_signal": "SIGNAL:FAILED", "action": "FAIL:the agent failed"}
            ]
        });
        merge(&mut block, extra);
        block
    }

    fn turn(&self, call: serde_json::Value, input: u64, output: u64) -> serde_json::Value {
        serde_json::json!({"tool_use": call,
            "usage": {"input_tokens": input, "output_tokens": output}})
    }
}

fn merge(into: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(b), Some(e)) = (into.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            match (b.get_mut(k), v) {
                (Some(inner @ serde_json::Value::Object(_)), serde_json::Value::Object(_)) => {
                    merge(inner, v.clone())
                }
                _ => {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn one_block(block: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "id": "preset",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "write", "blocks": {"write": block}}}
    })
}

/// A write with its file tool and a shell write inside the restrictions,
/// then an answer: success, the files, the tokens exactly as charged (and
/// broken down), nothing written outside the workspace.
fn writes_inside_and_counts_its_tokens(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    let t = Offline::new(bin);
    let scenario = serde_json::json!({"turns": [
        cli.turn((cli.write)("docs/hello.md"), 1200, 40),
        cli.turn((cli.shell)("echo hi > docs/sh.txt && chmod 600 docs/sh.txt"), 1300, 30),
        {"text": "Wrote docs/hello.md and docs/sh.txt.",
         "usage": {"input_tokens": 200, "output_tokens": 12, "cache_read_input_tokens": 1400}}
    ]});
    let before: Vec<String> = list(t.scratch.path());
    let (code, report, charged) =
        t.run_workflow(one_block(cli.block(serde_json::json!({}))), scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["status"], "succeeded", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/hello.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/sh.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(charged["turns"], 3, "{charged}");
    let expected = tokens(&charged);
    assert_eq!(expected, 1200 + 40 + 1300 + 30 + 200 + 12 + 1400);
    assert_eq!(report["statistics"]["tokens_used"], expected, "{report:#}");
    let output = t.block_output();
    assert_eq!(output["status"], "completed", "{output:#}");
    assert_eq!(output["summary"], "Wrote docs/hello.md and docs/sh.txt.");
    let usage = &output["usage"];
    assert_eq!(usage["inputTokens"], 2700, "{usage}");
    assert_eq!(usage["outputTokens"], 82, "{usage}");
    assert_eq!(usage["cacheReadTokens"], 1400, "{usage}");
    assert!(usage["sessionId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        usage["model"]
            .as_str()
            .is_some_and(|m| m.contains(cli.model)),
        "{usage}"
    );
    // The PWD class: every file the CLI wrote is in the workspace; the
    // directory wfhost ran from has only what the test put there.
    let after = list(t.scratch.path());
    let new: Vec<&String> = after
        .iter()
        .filter(|p| !before.contains(p))
        .filter(|p| {
            ![
                "wf.json",
                "scenario.json",
                "usage.json",
                "home",
                "user-home",
                "cache",
            ]
            .iter()
            .any(|known| p.starts_with(known))
        })
        .collect();
    assert!(new.is_empty(), "written outside the workspace: {new:?}");
}

fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Writes outside the restrictions — its file tool's (refused by the
/// CLI's own rules, or rolled back) and a shell's new file and `chmod` —
/// leave nothing behind, and the run says so; `on_violation: fail` fails.
fn outside_writes_are_undone_and_reported(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let scenario = || {
        serde_json::json!({"turns": [
            cli.turn((cli.write)("README.md"), 100, 10),
            cli.turn((cli.shell)("echo x > notes.txt && chmod 600 README.md"), 110, 11),
            {"text": "Done.", "usage": {"input_tokens": 120, "output_tokens": 5}}
        ]})
    };
    let t = Offline::new(bin.clone());
    let mode = |ws: &Path| {
        std::fs::metadata(ws.join("README.md"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    let mode_before = mode(&t.ws);
    let (code, report, charged) =
        t.run_workflow(one_block(cli.block(serde_json::json!({}))), scenario());
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("README.md")).unwrap(),
        "# the project\n"
    );
    assert_eq!(mode(&t.ws), mode_before, "the chmod is undone");
    assert!(
        !t.ws.join("notes.txt").exists(),
        "the shell's file is undone"
    );
    let payload = serde_json::to_string(&report["payload"]).unwrap();
    assert!(
        payload.contains("outside the file restrictions (rolled back)")
            && payload.contains("notes.txt"),
        "{report:#}"
    );
    assert_eq!(report["statistics"]["tokens_used"], tokens(&charged));

    let t = Offline::new(bin);
    let block = cli.block(serde_json::json!({"config": {"on_violation": "fail"}}));
    let (code, report, _) = t.run_workflow(one_block(block), scenario());
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["status"], "failed", "{report:#}");
    assert!(t.ws.join("notes.txt").exists(), "left for inspection");
}

/// An API error fails the block with the server's reason; a CLI that
/// prints nothing fails saying so.
fn an_api_error_fails_with_the_reason(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    let t = Offline::new(bin);
    let scenario = serde_json::json!({"turns": [
        {"error": {"status": 400, "type": "invalid_request_error", "message": "scripted refusal"}}
    ]});
    let (code, report, _) = t.run_workflow(one_block(cli.block(serde_json::json!({}))), scenario);
    assert_eq!(code, Some(1), "{report:#}");
    let output = t.block_output();
    assert_eq!(output["status"], "failed", "{output:#}");
    let summary = output["summary"].as_str().unwrap();
    assert!(summary.contains("scripted refusal"), "{summary}");

    let t = Offline::new(t.bin.clone());
    let block = cli.block(serde_json::json!({"config": {"command": ["true"]}}));
    let (code, report, _) = t.run_workflow(one_block(block), serde_json::json!({"turns": []}));
    assert_eq!(code, Some(1), "{report:#}");
    let summary = t.block_output()["summary"].as_str().unwrap().to_string();
    assert!(
        summary.contains("the CLI printed no final result"),
        "{summary}"
    );
}

/// A model that never answers: the CLI is killed at the block's timeout,
/// with nothing of it left running.
fn a_hung_model_is_killed_at_the_timeout(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    let t = Offline::new(bin);
    let block = cli.block(serde_json::json!({"timeout": "8s"}));
    let started = std::time::Instant::now();
    let (code, report, _) = t.run_workflow(
        one_block(block),
        serde_json::json!({"turns": [{"hang": true}]}),
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let summary = t.block_output()["summary"].as_str().unwrap().to_string();
    assert!(summary.contains("timed out"), "{summary}");
    let left = processes_in(&t.ws);
    assert!(left.is_empty(), "still running in the workspace: {left:?}");
}

/// Processes whose working directory is in `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd"))
            && cwd.starts_with(dir)
        {
            let cmd = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{pid}: {}", cmd.replace('\0', " ")));
        }
    }
    found
}

/// A block executed again in a fix loop with `resume: true` continues the
/// CLI's session (the model sees the first conversation), and its tokens
/// are this execution's own.
fn continues_its_session_in_a_fix_loop(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    let t = Offline::new(bin);
    let write = cli.block(serde_json::json!({
        "config": {"resume": true},
        "transitions": [
            {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:check"},
            {"on_signal": "SIGNAL:FAILED", "action": "FAIL:the agent failed"}
        ]
    }));
    let wf = serde_json::json!({
        "id": "preset-loop",
        "plugins": {"agent": {"grants": ["agent"]}, "exec": {"grants": ["exec"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "write", "blocks": {
            "write": write,
            "check": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["test", "-f", "docs/second.md"]}]},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:EXEC_FAILED", "action": "JUMP:write"}
                ]
            }
        }}}
    });
    let scenario = serde_json::json!({"turns": [
        cli.turn((cli.write)("docs/hello.md"), 100, 10),
        {"text": "Wrote docs/hello.md.", "usage": {"input_tokens": 120, "output_tokens": 5}},
        cli.turn((cli.write)("docs/second.md"), 300, 20),
        {"text": "Wrote docs/second.md too.", "usage": {"input_tokens": 320, "output_tokens": 6}}
    ]});
    let (code, report, charged) = t.run_workflow(wf, scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert!(t.ws.join("docs/second.md").is_file());
    // Exactly what was charged: a CLI that reports the session's total
    // is not counted twice.
    assert_eq!(
        report["statistics"]["tokens_used"],
        tokens(&charged),
        "{report:#}"
    );
    let requests = t.loop_requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let size = |r: &serde_json::Value| r["body"].to_string().len();
    assert!(
        size(&requests[2]) > size(&requests[0]) + 100,
        "the second execution's first request carries the first conversation"
    );
    let run = report["run_id"].as_str().unwrap();
    let home = t.ws.join(format!(".output/agent/{run}/home/dev.write"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".wfhost-session")).unwrap())
            .unwrap();
    let session = record["session"].as_str().unwrap();
    let outputs: Vec<String> = run_events(t.scratch.path(), run)
        .iter()
        .filter(|e| e["type"] == "block_completed" && e["block"] == "write")
        .map(|e| e["artifact"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(outputs.len(), 2);
    assert!(
        outputs.iter().all(|o| o.contains(session)),
        "both executions report session {session}: {outputs:#?}"
    );
}

/// Two agents in parallel lanes: a state directory each, a session each.
fn lanes_keep_their_own_state(cli: &Cli) {
    let Some(bin) = cli_or_skip(cli.program) else {
        return;
    };
    let t = Offline::new(bin);
    let block = cli.block(serde_json::json!({
        "parallel": {
            "merge_strategy": "workspace",
            "lanes": {"a": {"prompt": {"task": "Say a."}}, "b": {"prompt": {"task": "Say b."}}}
        },
        "transitions": [
            {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
            {"on_signal": "SIGNAL:PARTIAL", "action": "FAIL:a lane failed"},
            {"on_signal": "SIGNAL:FAILED", "action": "FAIL:the lanes failed"}
        ]
    }));
    let scenario = serde_json::json!({"turns": [
        {"text": "Done.", "usage": {"input_tokens": 10, "output_tokens": 1}},
        {"text": "Done.", "usage": {"input_tokens": 20, "output_tokens": 2}}
    ]});
    let (code, report, charged) = t.run_workflow(one_block(block), scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["statistics"]["tokens_used"], tokens(&charged));
    let run = report["run_id"].as_str().unwrap();
    let mut sessions = Vec::new();
    for lane in ["a", "b"] {
        let home =
            t.ws.join(format!(".output/agent/{run}/home/dev.write.{lane}"));
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(home.join(".wfhost-session"))
                .unwrap_or_else(|e| panic!("lane {lane}: {e}")),
        )
        .unwrap();
        sessions.push(record["session"].as_str().unwrap().to_string());
        assert!(
            walk(&home).len() > 1,
            "lane {lane}'s CLI kept its state at home"
        );
    }
    assert_ne!(sessions[0], sessions[1]);
}

macro_rules! cases {
    ($cli:ident, $module:ident) => {
        mod $module {
            use super::*;

            #[test]
            fn writes_inside_and_counts_its_tokens() {
                super::writes_inside_and_counts_its_tokens(&$cli);
            }

            #[test]
            fn outside_writes_are_undone_and_reported() {
                super::outside_writes_are_undone_and_reported(&$cli);
            }

            #[test]
            fn an_api_error_fails_with_the_reason() {
                super::an_api_error_fails_with_the_reason(&$cli);
            }

            #[test]
            fn a_hung_model_is_killed_at_the_timeout() {
                super::a_hung_model_is_killed_at_the_timeout(&$cli);
            }

            #[test]
            fn continues_its_session_in_a_fix_loop() {
                super::continues_its_session_in_a_fix_loop(&$cli);
            }

            #[test]
            fn lanes_keep_their_own_state() {
                super::lanes_keep_their_own_state(&$cli);
            }
        }
    };
}

cases!(CLAUDE, claude);
cases!(CODEX, codex);
cases!(GEMINI, gemini);
cases!(OPENCODE, opencode);

/// A key given by reference (`{"secret": NAME}`) or passed through from
/// wfhost's environment reaches the CLI, and never what the host keeps or
/// shows: the store, the bundle (where the CLI echoed it), an export, the
/// logs, the events.
#[test]
fn a_key_reaches_the_cli_and_nothing_the_host_keeps() {
    let Some(bin) = cli_or_skip(CODEX.program) else {
        return;
    };
    const SECRET: &str = "sk-s3cr3t-v4lue-42";
    const PASSED: &str = "sk-p4ssed-v4lue-77";
    for (by_reference, value) in [(true, SECRET), (false, PASSED)] {
        let t = Offline::new(bin.clone());
        let mut extra = serde_json::json!({});
        if by_reference {
            let mut child = command(t.scratch.path())
                .args(["secret", "set", "OPENAI_KEY"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(SECRET.as_bytes())
                .unwrap();
            assert!(child.wait().unwrap().success());
            extra = serde_json::json!({"config": {"env": {"OPENAI_API_KEY": {"secret": "OPENAI_KEY"}}}});
        }
        let scenario = serde_json::json!({"turns": [
            CODEX.turn((CODEX.shell)("echo key=$OPENAI_API_KEY"), 10, 1),
            {"text": "Done.", "usage": {"input_tokens": 10, "output_tokens": 1}}
        ]});
        let (code, report, _) = if by_reference {
            t.run_workflow(one_block(CODEX.block(extra)), scenario)
        } else {
            t.run_workflow_with(
                one_block(CODEX.block(extra)),
                scenario,
                &[("OPENAI_API_KEY", PASSED)],
            )
        };
        assert_eq!(code, Some(0), "{report:#}");
        let run = report["run_id"].as_str().unwrap().to_string();
        // The CLI had it: its shell printed it, masked where kept.
        let bundle_stdout: String = walk(&t.ws.join(".output/agent"))
            .iter()
            .filter(|p| p.ends_with("cmd-1.stdout"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        assert!(bundle_stdout.contains("key=***"), "{bundle_stdout}");
        for file in walk(t.scratch.path()) {
            // The secret itself; the CLI's own state (its transcript holds
            // what its shell printed, as the model saw it); the model
            // server's log of what it was sent.
            let own = file.ends_with("secrets/OPENAI_KEY")
                || file.contains("/.output/agent/") && file.contains("/home/")
                || file.contains("usage.json");
            if own {
                continue;
            }
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                "{file} holds the key"
            );
        }
        for args in [
            vec!["export", run.as_str(), "-o", "-"],
            vec!["logs", run.as_str()],
            vec!["events", run.as_str(), "--json"],
            vec!["show", run.as_str(), "--json"],
        ] {
            let out = wfhost(&args, t.scratch.path());
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
            assert!(!stdout(&out).contains(value), "{args:?} shows the key");
        }
    }
}

/// The image the container test runs Codex in: the test image with the
/// pinned Codex (a static binary) added, built here once (nothing is
/// pulled); `None` after saying why the test skips.
fn codex_image(bin: &Path) -> Option<String> {
    const IMAGE: &str = "wfhost-test/codex:0.169.0";
    let docker = |args: &[&str]| Command::new("docker").args(args).output();
    let skip = |why: String| {
        assert!(
            std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "the container agent test cannot run: {why}"
        );
        eprintln!("skipped: {why}");
        None
    };
    match docker(&["image", "inspect", IMAGE]) {
        Ok(out) if out.status.success() => return Some(IMAGE.into()),
        Ok(_) => {}
        Err(e) => return skip(format!("docker: {e}")),
    }
    match docker(&["image", "inspect", "wfhost-test/busybox:1"]) {
        Ok(out) if out.status.success() => {}
        _ => return skip("no wfhost-test/busybox:1: run scripts/services.sh docker".into()),
    }
    let binary = bin
        .join("../@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        .canonicalize()
        .ok()?;
    let context = tempfile::tempdir().unwrap();
    if std::fs::hard_link(&binary, context.path().join("codex")).is_err() {
        std::fs::copy(&binary, context.path().join("codex")).unwrap();
    }
    std::fs::write(
        context.path().join("Dockerfile"),
        "FROM wfhost-test/busybox:1\nCOPY codex /bin/codex\n",
    )
    .unwrap();
    let built = Command::new("docker")
        .args(["build", "-q", "-t", IMAGE])
        .arg(context.path())
        .env("DOCKER_BUILDKIT", "0")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "building {IMAGE}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(IMAGE.into())
}

/// Codex in a container, which has no network: the endpoint its
/// environment names is relayed into it, and the run is the same as on the
/// host — the file, the answer, the tokens exactly as charged.
#[test]
fn codex_in_a_container_reaches_its_model_through_the_forward() {
    let Some(bin) = cli_or_skip(CODEX.program) else {
        return;
    };
    let Some(image) = codex_image(&bin) else {
        return;
    };
    let t = Offline::new(bin);
    let block = CODEX.block(serde_json::json!({
        "config": {"executor": {"container": {"image": image}}}
    }));
    let scenario = serde_json::json!({"turns": [
        CODEX.turn((CODEX.write)("docs/hello.md"), 500, 20),
        {"text": "Wrote docs/hello.md in the container.",
         "usage": {"input_tokens": 600, "output_tokens": 8}}
    ]});
    let (code, report, charged) = t.run_workflow(one_block(block), scenario);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/hello.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(charged["turns"], 2, "{charged}");
    assert_eq!(report["statistics"]["tokens_used"], tokens(&charged));
    let output = t.block_output();
    assert_eq!(output["summary"], "Wrote docs/hello.md in the container.");
    // It ran in the container.
    let bundle = walk(&t.ws.join(".output/agent"))
        .into_iter()
        .find(|p| p.ends_with("manifest.json"))
        .expect("a bundle");
    let result = std::fs::read_to_string(bundle).unwrap();
    assert!(result.contains(&image), "{result}");
}

/// A forward that is not one is refused before the run, naming the field.
#[test]
fn a_bad_forward_is_refused_before_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let wf = one_block(CODEX.block(serde_json::json!({
        "config": {"executor": {"container": {"image": "x", "forward": ["10.1.2.3:80"]}}}
    })));
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    let out = wfhost(&["validate", manifest.to_str().unwrap()], scratch.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("/config/executor/container/forward") && err.contains("loopback"),
        "{err}"
    );
}

/// Under `wfhost serve` a run's blocks are jobs leased by agents: a preset
/// block runs there as it does in `wfhost run` (the server, its local
/// agent and the CLI all offline in the same network namespace).
#[test]
fn a_preset_block_runs_as_a_leased_job_under_the_server() {
    let Some(bin) = cli_or_skip(CODEX.program) else {
        return;
    };
    let t = Offline::new(bin.clone());
    let manifest = t.path("wf.json");
    std::fs::write(
        &manifest,
        one_block(CODEX.block(serde_json::json!({}))).to_string(),
    )
    .unwrap();
    let scenario = serde_json::json!({"turns": [
        CODEX.turn((CODEX.write)("docs/hello.md"), 300, 9),
        {"text": "Wrote it as a job.", "usage": {"input_tokens": 310, "output_tokens": 4}}
    ]});
    std::fs::write(t.path("scenario.json"), scenario.to_string()).unwrap();
    // Start the server, start the run over the API, wait for its end,
    // print the run.
    let script = r#"
set -eu
"$WFHOST" serve --listen 127.0.0.1:0 > serve.out 2> serve.err &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do grep -q http serve.out 2>/dev/null && break; sleep 0.05; done
base=$(grep -o 'http://[0-9.:]*' serve.out | head -1)
id=$(curl -sf -X POST "$base/v1/runs" -H 'content-type: application/json' \
  -d "{\"workflow\": \"$MANIFEST\", \"workspace\": \"$WS\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])')
status=none
for _ in $(seq 1 1200); do
  # A poll that fails (a busy machine) is said and tried again.
  status=$(curl -sf "$base/v1/runs/$id/summary" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])') \
    || { echo "poll failed (status so far: $status)" >&2; status=unknown; }
  case $status in succeeded|failed) break;; esac
  sleep 0.1
done
echo "run $id: $status" >&2
curl -sf "$base/v1/runs/$id"
"#;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("unshare")
        .arg("-n")
        .arg(repo().join("tests/fixtures/offline.sh"))
        .arg(t.path("scenario.json"))
        .arg(t.path("usage.json"))
        .args(["bash", "-c", script])
        .current_dir(t.scratch.path())
        .env("WFHOST", env!("CARGO_BIN_EXE_wfhost"))
        .env("WFHOST_HOME", t.scratch.path().join("home"))
        .env("WFHOST_CACHE_DIR", t.scratch.path().join("cache"))
        .env("MANIFEST", &manifest)
        .env("WS", &t.ws)
        .env("PATH", path)
        .env("HOME", t.path("user-home"))
        .env("OPENAI_API_KEY", "test-key")
        .output()
        .unwrap();
    // What the server and the run process said, for any failure below.
    let said = || {
        let logs = std::fs::read_dir(t.path("home").join("serve-logs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                format!("{}:\n{text}", e.path().display())
            })
            .collect::<Vec<_>>()
            .join("\n");
        format!(
            "script: {}\nserver: {}\n{logs}",
            stderr(&out),
            std::fs::read_to_string(t.path("serve.err")).unwrap_or_default()
        )
    };
    let run: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no run ({e}): {}\n{}", stdout(&out), said()));
    assert_eq!(run["status"], "succeeded", "{run:#}\n{}", said());
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/hello.md")).unwrap(),
        "hello\n"
    );
    let charged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path("usage.json")).unwrap()).unwrap();
    assert_eq!(
        run["state"]["statistics"]["tokens_used"]
            .as_u64()
            .or(run["statistics"]["tokens_used"].as_u64()),
        Some(tokens(&charged)),
        "{run:#}"
    );
}
