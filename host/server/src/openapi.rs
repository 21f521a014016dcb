//! `GET /v1/openapi.json`: the API's contract, versioned with it. A change
//! to an endpoint changes this document in the same commit, and
//! `docs/api/CHANGELOG.md` says what changed.

use axum::Json;
use serde_json::{Value, json};

/// The API's version (the OpenAPI document's `info.version`).
pub const API_VERSION: &str = "0.14.0";

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn ok(description: &str, schema: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn run_id() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The run's full id."})
}

fn job_id() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}, "description": "The job id."})
}

fn param(name: &str, kind: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": {"type": kind}, "description": description})
}

fn get(summary: &str, params: Vec<Value>, response: Value) -> Value {
    json!({"get": {
        "summary": summary,
        "parameters": params,
        "responses": {
            "200": response,
            "400": error_response("A bad query string or parameter."),
            "401": error_response("A bearer token is required and was missing or wrong; the connection is closed."),
            "404": error_response("No such run."),
        }
    }})
}

fn post(
    summary: &str,
    params: Vec<Value>,
    body: Value,
    ok_status: &str,
    response: Value,
    conflict: &str,
) -> Value {
    json!({"post": {
        "summary": summary,
        "parameters": params,
        "requestBody": {"required": false, "content": {"application/json": {"schema": body}}},
        "responses": {
            ok_status: response,
            "400": error_response("A body that is not JSON or does not fit: details.pointer is the JSON pointer of the offending value."),
            "401": error_response("A bearer token is required and was missing or wrong; the connection is closed."),
            "404": error_response("No such run."),
            "409": error_response(conflict),
            "413": error_response("A body over 1 MiB (details.limit_bytes)."),
        }
    }})
}

/// One path's operations from several `get`/`post` objects.
fn both(a: Value, b: Value) -> Value {
    let (Value::Object(mut a), Value::Object(b)) = (a, b) else {
        unreachable!("operations are objects")
    };
    a.extend(b);
    Value::Object(a)
}

pub fn spec() -> Value {
    let mut spec = paths_and_components();
    with_store_errors(&mut spec);
    spec
}

/// Every operation that authenticates (all but this document's) reads or
/// writes the store, so each may answer 503.
fn with_store_errors(spec: &mut Value) {
    let Some(paths) = spec["paths"].as_object_mut() else {
        return;
    };
    for operation in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in operation.values_mut() {
            let responses = &mut op["responses"];
            if responses.get("401").is_some() {
                responses["503"] = error_response(
                    "The store cannot be used now: `store_unavailable` (its database cannot be reached, by the server or by the process starting or continuing a run) or `store_locked` (another process held its write lock for over 10 s). Nothing was recorded; try again.",
                );
            }
        }
    }
}

fn paths_and_components() -> Value {
    let branch = || {
        param(
            "branch",
            "integer",
            "The branch (default: the one written most recently).",
        )
    };
    let limit = |max: &str| param("limit", "integer", &format!("Page size, 1 to {max}."));
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "wfhost API",
            "version": API_VERSION,
            "description": "Runs, their branches, steps and events, over the wfhost run store. Errors are {code, message, details} with the matching status. On a non-loopback address every request needs `Authorization: Bearer <token>`; one without a valid token is answered 401 before its body is read, and its connection is closed. Connections are capped in total and per client address (one over a cap is closed at once), must send a request's headers within the header timeout (default 10 s), and are closed after the idle timeout (default 60 s) with no request under way; a request under way, such as the event stream, is never cut."
        },
        "servers": [{"url": "/v1"}],
        "paths": both(json!({
            "/health": get("Liveness and the server clock.", vec![], ok("Up.", "Health")),
            "/runs": both(get("Runs, newest first.", vec![
                param("status", "string", "running, waiting, sleeping, succeeded, failed, cancelled or interrupted."),
                param("workflow", "string", "Only runs of this workflow id."),
                param("session", "string", "Only runs of this session."),
                param("q", "string", "Only runs whose id, workflow id, workspace or session id contains this text (case-insensitive)."),
                param("since", "string", "Only runs started since: an age (`30m`, `12h`, `7d`, `2w`) or a UTC date or time (`2026-11-20`, `2026-11-20T08:30:00Z`)."),
                limit("1000 (default 50)"),
                param("after", "string", "The last run id of the previous page (its next_after)."),
            ], ok("A page of runs.", "RunPage")), post(
                "Start a run of a workflow file on the server, or of a workflow given in the body. It executes in its own wfhost process, as `wfhost run` would; the answer comes once the run is recorded. A workflow the CLI would refuse is a 400 with its message, and nothing is recorded.",
                vec![],
                json!({"$ref": "#/components/schemas/StartRequest"}),
                "202",
                ok("Started.", "Launched"),
                "`busy`: the workspace is in use by another run.",
            )),
            "/runs/{id}": get("One run: its branch's state and its branches.", vec![run_id(), branch()], ok("The run.", "Run")),
            "/runs/{id}/summary": get("The run as the runs listing shows it (record, status, branch count, last event, session), without reading its log.", vec![run_id()], ok("The run's summary.", "RunSummary")),
            "/runs/{id}/branches": get("The run's branches.", vec![run_id()], ok("Branches.", "Branches")),
            "/runs/{id}/steps": get("The executed steps of a branch.", vec![run_id(), branch()], ok("Steps.", "Steps")),
            "/runs/{id}/events": get("One page of the run's event log, all branches, in write order; with `branch`, of that branch's chain (its events and those of the branches it was forked from, up to each fork), from either end.", vec![
                run_id(),
                param("after", "integer", "The last sequence number already seen (default 0)."),
                param("branch", "integer", "Only the chain of this branch."),
                param("before", "integer", "With `branch`, instead of `after`: the last events before this sequence number, in write order (18446744073709551615: the newest); the page's `next_before` continues backwards."),
                limit("1000 (default 100)"),
            ], ok("A page of events.", "EventPage")),
            "/runs/{id}/events/stream": {"get": {
                "summary": "The run's events as Server-Sent Events: each SSE id is the event's sequence number and its type the event kind; reconnect with Last-Event-ID (or ?after=) to get exactly what was missed.",
                "parameters": [run_id(), param("after", "integer", "Start after this sequence number (Last-Event-ID wins)."), param("output", "boolean", "Also send the running block's command output, once caught up, as `output` events without an id: `{step, block, stream, command, text, progress}` a line, or `{step, block, skipped}` (at most 20 lines a quarter second; a client starting mid-block gets the last 20 lines). Never recorded.")],
                "responses": {
                    "200": {"description": "An endless event stream.", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    "400": error_response("A bad Last-Event-ID or query string."),
                    "401": error_response("A bearer token is required and was missing or wrong; the connection is closed."),
                    "404": error_response("No such run."),
                }
            }},
            "/runs/{id}/cancel": post(
                "Cancel the run for good: a live run's process is asked to stop (it stops its block's processes, containers and jobs), then the run is recorded as `cancelled`, by `<by> through the HTTP API` (or `the HTTP API`) with the reason given. Its own process says who cancelled it and why, and exits with 5.",
                vec![run_id()],
                json!({"$ref": "#/components/schemas/CancelRequest"}),
                "200",
                ok("Cancelled.", "Cancelled"),
                "`finished`: the run had ended already; `busy`: its process did not stop within wait_s.",
            ),
            "/runs/{id}/gates/{gate}": post(
                "Answer a gate the run waits at (`approved`, `changes-requested:<text>`; at a fan-in gate `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`; at a gate that asks questions, an object of answers); the run goes on in its own process. Answered once the answer is recorded.",
                vec![run_id(), json!({"name": "gate", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The gate id (UD-1, …)."})],
                json!({"type": "object", "required": ["answer"], "additionalProperties": false, "properties": {"answer": {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": {"type": "string"}, "description": "At a gate that asks questions: answers by question id (UD-<N>) or number; `defer: <reason>` defers one. Questions left out are cancelled, security questions asked again."}]}}}),
                "202",
                ok("Answered.", "Launched"),
                "`not_waiting`: the run does not wait at that gate; `busy`: it is executing.",
            ),
            "/runs/{id}/resume": post(
                "Continue an interrupted run in its own process (`wfhost resume`). Answered once that process holds the run.",
                vec![run_id()],
                json!({"type": "object", "additionalProperties": false, "properties": {"branch": {"type": "integer", "description": "Default: the branch written last."}}}),
                "202",
                ok("Resumed.", "Launched"),
                "`busy`: the run is executing.",
            ),
            "/runs/{id}/fork": post(
                "Start a new branch of the run at a snapshot (each event's `snapshot` in the event log) and run it in its own process (`wfhost fork`).",
                vec![run_id()],
                json!({"type": "object", "required": ["at"], "additionalProperties": false, "properties": {"at": {"type": "string"}}}),
                "202",
                ok("Forked: `branch` is the new branch.", "Launched"),
                "`busy`: the run is executing.",
            ),
            "/runs/{id}/export": get("The run as a bundle (`wfhost export`'s format): its record, pinned definition and every event, with a checksum.", vec![run_id()], ok("The bundle.", "Bundle")),
            "/runs/import": post(
                "Add a bundle's run to this store, all or nothing. Refused (400) if its format or version is unknown, its checksum does not match, or its log does not fold.",
                vec![],
                json!({"$ref": "#/components/schemas/Bundle"}),
                "201",
                ok("Imported.", "Imported"),
                "`exists`: a run with the bundle's id is in this store already.",
            ),
            "/runs/{id}/report": {"get": {
                "summary": "The branch as a Markdown report for people: its steps, the decisions at its gates, its blocks' structured outputs and checkpoint notes, its lanes' conflicts and its outcome.",
                "parameters": [run_id(), branch()],
                "responses": {
                    "200": {"description": "The report (served as an attachment named `<run>-branch-<n>.md`).", "content": {"text/markdown": {"schema": {"type": "string"}}}},
                    "400": error_response("A bad query string or an unknown branch."),
                    "401": error_response("A bearer token is required and was missing or wrong; the connection is closed."),
                    "404": error_response("No such run."),
                }
            }},
            "/runs/{id}/bundles": get("The result bundles one block execution left in the run's workspace (`.output/exec/RUN/step-STEP-NODE.BLOCK`, `.output/agent/…`; `-2`, `-3`, … for executions run again): each command as its bundle's manifest records it, and its stdout and stderr (up to 1 MiB each; `truncated` beyond; a file that cannot be read, e.g. a symbolic link, has `error`). Bundles that cannot be read at all are in `unreadable`.", vec![
                run_id(),
                json!({"name": "step", "in": "query", "required": true, "schema": {"type": "integer"}, "description": "The step."}),
                json!({"name": "block", "in": "query", "required": true, "schema": {"type": "string"}, "description": "The block, `node.block`."}),
            ], ok("The bundles.", "Bundles")),
            "/sessions": get("Sessions (the runs of one workstream: an MCP client's session id or a workspace's git branch), the most recently active first.", vec![], ok("Sessions.", "Sessions")),
            "/sessions/{id}": get("One session's runs, oldest first, as the runs listing shows them.", vec![json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The session id."})], ok("The session.", "Session")),
            "/sessions/{id}/export": get("The session as a bundle (`wfhost session import` takes it): one run bundle per run and a checksum over the whole.", vec![json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The session id."})], ok("The bundle.", "SessionBundle")),
            "/gates": get("Gates waiting for an answer, in every run.", vec![], ok("Open gates.", "Gates")),
            "/workflows": get("The workflow files under the server's projects root (`wfhost serve --projects-root`), as `wfhost list` finds them: searched without following symbolic links, 8 directories deep and over at most 2,000 JSON files (`truncated` when more were left). Each has its path relative to `root`, its id, description and `inputs` (the JSON Schema of its inputs), or the `error` that keeps it from loading (too large, not a valid workflow, an inputs schema over 64 KiB). 501 when the server has no projects root.", vec![], ok("The workflows.", "Workflows")),
            "/runs/{id}/definition": get("The workflow definition the run pinned when it started (its nodes, blocks and transitions), whatever became of the file since.", vec![run_id()], ok("The pinned definition.", "PinnedDefinition")),
            "/openapi.json": {"get": {"summary": "This document.", "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}}}},
        }), both(job_paths(), both(schedule_paths(), hook_paths()))),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": both(both(run_schemas(), workflow_schemas()), both(job_schemas(), schedule_schemas()))
        },
        "security": [{"bearer": []}, {}]
    })
}

/// The schemas of the workflows' endpoints.
fn workflow_schemas() -> Value {
    json!({
        "Workflows": {"type": "object", "required": ["root", "workflows", "truncated"], "unevaluatedProperties": false, "properties": {
            "root": {"type": "string", "description": "The projects root (absolute); a workflow's absolute path is `root/path`."},
            "truncated": {"type": "boolean"},
            "workflows": {"type": "array", "items": {"$ref": "#/components/schemas/WorkflowFile"}}
        }},
        "WorkflowFile": {"type": "object", "description": "A workflow file found under a directory, as `GET /v1/workflows` and `wfhost list --json` list it: what it is, or why it does not load.", "required": ["path"], "unevaluatedProperties": false, "properties": {
            "path": {"type": "string", "description": "Relative to the directory searched."},
            "id": {"type": "string"}, "version": {"type": "string"},
            "description": {"type": "string", "description": "The first line of the workflow's description."},
            "inputs": {"description": "The JSON Schema of the workflow's inputs, when it declares them."},
            "error": {"type": "string", "description": "Why the file does not load (too large, not a valid workflow)."}
        }},
        "PinnedDefinition": {"type": "object", "required": ["hash", "definition"], "unevaluatedProperties": false, "properties": {
            "hash": {"type": "string", "description": "`sha256:<hex>` of the definition's canonical JSON."},
            "definition": {"type": "object", "description": "The workflow as pinned: `start_node`, `nodes` (each with `entry_block` and `blocks`, each with `transitions`)."}
        }}
    })
}

/// The schemas of the runs' endpoints (the jobs' are [`job_schemas`]);
/// the objects the store prints (`Run`, `RunSummary`, `OpenGate`, …) are
/// generated from their types ([`wfhost_store::shapes`]).
fn run_schemas() -> Value {
    let closed = |required: &[&str], properties: Value| -> Value {
        json!({"type": "object", "required": required, "unevaluatedProperties": false, "properties": properties})
    };
    let array_of = |name: &str| json!({"type": "array", "items": {"$ref": format!("#/components/schemas/{name}")}});
    let now = json!({"type": "integer", "description": "The server's clock, unix ms."});
    let mut schemas = json!({
        "Error": closed(&["code", "message", "details"], json!({
            "code": {"type": "string", "description": "not_found, bad_request, unauthorized, payload_too_large, busy, waiting, finished, exists, not_waiting, not_available, store_locked, store_unavailable, internal"},
            "message": {"type": "string"},
            "details": {"description": "Structured extras, or null."}
        })),
        "Health": closed(&["status", "version", "server_now_ms"], json!({"status": {"const": "ok"}, "version": {"type": "string"}, "server_now_ms": now})),
        "Bundles": closed(&["bundles", "unreadable"], json!({
            "bundles": {"type": "array", "items": closed(&["dir", "commands"], json!({
                "dir": {"type": "string"},
                "commands": {"type": "array", "items": closed(&["command", "stdout", "stderr"], json!({
                    "command": {"type": "object", "description": "The command as its bundle's manifest records it."},
                    "stdout": {"type": "object", "description": "{text, truncated} or {error}"},
                    "stderr": {"type": "object", "description": "{text, truncated} or {error}"}
                }))}
            }))},
            "unreadable": {"type": "array", "items": {"type": "string"}}
        })),
        "Sessions": closed(&["sessions"], json!({"sessions": array_of("SessionSummary")})),
        "Session": closed(&["session", "runs"], json!({"session": {"type": "string"}, "runs": array_of("RunSummary")})),
        "SessionBundle": {"type": "object", "description": "format `wfhost-session-bundle`, version, session, runs (run bundles), checksum."},
        "RunPage": closed(&["runs", "next_after"], json!({"runs": array_of("RunSummary"), "next_after": {"type": ["string", "null"], "description": "The `after` of the next page; null on the last."}})),
        "Branches": closed(&["branches"], json!({"branches": array_of("BranchInfo")})),
        "Steps": closed(&["branch", "steps"], json!({"branch": {"type": "integer"}, "steps": array_of("StepLine")})),
        "StoredEvent": closed(&["seq", "branch", "parent", "at", "event"], json!({
            "seq": {"type": "integer"}, "branch": {"type": "integer"}, "parent": {"type": ["integer", "null"]},
            "at": {"type": "integer", "description": "Unix ms."},
            "snapshot": {"type": "string", "description": "The state after this event, to fork from (events that leave a state to fork from)."},
            "event": {"type": "object", "required": ["type"], "description": "A run event, as documented in docs/guide/durable-runs.md: `type` and its fields."}
        })),
        "EventPage": closed(&["events", "next_after"], json!({
            "events": array_of("StoredEvent"),
            "branch": {"type": "integer", "description": "With `branch`: the branch paged."},
            "next_after": {"type": ["integer", "null"]},
            "next_before": {"type": ["integer", "null"], "description": "With `before`: where the previous page ends, null at the start."}
        })),
        "StartRequest": {"type": "object", "additionalProperties": false, "properties": {
            "workflow": {"description": "An absolute path on the server (or give manifest), or a stage graph: {name?, description?, intent?: {goal}, nodes: [{id, type: exec_block|gate, exec: {executor, workdir, env, max_attempts, allow_shell, commands: [{name, argv, timeout_sec, allow_failure}]} | config: {requires_approval, message}}], edges: [{from, to}]}, translated to a workflow (a graph that does not translate is a 400 naming the stage in details.node).", "oneOf": [{"type": "string"}, {"type": "object"}]},
            "project_path": {"type": "string", "description": "A stage graph's project directory (its default workspace): absolute, or relative to the server's projects root (`wfhost serve --projects-root`, by default its working directory), never above it."},
            "intent": {"type": "object", "description": "A stage graph's intent: {goal}."},
            "manifest": {"type": "object", "description": "The workflow itself, as in a workflow file; plugin paths must be absolute."},
            "workspace": {"type": "string", "description": "An absolute path on the server (required but for a stage graph with project_path)."},
            "inputs": {"type": "object", "description": "The run's inputs, as `wfhost run --input`."},
            "max_steps": {"type": "integer", "minimum": 0},
            "executor": {"type": "string", "description": "local, container:IMAGE or slurm[:PARTITION]."}
        }},
        "Launched": closed(&["run_id", "starting"], json!({
            "run_id": {"type": "string"},
            "starting": {"type": "boolean", "description": "True when the process had not done what was asked within 30 s (it goes on); watch the run."},
            "gate": {"type": "string"}, "answer": {"description": "The answer given (text, or a question gate's answers)."},
            "branch": {"type": ["integer", "null"]}
        })),
        "CancelRequest": {"type": "object", "additionalProperties": false, "properties": {
            "reason": {"type": "string", "description": "Recorded with the cancellation."},
            "by": {"type": "string", "maxLength": 100, "description": "Who asks, as the client names itself (one line): recorded as `<by> through the HTTP API`."},
            "wait_s": {"type": "integer", "minimum": 0, "maximum": 600, "description": "How long to wait for a live run's process to stop (default 60)."}
        }},
        "Cancelled": closed(&["run_id", "status", "reason"], json!({"run_id": {"type": "string"}, "status": {"const": "cancelled"}, "reason": {"type": "string", "description": "What was recorded: `cancelled by <who>: <reason>`."}})),
        "Bundle": {"type": "object", "required": ["format", "version", "event_format", "run", "definition", "events", "checksum"], "properties": {
            "format": {"const": "wfhost-run-bundle"}, "version": {"type": "integer"}, "event_format": {"type": "integer"},
            "run": {"type": "object"}, "definition": {"type": "string", "description": "The pinned definition, canonical JSON."},
            "events": {"type": "array", "items": {"type": "object"}}, "checksum": {"type": "string"}
        }},
        "Imported": closed(&["run_id", "events"], json!({"run_id": {"type": "string"}, "events": {"type": "integer"}})),
        "Gates": closed(&["gates"], json!({"gates": array_of("OpenGate")}))
    });
    if let Value::Object(map) = &mut schemas {
        map.extend(wfhost_store::shapes::schemas());
    }
    schemas
}

/// The endpoints of jobs and agents.
/// The webhook triggers' endpoints.
fn hook_paths() -> Value {
    json!({
        "/runs/{id}/notifications": get("The run's notifications (outgoing webhooks to the targets of `wfhost notify add`), oldest first: each with its delivery id, its state (`pending`, `delivered`, or `failed` once given up), its attempts and last error.", vec![run_id()], ok("The notifications.", "Notifications")),
        "/hooks": get("The webhook triggers (`wfhost hook add`), by name.", vec![], ok("The hooks.", "Hooks")),
        "/hooks/{name}": {"post": {
            "summary": "A delivery to the hook: starts a run of its workflow. Authenticated by its signature, never by a bearer token: `github` hooks take GitHub's `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>` and `X-GitHub-Delivery`; `sha256` hooks `X-Wfhost-Signature: sha256=<HMAC-SHA256 of \"<X-Wfhost-Timestamp>.<body>\">`, `X-Wfhost-Timestamp` (unix seconds, within the hook's window) and `X-Wfhost-Delivery`; `unsigned` hooks check nothing. The JSON body is mapped to the run's inputs (the hook's `mapping`: input → JSON pointer) over its fixed `inputs`, and checked against the workflow's `inputs` schema; a hook added with `--answers-gates` instead answers the gate the body names (`run_id`, `gate`, `answer`, at those pointers or its mapping's). A delivery id is taken once: a replay starts nothing.",
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The hook's name."}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {}}}},
            "security": [{}],
            "responses": {
                "202": {"description": "The run is starting; for a hook that answers gates, the answer is recorded (`gate`, `answer`, `starting` as `POST /v1/runs/{id}/gates/{gate}` answers).", "content": {"application/json": {"schema": {"type": "object", "required": ["hook", "run_id", "delivery"], "unevaluatedProperties": false, "properties": {
                    "hook": {"type": "string"}, "run_id": {"type": "string"}, "delivery": {"type": ["string", "null"]},
                    "starting": {"type": "boolean"}, "gate": {"type": "string"}, "answer": {"type": "string"}
                }}}}},
                "400": error_response("A body that is not JSON, or no or a bad delivery id (`no_delivery`, `bad_delivery`)."),
                "401": error_response("No signature, or one that does not match the body and the hook's secret (`bad_signature`), or a timestamp outside the hook's window (`stale`). Nothing started."),
                "404": error_response("No such hook."),
                "409": error_response("The delivery id was taken already (`duplicate_delivery`; details.run_id is the run it started), or — a hook that answers gates — the run does not wait at that gate (`not_waiting`). Nothing started."),
                "413": error_response("A body over 1 MiB (details.limit_bytes)."),
                "422": error_response("The inputs mapped from the body do not fit the workflow's `inputs` schema (`invalid_inputs`): details.pointer names the first (`/inputs/<name>`), details.problems each. Nothing started."),
                "500": error_response("The hook's secret is not set on the server (`no_secret`)."),
            }
        }},
    })
}

/// The schedules' endpoints.
fn schedule_paths() -> Value {
    let name = || json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The schedule's name."});
    let view = || ok("The schedule.", "ScheduleView");
    json!({
        "/schedules": both(
            get("The schedules, by name.", vec![], ok("The schedules.", "Schedules")),
            post(
                "Add a schedule: the workflow file started on the ticks of a cron expression (five fields, or six with seconds first; `@hourly` …) in a time zone (`tz`, IANA, default UTC), by this server (and any serving the same store). Checked like `wfhost schedule add`: a bad name, expression, zone or catch-up, a workflow that does not read, or inputs the workflow's `inputs` schema refuses (a required one missing) is a 400 whose details name the `field` and the `pointer` (`/inputs/<name>` for an input).",
                vec![],
                json!({"$ref": "#/components/schemas/ScheduleRequest"}),
                "201",
                ok("The schedule added, its next tick the first after now.", "ScheduleCreated"),
                "A schedule of that name exists (code `exists`).",
            ),
        ),
        "/schedules/{name}": both(
            get("The schedule and its last 20 ticks, newest first: each started a run (`started`, its `run_id`), waits for the schedule's run going (`queued`), started nothing (`skipped`, `reason`), or could not start its run (`failed`, `reason`).", vec![name()], json!({"description": "The schedule and its ticks.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScheduleView"}}}})),
            json!({"delete": {
                "summary": "Remove the schedule and its ticks; its runs stay.",
                "parameters": [name()],
                "responses": {
                    "200": {"description": "Removed.", "content": {"application/json": {"schema": {"type": "object", "required": ["removed"], "unevaluatedProperties": false, "properties": {"removed": {"type": "string"}}}}}},
                    "401": error_response("A bearer token is required and was missing or wrong; the connection is closed."),
                    "404": error_response("No such schedule."),
                }
            }}),
        ),
        "/schedules/{name}/pause": post("Pause the schedule: its ticks start nothing until it is resumed (and are not caught up then).", vec![name()], json!({"type": "object"}), "200", view(), "Never."),
        "/schedules/{name}/resume": post("Resume the schedule from its first tick after now.", vec![name()], json!({"type": "object"}), "200", view(), "Never."),
        "/schedules/{name}/trigger": post("Start a run of the schedule now, recorded as a manual tick with the run's id before the run exists; the server starts it at its next look (a quarter second).", vec![name()], json!({"type": "object"}), "202", ok("The run to start.", "ScheduleTriggered"), "Never."),
    })
}

/// The schemas of the schedules' endpoints (`Schedule` and `Tick` are
/// generated from their types).
fn schedule_schemas() -> Value {
    let sched = json!({"$ref": "#/components/schemas/Schedule"});
    json!({
        "Schedules": {"type": "object", "required": ["schedules", "server_now_ms"], "unevaluatedProperties": false, "properties": {
            "schedules": {"type": "array", "items": sched}, "server_now_ms": {"type": "integer"}
        }},
        "Notifications": {"type": "object", "required": ["notifications"], "unevaluatedProperties": false, "properties": {
            "notifications": {"type": "array", "items": {"$ref": "#/components/schemas/Notification"}}
        }},
        "NotifyTargets": {"type": "object", "description": "The notification targets (`wfhost notify ls --json`).", "required": ["targets"], "unevaluatedProperties": false, "properties": {
            "targets": {"type": "array", "items": {"$ref": "#/components/schemas/Target"}}
        }},
        "Hooks": {"type": "object", "required": ["hooks"], "unevaluatedProperties": false, "properties": {
            "hooks": {"type": "array", "items": {"$ref": "#/components/schemas/Hook"}}
        }},
        "HookView": {"type": "object", "description": "A hook and its last 20 deliveries, newest first (`wfhost hook show --json`).", "required": ["hook", "deliveries"], "unevaluatedProperties": false, "properties": {
            "hook": {"$ref": "#/components/schemas/Hook"},
            "deliveries": {"type": "array", "items": {"$ref": "#/components/schemas/Delivery"}}
        }},
        "ScheduleCreated": {"type": "object", "required": ["schedule"], "unevaluatedProperties": false, "properties": {"schedule": sched}},
        "ScheduleView": {"type": "object", "required": ["schedule"], "unevaluatedProperties": false, "properties": {
            "schedule": sched,
            "ticks": {"type": "array", "items": {"$ref": "#/components/schemas/Tick"}}
        }},
        "ScheduleTriggered": {"type": "object", "required": ["schedule", "run_id", "tick_ms"], "unevaluatedProperties": false, "properties": {
            "schedule": {"type": "string"}, "run_id": {"type": "string"}, "tick_ms": {"type": "integer"}
        }},
        "ScheduleRequest": {"type": "object", "required": ["name", "cron", "workflow", "workspace"], "additionalProperties": false, "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
            "cron": {"type": "string", "description": "Five fields (minute hour day month weekday), or six with seconds first; `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`."},
            "tz": {"type": "string", "description": "An IANA time zone (default UTC)."},
            "workflow": {"type": "string", "description": "The workflow file on the server (absolute)."},
            "workspace": {"type": "string", "description": "The runs' workspace (absolute); `{run}` in it stands for each run's id."},
            "inputs": {"type": "object", "description": "The runs' inputs, checked against the workflow's `inputs` schema."},
            "overlap": {"enum": ["skip", "queue", "allow"], "description": "What a tick does while the schedule's run still goes (default skip)."},
            "catch_up": {"type": "integer", "minimum": 0, "maximum": 100, "description": "Runs started for ticks missed while no server looked (default 1)."}
        }},
    })
}

fn job_paths() -> Value {
    json!({
            "/runs/{id}/jobs": get("The run's jobs (its block executions handed to agents), oldest first.", vec![
                run_id(),
                param("after", "integer", "The last job id of the previous page (its next_after)."),
                param("limit", "integer", "Page size, 1 to 1000 (default 100)."),
            ], ok("A page of jobs.", "JobPage")),
            "/jobs/{id}": get("A job and its history (queued, leased, requeued, succeeded, failed, refused, cancelled).", vec![job_id()], ok("The job.", "JobShown")),
            "/agent/lease": post(
                "Agents: lease the oldest queued job whose needs are among `capabilities`, waiting up to wait_ms for one. Needs an agent token when tokens are configured. The lease lasts the server's lease time; send a heartbeat every heartbeat_ms.",
                vec![],
                json!({"$ref": "#/components/schemas/LeaseRequest"}),
                "200",
                ok("A lease (`job`), or `job: null` when none came.", "Leased"),
                "Not used.",
            ),
            "/jobs/{id}/heartbeat": post(
                "Agents: extend the lease (attempt, token) of the job.",
                vec![job_id()],
                json!({"type": "object", "required": ["attempt", "token"], "additionalProperties": false, "properties": {"attempt": {"type": "integer"}, "token": {"type": "string"}}}),
                "200",
                ok("Extended: expires_at_ms, server_now_ms.", "Heartbeat"),
                "`lease_lost`: the lease is not the job's current one (it expired and the job was queued again, the job was completed or cancelled, or the token is wrong); details: job, state, attempt. Stop the job.",
            ),
            "/definitions/{hash}": get("Agents: a run's pinned definition (the workflow as JSON), byte for byte as its hash `sha256:<hex>` was taken; a job names its run's definition by `request.workflow_hash`. Needs an agent token when tokens are configured.", vec![json!({"name": "hash", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}})], ok("The definition.", "Definition")),
            "/jobs/{id}/telemetry": post(
                "Agents: what the job's agent blocks sent their TELEMETRY_URL while it runs (JSON objects, oldest first). Fenced like a heartbeat. The run records each as a telemetry event of the job's block while the block runs; telemetry sent while the run's own process is down is not recorded. A job holds at most 1,000 events and 256 KiB this way: the rest is dropped and counted. Whatever is not sent before the job ends goes with its completion's result.",
                vec![job_id()],
                json!({"type": "object", "required": ["attempt", "token", "events"], "additionalProperties": false, "properties": {"attempt": {"type": "integer"}, "token": {"type": "string"}, "events": {"type": "array", "items": {"type": "object"}}}}),
                "200",
                ok("Taken: accepted, dropped, server_now_ms.", "TelemetryTaken"),
                "`lease_lost`: as for a heartbeat. Stop the job.",
            ),
            "/jobs/{id}/complete": post(
                "Agents: record the result of the lease (attempt, token). Fenced: only the job's current lease completes it, once; the same completion sent again gets the first answer, byte for byte.",
                vec![job_id()],
                json!({"$ref": "#/components/schemas/CompleteRequest"}),
                "200",
                ok("Recorded (or the replayed answer).", "Completed"),
                "`lease_lost`: the lease is not the job's current one; the result is not recorded (the refusal is, in the job's history).",
            ),
            "/jobs/{id}/release": post(
                "Agents: give the job of the lease (attempt, token) up without a result, e.g. because the agent is stopping: the job is queued again at once with its attempt raised (recorded as `requeued`, with the reason), instead of when the lease runs out. Fenced like a heartbeat.",
                vec![job_id()],
                json!({"type": "object", "required": ["attempt", "token"], "additionalProperties": false, "properties": {"attempt": {"type": "integer"}, "token": {"type": "string"}, "reason": {"type": "string", "maxLength": 500, "description": "Why (recorded in the job's history)."}}}),
                "200",
                ok("Queued again: job, state `queued`, the new attempt, server_now_ms.", "Released"),
                "`lease_lost`: as for a heartbeat; nothing changes.",
            )
    })
}

fn job_schemas() -> Value {
    let closed = |required: &[&str], properties: Value| -> Value {
        json!({"type": "object", "required": required, "unevaluatedProperties": false, "properties": properties})
    };
    let int = || json!({"type": "integer"});
    json!({
        "Job": closed(
            &["id", "run_id", "branch", "step", "lane", "node", "block", "requires", "state", "outcome", "attempt", "agent", "expires_at_ms", "created_at_ms"],
            json!({
                "id": int(), "run_id": {"type": "string"}, "branch": int(), "step": int(),
                "lane": {"type": "string", "description": "The lane's key; empty outside a parallel block."},
                "node": {"type": "string"}, "block": {"type": "string"},
                "requires": {"type": "array", "items": {"type": "string"}},
                "state": {"enum": ["queued", "leased", "succeeded", "failed", "cancelled"], "description": "The lease's: `succeeded` once a job runner ran it and reported back, whatever the block came to."},
                "outcome": {"enum": ["succeeded", "failed", null], "description": "What the block came to: `succeeded` when it signalled SIGNAL:SUCCESS, `failed` otherwise; null while the job is not final or was cancelled."},
                "attempt": int(), "agent": {"type": ["string", "null"]},
                "expires_at_ms": {"type": ["integer", "null"]}, "created_at_ms": int()
            }),
        ),
        "JobPage": closed(&["jobs", "next_after", "server_now_ms"], json!({"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}}, "next_after": {"type": ["integer", "null"]}, "server_now_ms": int()})),
        "JobShown": closed(&["job", "history", "server_now_ms"], json!({"job": {"$ref": "#/components/schemas/Job"}, "history": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}}, "server_now_ms": int()})),
        "LeaseRequest": {"type": "object", "required": ["agent", "capabilities"], "additionalProperties": false, "properties": {
            "agent": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
            "capabilities": {"type": "array", "items": {"enum": ["wasm", "exec", "container", "slurm"]}},
            "wait_ms": {"type": "integer", "minimum": 0, "maximum": 30000}
        }},
        "Leased": closed(&["job", "server_now_ms"], json!({
            "job": {"oneOf": [{"type": "null"}, closed(
                &["id", "attempt", "token", "run_id", "node", "block", "requires", "expires_at_ms", "lease_ms", "heartbeat_ms", "request"],
                json!({
                    "id": int(), "attempt": int(), "token": {"type": "string"},
                    "run_id": {"type": "string"}, "node": {"type": "string"}, "block": {"type": "string"},
                    "requires": {"type": "array", "items": {"type": "string"}},
                    "expires_at_ms": {"type": ["integer", "null"]}, "lease_ms": int(), "heartbeat_ms": int(),
                    "request": {"type": "object", "description": "The block execution (format 2): the run's pinned definition by hash (workflow_hash: fetch it from /definitions/{hash}), workspace and its identity, executor, plugin digests, worker, block context, payload, timeout, lane, the run's session folder (session_folder, `.agents-work/<session>`, when the run keeps one), and the W3C trace context of the block's span (traceparent, when the run exports traces: the agent's job span goes under it)."}
                }),
            )]},
            "server_now_ms": int()
        })),
        "Heartbeat": closed(&["job", "attempt", "expires_at_ms", "server_now_ms"], json!({"job": int(), "attempt": int(), "expires_at_ms": int(), "server_now_ms": int()})),
        "Definition": {"type": "object", "description": "The workflow as pinned when its run started."},
        "TelemetryTaken": closed(&["job", "accepted", "dropped", "server_now_ms"], json!({"job": int(), "accepted": int(), "dropped": int(), "server_now_ms": int()})),
        "CompleteRequest": {"type": "object", "required": ["attempt", "token", "succeeded", "result"], "additionalProperties": false, "properties": {
            "attempt": int(), "token": {"type": "string"},
            "succeeded": {"type": "boolean", "description": "Whether the block produced an output."},
            "result": {"type": "object", "description": "{output: {payload, signal, structured_output, statistics}} or {failure: <message>, failure_permanent?: true when no retry mends it (the worker's bad-config)}, and log: [lines]; telemetry: [objects the block's agents sent its TELEMETRY_URL, at most 256 KiB] and telemetry_dropped: <count>, both optional."}
        }},
        "Released": closed(&["job", "state", "attempt", "server_now_ms"], json!({"job": int(), "state": {"const": "queued"}, "attempt": int(), "server_now_ms": int()})),
        "Completed": closed(&["job", "attempt", "state", "server_now_ms"], json!({"job": int(), "attempt": int(), "state": {"enum": ["succeeded", "failed"]}, "server_now_ms": int()}))
    })
}

pub async fn document() -> Json<Value> {
    Json(spec())
}
