use super::*;

#[test]
fn the_examples_validate_cleanly() {
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let out = wfhost(
        &["validate", manifest.to_str().unwrap(), "--strict"],
        cache.path(),
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("ok: workflow `hello` 1.0.0: 1 node, 4 blocks, 2 plugins"),
        "{text}"
    );
}

#[test]
fn warnings_are_printed_and_strict_makes_them_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wf.json");
    std::fs::write(
        &path,
        serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]},
            "lost": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]}
        }}}})
        .to_string(),
    )
    .unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("warning: ")
            && err.contains("/nodes/main/blocks/lost: block `main.lost` is unreachable"),
        "{err}"
    );
    assert!(
        err.contains("/nodes/main/blocks/a/transitions: no `SIGNAL:FAIL_DEFAULT` fallback"),
        "{err}"
    );
    assert!(stdout(&out).contains("2 warnings"));
    let strict = wfhost(
        &["validate", path.to_str().unwrap(), "--strict"],
        dir.path(),
    );
    assert_eq!(strict.status.code(), Some(1));
    assert!(
        stdout(&strict).contains(": failed (--strict): workflow"),
        "{}",
        stdout(&strict)
    );
    assert!(!stdout(&strict).contains(": ok:"));
}

#[test]
fn invalid_manifests_and_plugins_fail_validation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wf.json");
    std::fs::write(&path, "{\"id\": \"w\"").unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("wf.json: 1:10"), "{}", stderr(&out));

    std::fs::write(dir.path().join("p.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(
        &path,
        serde_json::json!({"id": "w", "start_node": "main", "plugins": {"p": {"path": "p.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {"worker": "p"}}}}})
        .to_string(),
    )
    .unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("core WebAssembly module"),
        "{}",
        stderr(&out)
    );
}

/// A manifest named by its bare file name, from its own directory: the
/// plugins next to it are found, and the pinned definition is the one a
/// later `show` computes from the same file (no false "changed" warning).
#[test]
fn a_bare_manifest_file_name_works_from_its_directory() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("wc.wasm");
    std::fs::write(&plugin, wfhost_guest_artifacts::EXAMPLE_WORD_COUNT).unwrap();
    std::fs::write(
        dir.path().join("workflow.json"),
        serde_json::json!({
            "id": "bare", "start_node": "main",
            "plugins": {"wc": {"path": "wc.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "wc", "file_restrictions": [],
                "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
            }}}}
        })
        .to_string(),
    )
    .unwrap();
    let validate = command(scratch.path())
        .current_dir(dir.path())
        .args(["validate", "workflow.json"])
        .output()
        .unwrap();
    assert_eq!(validate.status.code(), Some(0), "{}", stderr(&validate));

    let ws = tempfile::tempdir().unwrap();
    let run = command(scratch.path())
        .current_dir(dir.path())
        .args([
            "run",
            "workflow.json",
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = report["run_id"].as_str().unwrap();
    let show = wfhost(&["show", id], scratch.path());
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert!(
        !stderr(&show).contains("has changed"),
        "false warning: {}",
        stderr(&show)
    );
}

#[test]
fn strict_validation_fails_on_a_signal_no_worker_emits() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wc.wasm"),
        wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
    )
    .unwrap();
    let manifest = dir.path().join("typo.json");
    std::fs::write(
        &manifest,
        serde_json::json!({
            "id": "typo", "start_node": "main",
            "plugins": {"wc": {"path": "wc.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "echo", "config": {"message": "hi"}, "transitions": [
                    {"on_signal": "SIGNAL:SUCESS", "action": "JUMP:b"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL"}
                ]},
                // A user plugin built with the SDK declares its signals too.
                "b": {"worker": "wc", "file_restrictions": [], "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:DONE", "action": "END"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL"}
                ]}
            }}}
        })
        .to_string(),
    )
    .unwrap();
    let lenient = wfhost(&["validate", manifest.to_str().unwrap()], scratch.path());
    assert_eq!(lenient.status.code(), Some(0), "{}", stderr(&lenient));
    let strict = wfhost(
        &["validate", "--strict", manifest.to_str().unwrap()],
        scratch.path(),
    );
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    let err = stderr(&strict);
    assert!(
        err.contains("/nodes/main/blocks/a/transitions/0/on_signal: worker `echo` never emits `SIGNAL:SUCESS`; did you mean `SIGNAL:SUCCESS`?"),
        "{err}"
    );
    assert!(
        err.contains(
            "/nodes/main/blocks/b/transitions/1/on_signal: worker `wc` never emits `SIGNAL:DONE`"
        ),
        "{err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.contains("never emits")).count(),
        2,
        "{err}"
    );
}

/// sbatch options wfhost sets itself are refused in a Slurm executor's
/// `extra_args` however sbatch would read them (a prefix, the short form,
/// a bundle), by `validate` and by `run` before the run starts, each with
/// the word's JSON pointer; ordinary options pass.
#[test]
fn reserved_sbatch_options_are_refused_in_every_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wf.json");
    let manifest = |extra_args: &[&str]| {
        serde_json::json!({"id": "w", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
            "worker": "exec",
            "config": {"commands": [{"argv": ["true"]}],
                "executor": {"slurm": {"partition": "debug", "extra_args": extra_args}}},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                            {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
        }}}}})
        .to_string()
    };
    let at = "/nodes/main/blocks/build/config/executor/slurm/extra_args";
    for (args, says) in [
        (
            &["--arr=0-2"][..],
            format!("{at}/0: `--arr=0-2` is sbatch's --array, which wfhost sets itself"),
        ),
        (
            &["--mem=1G", "-a", "0-2"],
            format!("{at}/1: `-a 0-2` is sbatch's --array"),
        ),
        (&["-a0-2"], format!("{at}/0: `-a0-2` is sbatch's --array")),
        (
            &["--out=x"],
            format!("{at}/0: `--out=x` is sbatch's --output"),
        ),
        (
            &["--comm=x"],
            format!("{at}/0: `--comm=x` is sbatch's --comment"),
        ),
        (
            &["--chd=/"],
            format!("{at}/0: `--chd=/` is sbatch's --chdir"),
        ),
        (
            &["--job-n=x"],
            format!("{at}/0: `--job-n=x` is sbatch's --job-name"),
        ),
        (
            &["-Ha", "0-2"],
            format!("{at}/0: `-Ha 0-2` holds -a, sbatch's --array"),
        ),
        (&["--co=x"], format!("{at}/0: `--co=x` is ambiguous")),
        (
            &["--time", "5", "job.sh"],
            format!("{at}/2: `job.sh` is not an option"),
        ),
    ] {
        std::fs::write(&path, manifest(args)).unwrap();
        let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains(&says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // `run` refuses it before the run starts: no run is recorded.
    std::fs::write(&path, manifest(&["--arr=0-2"])).unwrap();
    let ws = super::workspace_in(dir.path());
    let out = run_workflow(&path, &ws, dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("{at}/0: `--arr=0-2` is sbatch's --array")),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).trim().is_empty(), "{}", stdout(&out));
    // Ordinary options pass.
    std::fs::write(
        &path,
        manifest(&["--mem=1G", "--time", "5", "-c", "2", "--partition", "debug"]),
    )
    .unwrap();
    let out = wfhost(&["validate", path.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn validate_json_reports_counts_errors_and_warnings_with_their_places() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path();
    let json_of = |args: &[&str]| {
        let out = wfhost(args, s);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}{}", stdout(&out), stderr(&out)));
        (out.status.code(), report)
    };
    let hello = repo().join("examples/hello/workflow.json");
    let (code, report) = json_of(&["validate", hello.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["workflow"]["id"], "hello", "{report:#}");
    assert_eq!(report["workflow"]["blocks"], 4, "{report:#}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report:#}");

    // A warning, and --strict makes it fail (exit 1, ok false).
    let lost = s.join("lost.json");
    std::fs::write(
        &lost,
        serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]},
            "lost": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]}
        }}}})
        .to_string(),
    )
    .unwrap();
    let (code, report) = json_of(&["validate", lost.to_str().unwrap(), "--json", "--strict"]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["ok"], false, "{report:#}");
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["location"] == "/nodes/main/blocks/lost"
                && w["message"].as_str().unwrap().contains("unreachable")),
        "{report:#}"
    );

    // Errors: each with its place; no summary; exit 2.
    let bad = s.join("bad.json");
    std::fs::write(&bad, "{\"id\": \"w\",\n  \"start_node\": }").unwrap();
    let (code, report) = json_of(&["validate", bad.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(2), "{report:#}");
    assert_eq!(report["ok"], false);
    assert_eq!(report["workflow"], serde_json::Value::Null);
    assert_eq!(report["errors"][0]["location"], "2:17", "{report:#}");
}
