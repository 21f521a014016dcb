//! Plugins written in JavaScript: an ES module and the JavaScript SDK
//! (`sdk/javascript/`, vendored as `wfhost-sdk/`), made a component by
//! componentize-js (StarlingMonkey, a SpiderMonkey build for WASI), which
//! `plugin build` installs once into a cache with npm.
//!
//! The component's entry is generated at each build
//! (`target/wfhost/js/entry.js`): it imports the host interfaces the
//! plugin may use (`wfhost:plugin/log` and the capabilities its
//! `wfhost-plugin.toml` lists), connects them to the SDK, and re-exports
//! the plugin's module (`package.json`'s `main`). The plugin's own code
//! never imports `wfhost:plugin/*`, so it runs natively under `node --test`.
//! It is built against a world of exactly those imports: componentize-js
//! imports every interface of the world it is given, and `worker`'s
//! capabilities would then need grants the plugin never uses.
//!
//! There is one build: `--release` changes nothing (the engine is the same
//! optimized StarlingMonkey either way).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::plugin::new::WorldArg;

mod toolchain;

pub use toolchain::{COMPONENTIZE_JS_VERSION, JCO_VERSION};

/// The SDK's files, vendored into every new project (`wfhost-sdk/`).
const SDK_FILES: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../../../../sdk/javascript/README.md"),
    ),
    (
        "context.js",
        include_str!("../../../../../sdk/javascript/context.js"),
    ),
    (
        "host.js",
        include_str!("../../../../../sdk/javascript/host.js"),
    ),
    (
        "index.d.ts",
        include_str!("../../../../../sdk/javascript/index.d.ts"),
    ),
    (
        "index.js",
        include_str!("../../../../../sdk/javascript/index.js"),
    ),
    (
        "log.js",
        include_str!("../../../../../sdk/javascript/log.js"),
    ),
    (
        "plugin.js",
        include_str!("../../../../../sdk/javascript/plugin.js"),
    ),
    (
        "test/sdk.test.js",
        include_str!("../../../../../sdk/javascript/test/sdk.test.js"),
    ),
    (
        "testing.js",
        include_str!("../../../../../sdk/javascript/testing.js"),
    ),
    (
        "types.js",
        include_str!("../../../../../sdk/javascript/types.js"),
    ),
];

/// The contract, shared with the Rust SDK.
const WIT: &str = include_str!("../../../../../sdk/wit/plugin.wit");

/// Where the SDK goes in a project.
const SDK_DIR: &str = "wfhost-sdk";

/// Where a build writes the entry and the world, in the project.
const BUILD_DIR: &str = "target/wfhost/js";

/// A JavaScript plugin project's files, relative path → content.
pub fn files(name: &str, world: WorldArg) -> Vec<(String, String)> {
    let component = format!("target/wfhost/{name}.wasm");
    let (source, test, workflow, signals, description, call) = match world {
        WorldArg::Worker => (
            include_str!("javascript/worker.js"),
            include_str!("javascript/worker.test.js"),
            include_str!("../template/worker.json"),
            r#"["SIGNAL:SUCCESS", "SIGNAL:EMPTY"]"#,
            "A wfhost block worker",
            format!("wfhost plugin call {component} --block-config '{{\"greeting\": \"hi\"}}'"),
        ),
        WorldArg::ActionHandler => (
            include_str!("javascript/action_handler.js"),
            include_str!("javascript/action_handler.test.js"),
            include_str!("../template/action_handler.json"),
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
            .replace("{{wit_version}}", &wit_version(WIT).unwrap_or_default())
            .replace("{{jco_version}}", JCO_VERSION)
            .replace("{{componentize_js_version}}", COMPONENTIZE_JS_VERSION)
    };
    let mut out = vec![
        (
            "wfhost-plugin.toml".to_string(),
            fill(include_str!("javascript/wfhost-plugin.toml")),
        ),
        (
            "package.json".into(),
            fill(include_str!("javascript/package.json")),
        ),
        (
            "jsconfig.json".into(),
            include_str!("javascript/jsconfig.json").into(),
        ),
        (
            ".gitignore".into(),
            include_str!("javascript/gitignore").into(),
        ),
        (
            "README.md".into(),
            fill(include_str!("javascript/README.md")),
        ),
        ("workflow.json".into(), fill(workflow)),
        ("src/plugin.js".into(), fill(source)),
        ("test/plugin.test.js".into(), fill(test)),
        (format!("{SDK_DIR}/wit/plugin.wit"), WIT.into()),
    ];
    for (path, content) in SDK_FILES {
        out.push((format!("{SDK_DIR}/{path}"), content.to_string()));
    }
    out
}

pub fn next_steps(name: &str, world: WorldArg, dir: &Path) -> String {
    if let Err(missing) = toolchain::find_node() {
        eprintln!("warning: {missing}");
    }
    let shown = dir.display();
    format!(
        "created {} plugin `{name}` (javascript) in {shown}\n\
         next:\n  cd {shown}\n  node --test             # its logic, natively\n  \
         wfhost plugin build     # the component\n  \
         wfhost plugin call ...  # see README.md\n  \
         wfhost run workflow.json -w WORKSPACE",
        world.name(),
    )
}

/// Build the project in `dir`: the component, written to the path its
/// `wfhost-plugin.toml` names.
pub fn build(dir: &Path, _release: bool) -> Result<PathBuf, String> {
    let project = Project::read(dir)?;
    let node = toolchain::find_node()?;
    let tools = toolchain::ensure(&node)?;
    let signals = declared_signals(&node, &project)?;
    let built = componentize(&node, &tools, &project)?;
    let mut bytes = std::fs::read(&built).map_err(|e| format!("{}: {e}", built.display()))?;
    if let Some(signals) = signals {
        append_signals(&mut bytes, &signals);
    }
    check_component(&built, &bytes, &project)?;
    write_atomically(&project.component, &bytes)?;
    Ok(project.component)
}

/// What a build needs to know about the project.
struct Project {
    dir: PathBuf,
    world: WorldArg,
    /// The plugin's module, relative to `dir`, with `/` separators.
    main: String,
    capabilities: Vec<String>,
    component: PathBuf,
    wit_version: String,
}

impl Project {
    fn read(dir: &Path) -> Result<Project, String> {
        let toml = dir.join(wfhost_distribution::manifest::SOURCE_FILE);
        let source = wfhost_distribution::manifest::ManifestSource::read(&toml)?;
        let world = match source.world.as_str() {
            "worker" => WorldArg::Worker,
            "action-handler" => WorldArg::ActionHandler,
            other => {
                return Err(format!(
                    "{}: `world` \"{other}\" is not worker or action-handler",
                    toml.display()
                ));
            }
        };
        check_capabilities(&toml, world, &source.capabilities)?;
        let wit_file = dir.join(SDK_DIR).join("wit/plugin.wit");
        let wit = std::fs::read_to_string(&wit_file)
            .map_err(|e| format!("{}: {e} (the vendored SDK's WIT)", wit_file.display()))?;
        let wit_version = wit_version(&wit).ok_or_else(|| {
            format!(
                "{}: no `package wfhost:plugin@VERSION;` line",
                wit_file.display()
            )
        })?;
        Ok(Project {
            dir: dir.to_path_buf(),
            world,
            main: main_module(dir)?,
            capabilities: source.capabilities,
            component: dir.join(&source.component),
            wit_version,
        })
    }

    /// The name of the export the world wants from the plugin's module.
    fn export(&self) -> &'static str {
        match self.world {
            WorldArg::Worker => "blockWorker",
            WorldArg::ActionHandler => "actionInterpreter",
        }
    }

    /// The `wfhost:plugin` interfaces it imports: its capabilities but
    /// `http`, which is `wasi:http` (JavaScript's `fetch`).
    fn interfaces(&self) -> impl Iterator<Item = &str> {
        self.capabilities
            .iter()
            .map(String::as_str)
            .filter(|c| *c != "http")
    }

    /// The StarlingMonkey features left out: incoming requests always,
    /// `fetch` unless the plugin lists `http`.
    fn disabled_features(&self) -> &'static [&'static str] {
        if self.capabilities.iter().any(|c| c == "http") {
            &["fetch-event"]
        } else {
            &["http", "fetch-event"]
        }
    }

    /// Where the generated entry and world go.
    fn build_dir(&self) -> PathBuf {
        self.dir.join(BUILD_DIR)
    }
}

/// The worker world's capabilities, each one the host knows; an action
/// handler has none.
fn check_capabilities(toml: &Path, world: WorldArg, capabilities: &[String]) -> Result<(), String> {
    let known = ["exec", "container", "slurm", "agent", "http"];
    for cap in capabilities {
        if !known.contains(&cap.as_str()) {
            return Err(format!(
                "{}: capability \"{cap}\" is not one of {}",
                toml.display(),
                known.join(", ")
            ));
        }
        if world == WorldArg::ActionHandler {
            return Err(format!(
                "{}: an action handler imports no capability (\"{cap}\")",
                toml.display()
            ));
        }
    }
    Ok(())
}

/// `package.json`'s `main`: a relative path inside the project.
fn main_module(dir: &Path) -> Result<String, String> {
    let file = dir.join("package.json");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let main = json["main"].as_str().ok_or_else(|| {
        format!(
            "{}: no `main` (the plugin's module, e.g. \"src/plugin.js\")",
            file.display()
        )
    })?;
    let path = Path::new(main);
    let inside = path.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    if !inside || !dir.join(path).is_file() {
        return Err(format!(
            "{}: `main` \"{main}\" is not a file inside the project",
            file.display()
        ));
    }
    Ok(main.trim_start_matches("./").replace('\\', "/"))
}

/// The version of `package wfhost:plugin@VERSION;` in `wit`.
fn wit_version(wit: &str) -> Option<String> {
    wit.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("package wfhost:plugin@")?;
        Some(rest.strip_suffix(';')?.to_string())
    })
}

/// The `signals` of the plugin's `defineWorker`, read by importing its
/// module with node (as its tests do); `None` when it declares none.
fn declared_signals(
    node: &toolchain::Node,
    project: &Project,
) -> Result<Option<Vec<String>>, String> {
    const SCRIPT: &str = r#"
const { pathToFileURL } = await import("node:url");
const [file, name] = process.argv.slice(1);
const plugin = (await import(pathToFileURL(file).href))[name];
if (!plugin || typeof plugin !== "object") {
  console.error(`${file} exports no \`${name}\`: export const ${name} = define...({ ... })`);
  process.exit(3);
}
process.stdout.write(JSON.stringify(plugin.signals ?? null));
"#;
    let main = project.dir.join(&project.main);
    let out = Command::new(&node.node)
        .args(["--input-type=module", "--eval", SCRIPT])
        .arg(&main)
        .arg(project.export())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", node.node.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{}: its module does not load in node ({}); see the error above",
            main.display(),
            out.status
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{}: `{}.signals` is not a list of strings: {e}",
            main.display(),
            project.export()
        )
    })
}

/// The world the component is built against: the plugin's interface and
/// the imports it may use, nothing else.
fn world_wit(project: &Project) -> String {
    let version = &project.wit_version;
    let mut imports = vec!["log".to_string()];
    imports.extend(project.interfaces().map(str::to_string));
    let export = match project.world {
        WorldArg::Worker => "block-worker",
        WorldArg::ActionHandler => "action-interpreter",
    };
    let mut wit = format!(
        "// Generated by `wfhost plugin build`: the world this plugin is built against.\n\
         package wfhost-build:plugin;\n\nworld {} {{\n",
        project.world.name()
    );
    for import in imports {
        wit.push_str(&format!("  import wfhost:plugin/{import}@{version};\n"));
    }
    wit.push_str(&format!("  export wfhost:plugin/{export}@{version};\n}}\n"));
    wit
}

/// The component's entry: the host interfaces connected to the SDK, the
/// plugin's module re-exported.
fn entry_js(project: &Project) -> String {
    let version = &project.wit_version;
    // The entry is in target/wfhost/js/: three levels below the project.
    let up = "../../..";
    let mut js = String::from("// Generated by `wfhost plugin build`: the component's entry.\n");
    js.push_str(&format!(
        "import {{ log }} from \"wfhost:plugin/log@{version}\";\n"
    ));
    for cap in project.interfaces() {
        js.push_str(&format!(
            "import * as {cap} from \"wfhost:plugin/{cap}@{version}\";\n"
        ));
    }
    js.push_str(&format!(
        "import {{ connectHost }} from \"{up}/{SDK_DIR}/host.js\";\n"
    ));
    let connected: Vec<&str> = std::iter::once("log").chain(project.interfaces()).collect();
    js.push_str(&format!("connectHost({{ {} }});\n", connected.join(", ")));
    js.push_str(&format!(
        "export {{ {} }} from \"{up}/{}\";\n",
        project.export(),
        project.main
    ));
    js
}

/// Write the entry and the world into the build directory and run
/// componentize-js; returns the component it wrote.
fn componentize(
    node: &toolchain::Node,
    tools: &toolchain::Toolchain,
    project: &Project,
) -> Result<PathBuf, String> {
    let build = project.build_dir();
    let _ = std::fs::remove_dir_all(&build);
    let deps = build.join("wit/deps/wfhost-plugin");
    std::fs::create_dir_all(&deps).map_err(|e| format!("{}: {e}", deps.display()))?;
    let wit = project.dir.join(SDK_DIR).join("wit/plugin.wit");
    std::fs::copy(&wit, deps.join("plugin.wit")).map_err(|e| format!("{}: {e}", wit.display()))?;
    write_file(&build.join("wit/world.wit"), &world_wit(project))?;
    write_file(&build.join("entry.js"), &entry_js(project))?;
    let out = build.join("component.wasm");
    let mut cmd = Command::new(&node.node);
    // Run in the project: componentize-js reads the modules below its
    // working directory, and the entry imports the project's files.
    cmd.current_dir(&project.dir)
        .arg(tools.componentize_js())
        .arg(format!("{BUILD_DIR}/entry.js"))
        .args(["--wit", &format!("{BUILD_DIR}/wit")])
        .args(["--world-name", project.world.name()])
        // `fetch` (wasi:http) only for a plugin that lists `http`: a
        // component importing it is refused without that grant.
        .arg("--disable")
        .args(project.disabled_features())
        .arg("--out")
        .arg(format!("{BUILD_DIR}/component.wasm"))
        .stdout(std::io::stderr());
    eprintln!(
        "note: componentize-js {COMPONENTIZE_JS_VERSION}: {}",
        toolchain::shown(&cmd)
    );
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", node.node.display()))?;
    if !status.success() || !out.is_file() {
        return Err(format!(
            "componentize-js failed to build {} ({status}); see its errors above",
            project.dir.join(&project.main).display()
        ));
    }
    Ok(out)
}

/// The component is what the host will admit for this project: its world,
/// and exactly the capabilities wfhost-plugin.toml lists (no network, no
/// interface the host does not offer), so that a toolchain that imports
/// more than it was asked to is caught here rather than at a run.
fn check_component(path: &Path, bytes: &[u8], project: &Project) -> Result<(), String> {
    let info = wfhost_distribution::component::inspect(bytes)
        .map_err(|e| format!("{} (built by componentize-js) {e}", path.display()))?;
    let mut listed = project.capabilities.clone();
    listed.sort();
    if info.world != project.world.name() || info.capabilities != listed {
        return Err(format!(
            "{}: componentize-js built a component of world {} needing capabilities [{}]; the \
             project is of world {} with capabilities [{}]",
            path.display(),
            info.world,
            info.capabilities.join(", "),
            project.world.name(),
            listed.join(", ")
        ));
    }
    Ok(())
}

/// Append a `wfhost:signals` custom section (one signal a line), as the
/// Rust SDK's `declare_signals!` does; the host reads it without running
/// the plugin.
fn append_signals(component: &mut Vec<u8>, signals: &[String]) {
    let name = wfhost_distribution::component::SIGNALS_SECTION.as_bytes();
    let data: String = signals.iter().map(|s| format!("{s}\n")).collect();
    let mut body = leb128(name.len());
    body.extend_from_slice(name);
    body.extend_from_slice(data.as_bytes());
    component.push(0); // a custom section
    component.extend(leb128(body.len()));
    component.extend(body);
}

fn leb128(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn write_file(path: &Path, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))
}

/// Write `bytes` to `to` through a temporary file beside it: a reader sees
/// the old component or the new one, never a part.
fn write_atomically(to: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut staged =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::io::Write::write_all(&mut staged, bytes).map_err(|e| format!("{}: {e}", to.display()))?;
    // A temporary file is private (0600); a build output is not.
    let readable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644);
    std::fs::set_permissions(staged.path(), readable)
        .map_err(|e| format!("{}: {e}", to.display()))?;
    staged
        .persist(to)
        .map_err(|e| format!("{}: {}", to.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests;
