//! `wfhost plugin new|build|call`: the author loop, as a plugin author runs
//! it, outside this repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{command, stderr, stdout, tree, wfhost, workspace_in};

/// Cargo's target directory shared by every crate these tests create, so a
/// rerun builds warm.
fn shared_target() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-crates")
}

/// `wfhost` run in `dir`, with cargo pointed at the shared target dir and
/// none of the outer build's flags.
fn wfhost_in(dir: &Path, scratch: &Path, args: &[&str]) -> Output {
    let mut cmd = command(scratch);
    cargo_env(&mut cmd);
    cmd.current_dir(dir)
        .args(args)
        .output()
        .expect("wfhost runs")
}

fn cargo_env(cmd: &mut Command) {
    cmd.env("CARGO_TARGET_DIR", shared_target());
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
}

fn ok(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}\nstdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

/// `plugin new NAME --world WORLD` in `parent`, then the crate's own tests
/// natively and `plugin build`; returns the crate and its component.
fn scaffold_and_build(
    parent: &Path,
    scratch: &Path,
    name: &str,
    world: &str,
) -> (PathBuf, PathBuf) {
    // The crates share one target dir, and their vendored SDKs build to
    // the same artifact (cargo names a path dependency by its path in the
    // workspace): two builds at once replace each other's files. One at a
    // time, across threads and processes.
    std::fs::create_dir_all(shared_target()).unwrap();
    let lock = std::fs::File::create(shared_target().join(".e2e-build.lock")).unwrap();
    lock.lock().unwrap();
    let out = wfhost_in(parent, scratch, &["plugin", "new", name, "--world", world]);
    ok(&out, "plugin new");
    let krate = parent.join(name);
    for file in [
        "Cargo.toml",
        ".gitignore",
        "README.md",
        "wfhost-plugin.toml",
        "workflow.json",
        "src/lib.rs",
        "vendor/wfhost-sdk/wit/plugin.wit",
    ] {
        assert!(
            krate.join(file).is_file(),
            "{file} missing: {:?}",
            tree(&krate)
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut test = Command::new(cargo);
    cargo_env(&mut test);
    let out = test
        .current_dir(&krate)
        .args(["test", "--quiet"])
        .output()
        .unwrap();
    ok(&out, "cargo test in the new crate");
    assert!(stdout(&out).contains("test result: ok"), "{}", stdout(&out));
    // What the tests built for this machine, cargo's own account of it.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut listed = Command::new(&cargo);
    cargo_env(&mut listed);
    let out = listed
        .current_dir(&krate)
        .args(["test", "--no-run", "--message-format=json"])
        .output()
        .unwrap();
    ok(&out, "cargo test --no-run");
    let tested = host_tools(&stdout(&out));
    assert!(
        tested.iter().any(|f| f.contains("wit_bindgen_rust_macro")),
        "{tested:?}"
    );
    // `plugin build` through a cargo that keeps its messages.
    let log = scratch.join(format!("{name}-build.jsonl"));
    let wrapper = scratch.join("cargo-keeping-messages");
    std::fs::write(
        &wrapper,
        "#!/bin/bash\nset -o pipefail\n\"$REAL_CARGO\" \"$@\" | tee -a \"$CARGO_MESSAGES\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let mut build = command(scratch);
    cargo_env(&mut build);
    let out = build
        .current_dir(&krate)
        .args(["plugin", "build"])
        .env("CARGO", &wrapper)
        .env("REAL_CARGO", &cargo)
        .env("CARGO_MESSAGES", &log)
        .output()
        .unwrap();
    ok(&out, "plugin build");
    // The component is built with the macros the tests built: one compile
    // of the tools both need.
    let built = host_tools(&std::fs::read_to_string(&log).unwrap());
    assert!(!built.is_empty(), "no macro in plugin build's messages");
    let again: Vec<&String> = built.iter().filter(|f| !tested.contains(*f)).collect();
    assert!(
        again.is_empty(),
        "plugin build compiled these again: {again:?}\n(the tests built {tested:?})"
    );
    let component = krate.join(stdout(&out).trim());
    assert!(component.is_file(), "{}", stdout(&out));
    // Its wfhost-plugin.toml tells the truth: the crate packs as it is.
    let out = wfhost_in(&krate, scratch, &["plugin", "pack"]);
    ok(&out, "plugin pack of the new crate");
    let package = krate.join(format!("target/wfhost-package/{name}-0.1.0/index.json"));
    assert!(package.is_file(), "{}", stdout(&out));
    // A dev build is packed with a word on the release build.
    assert!(
        stderr(&out).contains("carries debug information")
            && stderr(&out).contains("wfhost plugin build --release"),
        "{}",
        stderr(&out)
    );
    if world == "worker" {
        let out = wfhost_in(&krate, scratch, &["plugin", "build", "--release"]);
        ok(&out, "plugin build --release");
        let out = wfhost_in(&krate, scratch, &["plugin", "pack"]);
        ok(&out, "plugin pack of the release build");
        assert!(
            !stderr(&out).contains("debug information"),
            "{}",
            stderr(&out)
        );
    }
    (krate, component)
}

/// The procedural macros cargo's JSON messages say it built (their files,
/// whose names carry the build's hash of their settings).
fn host_tools(messages: &str) -> Vec<String> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "proc-macro"))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(str::to_string))
        })
        .collect()
}

#[test]
fn a_new_worker_tests_builds_calls_and_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path().join("src");
    std::fs::create_dir(&parent).unwrap();
    let (krate, component) = scaffold_and_build(&parent, scratch.path(), "greeter", "worker");
    assert_eq!(component, krate.join("target/wfhost/greeter.wasm"));
    let manifest = std::fs::read_to_string(krate.join("wfhost-plugin.toml")).unwrap();
    for line in [
        "name = \"greeter\"",
        "world = \"worker\"",
        "capabilities = []",
        "signals = [\"SIGNAL:SUCCESS\", \"SIGNAL:EMPTY\"]",
        "component = \"target/wfhost/greeter.wasm\"",
    ] {
        assert!(manifest.contains(line), "{line} missing from {manifest}");
    }

    let wasm = component.to_str().unwrap();
    let out = wfhost(
        &[
            "plugin",
            "call",
            wasm,
            "--block-config",
            r#"{"greeting": "hi"}"#,
        ],
        scratch.path(),
    );
    ok(&out, "plugin call");
    let shown = stdout(&out);
    assert!(shown.contains("signal: SIGNAL:SUCCESS"), "{shown}");
    // In the crate (or below it), the component is the one its
    // wfhost-plugin.toml names.
    let inside = wfhost_in(
        &krate.join("src"),
        scratch.path(),
        &["plugin", "call", "--block-config", r#"{"greeting": "hi"}"#],
    );
    ok(&inside, "plugin call without a path, in the crate");
    assert_eq!(stdout(&inside), shown, "the same component answers");
    assert!(
        stderr(&inside).contains("plugin: ")
            && stderr(&inside).contains("target/wfhost/greeter.wasm"),
        "{}",
        stderr(&inside)
    );
    // Outside any plugin crate: what to pass.
    let outside = wfhost_in(scratch.path(), scratch.path(), &["plugin", "call"]);
    assert_eq!(outside.status.code(), Some(2));
    assert!(
        stderr(&outside).contains("no plugin given, and no wfhost-plugin.toml here or above"),
        "{}",
        stderr(&outside)
    );
    assert!(
        shown.contains("[GREETING] greeting-0: hi from main.call"),
        "{shown}"
    );
    assert!(
        stderr(&out).contains("a fresh temporary directory"),
        "{}",
        stderr(&out)
    );

    let out = wfhost(&["plugin", "call", wasm, "--json"], scratch.path());
    ok(&out, "plugin call --json");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["output"]["signal"], "SIGNAL:EMPTY", "{report}");
    assert!(
        report["log"][0].as_str().unwrap().contains("no `greeting`"),
        "{report}"
    );

    let workflow = krate.join("workflow.json");
    ok(
        &wfhost(&["validate", workflow.to_str().unwrap()], scratch.path()),
        "validate",
    );
    let ws = workspace_in(scratch.path());
    let out = wfhost(
        &[
            "run",
            workflow.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ],
        scratch.path(),
    );
    ok(&out, "run of the sample workflow");
    assert!(
        stdout(&out).contains("main.greet -> SIGNAL:SUCCESS"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_new_action_handler_tests_builds_calls_and_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path().join("src");
    std::fs::create_dir(&parent).unwrap();
    let (krate, component) =
        scaffold_and_build(&parent, scratch.path(), "router", "action-handler");
    let wasm = component.to_str().unwrap();
    let out = wfhost(
        &["plugin", "call", wasm, "--action", "SKIP_TO:finish"],
        scratch.path(),
    );
    ok(&out, "plugin call --action");
    assert_eq!(stdout(&out).trim(), "SKIP_TO:finish: jump to finish");
    let out = wfhost(
        &["plugin", "call", wasm, "--action", "NOPE", "--json"],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("expected SKIP_TO:<block>"),
        "{report}"
    );
    let out = wfhost(&["plugin", "call", wasm], scratch.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is an action-handler component, but it is used as a worker; call an action handler with --action"), "{}", stderr(&out));

    let workflow = krate.join("workflow.json");
    let ws = workspace_in(scratch.path());
    let out = wfhost(
        &[
            "run",
            workflow.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ],
        scratch.path(),
    );
    ok(&out, "run of the sample workflow");
    assert!(
        stdout(&out).contains("jump to main.finish"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn plugin_new_refuses_bad_names_and_used_dirs_leaving_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let out = wfhost_in(dir, dir, &["plugin", "new", "Bad Name"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a valid plugin name"),
        "{}",
        stderr(&out)
    );
    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken/keep.txt"), "mine").unwrap();
    let out = wfhost_in(dir, dir, &["plugin", "new", "taken"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("already exists and is not empty"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tree(dir), ["taken", "taken/keep.txt"]);
    // An empty directory is filled.
    std::fs::create_dir(dir.join("empty")).unwrap();
    let out = wfhost_in(dir, dir, &["plugin", "new", "fresh", "--dir", "empty"]);
    ok(&out, "plugin new into an empty dir");
    assert!(dir.join("empty/src/lib.rs").is_file());
    let leftovers: Vec<String> = tree(dir)
        .into_iter()
        .filter(|p| p.contains(".wfhost-plugin-new"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn plugin_build_and_call_refuse_bad_input_clearly() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let out = wfhost_in(dir, dir, &["plugin", "build"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no Cargo.toml"), "{}", stderr(&out));

    std::fs::write(dir.join("notes.wasm"), "not wasm").unwrap();
    let out = wfhost(
        &["plugin", "call", dir.join("notes.wasm").to_str().unwrap()],
        dir,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("notes.wasm: is not a WebAssembly file"),
        "{}",
        stderr(&out)
    );

    let echo = wfhost_guest_artifacts::ECHO_PATH;
    let out = wfhost(
        &["plugin", "call", echo, "--block-config", "{\"message\": }"],
        dir,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("--block-config is not valid JSON: expected value at line 1 column 13"),
        "{}",
        stderr(&out)
    );
    let out = wfhost(&["plugin", "call", echo, "--payload", "{}"], dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--payload is not a JSON array of segments"),
        "{}",
        stderr(&out)
    );
    let out = wfhost(&["plugin", "call", echo, "--action", "JUMP:x"], dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is a worker component, but it is used as an action-handler; call a worker without --action"), "{}", stderr(&out));

    // A built-in worker with a payload and a real workspace it writes to.
    let ws = workspace_in(dir);
    let config = r#"{"message": "hi", "write": {"path": "out.txt", "content": "x"}}"#;
    let payload = r#"[{"id": "q-1", "type": "QUESTION", "content": "why?"}]"#;
    let out = wfhost(
        &[
            "plugin",
            "call",
            echo,
            "--block-config",
            config,
            "--payload",
            payload,
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ],
        dir,
    );
    ok(&out, "plugin call of echo");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["output"]["payload"][0]["content"], "why?",
        "{report}"
    );
    assert_eq!(report["output"]["payload"][1]["content"], "hi", "{report}");
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "x");
}
