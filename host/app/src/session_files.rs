//! Seed 001's orchestrator artifacts, kept current while a run goes on:
//! `<workspace>/.agents-work/<session>/status.json` and `tasks.yaml`.
//!
//! Both are projections of the run's event log
//! ([`wfhost_core::agents::session_projection`]): [`SessionSink`] wraps the
//! engine's sink and, after every event the store recorded, rewrites them
//! atomically (a temporary file in the same folder, fsynced, renamed over
//! the old one). The projection is rebuilt from the whole branch when a
//! run continues (`resume`, `gate`, `fork`), so it does not matter which
//! process wrote the files before.
//!
//! Each branch of each run has its own session folder, named from the run
//! id and its workflow ([`run_session_name`]); a run writes only to its own
//! folder, so earlier sessions are never touched. The files are a
//! dashboard, not part of the run: a failure to write them prints one
//! warning and the run goes on — except when the user decisions changed
//! (a gate opened, answered, asked again): then `status.json` is read back
//! and checked after the write, the write retried up to
//! [`WRITE_ATTEMPTS`] times, and if it still fails the run ends BLOCKED
//! (`status_json_persistence`) instead of going on silently. While the
//! lanes of a parallel block run, the files are left as they are (a lane
//! copied from the workspace measures its changes against it).
//!
//! `approve-design-history.jsonl` (one line per `changes-requested`
//! answer to `UD-APPROVE-DESIGN`) is derived from the log like the rest:
//! written whole whenever it grew, so each answer is in it exactly once
//! however often the run crashed and resumed.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use wfhost_core::agents::session_artifacts::{
    APPROVE_DESIGN_HISTORY, PERSISTENCE_BLOCKER, SessionStatus, UserDecision, render_history,
};
use wfhost_core::agents::session_projection::{SessionProjection, iso_utc, run_session_name};
use wfhost_core::agents::status_merge;
use wfhost_core::manifest::Workflow;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::event::{Event, EventSink, Outcome, QueuedJob, SinkError, blocked_reason};
use wfhost_store::{RunRecord, Store, StoredEvent};

use crate::warnings::warn;

/// The folder, under the workspace, that holds the session folders.
pub const AGENTS_WORK: &str = ".agents-work";

/// How many of a loaded log's last events the session files may have been
/// written after (see `SessionFiles::bases`).
pub const BASE_EVENTS: usize = 16;

/// How many times `status.json` is written (and read back) when the user
/// decisions changed, before the run ends BLOCKED.
pub const WRITE_ATTEMPTS: usize = 3;

/// A sink that can say when it recorded the events of its last `append`
/// (unix ms, one per event); an empty answer means "now".
pub trait Recorded {
    fn recorded_at(&self) -> Vec<i64>;
}

impl Recorded for wfhost_store::BranchWriter<'_> {
    fn recorded_at(&self) -> Vec<i64> {
        self.last_written().iter().map(|e| e.at).collect()
    }
}

/// One session folder and the projection written to it.
pub struct SessionFiles {
    dir: PathBuf,
    projection: SessionProjection,
    /// The `tasks.yaml` last written, to skip rewriting it unchanged.
    tasks_written: Option<String>,
    /// Whether the last write failed (and was reported).
    failing: bool,
    /// The user decisions last verified on disk.
    decisions_verified: Vec<UserDecision>,
    /// The history file last written.
    history_written: Option<String>,
    /// Why the first write (of [`SessionFiles::load`]) could not persist
    /// changed user decisions.
    unpersisted: Option<String>,
    /// The host's own `status.json` (before the agents' fields were merged
    /// in) last written — at first, the projections after each of the
    /// last [`BASE_EVENTS`] events of the log as loaded, one of which the
    /// process that recorded them wrote last (a command that records an
    /// event without running the run, `wfhost gate` or `cancel`, writes
    /// none). A host field on disk that differs from all of them was
    /// changed by an agent.
    bases: Vec<SessionStatus>,
    /// The conflicts reported so far (each a warning).
    conflicts: Vec<String>,
}

impl SessionFiles {
    /// The session of branch `branch` of `run`, folded from the branch's
    /// recorded events and written once. `None` when the workflow keeps no
    /// session files ([`Workflow::uses_session_files`]), or (after a
    /// warning) when the log cannot be read.
    pub fn load(
        store: &Store,
        run: &RunRecord,
        branch: u32,
        workflow: &Workflow,
    ) -> Option<SessionFiles> {
        if !workflow.uses_session_files() {
            return None;
        }
        let chain = match store.chain(&run.id, branch) {
            Ok(chain) => chain,
            Err(e) => {
                warn(&format!("session files of run {} not written: {e}", run.id));
                return None;
            }
        };
        let mut files =
            SessionFiles::for_history(Path::new(&run.workspace), run, branch, workflow, &chain);
        if let Err(e) = files.write() {
            files.unpersisted = Some(e);
        }
        Some(files)
    }

    /// Like [`SessionFiles::load`], with the run's pinned definition read
    /// from the store (for commands that do not execute the run).
    pub fn load_pinned(store: &Store, run: &RunRecord, branch: u32) -> Option<SessionFiles> {
        let workflow = store
            .definition(&run.workflow_hash)
            .map_err(|e| e.to_string())
            .and_then(|json| PinnedDefinition::parse(&json, &run.workflow_hash));
        match workflow {
            Ok(workflow) => SessionFiles::load(store, run, branch, &workflow),
            Err(e) => {
                warn(&format!("session files of run {} not written: {e}", run.id));
                None
            }
        }
    }

    /// Rewrite the session files of `run`'s current branch after its end
    /// was recorded by another command (`wfhost cancel`): its pending
    /// decisions become `cancelled` (or `skipped`) and `current_state`
    /// `BLOCKED`, instead of staying `ASK_USER`. A failure is a warning.
    pub fn rewrite_after_end(store: &Store, run: &RunRecord) {
        match store.current_branch(&run.id) {
            Ok(branch) => {
                SessionFiles::load_pinned(store, run, branch);
            }
            Err(e) => warn(&format!("session files of run {} not written: {e}", run.id)),
        }
    }

    /// The projection of `history` (a branch's events as stored), for the
    /// folder under `workspace`; nothing is written yet.
    pub fn for_history(
        workspace: &Path,
        run: &RunRecord,
        branch: u32,
        workflow: &Workflow,
        history: &[StoredEvent],
    ) -> SessionFiles {
        let first_at = history.first().map_or(run.created_at, |e| e.at);
        let workflow_id = match history.first().map(|e| &e.event) {
            Some(Event::RunStarted { workflow_id, .. }) => workflow_id.as_str(),
            _ => run.workflow_id.as_str(),
        };
        let session = run_session_name(&run.id, workflow_id, branch, &iso_utc(first_at)[..10]);
        let mut projection = SessionProjection::new(workflow, session);
        let mut bases = Vec::new();
        let recent = history.len().saturating_sub(BASE_EVENTS);
        for (i, e) in history.iter().enumerate() {
            projection.apply(&e.event, &iso_utc(e.at));
            if i >= recent {
                bases.push(projection.status());
            }
        }
        SessionFiles {
            dir: workspace.join(AGENTS_WORK).join(projection.session()),
            bases,
            conflicts: Vec::new(),
            projection,
            tasks_written: None,
            failing: false,
            decisions_verified: Vec::new(),
            history_written: None,
            unpersisted: None,
        }
    }

    /// Fold events recorded at `times` (unix ms; missing times are now)
    /// and rewrite the files; an error is a persistence failure of changed
    /// user decisions (see [`SessionFiles::write`]).
    pub fn record(&mut self, events: &[Event], times: &[i64]) -> Result<(), String> {
        let now = wfhost_store::time::now_ms();
        for (i, event) in events.iter().enumerate() {
            let at = times.get(i).copied().unwrap_or(now);
            self.projection.apply(event, &iso_utc(at));
        }
        self.write()
    }

    /// The end of a run whose changed user decisions could not be
    /// persisted when the files were loaded, if that happened: the caller
    /// records it instead of going on.
    pub fn blocked_end(&self) -> Option<Event> {
        let why = self.unpersisted.as_ref()?;
        (!self.finished()).then(|| Event::RunFinished {
            outcome: Outcome::Failed {
                reason: blocked_reason(PERSISTENCE_BLOCKER, why),
            },
        })
    }

    /// Whether the run the files describe has ended.
    pub fn finished(&self) -> bool {
        self.projection.finished()
    }

    /// Rewrite the files. A failure is reported once and then only again
    /// after a write succeeded — unless the user decisions changed since
    /// they were last verified on disk: then the write is read back and
    /// retried up to [`WRITE_ATTEMPTS`] times, and the error returned.
    pub fn write(&mut self) -> Result<(), String> {
        // Lanes isolated by a copy measure their changes against the main
        // workspace: it must not change while they run. The first write
        // after the last lane completed catches up.
        if self.projection.lanes_running() {
            return Ok(());
        }
        let status = self.projection.status();
        let critical = status.user_decisions != self.decisions_verified;
        let attempts = if critical { WRITE_ATTEMPTS } else { 1 };
        let mut last = String::new();
        for _ in 0..attempts {
            match self.try_write(&status) {
                Ok(()) => {
                    self.failing = false;
                    self.decisions_verified = status.user_decisions;
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        if critical {
            return Err(format!(
                "status.json in {} could not be written and verified after {WRITE_ATTEMPTS} attempts ({last}); the user decisions are in the run's log: make the folder writable and `wfhost fork` the run from its last snapshot",
                self.dir.display()
            ));
        }
        if !self.failing {
            warn(&format!(
                "session files in {} not updated ({last}); the run goes on",
                self.dir.display()
            ));
        }
        self.failing = true;
        Ok(())
    }

    fn try_write(&mut self, status: &SessionStatus) -> Result<(), String> {
        status
            .validate()
            .map_err(|e| format!("status.json would not be valid: {e}"))?;
        let tasks = self.projection.tasks_yaml();
        let history = render_history(self.projection.approve_design_history());
        let (Some(workspace), Some(session)) = (
            self.dir.parent().and_then(Path::parent),
            self.dir.file_name().and_then(|n| n.to_str()),
        ) else {
            return Err(format!("{} is not a session directory", self.dir.display()));
        };
        // Never through a planted link (a container agent shares the
        // workspace); with a `.gitignore` in it.
        wfhost_core::workspace::ensure_host_dir(workspace, AGENTS_WORK)
            .map_err(|e| e.to_string())?;
        let write = |name: &str, bytes: &[u8]| {
            let rel = format!("{AGENTS_WORK}/{session}/{name}");
            wfhost_core::workspace::write_file(workspace, &rel, bytes, true)
                .map_err(|e| format!("{name}: {e}"))
        };
        let rel = format!("{AGENTS_WORK}/{session}/tasks.yaml");
        match read_text(workspace, &rel)? {
            // An agent (a team's Planner) wrote tasks.yaml: it is theirs
            // now. The host only promotes `implemented` tasks to
            // `completed`: those whose own gates passed (by the task id
            // their block's agent was dispatched with), and every one
            // once the run succeeded (every gate passed).
            Some(theirs) if !theirs.starts_with(HOST_TASKS_MARK) => {
                let passed = self.projection.gates_passed();
                let promoted = if status.current_state == "DONE" {
                    promote_tasks(&theirs, None)
                } else if passed.is_empty() {
                    None
                } else {
                    promote_tasks(&theirs, Some(passed))
                };
                if let Some(promoted) = promoted {
                    write("tasks.yaml", promoted.as_bytes())?;
                }
            }
            _ => {
                let tasks = format!("{HOST_TASKS_MARK}\n{tasks}");
                if self.tasks_written.as_deref() != Some(tasks.as_str()) {
                    write("tasks.yaml", tasks.as_bytes())?;
                    self.tasks_written = Some(tasks);
                }
            }
        }
        // The audit trail before the decision that follows from it.
        if !history.is_empty() && self.history_written.as_deref() != Some(history.as_str()) {
            write(APPROVE_DESIGN_HISTORY, history.as_bytes())?;
            self.history_written = Some(history);
        }
        // The agents' own fields in the file are kept; a field of the
        // host's an agent changed is reported, then written over.
        let rel = format!("{AGENTS_WORK}/{session}/status.json");
        let on_disk = read_text(workspace, &rel)?;
        let merged =
            status_merge::merge(status, &self.bases, on_disk.as_deref().map(str::as_bytes));
        for c in &merged.conflicts {
            let message = format!("session {session}: {}", c.message);
            warn(&message);
            self.conflicts.push(message);
        }
        let json = serde_json::to_string_pretty(&merged.status).map_err(|e| e.to_string())? + "\n";
        write("status.json", json.as_bytes())?;
        // Read-after-write: the file parses and holds these decisions.
        let back = wfhost_core::workspace::read_file(workspace, &rel, 16 << 20)
            .map_err(|e| format!("status.json read back: {e}"))?;
        let read: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&back)
            .map_err(|e| format!("status.json read back does not parse: {e}"))?;
        let read = status_merge::host_view(&read)
            .map_err(|e| format!("status.json read back is not valid: {e}"))?;
        if read.user_decisions != status.user_decisions {
            return Err("status.json read back holds other user decisions".into());
        }
        self.bases = vec![status.clone()];
        Ok(())
    }

    /// The conflicts over host-owned `status.json` fields reported so far.
    pub fn conflicts(&self) -> &[String] {
        &self.conflicts
    }
}

use wfhost_core::agents::session_artifacts::{HOST_TASKS_MARK, promote_tasks};

/// A workspace file's text; `None` when it does not exist.
fn read_text(workspace: &Path, rel: &str) -> Result<Option<String>, String> {
    let max = wfhost_core::agents::artifact_content::MAX_ARTIFACT_BYTES as u64;
    match wfhost_core::workspace::read_file(workspace, rel, max) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{rel}: {e}")),
    }
}

/// The engine's sink with the session files kept current: every `append`
/// goes to `inner`; once it succeeded, the events are folded into the
/// projection and the files rewritten.
pub struct SessionSink<S> {
    inner: S,
    files: Option<SessionFiles>,
}

impl<S> SessionSink<S> {
    pub fn new(inner: S, files: Option<SessionFiles>) -> Self {
        SessionSink { inner, files }
    }

    /// The session folder, workspace-relative (`.agents-work/<session>`),
    /// when the run keeps one.
    pub fn session_folder(&self) -> Option<String> {
        self.files
            .as_ref()
            .map(|f| format!("{AGENTS_WORK}/{}", f.projection.session()))
    }
}

impl<S: EventSink + Recorded> SessionSink<S> {
    /// Bring the session files up to date with `events`, just recorded.
    /// When changed user decisions cannot be persisted, the run ends
    /// BLOCKED: its end is recorded and the engine stopped with the error.
    fn record(&mut self, events: &[Event]) -> Result<(), SinkError> {
        let times = self.inner.recorded_at();
        self.record_at(events, &times)
    }

    /// [`Self::record`] with `times` the events' times (empty: now).
    fn record_at(&mut self, events: &[Event], times: &[i64]) -> Result<(), SinkError> {
        let Some(files) = &mut self.files else {
            return Ok(());
        };
        let Err(e) = files.record(events, times) else {
            return Ok(());
        };
        if !files.finished() {
            let end = Event::RunFinished {
                outcome: Outcome::Failed {
                    reason: blocked_reason(PERSISTENCE_BLOCKER, &e),
                },
            };
            self.inner.append(std::slice::from_ref(&end))?;
            let _ = files.record(std::slice::from_ref(&end), &self.inner.recorded_at());
        }
        Err(SinkError(format!("the run ends BLOCKED: {e}")))
    }
}

impl<S> Deref for SessionSink<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.inner
    }
}

impl<S> DerefMut for SessionSink<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S: EventSink + Recorded> EventSink for SessionSink<S> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.inner.append(events)?;
        self.record(events)
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        // The job can be leased the moment it is committed, by an agent
        // that compares the session files before and after its block (a
        // tasks.yaml it may not edit freely): they are brought up to date
        // with the block's start first, so they never change under it. Should
        // the commit then fail, the run stops there, and the files are made
        // again from its log when it goes on.
        self.record_at(events, &[])?;
        self.inner.append_with_job(events, job)
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.inner.new_gate_id()
    }

    fn new_gate_ids(&mut self, n: usize) -> Result<Vec<String>, SinkError> {
        self.inner.new_gate_ids(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wfhost_core::agents::session_artifacts::SessionStatus;
    use wfhost_core::run::event::{CommandRecord, MemoryLog, PayloadDelta};
    use wfhost_core::run::payload::Statistics;

    impl Recorded for MemoryLog {
        fn recorded_at(&self) -> Vec<i64> {
            Vec::new()
        }
    }

    /// A sink that refuses every event.
    struct Refusing;

    impl EventSink for Refusing {
        fn append(&mut self, _: &[Event]) -> Result<(), SinkError> {
            Err(SinkError("disk full".into()))
        }

        fn new_gate_id(&mut self) -> Result<String, SinkError> {
            Ok("UD-1".into())
        }
    }

    impl Recorded for Refusing {
        fn recorded_at(&self) -> Vec<i64> {
            Vec::new()
        }
    }

    const T0: i64 = 1_795_342_503_000;

    fn run(workspace: &Path) -> RunRecord {
        RunRecord {
            id: wfhost_store::RunId::parse("run-20261122-101503-3c1f0a").unwrap(),
            workflow_id: "one".into(),
            workflow_hash: "sha256:00".into(),
            manifest: "workflow.json".into(),
            workspace: workspace.display().to_string(),
            created_at: T0,
        }
    }

    fn workflow() -> Workflow {
        serde_json::from_value(serde_json::json!({
            "id": "one", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "echo"}}}}
        }))
        .unwrap()
    }

    fn history() -> Vec<StoredEvent> {
        let started = Event::RunStarted {
            run_id: "run-20261122-101503-3c1f0a".into(),
            workflow_id: "one".into(),
            workflow_hash: "sha256:00".into(),
            plugins: Default::default(),
            start_node: "main".into(),
            start_block: "a".into(),
            max_steps: 10,
            max_call_depth: 4,
            default_executor: String::new(),
            inputs: Default::default(),
            rerun_of: None,
        };
        vec![StoredEvent {
            seq: 1,
            branch: 1,
            parent: None,
            at: T0,
            snapshot: None,
            event: started,
        }]
    }

    fn the_rest() -> Vec<Event> {
        vec![
            Event::BlockStarted {
                step: 0,
                node: "main".into(),
                block: "a".into(),
                attempt: 1,
            },
            Event::BlockCompleted {
                step: 0,
                node: "main".into(),
                block: "a".into(),
                signal: "SIGNAL:SUCCESS".into(),
                payload: PayloadDelta::default(),
                artifact: None,
                statistics: Statistics::default(),
                duration_us: 1,
                queued_us: 0,
                failure: None,
                permanent: false,
                log: vec![],
                written: Vec::new(),
            },
            Event::ActionTaken {
                step: 0,
                action: "END".into(),
                command: CommandRecord::End,
                gate_id: None,
                fallback_for: None,
            },
        ]
    }

    fn status(dir: &Path) -> SessionStatus {
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap()
    }

    /// A sink that looks at the session folder's `tasks.yaml` when a job
    /// is committed: what an agent leasing it at once would see.
    struct Peeking {
        log: MemoryLog,
        dir: std::path::PathBuf,
        seen: Vec<String>,
    }

    impl EventSink for Peeking {
        fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
            self.log.append(events)
        }

        fn append_with_job(&mut self, events: &[Event], _: &QueuedJob) -> Result<(), SinkError> {
            self.seen
                .push(std::fs::read_to_string(self.dir.join("tasks.yaml")).unwrap());
            self.log.append(events)
        }

        fn new_gate_id(&mut self) -> Result<String, SinkError> {
            self.log.new_gate_id()
        }
    }

    impl Recorded for Peeking {
        fn recorded_at(&self) -> Vec<i64> {
            Vec::new()
        }
    }

    #[test]
    fn a_blocks_job_is_committed_after_the_files_show_its_start() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        let peeking = Peeking {
            log: MemoryLog::default(),
            dir: dir.clone(),
            seen: Vec::new(),
        };
        let mut sink = SessionSink::new(peeking, Some(files));
        let job = QueuedJob {
            step: 0,
            node: "main".into(),
            block: "a".into(),
            requires: Vec::new(),
            request: "{}".into(),
        };
        sink.append_with_job(&the_rest()[..1], &job).unwrap();
        let seen = &sink.inner.seen;
        assert_eq!(seen.len(), 1);
        assert!(
            seen[0].contains("status: in-progress"),
            "the job was visible before its start was in the files: {}",
            seen[0]
        );
    }

    #[test]
    fn the_files_follow_every_append() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        assert_eq!(
            dir,
            ws.path().join(".agents-work/2026-11-22_one-101503-3c1f0a")
        );
        let first = status(&dir);
        assert_eq!(first.current_state, "IMPLEMENT_LOOP");
        assert_eq!(first.last_update, "2026-11-22T10:15:03Z");
        let yaml = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
        assert!(yaml.contains("status: not-started"), "{yaml}");

        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        for e in the_rest() {
            sink.append(std::slice::from_ref(&e)).unwrap();
            status(&dir).validate().unwrap();
        }
        assert_eq!(sink.events.len(), 3, "the inner sink got every event");
        assert_eq!(status(&dir).current_state, "DONE");
        let yaml = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
        assert!(yaml.contains("status: completed"), "{yaml}");
        // Only the two files: no temporary file is left behind.
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["status.json", "tasks.yaml"]);
    }

    #[test]
    fn an_agents_tasks_yaml_is_theirs_and_promoted_when_the_run_succeeds() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        let projected = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
        assert!(projected.starts_with(HOST_TASKS_MARK), "{projected}");
        // A Planner writes the session's tasks.
        let planned = "# by the Planner\ntasks:\n  - id: T-001\n    goal: g\n    status: implemented\n    acceptance_checks: [\"cmd: true\"]\n  - id: T-002\n    goal: h\n    status: \"blocked\"\n    acceptance_checks: [x]\n";
        std::fs::write(dir.join("tasks.yaml"), planned).unwrap();
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        let rest = the_rest();
        sink.append(&rest[..2]).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("tasks.yaml")).unwrap(),
            planned,
            "left alone"
        );
        sink.append(&rest[2..]).unwrap();
        assert_eq!(status(&dir).current_state, "DONE");
        let done = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
        assert_eq!(
            done,
            planned.replace("status: implemented", "status: completed"),
            "{done}"
        );
        assert!(
            done.contains("status: \"blocked\""),
            "only implemented tasks are promoted"
        );
    }

    #[test]
    fn an_agents_status_fields_are_kept_and_a_changed_host_field_reported() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        // An agent keeps its state in the file, as seed 001 asks — and
        // sets a field the host owns.
        let mut theirs: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
        theirs["assumptions"] = serde_json::json!(["sqlite is enough"]);
        theirs["known_issues"] = serde_json::json!(["flaky e2e test"]);
        theirs["last_ci_result"] = "green".into();
        theirs["runtime_flags"] = serde_json::json!({"copilot_instructions_exists": false});
        theirs["current_state"] = "DONE".into();
        std::fs::write(dir.join("status.json"), theirs.to_string()).unwrap();
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        sink.append(&the_rest()[..1]).unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
        assert_eq!(back["assumptions"], serde_json::json!(["sqlite is enough"]));
        assert_eq!(back["known_issues"], serde_json::json!(["flaky e2e test"]));
        assert_eq!(back["last_ci_result"], "green");
        assert_eq!(back["runtime_flags"]["copilot_instructions_exists"], false);
        assert_eq!(back["current_state"], "IMPLEMENT_LOOP", "the host's");
        let files = sink.files.as_ref().unwrap();
        assert_eq!(files.conflicts().len(), 1, "{:?}", files.conflicts());
        assert!(
            files.conflicts()[0].contains("changed `current_state`"),
            "{:?}",
            files.conflicts()
        );
        // Reported once: the next write finds the host's value there.
        sink.append(&the_rest()[1..]).unwrap();
        assert_eq!(sink.files.as_ref().unwrap().conflicts().len(), 1);
        let back: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
        assert_eq!(back["current_state"], "DONE");
        assert_eq!(back["assumptions"], serde_json::json!(["sqlite is enough"]));
    }

    #[test]
    fn running_lanes_hold_the_files_back() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        let dir = files.dir.clone();
        let started = the_rest().remove(0);
        files.record(&[started], &[T0 + 1000]).unwrap();
        let before = std::fs::read(dir.join("status.json")).unwrap();
        files
            .record(
                &[Event::LanesStarted {
                    step: 0,
                    lanes: vec!["x".into(), "y".into()],
                    merge_strategy: Default::default(),
                    over: None,
                }],
                &[T0 + 2000],
            )
            .unwrap();
        let lane = |name: &str| Event::LaneCompleted {
            step: 0,
            lane: name.into(),
            signal: "SIGNAL:SUCCESS".into(),
            changed: vec![],
            failure: None,
            summary: None,
            payload: vec![],
            statistics: Statistics::default(),
            duration_us: 1,
            log: vec![],
        };
        files.record(&[lane("y")], &[T0 + 3000]).unwrap();
        assert_eq!(std::fs::read(dir.join("status.json")).unwrap(), before);
        files.record(&[lane("x")], &[T0 + 4000]).unwrap();
        assert_eq!(status(&dir).last_update, "2026-11-22T10:15:07Z");
    }

    #[test]
    fn a_write_failure_does_not_fail_the_run() {
        let ws = tempfile::tempdir().unwrap();
        // `.agents-work` is a file: no session folder can be made.
        std::fs::write(ws.path().join(AGENTS_WORK), "in the way").unwrap();
        let files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        for e in the_rest() {
            sink.append(std::slice::from_ref(&e)).unwrap();
        }
        assert_eq!(sink.events.len(), 3);
        assert!(sink.files.as_ref().unwrap().failing);
    }

    #[test]
    fn an_event_the_store_refused_is_not_projected() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        let before = std::fs::read(dir.join("status.json")).unwrap();
        let mut sink = SessionSink::new(Refusing, Some(files));
        assert!(sink.append(&the_rest()).is_err());
        assert_eq!(std::fs::read(dir.join("status.json")).unwrap(), before);
    }

    fn gate_events(answer: &str) -> Vec<Event> {
        let mut events = the_rest();
        events.pop();
        events.push(Event::ActionTaken {
            step: 0,
            action: "GATE:APPROVE_DESIGN".into(),
            command: CommandRecord::Gate {
                prompt: "Approve?".into(),
                questions: Vec::new(),
            },
            gate_id: Some("UD-APPROVE-DESIGN".into()),
            fallback_for: None,
        });
        events.push(Event::GateAnswered {
            gate_id: "UD-APPROVE-DESIGN".into(),
            decision: wfhost_core::run::event::parse_answer("UD-APPROVE-DESIGN", answer).unwrap(),
        });
        events
    }

    #[test]
    fn changed_decisions_that_cannot_be_persisted_end_the_run_blocked() {
        let ws = tempfile::tempdir().unwrap();
        // `.agents-work` is a file: no session folder can be made.
        std::fs::write(ws.path().join(AGENTS_WORK), "in the way").unwrap();
        let files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        let events = gate_events("approved");
        // Without decisions, a failed write is only a warning.
        sink.append(&events[..2]).unwrap();
        // The gate opens: a decision to persist; it cannot be.
        let err = sink.append(&events[2..3]).unwrap_err();
        assert!(
            err.0.contains("BLOCKED") && err.0.contains("status.json"),
            "{}",
            err.0
        );
        let Some(Event::RunFinished {
            outcome: Outcome::Failed { reason },
        }) = sink.events.last()
        else {
            panic!("the run's end is recorded: {:?}", sink.events.last())
        };
        assert_eq!(
            wfhost_core::run::event::blocker_of(reason),
            Some(PERSISTENCE_BLOCKER),
            "{reason}"
        );
        assert!(reason.contains("3 attempts"), "{reason}");
    }

    #[test]
    fn a_read_only_session_folder_blocks_a_decision() {
        let ws = tempfile::tempdir().unwrap();
        let mut files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        files.write().unwrap();
        let dir = files.dir.clone();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(dir.join("probe"), "x").is_ok() {
            // Running as root: permissions do not stop the write.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            eprintln!("skipped: the session folder stays writable for this user");
            return;
        }
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        let events = gate_events("approved");
        let result = sink.append(&events[..3]);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(result.is_err());
        assert!(matches!(
            sink.events.last(),
            Some(Event::RunFinished { .. })
        ));
    }

    #[test]
    fn decisions_are_read_back_and_the_history_written_once() {
        let ws = tempfile::tempdir().unwrap();
        let files =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &history());
        let dir = files.dir.clone();
        let mut sink = SessionSink::new(MemoryLog::default(), Some(files));
        let events = gate_events("changes-requested: fewer modules");
        sink.append(&events).unwrap();
        let s = status(&dir);
        assert_eq!(s.user_decisions[0].decision_id, "UD-APPROVE-DESIGN");
        assert_eq!(
            s.gate_tracking.unwrap().approve_design.correction_status,
            wfhost_core::agents::session_artifacts::CorrectionStatus::Queued
        );
        let trail = std::fs::read_to_string(dir.join(APPROVE_DESIGN_HISTORY)).unwrap();
        assert_eq!(trail.lines().count(), 1, "{trail}");
        let line: serde_json::Value = serde_json::from_str(trail.trim()).unwrap();
        assert_eq!(line["decision_id"], "UD-APPROVE-DESIGN");
        assert_eq!(line["answer"], "changes-requested:fewer modules");
        assert_eq!(line["state_context"], "APPROVE_DESIGN");
        assert!(line["at"].as_str().unwrap().ends_with('Z'));
        // A crash and a resume: the files are folded again from the whole
        // log; the history still holds the answer once.
        let mut stored = history_stored(&events);
        stored.splice(0..0, history());
        let mut again =
            SessionFiles::for_history(ws.path(), &run(ws.path()), 1, &workflow(), &stored);
        again.write().unwrap();
        again.write().unwrap();
        let after = std::fs::read_to_string(dir.join(APPROVE_DESIGN_HISTORY)).unwrap();
        assert_eq!(after.lines().count(), 1, "{after}");
    }

    fn history_stored(events: &[Event]) -> Vec<StoredEvent> {
        events
            .iter()
            .enumerate()
            .map(|(i, e)| StoredEvent {
                seq: i as u64 + 2,
                branch: 1,
                parent: None,
                at: T0 + 1000 * (i as i64 + 1),
                snapshot: None,
                event: e.clone(),
            })
            .collect()
    }
}
