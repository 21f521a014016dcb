//! Export and import of a whole run as one versioned file: the run's
//! identity, its pinned definition and every event of every branch, with a
//! checksum. Importing it into another store shows the same run.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wfhost_core::manifest::pinning;
use wfhost_core::run::event::Event;
use wfhost_core::run::state::RunState;

use crate::{RunRecord, SessionTag, Store, StoreError, StoredEvent};

/// The `format` field of every bundle.
pub const BUNDLE_FORMAT: &str = "wfhost-run-bundle";
/// The bundle version this wfhost writes and reads.
pub const BUNDLE_VERSION: u32 = 1;

/// One exported event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundledEvent {
    pub seq: u64,
    pub branch: u32,
    pub parent: Option<u64>,
    pub at: i64,
    pub event: Event,
}

/// A run bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub format: String,
    pub version: u32,
    /// The event format of `events` ([`wfhost_core::run::event::EVENT_FORMAT`]).
    pub event_format: u32,
    pub run: RunRecord,
    /// The pinned definition, canonical JSON (its hash is
    /// `run.workflow_hash`).
    pub definition: String,
    pub events: Vec<BundledEvent>,
    /// The session the run belongs to, if any (absent in bundles of runs
    /// of no session, so those read as they always did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionTag>,
    /// `sha256:<hex>` over everything above.
    pub checksum: String,
}

#[derive(Serialize)]
struct Checked<'a> {
    format: &'a str,
    version: u32,
    event_format: u32,
    run: &'a RunRecord,
    definition: &'a str,
    events: &'a [BundledEvent],
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a SessionTag>,
}

fn checksum(b: &Bundle) -> String {
    let bytes = serde_json::to_vec(&Checked {
        format: &b.format,
        version: b.version,
        event_format: b.event_format,
        run: &b.run,
        definition: &b.definition,
        events: &b.events,
        session: b.session.as_ref(),
    })
    .expect("bundles serialize");
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl Bundle {
    /// Parse and verify a bundle file's content; every failure says what is
    /// wrong with the file.
    pub fn parse(text: &[u8]) -> Result<Bundle, String> {
        let value: serde_json::Value = serde_json::from_slice(text)
            .map_err(|e| format!("not a wfhost run bundle: not JSON ({e})"))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(BUNDLE_FORMAT) {
            return Err(format!(
                "not a wfhost run bundle: `format` is not \"{BUNDLE_FORMAT}\""
            ));
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(BUNDLE_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "bundle version {v} is not supported: this wfhost reads version {BUNDLE_VERSION}"
                ));
            }
            None => return Err("the bundle has no `version`".into()),
        }
        let bundle: Bundle =
            serde_json::from_value(value).map_err(|e| format!("the bundle is malformed: {e}"))?;
        let readable =
            wfhost_core::run::event::OLDEST_EVENT_FORMAT..=wfhost_core::run::event::EVENT_FORMAT;
        if !readable.contains(&bundle.event_format) {
            return Err(format!(
                "the bundle's events are in format {}, this wfhost reads formats {} to {}",
                bundle.event_format,
                readable.start(),
                readable.end()
            ));
        }
        if let Some(session) = &bundle.session {
            session.check().map_err(|e| format!("/session/id: {e}"))?;
        }
        let expected = checksum(&bundle);
        if bundle.checksum != expected {
            return Err(format!(
                "checksum mismatch: the bundle says {}, its content hashes to {expected}; the file is damaged or was edited",
                bundle.checksum
            ));
        }
        pinning::PinnedDefinition::parse(&bundle.definition, &bundle.run.workflow_hash)?;
        Ok(bundle)
    }
}

impl Store {
    /// Everything about run `run_id`, as a bundle.
    pub fn export(&self, run_id: &str) -> Result<Bundle, StoreError> {
        let run = self.resolve_run(run_id)?;
        let session = self.session_of(&run.id)?;
        let definition = self.definition(&run.workflow_hash)?;
        let events = self
            .events_after(&run.id, 0)?
            .into_iter()
            .map(|e: StoredEvent| BundledEvent {
                seq: e.seq,
                branch: e.branch,
                parent: e.parent,
                at: e.at,
                event: e.event,
            })
            .collect();
        let mut bundle = Bundle {
            format: BUNDLE_FORMAT.into(),
            version: BUNDLE_VERSION,
            event_format: wfhost_core::run::event::EVENT_FORMAT,
            run,
            definition,
            events,
            session,
            checksum: String::new(),
        };
        bundle.checksum = checksum(&bundle);
        Ok(bundle)
    }

    /// Add a verified bundle's run to this store, all or nothing. Every
    /// branch must fold, so a bundle never brings in a log that cannot be
    /// resumed.
    pub fn import(&mut self, bundle: &Bundle) -> Result<(), StoreError> {
        if self.run(&bundle.run.id)?.is_some() {
            return Err(StoreError::RunExists(bundle.run.id.to_string()));
        }
        check(bundle)?;
        let (tx, path) = self.begin()?;
        insert(&tx, bundle).map_err(|e| StoreError::from_db(&path, e))?;
        tx.commit().map_err(|e| StoreError::from_db(&path, e))?;
        Ok(())
    }
}

/// A bundle's log, checked before anything of it is written.
pub(crate) fn check(bundle: &Bundle) -> Result<(), StoreError> {
    check_tree(bundle).map_err(|m| {
        StoreError::Usage(format!(
            "the bundle of run {} has an invalid log: {m}",
            bundle.run.id
        ))
    })
}

/// Write a checked bundle's run inside `tx`.
pub(crate) fn insert(tx: &crate::db::Db, bundle: &Bundle) -> crate::db::DbResult<()> {
    tx.execute(
        "INSERT INTO definitions (hash, workflow_id, body) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        (
            &bundle.run.workflow_hash,
            &bundle.run.workflow_id,
            &bundle.definition,
        ),
    )?;
    let r = &bundle.run;
    let run = crate::insert_run(tx, r)?;
    for e in &bundle.events {
        crate::log::insert_event(tx, run, &r.id, e.seq, e.branch, e.parent, e.at, &e.event)?;
    }
    if let Some(session) = &bundle.session {
        crate::sessions::insert(tx, run, session)?;
    }
    Ok(())
}

/// The bundle's events form a tree whose every branch folds.
fn check_tree(bundle: &Bundle) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut by_seq: BTreeMap<u64, &BundledEvent> = BTreeMap::new();
    for (i, e) in bundle.events.iter().enumerate() {
        if e.seq != i as u64 + 1 {
            return Err(format!("event {} is numbered {}", i + 1, e.seq));
        }
        match e.parent {
            None if e.seq != 1 => return Err(format!("event {} has no parent", e.seq)),
            Some(p) if p >= e.seq => return Err(format!("event {} has a later parent", e.seq)),
            _ => {}
        }
        by_seq.insert(e.seq, e);
    }
    let heads: BTreeMap<u32, u64> = bundle.events.iter().map(|e| (e.branch, e.seq)).collect();
    for (branch, head) in heads {
        let mut chain = Vec::new();
        let mut at = Some(head);
        while let Some(seq) = at {
            let e = by_seq
                .get(&seq)
                .ok_or_else(|| format!("branch {branch} refers to missing event {seq}"))?;
            chain.push(&e.event);
            at = e.parent;
        }
        chain.reverse();
        RunState::replay(chain).map_err(|e| format!("branch {branch}: {e}"))?;
    }
    if let Some(Event::RunStarted { run_id, .. }) = bundle.events.first().map(|e| &e.event)
        && run_id != &bundle.run.id
    {
        return Err(format!(
            "the log belongs to run {run_id}, not {}",
            bundle.run.id
        ));
    }
    Ok(())
}
