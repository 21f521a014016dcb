//! JavaScript plugins, as their author makes them: `plugin new --lang
//! javascript`, the project's own `node --test`, `plugin build`
//! (componentize-js, installed by wfhost into its toolchain cache), `plugin
//! call`, a run of the sample workflow, and the package through a registry
//! to another user's run.
//!
//! These tests need node and npm and the npm registry: they fail, rather
//! than skip, without them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::distribution::{User, pack};
use super::{command, stderr, stdout, wfhost, workspace_in};

/// The toolchain cache every test here shares (`XDG_CACHE_HOME` of the
/// builds): one fixed directory in cargo's target tmp dir, so the suite
/// installs jco and componentize-js once per target directory and a rerun
/// installs nothing, and the user's own `~/.cache` is never touched.
/// Tests that start together all install and one install wins the rename,
/// which is the concurrent install users get too.
fn toolchain_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("javascript-toolchain-cache")
}

/// `wfhost ARGS` in `dir` with the shared toolchain cache.
fn wfhost_in(dir: &Path, scratch: &Path, args: &[&str]) -> Output {
    command(scratch)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", toolchain_cache())
        .args(args)
        .output()
        .expect("wfhost runs")
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

/// `plugin new NAME --lang javascript --world WORLD` in `parent`, the
/// project's `node --test`, and `plugin build`; returns the project and
/// its component.
fn scaffold_and_build(
    parent: &Path,
    scratch: &Path,
    name: &str,
    world: &str,
) -> (PathBuf, PathBuf) {
    let out = wfhost_in(
        parent,
        scratch,
        &[
            "plugin",
            "new",
            name,
            "--lang",
            "javascript",
            "--world",
            world,
        ],
    );
    ok(&out, "plugin new --lang javascript");
    assert!(stdout(&out).contains("node --test"), "{}", stdout(&out));
    let project = parent.join(name);
    node_tests_pass(&project);
    let component = build(&project, scratch);
    (project, component)
}

/// `node --test` in `project`: every test passes, the SDK's included.
fn node_tests_pass(project: &Path) {
    let out = Command::new("node")
        .arg("--test")
        .current_dir(project)
        .output()
        .expect("node is installed (JavaScript plugins need it)");
    ok(&out, "node --test in the new project");
    let report = stdout(&out);
    assert!(report.contains("# fail 0"), "{report}");
    assert!(
        report.contains("ok 1 - ") && report.contains("# pass "),
        "{report}"
    );
}

/// `plugin build` in `project`; returns the component it printed.
fn build(project: &Path, scratch: &Path) -> PathBuf {
    let out = wfhost_in(project, scratch, &["plugin", "build"]);
    ok(&out, "plugin build");
    assert!(
        stderr(&out).contains("note: componentize-js 0.23.0: "),
        "{}",
        stderr(&out)
    );
    let component = project.join(stdout(&out).trim());
    assert!(component.is_file(), "{}", stdout(&out));
    assert!(
        toolchain_cache()
            .join("wfhost/toolchains")
            .read_dir()
            .unwrap()
            .flatten()
            .any(|e| e
                .file_name()
                .to_string_lossy()
                .starts_with("jco-1.35.0-componentize-js-0.23.0-")),
        "the toolchain is installed in the shared cache"
    );
    component
}

#[test]
fn a_new_javascript_worker_tests_builds_calls_runs_and_goes_through_a_registry() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path().join("src");
    std::fs::create_dir(&parent).unwrap();
    let (project, component) = scaffold_and_build(&parent, scratch.path(), "greeter", "worker");
    assert_eq!(
        component.canonicalize().unwrap(),
        project
            .join("target/wfhost/greeter.wasm")
            .canonicalize()
            .unwrap()
    );
    // What the host reads from it: the world, no capability (no
    // wasi:http: fetch is disabled), the declared signals.
    let info =
        wfhost_distribution::component::inspect(&std::fs::read(&component).unwrap()).unwrap();
    assert_eq!(info.world, "worker");
    assert!(info.capabilities.is_empty(), "{info:?}");
    assert!(
        !info.imports.iter().any(|i| i.starts_with("wasi:http")),
        "{info:?}"
    );
    assert_eq!(info.signals, ["SIGNAL:EMPTY", "SIGNAL:SUCCESS"]);

    let out = wfhost_in(
        &project,
        scratch.path(),
        &["plugin", "call", "--block-config", r#"{"greeting": "hi"}"#],
    );
    ok(&out, "plugin call");
    let shown = stdout(&out);
    for line in [
        "[info] greeting with: hi from main.call",
        "signal: SIGNAL:SUCCESS",
        "[GREETING] greeting-0: hi from main.call",
    ] {
        assert!(shown.contains(line), "{line} missing from:\n{shown}");
    }
    let compiled = cached_compilation(scratch.path(), &component);
    let out = wfhost_in(&project, scratch.path(), &["plugin", "call", "--json"]);
    ok(&out, "plugin call --json");
    assert_eq!(
        cached_compilation(scratch.path(), &component),
        compiled,
        "the second call compiled nothing: it loaded the cached compilation"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["output"]["signal"], "SIGNAL:EMPTY", "{report}");
    assert_eq!(
        report["log"][0],
        "[warn] no `greeting` in the block's config"
    );
    let out = wfhost_in(
        &project,
        scratch.path(),
        &["plugin", "call", "--block-config", r#"{"greting": "typo"}"#],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad-config: block config: unknown field `greting`"),
        "{}",
        stderr(&out)
    );

    let workflow = project.join("workflow.json");
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

    publish_install_and_run(scratch.path(), &project);
}

/// The compiled-component cache's entry for `component` (named by its
/// digest) and when it was written: there must be exactly one.
fn cached_compilation(scratch: &Path, component: &Path) -> (PathBuf, std::time::SystemTime) {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(component).unwrap()));
    let entries: Vec<PathBuf> = std::fs::read_dir(scratch.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&digest) && name.ends_with(".cwasm")
        })
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let written = entries[0].metadata().unwrap().modified().unwrap();
    (entries[0].clone(), written)
}

/// Pack, sign and push the project's component to a registry; another
/// user trusts the key, installs it and runs it by reference.
fn publish_install_and_run(scratch: &Path, project: &Path) {
    let Some(registry) = super::distribution::Registry::start(scratch) else {
        return;
    };
    let publisher = User {
        scratch: scratch.join("publisher"),
        project: project.to_path_buf(),
    };
    let layout = scratch.join("pkg");
    let digest = pack(&publisher, project, &layout);
    let index = std::fs::read_to_string(layout.join("index.json")).unwrap();
    assert!(index.contains(&digest), "{index}");
    let manifest = std::fs::read_to_string(
        layout
            .join("blobs/sha256")
            .join(digest.strip_prefix("sha256:").unwrap()),
    )
    .unwrap();
    assert!(
        manifest.contains(r#"\"language\":\"javascript\""#),
        "{manifest}"
    );
    let key = scratch.join("publisher.key");
    publisher.ok(&["plugin", "keygen", "--out", key.to_str().unwrap()]);
    publisher.ok(&[
        "plugin",
        "sign",
        layout.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    let reference = registry.reference("acme/greeter", "0.1.0");
    let pushed = publisher.ok(&["plugin", "push", layout.to_str().unwrap(), &reference]);
    assert!(pushed.contains(&digest), "{pushed}");

    let user = User::new(&scratch.join("user"));
    user.ok(&[
        "plugin",
        "trust",
        key.with_extension("pub").to_str().unwrap(),
    ]);
    let installed = user.ok(&["plugin", "install", &reference]);
    assert!(
        installed.contains("installed greeter 0.1.0") && installed.contains("(trusted)"),
        "{installed}"
    );
    let wf = user.project.join("workflow.json");
    let workflow = serde_json::json!({
        "id": "greets-from-a-package",
        "plugins": {"greeter": {"ref": reference}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "greet", "blocks": {"greet": {
            "worker": "greeter",
            "config": {"greeting": "hello"},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    std::fs::write(&wf, workflow.to_string()).unwrap();
    let ws = workspace_in(&user.scratch);
    let out = wfhost(
        &["run", wf.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        &user.scratch,
    );
    ok(&out, "run of the installed package");
    assert!(
        stdout(&out).contains("hello from main.greet"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_new_javascript_action_handler_tests_builds_calls_and_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path().join("src");
    std::fs::create_dir(&parent).unwrap();
    let (project, component) =
        scaffold_and_build(&parent, scratch.path(), "router", "action-handler");
    let wasm = component.to_str().unwrap();
    let out = wfhost(
        &["plugin", "call", wasm, "--action", "SKIP_TO:finish"],
        scratch.path(),
    );
    ok(&out, "plugin call --action");
    assert_eq!(stdout(&out).trim(), "SKIP_TO:finish: jump to finish");
    let out = wfhost(
        &["plugin", "call", wasm, "--action", "NOPE"],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad-action: `NOPE`: expected SKIP_TO:<block>"),
        "{}",
        stderr(&out)
    );
    let workflow = project.join("workflow.json");
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

/// A worker that runs a command through the `exec` capability: the entry
/// connects the import to the SDK's `exec`, and the component imports it
/// (so it needs the grant) because wfhost-plugin.toml lists it.
#[test]
fn a_javascript_worker_uses_a_capability_it_lists() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path();
    let out = wfhost_in(
        parent,
        parent,
        &["plugin", "new", "runner", "--lang", "javascript"],
    );
    ok(&out, "plugin new");
    let project = parent.join("runner");
    let toml = project.join("wfhost-plugin.toml");
    let manifest = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("capabilities = []", "capabilities = [\"exec\"]")
        .replace("\"SIGNAL:EMPTY\"", "\"SIGNAL:FAILED\"");
    std::fs::write(&toml, manifest).unwrap();
    std::fs::write(
        project.join("src/plugin.js"),
        r#"import { defineWorker, exec, output, segment } from "../wfhost-sdk/index.js";

export const blockWorker = defineWorker({
  signals: ["SIGNAL:SUCCESS", "SIGNAL:FAILED"],
  run(ctx, payload) {
    const result = exec.run({ commands: [{ argv: ["echo", "hi"], env: [] }], allowShell: false });
    payload.push(segment("EXEC", `${result.succeeded} ${result.commands[0].exitCode}`));
    return output(payload, result.succeeded ? "SIGNAL:SUCCESS" : "SIGNAL:FAILED");
  },
});
"#,
    )
    .unwrap();
    std::fs::remove_file(project.join("test/plugin.test.js")).unwrap();
    let component = build(&project, parent);
    let wasm = component.to_str().unwrap();
    let info =
        wfhost_distribution::component::inspect(&std::fs::read(&component).unwrap()).unwrap();
    assert_eq!(info.capabilities, ["exec"]);
    let out = wfhost(&["plugin", "call", wasm, "--grant", "exec"], parent);
    ok(&out, "plugin call --grant exec");
    assert!(
        stdout(&out).contains("[EXEC] exec-0: true 0"),
        "{}",
        stdout(&out)
    );
    let out = wfhost(&["plugin", "call", wasm], parent);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("add \"exec\" to the plugin's `grants`"),
        "{}",
        stderr(&out)
    );
}

/// Without node on the PATH: `plugin new` still writes the project (and
/// warns), `plugin build` says in one line how to install node and npm.
#[test]
fn without_node_javascript_says_how_to_install_it() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let empty_path = dir.join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let run = |cwd: &Path, args: &[&str]| {
        command(dir)
            .current_dir(cwd)
            .env("PATH", &empty_path)
            .env("XDG_CACHE_HOME", dir.join("xdg"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(dir, &["plugin", "new", "lonely", "--lang", "javascript"]);
    ok(&out, "plugin new without node");
    assert!(
        stderr(&out).contains("warning: JavaScript plugins need node"),
        "{}",
        stderr(&out)
    );
    let out = run(&dir.join("lonely"), &["plugin", "build"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("not found on PATH") && err.contains("`sudo apt-get install nodejs npm`"),
        "{err}"
    );
    assert!(!dir.join("xdg").exists(), "nothing installed");
}

/// A JavaScript worker that lists `http` awaits `fetch` to a host its
/// workflow allows, with a secret placeholder the host fills in; the
/// component imports wasi:http and is refused without the grant.
#[test]
fn a_javascript_worker_granted_http_fetches_from_an_allowed_host() {
    let server = super::http::Server::start();
    let scratch = tempfile::tempdir().unwrap();
    let parent = scratch.path();
    let out = wfhost_in(
        parent,
        parent,
        &["plugin", "new", "fetcher", "--lang", "javascript"],
    );
    ok(&out, "plugin new");
    let project = parent.join("fetcher");
    let toml = project.join("wfhost-plugin.toml");
    let manifest = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("capabilities = []", "capabilities = [\"http\"]")
        .replace(", \"SIGNAL:EMPTY\"", "");
    std::fs::write(&toml, manifest).unwrap();
    std::fs::write(
        project.join("src/plugin.js"),
        r#"import { defineWorker, output, segment } from "../wfhost-sdk/index.js";

export const blockWorker = defineWorker({
  signals: ["SIGNAL:SUCCESS"],
  async run(ctx, payload) {
    const { url } = ctx.config({ keys: ["url"] });
    const response = await fetch(url, { headers: { authorization: "Bearer ${secret.API_KEY}" } });
    const seen = await response.json();
    payload.push(segment("FETCHED", `${response.status} ${seen.headers.authorization}`));
    return output(payload, "SIGNAL:SUCCESS");
  },
});
"#,
    )
    .unwrap();
    std::fs::remove_file(project.join("test/plugin.test.js")).unwrap();
    let component = build(&project, parent);
    let info =
        wfhost_distribution::component::inspect(&std::fs::read(&component).unwrap()).unwrap();
    assert_eq!(info.capabilities, ["http"]);
    super::set_secret(parent, "API_KEY", "sk-js-5e1d0c9b77");
    let wf = serde_json::json!({
        "id": "js-fetch", "start_node": "main",
        "plugins": {"fetcher": {"path": component, "grants": ["http"], "http": {"allow": [
            {"host": format!("127.0.0.1:{}", server.port), "scheme": "http", "secrets": ["API_KEY"]}]}}},
        "nodes": {"main": {"entry_block": "x", "blocks": {"x": {
            "worker": "fetcher", "config": {"url": server.url("/echo")},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}
    });
    let path = parent.join("fetch.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    let ws = super::workspace_in(parent);
    let out = wfhost(
        &["run", path.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        parent,
    );
    ok(&out, "run the fetching worker");
    assert!(
        stdout(&out).contains("200 Bearer ***"),
        "the guest sees the secret masked: {}",
        stdout(&out)
    );
    assert_eq!(
        server.seen()[0]["headers"]["authorization"],
        "Bearer sk-js-5e1d0c9b77"
    );
    let mut ungranted = wf.clone();
    ungranted["plugins"]["fetcher"] = serde_json::json!({"path": component});
    std::fs::write(&path, ungranted.to_string()).unwrap();
    let out = wfhost(
        &["run", path.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        parent,
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("add \"http\""), "{}", stderr(&out));
}
