//! `wfhost notify`: where notifications go — outgoing webhooks when a run
//! ends, a gate opens or a timer fires, delivered by `wfhost serve` from a
//! durable outbox.

use clap::{Args, Subcommand};
use wfhost_store::notify::{EVENTS, Target};
use wfhost_store::time::now_ms;

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct NotifyArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Add a target: URL gets a POST for each event it wants.
    Add {
        /// The target's name.
        name: String,
        /// Where to POST (http or https).
        url: String,
        /// The events: run.succeeded, run.failed, run.cancelled,
        /// gate.opened, timer.fired (comma-separated; default: all).
        #[arg(long, value_delimiter = ',')]
        on: Vec<String>,
        /// The home secret that signs each delivery (X-Wfhost-Signature).
        #[arg(long)]
        secret: Option<String>,
        /// `json` (the notification as is, the default) or `slack` (a
        /// Slack incoming webhook's `{"text": ...}`).
        #[arg(long, default_value = "json")]
        format: String,
        /// Only runs of this workflow id.
        #[arg(long)]
        workflow: Option<String>,
    },
    /// List the targets.
    #[command(visible_alias = "list")]
    Ls {
        /// Print JSON (`{"targets": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Remove a target (its undelivered notifications go too).
    Rm { name: String },
}

pub fn notify(args: NotifyArgs, global: &Global) -> u8 {
    match args.action {
        Action::Add {
            name,
            url,
            on,
            secret,
            format,
            workflow,
        } => {
            let events = if on.is_empty() {
                EVENTS.iter().map(|e| e.to_string()).collect()
            } else {
                on
            };
            let target = Target {
                name,
                url,
                secret,
                format,
                events,
                workflow,
                created_at_ms: now_ms(),
            };
            add(target, global)
        }
        Action::Ls { json } => list(json, global),
        Action::Rm { name } => remove(&name, global),
    }
}

/// What is wrong with `t`, if anything.
fn problem(t: &Target) -> Option<String> {
    if let Err(e) = wfhost_core::schedule::check_name(&t.name) {
        return Some(e.replace("schedule name", "target name"));
    }
    if !(t.url.starts_with("http://") || t.url.starts_with("https://")) || t.url.len() > 2048 {
        return Some(format!("`{}` is not an http or https URL", t.url));
    }
    if let Some(e) = t.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
        return Some(format!("`{e}` is not an event: {}", EVENTS.join(", ")));
    }
    if !matches!(t.format.as_str(), "json" | "slack") {
        return Some(format!("`{}` is not a format: json or slack", t.format));
    }
    if let Some(secret) = &t.secret
        && let Err(e) = wfhost_core::policy::secrets::check_name(secret)
    {
        return Some(e);
    }
    None
}

fn add(target: Target, global: &Global) -> u8 {
    if let Some(why) = problem(&target) {
        report_error(format!("notify {}: {why}", target.name));
        return exit::BAD_INPUT;
    }
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    if let Err(e) = store.add_notify_target(&target) {
        return store_error(e);
    }
    println!(
        "notifications of {} go to {} ({}); a running `wfhost serve` on this home delivers them",
        target.events.join(", "),
        target.url,
        target.format
    );
    exit::SUCCESS
}

fn list(json: bool, global: &Global) -> u8 {
    let store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let targets = match store.notify_targets() {
        Ok(t) => t,
        Err(e) => return store_error(e),
    };
    if json {
        let out = serde_json::json!({ "targets": targets });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    if targets.is_empty() {
        println!("no notification targets: `wfhost notify add NAME URL` adds one");
    }
    for t in &targets {
        println!(
            "{}  {}  {} ({}){}",
            t.name,
            t.url,
            t.events.join(","),
            t.format,
            t.workflow
                .as_deref()
                .map(|w| format!(", workflow {w}"))
                .unwrap_or_default()
        );
    }
    exit::SUCCESS
}

fn remove(name: &str, global: &Global) -> u8 {
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    match store.remove_notify_target(name) {
        Ok(true) => {
            println!("notification target {name} removed");
            exit::SUCCESS
        }
        Ok(false) => {
            report_error(format!("no notification target named `{name}`"));
            exit::BAD_INPUT
        }
        Err(e) => store_error(e),
    }
}
