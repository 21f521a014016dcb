//! Retrying after a fix: `wfhost rerun` makes a new run with the old
//! one's inputs and workspace under the manifest as it is now, from the
//! beginning or from one of its steps; `fork --at` takes a step or a
//! block as well as a snapshot.

use std::path::Path;

use super::{repo, stderr, stdout, wfhost, workspace_in};

/// The inputs example copied where it can be edited, run once: the
/// scratch dir, the manifest's path and the run's id.
fn a_finished_run(s: &Path) -> (std::path::PathBuf, String) {
    let dir = s.join("wf");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["workflow.json", "inputs.json"] {
        std::fs::copy(repo().join("examples/inputs").join(file), dir.join(file)).unwrap();
    }
    let manifest = dir.join("workflow.json");
    let ws = workspace_in(s);
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--input",
            dir.join("inputs.json").to_str().unwrap(),
            "--set",
            "version=1.2.0",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (manifest, newest(s))
}

fn newest(s: &Path) -> String {
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    runs[0]["id"].as_str().unwrap().to_string()
}

fn shown(id: &str, s: &Path) -> serde_json::Value {
    super::shown_with_steps(&["show", id, "--json"], s)
}

#[test]
fn a_rerun_takes_the_fixed_manifest_the_inputs_and_the_state_before_its_step() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let (manifest, old) = a_finished_run(s);
    // The fix: the writer's answer changes.
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("for {{inputs.audience}}", "FIXED for {{inputs.audience}}"),
    )
    .unwrap();
    let out = wfhost(&["rerun", &old, "--from", "write"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("rerun of {old} from its step 1 (main.write)")),
        "{}",
        stdout(&out)
    );
    let new = newest(s);
    assert_ne!(new, old);
    let run = shown(&new, s);
    // Only the block from the chosen step ran, with what the old run had
    // before it (the announcement) and the new manifest's answer.
    assert_eq!(run["steps"].as_array().unwrap().len(), 1, "{run:#}");
    assert_eq!(run["steps"][0]["block"], "main.write", "{run:#}");
    assert_eq!(
        run["payload"][0]["content"], "releasing wfhost 1.2.0",
        "{run:#}"
    );
    assert!(
        run["payload"][1]["content"]
            .as_str()
            .unwrap()
            .contains("FIXED for users"),
        "{run:#}"
    );
    assert_eq!(run["inputs"]["version"], "1.2.0", "{run:#}");
    assert_eq!(run["rerun_of"]["run_id"], old.as_str(), "{run:#}");
    assert_eq!(run["rerun_of"]["from_step"], 1, "{run:#}");
    let text = stdout(&wfhost(&["show", &new], s));
    assert!(
        text.contains(&format!("rerun of    {old} from its step 1")),
        "{text}"
    );

    // The pinned definition, from the beginning: the old answer again.
    let out = wfhost(&["rerun", &old, "--definition", "pinned"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = shown(&newest(s), s);
    assert_eq!(run["steps"].as_array().unwrap().len(), 2, "{run:#}");
    assert!(
        !run["payload"][1]["content"]
            .as_str()
            .unwrap()
            .contains("FIXED"),
        "{run:#}"
    );
}

#[test]
fn a_rerun_that_cannot_start_says_why_and_records_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let (manifest, old) = a_finished_run(s);
    let before = wfhost(&["runs", "--json"], s).stdout;
    let text = std::fs::read_to_string(&manifest).unwrap();
    let renamed = text
        .replace("\"write\"", "\"draft\"")
        .replace("JUMP:write", "JUMP:draft");
    std::fs::write(&manifest, renamed).unwrap();
    for (args, says) in [
        (
            vec!["rerun", &old, "--from", "9"],
            "--from step 9: the branch has steps 0 to 1".to_string(),
        ),
        (
            vec!["rerun", &old, "--from", "nope"],
            "--from `nope` is neither".to_string(),
        ),
        (
            vec!["rerun", &old, "--from", "main.write"],
            "ran main.write, which".to_string(),
        ),
    ] {
        let out = wfhost(&args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&says), "{args:?}: {}", stderr(&out));
    }
    std::fs::remove_file(&manifest).unwrap();
    let out = wfhost(&["rerun", &old], s);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`--definition pinned` reruns"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        wfhost(&["runs", "--json"], s).stdout,
        before,
        "nothing recorded"
    );
}

#[test]
fn fork_at_takes_a_step_number_or_a_block() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let (_, id) = a_finished_run(s);
    // Step 1 runs again: the branch has step 0's history and step 1 anew.
    let out = wfhost(&["fork", &id, "--at", "1"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = shown(&id, s);
    assert_eq!(run["branch"], 2, "{run:#}");
    let steps: Vec<&str> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["block"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["main.announce", "main.write"], "{run:#}");
    // A block: before its last execution (step 0: the run's start).
    let out = wfhost(&["fork", &id, "--at", "announce"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(shown(&id, s)["branch"], 3);
    for (at, says) in [
        ("7", "step 7: the branch has steps 0 to 1"),
        ("main.nope", "is neither a snapshot"),
    ] {
        let out = wfhost(&["fork", &id, "--at", at], s);
        assert_eq!(out.status.code(), Some(2), "{at}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{at}: {}", stderr(&out));
    }
    let text = stdout(&wfhost(&["show", &id], s));
    assert!(
        text.contains("the snapshot on a step's line is the state after it"),
        "{text}"
    );
}
