//! A parallel block over a list given at run time (`parallel.over`)
//! through the binary: a thousand items as exec lanes locally, and as one
//! job array on the real one-node Slurm cluster (40 items, or
//! `WFHOST_SLURM_ITEMS`: 1,000 passed, in 524 s); a list that is not one
//! and an `over` the schema does not declare refused with the reason.

use super::slurm_arrays::{sbatch_shim, with_shim};
use super::*;

/// An exec block over `inputs.items` touching `out/<item>.txt` in each
/// lane (on Slurm when `slurm`), then an echo block after it.
fn over_manifest(dir: &Path, slurm: bool, extra: serde_json::Value) -> PathBuf {
    let mut config = serde_json::json!({
        "commands": [{"argv": ["touch", "out/{{item}}.txt"]}]
    });
    if slurm {
        config["executor"] = serde_json::json!({"slurm": {"partition": "debug"}});
    }
    let mut parallel = serde_json::json!({"over": "inputs.items", "merge_strategy": "workspace"});
    for (k, v) in extra.as_object().unwrap() {
        parallel[k] = v.clone();
    }
    let wf = serde_json::json!({
        "id": "over",
        "plugins": {"exec": {"grants": ["exec"]}},
        "inputs": {"type": "object", "properties": {"items": {"type": "array"}},
                   "required": ["items"]},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "each", "blocks": {
            "each": {
                "worker": "exec",
                "timeout": "600s",
                "config": config,
                "parallel": parallel,
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:after"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the lanes failed"}
                ]
            },
            "after": {"worker": "echo", "config": {"message": "all done"},
                      "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
        }}}
    });
    let path = dir.join("over.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// `n` items `i0000`, `i0001`, … as an inputs file.
fn items_file(dir: &Path, n: usize) -> PathBuf {
    let items: Vec<String> = (0..n).map(|i| format!("i{i:04}")).collect();
    let path = dir.join("inputs.json");
    std::fs::write(&path, serde_json::json!({"items": items}).to_string()).unwrap();
    path
}

fn run_over(cmd: &mut Command, manifest: &Path, ws: &Path, inputs: &Path) -> serde_json::Value {
    let out = cmd
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--input",
            inputs.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every one of `n` items' file is in the workspace, each lane completed
/// once, in item order at fan-in, and no lane is left.
fn check_items(scratch: &Path, ws: &Path, report: &serde_json::Value, n: usize) {
    let run = report["run_id"].as_str().unwrap();
    let made: Vec<String> = std::fs::read_dir(ws.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(made.len(), n, "{made:?}");
    assert!(made.contains(&format!("i{:04}.txt", n - 1)));
    let events = run_events(scratch, run);
    let started = events
        .iter()
        .find(|e| e["type"] == "lanes_started")
        .unwrap();
    assert_eq!(started["over"], "inputs.items");
    assert_eq!(started["lanes"].as_array().unwrap().len(), n);
    let completed = events
        .iter()
        .filter(|e| e["type"] == "lane_completed")
        .count();
    assert_eq!(completed, n);
    // The block's payload lists the lanes in item order.
    let done = events
        .iter()
        .find(|e| e["type"] == "block_completed" && e["block"] == "each")
        .unwrap();
    assert_eq!(done["signal"], "SIGNAL:SUCCESS");
    let fan_in = done["payload"]["push"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "FAN_IN")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let lanes: Vec<&str> = fan_in
        .lines()
        .filter_map(|l| l.strip_prefix("lane "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    assert_eq!(lanes, expected);
    assert!(!super::parallel::lanes_left(run));
}

#[test]
fn a_thousand_items_run_as_lanes_through_wfhost_run() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    std::fs::create_dir(ws.join("out")).unwrap();
    let manifest = over_manifest(scratch.path(), false, serde_json::json!({}));
    let inputs = items_file(scratch.path(), 1000);
    let report = run_over(&mut command(scratch.path()), &manifest, &ws, &inputs);
    assert_eq!(report["status"], "succeeded", "{report}");
    check_items(scratch.path(), &ws, &report, 1000);
}

/// How many items the Slurm test fans out over: `WFHOST_SLURM_ITEMS`,
/// else 40. The one-node test cluster runs about two trivial array tasks
/// a second (see docs/dev/benchmarks.md), so 1,000 items keep it busy for
/// eight minutes — long enough for the other Slurm tests running beside
/// this one to time out behind them. `WFHOST_SLURM_ITEMS=1000` runs the
/// full size on its own.
fn slurm_items() -> usize {
    std::env::var("WFHOST_SLURM_ITEMS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40)
}

/// The array's `%` limit: 1 at the default size, so that the array holds
/// one of the cluster's two CPUs and the other Slurm tests' jobs are not
/// queued behind it (a task held back by the array's limit does not hold
/// the queue).
fn slurm_limit(items: usize) -> usize {
    if items <= 100 { 1 } else { 200 }
}

#[test]
fn items_on_slurm_are_one_job_array() {
    if !super::exec::slurm_ready() {
        return;
    }
    let n = slurm_items();
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    std::fs::create_dir(ws.join("out")).unwrap();
    let (bin, calls) = sbatch_shim(scratch.path());
    let limit = slurm_limit(n);
    let manifest = over_manifest(
        scratch.path(),
        true,
        serde_json::json!({"max_concurrent": limit}),
    );
    let inputs = items_file(scratch.path(), n);
    let report = run_over(
        &mut with_shim(scratch.path(), &bin),
        &manifest,
        &ws,
        &inputs,
    );
    assert_eq!(report["status"], "succeeded", "{report}");
    let calls = std::fs::read_to_string(&calls).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 1, "one sbatch for the {n} lanes: {calls}");
    let array = format!("--array=0-{}%{limit}", n - 1);
    assert!(lines[0].contains(&array), "{calls}");
    check_items(scratch.path(), &ws, &report, n);
}

#[test]
fn a_list_that_is_not_one_fails_the_block_with_the_reason() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let manifest = over_manifest(scratch.path(), false, serde_json::json!({}));
    // A schema that takes any value: what is not a list reaches the block.
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace(r#""items":{"type":"array"}"#, r#""items":{}"#);
    std::fs::write(&manifest, text).unwrap();
    let inputs = scratch.path().join("inputs.json");
    std::fs::write(&inputs, r#"{"items": {"a": 1}}"#).unwrap();
    let out = command(scratch.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--input",
            inputs.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        all.contains(r#"`inputs.items` is not a list: it is an object ({"a":1})"#),
        "{all}"
    );
}

#[test]
fn validate_names_an_over_the_inputs_do_not_declare() {
    let scratch = tempfile::tempdir().unwrap();
    let manifest = over_manifest(scratch.path(), false, serde_json::json!({}));
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("inputs.items", "inputs.files");
    std::fs::write(&manifest, text).unwrap();
    let out = wfhost(&["validate", manifest.to_str().unwrap()], scratch.path());
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(
            "/nodes/main/blocks/each/parallel/over: `inputs.files`: the inputs schema declares no input `files`"
        ),
        "{}",
        stderr(&out)
    );
}
