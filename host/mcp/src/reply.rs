//! What the tools answer: plain JSON objects, each with a published
//! schema (the tool's `outputSchema`), sent as structured content and
//! mirrored as JSON text.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// Where a run rests after `workflow_start`, `workflow_advance` or
/// `workflow_checkpoint`, and the tokens to go on with.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepReply {
    /// `ok`, or `blocked` when the output sent was not accepted: the run
    /// did not move, the same step is pending, and `blockers` say why
    /// (`retryable`: send it again, fixed, with the same tokens).
    pub kind: String,
    /// Names the snapshot the run rests at. Opaque: pass it back as is.
    pub state_token: String,
    /// Advances that snapshot, once. Absent when the run does not wait
    /// for the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_token: Option<String>,
    /// The state and ack tokens in one (`continue_workflow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
    /// Records notes against the snapshot (`checkpoint_workflow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_token: Option<String>,
    /// Whether the run is over (succeeded, failed or cancelled).
    pub is_complete: bool,
    /// `waiting` (for the client), `waiting_at_gate` (for a person),
    /// `sleeping` (a `sleep` block waits; `failure` says until when),
    /// `succeeded`, `failed` or `cancelled` (someone stopped it for good;
    /// `failure` says who and why).
    pub status: String,
    /// The step the client is to perform, when the run waits for it.
    pub pending: Option<Pending>,
    /// `perform_pending_then_continue`, `await_user_confirmation`,
    /// `rehydrate_only` (a rehydrate's reply), `await_gate`, `await_timer`
    /// or `complete`.
    pub next_intent: String,
    /// The call that goes on, with its parameters filled in.
    pub next_call: Option<NextCall>,
    pub session: SessionInfo,
    /// Things the client should know, e.g. `WORKFLOW_CHANGED_ON_DISK`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Why the run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The gate a person answers with `wfhost gate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// Set by `workflow_checkpoint`: the notes were recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpointed: Option<bool>,
    /// How the client is to work: always `{"autonomy": "guided",
    /// "riskPolicy": "conservative"}` (WorkRail's MCP defaults).
    pub preferences: Preferences,
    /// Why a `blocked` reply's output was not accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockers: Option<Blockers>,
    /// On a `blocked` reply: whether sending the step again can succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// On a retryable `blocked` reply: the token to send it again with
    /// (the same as `continueToken`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_continue_token: Option<String>,
    /// On a `blocked` reply: the problems found in the output, and what
    /// to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// On a `blocked` reply whose first reason is an assessment's
    /// consequence: the follow-up it asks for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assessment_followup: Option<Followup>,
    /// The documents the workflow points to, resolved in the run's
    /// workspace (on the replies of a start and a rehydrate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub references: Option<Vec<Reference>>,
}

/// The client's working preferences.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preferences {
    pub autonomy: String,
    pub risk_policy: String,
}

impl Default for Preferences {
    fn default() -> Self {
        Preferences {
            autonomy: "guided".into(),
            risk_policy: "conservative".into(),
        }
    }
}

/// The reasons of a `blocked` reply.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Blockers {
    pub blockers: Vec<Blocker>,
}

/// One reason an output was not accepted.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Blocker {
    /// `MISSING_REQUIRED_OUTPUT`, `INVALID_REQUIRED_OUTPUT`,
    /// `MISSING_REQUIRED_NOTES` or `ASSESSMENT_FOLLOWUP_REQUIRED`.
    pub code: String,
    /// What it is about: `{"kind": "output_contract", "contractRef"}`,
    /// `{"kind": "workflow_step", "stepId"}` or `{"kind":
    /// "assessment_dimension", "assessmentId", "dimensionId"}`.
    pub pointer: Value,
    pub message: String,
    pub suggested_fix: String,
}

/// The problems found in a `blocked` reply's output.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Validation {
    pub issues: Vec<String>,
    pub suggestions: Vec<String>,
}

/// The follow-up an assessment's consequence asks for.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Followup {
    pub title: String,
    pub guidance: String,
}

/// A document the workflow points to.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    pub id: String,
    pub title: String,
    /// The path as the workflow gives it.
    pub source: String,
    pub purpose: String,
    pub authoritative: bool,
    /// `resolved` (the file exists in the workspace) or `unresolved`.
    pub status: String,
    /// The file, when resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_path: Option<String>,
}

/// An external block waiting for the client.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// The step's id: a WorkRail step's own id, else `node.block`.
    pub step_id: String,
    pub title: String,
    /// The block's assembled prompt: rules, prefix, task, file
    /// restrictions, output checklist.
    pub prompt: String,
    /// Ask the user before advancing.
    pub require_confirmation: bool,
    /// The JSON Schema the output's data must satisfy, when the block has
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The signals `output.signal` may name (default `SIGNAL:SUCCESS`).
    pub signals: Vec<String>,
}

/// A tool call with its arguments.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NextCall {
    pub tool: String,
    pub params: serde_json::Map<String, Value>,
}

/// Which run and where (informational).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub run_id: String,
    pub workflow_id: String,
    /// `sha256:…` of the definition the run is pinned to.
    pub workflow_hash: String,
    pub branch: u32,
    /// The snapshot id (`sn-…`), as `wfhost show` and `wfhost fork` name it.
    pub snapshot: String,
    /// Blocks completed so far.
    pub steps: u64,
    /// The session (workstream) the run belongs to: the client's session
    /// id, or `git:<branch>@<workspace>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The git branch of the run's workspace when it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
}

/// A structured warning.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Warning {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// A human gate the run waits at.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Gate {
    pub id: String,
    pub prompt: String,
    /// The command a person answers it with.
    pub answer_with: String,
}

/// `workflow_list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListReply {
    pub workflows: Vec<WorkflowSummary>,
    /// Files in the workflow directories that are not valid workflows.
    pub problems: Vec<Problem>,
    /// With a tags file (`workflow-tags.json`) and no `tags` asked: each
    /// tag, how many workflows have it, when to pick it and examples.
    #[serde(rename = "tagSummary", skip_serializing_if = "Option::is_none")]
    pub tag_summary: Option<Vec<TagSummary>>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TagSummary {
    pub id: String,
    pub display_name: String,
    pub count: usize,
    pub when: Vec<String>,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub file: String,
    /// `sha256:…` of its normalized definition.
    pub workflow_hash: String,
    pub blocks: usize,
    /// Blocks the client performs.
    pub external_blocks: usize,
    /// Its tags: those the tags file gives it, else the namespace of a
    /// namespaced id (`ns` of `ns.name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Problem {
    pub file: String,
    pub message: String,
}

/// `workflow_inspect`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectReply {
    #[serde(flatten)]
    pub summary: WorkflowSummary,
    /// The JSON Schema of the run's inputs (`context` of
    /// `workflow_start`), when the workflow declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// The start block, `node.block`.
    pub start: String,
    pub steps: Vec<StepSummary>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepSummary {
    pub step_id: String,
    pub worker: String,
    /// Whether the client performs it.
    pub external: bool,
    pub title: String,
    /// Signal → action.
    pub transitions: Vec<(String, String)>,
}

/// `resume_session`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeReply {
    /// At most five, best first: waiting runs before others, most
    /// recently active first.
    pub candidates: Vec<Candidate>,
    /// How many runs matched.
    pub total_eligible: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub run_id: String,
    pub workflow_id: String,
    /// The branch the reply is for: the one written last.
    pub branch: u32,
    pub status: String,
    /// `node.block` of the step the run waits for, if it waits for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_step_id: Option<String>,
    pub is_complete: bool,
    /// When the branch was last written, unix ms.
    pub last_modified_ms: i64,
    /// `matched_exact_id`, `matched_session`, `matched_branch`,
    /// `matched_workflow_id`, `matched_query`, `same_workspace` or
    /// `recency_fallback`.
    pub why_matched: Vec<String>,
    /// The run where it rests, with fresh tokens (as a rehydrate).
    pub resume: StepReply,
}

/// `session_list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionsReply {
    /// The most recently active first.
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    /// `client` (named by the client) or `git` (the workspace's branch).
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    pub runs: usize,
    /// Unix ms of its first run's start.
    pub created_ms: i64,
    /// Unix ms of its last event.
    pub last_modified_ms: i64,
}

/// `session_export`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportReply {
    pub session_id: String,
    pub runs: usize,
    /// The session bundle (`format` `wfhost-session-bundle`), as
    /// `wfhost session export` writes it; `session_import` and
    /// `wfhost session import` take it.
    pub bundle: Value,
}

/// `session_import`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportReply {
    pub session_id: String,
    /// Runs added to this home.
    pub imported: Vec<String>,
    /// Runs this home held already, identical.
    pub already_present: Vec<String>,
}
