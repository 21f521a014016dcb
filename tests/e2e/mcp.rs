//! `wfhost mcp` driven by the official Python MCP client (`mcp` on PyPI),
//! installed into a virtualenv under the target directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{repo, stderr, stdout, wfhost};

/// The pinned client the suite drives the server with.
const CLIENT: &str = "mcp==2.3.0";

/// A Python with the MCP client, or why there is none.
fn client_python() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-client-venv");
    let python = venv.join("bin/python");
    let ready = venv.join(".installed");
    if std::fs::read_to_string(&ready).is_ok_and(|v| v == CLIENT) {
        return Ok(python);
    }
    // One installer at a time, across the threads of `cargo test` and the
    // processes of `cargo nextest`: a second one would find a half-made
    // virtualenv (no `bin/pip` yet). The lock goes with the file.
    let lock = std::fs::File::create(venv.with_extension("lock")).map_err(|e| e.to_string())?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "locking the client's virtualenv: {}",
            std::io::Error::last_os_error()
        ));
    }
    if std::fs::read_to_string(&ready).is_ok_and(|v| v == CLIENT) {
        return Ok(python);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            CLIENT,
        ]),
        "pip install mcp",
    )?;
    std::fs::write(&ready, CLIENT).map_err(|e| e.to_string())?;
    Ok(python)
}

/// Run a client script of `tests/mcp/` against `wfhost mcp` serving
/// `workflows`; it prints "all checks passed" when every check held.
fn run_client(script: &str, workflows: &Path) {
    run_client_on(script, workflows, None)
}

/// [`run_client`] with the home's run store in `db` (PostgreSQL).
fn run_client_on(script: &str, workflows: &Path, db: Option<&wfhost_store::testing::TestDatabase>) {
    let python = match client_python() {
        Ok(p) => p,
        Err(why) => {
            assert!(
                std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "the Python MCP client could not be installed: {why}"
            );
            eprintln!("skipped: the Python MCP client could not be installed: {why}");
            return;
        }
    };
    let scratch = tempfile::tempdir().unwrap();
    let ws = super::workspace_in(scratch.path());
    if let Some(db) = db {
        db.configure(&scratch.path().join("home"));
    }
    let out = Command::new(python)
        .arg(repo().join("tests/mcp").join(script))
        .arg(env!("CARGO_BIN_EXE_wfhost"))
        .arg(scratch.path().join("home"))
        .arg(workflows)
        .arg(&ws)
        .arg(scratch.path().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn a_real_mcp_client_walks_the_contract() {
    run_client("client.py", &repo().join("examples/mcp/workflows"));
}

/// The same contract with the home's runs in PostgreSQL: acks, replays
/// and the run's lock taken call after call live in the database.
#[test]
fn a_real_mcp_client_walks_the_contract_on_postgres() {
    let Some(db) = wfhost_store::testing::TestDatabase::create() else {
        return;
    };
    run_client_on(
        "client.py",
        &repo().join("examples/mcp/workflows"),
        Some(&db),
    );
    let reader = tempfile::tempdir().unwrap();
    db.configure(reader.path());
    let store = wfhost_store::Store::open_existing(reader.path()).unwrap();
    let runs = store
        .list_runs(&wfhost_store::RunFilter::default(), 100)
        .unwrap()
        .runs;
    assert!(!runs.is_empty(), "the runs were recorded in the database");
}

/// Every WorkRail compiler construct, driven over MCP with the Python
/// client: the step sequence, blocked replies, placeholders, tags.
#[test]
fn workrail_constructs_run_as_workrail_runs_them() {
    run_client(
        "workrail_constructs.py",
        &repo().join("tests/fixtures/workrail"),
    );
}

#[test]
fn rotate_key_keeps_the_previous_key() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    for expected in ["new token key 2", "new token key 3"] {
        let out = super::wfhost(
            &["mcp", "rotate-key", "--home", home.to_str().unwrap()],
            scratch.path(),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(expected),
            "{stdout}"
        );
    }
    let keys: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("mcp-keys.json")).unwrap())
            .unwrap();
    let kids: Vec<u64> = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_u64().unwrap())
        .collect();
    assert_eq!(kids, [2, 3]);
}

#[test]
fn wfhost_run_waits_at_an_external_block() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = super::workspace_in(scratch.path());
    let manifest = repo().join("examples/mcp/workflows/review.json");
    let out = super::run_workflow(&manifest, &ws, scratch.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("waiting at main.draft, an external block"),
        "{stdout}"
    );
}

#[test]
fn a_workrail_file_validates_lists_inspects_and_runs_to_its_first_step() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = repo().join("examples/mcp/workflows");
    let triage = dir.join("triage.json");
    let out = wfhost(
        &["validate", triage.to_str().unwrap(), "--strict"],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("ok: workflow `triage` 1.0.0: 1 node, 9 blocks"),
        "{}",
        stdout(&out)
    );
    let listed = stdout(&wfhost(&["list", dir.to_str().unwrap()], scratch.path()));
    assert!(
        listed.contains("triage  1.0.0") && listed.contains("review"),
        "{listed}"
    );
    let shown = stdout(&wfhost(
        &["inspect", triage.to_str().unwrap()],
        scratch.path(),
    ));
    assert!(
        shown.contains("block fix-loop [wr.loop]")
            && shown.contains("block escalate_when [wr.when]"),
        "{shown}"
    );
    let ws = super::workspace_in(scratch.path());
    let out = super::run_workflow(&triage, &ws, scratch.path());
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("waiting at main.gather, an external block")
            && stdout(&out).contains("resume_session"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_workrail_file_naming_what_does_not_exist_is_refused_by_pointer() {
    let scratch = tempfile::tempdir().unwrap();
    let mut wf: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/mcp/workflows/triage.json")).unwrap(),
    )
    .unwrap();
    wf["features"] = serde_json::json!(["wr.features.capabilities", "wr.features.telepathy"]);
    let file = scratch.path().join("bad.json");
    std::fs::write(&file, wf.to_string()).unwrap();
    let out = wfhost(&["validate", file.to_str().unwrap()], scratch.path());
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(
            "bad.json: /features/1: WorkRail workflow: unknown feature `wr.features.telepathy`"
        ),
        "{}",
        stderr(&out)
    );
}

/// `wfhost mcp` serving `workflows` with runs in `ws`, its standard input
/// and output piped.
fn spawn_mcp(scratch: &Path, workflows: &Path, ws: &Path) -> std::process::Child {
    super::command(scratch)
        .args(["mcp", "--workflows"])
        .arg(workflows)
        .arg("--workspace")
        .arg(ws)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Send `requests` (JSON-RPC, one per line) to a `wfhost mcp` and return
/// its answers by id.
fn exchange(requests: &[serde_json::Value]) -> std::collections::HashMap<u64, serde_json::Value> {
    use std::io::{BufRead, Write};
    let scratch = tempfile::tempdir().unwrap();
    let ws = super::workspace_in(scratch.path());
    let mut child = spawn_mcp(scratch.path(), &repo().join("examples/mcp/workflows"), &ws);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answers = std::collections::HashMap::new();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let Some(id) = request["id"].as_u64() else {
            continue; // a notification: no answer
        };
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], id, "{line}");
        answers.insert(id, answer);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    answers
}

#[test]
fn every_protocol_version_from_2025_03_26_is_negotiated_in_its_own_lifecycle() {
    use serde_json::json;
    let client = json!({"name": "e2e", "version": "1"});
    // The handshake lifecycle: each version the server serves is echoed,
    // one it does not (older, or unknown) is answered with one it does.
    for (asked, agreed) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let answers = exchange(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
                {"protocolVersion": asked, "capabilities": {}, "clientInfo": client}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
                {"name": "workflow_list", "arguments": {}}}),
        ]);
        assert_eq!(
            answers[&1]["result"]["protocolVersion"], agreed,
            "asked {asked}: {}",
            answers[&1]
        );
        let listed = &answers[&2]["result"]["structuredContent"]["workflows"];
        assert!(
            listed.as_array().is_some_and(|w| !w.is_empty()),
            "{asked}: {}",
            answers[&2]
        );
    }
    // The 2026-07-28 lifecycle: no handshake, the version and the client's
    // capabilities in every request's `_meta`.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client,
    });
    let answers = exchange(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
            {"name": "workflow_list", "arguments": {}, "_meta": meta}}),
    ]);
    let versions = &answers[&1]["result"]["supportedVersions"];
    for v in ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(
            versions.as_array().unwrap().iter().any(|x| x == v),
            "{v} not in {versions}"
        );
    }
    assert!(
        !versions
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == "2024-11-05")
    );
    assert!(
        answers[&2]["result"]["structuredContent"]["workflows"].is_array(),
        "{}",
        answers[&2]
    );
}

/// Every line a client sends is answered: a line that is not JSON, one
/// nested too deep, one too long, JSON that is not a request each get
/// JSON-RPC's error with a null id, and the server goes on to answer the
/// requests after them.
#[test]
fn every_line_is_answered_and_the_server_goes_on() {
    use serde_json::{Value, json};
    use std::io::{BufRead, Write};
    use std::sync::mpsc;
    let scratch = tempfile::tempdir().unwrap();
    let ws = super::workspace_in(scratch.path());
    let mut child = super::command(scratch.path())
        .args(["mcp", "--workflows"])
        .arg(repo().join("examples/mcp/workflows"))
        .arg("--workspace")
        .arg(&ws)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Answers are awaited with a deadline: a line left unanswered fails
    // the test instead of hanging it.
    let (tx, answers) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> Value {
        let line = answers
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no answer to {what}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"))
    };
    let mut send = |line: &[u8]| {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let too_long = vec![b'x'; 16 * 1024 * 1024 + 1];
    let deep = "[".repeat(10_000);
    for (what, line, code, says) in [
        ("garbage", &b"this is not json {"[..], -32700, "not JSON"),
        (
            "10,000 nested [",
            deep.as_bytes(),
            -32700,
            "deeper than 127 levels",
        ),
        (
            "a 16 MiB + 1 line",
            &too_long,
            -32700,
            "longer than 16777216 bytes",
        ),
        ("a JSON array", b"[1, 2, 3]", -32600, "not an array"),
        ("a JSON number", b"42", -32600, "not a number"),
        (
            "an object that is no request",
            br#"{"hello": "world"}"#,
            -32600,
            "Invalid Request",
        ),
    ] {
        send(line);
        let answer = next(what);
        assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
        assert!(
            answer.as_object().unwrap().get("id") == Some(&Value::Null),
            "{what}: {answer}"
        );
        assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{what}: {message}");
    }
    // Then a normal session.
    let client = json!({"name": "e2e", "version": "1"});
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}})
        .to_string()
        .as_bytes(),
    );
    let init = next("initialize");
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    send(br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#);
    // Bad lines in the middle of a session are answered too.
    send(b"}{");
    let bad = next("}{ in the session");
    assert_eq!(
        (bad["id"].clone(), bad["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    send(br#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#);
    let tools = next("tools/list");
    assert_eq!(tools["id"], 2, "{tools}");
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "workflow_list")),
        "{tools}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

/// A workflow whose exec block waits for `gate` to exist, then ends.
fn waiting_workflow(gate: &Path) -> serde_json::Value {
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo done",
        gate.display()
    );
    serde_json::json!({
        "id": "wait",
        "plugins": {"exec": {"grants": ["exec"]}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
            "worker": "exec",
            "config": {"commands": [{"argv": ["sh", "-c", script]}], "allow_shell": true},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    })
}

/// Whether a process holds the lock of workspace `ws` (read from
/// `/proc/locks`, without taking it).
fn a_workspace_is_locked(ws: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(ws).unwrap().ino().to_string();
    std::fs::read_to_string("/proc/locks")
        .unwrap()
        .lines()
        .any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(1) == Some(&"FLOCK")
                && fields
                    .get(5)
                    .is_some_and(|id| id.rsplit(':').next() == Some(inode.as_str()))
        })
}

/// A run advanced over MCP and a run of `wfhost run` on the same workspace
/// exclude each other while they execute, both ways.
#[test]
fn an_mcp_run_and_a_cli_run_exclude_each_other_on_one_workspace() {
    use serde_json::json;
    use std::io::{BufRead, Write};
    let scratch = tempfile::tempdir().unwrap();
    let ws = super::workspace_in(scratch.path());
    let workflows = scratch.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    let mcp_gate = scratch.path().join("mcp-go");
    std::fs::write(
        workflows.join("wait.json"),
        waiting_workflow(&mcp_gate).to_string(),
    )
    .unwrap();
    let cli_gate = scratch.path().join("cli-go");
    let cli_manifest = scratch.path().join("cli.json");
    std::fs::write(&cli_manifest, waiting_workflow(&cli_gate).to_string()).unwrap();
    let mut mcp = spawn_mcp(scratch.path(), &workflows, &ws);
    let mut stdin = mcp.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(mcp.stdout.take().unwrap());
    let mut call = |id: u64, request: serde_json::Value, answer: bool| {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        if !answer {
            return json!(null);
        }
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], id, "{line}");
        answer
    };
    let client = json!({"name": "e2e", "version": "1"});
    call(
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}}),
        true,
    );
    call(
        0,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    );
    let start = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "workflow_start", "arguments": {"workflowId": "wait"}}});

    // The MCP run executes: a CLI run on its workspace is refused, busy.
    call(2, start.clone(), false);
    super::wait_until("the MCP run holds the workspace", || {
        a_workspace_is_locked(&ws)
    });
    let refused = super::command(scratch.path())
        .args([
            "run",
            cli_manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(4),
        "{}",
        super::stderr(&refused)
    );
    assert!(
        super::stderr(&refused).contains("is in use by run"),
        "{}",
        super::stderr(&refused)
    );
    std::fs::write(&mcp_gate, "").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let done: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(done["id"], 2, "{done}");
    assert!(
        done["error"].is_null() && done["result"]["isError"] != true,
        "{done}"
    );
    assert!(
        !a_workspace_is_locked(&ws),
        "the MCP run let go of the workspace"
    );

    // A CLI run executes: an MCP run on its workspace is refused.
    std::fs::remove_file(&mcp_gate).unwrap();
    let mut cli = super::command(scratch.path())
        .args([
            "run",
            cli_manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    super::wait_until("the CLI run holds the workspace", || {
        a_workspace_is_locked(&ws)
    });
    let start = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params":
        {"name": "workflow_start", "arguments": {"workflowId": "wait"}}});
    writeln!(stdin, "{start}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("is in use by run"), "{line}");
    std::fs::write(&cli_gate, "").unwrap();
    assert!(cli.wait().unwrap().success());
    drop(stdin);
    let _ = mcp.wait();
}

/// The client configurations of `docs/guide/mcp.md`, as a client runs
/// them: from the user's home directory, with a home and workspace of
/// their own (its `/home/me` made a scratch directory).
#[test]
fn the_guides_client_configurations_work_from_the_users_home() {
    use serde_json::json;
    let guide = std::fs::read_to_string(repo().join("docs/guide/mcp.md")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let me = scratch.path().join("me");
    let project = me.join("project");
    std::fs::create_dir_all(project.join("workflows")).unwrap();
    for file in ["triage.json", "review.json"] {
        std::fs::copy(
            repo().join("examples/mcp/workflows").join(file),
            project.join("workflows").join(file),
        )
        .unwrap();
    }
    let configs: Vec<serde_json::Value> = guide
        .split("```json\n")
        .skip(1)
        .filter_map(|block| block.split("\n```").next())
        .filter(|block| block.contains("mcpServers"))
        .map(|block| {
            let block = block.replace("/home/me", me.to_str().unwrap());
            serde_json::from_str(&block).unwrap_or_else(|e| panic!("{e}: {block}"))
        })
        .collect();
    assert!(configs.len() >= 2, "{configs:?}");
    let start = |server: &serde_json::Value, args: &[String]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wfhost"));
        cmd.args(args)
            .current_dir(&me)
            .env("HOME", &me)
            .env("WFHOST_CACHE_DIR", scratch.path().join("cache"))
            .env_remove("WFHOST_HOME")
            .env_remove("XDG_DATA_HOME");
        for (k, v) in server["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap());
        }
        mcp_start(cmd)
    };
    for config in &configs {
        let server = &config["mcpServers"]["wfhost"];
        assert!(
            server["command"].as_str().unwrap().starts_with('/'),
            "{server}"
        );
        let args: Vec<String> = serde_json::from_value(server["args"].clone()).unwrap();
        let after = |flag: &str| args.iter().skip_while(|a| *a != flag).nth(1).cloned();
        for flag in ["--workflows", "--workspace"] {
            assert!(
                after(flag).is_some_and(|p| p.starts_with('/')),
                "{flag}: {server}"
            );
        }
        let home =
            after("--home").or_else(|| server["env"]["WFHOST_HOME"].as_str().map(String::from));
        assert!(
            home.is_some_and(|h| h.starts_with('/')),
            "no absolute home: {server}"
        );
        let answer = start(server, &args);
        assert!(
            answer["structuredContent"]["code"].is_null(),
            "{server}: {answer}"
        );
    }
    // Without them, the workspace is the user's home, which holds the
    // default wfhost home: refused, as the guide says.
    let bare = [
        "mcp".to_string(),
        "--workflows".into(),
        project.join("workflows").display().to_string(),
    ];
    let answer = start(&json!({}), &bare);
    assert_eq!(
        answer["structuredContent"]["code"], "PRECONDITION_FAILED",
        "{answer}"
    );
    assert!(
        answer.to_string().contains("contains the wfhost home"),
        "{answer}"
    );
}

/// Start the workflow `triage` through the `wfhost mcp` that `cmd` runs;
/// the tool call's result.
fn mcp_start(mut cmd: Command) -> serde_json::Value {
    use serde_json::json;
    use std::io::{BufRead, Write};
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let client = json!({"name": "e2e", "version": "1"});
    for request in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
            {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": client}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
            {"name": "workflow_start", "arguments": {"workflowId": "triage"}}}),
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answer = serde_json::Value::Null;
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        answer = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    drop(stdin);
    let _ = child.wait();
    assert_eq!(answer["id"], 2, "{answer}");
    answer["result"].clone()
}
