//! The contract over the store: start a run, advance its external blocks
//! (a repeat answered with the same reply, a changed repeat refused, an
//! older snapshot forked), record checkpoints, hand out fresh tokens.
//!
//! Nothing here runs blocks: an [`Executor`] (the `wfhost` binary's, with
//! the wasm runtime) drives the engine between external blocks. Tests use
//! one with in-process workers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;
use wfhost_core::control::condition::Condition;
use wfhost_core::manifest::pinning::{self, PinnedDefinition};
use wfhost_core::manifest::{Block, LoadedWorkflow, Workflow};
use wfhost_core::run::engine::{ExternalAnswer, RunOptions, RunReport};
use wfhost_core::run::event::{Event, EventSink, QueuedJob, SinkError};
use wfhost_core::run::state::{Phase, RunState};
use wfhost_core::run::template;
use wfhost_store::{
    BranchWriter, Durability, NewAck, RunLock, RunRecord, SessionTag, Store, StoreError,
};

use crate::catalog::Catalog;
use crate::error::ToolError;
use crate::keys::Keyring;
use crate::reply::{
    Gate, NextCall, Pending, Preferences, Reference, SessionInfo, StepReply, Warning,
};
use crate::token::{self, Claims, Kind};

mod outputs;
mod sessions;

/// A boxed future, for [`Executor::execute`].
pub type Executing<'a> = Pin<Box<dyn Future<Output = Result<RunReport, String>> + Send + 'a>>;

/// Runs the engine for the service: loads a workflow's plugins and drives
/// a run until it rests.
pub trait Executor: Send + Sync + 'static {
    /// Load (or find loaded) the plugins of `loaded` for runs in
    /// `workspace`; returns plugin name → `sha256:<hex>` of the component.
    /// Refuses a workspace runs may not use.
    fn prepare(
        &self,
        loaded: &LoadedWorkflow,
        workspace: &Path,
    ) -> Result<BTreeMap<String, String>, String>;

    /// Drive branch `branch` of `run` from `state` until it rests: first
    /// completing the external block it awaits with `answer`, if given.
    fn execute<'a>(
        &'a self,
        run: &'a RunRecord,
        branch: u32,
        loaded: &'a LoadedWorkflow,
        state: RunState,
        answer: Option<ExternalAnswer>,
        sink: &'a mut dyn EventSink,
    ) -> Executing<'a>;
}

/// What `workflow_start` takes.
#[derive(Debug, Clone, Default)]
pub struct Start {
    pub workflow_id: String,
    /// The run's inputs.
    pub context: Option<Map<String, Value>>,
    /// Where the run works; the server's default when absent.
    pub workspace: Option<PathBuf>,
    /// The client's session (workstream) id; the workspace's git branch
    /// names the session when absent.
    pub session_id: Option<String>,
}

/// What `workflow_advance` takes.
#[derive(Debug, Clone, Default)]
pub struct Advance {
    pub state_token: String,
    /// None when `state_token` is a continue token (state and ack in one).
    pub ack_token: Option<String>,
    pub context: Option<Map<String, Value>>,
    pub output: Option<Map<String, Value>>,
    /// Fork from the token's snapshot even though its ack was used with
    /// other output.
    pub fork: bool,
}

/// The settings of a service.
pub struct Settings {
    pub home: PathBuf,
    pub durability: Durability,
    pub workflow_dirs: Vec<PathBuf>,
    pub workspace: PathBuf,
    pub builtins: Vec<&'static str>,
}

/// A run's state at its branch's head, kept between calls so that an
/// advance does not fold the run's whole log.
struct Cached {
    head: u64,
    state: RunState,
    /// When it was last used (a count of uses, service-wide).
    used: u64,
}

/// How many branch states are kept between calls: the most recently used
/// (a state holds its run's whole payload; a server that lives long
/// serves many runs).
pub const KEPT_STATES: usize = 64;
/// How many pinned definitions and run sessions are kept: past these, the
/// cache starts again (each is read from the store once more when needed).
const KEPT_DEFINITIONS: usize = 64;
const KEPT_SESSIONS: usize = 4096;

/// The service behind the tools.
pub struct Service<E: Executor> {
    home: PathBuf,
    durability: Durability,
    keys: RwLock<Keyring>,
    /// The key file as it was when `keys` was read: a rotation by
    /// `wfhost mcp rotate-key` while the server runs changes it, and the
    /// next token is signed with the new key.
    keys_read: Mutex<Option<crate::keys::FileStamp>>,
    pub catalog: Catalog,
    workspace: PathBuf,
    executor: E,
    stores: Mutex<Vec<Store>>,
    busy: Mutex<HashSet<String>>,
    states: Mutex<HashMap<(String, u32), Cached>>,
    uses: std::sync::atomic::AtomicU64,
    definitions: Mutex<HashMap<(String, String), Arc<LoadedWorkflow>>>,
    sessions: Mutex<HashMap<String, Option<SessionTag>>>,
}

/// A store taken from the pool, put back when dropped.
struct Pooled<'p> {
    store: Option<Store>,
    pool: &'p Mutex<Vec<Store>>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("held until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            self.pool.lock().expect("not poisoned").push(store);
        }
    }
}

/// The run is being advanced by this call: other calls get `RUN_BUSY`.
struct Claim<'s> {
    busy: &'s Mutex<HashSet<String>>,
    run_id: String,
    _lock: RunLock,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.busy.lock().expect("not poisoned").remove(&self.run_id);
    }
}

/// The sink of an advance: the store, recording the client's ack with the
/// first append (the external block's completion), and a line per block
/// for the client's progress notifications.
struct AdvanceSink<'w, 's> {
    writer: &'w mut BranchWriter<'s>,
    ack: Option<NewAck>,
    ack_refused: bool,
    progress: Option<UnboundedSender<String>>,
}

impl EventSink for AdvanceSink<'_, '_> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        match self.ack.take() {
            Some(ack) => self.writer.append_acked(events, &ack).map_err(|e| {
                self.ack_refused = matches!(e, StoreError::AckUsed { .. });
                SinkError(e.to_string())
            })?,
            None => self.writer.append(events)?,
        }
        if let Some(progress) = &self.progress {
            for event in events {
                if matches!(
                    event,
                    Event::BlockCompleted { .. } | Event::ExternalAwaited { .. }
                ) {
                    let _ = progress.send(event.describe());
                }
            }
        }
        Ok(())
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        self.writer.append_with_job(events, job)
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.writer.new_gate_id()
    }
}

/// What the client sent, digested: a repeat has the same digest whatever
/// the order of its keys.
pub fn digest(context: Option<&Map<String, Value>>, output: Option<&Map<String, Value>>) -> String {
    let sent = json!({
        "context": context.cloned().map(Value::Object).unwrap_or(Value::Null),
        "output": output.cloned().map(Value::Object).unwrap_or(Value::Null),
    });
    pinning::hash_of(&pinning::canonical_json(&sent))
}

/// What `resume_session` looks for.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub run_id: Option<String>,
    pub workflow_id: Option<String>,
    pub query: Option<String>,
    /// Only runs of this session.
    pub session_id: Option<String>,
    /// Only runs started on this git branch.
    pub git_branch: Option<String>,
    /// The client's workspace: runs started there (or on its git branch)
    /// rank first.
    pub workspace: Option<PathBuf>,
    /// Only runs started in `workspace`.
    pub same_workspace_only: bool,
}

/// What became of a client's answer.
enum Answered {
    Accepted(ExternalAnswer),
    /// Not accepted: the run stays where it is.
    Blocked(outputs::Blocked),
}

/// The client's output, read apart: the step's notes, its signal, and the
/// rest (the block's structured output).
struct Output {
    notes: Option<String>,
    signal: Option<String>,
    data: Map<String, Value>,
}

/// The output of an advance; the notes may come in `output.notesMarkdown`
/// or, as the token contract writes them, `context.notesMarkdown` (taken
/// out of the context); both at once must agree.
fn read_output(
    output: Option<&Map<String, Value>>,
    context: &mut Map<String, Value>,
) -> Result<Output, ToolError> {
    let in_context = match context.remove("notesMarkdown") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(ToolError::invalid(
                "/context/notesMarkdown",
                "must be a string",
            ));
        }
    };
    let mut data = output.cloned().unwrap_or_default();
    let mut text = |key: &str| match data.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::invalid(
            &format!("/output/{key}"),
            "must be a string",
        )),
    };
    let mut notes = text("notesMarkdown")?;
    let signal = text("signal")?;
    match (&notes, in_context) {
        (Some(a), Some(b)) if a != &b => {
            return Err(ToolError::invalid(
                "/context/notesMarkdown",
                "notes given twice, differently (output.notesMarkdown and context.notesMarkdown): send them once",
            ));
        }
        (None, Some(b)) => notes = Some(b),
        _ => {}
    }
    Ok(Output {
        notes,
        signal,
        data,
    })
}

impl<E: Executor> Service<E> {
    pub fn new(settings: Settings, executor: E) -> Result<Service<E>, String> {
        let keys = Keyring::open(&settings.home)?;
        let keys_read = crate::keys::FileStamp::of(&settings.home);
        let store = Store::open(&settings.home, settings.durability).map_err(|e| e.to_string())?;
        Ok(Service {
            home: settings.home,
            durability: settings.durability,
            keys: RwLock::new(keys),
            keys_read: Mutex::new(keys_read),
            catalog: Catalog::new(settings.workflow_dirs, settings.builtins),
            workspace: settings.workspace,
            executor,
            stores: Mutex::new(vec![store]),
            busy: Mutex::new(HashSet::new()),
            states: Mutex::new(HashMap::new()),
            uses: std::sync::atomic::AtomicU64::new(0),
            definitions: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    fn store(&self) -> Result<Pooled<'_>, ToolError> {
        let pooled = self.stores.lock().expect("not poisoned").pop();
        let store = match pooled {
            Some(store) => store,
            None => Store::open(&self.home, self.durability)?,
        };
        Ok(Pooled {
            store: Some(store),
            pool: &self.stores,
        })
    }

    /// Events the service's stores have read back from the log since they
    /// were opened: what tests use to see that an advance does not fold the
    /// run's log (its cost must not grow with the run's length).
    pub fn events_decoded(&self) -> u64 {
        self.stores
            .lock()
            .expect("not poisoned")
            .iter()
            .map(Store::events_decoded)
            .sum()
    }

    /// Take the run for this call, in this process and against others.
    fn claim(&self, store: &Store, run_id: &str) -> Result<Claim<'_>, ToolError> {
        let checked = wfhost_store::RunId::parse(run_id)
            .map_err(|e| ToolError::invalid("/runId", e.to_string()))?;
        if !self
            .busy
            .lock()
            .expect("not poisoned")
            .insert(run_id.to_string())
        {
            return Err(ToolError::busy(run_id));
        }
        let release = || {
            self.busy.lock().expect("not poisoned").remove(run_id);
        };
        match store.lock_run(&checked) {
            Ok(lock) => Ok(Claim {
                busy: &self.busy,
                run_id: run_id.to_string(),
                _lock: lock,
            }),
            Err(e) => {
                release();
                Err(e.into())
            }
        }
    }

    /// Check a token: signature first, then kind. A key id newer than the
    /// keyring's means the key file was rotated since it was read.
    fn verify(&self, text: &str, kinds: &[Kind]) -> Result<Claims, ToolError> {
        self.reread_rotated_keys()?;
        let result = token::decode(&self.keys.read().expect("not poisoned"), text, kinds);
        match result {
            Err(token::TokenError::BadSignature) => {
                let fresh = Keyring::open(&self.home).map_err(ToolError::internal)?;
                let decoded = token::decode(&fresh, text, kinds);
                *self.keys.write().expect("not poisoned") = fresh;
                Ok(decoded?)
            }
            other => Ok(other?),
        }
    }

    fn mint(&self, claims: &Claims) -> String {
        // A key file that cannot be read now keeps the keys read before:
        // the tokens they sign still verify.
        let _ = self.reread_rotated_keys();
        token::encode(&self.keys.read().expect("not poisoned"), claims)
    }

    /// A WorkRail-format short token (`ct_…`, 27 characters) for a
    /// WorkRail field, or the long format when the claims do not fit.
    fn mint_short(&self, claims: &Claims) -> String {
        let _ = self.reread_rotated_keys();
        let keys = self.keys.read().expect("not poisoned");
        token::encode_short(&keys, claims).unwrap_or_else(|| token::encode(&keys, claims))
    }

    /// Read the key file again if it changed since it was read (one
    /// `stat` per token).
    fn reread_rotated_keys(&self) -> Result<(), ToolError> {
        let now = crate::keys::FileStamp::of(&self.home);
        let mut read = self.keys_read.lock().expect("not poisoned");
        if now == *read {
            return Ok(());
        }
        let fresh = Keyring::open(&self.home).map_err(ToolError::internal)?;
        *self.keys.write().expect("not poisoned") = fresh;
        *read = now;
        Ok(())
    }

    /// The run a token names (its number and tag must both match).
    fn run_of(&self, store: &Store, claims: &Claims) -> Result<RunRecord, ToolError> {
        let run = store
            .run_by_number(i64::from(claims.run))?
            .filter(|run| {
                let tag = token::tag(&run.id);
                if claims.short {
                    tag[..2] == claims.run_tag[..2]
                } else {
                    tag == claims.run_tag
                }
            })
            .ok_or_else(|| {
                ToolError::new(
                    "TOKEN_UNKNOWN_RUN",
                    "the token names a run this store does not have (removed by `wfhost gc`?)",
                )
            })?;
        if !claims.short && token::tag(&run.workflow_hash) != claims.workflow_tag {
            return Err(ToolError::new(
                "TOKEN_WORKFLOW_HASH_MISMATCH",
                format!(
                    "the token was minted for another definition than run {}'s",
                    run.id
                ),
            ));
        }
        Ok(run)
    }

    /// The pinned definition of `run` (never the file, which may have
    /// changed).
    fn definition(&self, store: &Store, run: &RunRecord) -> Result<Arc<LoadedWorkflow>, ToolError> {
        let key = (run.workflow_hash.clone(), run.manifest.clone());
        if let Some(found) = self.definitions.lock().expect("not poisoned").get(&key) {
            return Ok(found.clone());
        }
        let json = store.definition(&run.workflow_hash)?;
        let workflow = PinnedDefinition::parse(&json, &run.workflow_hash)
            .map_err(|e| ToolError::internal(format!("run {}: {e}", run.id)))?;
        let loaded = Arc::new(LoadedWorkflow {
            workflow,
            file: PathBuf::from(&run.manifest),
        });
        let mut kept = self.definitions.lock().expect("not poisoned");
        if kept.len() >= KEPT_DEFINITIONS {
            kept.clear();
        }
        kept.insert(key, loaded.clone());
        Ok(loaded)
    }

    /// The state of `branch` at its head: kept from the last call when the
    /// head has not moved since, else folded from the log.
    fn head_state(
        &self,
        store: &Store,
        run_id: &str,
        branch: u32,
    ) -> Result<(u64, RunState), ToolError> {
        self.state_at_head(store, run_id, branch, |kept, key| {
            kept.get_mut(key).map(|c| {
                c.used = self.next_use();
                (c.head, c.state.clone())
            })
        })
    }

    /// [`Service::head_state`] for a call that goes on from it: the kept
    /// state is taken, not copied (a run's state holds its whole payload),
    /// and put back by [`Service::remember`] once the call is done. A call
    /// that fails on the way leaves nothing kept; the next folds the log.
    fn take_state(
        &self,
        store: &Store,
        run_id: &str,
        branch: u32,
    ) -> Result<(u64, RunState), ToolError> {
        self.state_at_head(store, run_id, branch, |kept, key| {
            kept.remove(key).map(|c| (c.head, c.state))
        })
    }

    /// The state of `branch` at its head, from what `kept` gives for it
    /// when that is at the head, else folded from the log.
    fn state_at_head(
        &self,
        store: &Store,
        run_id: &str,
        branch: u32,
        kept: impl FnOnce(
            &mut HashMap<(String, u32), Cached>,
            &(String, u32),
        ) -> Option<(u64, RunState)>,
    ) -> Result<(u64, RunState), ToolError> {
        let head = store
            .branch_head(run_id, branch)?
            .ok_or_else(|| ToolError::internal(format!("run {run_id} has no branch {branch}")))?;
        let key = (run_id.to_string(), branch);
        let found = kept(&mut self.states.lock().expect("not poisoned"), &key);
        match found {
            Some((at, state)) if at == head => Ok((head, state)),
            _ => Ok((head, store.state(run_id, branch)?)),
        }
    }

    fn remember(&self, run_id: &str, branch: u32, head: u64, state: RunState) {
        let used = self.next_use();
        let mut kept = self.states.lock().expect("not poisoned");
        kept.insert((run_id.to_string(), branch), Cached { head, state, used });
        if kept.len() > KEPT_STATES {
            let oldest = kept
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                kept.remove(&oldest);
            }
        }
    }

    fn next_use(&self) -> u64 {
        self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// How many branch states are kept now (at most [`KEPT_STATES`]).
    pub fn kept_states(&self) -> usize {
        self.states.lock().expect("not poisoned").len()
    }

    /// Start a run of a workflow and execute it to its first rest.
    pub async fn start(
        &self,
        start: Start,
        progress: Option<UnboundedSender<String>>,
    ) -> Result<StepReply, ToolError> {
        let entry = self.catalog.find(&start.workflow_id)?;
        let workspace = self.workspace_for(start.workspace.as_deref())?;
        let session = crate::session::session_for(start.session_id.as_deref(), &workspace)
            .map_err(|e| ToolError::invalid("/sessionId", e))?;
        let inputs = wfhost_core::run::inputs::resolve(
            entry.loaded.workflow.inputs.as_ref(),
            start.context.map(Value::Object),
            Vec::new(),
        )
        .map_err(|e| ToolError::invalid("/context", e))?;
        let plugins = self
            .executor
            .prepare(&entry.loaded, &workspace)
            .map_err(|e| ToolError::new("PRECONDITION_FAILED", e))?;
        let mut store = self.store()?;
        let now = wfhost_core::time::now_ms();
        let record = RunRecord {
            id: wfhost_store::new_run_id(now),
            workflow_id: entry.loaded.workflow.id.clone(),
            workflow_hash: entry.pin.hash.clone(),
            manifest: std::path::absolute(&entry.loaded.file)
                .unwrap_or_else(|_| entry.loaded.file.clone())
                .display()
                .to_string(),
            workspace: workspace.display().to_string(),
            created_at: now,
        };
        let mut options = RunOptions::new(record.id.clone());
        options.workflow_hash = entry.pin.hash.clone();
        options.plugins = plugins;
        options.inputs = inputs;
        let started = wfhost_core::run::engine::started_event(&entry.loaded.workflow, &options);
        let _claim = self.claim(&store, &record.id)?;
        store.create_run_in(&record, &entry.pin.json, &started, session.as_ref())?;
        self.keep_session(&record.id, session.clone());
        let state = RunState::start(&started).map_err(|e| ToolError::internal(e.to_string()))?;
        let loaded = self.definition(&store, &record)?;
        let (head, report) = {
            let mut writer = store.writer(&record.id, 1)?;
            let mut sink = AdvanceSink {
                writer: &mut writer,
                ack: None,
                ack_refused: false,
                progress,
            };
            let report = self
                .executor
                .execute(&record, 1, &loaded, state, None, &mut sink)
                .await
                .map_err(|e| stopped(&record.id, e))?;
            (writer.head(), report)
        };
        let mut reply = self.reply(&store, &record, &loaded.workflow, 1, head, &report.state)?;
        reply.references = references(&loaded.workflow, &workspace);
        self.remember(&record.id, 1, head, report.state);
        Ok(reply)
    }

    fn workspace_for(&self, asked: Option<&Path>) -> Result<PathBuf, ToolError> {
        let dir = asked.unwrap_or(&self.workspace);
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {
                Ok(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()))
            }
            Ok(_) => Err(ToolError::invalid(
                "/workspacePath",
                format!("{} is not a directory", dir.display()),
            )),
            Err(e) => Err(ToolError::invalid(
                "/workspacePath",
                format!("{}: {e}", dir.display()),
            )),
        }
    }

    /// The state and ack tokens of an advance, checked against each other.
    fn advance_claims(&self, advance: &Advance) -> Result<(Claims, u16), ToolError> {
        let Some(ack_token) = &advance.ack_token else {
            let both = self.verify(&advance.state_token, &[Kind::Continue])?;
            return Ok((both, both.attempt));
        };
        let state = self.verify(&advance.state_token, &[Kind::State])?;
        let ack = self.verify(ack_token, &[Kind::Ack])?;
        if (ack.run, ack.run_tag) != (state.run, state.run_tag) {
            return Err(ToolError::new(
                "TOKEN_SCOPE_MISMATCH",
                "the ack token belongs to another run than the state token",
            ));
        }
        if ack.seq != state.seq {
            return Err(ToolError::new(
                "TOKEN_SCOPE_MISMATCH",
                "the ack token belongs to another snapshot of the run than the state token",
            ));
        }
        Ok((state, ack.attempt))
    }

    /// Complete the pending external block of the snapshot the tokens name
    /// and execute until the run rests again.
    pub async fn advance(
        &self,
        advance: Advance,
        progress: Option<UnboundedSender<String>>,
    ) -> Result<Value, ToolError> {
        let (claims, attempt) = self.advance_claims(&advance)?;
        let given = digest(advance.context.as_ref(), advance.output.as_ref());
        let mut store = self.store()?;
        let run = self.run_of(&store, &claims)?;
        let _claim = self.claim(&store, &run.id)?;
        let snapshot = u64::from(claims.seq);
        if let Some(used) = store.ack(&run.id, snapshot, u32::from(attempt))? {
            if used.digest == given {
                return self.replay(&mut store, &run, used).await;
            }
            if !advance.fork {
                return Err(self.ack_used(&store, &run, &claims, &used.digest, &given)?);
            }
        }
        let attempt = match store.ack(&run.id, snapshot, u32::from(attempt))? {
            None => u32::from(attempt),
            // `fork: true` after a changed repeat: a repeat of that fork
            // replays it, else a new ack of the snapshot is used.
            Some(_) => match self.same_fork(&store, &run, snapshot, &given)? {
                Some(used) => return self.replay(&mut store, &run, used).await,
                None => store.next_ack_attempt(&run.id, snapshot)?,
            },
        };
        let branch = if store.moved_on(&run.id, claims.branch, snapshot)? {
            store
                .fork(&run.id, &wfhost_store::snapshot_id(&run.id, snapshot))
                .map_err(|e| match e {
                    StoreError::Usage(m) => ToolError::new("RUN_NOT_WAITING", m),
                    other => other.into(),
                })?
        } else {
            claims.branch
        };
        let loaded = self.definition(&store, &run)?;
        let (head, state) = self.take_state(&store, &run.id, branch)?;
        let answered = self.answer(&loaded.workflow, &state, &advance);
        let answer = match answered {
            Ok(Answered::Accepted(answer)) => answer,
            Ok(Answered::Blocked(blocked)) => {
                // The run where it rests (the same step, the same tokens),
                // and why the output was not accepted.
                let reply = self.reply(&store, &run, &loaded.workflow, branch, head, &state);
                self.remember(&run.id, branch, head, state);
                let reply = reply?.blocked(blocked);
                return Ok(serde_json::to_value(&reply).expect("a reply serializes"));
            }
            Err(e) => {
                self.remember(&run.id, branch, head, state);
                return Err(e);
            }
        };
        let ack = NewAck {
            snapshot,
            attempt,
            digest: given,
        };
        let (head, report) = {
            let mut writer = store.writer(&run.id, branch)?;
            let mut sink = AdvanceSink {
                writer: &mut writer,
                ack: Some(ack),
                ack_refused: false,
                progress,
            };
            let executed = self
                .executor
                .execute(&run, branch, &loaded, state, Some(answer), &mut sink)
                .await;
            if sink.ack_refused {
                return Err(ToolError::busy(&run.id));
            }
            let report = executed.map_err(|e| stopped(&run.id, e))?;
            (writer.head(), report)
        };
        let reply = self.reply(&store, &run, &loaded.workflow, branch, head, &report.state)?;
        self.remember(&run.id, branch, head, report.state);
        let value = serde_json::to_value(&reply).expect("a reply serializes");
        store.record_ack_response(&run.id, snapshot, attempt, &value.to_string())?;
        Ok(value)
    }

    /// Another ack of `snapshot` used with the same request (a `fork:
    /// true` repeated).
    fn same_fork(
        &self,
        store: &Store,
        run: &RunRecord,
        snapshot: u64,
        given: &str,
    ) -> Result<Option<wfhost_store::Ack>, ToolError> {
        let last = store.next_ack_attempt(&run.id, snapshot)?;
        for attempt in 1..last {
            if let Some(used) = store.ack(&run.id, snapshot, attempt)?
                && used.digest == given
            {
                return Ok(Some(used));
            }
        }
        Ok(None)
    }

    /// The reply an ack's advance was answered with. An advance whose
    /// process stopped before the run came to rest is taken up again.
    async fn replay(
        &self,
        store: &mut Store,
        run: &RunRecord,
        used: wfhost_store::Ack,
    ) -> Result<Value, ToolError> {
        if let Some(response) = &used.response {
            return serde_json::from_str(response)
                .map_err(|e| ToolError::internal(format!("a recorded reply does not read: {e}")));
        }
        let loaded = self.definition(store, run)?;
        let (mut head, mut state) = self.take_state(store, &run.id, used.branch)?;
        if state.can_continue() {
            // The process that advanced it stopped before the run came to
            // rest: it goes on from where its log ends.
            let mut writer = store.writer(&run.id, used.branch)?;
            let resumed = Event::Resumed {
                interrupted: state.in_flight.clone(),
            };
            state
                .apply(&resumed)
                .map_err(|e| ToolError::internal(e.to_string()))?;
            writer.append(std::slice::from_ref(&resumed))?;
            let mut sink = AdvanceSink {
                writer: &mut writer,
                ack: None,
                ack_refused: false,
                progress: None,
            };
            let report = self
                .executor
                .execute(run, used.branch, &loaded, state, None, &mut sink)
                .await
                .map_err(|e| stopped(&run.id, e))?;
            head = writer.head();
            state = report.state;
        }
        let reply = self.reply(store, run, &loaded.workflow, used.branch, head, &state)?;
        self.remember(&run.id, used.branch, head, state);
        let value = serde_json::to_value(&reply).expect("a reply serializes");
        store.record_ack_response(&run.id, used.snapshot, used.attempt, &value.to_string())?;
        Ok(value)
    }

    fn ack_used(
        &self,
        store: &Store,
        run: &RunRecord,
        claims: &Claims,
        recorded: &str,
        given: &str,
    ) -> Result<ToolError, ToolError> {
        let next = store.next_ack_attempt(&run.id, u64::from(claims.seq))?;
        let fork_ack = self.mint(&Claims {
            kind: Kind::Ack,
            attempt: attempt_u16(next)?,
            ..*claims
        });
        let state_token = self.mint(&Claims {
            kind: Kind::State,
            attempt: 0,
            ..*claims
        });
        Ok(ToolError::new(
            "ACK_ALREADY_USED",
            format!(
                "this ack token already advanced run {} with other output (recorded {recorded}, given {given}); nothing was recorded. To branch off with this output instead, advance with the ack token in details.fork, or pass `fork: true`",
                run.id
            ),
        )
        .with_details(json!({
            "recordedDigest": recorded,
            "givenDigest": given,
            "fork": {"stateToken": state_token, "ackToken": fork_ack},
        })))
    }

    /// The client's answer for the block `state` awaits, checked against
    /// the block: its signal, the workflow's inputs (errors), its output
    /// and notes (a blocked answer), and the control blocks right after it
    /// (an error when one of them cannot decide, so that the client can
    /// send the missing context).
    fn answer(
        &self,
        workflow: &Workflow,
        state: &RunState,
        advance: &Advance,
    ) -> Result<Answered, ToolError> {
        let block = awaited_block(workflow, state)?;
        let mut inputs = advance.context.clone().unwrap_or_default();
        let output = read_output(advance.output.as_ref(), &mut inputs)?;
        let signals = signals(block);
        let signal = output.signal.unwrap_or_else(|| "SIGNAL:SUCCESS".into());
        if !signals.contains(&signal) {
            return Err(ToolError::invalid(
                "/output/signal",
                format!(
                    "`{signal}` is not a signal of this step; it has: {}",
                    signals.join(", ")
                ),
            ));
        }
        let mut merged = state.inputs.clone();
        merged.extend(inputs.clone());
        if !inputs.is_empty()
            && let Some(schema) = &workflow.inputs
        {
            wfhost_core::run::inputs::resolve(
                Some(schema),
                Some(Value::Object(merged.clone())),
                Vec::new(),
            )
            .map_err(|e| ToolError::invalid("/context", e))?;
        }
        let Phase::Awaiting {
            node, block: id, ..
        } = &state.phase
        else {
            return Err(not_waiting(&state.run_id, state));
        };
        let step_id = step_id(node, id, block);
        let checked = outputs::check(
            block,
            &step_id,
            output.data,
            output.notes.as_deref(),
            &merged,
        )?;
        let structured = match checked {
            Ok(structured) => structured,
            Err(blocked) => return Ok(Answered::Blocked(blocked)),
        };
        wfhost_core::control::lookahead(workflow, node, id, &signal, &merged, &state.artifacts)
            .map_err(|why| {
                ToolError::new(
                    "PRECONDITION_FAILED",
                    format!("{why}; nothing was recorded: send the step again with it in `context`"),
                )
                .with_details(json!({
                    "reason": "LOOP_MISSING_CONTEXT",
                    "suggestion": "Set the variable the loop needs in the `context` of the call that advances this step, and send it again with the same tokens.",
                }))
            })?;
        Ok(Answered::Accepted(ExternalAnswer {
            signal,
            notes: output.notes,
            structured_output: structured,
            inputs,
        }))
    }

    /// Record notes against the snapshot the run rests at.
    pub async fn checkpoint(&self, state_token: &str, notes: &str) -> Result<StepReply, ToolError> {
        let claims = self.verify(state_token, &[Kind::State, Kind::Checkpoint])?;
        let mut store = self.store()?;
        let run = self.run_of(&store, &claims)?;
        let _claim = self.claim(&store, &run.id)?;
        let snapshot = u64::from(claims.seq);
        if store.moved_on(&run.id, claims.branch, snapshot)? {
            return Err(ToolError::new(
                "SNAPSHOT_NOT_CURRENT",
                "the run went on from this snapshot: a checkpoint records notes where the run rests; use the tokens of its latest reply",
            ));
        }
        let loaded = self.definition(&store, &run)?;
        let (mut head, mut state) = self.head_state(&store, &run.id, claims.branch)?;
        if !matches!(state.phase, Phase::Awaiting { .. }) {
            return Err(not_waiting(&run.id, &state));
        }
        let event = Event::Checkpointed {
            notes_markdown: notes.to_string(),
        };
        let repeated = store
            .event(&run.id, head)?
            .is_some_and(|e| e.event == event);
        if !repeated {
            let mut writer = store.writer(&run.id, claims.branch)?;
            state
                .apply(&event)
                .map_err(|e| ToolError::internal(e.to_string()))?;
            writer.append(std::slice::from_ref(&event))?;
            head = writer.head();
            self.remember(&run.id, claims.branch, head, state.clone());
        }
        let mut reply = self.reply(
            &store,
            &run,
            &loaded.workflow,
            claims.branch,
            snapshot,
            &state,
        )?;
        reply.checkpointed = Some(true);
        Ok(reply)
    }

    /// The reply for the snapshot a token names, with an unused ack: for
    /// the snapshot the run rests at, its pending step; for an older one,
    /// advancing forks the run there.
    pub fn rehydrate(&self, state_token: &str) -> Result<StepReply, ToolError> {
        let claims = self.verify(
            state_token,
            &[Kind::State, Kind::Continue, Kind::Checkpoint],
        )?;
        let store = self.store()?;
        let run = self.run_of(&store, &claims)?;
        let loaded = self.definition(&store, &run)?;
        let snapshot = u64::from(claims.seq);
        let state = if store.moved_on(&run.id, claims.branch, snapshot)? {
            let chain = store.chain(&run.id, claims.branch)?;
            RunState::replay(
                chain
                    .iter()
                    .take_while(|e| e.seq <= snapshot)
                    .map(|e| &e.event),
            )
            .map_err(|e| ToolError::internal(e.to_string()))?
        } else {
            self.head_state(&store, &run.id, claims.branch)?.1
        };
        let mut reply = self.reply(
            &store,
            &run,
            &loaded.workflow,
            claims.branch,
            snapshot,
            &state,
        )?;
        if reply.pending.is_some() {
            reply.next_intent = "rehydrate_only".into();
        }
        reply.references = references(&loaded.workflow, Path::new(&run.workspace));
        Ok(reply)
    }

    /// The session of `run_id`, looked up once (it never changes).
    fn session_of(&self, store: &Store, run_id: &str) -> Result<Option<SessionTag>, ToolError> {
        if let Some(found) = self.sessions.lock().expect("session cache").get(run_id) {
            return Ok(found.clone());
        }
        let found = store.session_of(run_id)?;
        self.keep_session(run_id, found.clone());
        Ok(found)
    }

    fn keep_session(&self, run_id: &str, session: Option<SessionTag>) {
        let mut kept = self.sessions.lock().expect("session cache");
        if kept.len() >= KEPT_SESSIONS {
            kept.clear();
        }
        kept.insert(run_id.to_string(), session);
    }

    /// What to tell the client about the run resting at `rest` on `branch`.
    fn reply(
        &self,
        store: &Store,
        run: &RunRecord,
        workflow: &Workflow,
        branch: u32,
        rest: u64,
        state: &RunState,
    ) -> Result<StepReply, ToolError> {
        let num = store
            .run_number(&run.id)?
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| ToolError::internal(format!("run {} has no number", run.id)))?;
        let seq = u32::try_from(rest)
            .map_err(|_| ToolError::internal(format!("run {} is too long for tokens", run.id)))?;
        let claims = |kind: Kind, attempt: u16| Claims {
            kind,
            run: num,
            run_tag: token::tag(&run.id),
            branch,
            seq,
            workflow_tag: token::tag(&run.workflow_hash),
            attempt,
            short: false,
        };
        let state_token = self.mint(&claims(Kind::State, 0));
        let session = self.session_of(store, &run.id)?;
        let mut reply = StepReply {
            kind: "ok".into(),
            state_token: state_token.clone(),
            ack_token: None,
            continue_token: None,
            checkpoint_token: None,
            is_complete: false,
            status: state.phase.status().to_string(),
            pending: None,
            next_intent: "complete".into(),
            next_call: None,
            session: SessionInfo {
                run_id: run.id.to_string(),
                workflow_id: run.workflow_id.clone(),
                workflow_hash: run.workflow_hash.clone(),
                branch,
                snapshot: wfhost_store::snapshot_id(&run.id, rest),
                steps: state.steps,
                session_id: session.as_ref().map(|s| s.id.clone()),
                git_branch: session.and_then(|s| s.git_branch),
            },
            warnings: self.warnings(run),
            failure: None,
            gate: None,
            checkpointed: None,
            preferences: Preferences::default(),
            blockers: None,
            retryable: None,
            retry_continue_token: None,
            validation: None,
            assessment_followup: None,
            references: None,
        };
        match &state.phase {
            Phase::Awaiting {
                node,
                block,
                prompt,
                ..
            } => {
                let attempt = attempt_u16(store.next_ack_attempt(&run.id, rest)?)?;
                let ack_token = self.mint(&claims(Kind::Ack, attempt));
                let found = workflow.nodes.get(node).and_then(|n| n.blocks.get(block));
                let confirm = found.is_some_and(|b| require_confirmation(b, &state.inputs));
                reply.pending = Some(Pending {
                    step_id: found
                        .map_or_else(|| format!("{node}.{block}"), |b| step_id(node, block, b)),
                    title: found.map_or_else(
                        || format!("{node}.{block}"),
                        |b| template::render(&title(node, block, b), &state.inputs),
                    ),
                    prompt: match found {
                        Some(b) => with_fragments(prompt, b, &state.inputs),
                        None => prompt.clone(),
                    },
                    require_confirmation: confirm,
                    output_schema: found.and_then(|b| b.validation_schema.clone()),
                    signals: found.map(signals).unwrap_or_default(),
                });
                reply.next_intent = if confirm {
                    "await_user_confirmation".into()
                } else {
                    "perform_pending_then_continue".into()
                };
                let mut params = Map::new();
                params.insert("stateToken".into(), state_token.into());
                params.insert("ackToken".into(), ack_token.clone().into());
                reply.next_call = Some(NextCall {
                    tool: "workflow_advance".into(),
                    params,
                });
                reply.ack_token = Some(ack_token);
                reply.continue_token = Some(self.mint_short(&claims(Kind::Continue, attempt)));
                reply.checkpoint_token = Some(self.mint_short(&claims(Kind::Checkpoint, 0)));
            }
            Phase::Waiting {
                gate_id, prompt, ..
            } => {
                reply.status = "waiting_at_gate".into();
                reply.next_intent = "await_gate".into();
                reply.gate = Some(Gate {
                    id: gate_id.clone(),
                    prompt: prompt.clone(),
                    answer_with: format!("wfhost gate {} {gate_id} approved", run.id),
                });
            }
            Phase::Finished(outcome) => {
                reply.is_complete = true;
                reply.failure = outcome.unsuccessful_reason();
            }
            Phase::Sleeping {
                due_at_ms,
                retry,
                node,
                block,
                ..
            } => {
                // A `sleep` block or a retry's wait: `wfhost resume` (or a
                // server) wakes it.
                reply.status = "sleeping".into();
                reply.next_intent = "await_timer".into();
                let due = wfhost_core::time::iso_utc(*due_at_ms);
                let what = match retry {
                    Some(n) => format!("retry {n} of {node}.{block} is due at {due}"),
                    None => format!("sleeping until {due}"),
                };
                reply.failure = Some(format!(
                    "{what}: `wfhost resume {}` continues it then",
                    run.id
                ));
            }
            Phase::Ready { .. } | Phase::Deciding { .. } => {
                reply.status = "interrupted".into();
                reply.next_intent = "resume".into();
            }
        }
        Ok(reply)
    }

    /// `WORKFLOW_CHANGED_ON_DISK` when the run's manifest is not what the
    /// run is pinned to any more.
    fn warnings(&self, run: &RunRecord) -> Vec<Warning> {
        let path = Path::new(&run.manifest);
        match self.catalog.hash_now(path) {
            Some(now) if now == run.workflow_hash => Vec::new(),
            now => vec![Warning {
                code: "WORKFLOW_CHANGED_ON_DISK".into(),
                message: format!(
                    "{} changed since run {} started; the run goes on with the definition it is pinned to",
                    run.manifest, run.id
                ),
                details: Some(json!({
                    "file": run.manifest,
                    "pinnedHash": run.workflow_hash,
                    "currentHash": now,
                })),
            }],
        }
    }
}

fn attempt_u16(attempt: u32) -> Result<u16, ToolError> {
    u16::try_from(attempt).map_err(|_| {
        ToolError::new(
            "TOO_MANY_ATTEMPTS",
            "this snapshot was advanced 65,535 times: start from a later one",
        )
    })
}

fn stopped(run_id: &str, e: String) -> ToolError {
    ToolError::internal(format!(
        "run {run_id} stopped: {e}; its log is intact up to the last recorded event"
    ))
}

fn not_waiting(run_id: &str, state: &RunState) -> ToolError {
    ToolError::new(
        "RUN_NOT_WAITING",
        format!(
            "run {run_id} is {}: it waits for no external step here",
            state.phase.status()
        ),
    )
}

/// The external block `state` awaits.
fn awaited_block<'w>(workflow: &'w Workflow, state: &RunState) -> Result<&'w Block, ToolError> {
    let Phase::Awaiting { node, block, .. } = &state.phase else {
        return Err(not_waiting(&state.run_id, state));
    };
    workflow
        .nodes
        .get(node)
        .and_then(|n| n.blocks.get(block))
        .ok_or_else(|| {
            ToolError::internal(format!("block {node}.{block} is not in the definition"))
        })
}

/// The signals a client may answer an external block with: those of its
/// transitions, and `SIGNAL:SUCCESS`.
fn signals(block: &Block) -> Vec<String> {
    let mut out = vec!["SIGNAL:SUCCESS".to_string()];
    for t in &block.transitions {
        if !out.contains(&t.on_signal) && t.on_signal != wfhost_core::run::transitions::FAIL_DEFAULT
        {
            out.push(t.on_signal.clone());
        }
    }
    out
}

/// The step id a client sees: a WorkRail step's own id
/// (`config.step_id`), else `node.block`.
fn step_id(node: &str, block: &str, b: &Block) -> String {
    b.config
        .get("step_id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{node}.{block}"), str::to_string)
}

/// The pending prompt with the block's prompt fragments whose `when`
/// holds over the run's inputs now (`config.prompt_fragments`), each
/// rendered, in order, after a blank line.
fn with_fragments(prompt: &str, b: &Block, inputs: &Map<String, Value>) -> String {
    let Some(fragments) = b.config.get("prompt_fragments").and_then(Value::as_array) else {
        return prompt.to_string();
    };
    let mut out = prompt.to_string();
    for fragment in fragments {
        let holds = match fragment.get("when") {
            None => true,
            Some(when) => Condition::parse(when).is_ok_and(|c| c.holds(inputs)),
        };
        if let (true, Some(text)) = (holds, fragment.get("text").and_then(Value::as_str)) {
            out.push_str("\n\n");
            out.push_str(&template::render(text, inputs));
        }
    }
    out
}

/// The workflow's references (`config.workflow_references` of its
/// blocks), each resolved in the run's workspace: a file that exists
/// there, without leaving it.
fn references(workflow: &Workflow, workspace: &Path) -> Option<Vec<Reference>> {
    let declared = workflow
        .nodes
        .values()
        .flat_map(|n| n.blocks.values())
        .find_map(|b| b.config.get("workflow_references"))?
        .as_array()?;
    let root = workspace.canonicalize().ok();
    let text = |r: &Value, key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    Some(
        declared
            .iter()
            .map(|r| {
                let source = text(r, "source");
                let resolved = root.as_ref().and_then(|root| {
                    let file = root.join(&source).canonicalize().ok()?;
                    (file.starts_with(root) && file.is_file()).then_some(file)
                });
                Reference {
                    id: text(r, "id"),
                    title: text(r, "title"),
                    purpose: text(r, "purpose"),
                    authoritative: r.get("authoritative").and_then(Value::as_bool) == Some(true),
                    status: if resolved.is_some() {
                        "resolved"
                    } else {
                        "unresolved"
                    }
                    .into(),
                    resolved_path: resolved.map(|f| f.display().to_string()),
                    source,
                }
            })
            .collect(),
    )
}

/// An external block's `config.title`, else its address.
fn title(node: &str, block: &str, b: &Block) -> String {
    b.config
        .get("title")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{node}.{block}"), str::to_string)
}

/// Whether the client asks the user before advancing: the block's
/// `config.require_confirmation`, a boolean or a condition over the run's
/// inputs (a WorkRail `requireConfirmation`).
fn require_confirmation(b: &Block, inputs: &Map<String, Value>) -> bool {
    match b.config.get("require_confirmation") {
        Some(Value::Bool(yes)) => *yes,
        Some(condition @ Value::Object(_)) => {
            Condition::parse(condition).is_ok_and(|c| c.holds(inputs))
        }
        _ => false,
    }
}
