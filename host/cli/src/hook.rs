//! `wfhost hook`: webhook triggers — named endpoints of `wfhost serve`
//! (`POST /v1/hooks/NAME`) that start a run from a signed delivery.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use wfhost_store::hooks::HookSpec;
use wfhost_store::time::{format_utc, now_ms};

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct HookArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Add a hook: a delivery to `POST /v1/hooks/NAME` starts a run of
    /// WORKFLOW.
    Add(AddArgs),
    /// List the hooks.
    #[command(visible_alias = "list")]
    Ls {
        /// Print JSON (`{"hooks": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Show one hook and its last deliveries.
    Show {
        name: String,
        /// Print JSON (`{"hook": ..., "deliveries": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Remove a hook (its runs stay).
    Rm { name: String },
}

#[derive(Args)]
struct AddArgs {
    /// The hook's name (its URL: `/v1/hooks/NAME`).
    name: String,
    /// The workflow file to run (none with --answers-gates).
    workflow: Option<PathBuf>,
    /// A delivery answers a gate instead of starting a run: its `run_id`,
    /// `gate` and `answer` (at those pointers, or where --map says).
    #[arg(long)]
    answers_gates: bool,
    /// How deliveries are signed: `github` (X-Hub-Signature-256, the
    /// default), `sha256` (X-Wfhost-Signature over the timestamp and the
    /// body) or `unsigned` (anyone who can reach the server starts runs).
    #[arg(long, default_value = "github")]
    format: String,
    /// The home secret that signs deliveries (`wfhost secret set NAME`).
    #[arg(long)]
    secret: Option<String>,
    /// An input from the delivery's JSON: NAME=/json/pointer (repeatable).
    #[arg(long = "map", value_name = "NAME=POINTER")]
    maps: Vec<String>,
    /// An input every run gets, NAME=VALUE (JSON, else text; repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    sets: Vec<String>,
    /// The runs' workspace (default: the current directory); `{run}`
    /// stands for each run's id.
    #[arg(long, short)]
    workspace: Option<PathBuf>,
    /// How far a `sha256` delivery's timestamp may be from now, in
    /// seconds (default 300).
    #[arg(long)]
    window: Option<i64>,
}

pub fn hook(args: HookArgs, global: &Global) -> u8 {
    match args.action {
        Action::Add(add) => self::add(add, global),
        Action::Ls { json } => list(json, global),
        Action::Show { name, json } => show(&name, json, global),
        Action::Rm { name } => remove(&name, global),
    }
}

/// `NAME=VALUE` pairs as a map; `value` makes each value.
fn pairs(
    flag: &str,
    items: &[String],
    value: impl Fn(&str) -> serde_json::Value,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    for item in items {
        let Some((name, text)) = item.split_once('=') else {
            return Err(format!("--{flag} `{item}`: expected NAME=VALUE"));
        };
        out.insert(name.to_string(), value(text));
    }
    Ok(out)
}

fn add(args: AddArgs, global: &Global) -> u8 {
    let parsed = pairs("map", &args.maps, |p| serde_json::Value::String(p.into())).and_then(|m| {
        let sets = pairs("set", &args.sets, |t| {
            serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.into()))
        })?;
        Ok((m, sets))
    });
    let (mapping, inputs) = match parsed {
        Ok(p) => p,
        Err(message) => {
            report_error(message);
            return exit::BAD_INPUT;
        }
    };
    let workflow = match (&args.workflow, args.answers_gates) {
        (Some(w), false) => w.clone(),
        (None, true) => PathBuf::new(),
        (None, false) => {
            report_error(format!(
                "hook {}: give the WORKFLOW its deliveries start (or --answers-gates)",
                args.name
            ));
            return exit::BAD_INPUT;
        }
        (Some(_), true) => {
            report_error(format!(
                "hook {}: a hook that answers gates starts no workflow",
                args.name
            ));
            return exit::BAD_INPUT;
        }
    };
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let spec = HookSpec {
        name: args.name.clone(),
        workflow: absolute(&workflow),
        workspace: absolute(
            args.workspace
                .as_deref()
                .unwrap_or(std::path::Path::new(".")),
        ),
        format: Some(args.format.clone()),
        secret: args.secret.clone(),
        mapping,
        inputs,
        window_s: args.window,
        answers_gates: args.answers_gates,
    };
    let hook = match spec.define(now_ms()) {
        Ok(h) => h,
        Err((field, why)) => {
            report_error(format!("hook {}: {field}: {why}", args.name));
            return exit::BAD_INPUT;
        }
    };
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    if let Some(secret) = &hook.secret
        && let Ok(home) = global.home()
        && matches!(
            wfhost_store::secrets::HomeSecrets::new(&home).read(secret),
            Ok(None)
        )
    {
        eprintln!(
            "warning: the secret `{secret}` is not set in this home: deliveries are refused until `wfhost secret set {secret}`"
        );
    }
    if let Err(e) = store.add_hook(&hook) {
        return store_error(e);
    }
    let does = match hook.action.as_str() {
        "answer" => "answers the gate its delivery names".to_string(),
        _ => format!("starts {}", hook.workflow),
    };
    println!(
        "hook {} added: POST /v1/hooks/{} on `wfhost serve` {does} ({} deliveries)",
        hook.name, hook.name, hook.format
    );
    exit::SUCCESS
}

fn list(json: bool, global: &Global) -> u8 {
    let store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let hooks = match store.hooks() {
        Ok(h) => h,
        Err(e) => return store_error(e),
    };
    if json {
        let out = serde_json::json!({ "hooks": hooks });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    if hooks.is_empty() {
        println!("no hooks: `wfhost hook add NAME WORKFLOW --secret SECRET` adds one");
        return exit::SUCCESS;
    }
    println!("{:<20} {:<9} {:<16} WORKFLOW", "NAME", "FORMAT", "SECRET");
    for h in &hooks {
        println!(
            "{:<20} {:<9} {:<16} {}",
            h.name,
            h.format,
            h.secret.as_deref().unwrap_or("-"),
            if h.action == "answer" {
                "(answers gates)"
            } else {
                h.workflow.as_str()
            }
        );
    }
    exit::SUCCESS
}

fn show(name: &str, json: bool, global: &Global) -> u8 {
    let store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let (hook, deliveries) = match store
        .hook(name)
        .and_then(|h| Ok((h, store.deliveries(name, 20)?)))
    {
        Ok((Some(h), d)) => (h, d),
        Ok((None, _)) => return unknown(name),
        Err(e) => return store_error(e),
    };
    if json {
        let out = serde_json::json!({ "hook": hook, "deliveries": deliveries });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    println!("hook {}  (POST /v1/hooks/{})", hook.name, hook.name);
    println!("  workflow    {}", hook.workflow);
    println!("  workspace   {}", hook.workspace);
    println!(
        "  format      {}{}",
        hook.format,
        hook.secret
            .as_deref()
            .map(|s| format!(", secret {s}"))
            .unwrap_or_default()
    );
    for (input, pointer) in &hook.mapping {
        println!("  map         {input} = {pointer}");
    }
    println!("deliveries (newest first)");
    for d in &deliveries {
        println!(
            "  {}  {}  {} {}",
            format_utc(d.at_ms),
            d.delivery,
            d.state,
            d.run_id.as_deref().unwrap_or("")
        );
    }
    exit::SUCCESS
}

fn unknown(name: &str) -> u8 {
    report_error(format!(
        "no hook named `{name}`; `wfhost hook ls` lists them"
    ));
    exit::BAD_INPUT
}

fn remove(name: &str, global: &Global) -> u8 {
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    match store.remove_hook(name) {
        Ok(true) => {
            println!("hook {name} removed (its runs stay)");
            exit::SUCCESS
        }
        Ok(false) => unknown(name),
        Err(e) => store_error(e),
    }
}
