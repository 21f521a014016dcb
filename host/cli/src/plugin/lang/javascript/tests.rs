use super::*;

fn project(world: WorldArg, capabilities: &[&str]) -> Project {
    Project {
        dir: PathBuf::from("/p/demo"),
        world,
        main: "src/plugin.js".into(),
        capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
        component: PathBuf::from("/p/demo/target/wfhost/demo.wasm"),
        wit_version: "0.1.0".into(),
    }
}

/// Every file of `sdk/javascript/` is vendored: a file the SDK gains must
/// be added to [`SDK_FILES`].
#[test]
fn every_sdk_file_is_vendored() {
    let (found, vendored) =
        super::super::sdk_files_and_vendored("javascript", |_| false, SDK_FILES);
    assert_eq!(found, vendored);
}

/// The `{{word}}` placeholders in `text` (JSDoc's `{{field: type}}` is
/// not one).
fn placeholders(text: &str) -> Vec<&str> {
    text.split("{{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}").map(|(word, _)| word))
        .filter(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

#[test]
fn no_placeholder_is_left() {
    assert_eq!(placeholders("a {{name}} {{x: y}} {{"), ["name"]);
    for world in [WorldArg::Worker, WorldArg::ActionHandler] {
        for (path, content) in files("demo", world) {
            assert_eq!(placeholders(&content), Vec::<&str>::new(), "{path}");
        }
    }
}

#[test]
fn a_project_has_its_manifest_module_tests_and_sdk() {
    let worker: std::collections::BTreeMap<String, String> =
        files("demo", WorldArg::Worker).into_iter().collect();
    for path in [
        "package.json",
        "src/plugin.js",
        "test/plugin.test.js",
        "workflow.json",
        "README.md",
        ".gitignore",
        "wfhost-sdk/index.js",
        "wfhost-sdk/index.d.ts",
        "wfhost-sdk/wit/plugin.wit",
    ] {
        assert!(worker.contains_key(path), "{path} missing");
    }
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("wfhost-plugin.toml");
    std::fs::write(&toml, &worker["wfhost-plugin.toml"]).unwrap();
    let source = wfhost_distribution::manifest::ManifestSource::read(&toml).unwrap();
    assert_eq!(source.language.as_deref(), Some("javascript"));
    assert_eq!(source.signals, ["SIGNAL:SUCCESS", "SIGNAL:EMPTY"]);
    assert_eq!(source.component, Path::new("target/wfhost/demo.wasm"));
    let package: serde_json::Value = serde_json::from_str(&worker["package.json"]).unwrap();
    assert_eq!(package["main"], "src/plugin.js");
    assert_eq!(package["type"], "module");
    // The sample workflow names the component the manifest names.
    assert!(worker["workflow.json"].contains("\"path\": \"target/wfhost/demo.wasm\""));
    assert!(worker["src/plugin.js"].contains("\"SIGNAL:SUCCESS\", \"SIGNAL:EMPTY\""));
    let handler: std::collections::BTreeMap<String, String> =
        files("demo", WorldArg::ActionHandler).into_iter().collect();
    assert!(handler["src/plugin.js"].contains("export const actionInterpreter"));
    assert!(handler["wfhost-plugin.toml"].contains("world = \"action-handler\""));
}

#[test]
fn the_world_imports_only_log_and_the_listed_capabilities() {
    let wit = world_wit(&project(WorldArg::Worker, &["exec"]));
    assert!(wit.contains("world worker {"), "{wit}");
    assert!(wit.contains("import wfhost:plugin/log@0.1.0;"), "{wit}");
    assert!(wit.contains("import wfhost:plugin/exec@0.1.0;"), "{wit}");
    assert!(
        !wit.contains("container") && !wit.contains("slurm"),
        "{wit}"
    );
    assert!(
        wit.contains("export wfhost:plugin/block-worker@0.1.0;"),
        "{wit}"
    );
    let wit = world_wit(&project(WorldArg::ActionHandler, &[]));
    assert!(wit.contains("world action-handler {"), "{wit}");
    assert!(
        wit.contains("export wfhost:plugin/action-interpreter@0.1.0;"),
        "{wit}"
    );
}

#[test]
fn the_entry_connects_the_imports_and_reexports_the_plugin() {
    let js = entry_js(&project(WorldArg::Worker, &["exec", "agent"]));
    for line in [
        "import { log } from \"wfhost:plugin/log@0.1.0\";",
        "import * as exec from \"wfhost:plugin/exec@0.1.0\";",
        "import * as agent from \"wfhost:plugin/agent@0.1.0\";",
        "import { connectHost } from \"../../../wfhost-sdk/host.js\";",
        "connectHost({ log, exec, agent });",
        "export { blockWorker } from \"../../../src/plugin.js\";",
    ] {
        assert!(js.contains(line), "{line} missing from:\n{js}");
    }
    let js = entry_js(&project(WorldArg::ActionHandler, &[]));
    assert!(js.contains("export { actionInterpreter } from"), "{js}");
}

#[test]
fn capabilities_are_checked() {
    let toml = Path::new("wfhost-plugin.toml");
    let caps = |c: &[&str]| c.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    assert!(check_capabilities(toml, WorldArg::Worker, &caps(&["exec", "slurm", "http"])).is_ok());
    let err = check_capabilities(toml, WorldArg::Worker, &caps(&["sockets"])).unwrap_err();
    assert!(err.contains("\"sockets\" is not one of"), "{err}");
    let err = check_capabilities(toml, WorldArg::ActionHandler, &caps(&["exec"])).unwrap_err();
    assert!(
        err.contains("an action handler imports no capability"),
        "{err}"
    );
}

#[test]
fn main_must_be_a_file_inside_the_project() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/p.js"), "").unwrap();
    let with_main = |main: &str| {
        std::fs::write(
            dir.path().join("package.json"),
            serde_json::json!({ "main": main }).to_string(),
        )
        .unwrap();
        main_module(dir.path())
    };
    assert_eq!(with_main("./src/p.js").unwrap(), "src/p.js");
    for bad in ["../x.js", "/etc/passwd", "src/missing.js"] {
        let err = with_main(bad).unwrap_err();
        assert!(
            err.contains("is not a file inside the project"),
            "{bad}: {err}"
        );
    }
    std::fs::write(dir.path().join("package.json"), "{}").unwrap();
    assert!(main_module(dir.path()).unwrap_err().contains("no `main`"));
}

#[test]
fn the_signals_section_is_read_back_by_the_host() {
    // An empty component: magic, version 0x0d, layer 1.
    let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
    let long = format!("SIGNAL:{}", "X".repeat(200));
    let signals = vec!["SIGNAL:SUCCESS".to_string(), long.clone()];
    append_signals(&mut bytes, &signals);
    assert_eq!(
        wfhost_runtime::admission::declared_signals(&bytes),
        Some(vec!["SIGNAL:SUCCESS".to_string(), long])
    );
    assert_eq!(leb128(127), [0x7f]);
    assert_eq!(leb128(300), [0xac, 0x02]);
}

#[test]
fn the_wit_version_is_read_from_the_package_line() {
    assert_eq!(wit_version(WIT).as_deref(), Some("0.1.0"));
    assert_eq!(wit_version("package other:x@1.0.0;"), None);
}

#[test]
fn the_lock_pins_the_versions_the_toolchain_checks() {
    let lock: serde_json::Value =
        serde_json::from_str(include_str!("toolchain/package-lock.json")).unwrap();
    let package: serde_json::Value =
        serde_json::from_str(include_str!("toolchain/package.json")).unwrap();
    for (name, version) in [
        ("@bytecodealliance/jco", JCO_VERSION),
        ("@bytecodealliance/componentize-js", COMPONENTIZE_JS_VERSION),
    ] {
        assert_eq!(package["dependencies"][name], version, "{name}");
        assert_eq!(
            lock["packages"][format!("node_modules/{name}")]["version"],
            version,
            "{name}"
        );
    }
    let dir = toolchain::dir_in(Path::new("/cache"));
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with(&format!(
            "jco-{JCO_VERSION}-componentize-js-{COMPONENTIZE_JS_VERSION}-"
        )),
        "{name}"
    );
}

#[test]
fn a_component_is_checked_against_the_project() {
    let word_count = wfhost_guest_artifacts::EXAMPLE_WORD_COUNT;
    let path = Path::new("built.wasm");
    assert!(check_component(path, word_count, &project(WorldArg::Worker, &[])).is_ok());
    let err = check_component(path, word_count, &project(WorldArg::Worker, &["exec"])).unwrap_err();
    assert!(
        err.contains("of world worker needing capabilities []; the project is of world worker with capabilities [exec]"),
        "{err}"
    );
    let err =
        check_component(path, word_count, &project(WorldArg::ActionHandler, &[])).unwrap_err();
    assert!(
        err.contains("the project is of world action-handler"),
        "{err}"
    );
    let err = check_component(path, b"not wasm", &project(WorldArg::Worker, &[])).unwrap_err();
    assert!(
        err.contains("built.wasm (built by componentize-js) is not a valid"),
        "{err}"
    );
}
