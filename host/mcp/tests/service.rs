//! The service driven in process (no stdio, no plugins): a workflow of
//! external blocks, advanced from any of the tokens it handed out.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::run::engine::{
    self, ActionInterpreter, BlockFailure, BlockRequest, BlockResult, BlockRunner, ExternalAnswer,
    Lanes, SessionReads, TelemetrySource,
};
use wfhost_core::run::event::{Event, EventSink};
use wfhost_core::run::state::RunState;
use wfhost_mcp::service::{Advance, Executing, Executor, Resume, Service, Settings, Start};
use wfhost_store::{Durability, RunRecord, Store};

/// Runs no plugin (the workflows here have none) and interprets the core
/// grammar in process.
struct InProcess;

impl BlockRunner for InProcess {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        let message = format!("no worker `{}` in this test", request.worker);
        async move {
            BlockResult {
                outcome: Err(BlockFailure::new(message)),
                log: Vec::new(),
            }
        }
    }
}

impl Lanes for InProcess {}

impl SessionReads for InProcess {}

impl TelemetrySource for InProcess {}

impl ActionInterpreter for InProcess {
    fn interpret(
        &self,
        _handler: &str,
        action: &str,
        _view: &engine::RunView,
    ) -> impl Future<Output = Result<wfhost_core::command::EngineCommand, String>> + Send {
        let parsed = wfhost_core::actions::parse(action).map_err(|e| e.to_string());
        async move { parsed }
    }
}

impl Executor for InProcess {
    fn prepare(&self, _: &LoadedWorkflow, _: &Path) -> Result<BTreeMap<String, String>, String> {
        Ok(BTreeMap::new())
    }

    fn execute<'a>(
        &'a self,
        _run: &'a RunRecord,
        _branch: u32,
        loaded: &'a LoadedWorkflow,
        state: RunState,
        answer: Option<ExternalAnswer>,
        sink: &'a mut dyn EventSink,
    ) -> Executing<'a> {
        Box::pin(async move {
            let wf = &loaded.workflow;
            match answer {
                Some(a) => {
                    engine::complete_external(wf, &InProcess, &InProcess, state, sink, a).await
                }
                None => engine::drive(wf, &InProcess, &InProcess, state, sink).await,
            }
            .map_err(|e| e.to_string())
        })
    }
}

/// Three external steps in a row.
fn chain() -> Value {
    let step = |next: &str| json!({"worker": "external", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]});
    json!({"id": "chain", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
        "a": step("JUMP:b"), "b": step("JUMP:c"), "c": step("END")
    }}}})
}

fn service(dir: &Path) -> Service<InProcess> {
    let workflows = dir.join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workflows.join("chain.json"), chain().to_string()).unwrap();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let settings = Settings {
        home: dir.join("home"),
        durability: Durability::Normal,
        workflow_dirs: vec![workflows],
        workspace: dir.join("ws"),
        builtins: vec!["actions-core"],
    };
    Service::new(settings, InProcess).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn output(variant: u8) -> Map<String, Value> {
    json!({"notesMarkdown": format!("answer {variant}")})
        .as_object()
        .unwrap()
        .clone()
}

/// Every branch's history records each step once, in order; returns the
/// number of branches.
fn assert_no_step_twice(home: &Path, run_id: &str) -> usize {
    let store = Store::open(home, Durability::Normal).unwrap();
    let branches = store.branches(run_id).unwrap();
    for b in &branches {
        let chain = store.chain(run_id, b.branch).unwrap();
        let steps: Vec<u64> = chain
            .iter()
            .filter_map(|e| match &e.event {
                Event::BlockCompleted { step, .. } => Some(*step),
                _ => None,
            })
            .collect();
        assert!(
            steps.windows(2).all(|w| w[0] < w[1]),
            "branch {} records a step twice or out of order: {steps:?}",
            b.branch
        );
    }
    branches.len()
}

/// The advance from `from` (answered `notes`) that led to `to` completed
/// the block awaited at `from`'s snapshot, right after that snapshot on
/// `to`'s branch, with those notes: the answer went to the step it was
/// for, on a branch where nothing else answered it.
fn assert_answered_where_asked(home: &Path, from: &Value, to: &Value, notes: &str) {
    let store = Store::open(home, Durability::Normal).unwrap();
    let run_id = from["session"]["runId"].as_str().unwrap();
    let branch = u32::try_from(to["session"]["branch"].as_u64().unwrap()).unwrap();
    let chain = store.chain(run_id, branch).unwrap();
    let snapshot = from["session"]["snapshot"].as_str().unwrap();
    let at = chain
        .iter()
        .position(|e| wfhost_store::snapshot_id(run_id, e.seq) == snapshot)
        .unwrap_or_else(|| panic!("snapshot {snapshot} is not in branch {branch}'s history"));
    let Event::ExternalAwaited { node, block, .. } = &chain[at].event else {
        panic!("{snapshot} is not an awaited block: {:?}", chain[at].event)
    };
    let next: Vec<&Event> = chain[at + 1..]
        .iter()
        .map(|e| &e.event)
        .filter(|e| !matches!(e, Event::Checkpointed { .. } | Event::Forked { .. }))
        .take(2)
        .collect();
    match next.as_slice() {
        [
            Event::BlockStarted {
                node: n1,
                block: b1,
                ..
            },
            completed @ Event::BlockCompleted {
                node: n2,
                block: b2,
                ..
            },
        ] => {
            assert_eq!((n1, b1, n2, b2), (node, block, node, block));
            let text = serde_json::to_string(completed).unwrap();
            assert!(text.contains(notes), "{notes} not in {text}");
        }
        other => panic!("after {snapshot} on branch {branch}: {other:?}"),
    }
}

/// Advance the step `reply` waits at, with output 1.
fn advance_from(
    rt: &tokio::runtime::Runtime,
    service: &Service<InProcess>,
    reply: &Value,
) -> Value {
    let advance = Advance {
        state_token: reply["stateToken"].as_str().unwrap().into(),
        ack_token: reply["ackToken"].as_str().map(str::to_string),
        output: Some(output(1)),
        ..Advance::default()
    };
    rt.block_on(service.advance(advance, None)).unwrap()
}

fn start(rt: &tokio::runtime::Runtime, service: &Service<InProcess>) -> Value {
    let start = Start {
        workflow_id: "chain".into(),
        ..Start::default()
    };
    serde_json::to_value(rt.block_on(service.start(start, None)).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any sequence of advances, each from any reply seen so far, with any
    /// output and with or without `fork`: a repeat gets the same reply, and
    /// no branch ever records a step twice.
    #[test]
    fn no_sequence_of_advances_records_a_step_twice_on_a_branch(
        ops in proptest::collection::vec((any::<usize>(), 0u8..3, any::<bool>()), 1..14)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let rt = runtime();
        let first = start(&rt, &service);
        let run_id = first["session"]["runId"].as_str().unwrap().to_string();
        let mut replies: Vec<Value> = vec![first];
        let mut answered: HashMap<(String, String, u8, bool), Value> = HashMap::new();
        for (pick, variant, fork) in ops {
            let from = replies[pick % replies.len()].clone();
            let (Some(st), Some(ak)) = (from["stateToken"].as_str(), from["ackToken"].as_str()) else {
                continue;
            };
            let advance = Advance {
                state_token: st.into(),
                ack_token: Some(ak.into()),
                output: Some(output(variant)),
                fork,
                ..Advance::default()
            };
            let key = (st.to_string(), ak.to_string(), variant, fork);
            match rt.block_on(service.advance(advance, None)) {
                Ok(reply) => {
                    if let Some(before) = answered.get(&key) {
                        prop_assert_eq!(before, &reply, "a repeat replays");
                    }
                    let notes = format!("answer {variant}");
                    assert_answered_where_asked(&dir.path().join("home"), &from, &reply, &notes);
                    answered.insert(key, reply.clone());
                    replies.push(reply);
                }
                Err(e) => prop_assert!(
                    ["ACK_ALREADY_USED", "RUN_NOT_WAITING"].contains(&e.code),
                    "unexpected refusal {:?}", e
                ),
            }
        }
        assert_no_step_twice(&dir.path().join("home"), &run_id);
    }
}

#[test]
fn a_long_lived_server_keeps_a_bounded_number_of_run_states() {
    use wfhost_mcp::service::KEPT_STATES;
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path());
    let rt = runtime();
    let runs: Vec<Value> = (0..KEPT_STATES + 10)
        .map(|_| start(&rt, &service))
        .collect();
    assert_eq!(service.kept_states(), KEPT_STATES);
    // The first run's state went first; advancing it folds its log again
    // and goes on as if it had been kept.
    let decoded = service.events_decoded();
    let next = advance_from(&rt, &service, &runs[0]);
    assert!(
        service.events_decoded() > decoded,
        "the evicted state is folded again"
    );
    assert_eq!(next["pending"]["stepId"], "main.b", "{next}");
    assert_eq!(service.kept_states(), KEPT_STATES);
    // The most recently used stay: the last run advances without a fold.
    let decoded = service.events_decoded();
    advance_from(&rt, &service, runs.last().unwrap());
    assert_eq!(service.events_decoded(), decoded);
}

#[test]
fn a_running_server_signs_with_the_key_a_rotation_made() {
    use wfhost_mcp::keys::Keyring;
    use wfhost_mcp::token::{Kind, decode};
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path());
    let rt = runtime();
    let first = start(&rt, &service);
    let home = dir.path().join("home");
    let new_kid = Keyring::rotate(&home).unwrap();
    // Only the new key: what it signed verifies, what the old one signed
    // does not.
    let ring = Keyring::open(&home).unwrap();
    let (kid, key) = ring.current();
    assert_eq!(kid, new_kid);
    let only_new = Keyring::fixed(&[(kid, *key)]);
    let old = first["stateToken"].as_str().unwrap();
    assert!(decode(&only_new, old, &[Kind::State]).is_err());
    // The old token is still accepted (the previous key is kept), and the
    // reply to it is signed with the new key, without a restart.
    let next = advance_from(&rt, &service, &first);
    for (field, kind) in [("stateToken", Kind::State), ("ackToken", Kind::Ack)] {
        let token = next[field].as_str().unwrap();
        decode(&only_new, token, &[kind]).unwrap_or_else(|e| panic!("{field}: {e:?}"));
    }
}

#[test]
fn a_reply_lost_in_a_crash_is_rebuilt_from_the_log_on_the_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path());
    let rt = runtime();
    let first = start(&rt, &service);
    let advance = || Advance {
        state_token: first["stateToken"].as_str().unwrap().into(),
        ack_token: first["ackToken"].as_str().map(str::to_string),
        output: Some(output(1)),
        ..Advance::default()
    };
    let reply = rt.block_on(service.advance(advance(), None)).unwrap();
    // The process stopped after the commit that recorded the advance and
    // before the reply was stored.
    let db = rusqlite::Connection::open(dir.path().join("home/wfhost.db")).unwrap();
    let cleared = db
        .execute("UPDATE mcp_acks SET response = NULL", [])
        .unwrap();
    assert_eq!(cleared, 1);
    let again = rt.block_on(service.advance(advance(), None)).unwrap();
    assert_eq!(again["pending"], reply["pending"]);
    assert_eq!(again["session"], reply["session"]);
    assert_eq!(
        again["stateToken"], reply["stateToken"],
        "the same snapshot, the same state token"
    );
    let third = rt.block_on(service.advance(advance(), None)).unwrap();
    assert_eq!(
        third, again,
        "the rebuilt reply is recorded and replayed from then on"
    );
    let run_id = first["session"]["runId"].as_str().unwrap();
    assert_eq!(assert_no_step_twice(&dir.path().join("home"), run_id), 1);
}

#[test]
fn sessions_group_runs_find_them_and_move_between_homes() {
    let dir = tempfile::tempdir().unwrap();
    let here_service = service(dir.path());
    let svc = &here_service;
    let rt = runtime();
    let begin = |session: Option<&str>, workspace: Option<PathBuf>| {
        let start = Start {
            workflow_id: "chain".into(),
            session_id: session.map(str::to_string),
            workspace,
            ..Start::default()
        };
        serde_json::to_value(rt.block_on(svc.start(start, None)).unwrap()).unwrap()
    };
    let a = begin(Some("chat-42"), None);
    assert_eq!(a["session"]["sessionId"], "chat-42");
    let b = begin(Some("chat-42"), None);
    let loose = begin(None, None);
    assert!(
        loose["session"].get("sessionId").is_none(),
        "outside a repository, no session: {loose}"
    );
    // A workspace in a git repository: the branch names the session.
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature-x\n").unwrap();
    let g = begin(None, Some(repo.clone()));
    assert_eq!(g["session"]["gitBranch"], "feature-x");
    assert_eq!(
        g["session"]["sessionId"],
        format!("git:feature-x@{}", repo.display())
    );
    let bad = rt.block_on(svc.start(
        Start {
            workflow_id: "chain".into(),
            session_id: Some("a\nb".into()),
            ..Start::default()
        },
        None,
    ));
    assert_eq!(bad.unwrap_err().code, "VALIDATION_ERROR");

    let find = |resume: Resume| serde_json::to_value(svc.resume(&resume).unwrap()).unwrap();
    let by_session = find(Resume {
        session_id: Some("chat-42".into()),
        ..Resume::default()
    });
    assert_eq!(by_session["totalEligible"], 2);
    assert_eq!(
        by_session["candidates"][0]["whyMatched"],
        json!(["matched_session"])
    );
    let by_branch = find(Resume {
        git_branch: Some("feature-x".into()),
        ..Resume::default()
    });
    assert_eq!(by_branch["totalEligible"], 1);
    assert_eq!(by_branch["candidates"][0]["runId"], g["session"]["runId"]);
    let here = find(Resume {
        workspace: Some(repo.join("src")),
        ..Resume::default()
    });
    assert_eq!(here["totalEligible"], 4);
    assert_eq!(
        here["candidates"][0]["runId"], g["session"]["runId"],
        "a run on the client's branch ranks first: {here}"
    );
    let only_here = find(Resume {
        workspace: Some(repo.clone()),
        same_workspace_only: true,
        ..Resume::default()
    });
    assert_eq!(only_here["totalEligible"], 1);

    let listed = serde_json::to_value(svc.sessions().unwrap()).unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2);

    let exported = svc.export_session("chat-42").unwrap();
    assert_eq!(exported.runs, 2);
    assert_eq!(
        svc.export_session("nope").unwrap_err().code,
        "SESSION_NOT_FOUND"
    );
    // Into another home: the runs resume there and advance.
    let other = tempfile::tempdir().unwrap();
    let there = service(other.path());
    let imported = there.import_session(exported.bundle.clone()).unwrap();
    assert_eq!(imported.imported.len(), 2);
    let again = there.import_session(exported.bundle.clone()).unwrap();
    assert_eq!((again.imported.len(), again.already_present.len()), (0, 2));
    // Runs whose ids are paths or script lines, re-sealed: refused.
    let parsed = wfhost_store::SessionBundle::from_value(exported.bundle.clone()).unwrap();
    let victim = parsed.runs[0].run.id.to_string();
    for hostile in wfhost_store::forgery::HOSTILE_RUN_IDS {
        let forged = wfhost_store::forgery::forge_session(&parsed, &victim, hostile);
        let err = there
            .import_session(serde_json::from_str(&forged).unwrap())
            .unwrap_err();
        assert_eq!(err.code, "VALIDATION_ERROR", "{hostile:?}");
        assert!(err.message.contains("run id"), "{}", err.message);
    }
    let mut tampered = exported.bundle.clone();
    tampered["session"]["id"] = "chat-43".into();
    assert_eq!(
        there.import_session(tampered).unwrap_err().code,
        "VALIDATION_ERROR"
    );
    let found = serde_json::to_value(
        there
            .resume(&Resume {
                run_id: b["session"]["runId"].as_str().map(str::to_string),
                ..Resume::default()
            })
            .unwrap(),
    )
    .unwrap();
    let resumed = &found["candidates"][0]["resume"];
    assert_eq!(resumed["session"]["sessionId"], "chat-42");
    let next = advance_from(&rt, &there, resumed);
    assert_eq!(next["session"]["steps"], 1, "{next}");
    let _ = a;
}

/// Not a test: a harness to profile the advance in process (`cargo test
/// --release -p wfhost-mcp --test service -- --ignored --nocapture
/// profile_advances`). The benchmark users see is bench/mcp.
#[test]
#[ignore]
fn profile_advances() {
    let steps: usize = std::env::var("STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let dir = tempfile::tempdir().unwrap();
    let mut blocks = Map::new();
    for i in 0..steps {
        let next = if i + 1 == steps {
            "END".to_string()
        } else {
            format!("JUMP:s{}", i + 1)
        };
        blocks.insert(
            format!("s{i}"),
            json!({"worker": "external", "prompt": {"task": format!("Step {i}: do the thing for {{{{inputs.topic}}}}.")},
                   "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]}),
        );
    }
    let wf = json!({"id": "long", "start_node": "main", "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
                    "nodes": {"main": {"entry_block": "s0", "blocks": blocks}}});
    let workflows = dir.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workflows.join("long.json"), wf.to_string()).unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let durability = match std::env::var("DURABILITY").as_deref() {
        Ok("normal") => Durability::Normal,
        _ => Durability::Full,
    };
    let service = Service::new(
        Settings {
            home: dir.path().join("home"),
            durability,
            workflow_dirs: vec![workflows],
            workspace: dir.path().join("ws"),
            builtins: vec!["actions-core"],
        },
        InProcess,
    )
    .unwrap();
    let rt = runtime();
    let start = Start {
        workflow_id: "long".into(),
        context: json!({"topic": "x"}).as_object().cloned(),
        ..Start::default()
    };
    let mut cur = serde_json::to_value(rt.block_on(service.start(start, None)).unwrap()).unwrap();
    let mut times = Vec::new();
    for _ in 1..steps {
        let t = std::time::Instant::now();
        let next = advance_from(&rt, &service, &cur);
        times.push(t.elapsed().as_micros());
        cur = next;
    }
    let median = |s: &[u128]| {
        let mut v = s.to_vec();
        v.sort();
        v[v.len() / 2]
    };
    println!(
        "advance median: first 25 {} us, last 25 {} us",
        median(&times[..25]),
        median(&times[times.len() - 25..])
    );
}

#[test]
fn an_advance_reads_no_event_back_whatever_the_run_s_length() {
    let dir = tempfile::tempdir().unwrap();
    let mut blocks = Map::new();
    for i in 0..40 {
        let next = if i == 39 {
            "END".to_string()
        } else {
            format!("JUMP:s{}", i + 1)
        };
        blocks.insert(
            format!("s{i}"),
            json!({"worker": "external", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]}),
        );
    }
    let wf = json!({"id": "chain", "start_node": "main", "nodes": {"main": {"entry_block": "s0", "blocks": blocks}}});
    let service = service(dir.path());
    std::fs::write(dir.path().join("workflows/chain.json"), wf.to_string()).unwrap();
    let rt = runtime();
    let mut cur = start(&rt, &service);
    for n in 1..=40 {
        cur = advance_from(&rt, &service, &cur);
        assert_eq!(
            service.events_decoded(),
            0,
            "advance {n} read the run's log back instead of going on from the state it kept"
        );
    }
    assert_eq!(cur["isComplete"], true);
}

/// Output a step does not accept is a blocked reply: the run does not
/// move, the same tokens stay good, every reason is named; then the step
/// is sent again, fixed, with the short continue token.
#[test]
fn output_not_accepted_blocks_without_moving_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let workflow = json!({"id": "checked", "name": "Checked", "description": "d", "version": "1.0.0",
    "steps": [
        {"id": "verdict", "title": "Verdict", "prompt": "Decide.",
         "outputContract": {"contractRef": "wr.contracts.gate_verdict"}},
        {"id": "notes", "title": "Notes", "prompt": "Write notes."}
    ]});
    std::fs::write(
        dir.path().join("workflows/checked.json"),
        workflow.to_string(),
    )
    .unwrap();
    let rt = runtime();
    let started = rt
        .block_on(svc.start(
            Start {
                workflow_id: "checked".into(),
                ..Start::default()
            },
            None,
        ))
        .unwrap();
    let first = serde_json::to_value(started).unwrap();
    assert_eq!(first["pending"]["stepId"], "verdict", "{first}");
    let ct = first["continueToken"].as_str().unwrap().to_string();
    assert!(ct.starts_with("ct_") && ct.len() == 27, "{ct}");
    let send = |output: Value| {
        let advance = Advance {
            state_token: ct.clone(),
            ack_token: None,
            output: output.as_object().cloned(),
            ..Advance::default()
        };
        rt.block_on(svc.advance(advance, None)).unwrap()
    };
    let blocked = send(json!({"artifacts": [{"kind": "other"}]}));
    assert_eq!(blocked["kind"], "blocked", "{blocked}");
    assert_eq!(
        blocked["blockers"]["blockers"][0]["code"],
        "MISSING_REQUIRED_OUTPUT"
    );
    assert_eq!(blocked["retryable"], true);
    assert_eq!(blocked["continueToken"], first["continueToken"]);
    assert_eq!(blocked["session"]["steps"], first["session"]["steps"]);
    let invalid = send(json!({"artifacts": [{"kind": "wr.gate_verdict", "version": 2}]}));
    assert_eq!(
        invalid["blockers"]["blockers"][0]["code"], "INVALID_REQUIRED_OUTPUT",
        "{invalid}"
    );
    assert!(
        invalid["validation"]["issues"].as_array().unwrap().len() >= 2,
        "every problem is listed: {invalid}"
    );
    let verdict = json!({"kind": "wr.gate_verdict", "version": 1, "verdict": "approved",
                         "confidence": "high", "rationale": "It holds up under review."});
    let next = send(json!({"artifacts": [verdict]}));
    assert_eq!(
        (next["kind"].as_str(), next["pending"]["stepId"].as_str()),
        (Some("ok"), Some("notes")),
        "{next}"
    );
    // The next step needs notes: blocked, with its own reason.
    let advance = Advance {
        state_token: next["continueToken"].as_str().unwrap().into(),
        ack_token: None,
        output: None,
        ..Advance::default()
    };
    let no_notes = rt.block_on(svc.advance(advance, None)).unwrap();
    assert_eq!(
        no_notes["blockers"]["blockers"][0]["code"], "MISSING_REQUIRED_NOTES",
        "{no_notes}"
    );
}
