//! The frozen WIT contract: one folder per released version of the
//! `wfhost:plugin` package (`wit/since_vX.Y.Z/`), never changed once
//! released, each served by the host with its own bindings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wfhost_guest_artifacts as guests;
use wfhost_runtime::admission::{self, World};
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

/// Every file of every frozen version, with its SHA-256. A released version
/// never changes: published plugins were built against it. To change the
/// contract, make a new version folder (`wit/since_vX.Y.Z/`), record it in
/// `wit/CHANGELOG.md` and add its file here, its bindings module in
/// `host/runtime/src/bindings.rs` and its test plugin in
/// `PLUGIN_PER_VERSION` below.
const FROZEN: &[(&str, &str)] = &[(
    "since_v0.1.0/plugin.wit",
    "99c7eaf25dca830adb9036b8399cee6d5414901d12c95e9e33e53729c473dbea",
)];

/// A worker and an action handler built against each frozen version.
const PLUGIN_PER_VERSION: &[(&str, &[u8], &[u8])] =
    &[("0.1.0", guests::TEST_NOOP, guests::ACTIONS_CORE)];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The frozen version folders under `wit/`, by version, oldest first.
fn frozen_folders() -> BTreeMap<Vec<u64>, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(repo().join("wit")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(version) = name.strip_prefix("since_v") {
            let key = version.split('.').map(|n| n.parse().unwrap()).collect();
            out.insert(key, version.to_string());
        }
    }
    out
}

/// `dir`'s files, relative to `base`, sorted.
fn files_below(base: &Path, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_below(base, &path));
        } else {
            out.push(path.strip_prefix(base).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

fn sha256(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn frozen_versions_never_change() {
    let wit = repo().join("wit");
    let mut found = Vec::new();
    for version in frozen_folders().values() {
        found.extend(files_below(&wit, &wit.join(format!("since_v{version}"))));
    }
    let pinned: Vec<String> = FROZEN.iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(
        found, pinned,
        "the files of the frozen WIT versions differ from those pinned in this test. \
         A released version never changes (published plugins target it): put a change \
         in a new `wit/since_vX.Y.Z/` folder and pin its files here"
    );
    for (file, pinned) in FROZEN {
        assert_eq!(
            &sha256(&wit.join(file)),
            pinned,
            "wit/{file} changed. Released WIT versions are frozen: published plugins were \
             built against them. Revert the change and make a new version folder \
             (`wit/since_vX.Y.Z/`) instead"
        );
    }
}

#[test]
fn the_sdk_carries_the_newest_frozen_version() {
    let newest = frozen_folders().into_values().last().unwrap();
    let frozen = repo().join(format!("wit/since_v{newest}"));
    let sdk = repo().join("sdk/wit");
    assert_eq!(files_below(&frozen, &frozen), files_below(&sdk, &sdk));
    for file in files_below(&frozen, &frozen) {
        assert_eq!(
            std::fs::read(frozen.join(&file)).unwrap(),
            std::fs::read(sdk.join(&file)).unwrap(),
            "sdk/wit/{file} differs from wit/since_v{newest}/{file}: the SDK (vendored into \
             plugin crates by `wfhost plugin new`) must carry the newest frozen contract; copy it"
        );
    }
}

#[test]
fn the_host_serves_every_frozen_version() {
    let folders: Vec<String> = frozen_folders().into_values().collect();
    assert_eq!(admission::served_versions(), folders);
    let tested: Vec<&str> = PLUGIN_PER_VERSION.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(tested, folders, "every frozen version needs a test plugin");
}

fn runtime() -> Arc<WasmRuntime> {
    let dir = std::env::temp_dir().join(format!("wfhost-wit-tests-cache-{}", std::process::id()));
    let config = RuntimeConfig {
        cache_dir: Some(dir),
        pool_instances: 4,
        ..RuntimeConfig::default()
    };
    Arc::new(WasmRuntime::new(config).unwrap())
}

fn request(name: &str, bytes: &'static [u8], world: World) -> PluginRequest {
    PluginRequest {
        name: name.into(),
        source: PluginSource::Builtin(bytes),
        world,
        grants: Vec::new(),
        http: None,
    }
}

#[test]
fn a_plugin_built_against_each_frozen_version_loads_with_its_version() {
    let ws = tempfile::tempdir().unwrap();
    for (version, worker, handler) in PLUGIN_PER_VERSION {
        let requests = [
            request("worker", worker, World::Worker),
            request("handler", handler, World::ActionHandler),
        ];
        let set = PluginSet::load(runtime(), &requests, ws.path()).unwrap();
        for load in set.loads() {
            assert_eq!(&load.wit_version, version, "{}", load.name);
        }
    }
}

#[test]
fn a_component_targeting_an_unknown_version_is_refused_naming_both() {
    let bytes = guests::patched(
        guests::TEST_NOOP,
        "wfhost:plugin/block-worker@0.1.0",
        "wfhost:plugin/block-worker@9.9.9",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("future.wasm");
    std::fs::write(&file, bytes).unwrap();
    let requests = [PluginRequest {
        name: "future".into(),
        source: PluginSource::File(file),
        world: World::Worker,
        grants: Vec::new(),
        http: None,
    }];
    let err = PluginSet::load(runtime(), &requests, dir.path())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("targets wfhost:plugin@9.9.9")
            && err.contains("this host serves wfhost:plugin 0.1.0"),
        "{err}"
    );
}
