//! Starting a run, answering a gate, resuming, forking: each checked here
//! against the store, then handed to the [`RunService`] as a typed request
//! (see `runner`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use wfhost_store::{RunId, Store};

use crate::AppState;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::runner::{RunService, Submitted};
use crate::store::{blocking, exact_run, with_store};
use wfhost_protocol::RunRequest;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// A workflow file on the server (absolute path), or a stage graph
    /// (`{nodes, edges}`, with `project_path` and `intent`).
    workflow: Option<Value>,
    /// Or the workflow itself.
    manifest: Option<Map<String, Value>>,
    /// The workspace on the server (absolute path); a stage graph's
    /// default is its `project_path`.
    workspace: Option<String>,
    /// The stage graph's project directory (absolute path on the server).
    project_path: Option<String>,
    /// The stage graph's intent (`{goal}`).
    intent: Option<Value>,
    inputs: Option<Map<String, Value>>,
    max_steps: Option<u64>,
    /// `local`, `container:IMAGE` or `slurm[:PARTITION]`.
    executor: Option<String>,
}

fn at(pointer: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message).with_details(json!({"pointer": pointer}))
}

fn absolute(pointer: &str, path: &str) -> Result<(), ApiError> {
    if std::path::Path::new(path).is_absolute() {
        Ok(())
    } else {
        Err(at(
            pointer,
            format!("{pointer}: `{path}` must be an absolute path on the server"),
        ))
    }
}

/// A stage graph's `project_path` as a directory on the server: an
/// absolute path as it is, a relative one under the server's projects
/// root (`wfhost serve --projects-root`, by default the directory the
/// server was started in), never above it.
fn project_dir(path: &str, root: Option<&std::path::Path>) -> Result<String, ApiError> {
    use std::path::Component;
    const POINTER: &str = "/project_path";
    let relative = std::path::Path::new(path);
    if relative.is_absolute() {
        return Ok(path.to_string());
    }
    let Some(root) = root else {
        return Err(at(
            POINTER,
            format!(
                "{POINTER}: `{path}` is relative and this server resolves no relative project paths (it was started without a projects root): give an absolute path"
            ),
        ));
    };
    if relative
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(at(
            POINTER,
            format!(
                "{POINTER}: `{path}` may not leave the server's projects root `{}` (no `..`): give an absolute path",
                root.display()
            ),
        ));
    }
    let joined: std::path::PathBuf = root
        .components()
        .chain(relative.components().filter(|c| *c != Component::CurDir))
        .collect();
    Ok(joined.display().to_string())
}

fn write_json(path: &std::path::Path, value: &Value) -> Result<(), ApiError> {
    let parent = path.parent().expect("under the home");
    std::fs::create_dir_all(parent)
        .and_then(|()| std::fs::write(path, value.to_string()))
        .map_err(|e| ApiError::internal(format!("cannot write {}: {e}", path.display())))
}

pub(crate) fn runner(state: &AppState) -> Result<std::sync::Arc<dyn RunService>, ApiError> {
    state.runner.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_available",
            "this server executes no runs (it was started without a wfhost executable)",
        )
    })
}

/// [`RunService::submit`] on the blocking pool; its refusal is the answer.
pub(crate) async fn submit(state: &AppState, request: RunRequest) -> Result<Submitted, ApiError> {
    let runner = runner(state)?;
    let home = state.stores.home().to_path_buf();
    // Under the request's span, which the blocking pool does not carry.
    let span = tracing::Span::current();
    blocking(move || span.in_scope(|| runner.submit(&home, &request).map_err(ApiError::from))).await
}

fn accepted(run_id: &str, submitted: &Submitted, extra: Value) -> (StatusCode, Json<Value>) {
    let mut body = json!({
        "run_id": run_id,
        "starting": matches!(submitted, Submitted::Starting),
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    (StatusCode::ACCEPTED, Json(body))
}

/// The manifest file to run and the workspace, from the three forms of a
/// start: a workflow file, a manifest, a stage graph (translated; its
/// stages are kept beside it for the run's stage statuses).
fn workflow_of(
    body: &StartBody,
    given: &std::path::Path,
    run_id: &RunId,
    projects_root: Option<&std::path::Path>,
) -> Result<(String, String), ApiError> {
    let workspace = |fallback: Option<&String>| -> Result<String, ApiError> {
        match (&body.workspace, fallback) {
            (Some(ws), _) => absolute("/workspace", ws).map(|()| ws.clone()),
            (None, Some(p)) => project_dir(p, projects_root),
            (None, None) => Err(at("/workspace", "`workspace` is required")),
        }
    };
    match (&body.workflow, &body.manifest) {
        (Some(Value::String(path)), None) => {
            absolute("/workflow", path)?;
            Ok((path.clone(), workspace(None)?))
        }
        (Some(Value::Object(_)), None) => {
            let graph = json!({
                "workflow": body.workflow,
                "project_path": body.project_path,
                "intent": body.intent,
            });
            let translated = wfhost_core::formats::stage_graph::translate(&graph).map_err(|e| {
                at(&e.pointer, e.to_string())
                    .with_details(json!({"pointer": e.pointer, "node": e.node}))
            })?;
            let path = given.join(format!("{run_id}.json"));
            write_json(&path, &translated.manifest)?;
            let stages = serde_json::to_value(&translated.stages)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            write_json(&given.join(format!("{run_id}.stages.json")), &stages)?;
            Ok((
                path.display().to_string(),
                workspace(body.project_path.as_ref())?,
            ))
        }
        (None, Some(manifest)) => {
            let path = given.join(format!("{run_id}.json"));
            write_json(&path, &Value::Object(manifest.clone()))?;
            Ok((path.display().to_string(), workspace(None)?))
        }
        _ => Err(at(
            "/workflow",
            "give either `workflow` (a file on the server, or a stage graph) or `manifest` (the workflow itself)",
        )),
    }
}

/// The inputs against the workflow file's schema, each problem at its
/// input's pointer (`/inputs/<name>`), so that a form can show it next to
/// its field. A file that does not load is left to the run's own checks.
pub(crate) fn check_inputs(
    file: &std::path::Path,
    inputs: &Map<String, Value>,
) -> Result<(), ApiError> {
    use wfhost_core::run::inputs::problems_of;
    let Ok(workflow) = wfhost_core::manifest::read(file)
        .and_then(|text| wfhost_core::formats::parse_any(file, &text))
    else {
        return Ok(());
    };
    let problems = problems_of(workflow.inputs.as_ref(), inputs);
    let Some(first) = problems.first() else {
        return Ok(());
    };
    let pointer = |name: &str| match name {
        "" => "/inputs".to_string(),
        name => format!("/inputs/{}", wfhost_core::json_pointer::escape(name)),
    };
    let listed: Vec<Value> = problems
        .iter()
        .map(|p| json!({"pointer": pointer(&p.name), "message": p.message}))
        .collect();
    let message = problems
        .iter()
        .map(|p| p.message.as_str())
        .collect::<Vec<_>>();
    Err(ApiError::bad_request(message.join("; "))
        .with_details(json!({"pointer": pointer(&first.name), "problems": listed})))
}

/// `POST /v1/runs`: check the request, then start the run under an id
/// chosen here; answered once the run is recorded (or refused).
pub async fn start(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    runner(&state)?;
    let run_id = wfhost_store::new_run_id(wfhost_store::time::now_ms());
    let given = state.stores.home().join("serve-manifests");
    let root = state.projects_root.as_deref().map(|p| p.as_path());
    let (manifest, workspace) = workflow_of(&body, &given, &run_id, root)?;
    if matches!(body.workflow, Some(Value::String(_))) {
        let (file, inputs) = (manifest.clone(), body.inputs.clone().unwrap_or_default());
        blocking(move || check_inputs(std::path::Path::new(&file), &inputs)).await?;
    }
    let request = RunRequest::Start {
        manifest,
        workspace,
        run_id: run_id.to_string(),
        inputs: body.inputs,
        max_steps: body.max_steps,
        executor: body.executor,
    };
    let submitted = submit(&state, request).await?;
    Ok(accepted(&run_id, &submitted, json!({})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateBody {
    /// `approved`, `changes-requested:<what>`, or at a fan-in gate
    /// `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`; at a
    /// gate that asks questions, an object of answers by question id or
    /// number (or the same object as a string).
    answer: Answer,
}

/// A gate answer: text, or a question gate's answers as an object.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Answer {
    Text(String),
    Questions(serde_json::Map<String, Value>),
}

impl Answer {
    /// The answer as `wfhost gate` takes it.
    fn text(&self) -> String {
        match self {
            Answer::Text(text) => text.clone(),
            Answer::Questions(answers) => Value::Object(answers.clone()).to_string(),
        }
    }
}

/// The id of the open gate of run `run_id` that `named` names: its gate
/// id, or — for a run started from a stage graph — the id of the gate
/// stage waiting at it. None when no open gate answers to it.
fn open_gate_id(
    store: &Store,
    home: &std::path::Path,
    run_id: &RunId,
    named: &str,
) -> Result<Option<String>, ApiError> {
    let open: Vec<_> = store
        .open_gates()?
        .into_iter()
        .filter(|g| g.run_id == run_id.as_str())
        .collect();
    if let Some(gate) = open.iter().find(|g| g.gate_id == named) {
        return Ok(Some(gate.gate_id.clone()));
    }
    let Some(stage) = wfhost_store::detail::stages(home, run_id)
        .and_then(|stages| stages.into_iter().find(|s| s.id == named))
    else {
        return Ok(None);
    };
    Ok(open
        .into_iter()
        .find(|g| g.node == stage.node && g.block == stage.block)
        .map(|g| g.gate_id))
}

/// `POST /v1/runs/{id}/gates/{gate}`: answer a waiting gate; the run goes
/// on in its own process. Answered once the answer is recorded.
pub async fn answer_gate(
    State(state): State<AppState>,
    Path((id, gate)): Path<(String, String)>,
    JsonBody(body): JsonBody<GateBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    answer(&state, id, gate, body.answer.text()).await
}

/// Answer gate `gate` (its id, or a stage's name) of run `id` with
/// `answer`: 202 once recorded, 409 `not_waiting` when the run does not
/// wait there.
pub(crate) async fn answer(
    state: &AppState,
    id: String,
    gate: String,
    answer: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    runner(state)?;
    let (run, g) = (id.clone(), gate.clone());
    let home = state.stores.home().to_path_buf();
    let (record, gate) = with_store(&state.stores, None, move |store| {
        let record = exact_run(store, &run)?;
        match open_gate_id(store, &home, &record.id, &g)? {
            Some(gate) => Ok((record, gate)),
            None => Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_waiting",
                format!(
                    "run {run} is not waiting at gate `{g}`; GET /v1/gates lists the open ones"
                ),
            )),
        }
    })
    .await?;
    let request = RunRequest::Answer {
        run_id: record.id.to_string(),
        gate: gate.clone(),
        answer: answer.clone(),
    };
    let submitted = submit(state, request).await?;
    Ok(accepted(
        &id,
        &submitted,
        json!({"gate": gate, "answer": answer}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// The branch to continue (default: the one written last).
    branch: Option<u32>,
}

/// `POST /v1/runs/{id}/resume`: continue an interrupted run in its own
/// process. Answered once that process holds the run.
pub async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ResumeBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    runner(&state)?;
    let run = id.clone();
    let run = with_store(&state.stores, None, move |store| {
        let record = exact_run(store, &run)?;
        match store.lock_holder(&record.id) {
            Some(pid) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "busy",
                format!("run {run} is executing (pid {pid}); nothing to resume"),
            )),
            None => Ok(record.id),
        }
    })
    .await?;
    let request = RunRequest::Resume {
        run_id: run.to_string(),
        branch: body.branch,
    };
    let submitted = submit(&state, request).await?;
    Ok(accepted(&id, &submitted, json!({})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// The snapshot to start the new branch from (`GET /v1/runs/{id}/events`
    /// shows each event's).
    at: String,
}

/// `POST /v1/runs/{id}/fork`: a new branch from a snapshot, run in its own
/// process. Answered once the branch exists, with its number.
pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ForkBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    runner(&state)?;
    let run = id.clone();
    let run = with_store(&state.stores, None, move |store| {
        Ok(exact_run(store, &run)?.id)
    })
    .await?;
    let request = RunRequest::Fork {
        run_id: run.to_string(),
        at: body.at,
    };
    let submitted = submit(&state, request).await?;
    let branch = match &submitted {
        Submitted::Accepted(accepted) => accepted.branch,
        Submitted::Starting => None,
    };
    Ok(accepted(&id, &submitted, json!({"branch": branch})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_answer_is_text_or_an_object_of_answers() {
        let text: GateBody = serde_json::from_value(json!({"answer": "approved"})).unwrap();
        assert_eq!(text.answer.text(), "approved");
        let object: GateBody =
            serde_json::from_value(json!({"answer": {"UD-2": "yes", "1": "defer: later"}}))
                .unwrap();
        let back: Value = serde_json::from_str(&object.answer.text()).unwrap();
        assert_eq!(back, json!({"UD-2": "yes", "1": "defer: later"}));
        for bad in [
            json!({"answer": 5}),
            json!({"answer": ["x"]}),
            json!({"answer": "x", "y": 1}),
        ] {
            assert!(
                serde_json::from_value::<GateBody>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
