//! Python plugins, as an author writes and ships them: `plugin new --lang
//! python`, the project's own tests (`python3 -m unittest`), `plugin
//! build` (componentize-py installed on first use), `plugin call`, a run,
//! and pack, sign, push, install and a run from a registry.
//!
//! The componentize-py toolchain is cached in one fixed directory under
//! Cargo's test scratch dir (`XDG_CACHE_HOME` below), shared by these tests
//! and kept between runs: the first build installs it (seconds, from PyPI:
//! a failure there fails the test), the others reuse it, and the tests'
//! parallel builds exercise the concurrent install. Not the user's
//! `~/.cache`: a test does not write into its runner's home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{command, stderr, stdout, tree, workspace_in};

/// The componentize-py cache every test here shares.
fn toolchain_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-toolchains")
}

/// `wfhost ARGS` in `dir` with the shared toolchain cache.
fn wfhost_in(dir: &Path, scratch: &Path, args: &[&str]) -> Output {
    wfhost_with(dir, scratch, &scratch.join("cache"), args)
}

/// The same with the compiled-component cache `cache`.
fn wfhost_with(dir: &Path, scratch: &Path, cache: &Path, args: &[&str]) -> Output {
    command(scratch)
        .current_dir(dir)
        .env("WFHOST_CACHE_DIR", cache)
        .env("XDG_CACHE_HOME", toolchain_cache())
        .env_remove("VIRTUAL_ENV")
        .args(args)
        .output()
        .expect("wfhost runs")
}

fn ok(out: &Output, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}\nstdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// `plugin new NAME --lang python --world WORLD` in `parent`, the
/// project's tests, `plugin build`; returns the project and component.
fn scaffold_and_build(
    parent: &Path,
    scratch: &Path,
    name: &str,
    world: &str,
) -> (PathBuf, PathBuf) {
    let out = wfhost_in(
        parent,
        scratch,
        &["plugin", "new", name, "--lang", "python", "--world", world],
    );
    assert!(ok(&out, "plugin new").contains("python3 -m unittest"));
    let project = parent.join(name);
    for file in [
        ".gitignore",
        "README.md",
        "wfhost-plugin.toml",
        "workflow.json",
        "app.py",
        "test_app.py",
        "wit/plugin.wit",
        "wfhost_sdk/__init__.py",
        "tests/test_wfhost_sdk.py",
    ] {
        assert!(
            project.join(file).is_file(),
            "{file} missing: {:?}",
            tree(&project)
        );
    }
    let tests = Command::new("python3")
        .current_dir(&project)
        .args(["-m", "unittest", "-v"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    ok(&tests, "python3 -m unittest in the new project");
    assert!(stderr(&tests).contains("test_app."), "{}", stderr(&tests));
    assert!(stderr(&tests).ends_with("OK\n"), "{}", stderr(&tests));

    let out = wfhost_in(&project, scratch, &["plugin", "build"]);
    let built = ok(&out, "plugin build");
    assert!(
        stderr(&out).contains("note: componentize-py 0.25.1 -d "),
        "the command is shown: {}",
        stderr(&out)
    );
    let component = project.join(built.trim());
    assert_eq!(
        component,
        project.join(format!("target/wfhost/{name}.wasm")),
        "{built}"
    );
    (project, component)
}

/// What admission checks: the base WASI interfaces and the world's.
fn assert_admissible(component: &Path, world: &str) -> Vec<String> {
    let bytes = std::fs::read(component).unwrap();
    let info = wfhost_distribution::component::inspect(&bytes).unwrap();
    assert_eq!(info.world, world);
    assert!(info.capabilities.is_empty(), "{:?}", info.capabilities);
    let refused: Vec<&String> = info
        .imports
        .iter()
        .filter(|i| i.starts_with("wasi:sockets/") || i.starts_with("wasi:http/"))
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert!(
        info.imports
            .iter()
            .any(|i| i.starts_with("wfhost:plugin/log@")),
        "{:?}",
        info.imports
    );
    info.signals
}

#[test]
fn a_python_worker_tests_builds_calls_runs_and_installs_from_a_registry() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let parent = s.join("src");
    std::fs::create_dir(&parent).unwrap();
    let (project, component) = scaffold_and_build(&parent, s, "greeter", "worker");
    let toml = std::fs::read_to_string(project.join("wfhost-plugin.toml")).unwrap();
    assert!(toml.contains("language = \"python\""), "{toml}");
    // The manifest's signals are recorded in the component.
    assert_eq!(
        assert_admissible(&component, "worker"),
        ["SIGNAL:EMPTY", "SIGNAL:SUCCESS"]
    );

    let out = wfhost_in(
        &project,
        s,
        &["plugin", "call", "--block-config", r#"{"greeting": "hi"}"#],
    );
    let shown = ok(&out, "plugin call");
    for line in [
        "[info] greeting with: hi from main.call",
        "signal: SIGNAL:SUCCESS",
        "[GREETING] greeting-0: hi from main.call",
    ] {
        assert!(shown.contains(line), "{line} missing from:\n{shown}");
    }
    assert_compiled_once_by_digest(&s.join("cache"), &component);
    let out = wfhost_in(&project, s, &["plugin", "call", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&ok(&out, "call --json")).unwrap();
    assert_eq!(report["output"]["signal"], "SIGNAL:EMPTY", "{report}");
    assert_eq!(
        report["log"][0],
        "[warn] no `greeting` in the block's config"
    );
    // A PluginError raised in Python fails the block with its code.
    let out = wfhost_in(
        &project,
        s,
        &[
            "plugin",
            "call",
            "--block-config",
            r#"{"greting": "typo"}"#,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("bad-config"), "{}", stdout(&out));

    let workflow = project.join("workflow.json");
    ok(
        &wfhost_in(&project, s, &["validate", workflow.to_str().unwrap()]),
        "validate",
    );
    let ws = workspace_in(s);
    let out = wfhost_in(
        &project,
        s,
        &["run", "workflow.json", "-w", ws.to_str().unwrap()],
    );
    assert!(
        ok(&out, "run of the sample workflow").contains("main.greet -> SIGNAL:SUCCESS"),
        "{}",
        stdout(&out)
    );
    publish_and_install(s, &project);
}

/// The compiled-component cache holds one compiled form of the component
/// (beside those of built-in plugins), named by its digest: later calls
/// and runs load it instead of compiling.
fn assert_compiled_once_by_digest(cache: &Path, component: &Path) {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(component).unwrap()));
    let compiled: Vec<String> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cwasm") && n.starts_with(&digest))
        .collect();
    assert_eq!(compiled.len(), 1, "{compiled:?} for {digest}");
}

/// Pack, sign and push `project` to a local registry; install it as
/// another user and run a workflow that names it by reference.
fn publish_and_install(s: &Path, project: &Path) {
    let Some(registry) = super::distribution::Registry::start(s) else {
        return;
    };
    let packed = ok(&wfhost_in(project, s, &["plugin", "pack"]), "plugin pack");
    assert!(
        packed.contains("world worker, WIT 0.1.0, requests []"),
        "{packed}"
    );
    let layout = project.join("target/wfhost-package/greeter-0.1.0");
    let key = s.join("publisher.key");
    let key_arg = key.to_str().unwrap();
    ok(
        &wfhost_in(project, s, &["plugin", "keygen", "--out", key_arg]),
        "keygen",
    );
    let layout_arg = layout.to_str().unwrap();
    ok(
        &wfhost_in(
            project,
            s,
            &["plugin", "sign", layout_arg, "--key", key_arg],
        ),
        "sign",
    );
    let reference = registry.reference("acme/greeter", "0.1.0");
    ok(
        &wfhost_in(project, s, &["plugin", "push", layout_arg, &reference]),
        "push",
    );

    let user = s.join("user");
    let user_project = user.join("project");
    std::fs::create_dir_all(&user_project).unwrap();
    let public = key.with_extension("pub");
    ok(
        &wfhost_in(
            &user_project,
            &user,
            &["plugin", "trust", public.to_str().unwrap()],
        ),
        "trust",
    );
    let installed = ok(
        &wfhost_in(&user_project, &user, &["plugin", "install", &reference]),
        "install",
    );
    assert!(installed.contains("(trusted)"), "{installed}");
    let listed = ok(
        &wfhost_in(&user_project, &user, &["plugin", "ls", "--json"]),
        "ls",
    );
    let record: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(record["plugin"]["language"], "python", "{record}");

    let wf = serde_json::json!({
        "id": "python-from-a-registry",
        "plugins": {"greeter": {"ref": reference}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "greet", "blocks": {"greet": {
            "worker": "greeter",
            "config": {"greeting": "hello"},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    std::fs::write(user_project.join("wf.json"), wf.to_string()).unwrap();
    let ws = workspace_in(&user);
    // The publisher's compiled-component cache: the installed component is
    // the same bytes, so it is not compiled again.
    let out = wfhost_with(
        &user_project,
        &user,
        &s.join("cache"),
        &["run", "wf.json", "-w", ws.to_str().unwrap()],
    );
    assert_compiled_once_by_digest(
        &s.join("cache"),
        &project.join("target/wfhost/greeter.wasm"),
    );
    assert!(
        ok(&out, "run from the registry").contains("hello from main.greet"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_python_action_handler_builds_calls_and_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let parent = s.join("src");
    std::fs::create_dir(&parent).unwrap();
    let (project, component) = scaffold_and_build(&parent, s, "router", "action-handler");
    assert!(assert_admissible(&component, "action-handler").is_empty());
    let wasm = component.to_str().unwrap();
    let out = wfhost_in(
        s,
        s,
        &["plugin", "call", wasm, "--action", "SKIP_TO:finish"],
    );
    assert_eq!(
        ok(&out, "plugin call --action").trim(),
        "SKIP_TO:finish: jump to finish"
    );
    let out = wfhost_in(
        s,
        s,
        &["plugin", "call", wasm, "--action", "NOPE", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("bad-action: `NOPE`: expected SKIP_TO:<block>"),
        "{report}"
    );
    let ws = workspace_in(s);
    let out = wfhost_in(
        &project,
        s,
        &["run", "workflow.json", "-w", ws.to_str().unwrap()],
    );
    assert!(
        ok(&out, "run of the sample workflow").contains("jump to main.finish"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn without_python3_the_build_says_what_to_install_in_one_line() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let out = wfhost_in(s, s, &["plugin", "new", "lonely", "--lang", "python"]);
    ok(&out, "plugin new needs no python");
    let empty_path = s.join("no-python");
    std::fs::create_dir(&empty_path).unwrap();
    let out = command(s)
        .current_dir(s.join("lonely"))
        .env("PATH", &empty_path)
        // A cache without the toolchain: the build must look for python3.
        .env("XDG_CACHE_HOME", s.join("empty-cache"))
        .args(["plugin", "build"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "error: python3 is not installed; install it: apt-get install python3 python3-venv\n"
    );
    assert!(!s.join("lonely/target").exists(), "nothing built");
    // A python3 without venv (Debian's python3 without python3-venv).
    let no_venv = s.join("no-venv");
    std::fs::create_dir(&no_venv).unwrap();
    let fake = no_venv.join("python3");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(
        &fake,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let out = command(s)
        .current_dir(s.join("lonely"))
        .env("PATH", &no_venv)
        .env("XDG_CACHE_HOME", s.join("empty-cache"))
        .args(["plugin", "build"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {} has no venv module; install it: apt-get install python3 python3-venv\n",
            fake.display()
        )
    );
    assert!(
        !s.join("empty-cache/wfhost/toolchains/componentize-py-0.25.1")
            .exists()
    );
}

/// A Python worker that declares `exec` gets that import (and only that
/// one more), needs the grant, and reaches the host through
/// componentize-py's bindings.
#[test]
fn a_python_worker_declaring_exec_imports_it_and_runs_commands_when_granted() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    ok(
        &wfhost_in(s, s, &["plugin", "new", "runner", "--lang", "python"]),
        "plugin new",
    );
    let project = s.join("runner");
    let toml = project.join("wfhost-plugin.toml");
    let manifest = std::fs::read_to_string(&toml).unwrap();
    let manifest = manifest.replace("capabilities = []", "capabilities = [\"exec\"]");
    std::fs::write(&toml, manifest).unwrap();
    std::fs::write(
        project.join("app.py"),
        r#"from wit_world.imports import exec as host_exec
from wit_world.imports import executor_types

from wfhost_sdk import Worker, WorkerOutput, export_worker, segment


@export_worker
class Plugin(Worker):
    def run(self, ctx, payload):
        command = executor_types.Command(argv=["echo", "hi"], cwd=None, env=[])
        block = host_exec.ExecBlock(commands=[command], allow_shell=False, executor=None)
        result = host_exec.run(block)
        payload.append(segment("EXEC", f"{result.executor} succeeded={result.succeeded}"))
        return WorkerOutput(payload, "SIGNAL:SUCCESS")
"#,
    )
    .unwrap();
    let built = ok(
        &wfhost_in(&project, s, &["plugin", "build"]),
        "plugin build",
    );
    let bytes = std::fs::read(project.join(built.trim())).unwrap();
    let info = wfhost_distribution::component::inspect(&bytes).unwrap();
    assert_eq!(info.capabilities, ["exec"], "{:?}", info.imports);
    let out = wfhost_in(&project, s, &["plugin", "call"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("add \"exec\" to the plugin's `grants`"),
        "{}",
        stderr(&out)
    );
    let out = wfhost_in(&project, s, &["plugin", "call", "--grant", "exec"]);
    let shown = ok(&out, "plugin call --grant exec");
    assert!(shown.contains("local succeeded=True"), "{shown}");
    ok(
        &wfhost_in(&project, s, &["plugin", "pack"]),
        "pack: the manifest tells the truth",
    );
}

/// Two first builds at once against an empty cache: each says how it
/// installs componentize-py, both succeed, one complete install is left
/// and nothing half-made beside it.
#[test]
fn two_first_builds_at_once_install_the_toolchain_once_and_completely() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let cache = s.join("fresh-cache");
    let builds: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| {
            ok(
                &wfhost_in(s, s, &["plugin", "new", name, "--lang", "python"]),
                "plugin new",
            );
            command(s)
                .current_dir(s.join(name))
                .env("XDG_CACHE_HOME", &cache)
                .env_remove("VIRTUAL_ENV")
                .args(["plugin", "build"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for build in builds {
        let out = build.wait_with_output().unwrap();
        ok(&out, "a concurrent first build");
        assert!(
            stderr(&out).contains("note: installing componentize-py 0.25.1: ")
                && stderr(&out).contains(" -m venv ")
                && stderr(&out).contains("install --quiet componentize-py==0.25.1"),
            "{}",
            stderr(&out)
        );
    }
    let toolchains = cache.join("wfhost/toolchains");
    assert_eq!(tree(&toolchains)[0], "componentize-py-0.25.1");
    let left: Vec<String> = std::fs::read_dir(&toolchains)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["componentize-py-0.25.1"]);
    assert!(
        toolchains
            .join("componentize-py-0.25.1/.wfhost-complete")
            .is_file()
    );
}
