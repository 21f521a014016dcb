//! The dashboard in a real browser: Debian's chromium, headless, driven by
//! playwright-core (`tests/dashboard/drive.mjs`, installed with `npm ci`
//! under the target directory on first use) against `wfhost serve`.
//! Screenshots are kept in `<target>/tmp/dashboard-shots/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use wfhost_core::run::event::{CommandRecord, Event, EventSink, PayloadDelta};
use wfhost_core::run::payload::{ContextSegment, Statistics};
use wfhost_store::{Durability, RunRecord, Store};

use super::serve::{await_status, http_get, http_post, serve_with};
use super::{command, repo, stderr, workspace_in};

/// The browser the tests drive.
const CHROMIUM: &str = "/usr/bin/chromium";

/// `node` and a directory with playwright-core installed, or why not.
fn driver() -> Result<PathBuf, String> {
    if !Path::new(CHROMIUM).exists() {
        return Err(format!("no {CHROMIUM}: run scripts/services.sh browser"));
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-driver");
    let lock = std::fs::read_to_string(repo().join("tests/dashboard/package-lock.json"))
        .map_err(|e| e.to_string())?;
    let ready = dir.join(".installed");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // The script each time; the packages when the lock file changed.
    std::fs::copy(
        repo().join("tests/dashboard/drive.mjs"),
        dir.join("drive.mjs"),
    )
    .map_err(|e| format!("drive.mjs: {e}"))?;
    if std::fs::read_to_string(&ready).is_ok_and(|l| l == lock) {
        return Ok(dir);
    }
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(repo().join("tests/dashboard").join(f), dir.join(f))
            .map_err(|e| format!("{f}: {e}"))?;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--silent"])
        .current_dir(&dir)
        .output()
        .map_err(|e| format!("npm: {e}"))?;
    if !out.status.success() {
        return Err(format!("npm ci: {}", String::from_utf8_lossy(&out.stderr)));
    }
    std::fs::write(&ready, lock).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// A run of `steps` blocks written straight into the store (three events
/// a step: what a 100,000-event run looks like without waiting for one).
fn long_run(home: &Path, steps: u64) -> String {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let id = wfhost_store::new_run_id(wfhost_store::time::now_ms());
    let record = RunRecord {
        id: id.clone(),
        workflow_id: "long-haul".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/nowhere/long-haul.json".into(),
        workspace: "/tmp".into(),
        created_at: wfhost_store::time::now_ms(),
    };
    let started = Event::RunStarted {
        run_id: id.to_string(),
        workflow_id: "long-haul".into(),
        workflow_hash: record.workflow_hash.clone(),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps: steps + 1,
        max_call_depth: 8,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    };
    store.create_run(&record, "{}", &started).unwrap();
    let mut w = store.writer(&id, 1).unwrap();
    let mut batch = Vec::new();
    for n in 0..steps {
        batch.extend([
            Event::BlockStarted {
                step: n,
                node: "main".into(),
                block: "a".into(),
                attempt: n as u32 + 1,
            },
            Event::BlockCompleted {
                step: n,
                node: "main".into(),
                block: "a".into(),
                signal: "SIGNAL:SUCCESS".into(),
                payload: PayloadDelta {
                    keep: n.min(3) as usize,
                    push: vec![ContextSegment::new(format!("s{n}"), "NOTE", "step done")],
                },
                artifact: None,
                statistics: Statistics {
                    tokens_used: 10,
                    lines_written: 1,
                    ..Default::default()
                },
                duration_us: 250,
                queued_us: 0,
                failure: None,
                permanent: false,
                log: vec![format!("step {n}")],
                written: Vec::new(),
            },
            Event::ActionTaken {
                step: n,
                action: "JUMP:a".into(),
                command: CommandRecord::Jump {
                    to: "main.a".into(),
                },
                gate_id: None,
                fallback_for: None,
            },
        ]);
        if batch.len() >= 3000 {
            w.append(&batch).unwrap();
            batch.clear();
        }
    }
    w.append(&batch).unwrap();
    id.to_string()
}

/// A workflow of 29 blocks in two nodes: a start fanning out to eight
/// blocks by signal, joined, fanned out again, and a called node of ten.
fn wide_definition() -> serde_json::Value {
    use serde_json::json;
    let jump =
        |signal: &str, to: &str| json!({"on_signal": signal, "action": format!("JUMP:{to}")});
    let mut main = serde_json::Map::new();
    let fan = |to: &str| {
        (1..=8)
            .map(|i| {
                jump(
                    &format!("SIGNAL:{}{i}", &to[..1].to_uppercase()),
                    &format!("{to}{i}"),
                )
            })
            .collect::<Vec<_>>()
    };
    main.insert(
        "start".into(),
        json!({"worker": "echo", "transitions": fan("a")}),
    );
    for i in 1..=8 {
        main.insert(
            format!("a{i}"),
            json!({"worker": "echo", "transitions": [jump("SIGNAL:SUCCESS", "join")]}),
        );
        main.insert(
            format!("b{i}"),
            json!({"worker": "echo", "transitions": [jump("SIGNAL:SUCCESS", "finish")]}),
        );
    }
    let mut join = fan("b");
    join.push(json!({"on_signal": "SIGNAL:REVIEW", "action": "CALL:review"}));
    main.insert(
        "join".into(),
        json!({"worker": "echo", "transitions": join}),
    );
    main.insert("finish".into(), json!({"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}, jump("SIGNAL:AGAIN", "start")]}));
    let mut review = serde_json::Map::new();
    for i in 1..=10 {
        let next = if i == 10 {
            json!({"on_signal": "SIGNAL:SUCCESS", "action": "RETURN"})
        } else {
            jump("SIGNAL:SUCCESS", &format!("r{}", i + 1))
        };
        review.insert(
            format!("r{i}"),
            json!({"worker": "echo", "transitions": [next]}),
        );
    }
    json!({"id": "wide", "start_node": "main", "nodes": {
        "main": {"entry_block": "start", "blocks": main},
        "review": {"entry_block": "r1", "blocks": review}
    }})
}

/// A run of [`wide_definition`] written into the store, four blocks in.
fn wide_run(home: &Path) -> String {
    let definition = wide_definition().to_string();
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let id = wfhost_store::new_run_id(wfhost_store::time::now_ms());
    let record = RunRecord {
        id: id.clone(),
        workflow_id: "wide".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of(&definition),
        manifest: "/nowhere/wide.json".into(),
        workspace: "/tmp".into(),
        created_at: wfhost_store::time::now_ms(),
    };
    let started = Event::RunStarted {
        run_id: id.to_string(),
        workflow_id: "wide".into(),
        workflow_hash: record.workflow_hash.clone(),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "start".into(),
        max_steps: 100,
        max_call_depth: 8,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    };
    store.create_run(&record, &definition, &started).unwrap();
    let mut w = store.writer(&id, 1).unwrap();
    for (n, (block, signal, to)) in [
        ("start", "SIGNAL:A3", "main.a3"),
        ("a3", "SIGNAL:SUCCESS", "main.join"),
        ("join", "SIGNAL:B5", "main.b5"),
        ("b5", "SIGNAL:SUCCESS", "main.finish"),
    ]
    .into_iter()
    .enumerate()
    {
        let n = n as u64;
        w.append(&[
            Event::BlockStarted {
                step: n,
                node: "main".into(),
                block: block.into(),
                attempt: 1,
            },
            Event::BlockCompleted {
                step: n,
                node: "main".into(),
                block: block.into(),
                signal: signal.into(),
                payload: PayloadDelta {
                    keep: 0,
                    push: Vec::new(),
                },
                artifact: None,
                statistics: Statistics::default(),
                duration_us: 100,
                queued_us: 0,
                failure: None,
                permanent: false,
                log: Vec::new(),
                written: Vec::new(),
            },
            Event::ActionTaken {
                step: n,
                action: format!("JUMP:{to}"),
                command: CommandRecord::Jump { to: to.into() },
                gate_id: None,
                fallback_for: None,
            },
        ])
        .unwrap();
    }
    id.to_string()
}

#[test]
fn the_dashboard_shows_runs_forks_lanes_and_answers_a_gate_in_a_real_browser() {
    let driver = match driver() {
        Ok(d) => d,
        Err(why) => {
            assert!(
                std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "the browser test cannot run: {why}"
            );
            eprintln!("skipped: {why}");
            return;
        }
    };
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    // Parallel lanes with a conflict, run by the CLI into the same home.
    let lanes_ws = scratch.path().join("lanes-ws");
    std::fs::create_dir_all(lanes_ws.join("docs")).unwrap();
    let example = repo().join("examples/agent-parallel");
    for f in std::fs::read_dir(example.join("docs")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, lanes_ws.join("docs").join(f.file_name().unwrap())).unwrap();
    }
    let out = command(scratch.path())
        .args(["run", example.join("workflow.json").to_str().unwrap(), "-w"])
        .arg(&lanes_ws)
        .args(["--json", "--session", "dashboard-demo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lanes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lanes = lanes["run_id"].as_str().unwrap().to_string();

    // The same lanes under `fail-on-conflict`: the run waits at a fan-in
    // gate for the user to pick the lane each conflicting file comes from.
    let flows = scratch.path().join("flows");
    std::fs::create_dir_all(&flows).unwrap();
    let agents = scratch.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    for f in std::fs::read_dir(repo().join("examples/agents")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, agents.join(f.file_name().unwrap())).unwrap();
    }
    let mut wf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(example.join("workflow.json")).unwrap()).unwrap();
    wf["nodes"]["dev"]["blocks"]["implement"]["parallel"]["merge_strategy"] =
        "fail-on-conflict".into();
    let conflict_flow = flows.join("agent-parallel-choose.json");
    std::fs::write(&conflict_flow, wf.to_string()).unwrap();
    let choose_ws = scratch.path().join("choose-ws");
    std::fs::create_dir_all(choose_ws.join("docs")).unwrap();
    for f in std::fs::read_dir(example.join("docs")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, choose_ws.join("docs").join(f.file_name().unwrap())).unwrap();
    }
    let out = command(scratch.path())
        .args(["run", conflict_flow.to_str().unwrap(), "-w"])
        .arg(&choose_ws)
        .arg("--json")
        .output()
        .unwrap();
    let choose: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
    assert_eq!(choose["status"], "waiting", "{choose}");
    let choose = choose["run_id"].as_str().unwrap().to_string();

    // Workflows the page lists and starts from a form built from their
    // inputs: one with every kind of input and a long block name (its
    // timeline must not clip at any width), and one that does not load.
    let long =
        "announce_the_greeting_to_everyone_who_is_listening_right_now_in_the_whole_wide_world";
    let greet = serde_json::json!({
        "id": "greet",
        "description": "Greet someone, then announce it",
        "inputs": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "description": "Who to greet"},
            "times": {"type": "integer", "default": 2, "description": "How often"},
            "loud": {"type": "boolean"},
            "tone": {"enum": ["dry", "warm"], "default": "warm"},
            "tags": {"type": "array", "items": {"type": "string"}}
        }},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "greet", "blocks": {
            "greet": {"worker": "echo", "config": {"message": "hello"},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": format!("JUMP:{long}")}]},
            long: {"worker": "echo", "config": {"message": "everyone knows"},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "JUMP:greet"}]}
        }}}
    });
    std::fs::write(flows.join("greet.json"), greet.to_string()).unwrap();
    std::fs::write(
        flows.join("broken.json"),
        r#"{"id": "broken", "start_node": "main", "nodes": 7}"#,
    )
    .unwrap();
    let greet_ws = scratch.path().join("greet-ws");
    std::fs::create_dir_all(&greet_ws).unwrap();

    // An exec block whose command fails, leaving its output in a bundle.
    let exec_ws = scratch.path().join("exec-ws");
    std::fs::create_dir_all(&exec_ws).unwrap();
    let manifest = super::observe::exec_manifest(scratch.path(), "0");
    let out = command(scratch.path())
        .args(["run", manifest.to_str().unwrap(), "-w"])
        .arg(&exec_ws)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let exec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let exec = exec["run_id"].as_str().unwrap().to_string();

    // An agent whose write outside its restrictions was rolled back: the
    // block succeeds with a warning.
    let quiet_ws = scratch.path().join("quiet-ws");
    std::fs::create_dir_all(&quiet_ws).unwrap();
    std::fs::write(quiet_ws.join("README"), "readme\n").unwrap();
    std::fs::create_dir_all(scratch.path().join("quiet")).unwrap();
    let quiet_flow = super::run::write_manifest(
        &scratch.path().join("quiet"),
        serde_json::json!({
            "id": "quiet",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "file_restrictions": ["src/**"],
                "config": {"command": super::agents::scripted(&["--write-outside", "README=defaced"])},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }),
    );
    let out = command(scratch.path())
        .args(["run", quiet_flow.to_str().unwrap(), "-w"])
        .arg(&quiet_ws)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let quiet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let quiet = quiet["run_id"].as_str().unwrap().to_string();

    let big_steps = 33_333; // 1 + 3 × 33,333 = 100,000 events
    let big = long_run(&home, big_steps);
    let wide = wide_run(&home);

    // Two local agents: the ticking run's block holds one while the
    // others' blocks run.
    let flows_root = flows.to_str().unwrap().to_string();
    let serve_args = [
        "--local-agents",
        "2",
        "--projects-root",
        flows_root.as_str(),
    ];
    let mut served = serve_with(scratch.path(), &serve_args);
    let ws = workspace_in(scratch.path());
    let gate_flow = repo().join("examples/review-gate/workflow.json");
    let start = || {
        // The run before it shows `waiting` as soon as that is recorded;
        // its process may hold the workspace a moment longer (409 busy).
        let mut tries = 0;
        let (status, started) = loop {
            let (status, started) = http_post(
                &served.addr,
                "/v1/runs",
                &serde_json::json!({"workflow": gate_flow, "workspace": ws}),
            );
            tries += 1;
            if status != 409 || tries == 100 {
                break (status, started);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert_eq!(status, 202, "{started}");
        let id = started["run_id"].as_str().unwrap().to_string();
        await_status(&served.addr, &id, "waiting");
        id
    };
    // A run answered, then forked back to its gate: two branches.
    let forked = start();
    // Its process may hold the workspace a moment after `waiting` too.
    let mut tries = 0;
    let (status, answered) = loop {
        let (status, answered) = http_post(
            &served.addr,
            &format!("/v1/runs/{forked}/gates/UD-1"),
            &serde_json::json!({"answer": "approved"}),
        );
        tries += 1;
        if status != 409 || tries == 100 {
            break (status, answered);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status, 202, "{answered}");
    await_status(&served.addr, &forked, "succeeded");
    let (_, events) = http_get(&served.addr, &format!("/v1/runs/{forked}/events"));
    let snapshot = events["events"][0]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, out) = http_post(
            &served.addr,
            &format!("/v1/runs/{forked}/fork"),
            &serde_json::json!({"at": snapshot}),
        );
        if status == 202 {
            break;
        }
        // The process that ended the run may still hold its lock.
        assert!(
            status == 409 && std::time::Instant::now() < deadline,
            "{status} {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    await_status(&served.addr, &forked, "waiting");
    let (_, cancelled) = http_post(
        &served.addr,
        &format!("/v1/runs/{forked}/cancel"),
        &serde_json::json!({"reason": "kept as a fork"}),
    );
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // The run whose gate the browser answers.
    let waiting = start();
    // The run the page cancels.
    let cancel = start();
    // The run the page follows across a restart of the server.
    let across = start();
    // The run whose gate the page answers from the list of open gates.
    let inbox = start();
    let (_, open) = http_get(&served.addr, "/v1/gates");
    let kind_of = |run: &str| {
        open["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["run_id"] == run)
            .map(|g| g["kind"].clone())
    };
    assert_eq!(kind_of(&choose), Some("fan-in".into()), "{open}");
    assert_eq!(kind_of(&inbox), Some("gate".into()), "{open}");
    // A run whose block prints a line every tenth of a second while the
    // page looks at it (cancelled at the end).
    let ticking = super::run::write_manifest(
        scratch.path(),
        serde_json::json!({
            "id": "ticks",
            "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "tick", "blocks": {"tick": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["sh", "-c", "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done"]}], "allow_shell": true},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }),
    );
    let ticks_ws = scratch.path().join("ticks-ws");
    std::fs::create_dir_all(&ticks_ws).unwrap();
    let (status, live) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workflow": ticking, "workspace": ticks_ws}),
    );
    assert_eq!(status, 202, "{live}");
    let live = live["run_id"].as_str().unwrap().to_string();
    let handshake = scratch.path().join("handshake");
    std::fs::create_dir_all(&handshake).unwrap();
    // A run whose failed block waits an hour for its retry.
    let retry_ws = scratch.path().join("retry-ws");
    std::fs::create_dir_all(&retry_ws).unwrap();
    let (status, retrying) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workspace": retry_ws, "manifest": {
            "id": "retrying", "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
                "worker": "exec", "config": {"commands": [{"argv": ["false"]}]},
                "retry": {"initial": "1h", "jitter": 0},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }}),
    );
    assert_eq!(status, 202, "{retrying}");
    let retrying = retrying["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &retrying, "sleeping");
    // A schedule the page pauses.
    let (status, schedule) = http_post(
        &served.addr,
        "/v1/schedules",
        &serde_json::json!({"name": "nightly", "cron": "0 3 * * *", "tz": "Europe/Berlin",
            "workflow": repo().join("examples/hello/workflow.json"), "workspace": retry_ws}),
    );
    assert_eq!(status, 201, "{schedule}");

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-shots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let scenario = scratch.path().join("scenario.json");
    std::fs::write(
        &scenario,
        serde_json::json!({
            "waiting": waiting, "forked": forked, "big": big, "lanes": lanes, "exec": exec, "choose": choose,
            "across": across, "handshake": handshake, "cancel": cancel, "live": live, "quiet": quiet,
            "big_events": 1 + 3 * big_steps, "session": "dashboard-demo",
            "inbox": inbox, "greet_ws": greet_ws, "long_block": long, "wide": wide,
            "retrying": retrying, "schedule": "nightly",
        })
        .to_string(),
    )
    .unwrap();
    let mut browser = Command::new("node")
        .arg(driver.join("drive.mjs"))
        .arg(format!("http://{}/", served.addr))
        .arg(&scenario)
        .arg(&shots)
        .env("CHROMIUM", CHROMIUM)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // When the page follows `across`, the server goes away; the run goes on
    // without it (its gate answered from the command line), and a new
    // server comes up on the same address: the page must pick the stream
    // up again from the last event it saw.
    let paused = handshake.join("paused");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !paused.exists()
        && std::time::Instant::now() < deadline
        && browser.try_wait().unwrap().is_none()
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if paused.exists() {
        let addr = served.addr.clone();
        drop(served);
        let answered = command(scratch.path())
            .args(["gate", &across, "UD-1", "approved"])
            .output()
            .unwrap();
        assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
        let again = [&["--listen", addr.as_str()][..], &serve_args[..]].concat();
        served = serve_with(scratch.path(), &again);
        assert_eq!(served.addr, addr);
        std::fs::write(handshake.join("resumed"), "").unwrap();
    }
    let out = browser.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser's checks failed (screenshots in {}):\n{stdout}\n{}",
        shots.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("dashboard: {stdout}");
    let (_, stopped) = http_post(
        &served.addr,
        &format!("/v1/runs/{live}/cancel"),
        &serde_json::json!({"reason": "seen live"}),
    );
    assert_eq!(stopped["status"], "cancelled", "{stopped}");
    // The gates were answered through the page: the runs finished, the
    // fan-in with the lane the page chose for the conflicting file.
    await_status(&served.addr, &waiting, "succeeded");
    await_status(&served.addr, &choose, "succeeded");
    await_status(&served.addr, &inbox, "succeeded");
    assert_eq!(
        std::fs::read_to_string(choose_ws.join("docs/shared.py")).unwrap(),
        "VERSION = \"1.1-ui\"\n"
    );
}
