//! The agent contracts, as pure types and checks: what an agent CLI
//! writes (`block_output`: `.output/block-<id>.json` and its defects), the
//! JSON-only agent protocol (`agent_protocol`: universal input and output,
//! status → signal or gate), and the orchestrator artifacts of a session
//! (`session_artifacts`: `status.json` decisions and `tasks.yaml`;
//! `session_projection`: both as a fold of a run's events; `status_merge`:
//! the host's `status.json` merged with the fields agents keep in it;
//! `repo_state`: the universal input's `repo_state` read from the
//! repository), and the known
//! agent CLIs (`presets`: argv, permissions, result adapter).

pub mod agent_protocol;
pub mod artifact_content;
pub mod block_output;
pub mod presets;
pub mod repo_state;
pub mod session_artifacts;
pub mod session_changes;
pub mod session_projection;
pub mod status_merge;
