//! A workflow run: the engine that drives it and the concepts it is made
//! of.
//!
//! - [`engine`]: the Node/Block loop (`run`, `resume`, `drive`) and the
//!   [`engine::WorkerHost`] roles (`BlockRunner`, `Lanes`, `SessionReads`,
//!   `TelemetrySource`) / [`engine::ActionInterpreter`] traits adapters
//!   implement;
//! - [`event`]: the durable events of a run and the sinks they go to;
//!   [`state`]: `RunState`, their fold;
//! - [`questions`]: gates that ask several questions;
//!   [`transitions`]: signal → transition resolution;
//! - [`context`], [`prompt`]: what a block is given (the context layers,
//!   the system prompt);
//! - [`payload`], [`merge`]: the payload a run carries and the
//!   `payload_merge_strategy` language;
//! - [`inputs`], [`template`]: the run's inputs and `{{inputs.NAME}}`;
//! - [`validation`]: output cleaning and JSON Schema validation.

pub mod context;
pub mod engine;
pub mod event;
pub mod inputs;
pub mod merge;
pub mod payload;
pub mod prompt;
pub mod questions;
pub mod state;
pub mod template;
pub mod transitions;
pub mod validation;
