//! The wfhost engine core.
//!
//! This crate owns the concepts of a workflow run and nothing about how
//! blocks are executed. One folder per concept:
//!
//! - [`manifest`]: the workflow manifest, its loading and static checks;
//! - [`formats`]: foreign workflow formats translated to a manifest
//!   (stage graphs, WorkRail);
//! - [`run`]: a run — the Node/Block execution loop ([`run::engine`]), the
//!   durable events of a run ([`run::event`]) and the state they fold into
//!   ([`run::state`]), transitions, context, prompt, payload, inputs;
//! - [`control`]: the control blocks the engine decides itself;
//! - [`parallel`]: parallel blocks (fan-out and fan-in);
//! - [`agents`]: the agent contracts (the block output file, the JSON
//!   agent protocol, the orchestrator artifacts, the agent CLI presets);
//! - [`policy`]: what a workflow may do on the host (the exec policy,
//!   capabilities, secrets);
//! - [`workspace`]: workspace trees on disk, file restrictions, links and
//!   the host's reads of regular files;
//!
//! and a few small modules every part uses: [`ids`], [`json_pointer`],
//! [`text`], [`time`], [`limits`], [`random`], [`bounded_read`]. The engine
//! commands that action handlers return ([`command`]) and the grammar of the
//! default action handler ([`actions`]) come from `wfhost-actions`.
//!
//! It must not depend on wasmtime, Docker or Slurm: those are adapters that
//! implement the roles of [`run::engine::WorkerHost`] (`BlockRunner`,
//! `Lanes`, `SessionReads`, `TelemetrySource`) and
//! [`run::engine::ActionInterpreter`], so the core is tested with
//! in-process fakes.

pub mod agents;
pub mod control;
pub mod formats;
pub mod manifest;
pub mod parallel;
pub mod policy;
pub mod run;
#[cfg(unix)]
pub mod workspace;

pub mod bounded_read;
pub mod ids;
pub mod json_pointer;
pub mod limits;
pub mod random;
pub mod retry;
pub mod schedule;
pub mod text;
pub mod time;
pub mod timers;
pub mod webhook;

pub use wfhost_actions::{command, grammar as actions};
