//! `wfhost plugin call`: one block of a worker (or one action of an action
//! handler) run by the real runtime, without a workflow or a run store:
//! the same loading, admission, sandbox and limits as `wfhost run`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use wfhost_core::run::engine::{BlockRequest, BlockResult, RunView};
use wfhost_core::run::payload::{BlockContext, ContextSegment, WorkerOutput};
use wfhost_core::text::escape;
use wfhost_runtime::admission::World;
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::{PluginSet, WasmRuntime};

use crate::{exit, report_error};

/// Run one block with a plugin component.
#[derive(clap::Args)]
pub struct CallArgs {
    /// The plugin component (`.wasm`); default: the `component` of the
    /// `wfhost-plugin.toml` in this directory or the nearest one above it
    /// (in a plugin's crate, what `wfhost plugin build` made).
    pub plugin: Option<PathBuf>,
    /// The block's `config`, JSON (default: none).
    #[arg(long, value_name = "JSON", default_value = "null")]
    pub block_config: String,
    /// The payload the block receives: a JSON array of segments
    /// `{"id", "type", "content"}` (default: empty).
    #[arg(long, value_name = "JSON", default_value = "[]")]
    pub payload: String,
    /// The workspace the block sees at /workspace (default: a fresh
    /// temporary directory, removed afterwards).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Grant the plugin a capability (exec, container, slurm, agent,
    /// http); repeat for more.
    #[arg(long = "grant", value_name = "CAP")]
    pub grants: Vec<String>,
    /// With `--grant http`: a host it may reach, `host[:port]` (https) or
    /// `http://host[:port]`; repeat for more.
    #[arg(long = "http-allow", value_name = "HOST")]
    pub http_allow: Vec<String>,
    /// With `--grant http`: a secret the allowed hosts may receive (its
    /// `${secret.NAME}` placeholder filled in); repeat for more.
    #[arg(long = "http-secret", value_name = "NAME")]
    pub http_secrets: Vec<String>,
    /// Call an action handler with this action string (e.g. `JUMP:next`)
    /// instead of running a worker.
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
    /// The signal the action handler sees (with --action).
    #[arg(
        long,
        value_name = "SIGNAL",
        default_value = "SIGNAL:SUCCESS",
        requires = "action"
    )]
    pub signal: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The node and block the call runs as.
const NODE: &str = "main";
const BLOCK: &str = "call";

pub fn call(args: CallArgs) -> u8 {
    match call_plugin(&args) {
        Ok(code) => code,
        Err(message) => {
            report_error(message);
            exit::BAD_INPUT
        }
    }
}

/// The component to call: the one given, else the plugin crate's (its
/// `wfhost-plugin.toml`'s `component`), which must be built.
fn component(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let Some(manifest) = cwd
        .ancestors()
        .map(|d| d.join(wfhost_distribution::manifest::SOURCE_FILE))
        .find(|p| p.is_file())
    else {
        return Err(format!(
            "no plugin given, and no {} here or above: pass the component (`wfhost plugin call PLUGIN.wasm`)",
            wfhost_distribution::manifest::SOURCE_FILE
        ));
    };
    let source = wfhost_distribution::manifest::ManifestSource::read(&manifest)?;
    let path = manifest
        .parent()
        .unwrap_or(Path::new("."))
        .join(&source.component);
    if !path.is_file() {
        return Err(format!(
            "{}: its component {} is not built yet: run `wfhost plugin build`",
            manifest.display(),
            path.display()
        ));
    }
    eprintln!("plugin: {} (from {})", path.display(), manifest.display());
    Ok(path)
}

fn call_plugin(args: &CallArgs) -> Result<u8, String> {
    let plugin = component(args.plugin.as_deref())?;
    let world = if args.action.is_some() {
        World::ActionHandler
    } else {
        World::Worker
    };
    let config = parse_json("--block-config", &args.block_config)?;
    let payload = parse_payload(&args.payload)?;
    let scratch;
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => {
            scratch = tempfile::Builder::new()
                .prefix("wfhost-plugin-call-")
                .tempdir()
                .map_err(|e| format!("cannot create a temporary workspace: {e}"))?;
            if world == World::Worker {
                eprintln!(
                    "workspace: {} (a fresh temporary directory, removed afterwards; pass --workspace to keep what the block writes)",
                    scratch.path().display()
                );
            }
            scratch.path().to_path_buf()
        }
    };
    if args.workspace.is_some() {
        check_workspace(&workspace)?;
    }
    let runtime = crate::start_runtime(&Default::default(), wfhost_exec::Executor::default(), None)
        .map_err(|e| e.message)?;
    let set = load(runtime, &plugin, args, world, &workspace)?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let code = match &args.action {
        Some(action) => {
            let result = tokio.block_on(set.interpret_action("plugin", action, &view(args)));
            show_command(action, result, args.json)
        }
        None => {
            let result = tokio.block_on(set.run_worker(request(config, payload)));
            show_block(result, args.json)
        }
    };
    tokio.block_on(set.shutdown());
    Ok(code)
}

fn parse_json(option: &str, text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{option} is not valid JSON: {e}"))
}

fn parse_payload(text: &str) -> Result<Vec<ContextSegment>, String> {
    serde_json::from_str(text).map_err(|e| {
        format!("--payload is not a JSON array of segments {{\"id\", \"type\", \"content\"}}: {e}")
    })
}

/// The workspace must be a directory that holds neither the home nor the
/// compiled cache (like `wfhost run`'s).
fn check_workspace(workspace: &Path) -> Result<(), String> {
    let home = wfhost_store::resolve_home(None).map_err(|e| e.to_string())?;
    wfhost_app::workspace::Workspace::open(workspace, &home, &Default::default())
        .map(drop)
        .map_err(|e| e.message)
}

/// The `http` grant of `--http-allow` and `--http-secret`, checked like a
/// workflow's.
fn http_grant(args: &CallArgs) -> Result<Option<wfhost_core::policy::http::HttpGrant>, String> {
    use wfhost_core::policy::http::{AllowEntry, HttpGrant};
    if args.http_allow.is_empty() {
        return Ok(None);
    }
    let allow = args
        .http_allow
        .iter()
        .map(|entry| {
            let (scheme, host) = match entry.strip_prefix("http://") {
                Some(host) => (Some("http".to_string()), host),
                None => (None, entry.strip_prefix("https://").unwrap_or(entry)),
            };
            AllowEntry {
                host: host.to_string(),
                scheme,
                methods: Vec::new(),
                secrets: args.http_secrets.clone(),
            }
        })
        .collect();
    let grant = HttpGrant {
        allow,
        ..HttpGrant::default()
    };
    match grant.check().into_iter().next() {
        Some((pointer, message)) => Err(format!("--http-allow ({pointer}): {message}")),
        None => Ok(Some(grant)),
    }
}

fn load(
    runtime: Arc<WasmRuntime>,
    plugin: &Path,
    args: &CallArgs,
    world: World,
    workspace: &Path,
) -> Result<PluginSet, String> {
    let request = PluginRequest {
        name: "plugin".into(),
        source: PluginSource::File(plugin.to_path_buf()),
        world,
        grants: args.grants.clone(),
        http: http_grant(args)?,
    };
    PluginSet::load(runtime, &[request], workspace).map_err(|e| {
        let hint = match world {
            World::Worker if e.message.contains("is an action-handler component") => {
                "; call an action handler with --action ACTION"
            }
            World::ActionHandler if e.message.contains("is a worker component") => {
                "; call a worker without --action"
            }
            _ => "",
        };
        format!("{}: {}{hint}", e.origin, e.message)
    })
}

fn request(config: Value, payload: Vec<ContextSegment>) -> BlockRequest {
    // A run id like any run's: the plugin sees it, and the host names the
    // block's bundle folders after it.
    let execution_id = wfhost_store::new_run_id(wfhost_store::time::now_ms()).to_string();
    BlockRequest {
        worker: "plugin".into(),
        context: BlockContext {
            workflow_id: "plugin-call".into(),
            execution_id,
            node_id: NODE.into(),
            block_id: BLOCK.into(),
            step_index: 0,
            attempt: 1,
            previous_block_id: None,
            static_memory: json!({}),
            inherited_memory: json!({}),
            artifacts: Default::default(),
            config,
            inputs: json!({}),
            file_restrictions: None,
            system_prompt: String::new(),
            assembled_context: String::new(),
        },
        payload,
        timeout: None,
        lane: None,
    }
}

fn view(args: &CallArgs) -> RunView {
    RunView {
        workflow_id: "plugin-call".into(),
        execution_id: "call".into(),
        node_id: NODE.into(),
        block_id: BLOCK.into(),
        signal: args.signal.clone(),
        step_index: 0,
        return_stack: Vec::new(),
    }
}

/// Print a block's result; the exit code is 0 for an output, 1 for a
/// failed block.
fn show_block(result: BlockResult, as_json: bool) -> u8 {
    if as_json {
        let report = match &result.outcome {
            Ok(output) => json!({ "ok": true, "output": output, "log": result.log }),
            Err(f) => json!({ "ok": false, "error": f.message, "log": result.log }),
        };
        println!("{report}");
    } else {
        print_log(&result.log);
        match &result.outcome {
            Ok(output) => print_output(output),
            Err(f) => report_error(format!("{NODE}.{BLOCK} failed: {}", escape(&f.message))),
        }
    }
    if result.outcome.is_ok() {
        exit::SUCCESS
    } else {
        exit::RUN_FAILED
    }
}

fn print_log(log: &[String]) {
    if log.is_empty() {
        return;
    }
    println!("log:");
    for line in log {
        println!("  {}", escape(line));
    }
}

fn print_output(output: &WorkerOutput) {
    println!("signal: {}", escape(&output.signal));
    println!(
        "payload: {}",
        wfhost_core::text::count(output.payload.len() as u64, "segment")
    );
    for s in &output.payload {
        println!(
            "  [{}] {}: {}",
            escape(&s.kind),
            escape(&s.id),
            escape(&s.content)
        );
    }
    if let Some(structured) = &output.structured_output {
        println!("structured output: {}", escape(structured));
    }
    let stats = output.statistics;
    println!(
        "statistics: {}, {} written",
        wfhost_core::text::count(stats.tokens_used, "token"),
        wfhost_core::text::count(stats.lines_written, "line")
    );
}

fn show_command(
    action: &str,
    result: Result<wfhost_core::command::EngineCommand, String>,
    as_json: bool,
) -> u8 {
    let code = if result.is_ok() {
        exit::SUCCESS
    } else {
        exit::RUN_FAILED
    };
    match (result, as_json) {
        (Ok(command), true) => {
            println!(
                "{}",
                json!({"ok": true, "action": action, "command": command.to_string()})
            )
        }
        (Err(e), true) => println!("{}", json!({"ok": false, "action": action, "error": e})),
        (Ok(command), false) => println!("{}: {}", escape(action), escape(&command.to_string())),
        (Err(e), false) => report_error(format!("{}: {}", escape(action), escape(&e))),
    }
    code
}
