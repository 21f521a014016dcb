//! Plugins written in Python: `plugin new --lang python` writes a project
//! with the Python SDK vendored (`sdk/python/`), `plugin build` makes its
//! component with componentize-py (pinned, installed into the user's cache
//! when missing; see [`toolchain`]).

mod component;
pub mod toolchain;

use std::path::{Path, PathBuf};

use wfhost_distribution::manifest::{ManifestSource, SOURCE_FILE};

use crate::plugin::new::WorldArg;

/// The Python SDK's files, vendored into every new project at the same
/// relative path (`sdk/python/<path>`).
const SDK_FILES: &[(&str, &str)] = &[
    (
        "wfhost_sdk/__init__.py",
        include_str!("../../../../../../sdk/python/wfhost_sdk/__init__.py"),
    ),
    (
        "wfhost_sdk/log.py",
        include_str!("../../../../../../sdk/python/wfhost_sdk/log.py"),
    ),
    (
        "wfhost_sdk/_bridge.py",
        include_str!("../../../../../../sdk/python/wfhost_sdk/_bridge.py"),
    ),
    (
        "wfhost_sdk/_worker_export.py",
        include_str!("../../../../../../sdk/python/wfhost_sdk/_worker_export.py"),
    ),
    (
        "wfhost_sdk/_action_handler_export.py",
        include_str!("../../../../../../sdk/python/wfhost_sdk/_action_handler_export.py"),
    ),
    (
        "tests/__init__.py",
        include_str!("../../../../../../sdk/python/tests/__init__.py"),
    ),
    (
        "tests/test_wfhost_sdk.py",
        include_str!("../../../../../../sdk/python/tests/test_wfhost_sdk.py"),
    ),
];

/// The contract, as the Rust SDK vendors it.
const WIT: &str = include_str!("../../../../../../sdk/wit/plugin.wit");

/// The WIT package version the vendored SDK targets.
const WIT_VERSION: &str = "0.1.0";

/// Where the project keeps the contract.
const WIT_FILE: &str = "wit/plugin.wit";

/// A Python plugin project's files, relative path → content.
pub fn files(name: &str, world: WorldArg) -> Vec<(String, String)> {
    let component = format!("target/wfhost/{}.wasm", name.replace('-', "_"));
    let (app, test, workflow, signals, description, call) = match world {
        WorldArg::Worker => (
            include_str!("template/worker.py"),
            include_str!("template/test_worker.py"),
            include_str!("../../template/worker.json"),
            r#"["SIGNAL:SUCCESS", "SIGNAL:EMPTY"]"#,
            "A wfhost block worker in Python",
            format!("wfhost plugin call {component} --block-config '{{\"greeting\": \"hi\"}}'"),
        ),
        WorldArg::ActionHandler => (
            include_str!("template/action_handler.py"),
            include_str!("template/test_action_handler.py"),
            include_str!("../../template/action_handler.json"),
            "[]",
            "A wfhost action handler in Python",
            format!("wfhost plugin call {component} --action SKIP_TO:finish"),
        ),
    };
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{world}}", world.name())
            .replace("{{component}}", &component)
            .replace("{{signals}}", signals)
            .replace("{{description}}", description)
            .replace("{{call_example}}", &call)
            .replace("{{wit_version}}", WIT_VERSION)
            .replace("{{componentize_py}}", toolchain::COMPONENTIZE_PY_VERSION)
    };
    let mut out = vec![
        (
            ".gitignore".to_string(),
            include_str!("template/gitignore").to_string(),
        ),
        ("README.md".into(), fill(include_str!("template/README.md"))),
        (
            SOURCE_FILE.into(),
            fill(include_str!("template/wfhost-plugin.toml")),
        ),
        ("workflow.json".into(), fill(workflow)),
        ("app.py".into(), fill(app)),
        ("test_app.py".into(), fill(test)),
        (WIT_FILE.into(), WIT.into()),
    ];
    out.extend(
        SDK_FILES
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string())),
    );
    out
}

pub fn next_steps(name: &str, world: WorldArg, dir: &Path) -> String {
    let shown = dir.display();
    format!(
        "created {} plugin `{name}` (Python) in {shown}\n\
         next:\n  cd {shown}\n  python3 -m unittest      # its logic, natively\n  \
         wfhost plugin build     # the component (installs componentize-py {} once)\n  \
         wfhost plugin call ...  # see README.md\n  \
         wfhost run workflow.json -w WORKSPACE",
        world.name(),
        toolchain::COMPONENTIZE_PY_VERSION,
    )
}

/// Build the project in `dir` with componentize-py; returns the path of
/// its component (where its `wfhost-plugin.toml` says). `release` changes
/// nothing: a Python component is the same either way.
pub fn build(dir: &Path, _release: bool) -> Result<PathBuf, String> {
    let (source, entry) = read_project(dir)?;
    let toolchain = toolchain::ensure(|note| eprintln!("note: {note}"))?;
    let work = tempfile::Builder::new()
        .prefix(".wfhost-python-build-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary build directory: {e}"))?;
    let wit = write_wit(dir, work.path(), &source)?;
    let raw = work.path().join("componentize-py.wasm");
    componentize(&toolchain, dir, &wit, entry, &raw)?;
    let bytes = std::fs::read(&raw).map_err(|e| format!("{}: {e}", raw.display()))?;
    let bytes = component::with_signals(component::stub_sockets(&bytes)?, &source.signals);
    check_imports(&bytes)?;
    let out = dir.join(&source.component);
    write_atomically(&out, &bytes)?;
    Ok(out)
}

/// The project's manifest and the SDK module to build from, after
/// checking that the files a build needs are there.
fn read_project(dir: &Path) -> Result<(ManifestSource, &'static str), String> {
    let toml = dir.join(SOURCE_FILE);
    let source = ManifestSource::read(&toml)?;
    let entry = entry_module(&source.world).ok_or_else(|| {
        format!(
            "{}: `world` \"{}\" is not worker or action-handler",
            toml.display(),
            source.world
        )
    })?;
    for needed in ["app.py", "wfhost_sdk/__init__.py", WIT_FILE] {
        if !dir.join(needed).is_file() {
            return Err(format!(
                "{}: no {needed}; a Python plugin project has app.py, wfhost_sdk/ and {WIT_FILE} \
                 (`wfhost plugin new --lang python`)",
                dir.display()
            ));
        }
    }
    Ok((source, entry))
}

/// The SDK module componentize-py builds from, for a world.
fn entry_module(world: &str) -> Option<&'static str> {
    match world {
        "worker" => Some("wfhost_sdk._worker_export"),
        "action-handler" => Some("wfhost_sdk._action_handler_export"),
        _ => None,
    }
}

/// The world the component targets: its plugin world's export, the `log`
/// import and the interfaces of the capabilities the manifest declares,
/// no more (componentize-py imports everything its world names). Returns
/// the WIT directory (the world, the contract in `deps/`).
fn write_wit(project: &Path, work: &Path, source: &ManifestSource) -> Result<PathBuf, String> {
    let contract = project.join(WIT_FILE);
    let wit =
        std::fs::read_to_string(&contract).map_err(|e| format!("{}: {e}", contract.display()))?;
    let version = wit_version(&wit).ok_or_else(|| {
        format!(
            "{}: no `package wfhost:plugin@<version>;` line",
            contract.display()
        )
    })?;
    let world = world_wit(&source.world, version, &source.capabilities)?;
    let dir = work.join("wit");
    let deps = dir.join("deps/wfhost-plugin");
    std::fs::create_dir_all(&deps).map_err(|e| format!("{}: {e}", deps.display()))?;
    std::fs::write(deps.join("plugin.wit"), wit).map_err(|e| format!("{}: {e}", deps.display()))?;
    std::fs::write(dir.join("world.wit"), world).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// `0.1.0` of a `package wfhost:plugin@0.1.0;` line.
fn wit_version(wit: &str) -> Option<&str> {
    wit.lines()
        .find_map(|l| l.trim().strip_prefix("package wfhost:plugin@"))
        .and_then(|rest| rest.strip_suffix(';'))
}

/// The name of the world [`world_wit`] writes.
const BUILD_WORLD: &str = "plugin";

fn world_wit(world: &str, version: &str, capabilities: &[String]) -> Result<String, String> {
    let export = match world {
        "worker" => "block-worker",
        "action-handler" => "action-interpreter",
        other => {
            return Err(format!(
                "`world` \"{other}\" is not worker or action-handler"
            ));
        }
    };
    let mut text = format!("package wfhost-python:build;\n\nworld {BUILD_WORLD} {{\n");
    text.push_str(&format!("    import wfhost:plugin/log@{version};\n"));
    for capability in capabilities {
        if capability == "http" {
            return Err(
                "capability `http`: Python plugins cannot make HTTP requests yet (no wasi:http \
                 client in the Python SDK); use a JavaScript plugin (`fetch`), a Rust one \
                 (`wfhost_sdk::http`) or the built-in `llm` worker"
                    .into(),
            );
        }
        if world != "worker"
            || !["exec", "container", "slurm", "agent"].contains(&capability.as_str())
        {
            return Err(format!(
                "capability `{capability}`: a Python {world} can import exec, container, slurm \
                 and agent (workers only)"
            ));
        }
        text.push_str(&format!(
            "    import wfhost:plugin/{capability}@{version};\n"
        ));
    }
    text.push_str(&format!(
        "    export wfhost:plugin/{export}@{version};\n}}\n"
    ));
    Ok(text)
}

/// Run componentize-py, printing the command first.
fn componentize(
    toolchain: &toolchain::Toolchain,
    project: &Path,
    wit: &Path,
    entry: &str,
    out: &Path,
) -> Result<(), String> {
    let mut cmd = toolchain.command();
    cmd.arg("-d")
        .arg(wit)
        .args(["-w", BUILD_WORLD, "componentize", "--python-path"])
        .arg(project)
        .arg(entry)
        .arg("-o")
        .arg(out)
        // Only the project's modules: not those of a venv the user is in.
        .env_remove("VIRTUAL_ENV")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // Its chatter goes to stderr: stdout is the component's path.
        .stdout(std::io::stderr());
    eprintln!(
        "note: componentize-py {} -d {} -w {BUILD_WORLD} componentize --python-path {} {entry} -o {}",
        toolchain::COMPONENTIZE_PY_VERSION,
        wit.display(),
        project.display(),
        out.display()
    );
    let status = cmd.status().map_err(|e| {
        format!(
            "{}: cannot run componentize-py: {e}",
            toolchain.python.display()
        )
    })?;
    if !status.success() {
        return Err(format!(
            "componentize-py failed in {} ({status}); see its errors above",
            project.display()
        ));
    }
    Ok(())
}

/// Nothing the host would refuse is left (a new WASI interface in a later
/// componentize-py would be caught here, not at the first run).
fn check_imports(bytes: &[u8]) -> Result<(), String> {
    let imports = component::imports(bytes)?;
    let refused: Vec<&String> = imports
        .iter()
        .filter(|i| {
            wfhost_core::policy::capabilities::NEVER_GRANTED
                .iter()
                .any(|p| i.starts_with(p))
        })
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the component still imports interfaces the host never grants: {}",
        refused
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn write_atomically(to: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let staged =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(staged.path(), bytes)
        .map_err(|e| format!("{}: {e}", staged.path().display()))?;
    // Readable like any build output (a temporary file is made 0600).
    let readable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644);
    std::fs::set_permissions(staged.path(), readable)
        .map_err(|e| format!("{}: {e}", staged.path().display()))?;
    staged
        .persist(to)
        .map_err(|e| format!("{}: {}", to.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `sdk/python/` is vendored: a file the SDK gains must
    /// be added to [`SDK_FILES`].
    #[test]
    fn every_sdk_file_is_vendored() {
        let pycache = |p: &Path| p.file_name().is_some_and(|n| n == "__pycache__");
        let (found, vendored) = super::super::sdk_files_and_vendored("python", pycache, SDK_FILES);
        assert_eq!(found, vendored);
    }

    #[test]
    fn no_placeholder_is_left() {
        for world in [WorldArg::Worker, WorldArg::ActionHandler] {
            let files = files("demo-plugin", world);
            for (path, content) in &files {
                assert!(!content.contains("{{"), "{path}: {content}");
            }
            let toml = &files.iter().find(|(p, _)| p == SOURCE_FILE).unwrap().1;
            assert!(toml.contains("language = \"python\""), "{toml}");
            assert!(
                toml.contains("component = \"target/wfhost/demo_plugin.wasm\""),
                "{toml}"
            );
        }
    }

    #[test]
    fn the_vendored_wit_is_the_version_it_says() {
        assert_eq!(wit_version(WIT), Some(WIT_VERSION));
    }

    #[test]
    fn the_world_imports_log_and_the_declared_capabilities_only() {
        let worker = world_wit("worker", "0.1.0", &["exec".into()]).unwrap();
        assert!(
            worker.contains("import wfhost:plugin/log@0.1.0;"),
            "{worker}"
        );
        assert!(
            worker.contains("import wfhost:plugin/exec@0.1.0;"),
            "{worker}"
        );
        assert!(!worker.contains("slurm"), "{worker}");
        assert!(
            worker.contains("export wfhost:plugin/block-worker@0.1.0;"),
            "{worker}"
        );
        let handler = world_wit("action-handler", "0.1.0", &[]).unwrap();
        assert!(handler.contains("export wfhost:plugin/action-interpreter@0.1.0;"));
        assert!(world_wit("action-handler", "0.1.0", &["exec".into()]).is_err());
        assert!(world_wit("worker", "0.1.0", &["network".into()]).is_err());
        let http = world_wit("worker", "0.1.0", &["http".into()]).unwrap_err();
        assert!(http.contains("cannot make HTTP requests yet"), "{http}");
        assert!(world_wit("daemon", "0.1.0", &[]).is_err());
    }

    #[test]
    fn a_build_needs_the_project_files_and_a_known_world() {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files("demo", WorldArg::ActionHandler) {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        let (source, entry) = read_project(dir.path()).unwrap();
        assert_eq!(
            (source.world.as_str(), entry),
            ("action-handler", "wfhost_sdk._action_handler_export")
        );
        std::fs::remove_file(dir.path().join("app.py")).unwrap();
        let err = read_project(dir.path()).unwrap_err();
        assert!(err.contains("no app.py"), "{err}");
        let toml = dir.path().join(SOURCE_FILE);
        let text = std::fs::read_to_string(&toml).unwrap();
        std::fs::write(&toml, text.replace("\"action-handler\"", "\"daemon\"")).unwrap();
        let err = read_project(dir.path()).unwrap_err();
        assert!(err.contains("`world` \"daemon\""), "{err}");
    }

    #[test]
    fn each_world_has_its_entry_module_in_the_sdk() {
        for world in ["worker", "action-handler"] {
            let module = entry_module(world).unwrap();
            let file = format!("{}.py", module.replace('.', "/"));
            assert!(SDK_FILES.iter().any(|(p, _)| *p == file), "{file}");
        }
    }
}
