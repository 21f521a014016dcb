//! The MCP server: the tools over [`Service`], on stdio.
//!
//! Each tool is listed under the token-based contract's name
//! (`workflow_start`, …) and, where WorkRail has one, under WorkRail's v2
//! name (`start_workflow`, …), both served by the same handler. Every tool
//! has a title, annotations, an input schema and an output schema; replies
//! are structured content mirrored as JSON text; refusals are errors as
//! data ([`ToolError`]).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};

/// The version of the MCP contract (docs/api/MCP-CHANGELOG.md).
pub const MCP_CONTRACT_VERSION: &str = "2.2.0";

/// The resource of the workflow tags (WorkRail's name for it).
pub const TAGS_URI: &str = "workrail://tags";
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::ToolError;
use crate::reply::{
    ExportReply, ImportReply, InspectReply, ListReply, ResumeReply, SessionsReply, StepReply,
    StepSummary,
};
use crate::service::{Advance, Executor, Resume, Service, Start};

/// `workflow_start` / `start_workflow`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StartArgs {
    /// The workflow's id (`workflow_list`).
    workflow_id: String,
    /// The run's inputs, checked against the workflow's `inputs` schema.
    #[serde(default)]
    context: Option<Map<String, Value>>,
    /// The directory the run works in (default: the server's workspace).
    #[serde(default)]
    workspace_path: Option<String>,
    /// WorkRail's goal: becomes the input `goal`.
    #[serde(default)]
    goal: Option<String>,
    /// The client's session (workstream) id, grouping this run with the
    /// others of the session (at most 256 characters). Default: the git
    /// branch of the workspace, if it is in a repository.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    session_id: Option<String>,
}

/// `workflow_advance`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AdvanceArgs {
    /// From the last reply, as received.
    state_token: String,
    /// From the last reply, as received.
    ack_token: String,
    /// Facts that changed, merged into the run's inputs.
    #[serde(default)]
    context: Option<Map<String, Value>>,
    /// The pending step's result: `notesMarkdown` (the step's note),
    /// `signal` (default `SIGNAL:SUCCESS`), and any other keys, which form
    /// the step's structured output (checked against `pending.outputSchema`).
    #[serde(default)]
    output: Option<Map<String, Value>>,
    /// Branch off from this snapshot even though its ack token was used
    /// with other output.
    #[serde(default)]
    fork: bool,
}

/// `continue_workflow` (WorkRail).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContinueArgs {
    /// `continueToken` of the last reply.
    continue_token: String,
    /// `advance` or `rehydrate` (fresh tokens and the pending step,
    /// nothing advanced). Default: `advance` when notes or artifacts are
    /// sent, else `rehydrate`, as in WorkRail.
    #[serde(default)]
    intent: Option<String>,
    #[serde(default)]
    context: Option<Map<String, Value>>,
    /// WorkRail's other name of `context`.
    #[serde(default)]
    context_variables: Option<Map<String, Value>>,
    #[serde(default)]
    output: Option<Map<String, Value>>,
    /// WorkRail's other name of `output.notesMarkdown`.
    #[serde(default)]
    notes: Option<String>,
    /// WorkRail's other name of `output.artifacts`.
    #[serde(default)]
    artifacts: Option<Vec<Value>>,
    /// Accepted for WorkRail clients (an absolute path); runs keep their
    /// own workspace.
    #[serde(default)]
    workspace_path: Option<String>,
}

impl ContinueArgs {
    /// The context and output with WorkRail's other names folded in
    /// (both names at once are refused).
    fn folded(&mut self) -> Result<(), ToolError> {
        if let Some(vars) = self.context_variables.take() {
            if self.context.is_some() {
                return Err(ToolError::invalid(
                    "/contextVariables",
                    "give `context` or `contextVariables`, not both",
                ));
            }
            self.context = Some(vars);
        }
        for (key, value) in [
            ("notesMarkdown", self.notes.take().map(Value::String)),
            ("artifacts", self.artifacts.take().map(Value::Array)),
        ] {
            let Some(value) = value else { continue };
            let output = self.output.get_or_insert_with(Map::new);
            if output.contains_key(key) {
                let alias = if key == "notesMarkdown" {
                    "notes"
                } else {
                    "artifacts"
                };
                return Err(ToolError::invalid(
                    &format!("/{alias}"),
                    format!("give `{alias}` or `output.{key}`, not both"),
                ));
            }
            output.insert(key.into(), value);
        }
        Ok(())
    }

    /// Whether the call advances: its intent, else whether it sends
    /// notes or artifacts.
    fn advances(&self) -> Result<bool, ToolError> {
        match self.intent.as_deref() {
            Some("rehydrate") => Ok(false),
            Some("advance") => Ok(true),
            Some(other) => Err(ToolError::invalid(
                "/intent",
                format!("`{other}`: expected `advance` or `rehydrate`"),
            )),
            None => Ok(self.output.as_ref().is_some_and(|o| {
                o.get("notesMarkdown")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty())
                    || o.get("artifacts").is_some_and(|a| !a.is_null())
            })),
        }
    }
}

/// A `workspacePath` must be absolute, as WorkRail requires.
fn absolute_workspace(path: Option<&String>) -> Result<(), ToolError> {
    match path {
        Some(p) if !std::path::Path::new(p).is_absolute() => Err(ToolError::invalid(
            "/workspacePath",
            format!("`{p}`: workspacePath must be an absolute path"),
        )),
        _ => Ok(()),
    }
}

/// `workflow_checkpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CheckpointArgs {
    state_token: String,
    notes_markdown: String,
}

/// `checkpoint_workflow` (WorkRail).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CheckpointWrArgs {
    checkpoint_token: String,
    #[serde(default)]
    notes_markdown: Option<String>,
}

/// `workflow_list` / `list_workflows`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ListArgs {
    /// Accepted for WorkRail clients (an absolute path); the list is the
    /// server's.
    #[serde(default)]
    workspace_path: Option<String>,
    /// Only the workflows with any of these tags (from the workflow
    /// directory's `workflow-tags.json`, or a namespaced id's namespace).
    #[serde(default)]
    tags: Option<Vec<String>>,
    /// Accepted for WorkRail clients.
    #[serde(default)]
    #[allow(dead_code)]
    include_sources: Option<bool>,
}

/// `workflow_inspect` / `inspect_workflow`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InspectArgs {
    workflow_id: String,
    /// Accepted for WorkRail clients; the whole workflow is shown.
    #[serde(default)]
    #[allow(dead_code)]
    mode: Option<String>,
    /// Accepted for WorkRail clients (an absolute path).
    #[serde(default)]
    workspace_path: Option<String>,
}

/// `resume_session` (WorkRail).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResumeArgs {
    /// A run id: that run.
    #[serde(default)]
    run_id: Option<String>,
    /// Only runs of this workflow.
    #[serde(default)]
    workflow_id: Option<String>,
    /// Text to find in the run id, workflow id or manifest path (at most
    /// 256 characters).
    #[serde(default)]
    #[schemars(length(max = 256))]
    query: Option<String>,
    /// Only runs of this session.
    #[serde(default)]
    #[schemars(length(max = 256))]
    session_id: Option<String>,
    /// Only runs started on this git branch.
    #[serde(default)]
    #[schemars(length(max = 256))]
    git_branch: Option<String>,
    /// The client's workspace: runs started there or on its git branch
    /// rank first.
    #[serde(default)]
    workspace_path: Option<String>,
    /// Only runs started in `workspacePath`.
    #[serde(default)]
    same_workspace_only: bool,
}

/// `session_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SessionListArgs {}

/// `session_export`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SessionExportArgs {
    /// The session (`session_list`, or `session.sessionId` of a reply).
    session_id: String,
}

/// `session_import`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SessionImportArgs {
    /// A session bundle, as `session_export` returned it or
    /// `wfhost session export` wrote it.
    bundle: Value,
}

/// How a tool is shown.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    read_only: bool,
    idempotent: bool,
    input: fn() -> Arc<JsonObject>,
    output: fn() -> Arc<JsonObject>,
}

fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_type::<T>()
}

const TOOLS: &[Spec] = &[
    Spec {
        name: "workflow_list",
        title: "List workflows",
        description: "The workflows this server runs, with their ids and hashes.",
        read_only: true,
        idempotent: true,
        input: schema::<ListArgs>,
        output: schema::<ListReply>,
    },
    Spec {
        name: "list_workflows",
        title: "List workflows (WorkRail names)",
        description: "The same as workflow_list.",
        read_only: true,
        idempotent: true,
        input: schema::<ListArgs>,
        output: schema::<ListReply>,
    },
    Spec {
        name: "workflow_inspect",
        title: "Inspect a workflow",
        description: "A workflow's steps, which of them the client performs, and its inputs. Changes nothing.",
        read_only: true,
        idempotent: true,
        input: schema::<InspectArgs>,
        output: schema::<InspectReply>,
    },
    Spec {
        name: "inspect_workflow",
        title: "Inspect a workflow (WorkRail names)",
        description: "The same as workflow_inspect.",
        read_only: true,
        idempotent: true,
        input: schema::<InspectArgs>,
        output: schema::<InspectReply>,
    },
    Spec {
        name: "workflow_start",
        title: "Start a workflow run",
        description: "Start a run (pinned to the workflow's current definition) and execute it to the first step the client performs; returns that step and the tokens to advance it.",
        read_only: false,
        idempotent: false,
        input: schema::<StartArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "start_workflow",
        title: "Start a workflow run (WorkRail names)",
        description: "The same as workflow_start; `goal` becomes the input `goal`.",
        read_only: false,
        idempotent: false,
        input: schema::<StartArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "workflow_advance",
        title: "Advance a workflow run",
        description: "Complete the pending step of the snapshot the tokens name with its output, and execute to the next step the client performs. Repeating a call returns the same reply and advances nothing; an older stateToken with an unused ackToken branches the run.",
        read_only: false,
        idempotent: true,
        input: schema::<AdvanceArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "continue_workflow",
        title: "Continue a workflow run (WorkRail names)",
        description: "workflow_advance with one continueToken; intent `rehydrate` returns fresh tokens and the pending step without advancing.",
        read_only: false,
        idempotent: true,
        input: schema::<ContinueArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "workflow_checkpoint",
        title: "Checkpoint a workflow run",
        description: "Record notes against the snapshot the run rests at, without advancing it.",
        read_only: false,
        idempotent: true,
        input: schema::<CheckpointArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "checkpoint_workflow",
        title: "Checkpoint a workflow run (WorkRail names)",
        description: "workflow_checkpoint with a checkpointToken.",
        read_only: false,
        idempotent: true,
        input: schema::<CheckpointWrArgs>,
        output: schema::<StepReply>,
    },
    Spec {
        name: "resume_session",
        title: "Find runs to resume",
        description: "Runs in this home to take up again — by run id, workflow id or text in the run's id, workflow or manifest, else the latest — waiting runs first, each with fresh tokens for where it rests (as a rehydrate). Changes nothing.",
        read_only: true,
        idempotent: true,
        input: schema::<ResumeArgs>,
        output: schema::<ResumeReply>,
    },
    Spec {
        name: "session_list",
        title: "List sessions",
        description: "The sessions (workstreams) of this home: runs grouped by the client's session id or the git branch they started on, the most recently active first. Changes nothing.",
        read_only: true,
        idempotent: true,
        input: schema::<SessionListArgs>,
        output: schema::<SessionsReply>,
    },
    Spec {
        name: "session_export",
        title: "Export a session",
        description: "A session's runs (identity, pinned definition, every event of every branch) as one checksummed bundle, to keep or to import into another home. Changes nothing.",
        read_only: true,
        idempotent: true,
        input: schema::<SessionExportArgs>,
        output: schema::<ExportReply>,
    },
    Spec {
        name: "session_import",
        title: "Import a session",
        description: "Add a session bundle's runs to this home, all or nothing. Runs already here and identical are skipped; a run here that differs refuses the import.",
        read_only: false,
        idempotent: true,
        input: schema::<SessionImportArgs>,
        output: schema::<ImportReply>,
    },
];

fn tool(spec: &Spec) -> Tool {
    Tool::new_with_raw(
        spec.name,
        Some(Cow::Borrowed(spec.description)),
        (spec.input)(),
    )
    .with_title(spec.title)
    .with_raw_output_schema((spec.output)())
    .with_annotations(
        ToolAnnotations::with_title(spec.title)
            .read_only(spec.read_only)
            .destructive(false)
            .idempotent(spec.idempotent)
            .open_world(false),
    )
}

/// The MCP server of `wfhost mcp`.
pub struct McpServer<E: Executor> {
    service: Arc<Service<E>>,
}

impl<E: Executor> McpServer<E> {
    pub fn new(service: Arc<Service<E>>) -> Self {
        McpServer { service }
    }

    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ToolError> {
        let to_value = |reply: StepReply| serde_json::to_value(reply).expect("serializes");
        match name {
            "workflow_list" | "list_workflows" => {
                let args: ListArgs = parse(args)?;
                absolute_workspace(args.workspace_path.as_ref())?;
                Ok(serde_json::to_value(self.list(args.tags.as_deref())).expect("serializes"))
            }
            "workflow_inspect" | "inspect_workflow" => {
                let args: InspectArgs = parse(args)?;
                absolute_workspace(args.workspace_path.as_ref())?;
                Ok(serde_json::to_value(self.inspect(&args.workflow_id)?).expect("serializes"))
            }
            "workflow_start" | "start_workflow" => {
                let args: StartArgs = parse(args)?;
                absolute_workspace(args.workspace_path.as_ref())?;
                let mut context_in = args.context.unwrap_or_default();
                if let Some(goal) = args.goal {
                    context_in.insert("goal".into(), goal.into());
                }
                let start = Start {
                    workflow_id: args.workflow_id,
                    context: (!context_in.is_empty()).then_some(context_in),
                    workspace: args.workspace_path.map(Into::into),
                    session_id: args.session_id,
                };
                let reply = with_progress(context, |p| self.service.start(start, p)).await?;
                Ok(to_value(reply))
            }
            "workflow_advance" => {
                let args: AdvanceArgs = parse(args)?;
                let advance = Advance {
                    state_token: args.state_token,
                    ack_token: Some(args.ack_token),
                    context: args.context,
                    output: args.output,
                    fork: args.fork,
                };
                with_progress(context, |p| self.service.advance(advance, p)).await
            }
            "resume_session" => {
                let args: ResumeArgs = parse(args)?;
                absolute_workspace(args.workspace_path.as_ref())?;
                for (pointer, text) in [
                    ("/query", &args.query),
                    ("/sessionId", &args.session_id),
                    ("/gitBranch", &args.git_branch),
                ] {
                    if text.as_ref().is_some_and(|q| q.chars().count() > 256) {
                        return Err(ToolError::invalid(pointer, "at most 256 characters"));
                    }
                }
                if args.same_workspace_only && args.workspace_path.is_none() {
                    return Err(ToolError::invalid(
                        "/sameWorkspaceOnly",
                        "needs `workspacePath`",
                    ));
                }
                let found = self.service.resume(&Resume {
                    run_id: args.run_id,
                    workflow_id: args.workflow_id,
                    query: args.query,
                    session_id: args.session_id,
                    git_branch: args.git_branch,
                    workspace: args.workspace_path.map(Into::into),
                    same_workspace_only: args.same_workspace_only,
                })?;
                Ok(serde_json::to_value(found).expect("serializes"))
            }
            "session_list" => {
                let _: SessionListArgs = parse(args)?;
                Ok(serde_json::to_value(self.service.sessions()?).expect("serializes"))
            }
            "session_export" => {
                let args: SessionExportArgs = parse(args)?;
                let reply = self.service.export_session(&args.session_id)?;
                Ok(serde_json::to_value(reply).expect("serializes"))
            }
            "session_import" => {
                let args: SessionImportArgs = parse(args)?;
                let reply = self.service.import_session(args.bundle)?;
                Ok(serde_json::to_value(reply).expect("serializes"))
            }
            "continue_workflow" => {
                let mut args: ContinueArgs = parse(args)?;
                absolute_workspace(args.workspace_path.as_ref())?;
                args.folded()?;
                if !args.advances()? {
                    if args.output.as_ref().is_some_and(|o| !o.is_empty()) {
                        return Err(ToolError::invalid(
                            "/output",
                            "a rehydrate advances nothing: send output with intent `advance`",
                        ));
                    }
                    return Ok(to_value(self.service.rehydrate(&args.continue_token)?));
                }
                let advance = Advance {
                    state_token: args.continue_token,
                    ack_token: None,
                    context: args.context,
                    output: args.output,
                    fork: false,
                };
                with_progress(context, |p| self.service.advance(advance, p)).await
            }
            "workflow_checkpoint" => {
                let args: CheckpointArgs = parse(args)?;
                let reply = self
                    .service
                    .checkpoint(&args.state_token, &args.notes_markdown)
                    .await?;
                Ok(to_value(reply))
            }
            "checkpoint_workflow" => {
                let args: CheckpointWrArgs = parse(args)?;
                let notes = args.notes_markdown.unwrap_or_default();
                let reply = self
                    .service
                    .checkpoint(&args.checkpoint_token, &notes)
                    .await?;
                Ok(to_value(reply))
            }
            other => Err(ToolError::new(
                "NOT_FOUND",
                format!("no tool `{other}`; tools/list lists them"),
            )),
        }
    }

    fn list(&self, tags: Option<&[String]>) -> ListReply {
        let (entries, problems) = self.service.catalog.scan();
        let mut workflows: Vec<_> = entries.iter().map(|e| e.summary()).collect();
        let file = self.service.catalog.tags();
        let tag_summary = crate::tags::apply(&mut workflows, file.as_ref(), tags);
        ListReply {
            workflows,
            problems,
            tag_summary,
        }
    }

    fn inspect(&self, id: &str) -> Result<InspectReply, ToolError> {
        let entry = self.service.catalog.find(id)?;
        let wf = &entry.loaded.workflow;
        let mut steps = Vec::new();
        for (node_id, node) in &wf.nodes {
            for (block_id, block) in &node.blocks {
                steps.push(StepSummary {
                    step_id: format!("{node_id}.{block_id}"),
                    worker: block.worker.clone(),
                    external: block.worker == wfhost_core::manifest::EXTERNAL_WORKER,
                    title: block
                        .config
                        .get("title")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("{node_id}.{block_id}"), str::to_string),
                    transitions: block
                        .transitions
                        .iter()
                        .map(|t| (t.on_signal.clone(), t.action.clone()))
                        .collect(),
                });
            }
        }
        let start = wf
            .nodes
            .get(&wf.start_node)
            .map(|n| format!("{}.{}", wf.start_node, n.entry_block))
            .unwrap_or_default();
        Ok(InspectReply {
            summary: entry.summary(),
            inputs: wf.inputs.clone(),
            start,
            steps,
        })
    }
}

/// Read a tool's arguments; a bad one is named by its JSON pointer.
fn parse<T: DeserializeOwned>(args: JsonObject) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let pointer = if path == "." {
            String::new()
        } else {
            format!("/{}", path.replace('.', "/"))
        };
        ToolError::invalid(&pointer, e.into_inner().to_string())
    })
}

/// Run `work`, forwarding the lines it sends as progress notifications
/// when the client asked for them (a `progressToken`).
async fn with_progress<T, F, Fut>(
    context: &RequestContext<RoleServer>,
    work: F,
) -> Result<T, ToolError>
where
    F: FnOnce(Option<tokio::sync::mpsc::UnboundedSender<String>>) -> Fut,
    Fut: std::future::Future<Output = Result<T, ToolError>>,
{
    let Some(token) = context.meta.get_progress_token() else {
        return work(None).await;
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let work = work(Some(tx));
    tokio::pin!(work);
    let mut sent = 0u32;
    loop {
        tokio::select! {
            result = &mut work => {
                // What arrived meanwhile goes out before the reply.
                while let Ok(line) = rx.try_recv() {
                    sent += 1;
                    notify(context, &token, sent, line).await;
                }
                return result;
            }
            Some(line) = rx.recv() => {
                sent += 1;
                notify(context, &token, sent, line).await;
            }
        }
    }
}

async fn notify(
    context: &RequestContext<RoleServer>,
    token: &rmcp::model::ProgressToken,
    n: u32,
    line: String,
) {
    let param = ProgressNotificationParam::new(token.clone(), f64::from(n)).with_message(line);
    let _ = context.peer.notify_progress(param).await;
}

impl<E: Executor> ServerHandler for McpServer<E> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
            .with_server_info(
                Implementation::new("wfhost", env!("CARGO_PKG_VERSION")).with_title("wfhost"),
            )
            .with_instructions(format!(
                "Run workflows step by step: workflow_list, workflow_start, then workflow_advance with the stateToken and ackToken of the last reply and the pending step's output, until isComplete. A reply with kind \"blocked\" did not advance: fix the output and send it again with the same tokens. (wfhost MCP contract {MCP_CONTRACT_VERSION})"
            ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // 2025-03-26 to the newest the SDK knows.
        Cow::Borrowed(&ProtocolVersion::KNOWN_VERSIONS[1..])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            TOOLS.iter().map(tool).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        TOOLS.iter().find(|s| s.name == name).map(tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let execution = crate::text::EXECUTION_TOOLS.contains(&request.name.as_ref());
        let result = match self.call(&request.name, args, &context).await {
            Ok(value) => {
                let text = execution.then(|| crate::text::step_reply(&value));
                let mut result = CallToolResult::structured(value);
                if let Some(text) = text {
                    result.content = vec![ContentBlock::text(text)];
                }
                result
            }
            Err(error) => {
                let value = error.to_value();
                let text = execution.then(|| crate::text::error(&value));
                let mut result = CallToolResult::structured_error(value);
                if let Some(text) = text {
                    result.content = vec![ContentBlock::text(text)];
                }
                result
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let tags = Resource::new(TAGS_URI, "tags")
            .with_description("The workflow tags of this server's workflow directories (workflow-tags.json), as WorkRail's workrail://tags.")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![tags]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != TAGS_URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "unknown resource `{}` (this server has {TAGS_URI})",
                    request.uri
                ),
                None,
            ));
        }
        let tags = self
            .service
            .catalog
            .tags()
            .unwrap_or_else(|| serde_json::json!({"version": 1, "tags": [], "workflows": {}}));
        let contents = ResourceContents::TextResourceContents {
            uri: TAGS_URI.into(),
            mime_type: Some("application/json".into()),
            text: tags.to_string(),
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// Serve `service` on `read` and `write` (stdin and stdout), one JSON-RPC
/// message a line, until the client goes. Every line is answered, one
/// that is not a message too ([`crate::transport`]). Call it inside a
/// tokio runtime.
pub async fn serve<E, R, W>(service: Arc<Service<E>>, read: R, write: W) -> Result<(), String>
where
    E: Executor,
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    let transport = crate::transport::LineTransport::new(read, write);
    let running = McpServer::new(service)
        .serve(transport)
        .await
        .map_err(|e| format!("the MCP session did not start: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("the MCP session ended with an error: {e}"))?;
    Ok(())
}
