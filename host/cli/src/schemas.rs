//! The JSON every `--json` command prints, one documented shape per
//! object: the API's objects (the OpenAPI document's components, whose
//! store objects are generated from their types), and the reports only
//! the CLI prints (below). `wfhost schema NAME` prints any of them as a
//! standalone JSON Schema; `docs/guide/json-output.md` says which command
//! prints which, and tests check every command's JSON against its schema.

use serde_json::{Map, Value, json};

/// Which schema each `--json` command's output has, and how it is laid
/// out: one object, an array of them, or one object a line.
pub const OUTPUTS: &[(&str, &str, Layout)] = &[
    (
        "run, resume, fork, rerun, gate --json",
        "RunReport",
        Layout::Object,
    ),
    ("show RUN --json", "Run", Layout::Object),
    ("show RUN --json --steps", "Steps", Layout::Object),
    ("runs --json", "RunSummary", Layout::Array),
    ("gates --json", "OpenGate", Layout::Array),
    ("events RUN --json", "StoredEvent", Layout::Lines),
    ("list --json", "Workflows", Layout::Object),
    ("validate --json", "ValidateReport", Layout::Object),
    ("config --json", "ConfigSetting", Layout::Array),
    ("gc --json", "GcReport", Layout::Object),
    ("session list --json", "SessionSummary", Layout::Array),
    ("schedule ls --json", "Schedules", Layout::Object),
    ("schedule show NAME --json", "ScheduleView", Layout::Object),
    ("hook ls --json", "Hooks", Layout::Object),
    ("hook show NAME --json", "HookView", Layout::Object),
    ("notify ls --json", "NotifyTargets", Layout::Object),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Object,
    Array,
    Lines,
}

impl Layout {
    pub fn words(self) -> &'static str {
        match self {
            Layout::Object => "one object",
            Layout::Array => "an array of",
            Layout::Lines => "one object a line",
        }
    }
}

const REF: &str = "#/components/schemas/";

fn closed(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "unevaluatedProperties": false, "properties": properties})
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("{REF}{name}")})
}

/// The reports only the CLI prints.
fn cli_only() -> Map<String, Value> {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let problem = closed(
        &["file", "location", "message"],
        json!({
            "file": {"type": "string"},
            "location": {"type": ["string", "null"], "description": "line:column, or the JSON pointer of the value."},
            "message": {"type": "string"}
        }),
    );
    let gate = closed(
        &["id", "node", "block", "prompt"],
        json!({"id": {"type": "string"}, "node": {"type": "string"}, "block": {"type": "string"}, "prompt": {"type": "string"}}),
    );
    let external = closed(
        &["step", "node", "block", "prompt"],
        json!({"step": {"type": "integer"}, "node": {"type": "string"}, "block": {"type": "string"}, "prompt": {"type": "string"}}),
    );
    let schemas = json!({
        "RunReport": {
            "description": "What `wfhost run`, `resume`, `fork`, `rerun` and `gate` print with --json once the run rests: its status (with the gate it waits at, the failure's reason or who cancelled it), its result and the files its blocks wrote, its statistics per block and the host's costs.",
            "type": "object",
            "required": ["run_id", "branch", "workflow_id", "workflow", "workflow_hash", "manifest", "execution_id", "status", "steps", "duration_ms", "statistics", "blocks", "payload", "host_costs", "result", "written"],
            "unevaluatedProperties": false,
            "properties": {
                "run_id": {"type": "string"}, "branch": {"type": "integer"},
                "workflow_id": {"type": "string"},
                "workflow": {"type": "string", "description": "The same as workflow_id (the name this report had first)."},
                "workflow_hash": {"type": "string"}, "manifest": {"type": "string"},
                "execution_id": {"type": "string", "description": "The same as run_id: what the run's blocks see as their execution id."},
                "status": {"enum": ["succeeded", "failed", "cancelled", "waiting", "sleeping"]},
                "steps": {"type": "integer"},
                "duration_ms": {"type": "number", "description": "This command's part of the run."},
                "statistics": reference("Statistics"),
                "blocks": {"type": "object", "additionalProperties": reference("BlockStatistics"), "description": "By `node.block`."},
                "payload": {"type": "array", "items": reference("ContextSegment")},
                "result": {"anyOf": [reference("ContextSegment"), {"type": "null"}], "description": "The last payload segment: what the run produced."},
                "written": strings.clone(),
                "host_costs": closed(&["store_commits", "store_statements", "processes_started", "proc_reads"], json!({
                    "store_commits": {"type": "integer"}, "store_statements": {"type": "integer"},
                    "processes_started": {"type": "integer"}, "proc_reads": {"type": "integer"}
                })),
                "reason": {"type": "string", "description": "failed or cancelled: why."},
                "cancelled_by": {"type": "string", "description": "cancelled: who."},
                "gate": gate,
                "external": external,
                "timer": closed(&["step", "node", "block", "due_at_ms", "retry"], json!({
                    "step": {"type": "integer"}, "node": {"type": "string"}, "block": {"type": "string"},
                    "due_at_ms": {"type": "integer", "description": "When the `sleep` block the run rests at, or the failed block's next attempt, is due, unix ms."},
                    "retry": {"type": ["integer", "null"], "description": "Which retry of the failed block is due (1 for the first); null for a `sleep` block."}
                }))
            }
        },
        "ValidateReport": closed(&["file", "ok", "workflow", "errors", "warnings"], json!({
            "file": {"type": "string"},
            "ok": {"type": "boolean"},
            "workflow": {"oneOf": [{"type": "null"}, closed(&["id", "version", "nodes", "blocks", "plugins"], json!({
                "id": {"type": "string"}, "version": {"type": ["string", "null"]},
                "nodes": {"type": "integer"}, "blocks": {"type": "integer"}, "plugins": {"type": "integer"}
            }))], "description": "Null when the workflow could not be read."},
            "errors": {"type": "array", "items": problem.clone()},
            "warnings": {"type": "array", "items": problem}
        })),
        "ConfigSetting": closed(&["key", "env", "value", "source", "file", "meaning", "default"], json!({
            "key": {"type": "string"}, "env": {"type": "string", "description": "The environment variable that sets it."},
            "value": {"type": ["string", "null"], "description": "Null: the built-in default."},
            "source": {"enum": ["environment", "project", "user", "built-in"]},
            "file": {"type": ["string", "null"], "description": "The file, for `project` and `user`."},
            "meaning": {"type": "string"}, "default": {"type": "string"}
        })),
        "GcReport": closed(&["dry_run", "older_than", "candidates", "removed", "orphan_containers_removed", "orphan_slurm_jobs_cancelled", "lane_workspaces_removed", "scratch_removed"], json!({
            "dry_run": {"type": "boolean"}, "older_than": {"type": "string"},
            "candidates": {"type": "array", "items": closed(&["run_id", "workflow_id", "last_at", "status", "session"], json!({
                "run_id": {"type": "string"}, "workflow_id": {"type": "string"},
                "last_at": {"type": "integer"}, "status": {"type": "string"}, "session": {"type": ["string", "null"]}
            }))},
            "removed": {"type": "integer"},
            "orphan_containers_removed": strings.clone(),
            "orphan_slurm_jobs_cancelled": strings.clone(),
            "lane_workspaces_removed": strings.clone(),
            "scratch_removed": strings
        }))
    });
    match schemas {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

/// Every schema by name: the API's components and the CLI's reports.
pub fn all() -> Map<String, Value> {
    let spec = wfhost_server::openapi_spec();
    let mut all = spec["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    all.extend(cli_only());
    all
}

/// The schema `name` as a standalone JSON Schema (2020-12): it, and each
/// schema it refers to under `$defs`. None when there is no such schema.
pub fn standalone(name: &str) -> Option<Value> {
    let all = all();
    all.get(name)?;
    let mut wanted = vec![name.to_string()];
    let mut defs = Map::new();
    while let Some(next) = wanted.pop() {
        if defs.contains_key(&next) {
            continue;
        }
        let Some(schema) = all.get(&next) else {
            continue;
        };
        let text = schema.to_string();
        for part in text.split(&format!("\"$ref\":\"{REF}")).skip(1) {
            if let Some(referred) = part.split('"').next() {
                wanted.push(referred.to_string());
            }
        }
        defs.insert(next, schema.clone());
    }
    let text = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": name,
        "$ref": format!("{REF}{name}"),
        "$defs": defs,
    })
    .to_string()
    .replace(REF, "#/$defs/");
    serde_json::from_str(&text).ok()
}

/// The names `wfhost schema` knows, sorted.
pub fn names() -> Vec<String> {
    all().keys().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_names_a_schema_and_every_schema_stands_alone() {
        for (command, name, _) in OUTPUTS {
            assert!(all().contains_key(*name), "{command}: no schema {name}");
        }
        for name in names() {
            let schema = standalone(&name).unwrap();
            jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
            assert!(!schema.to_string().contains("#/components/"), "{name}");
        }
        assert_eq!(standalone("NoSuchThing"), None);
    }

    #[test]
    fn the_guide_lists_every_output_and_its_schema() {
        let guide = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/guide/json-output.md"),
        )
        .unwrap();
        for (command, name, layout) in OUTPUTS {
            let row = format!("| `wfhost {command}` | {} `{name}` |", layout.words());
            assert!(guide.contains(&row), "the guide lacks the row {row}");
        }
    }
}
