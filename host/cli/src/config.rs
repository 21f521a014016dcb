//! `wfhost config`: the defaults in effect here — each key of
//! `wfhost.toml` (the project's) and the user's configuration file, its
//! value and where it comes from. The files themselves are read by
//! `wfhost_app::config` and applied at start ([`apply`]).

use clap::Args;
use serde::Serialize;
use wfhost_app::config::{Config, Source};

use crate::{exit, report_error};

#[derive(Args)]
pub struct ConfigArgs {
    /// Print JSON: one object per key (`key`, `env`, `value`, `source`).
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Line {
    key: &'static str,
    env: &'static str,
    /// Null: the built-in default.
    value: Option<String>,
    /// `environment`, `project`, `user` or `built-in`.
    source: &'static str,
    /// The file, for `project` and `user`.
    file: Option<String>,
    meaning: &'static str,
    /// The built-in value, in words.
    default: &'static str,
}

pub fn config(args: ConfigArgs) -> u8 {
    let cwd = std::env::current_dir().unwrap_or_default();
    // `apply` put the files' values in the environment: read what the
    // environment held before.
    let config = match Config::load(&cwd) {
        Ok(c) => c,
        Err(e) => {
            report_error(&e.message);
            return exit::BAD_INPUT;
        }
    };
    let lines: Vec<Line> = config
        .settings(original_env)
        .into_iter()
        .map(|s| {
            let (source, file) = match &s.source {
                Source::Environment => ("environment", None),
                Source::Project(p) => ("project", Some(p.display().to_string())),
                Source::User(p) => ("user", Some(p.display().to_string())),
                Source::BuiltIn => ("built-in", None),
            };
            Line {
                key: s.key.name,
                env: s.key.env,
                value: s.value,
                source,
                file,
                meaning: s.key.meaning,
                default: s.key.default,
            }
        })
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&lines).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    println!("{:<20} {:<40} FROM", "KEY", "VALUE");
    for l in &lines {
        let value = l.value.clone().unwrap_or_else(|| l.default.to_string());
        let from = match (&l.file, l.source) {
            (Some(file), source) => format!("{source} ({file})"),
            (None, "environment") => format!("environment ({})", l.env),
            (None, source) => source.to_string(),
        };
        println!(
            "{:<20} {:<40} {from}",
            l.key,
            wfhost_core::text::escape(&value)
        );
    }
    exit::SUCCESS
}

/// The variables the configuration files set at start, so that `config`
/// tells them from the environment's own.
static APPLIED: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();

fn original_env(name: &str) -> Option<String> {
    let applied = APPLIED.get().is_some_and(|a| a.contains(&name));
    (!applied).then(|| std::env::var(name).ok()).flatten()
}

/// Put the values the configuration files give in the environment, where
/// the environment has none: every command then reads them as it reads
/// its variables (a flag still wins). A bad file stops the command with
/// the reason, except `wfhost config`, which shows it.
pub fn apply(command: Option<&str>) -> Result<(), String> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let config = match Config::load(&cwd) {
        Ok(c) => c,
        Err(_) if command == Some("config") => return Ok(()),
        Err(e) => return Err(e.message),
    };
    let mut applied = Vec::new();
    for (name, value) in config.to_apply() {
        // SAFETY: called first thing in `main`, before any thread exists.
        unsafe { std::env::set_var(name, value) };
        applied.push(name);
    }
    let _ = APPLIED.set(applied);
    Ok(())
}
