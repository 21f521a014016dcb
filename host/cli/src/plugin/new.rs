//! `wfhost plugin new`: a plugin crate that builds and tests at once, with
//! the SDK vendored so that it builds outside this repository.

use std::path::{Path, PathBuf};

use super::lang::Lang;
use crate::exit;
use crate::report_error;

/// Create a plugin crate.
#[derive(clap::Args)]
pub struct NewArgs {
    /// The plugin's name: its crate name and the name workflows use
    /// (lowercase letters, digits, `-` and `_`, starting with a letter).
    pub name: String,
    /// What the plugin is: a block worker or an action handler.
    #[arg(long, value_enum, default_value = "worker")]
    pub world: WorldArg,
    /// Where to create the crate (default: ./NAME); must not exist or be
    /// empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The language: rust (a crate), python (componentize-py) or
    /// javascript (jco / componentize-js).
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum WorldArg {
    Worker,
    ActionHandler,
}

impl WorldArg {
    pub fn name(self) -> &'static str {
        match self {
            WorldArg::Worker => "worker",
            WorldArg::ActionHandler => "action-handler",
        }
    }
}

/// The SDK's files, vendored into every new crate (`vendor/wfhost-sdk/`).
const SDK_FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../../../sdk/Cargo.toml")),
    ("src/lib.rs", include_str!("../../../../sdk/src/lib.rs")),
    (
        "src/context.rs",
        include_str!("../../../../sdk/src/context.rs"),
    ),
    ("src/log.rs", include_str!("../../../../sdk/src/log.rs")),
    ("src/http.rs", include_str!("../../../../sdk/src/http.rs")),
    (
        "wit/plugin.wit",
        include_str!("../../../../sdk/wit/plugin.wit"),
    ),
];

/// The WIT package version the vendored SDK targets.
const WIT_VERSION: &str = "0.1.0";

pub fn new(args: NewArgs) -> u8 {
    match create(&args) {
        Ok(dir) => {
            println!("{}", args.lang.next_steps(&args.name, args.world, &dir));
            exit::SUCCESS
        }
        Err(message) => {
            report_error(message);
            exit::BAD_INPUT
        }
    }
}

fn create(args: &NewArgs) -> Result<PathBuf, String> {
    check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    check_target(&dir)?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Everything is written beside the target, then renamed into place: a
    // failure leaves nothing half-written.
    let staging = tempfile::Builder::new()
        .prefix(".wfhost-plugin-new-")
        .tempdir_in(&parent)
        .map_err(|e| format!("{}: cannot create a directory here: {e}", parent.display()))?;
    for (path, content) in args.lang.files(&args.name, args.world) {
        write(staging.path(), &path, &content)?;
    }
    std::fs::rename(staging.path(), &dir)
        .map_err(|e| format!("{}: cannot create the crate: {e}", dir.display()))?;
    // Renamed away: nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(dir)
}

/// A crate name Cargo accepts and a plugin name workflows can use.
fn check_name(name: &str) -> Result<(), String> {
    const RESERVED: &[&str] = &[
        "std",
        "core",
        "alloc",
        "proc_macro",
        "test",
        "self",
        "super",
        "crate",
        "wfhost-sdk",
        "wfhost_sdk",
    ];
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c));
    if !starts_well || !rest_ok || name.len() > 64 {
        return Err(format!(
            "`{name}` is not a valid plugin name: use lowercase letters, digits, `-` and `_`, \
             starting with a letter, at most 64 characters (e.g. `word-count`)"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!("`{name}` is a reserved crate name; choose another"));
    }
    Ok(())
}

/// The target must not exist, or be an empty directory.
fn check_target(dir: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", dir.display())),
        Ok(meta) if !meta.is_dir() => Err(format!(
            "{} exists and is not a directory; choose another --dir",
            dir.display()
        )),
        Ok(_) => match std::fs::read_dir(dir).map(|mut d| d.next().is_none()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!(
                "{} already exists and is not empty; choose another --dir or name",
                dir.display()
            )),
            Err(e) => Err(format!("{}: {e}", dir.display())),
        },
    }
}

/// A Rust plugin crate's files, relative path → content.
pub fn rust_files(name: &str, world: WorldArg) -> Vec<(String, String)> {
    let component = format!("target/wfhost/{}.wasm", name.replace('-', "_"));
    let (lib, workflow, signals, description, call) = match world {
        WorldArg::Worker => (
            include_str!("template/worker.rs"),
            include_str!("template/worker.json"),
            r#"["SIGNAL:SUCCESS", "SIGNAL:EMPTY"]"#,
            "A wfhost block worker",
            format!("wfhost plugin call {component} --block-config '{{\"greeting\": \"hi\"}}'"),
        ),
        WorldArg::ActionHandler => (
            include_str!("template/action_handler.rs"),
            include_str!("template/action_handler.json"),
            "[]",
            "A wfhost action handler",
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
    };
    let mut out = vec![
        (
            "Cargo.toml".to_string(),
            fill(include_str!("template/Cargo.toml.in")),
        ),
        (
            ".gitignore".into(),
            include_str!("template/gitignore").into(),
        ),
        (
            ".cargo/config.toml".into(),
            include_str!("template/cargo-config.toml").into(),
        ),
        ("README.md".into(), fill(include_str!("template/README.md"))),
        (
            "wfhost-plugin.toml".into(),
            fill(include_str!("template/wfhost-plugin.toml")),
        ),
        ("workflow.json".into(), fill(workflow)),
        ("src/lib.rs".into(), fill(lib)),
    ];
    for (path, content) in SDK_FILES {
        out.push((format!("vendor/wfhost-sdk/{path}"), content.to_string()));
    }
    out
}

fn write(root: &Path, path: &str, content: &str) -> Result<(), String> {
    let file = root.join(path);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&file, content).map_err(|e| format!("{}: {e}", file.display()))
}

pub fn rust_next_steps(name: &str, world: WorldArg, dir: &Path) -> String {
    let shown = dir.display();
    format!(
        "created {} plugin `{}` in {shown}\n\
         next:\n  cd {shown}\n  cargo test              # its logic, natively\n  \
         wfhost plugin build     # the component\n  \
         wfhost plugin call ...  # see README.md\n  \
         wfhost run workflow.json -w WORKSPACE",
        world.name(),
        name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `sdk/` (but the build output, and the other
    /// languages' SDKs in `sdk/<language>/`) is vendored: a file the SDK
    /// gains must be added to [`SDK_FILES`].
    #[test]
    fn every_sdk_file_is_vendored() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk");
        let other_languages = [sdk.join("python"), sdk.join("javascript")];
        let (found, vendored) = super::super::lang::sdk_files_and_vendored(
            "",
            |p| other_languages.iter().any(|o| o == p),
            SDK_FILES,
        );
        assert_eq!(found, vendored);
    }

    #[test]
    fn the_vendored_wit_is_the_version_it_says() {
        let wit = SDK_FILES
            .iter()
            .find(|(p, _)| *p == "wit/plugin.wit")
            .unwrap()
            .1;
        assert!(wit.contains(&format!("package wfhost:plugin@{WIT_VERSION};")));
    }

    #[test]
    fn names_are_checked() {
        for good in ["word-count", "a", "x_1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1abc", "Word", "a b", "a/b", "std", "wfhost-sdk", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_placeholder_is_left() {
        for world in [WorldArg::Worker, WorldArg::ActionHandler] {
            for (path, content) in rust_files("demo", world) {
                assert!(!content.contains("{{"), "{path}: {content}");
            }
        }
    }
}
