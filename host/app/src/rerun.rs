//! Running a run again after a fix (`wfhost rerun`): a new run with the
//! old one's inputs, workspace and executor, under the manifest as it is
//! now (or the definition the old run was pinned to), from the beginning
//! or from one of its steps with the payload and block outputs it had
//! then. The new run records which run it repeats.

use std::path::{Path, PathBuf};

use wfhost_core::formats;
use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::run::event::RerunOf;
use wfhost_core::run::state::{Phase, RunState};
use wfhost_protocol::AppError;
use wfhost_store::{RunRecord, Store, StoredEvent};

use crate::plugins::{builtin_names, pinned_workflow};

/// Which definition a rerun executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Definition {
    /// The manifest file as it is now (the fix).
    #[default]
    Current,
    /// The definition the old run was pinned to.
    Pinned,
}

/// Where a rerun starts and what it starts with.
#[derive(Debug, Clone)]
pub struct Seed {
    /// `(node, block)`, when not the workflow's start.
    pub start_at: Option<(String, String)>,
    pub rerun_of: RerunOf,
}

/// A rerun, ready to be checked and started like a new run.
pub struct Plan {
    pub manifest: PathBuf,
    pub definition: LoadedWorkflow,
    pub workspace: PathBuf,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// As the old run recorded it (empty: local).
    pub executor: String,
    pub seed: Seed,
}

/// The rerun of `run` (its current branch) from `from` (a step number or
/// a block; the beginning when `None`) under `definition`.
pub fn plan(
    store: &Store,
    run: &RunRecord,
    from: Option<&str>,
    definition: Definition,
) -> Result<Plan, AppError> {
    let branch = store.current_branch(&run.id).map_err(crate::store_error)?;
    let chain = store.chain(&run.id, branch).map_err(crate::store_error)?;
    let state = replay(&run.id, &chain)?;
    let workflow = definition_of(store, run, definition)?;
    let mut seed = Seed {
        start_at: None,
        rerun_of: RerunOf {
            run_id: run.id.to_string(),
            from_step: None,
            payload: Vec::new(),
            artifacts: Default::default(),
        },
    };
    if let Some(from) = from {
        seed = seed_from(&run.id, &chain, from, &workflow)?;
    }
    Ok(Plan {
        manifest: PathBuf::from(&run.manifest),
        definition: workflow,
        workspace: PathBuf::from(&run.workspace),
        inputs: state.inputs.clone(),
        executor: state.default_executor.clone(),
        seed,
    })
}

fn replay(run_id: &str, chain: &[StoredEvent]) -> Result<RunState, AppError> {
    RunState::replay(chain.iter().map(|e| &e.event))
        .map_err(|e| AppError::internal(format!("run {run_id}: its log cannot be read: {e}")))
}

/// The workflow a rerun executes: the manifest now, or the pinned one.
fn definition_of(
    store: &Store,
    run: &RunRecord,
    definition: Definition,
) -> Result<LoadedWorkflow, AppError> {
    match definition {
        Definition::Pinned => {
            let json = store
                .definition(&run.workflow_hash)
                .map_err(|e| AppError::bad_input(e).at(run.id.to_string()))?;
            pinned_workflow(&run.id, &json, &run.workflow_hash, Path::new(&run.manifest))
        }
        Definition::Current => {
            let manifest = Path::new(&run.manifest);
            if !manifest.exists() {
                return Err(AppError::bad_input(format!(
                    "run {}: its manifest {} is gone; `--definition pinned` reruns the definition the run was pinned to",
                    run.id, run.manifest
                ))
                .at(run.manifest.clone()));
            }
            formats::load(manifest, &builtin_names())
                .map_err(|errors| AppError::bad_input(errors).at(run.manifest.clone()))
        }
    }
}

/// Start at the step `from` names, with the payload and block outputs the
/// run had before it; the block must be one the workflow still has.
fn seed_from(
    run_id: &str,
    chain: &[StoredEvent],
    from: &str,
    workflow: &LoadedWorkflow,
) -> Result<Seed, AppError> {
    let bad = |e: String| AppError::bad_input(format!("run {run_id}: --from {e}")).at(run_id);
    let (step, snapshot) = wfhost_store::view::before_step(chain, from).map_err(bad)?;
    let upto = chain
        .iter()
        .position(|e| e.snapshot.as_deref() == Some(snapshot.as_str()))
        .ok_or_else(|| {
            bad(format!(
                "step {step}: its snapshot {snapshot} is not on the branch"
            ))
        })?;
    let before = replay(run_id, &chain[..=upto])?;
    let (node, block) = match &before.phase {
        Phase::Ready { node, block } if before.stack.is_empty() && before.fan_out.is_none() => {
            (node.clone(), block.clone())
        }
        _ => {
            return Err(bad(format!(
                "step {step}: the run was inside a subroutine call or a parallel block there; rerun from a step outside them, or from the beginning"
            )));
        }
    };
    let known = workflow
        .workflow
        .nodes
        .get(&node)
        .is_some_and(|n| n.blocks.contains_key(&block));
    if !known {
        return Err(bad(format!(
            "step {step} ran {node}.{block}, which {} does not have any more",
            workflow.file.display()
        )));
    }
    Ok(Seed {
        start_at: Some((node, block)),
        rerun_of: RerunOf {
            run_id: run_id.to_string(),
            from_step: Some(step),
            payload: before.payload,
            artifacts: before.artifacts,
        },
    })
}
