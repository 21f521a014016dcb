//! Plugin packages against a real OCI registry (Debian's
//! `docker-registry` on loopback, one per test): pack, sign, push,
//! install, run, and every refusal leaving nothing installed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::json;

use super::{stderr, stdout, wfhost, workspace_in};

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A `docker-registry` serving a fresh storage directory on a free
/// loopback port; stopped when dropped. (The language suites publish
/// through it too.)
pub(super) struct Registry {
    child: Child,
    addr: String,
    storage: PathBuf,
}

impl Registry {
    /// Start one, or `None` (skip) when the registry is not installed;
    /// fails instead under `WFHOST_REQUIRE_SERVICES=1`.
    pub(super) fn start(scratch: &Path) -> Option<Registry> {
        Registry::start_with(scratch, "")
    }

    /// One that wants `user` / `s3cret` (HTTP basic auth, htpasswd).
    fn start_with_login(scratch: &Path, user: &str) -> Option<Registry> {
        // bcrypt (cost 4) of `s3cret`.
        let line = format!("{user}:$2b$04$vzBX5t//9ufZonPszA6rgOQFPom4gvvtCutQxZyyiX6EyX4FNeMF2\n");
        let htpasswd = scratch.join("htpasswd");
        std::fs::write(&htpasswd, line).unwrap();
        let auth = format!(
            "auth:\n  htpasswd:\n    realm: wfhost-test\n    path: {}\n",
            htpasswd.display()
        );
        Registry::start_with(scratch, &auth)
    }

    fn start_with(scratch: &Path, extra_config: &str) -> Option<Registry> {
        if !Path::new(REGISTRY_BIN).is_file() {
            assert!(
                std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "docker-registry is missing (WFHOST_REQUIRE_SERVICES=1)"
            );
            eprintln!("skipping: docker-registry missing; run `sudo scripts/services.sh registry`");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let storage = scratch.join("registry");
        let config = scratch.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n{extra_config}",
                storage.display()
            ),
        )
        .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .args(["serve", config.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        // Dropped (so killed and waited for) on every path.
        let registry = Registry {
            child,
            addr,
            storage,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(&registry.addr).is_ok() {
                return Some(registry);
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("docker-registry did not listen on {}", registry.addr);
    }

    pub(super) fn reference(&self, repository: &str, tag: &str) -> String {
        format!("oci://{}/{repository}:{tag}", self.addr)
    }

    /// The registry's stored copy of blob `digest`.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A user of wfhost (home, cache) and a project directory in `scratch`.
pub(super) struct User {
    pub(super) scratch: PathBuf,
    pub(super) project: PathBuf,
}

impl User {
    pub(super) fn new(scratch: &Path) -> User {
        let project = scratch.join("project");
        std::fs::create_dir_all(&project).unwrap();
        User {
            scratch: scratch.to_path_buf(),
            project,
        }
    }

    /// `wfhost ARGS` in the project directory: (exit code, stdout, stderr).
    fn wfhost(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = super::command(&self.scratch)
            .current_dir(&self.project)
            .args(args)
            .env("DOCKER_CONFIG", self.scratch.join("docker-config"))
            .output()
            .unwrap();
        (out.status.code(), stdout(&out), stderr(&out))
    }

    pub(super) fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.wfhost(args);
        assert_eq!(code, Some(0), "wfhost {args:?}\n{out}\n{err}");
        out
    }

    /// Refused with exit 2, and the message says `says`.
    fn refused(&self, args: &[&str], says: &str) -> String {
        let (code, out, err) = self.wfhost(args);
        assert_eq!(
            code,
            Some(2),
            "wfhost {args:?} should be refused\n{out}\n{err}"
        );
        assert!(
            err.contains(says),
            "wfhost {args:?}: expected `{says}` in:\n{err}"
        );
        err
    }

    fn lock(&self) -> Option<String> {
        std::fs::read_to_string(self.project.join("wfhost.lock")).ok()
    }

    fn installed(&self) -> Vec<serde_json::Value> {
        self.ok(&["plugin", "ls", "--json"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Nothing installed: no package record, no lock, no blob.
    pub(super) fn assert_nothing_installed(&self) {
        assert!(self.installed().is_empty(), "{:?}", self.installed());
        assert_eq!(self.lock(), None);
        assert!(!self.scratch.join("home/plugins/blobs").exists());
    }
}

/// A publisher's plugin source: `wfhost-plugin.toml` beside `component`.
pub(super) fn plugin_source(
    dir: &Path,
    name: &str,
    component: &[u8],
    capabilities: &[&str],
    description: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("plugin.wasm"), component).unwrap();
    let signals = wfhost_distribution::component::inspect(component)
        .unwrap()
        .signals;
    let toml = format!(
        "name = \"{name}\"\nversion = \"1.0.0\"\nworld = \"worker\"\ndescription = \"{description}\"\nlicense = \"Apache-2.0\"\ncapabilities = {}\nsignals = {}\ncomponent = \"plugin.wasm\"\n",
        json!(capabilities),
        json!(signals)
    );
    std::fs::write(dir.join("wfhost-plugin.toml"), toml).unwrap();
    dir.to_path_buf()
}

/// Pack `source` into `out`; returns the package manifest's digest.
pub(super) fn pack(publisher: &User, source: &Path, out: &Path) -> String {
    publisher.ok(&[
        "plugin",
        "pack",
        source.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

fn keygen(user: &User, name: &str) -> PathBuf {
    let key = user.scratch.join(format!("{name}.key"));
    user.ok(&["plugin", "keygen", "--out", key.to_str().unwrap()]);
    key
}

/// A workflow in the project that runs plugin `wc` from `reference`.
fn workflow(user: &User, file: &str, reference: &str, grants: &[&str]) -> PathBuf {
    let path = user.project.join(file);
    let wf = json!({
        "id": "from-a-package",
        "plugins": {"wc": {"ref": reference, "grants": grants}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "count", "blocks": {"count": {
            "worker": "wc",
            "config": {"dirs": ["docs"]},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&wf).unwrap()).unwrap();
    path
}

#[test]
fn a_signed_package_goes_from_pack_to_a_run_and_packing_is_reproducible() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(registry) = Registry::start(scratch.path()) else {
        return;
    };
    let publisher = User::new(&scratch.path().join("publisher"));
    let source = plugin_source(
        &publisher.project.join("wc"),
        "word-count",
        wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
        &[],
        "Counts words",
    );
    let layout = publisher.project.join("pkg");
    let digest = pack(&publisher, &source, &layout);
    assert_eq!(
        pack(&publisher, &source, &publisher.project.join("again")),
        digest,
        "same input, same digest"
    );

    // The CNCF wasm layout, with the plugin manifest as an annotation.
    let blob = |d: &str| {
        std::fs::read(
            layout
                .join("blobs/sha256")
                .join(d.strip_prefix("sha256:").unwrap()),
        )
        .unwrap()
    };
    let manifest: serde_json::Value = serde_json::from_slice(&blob(&digest)).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let plugin: serde_json::Value = serde_json::from_str(
        manifest["annotations"]["dev.wfhost.plugin.manifest"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["name"], "word-count");
    assert_eq!(plugin["world"], "worker");
    assert_eq!(plugin["wit"], "0.1.0");
    let config: serde_json::Value =
        serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    assert_eq!(
        (config["architecture"].as_str(), config["os"].as_str()),
        (Some("wasm"), Some("wasip2"))
    );
    assert_eq!(config["layerDigests"][0], manifest["layers"][0]["digest"]);

    let key = keygen(&publisher, "publisher");
    publisher.ok(&[
        "plugin",
        "sign",
        layout.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    let reference = registry.reference("acme/word-count", "1.0.0");
    let pushed = publisher.ok(&["plugin", "push", layout.to_str().unwrap(), &reference]);
    assert!(pushed.contains(&digest), "{pushed}");

    let user = User::new(&scratch.path().join("user"));
    user.ok(&[
        "plugin",
        "trust",
        key.with_extension("pub").to_str().unwrap(),
    ]);
    let installed = user.ok(&["plugin", "install", &reference]);
    assert!(
        installed.contains("requests no capabilities") && installed.contains("(trusted)"),
        "{installed}"
    );
    let lock = user.lock().unwrap();
    assert!(
        lock.contains(&format!("manifest = \"{digest}\"")) && lock.contains("signer = \"ed25519:"),
        "{lock}"
    );
    assert_eq!(user.installed()[0]["plugin"]["name"], "word-count");

    let ws = workspace_in(&user.scratch);
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(ws.join("docs/a.md"), "one two three").unwrap();
    let wf = workflow(&user, "workflow.json", &reference, &[]);
    let out = wfhost(
        &["run", wf.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        &user.scratch,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // The same package by digest; a digest the lock does not pin is refused.
    let by_digest = format!("oci://{}/acme/word-count@{digest}", registry.addr);
    user.ok(&["plugin", "install", &by_digest]);
    let wrong = format!("{reference}@sha256:{}", "0".repeat(64));
    std::fs::write(
        user.project.join("wfhost.lock"),
        lock.replace(&reference, &wrong),
    )
    .unwrap();
    let wf = workflow(&user, "pinned.json", &wrong, &[]);
    user.refused(
        &["run", wf.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        "the digests must match",
    );

    // A fresh clone of the project installs what its lock pins.
    std::fs::write(user.project.join("wfhost.lock"), &lock).unwrap();
    let teammate = User {
        scratch: scratch.path().join("teammate"),
        project: user.project.clone(),
    };
    teammate.ok(&[
        "plugin",
        "trust",
        key.with_extension("pub").to_str().unwrap(),
    ]);
    let out = teammate.ok(&["plugin", "install"]);
    assert!(out.contains("installed word-count 1.0.0"), "{out}");
    assert_eq!(
        teammate.lock().unwrap(),
        lock,
        "installing what the lock pins leaves it as it was"
    );
}

/// A publisher with a key, a registry, and a user who trusts the key.
struct Setup {
    _scratch: tempfile::TempDir,
    registry: Registry,
    publisher: User,
    user: User,
    key: PathBuf,
}

impl Setup {
    fn new() -> Option<Setup> {
        let scratch = tempfile::tempdir().unwrap();
        let registry = Registry::start(scratch.path())?;
        let publisher = User::new(&scratch.path().join("publisher"));
        let user = User::new(&scratch.path().join("user"));
        let key = keygen(&publisher, "publisher");
        user.ok(&[
            "plugin",
            "trust",
            key.with_extension("pub").to_str().unwrap(),
        ]);
        Some(Setup {
            _scratch: scratch,
            registry,
            publisher,
            user,
            key,
        })
    }

    /// Pack (and sign with `key` when given) a package and push it to
    /// `repository:1.0.0`; returns its reference and manifest digest.
    fn publish(
        &self,
        repository: &str,
        component: &[u8],
        caps: &[&str],
        description: &str,
        key: Option<&Path>,
    ) -> (String, String) {
        let dir = self
            .publisher
            .project
            .join(format!("{repository}-{description}").replace(['/', ' '], "-"));
        let source = plugin_source(&dir.join("src"), "probe", component, caps, description);
        let layout = dir.join("pkg");
        let digest = pack(&self.publisher, &source, &layout);
        if let Some(key) = key {
            self.publisher.ok(&[
                "plugin",
                "sign",
                layout.to_str().unwrap(),
                "--key",
                key.to_str().unwrap(),
            ]);
        }
        let reference = self.registry.reference(repository, "1.0.0");
        self.publisher
            .ok(&["plugin", "push", layout.to_str().unwrap(), &reference]);
        (reference, digest)
    }
}

#[test]
fn unsigned_and_wrongly_signed_packages_are_refused_unless_the_user_accepts_unsigned() {
    let Some(s) = Setup::new() else { return };
    let (unsigned, _) = s.publish(
        "acme/unsigned",
        wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
        &[],
        "plain",
        None,
    );
    s.user
        .refused(&["plugin", "install", &unsigned], "it is not signed");
    s.user
        .refused(&["plugin", "pull", &unsigned], "it is not signed");
    let stranger = keygen(&s.publisher, "stranger");
    let (wrong_key, _) = s.publish(
        "acme/stranger",
        wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
        &[],
        "plain",
        Some(&stranger),
    );
    s.user.refused(
        &["plugin", "install", &wrong_key],
        "signed only by keys you do not trust",
    );
    s.user.assert_nothing_installed();

    // Accepting an unsigned package is a choice the lock records.
    let out = s
        .user
        .ok(&["plugin", "install", &unsigned, "--allow-unsigned"]);
    assert!(out.contains("NOT signed by a key you trust"), "{out}");
    assert!(s.user.lock().unwrap().contains("signer = \"unsigned\""));
}

#[test]
fn altered_content_a_moved_tag_and_a_registry_that_is_down_are_refused() {
    let Some(s) = Setup::new() else { return };
    let component = wfhost_guest_artifacts::EXAMPLE_WORD_COUNT;
    let (reference, first) = s.publish("acme/wc", component, &[], "first", Some(&s.key));

    // The registry serves a layer whose bytes were changed.
    let layer = format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(component))
    );
    let stored = s.registry.blob_file(&layer);
    let original = std::fs::read(&stored).unwrap();
    let mut tampered = original.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&stored, &tampered).unwrap();
    s.user.refused(
        &["plugin", "install", &reference],
        "the package was altered",
    );
    s.user.assert_nothing_installed();
    std::fs::write(&stored, &original).unwrap();

    // Installed and pinned; then the publisher moves the tag.
    s.user.ok(&["plugin", "install", &reference]);
    let pinned = s.user.lock().unwrap();
    let (_, second) = s.publish("acme/wc", component, &[], "second", Some(&s.key));
    assert_ne!(first, second);
    s.user
        .refused(&["plugin", "install", &reference], "the tag moved");
    assert_eq!(
        s.user.lock().unwrap(),
        pinned,
        "a refused install leaves the lock as it was"
    );
    let out = s.user.ok(&["plugin", "update", &reference]);
    assert!(out.contains(&format!("{first} -> {second}")), "{out}");
    assert!(s.user.lock().unwrap().contains(&second));

    // The installed component altered on disk: the run refuses it.
    let ws = workspace_in(&s.user.scratch);
    let wf = workflow(&s.user, "workflow.json", &reference, &[]);
    let installed = s
        .user
        .scratch
        .join("home/plugins/blobs/sha256")
        .join(layer.strip_prefix("sha256:").unwrap());
    std::fs::write(&installed, &tampered).unwrap();
    s.user.refused(
        &["run", wf.to_str().unwrap(), "-w", ws.to_str().unwrap()],
        "it was altered",
    );

    // A registry that is down.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!("oci://127.0.0.1:{port}/acme/wc:1.0.0");
    let err = s.user.refused(
        &["plugin", "install", &down],
        "cannot fetch oci://127.0.0.1",
    );
    assert!(err.to_lowercase().contains("connect"), "{err}");
}

#[test]
fn capabilities_must_be_declared_truthfully_and_allowed_by_the_user() {
    let Some(s) = Setup::new() else { return };
    let exec = wfhost_guest_artifacts::EXEC;
    // Packing refuses a manifest that hides the component's imports.
    let dir = s.publisher.project.join("liar");
    let source = plugin_source(&dir, "probe", exec, &[], "lies");
    let (code, _, err) = s.publisher.wfhost(&[
        "plugin",
        "pack",
        source.to_str().unwrap(),
        "--out",
        dir.join("pkg").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("declares []") && err.contains("need [exec]"),
        "{err}"
    );

    // A component built against a contract this wfhost does not serve.
    let future = wfhost_guest_artifacts::patched(
        wfhost_guest_artifacts::TEST_NOOP,
        "wfhost:plugin/block-worker@0.1.0",
        "wfhost:plugin/block-worker@9.9.9",
    );
    let source = plugin_source(
        &s.publisher.project.join("future"),
        "future",
        &future,
        &[],
        "future",
    );
    let (code, _, err) = s
        .publisher
        .wfhost(&["plugin", "pack", source.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("targets wfhost:plugin@9.9.9, but this wfhost serves wfhost:plugin 0.1.0"),
        "{err}"
    );

    // A package whose manifest was edited after packing (and re-signed) is
    // refused at install.
    let (reference, _) = s.publish("acme/exec", exec, &["exec"], "honest", Some(&s.key));
    let layout = s.publisher.project.join("acme-exec-honest/pkg");
    let lying = lie_about_capabilities(&layout);
    s.publisher.ok(&[
        "plugin",
        "sign",
        lying.to_str().unwrap(),
        "--key",
        s.key.to_str().unwrap(),
    ]);
    let liar_ref = s.registry.reference("acme/liar", "1.0.0");
    s.publisher
        .ok(&["plugin", "push", lying.to_str().unwrap(), &liar_ref]);
    s.user.refused(
        &["plugin", "install", &liar_ref, "--yes"],
        "does not match its component",
    );
    s.user.assert_nothing_installed();

    // Requested capabilities are shown; without an answer nothing installs.
    let err = s.user.refused(
        &["plugin", "install", &reference],
        "requests capabilities [exec]",
    );
    assert!(err.contains("--allow exec"), "{err}");
    s.user.refused(
        &["plugin", "install", &reference, "--allow", "container"],
        "does not request it",
    );
    s.user.assert_nothing_installed();

    // Installed with nothing allowed: a workflow granting exec is refused,
    // naming both sides; once allowed it loads.
    let out = s
        .user
        .ok(&["plugin", "install", &reference, "--allow", "none"]);
    assert!(out.contains("requests `exec`"), "{out}");
    let granted = workflow(&s.user, "granted.json", &reference, &["exec"]);
    let err = s.user.refused(
        &["validate", granted.to_str().unwrap()],
        "granted `exec` by the workflow",
    );
    assert!(
        err.contains("declares [exec] and you allowed [none]"),
        "{err}"
    );
    s.user
        .ok(&["plugin", "install", &reference, "--allow", "exec"]);
    s.user.ok(&["validate", granted.to_str().unwrap()]);
    let beyond = workflow(&s.user, "beyond.json", &reference, &["exec", "container"]);
    let err = s.user.refused(
        &["validate", beyond.to_str().unwrap()],
        "granted `container`",
    );
    assert!(
        err.contains("declares [exec] and you allowed [exec]"),
        "{err}"
    );
}

/// A copy of the layout whose plugin manifest claims no capabilities,
/// with its manifest rewritten to match (as a hostile publisher would).
fn lie_about_capabilities(layout: &Path) -> PathBuf {
    let lying = layout.with_file_name("lying");
    let blobs = lying.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    for entry in std::fs::read_dir(layout.join("blobs/sha256")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), blobs.join(entry.file_name())).unwrap();
    }
    std::fs::write(
        lying.join("oci-layout"),
        std::fs::read(layout.join("oci-layout")).unwrap(),
    )
    .unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let digest = index["manifests"][0]["digest"].as_str().unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(blobs.join(digest.strip_prefix("sha256:").unwrap())).unwrap(),
    )
    .unwrap();
    let annotation = "dev.wfhost.plugin.manifest";
    let mut plugin: serde_json::Value =
        serde_json::from_str(manifest["annotations"][annotation].as_str().unwrap()).unwrap();
    plugin["capabilities"] = json!([]);
    manifest["annotations"][annotation] = json!(serde_json::to_string(&plugin).unwrap());
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let hex = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    std::fs::write(blobs.join(&hex), &bytes).unwrap();
    let index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{hex}"), "size": bytes.len()}
    ]});
    std::fs::write(
        lying.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    lying
}

#[test]
fn registry_credentials_come_from_the_docker_config() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(registry) = Registry::start_with_login(scratch.path(), "wf") else {
        return;
    };
    let publisher = User::new(&scratch.path().join("publisher"));
    let source = plugin_source(
        &publisher.project.join("wc"),
        "word-count",
        wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
        &[],
        "wc",
    );
    let layout = publisher.project.join("pkg");
    pack(&publisher, &source, &layout);
    let reference = registry.reference("acme/word-count", "1.0.0");
    let login = |user: &User, password: &str| {
        let dir = user.scratch.join("docker-config");
        std::fs::create_dir_all(&dir).unwrap();
        let auth = base64_encode(format!("wf:{password}").as_bytes());
        let config = json!({"auths": {registry.addr.clone(): {"auth": auth}}});
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    };

    let err = publisher.refused(
        &["plugin", "push", layout.to_str().unwrap(), &reference],
        "cannot",
    );
    assert!(
        err.contains("the registry refused the credentials"),
        "{err}"
    );
    login(&publisher, "wrong");
    let err = publisher.refused(
        &["plugin", "push", layout.to_str().unwrap(), &reference],
        "cannot",
    );
    assert!(
        err.contains("the registry refused the credentials"),
        "{err}"
    );
    login(&publisher, "s3cret");
    publisher.ok(&["plugin", "push", layout.to_str().unwrap(), &reference]);

    let user = User::new(&scratch.path().join("user"));
    let err = user.refused(
        &["plugin", "install", &reference, "--allow-unsigned"],
        "cannot fetch",
    );
    assert!(
        err.contains("the registry refused the credentials"),
        "{err}"
    );
    user.assert_nothing_installed();
    login(&user, "s3cret");
    user.ok(&["plugin", "install", &reference, "--allow-unsigned"]);
}

/// Standard base64 (the Docker config's `auth`).
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
